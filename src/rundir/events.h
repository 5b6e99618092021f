// The run's records now live in records/events.h (mk::records).
#pragma once

#include "records/events.h"

namespace mk::rundir {
namespace events = ::mk::records;
}
