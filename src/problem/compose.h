// Composition: turning a topology plus one kernel per subproblem into the
// importable solution package (the paper's Appendix H, with relative imports):
//
//   solution/__init__.py
//   solution/decomposed_solution.py           ModelNew, the top level rewritten to
//                                             `from .subkernel_implementations.<n> import ModelNew as <Alias>`
//   solution/subkernel_implementations/<n>.py each a self-contained ModelNew
//   solution/subkernel_problems/<n>.py        the PyTorch reference of each subproblem
//   solution/manifest.json                    names, hashes, which subkernels are PyTorch
//
// The evaluator receives kernel = solution/decomposed_solution.py and
// problem = the original file.
#pragma once

#include "records/manifest.h"

#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "problem/problem.h"
#include "util/result.h"

namespace mk::problem {

/// Rewrites a top-level module so it imports implementations instead of references.
Result<std::string> rewrite_top_level_for_solution(const std::string& top_level);

/// A PyTorch reference turned into an implementation (Swap's alternative):
/// the reference source plus `class ModelNew(Model)`.
std::string pytorch_implementation(const Subproblem& sp);

struct PackageContents {
  std::set<std::string> pytorch_subkernels;          ///< implemented by the PyTorch reference (Swap)
  std::map<std::string, std::string> reused_from;    ///< subproblem -> the run its subkernel was reused from (adapt)
  /// Whether a subkernel is PyTorch cannot be known (CPU test mode, where
  /// PyTorch stand-ins pass as kernels): the flags are written as null.
  bool pytorch_unknown = false;
  /// The rest of manifest.json (problem, the solution's figures, ...), written
  /// as given; the package fills in its subkernels and the two flags.
  records::SolutionManifest record;
};

/// Why `topo` with `kernels` cannot be composed at all (a subproblem without a
/// kernel, a top level that cannot be rewritten), or Ok: the package's own
/// faults, as opposed to the machine's (a write that fails).
Status check_composable(const Topology& topo, const std::map<std::string, std::string>& kernels);

/// Writes the package into `package_dir` (normally DIR/solution), replacing any
/// previous content. `kernels` must hold one source per subproblem. With
/// durable = false (scratch packages the search evaluates) files are not fsync'd.
/// Errors are check_composable's, else the file system's.
Status write_solution_package(const fs::path& package_dir, const Topology& topo,
                              const std::map<std::string, std::string>& kernels,
                              const PackageContents& manifest = {}, bool durable = true);

}  // namespace mk::problem
