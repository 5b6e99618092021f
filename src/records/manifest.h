// solution/manifest.json: what the solution package holds and how it was
// verified. Written with the package (problem::write_solution_package), read
// and rewritten by `mkevolve swap`, read by `mkevolve adapt` (run::load_reuse).
// The search's scratch packages write only the problem, the subkernels and
// the two flags; a run's solution adds the solution's figures and the LLM.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "records/fields.h"

namespace mk::records {

struct ManifestSubkernel {
  std::string name{};
  std::string problem_hash{};  ///< of its subproblem's reference
  std::string kernel_hash{};   ///< sha256 of its implementation
  /// Implemented by the PyTorch reference (Swap); null when it cannot be
  /// known (CPU test mode, where PyTorch stand-ins pass as kernels).
  std::optional<bool> pytorch{};
  std::string reused_from{};  ///< adapt: the run its subkernel was reused from
  nlohmann::json local{};     ///< mkevolve swap: the replacement's own verdict (eval::summary_json)
  static constexpr auto fields() {
    return std::tuple{field("name", &ManifestSubkernel::name),
                      field("problem_hash", &ManifestSubkernel::problem_hash),
                      field("kernel_hash", &ManifestSubkernel::kernel_hash),
                      field("pytorch", &ManifestSubkernel::pytorch),
                      field("reused_from", &ManifestSubkernel::reused_from, When::kIfSet),
                      field("local", &ManifestSubkernel::local, When::kIfSet)};
  }
};

/// One `mkevolve swap` taken on the package.
struct ManifestSwap {
  std::string name{}, from{}, to{};
  static constexpr auto fields() {
    return std::tuple{field("name", &ManifestSwap::name), field("from", &ManifestSwap::from),
                      field("to", &ManifestSwap::to)};
  }
};

struct SolutionManifest {
  std::string problem{}, problem_hash{};
  std::optional<std::string> llm{};     ///< the run's provider spec
  std::optional<std::string> method{};  ///< the solution's: the method that found it
  std::optional<int> iteration{};
  std::optional<double> speedup{};      ///< end to end, vs torch.compile
  std::optional<bool> correct{};
  std::optional<std::string> origin{};  ///< how its decomposition came about
  bool monolithic = false;              ///< the whole problem as one subkernel
  /// Any subkernel implemented by PyTorch; null when it cannot be known (test mode).
  std::optional<bool> contains_pytorch_subkernels{};
  std::optional<nlohmann::json> uses_pytorch{};  ///< test mode: null (unknown)
  bool test_mode = false;
  std::string test_mode_note{};
  std::vector<ManifestSubkernel> subkernels{};
  nlohmann::json e2e{};                      ///< the end-to-end verdict (eval::summary_json)
  std::vector<ManifestSwap> swaps{};
  /// Fields this build does not know (a newer writer's), kept.
  nlohmann::json extra = nlohmann::json::object();

  static constexpr auto fields() {
    return std::tuple{field("problem", &SolutionManifest::problem, When::kIfSet),
                      field("problem_hash", &SolutionManifest::problem_hash, When::kIfSet),
                      field("llm", &SolutionManifest::llm, When::kIfSet),
                      field("method", &SolutionManifest::method, When::kIfSet),
                      field("iteration", &SolutionManifest::iteration, When::kIfSet),
                      field("speedup", &SolutionManifest::speedup, When::kIfSet),
                      field("correct", &SolutionManifest::correct, When::kIfSet),
                      field("origin", &SolutionManifest::origin, When::kIfSet),
                      field("monolithic", &SolutionManifest::monolithic),
                      field("contains_pytorch_subkernels", &SolutionManifest::contains_pytorch_subkernels),
                      field("uses_pytorch", &SolutionManifest::uses_pytorch, When::kIfSet),
                      field("test_mode", &SolutionManifest::test_mode, When::kIfSet),
                      field("test_mode_note", &SolutionManifest::test_mode_note, When::kIfSet),
                      field("subkernels", &SolutionManifest::subkernels),
                      field("e2e", &SolutionManifest::e2e, When::kIfSet),
                      field("swaps", &SolutionManifest::swaps, When::kIfSet)};
  }
  nlohmann::json to_json() const;
  /// nullopt when j is not an object with a "subkernels" array (no manifest).
  static std::optional<SolutionManifest> from_json(const nlohmann::json& j);
  ManifestSubkernel* find(const std::string& name);
};

}  // namespace mk::records
