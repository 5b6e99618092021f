// An Evaluator for tests: verdicts come from markers in the candidate source,
// so the search can be driven in milliseconds without a GPU.
//
//   # FAKE: correct speedup=1.3 [base=2.0]   correct; torch.compile takes base ms (default 1),
//                                            the kernel base/speedup ms
//   # FAKE: incorrect | compile_error | runtime_error | cheating | timeout | crashed | no_verdict
//   # FAKE: no_verdict_then_correct          no verdict the first time this file is evaluated, then correct
//   # FAKE-E2E: incorrect                    anywhere in a package: the composition fails
//   # FAKE-E2E: no_verdict                   anywhere in a package: the composition gets no verdict
//   # FAKE-E2E: runtime_error                anywhere in a package: the composition raises
//   # FAKE-E2E: raises_here                  in a subkernel: the composition raises, its traceback inside this file
//   # FAKE-E2E: raises_at_call               in a subkernel: the composition raises at the top level's line that builds it
//   # FAKE-E2E: seed42_only                  anywhere in a package: incorrect unless the seed is 42
//   # FAKE-E2E: slower_after_seed42=F        anywhere in a package: F times slower unless the seed is 42
//   # FAKE: invalid-decomposition            in a decomposition: verification fails
//   # FAKE: strided-input                    in a subproblem file: the top level passes it a transposed view
//
// A package (kernel = .../solution/decomposed_solution.py) is judged from its
// subkernel_implementations/*.py: correct when every subkernel is, with
// runtime the sum of the subkernels' and speedup sum(base) / sum(runtime).
// A PyTorch subkernel (Swap: `class ModelNew(Model)`, no marker) runs at base
// ms and passes only under allow_pytorch.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <tuple>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "eval/evaluator.h"

namespace mk::testing {

class FakeEvaluator : public eval::Evaluator {
 public:
  ~FakeEvaluator() override;
  std::future<eval::Verdict> submit(eval::EvalRequest req) override;
  /// Starts the problem's baseline measurement (with baseline_delay_s) on a thread of its own.
  void prefetch_baselines(const std::filesystem::path& problem, const eval::EvalOptions& options) override;
  std::future<eval::DecompositionResult> verify_decomposition(eval::DecompositionRequest req) override;
  nlohmann::json hardware_info() override;
  /// Appends "# PINNED by the fake pin_precision" to every file (as the worker writes each dot's
  /// precision in), and counts the calls.
  Result<eval::PinnedSources> pin_precision(const std::map<std::string, std::string>& files) override;
  int pin_calls() const;

  /// Verdict for one source (single file), from its marker.
  static eval::Verdict judge_source(const std::string& source, bool allow_pytorch);

  std::vector<eval::EvalRequest> requests() const;
  /// As on a machine without torch.compile (or past its deadline): no such
  /// baseline, so speedup_compile is 0 in every verdict; eager stays.
  bool no_compile_baseline = false;
  std::vector<eval::DecompositionRequest> decomposition_requests() const;
  int e2e_count() const;

  /// Time, for benchmarks and the critical-path tests (all off by default):
  /// every evaluation takes eval_delay_s; a problem's baselines (by its content, as the pool keys them)
  /// take baseline_delay_s, measured by its first evaluation (which then takes
  /// that much longer, as the pool's does) unless prefetch_baselines started
  /// them, in which case an evaluation that needs them waits for what is left.
  /// slots > 0 lets that many evaluations and baseline measurements run at
  /// once; the others wait for a slot, taken as the pool hands them out: the
  /// highest EvalRequest::priority first, in arrival order within one, and
  /// prefetched baselines only when no evaluation waits. Results then carry
  /// queued_s, eval_s (the baselines included) and baseline_s.
  double eval_delay_s = 0, baseline_delay_s = 0;
  int slots = 0;
  /// Slots in arrival order alone, as the pool handed them out before it
  /// honoured EvalRequest::priority (for side-by-side measurements).
  bool ignore_priority = false;
  /// Called first thing in submit, on the caller's thread (tests use it to
  /// see which evaluations overlap).
  std::function<void(const eval::EvalRequest&)> on_submit;
  /// Problems whose baselines were measured, in the order they started.
  std::vector<std::string> baselines_measured() const;
  /// How many of them an evaluation measured (not prefetch_baselines).
  int baselines_in_evals() const;

 private:
  mutable std::mutex mu_;
  std::vector<eval::EvalRequest> requests_;
  std::vector<eval::DecompositionRequest> decomp_;
  std::map<std::string, int> seen_;  ///< evaluations per kernel path
  int pins_ = 0;

  eval::Verdict judge(const eval::EvalRequest& req);
  bool timed() const { return eval_delay_s > 0 || baseline_delay_s > 0 || slots > 0; }
  /// Waits for a slot as a job of this priority (background: after every
  /// evaluation that waits).
  void take_slot(int priority, bool background = false);
  void give_slot();
  /// The problem's baselines: measured here (in the caller's slot) when
  /// nobody has started them, else waited for.
  void baselines(const std::string& problem);
  int in_evals_ = 0;
  std::condition_variable slot_cv_;
  int busy_ = 0;
  /// Who waits for a slot: (background, -priority, arrival), the least first.
  std::set<std::tuple<bool, int, uint64_t>> waiting_;
  uint64_t arrivals_ = 0;
  std::map<std::string, std::shared_future<void>> baselines_;
  std::vector<std::string> measured_;
  std::vector<std::future<void>> prefetch_;
};

}  // namespace mk::testing
