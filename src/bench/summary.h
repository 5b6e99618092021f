// A run's summary.json (what bench-report reads): built from the run's event log,
// so it can be (re)computed for any run directory, finished or not.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/metrics.h"

namespace mk::bench {

struct SummaryInfo {
  std::string problem_id;    ///< the suite id ([level-]name-hash8), or the problem name for a lone run
  std::string problem_name;
  std::string method;
  /// Overrides what the log says: "failed" with an error (setup failed, an
  /// exception, the run directory could not be written), or "interrupted".
  std::string status;
  std::string error;
};

/// The outcome of a run from its events:
///  - status: run_end's "ok"/"no_correct" -> finished, "interrupted" -> interrupted,
///    "error" -> failed; no run_end -> interrupted (the process died mid-run);
///  - correct/speedups/uses_pytorch from the last "best" event and run_end's solution;
///  - calls/tokens: run_end's accounting when present, else the llm_call events;
///  - timeline: the best-so-far after every outer iteration and every new best,
///    at the cumulative LLM calls and tokens of that moment.
/// A run that did not finish is never counted correct.
Outcome outcome_from_events(const std::vector<nlohmann::json>& events, const SummaryInfo& info);

}  // namespace mk::bench
