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
//   # FAKE-E2E: seed42_only                  anywhere in a package: incorrect unless the seed is 42
//   # FAKE: invalid-decomposition            in a decomposition: verification fails
//
// A package (kernel = .../solution/decomposed_solution.py) is judged from its
// subkernel_implementations/*.py: correct when every subkernel is, with
// runtime the sum of the subkernels' and speedup sum(base) / sum(runtime).
// A PyTorch subkernel (Swap: `class ModelNew(Model)`, no marker) runs at base
// ms and passes only under allow_pytorch.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "eval/evaluator.h"

namespace mk::testing {

class FakeEvaluator : public eval::Evaluator {
 public:
  std::future<eval::EvalResult> submit(eval::EvalRequest req) override;
  std::future<eval::DecompositionResult> verify_decomposition(eval::DecompositionRequest req) override;
  nlohmann::json hardware_info() override;

  /// Verdict for one source (single file), from its marker.
  static eval::EvalResult judge_source(const std::string& source, bool allow_pytorch);

  std::vector<eval::EvalRequest> requests() const;
  /// As on a machine without torch.compile (or past its deadline): no such
  /// baseline, so speedup_compile is 0 in every verdict; eager stays.
  bool no_compile_baseline = false;
  std::vector<eval::DecompositionRequest> decomposition_requests() const;
  int e2e_count() const;

 private:
  mutable std::mutex mu_;
  std::vector<eval::EvalRequest> requests_;
  std::vector<eval::DecompositionRequest> decomp_;
  std::map<std::string, int> seen_;  ///< evaluations per kernel path
};

}  // namespace mk::testing
