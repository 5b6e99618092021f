// The paper's suite metrics (Table 1, Figures 4-6), computed from per-problem
// outcomes. Definitions follow KernelBench (see docs/BENCH.md):
//   correct  = share of problems whose final kernel is correct;
//   fast_p   = share of ALL problems whose final kernel is correct AND more than
//              p times as fast as the baseline (speedup > p; incorrect counts as 0);
//   geomean  = geometric mean of the speedup over the correct problems only
//              (those with a measured baseline; unknown is never 0).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run/summary_json.h"
#include "util/result.h"

namespace mk::bench {

struct MethodMetrics {
  std::string method;
  int problems = 0;
  double correct = 0;
  std::map<std::string, double> fast_compile;  ///< "0.5", "1", "2" -> share
  std::map<std::string, double> fast_eager;
  /// Over the correct problems with a measured baseline; nullopt when there
  /// are none (no correct kernel, or no torch.compile baseline on the machine).
  std::optional<double> geomean_compile;
  std::optional<double> geomean_eager;
  int no_compile_baseline = 0;  ///< correct problems without a torch.compile speedup (kept out of the geomean)
  int no_eager_baseline = 0;
  int test_mode = 0;            ///< runs in the worker's CPU test mode (their speedups mean nothing)
  int64_t total_tokens = 0;
  double mean_tokens = 0;
  int with_pytorch = 0;
  int failed_runs = 0;  ///< runs that ended in an error (counted as incorrect)
};

/// fast_p over all outcomes (incorrect counts as 0): KernelBench's strict '>'.
double fast_p(const std::vector<run::Outcome>& outcomes, double p, bool vs_eager);
MethodMetrics compute_metrics(const std::string& method, const std::vector<run::Outcome>& outcomes);

/// rate[i][j] = share of the problems run by both methods i and j on which i's
/// speedup vs torch.compile is strictly higher than j's (incorrect = 0).
struct WinRate {
  std::vector<std::string> methods;
  std::vector<std::vector<double>> rate;
  std::vector<std::vector<int>> shared;  ///< problems both methods ran
};
WinRate compute_win_rate(const std::map<std::string, std::vector<run::Outcome>>& by_method);

/// A point on a metric-vs-tokens curve: after `calls` LLM calls per problem, the
/// suite metric and the mean tokens spent so far (Figures 5-6).
struct CurvePoint {
  int64_t calls = 0;
  double mean_tokens = 0;
  double correct = 0;
  double fast_0_5 = 0, fast_1 = 0, fast_2 = 0;
};
/// Checkpoints every `step` calls up to the largest call count seen.
std::vector<CurvePoint> compute_curve(const std::vector<run::Outcome>& outcomes, int64_t step);

}  // namespace mk::bench
