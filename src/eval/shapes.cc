#include "eval/shapes.h"

#include <algorithm>

namespace mk::eval {

using nlohmann::json;

bool valid_shapes_mode(const std::string& mode) {
  return std::any_of(std::begin(kShapesModes), std::end(kShapesModes), [&](const char* m) { return mode == m; });
}

std::string candidate_shapes(const std::string& mode) { return mode == "search" ? "search" : "benchmark"; }

std::string final_shapes(const std::string& mode) { return mode == "benchmark" || mode.empty() ? "benchmark" : "check"; }

namespace {
std::vector<std::string> strings(const json& j, const char* key) {
  std::vector<std::string> out;
  if (j.contains(key) && j[key].is_array())
    for (const auto& x : j[key])
      if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}
std::vector<ShapesRecord::Failure> failures(const json& j, const char* key) {
  std::vector<ShapesRecord::Failure> out;
  if (j.contains(key) && j[key].is_array())
    for (const auto& x : j[key])
      if (x.is_object()) out.push_back({x.value("shape", ""), x.value("error", "")});
  return out;
}
std::string first_line(const std::string& s, size_t n) {
  std::string line = s.substr(0, s.find('\n'));
  return line.size() > n ? line.substr(0, n) + "..." : line;
}
}  // namespace

std::optional<ShapesRecord> ShapesRecord::from_json(const json& j) {
  if (!j.is_object() || !j.contains("mode")) return std::nullopt;
  ShapesRecord r;
  r.mode = j.value("mode", "");
  r.benchmark = j.contains("benchmark") && j["benchmark"].is_string() ? j["benchmark"].get<std::string>() : "";
  r.held = strings(j, "held");
  r.failed = failures(j, "failed");
  r.skipped = failures(j, "skipped");
  r.not_reached = strings(j, "not_reached");
  r.error = j.contains("error") && j["error"].is_string() ? j["error"].get<std::string>() : "";
  return r;
}

std::optional<ShapesRecord> ShapesRecord::from_checks(const json& raw) {
  if (!raw.is_object() || !raw.contains("checks") || !raw["checks"].is_object()) return std::nullopt;
  const json& c = raw["checks"];
  return c.contains("shapes") ? from_json(c["shapes"]) : std::nullopt;
}

json ShapesRecord::to_json() const {
  auto fails = [](const std::vector<Failure>& v) {
    json a = json::array();
    for (const auto& f : v) a.push_back({{"shape", f.shape}, {"error", f.error}});
    return a;
  };
  json j = {{"mode", mode}, {"benchmark", benchmark}, {"held", held}, {"failed", fails(failed)},
            {"skipped", fails(skipped)}};
  if (!not_reached.empty()) j["not_reached"] = not_reached;
  j["error"] = error.empty() ? json(nullptr) : json(error);
  return j;
}

std::string ShapesRecord::holds_at_text(size_t error_chars) const {
  const size_t tried = held.size() + failed.size();
  std::string bench = "benchmark" + (benchmark.empty() ? std::string() : " (" + benchmark + ")");
  std::string s;
  if (!not_reached.empty() && tried == 0) {
    s = "not verified at other shapes (it fails at the benchmark's)";
  } else if (tried == 0) {
    s = bench + " only: " + (error.empty() ? std::string("every shape variant was skipped") : error);
  } else {
    s = bench + " + " + std::to_string(held.size()) + " of " + std::to_string(tried) + " shape variants";
    if (!held.empty()) {
      s += " (";
      for (size_t i = 0; i < held.size(); ++i) s += (i ? "; " : "") + held[i];
      s += ")";
    }
    for (const auto& f : failed) s += "; fails at " + f.shape + ": " + first_line(f.error, error_chars);
    if (!not_reached.empty()) s += "; " + std::to_string(not_reached.size()) + " more not tried";
  }
  for (const auto& k : skipped) s += "; skipped " + k.shape + " (" + first_line(k.error, error_chars) + ")";
  return s;
}

}  // namespace mk::eval
