#include "report/format.h"

#include <cmath>
#include <cstdio>

#include "report/svg.h"

namespace mk::report {

using svg::num;

namespace {
std::string fixed2(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}
}  // namespace

std::string speedup(const std::optional<double>& v) {
  return v && std::isfinite(*v) && *v > 0 ? fixed2(*v) + "\u00d7" : "\u2014";
}

std::string grouped(int64_t v) {
  std::string d = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return (v < 0 ? "-" : "") + out;
}

std::string ms(const std::optional<double>& v) { return v ? num(*v, *v < 1 ? 4 : 3) : "\u2014"; }
std::string pct(const std::optional<double>& v) { return v ? num(*v * 100, 1) + "%" : "\u2014"; }

std::string vstr(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "unknown";
  if (it->is_string()) return it->get<std::string>().empty() ? "unknown" : it->get<std::string>();
  return it->dump();
}

std::string joined(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

}  // namespace mk::report
