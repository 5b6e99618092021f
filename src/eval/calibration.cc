#include "eval/calibration.h"
#include "eval/calibration_file.h"

#include <cmath>
#include <ctime>

#include "eval/cache.h"
#include "util/fs.h"

namespace mk::eval {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string now_utc() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

mk::Status check_calibration_answer(const json& a) {
  if (!a.is_object() || !a.contains("outputs") || !a["outputs"].is_object() || a["outputs"].empty())
    return Error{"no \"outputs\" object with at least one output"};
  for (const auto& [path, o] : a["outputs"].items()) {
    const std::string name = path.empty() ? "the output" : "output " + path;
    if (!o.is_object() || !o.contains("by_kind") || !o["by_kind"].is_object() || o["by_kind"].empty())
      return Error{name + " has no \"by_kind\" object"};
    for (const auto& [kind, v] : o["by_kind"].items()) {
      if (!v.is_object() || !v.contains("atol") || !v["atol"].is_number() || !std::isfinite(v["atol"].get<double>()) ||
          v["atol"].get<double>() < 0)
        return Error{name + ", " + kind + " inputs: \"atol\" must be a non-negative number"};
    }
  }
  return {};
}

Result<CalibrationFile> CalibrationFile::load(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    return CalibrationFile(path, json{{"format", kCalibrationFormat},
                                      {"version", kCalibrationVersion},
                                      {"problems", json::object()}});
  auto doc = read_json_file(path);
  if (!doc) return Error{doc.error()};
  const json& d = *doc;
  if (!d.is_object() || d.value("format", std::string()) != kCalibrationFormat)
    return Error{path.string() + ": not a calibration file (its \"format\" is not \"" + kCalibrationFormat + "\")"};
  if (!d.contains("version") || !d["version"].is_number_integer() || d["version"].get<int>() != kCalibrationVersion)
    return Error{path.string() + ": calibration file version " + (d.contains("version") ? d["version"].dump() : "none") +
                 "; this mkevolve reads version " + std::to_string(kCalibrationVersion)};
  if (!d.contains("problems") || !d["problems"].is_object())
    return Error{path.string() + ": no \"problems\" object"};
  for (const auto& [hash, e] : d["problems"].items()) {
    if (auto st = check_calibration_answer(e); !st)
      return Error{path.string() + ": problem " + e.value("name", hash) + ": " + st.error()};
  }
  return CalibrationFile(path, *doc);
}

std::optional<json> CalibrationFile::entry(const std::string& problem_hash) const {
  std::lock_guard lock(mu_);
  const json& p = doc_["problems"];
  auto it = p.find(problem_hash);
  if (it == p.end()) return std::nullopt;
  return *it;
}

size_t CalibrationFile::size() const {
  std::lock_guard lock(mu_);
  return doc_["problems"].size();
}

mk::Status CalibrationFile::put(const std::string& problem_hash, const fs::path& problem, json answer) {
  if (auto st = check_calibration_answer(answer); !st)
    return Error{"the worker's calibration of " + problem.string() + ": " + st.error()};
  answer["name"] = problem.stem().string();
  answer["file"] = problem.string();
  answer["recorded"] = now_utc();
  std::lock_guard lock(mu_);
  if (answer.contains("rule")) doc_["rule"] = answer["rule"];
  doc_["problems"][problem_hash] = std::move(answer);
  return write_file_atomic(path_, doc_.dump(1) + "\n");
}

json calibrated_option(const json& entry, const std::string& source) {
  json outs = json::object();
  for (const auto& [path, o] : entry["outputs"].items()) {
    json kinds = json::object();
    for (const auto& [kind, v] : o["by_kind"].items()) kinds[kind] = v["atol"];
    outs[path] = kinds;
  }
  return json{{"outputs", outs}, {"source", source}};
}

fs::path calibration_file(const fs::path& run_dir) {
  return (run_dir.empty() ? default_cache_root() : run_dir) / "calibration.json";
}

fs::path calibration_path(const std::string& tolerance, const fs::path& calibrated_default) {
  if (tolerance.empty() || tolerance == "default") return {};
  if (tolerance == "calibrated") return calibrated_default;
  return fs::path(tolerance);
}

std::string tolerance_error(const eval::EvalOptions& o) {
  if (o.tolerance != "default" && (o.atol || o.rtol))
    return "--tolerance " + o.tolerance +
           " judges each output at its calibrated atol with rtol 0; drop --atol/--rtol (or use --tolerance default)";
  return {};
}

}  // namespace mk::eval
