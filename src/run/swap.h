// `mkevolve swap`: one subkernel of a finished run's solution package
// replaced by a kernel file or by its subproblem's PyTorch reference, once
// the replacement passes its subproblem's check and the composed package
// passes end to end. The command line is cli/swap.cc's.
#pragma once

#include <filesystem>
#include <string>

#include "eval/evaluator.h"
#include "run/run_env.h"

namespace mk::run {

namespace fs = std::filesystem;

struct SwapRequest {
  fs::path dir;               ///< the run directory
  std::string subkernel;      ///< the subkernel (subproblem) to replace
  std::string with;           ///< a file with a ModelNew for that subproblem, or "pytorch"
  EnvFlags env;               ///< where the evaluator comes from
  eval::EvalOptions options;  ///< how the replacement and the package are evaluated
};
/// Verifies and installs the replacement (setup.pool builds the worker pool;
/// DIR/solution is untouched when anything fails), printing each check's
/// line. Returns the exit status: 0 swapped, 1 the replacement failed its
/// checks, 2 bad usage or input, 3 something missing on this machine.
int swap_in_directory(SwapRequest req, const EnvSetup& setup);

}  // namespace mk::run
