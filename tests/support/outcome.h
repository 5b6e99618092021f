// A run's Outcome (summary.json) for tests of summary.json and of bench's
// metrics, which read the same record.
#pragma once

#include <cstdint>
#include <string>

#include "run/summary_json.h"

namespace mk::testing {

inline run::Outcome outcome(const std::string& pid, bool correct, double speedup_compile, double speedup_eager,
                            int64_t tokens, const std::string& status = "finished") {
  run::Outcome o;
  o.problem_id = pid;
  o.method = "m";
  o.status = status;
  o.correct = correct;
  // 0 stands for "not measured": unknown is nullopt, never 0.
  if (correct && speedup_compile > 0) o.speedup_compile = speedup_compile;
  if (correct && speedup_eager > 0) o.speedup_eager = speedup_eager;
  o.tokens = tokens;
  return o;
}

}  // namespace mk::testing
