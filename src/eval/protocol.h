// The C++ half of worker protocol v1 (docs/ARCHITECTURE.md): request options
// out, eval results in (read as a Verdict, eval/verdict.h). Parsing never
// throws: anything malformed becomes a `crashed` result whose message says
// what was wrong with the worker's answer.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "eval/evaluator.h"

namespace mk::eval {

inline constexpr int kProtocolVersion = 1;

/// The "options" object of an eval request. `baselines` is always false: the
/// pool measures and caches baselines itself.
nlohmann::json options_to_json(const EvalOptions& o);

/// Converts a worker's final message (type "result" or "error") for an eval
/// request. Unknown statuses or missing fields give kCrashed with a message.
Verdict parse_eval_result(const nlohmann::json& msg);

/// A crashed result made by the pool itself (the worker gave no verdict).
Verdict pool_failure(Status status, std::string kind, std::string message);

}  // namespace mk::eval
