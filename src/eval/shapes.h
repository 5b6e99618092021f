// Shape variants (issue #35): which shapes a kernel is verified at, besides
// the benchmark's own. The worker derives the variants from the problem's
// module-level size constants (worker/mkevolve_worker/shapes.py) and
// reports, in a verdict's checks.shapes, where the kernel holds.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mk::eval {

/// --shapes: benchmark (the problem's own configurations), check (the
/// verdict is the benchmark's; a correct kernel is also run at each variant
/// and the result says where it holds), search (every variant is a
/// configuration the kernel must pass).
inline constexpr const char* kShapesModes[] = {"benchmark", "check", "search"};
bool valid_shapes_mode(const std::string& mode);

/// What a search candidate is verified at under a run's --shapes mode:
/// search verifies every candidate at the variants, the others only at the
/// benchmark's shapes.
std::string candidate_shapes(const std::string& mode);
/// What the final check of a run's returned solution is verified at: check
/// unless the run asked for the benchmark's shapes alone.
std::string final_shapes(const std::string& mode);

/// A verdict's checks.shapes, typed.
struct ShapesRecord {
  struct Failure {
    std::string shape, error;
  };
  std::string mode;                       ///< check or search
  std::string benchmark;                  ///< the benchmark's sizes, "batch_size=16, dim=16384"
  std::vector<std::string> held;          ///< variants it was verified at and holds at
  std::vector<Failure> failed;            ///< variants it fails at, with the error
  std::vector<Failure> skipped;           ///< variants the reference itself cannot run (charged to nobody)
  std::vector<std::string> not_reached;   ///< not tried: it failed at the benchmark's shapes, or (search) at an earlier variant
  std::string error;                      ///< why no variant could be derived ("" when some were)

  /// From a verdict's raw fields (checks.shapes); nullopt when it has none.
  static std::optional<ShapesRecord> from_checks(const nlohmann::json& raw);
  static std::optional<ShapesRecord> from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
  /// One cell for people: "benchmark + 3 of 3 variants" or "benchmark + 1 of 3; fails at
  /// batch_size=7 (mismatch ...)".
  std::string holds_at_text(size_t error_chars = 120) const;
};

}  // namespace mk::eval
