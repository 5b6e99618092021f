#include "rundir/secrets.h"

#include <algorithm>
#include <cctype>

#include "util/env.h"

namespace mk::rundir {

namespace {

bool has_prefix(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

bool is_secret_value(std::string_view v) {
  if (looks_like_key(v)) return true;
  for (std::string_view p : {"Bearer ", "bearer "})
    if (has_prefix(v, p) && v.size() >= p.size() + 12 && v.find(' ', p.size()) == std::string_view::npos) return true;
  std::string s(v);
  return redact_secrets(s) != s;
}

namespace {

nlohmann::json strip(const nlohmann::json& j, const std::string& path, std::vector<std::string>* dropped) {
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto it = j.begin(); it != j.end(); ++it) {
      std::string child = path.empty() ? it.key() : path + "." + it.key();
      if (is_secret_key(it.key()) || (it->is_string() && is_secret_value(it->get<std::string>()))) {
        if (dropped) dropped->push_back(child);
        continue;
      }
      out[it.key()] = strip(*it, child, dropped);
    }
    return out;
  }
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < j.size(); ++i) {
      std::string child = path + "[" + std::to_string(i) + "]";
      if (j[i].is_string() && is_secret_value(j[i].get<std::string>())) {
        if (dropped) dropped->push_back(child);
        continue;
      }
      out.push_back(strip(j[i], child, dropped));
    }
    return out;
  }
  return j;
}

}  // namespace

nlohmann::json strip_secrets(const nlohmann::json& j, std::vector<std::string>* dropped) {
  return strip(j, "", dropped);
}

}  // namespace mk::rundir
