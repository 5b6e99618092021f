// The one rule for where calibrated tolerances live (--tolerance calibrated,
// mkevolve calibrate). Apart from calibration.h so that the rule can be read
// (and changed) without touching the worker pool's headers.
#pragma once

#include <filesystem>

namespace mk::eval {

/// A run directory's own calibration.json (run, evolve, adapt, bench, swap,
/// and calibrate of a run directory); outside a run (run_dir empty: eval,
/// calibrate of a problem file), the cache's calibration.json under
/// default_cache_root().
std::filesystem::path calibration_file(const std::filesystem::path& run_dir);

}  // namespace mk::eval
