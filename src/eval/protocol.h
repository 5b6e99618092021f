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
/// Every text in it is scrubbed of the known secrets (redacted()): it holds
/// what a candidate printed or raised, on its way to verdicts, prompts, logs
/// and caches.
Verdict parse_eval_result(const nlohmann::json& msg);
/// parse_eval_result without the scrubbing.
Verdict parse_eval_answer(const nlohmann::json& msg);
/// v with redact_secrets applied to its message, kind, reasons and every string of raw.
Verdict redacted(Verdict v);

/// A crashed result made by the pool itself (the worker gave no verdict).
Verdict pool_failure(VerdictStatus status, std::string kind, std::string message);

}  // namespace mk::eval
