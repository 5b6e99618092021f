// Keeps credentials out of run directories: config.json is copied into every
// run and shared with reports, so anything that looks like a secret is dropped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/env.h"

namespace mk::rundir {

/// util/env.h's rule for keys that name a credential.
using mk::is_secret_key;

/// True for a string value that looks like a credential itself (sk-..., AKIA...,
/// ghp_..., a "Bearer ..." header) or contains a registered secret (util/env.h).
bool is_secret_value(std::string_view value);

/// A copy of j without secret keys or secret-looking string values, at any
/// depth. Each dropped item's dotted path ("llm.api_key") goes to *dropped.
nlohmann::json strip_secrets(const nlohmann::json& j, std::vector<std::string>* dropped);

}  // namespace mk::rundir
