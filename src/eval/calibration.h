// Calibrated tolerances (the paper's Appendix D; `mkevolve calibrate`,
// `--tolerance calibrated|FILE`): a JSON file of per-output tolerances, one
// entry per problem keyed by its content hash (hash_sources), measured by the
// worker's `calibrate` op (worker/mkevolve_worker/calibration.py).
#pragma once

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "eval/evaluator.h"
#include "util/result.h"

namespace mk::eval {

inline constexpr const char* kCalibrationFormat = "mkevolve-calibration";
inline constexpr int kCalibrationVersion = 1;

/// One calibration file, loaded and written whole (atomically). Thread-safe.
class CalibrationFile {
 public:
  /// A missing file is an empty one; a file that is not a calibration file of
  /// this version is an error naming it and what is wrong.
  static Result<CalibrationFile> load(const std::filesystem::path& path);

  /// The problem's entry (the worker's answer, plus "name", "file"), or nullopt.
  std::optional<nlohmann::json> entry(const std::string& problem_hash) const;
  /// Sets the problem's entry and writes the file.
  mk::Status put(const std::string& problem_hash, const std::filesystem::path& problem, nlohmann::json answer);
  const std::filesystem::path& path() const { return path_; }
  size_t size() const;

  CalibrationFile(const CalibrationFile& o) : path_(o.path_), doc_(o.doc_) {}
  CalibrationFile& operator=(const CalibrationFile&) = delete;

 private:
  CalibrationFile(std::filesystem::path path, nlohmann::json doc) : path_(std::move(path)), doc_(std::move(doc)) {}
  std::filesystem::path path_;
  mutable std::mutex mu_;
  nlohmann::json doc_;
};

/// Checks a worker's calibrate answer: {"outputs": {PATH: {"dtype", "by_kind":
/// {KIND: {"atol", ...}}}}, ...}. The error says what is wrong.
mk::Status check_calibration_answer(const nlohmann::json& answer);

/// The evaluator's "calibrated" option from one entry: {"outputs": {PATH:
/// {KIND: atol}}, "source": FILE}.
nlohmann::json calibrated_option(const nlohmann::json& entry, const std::string& source);

/// --tolerance's value: "default" (the dtype's, the problem's or the flags'),
/// "calibrated" (the given default file) or a path. The calibration file to
/// use, empty for "default".
std::filesystem::path calibration_path(const std::string& tolerance, const std::filesystem::path& calibrated_default);

/// A usage error of the tolerance flags ("" when none): --tolerance calibrated
/// or FILE with --atol/--rtol.
std::string tolerance_error(const EvalOptions& o);

}  // namespace mk::eval
