// Wall-clock timestamps for the event log and the lock file.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace mk::rundir {

/// "2026-11-30T06:16:13.123Z" (UTC, milliseconds).
std::string iso8601_utc(std::chrono::system_clock::time_point t = std::chrono::system_clock::now());

/// Parses what iso8601_utc() writes (milliseconds optional); nullopt if malformed.
std::optional<std::chrono::system_clock::time_point> parse_iso8601_utc(std::string_view s);

}  // namespace mk::rundir
