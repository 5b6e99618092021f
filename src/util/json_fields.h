// Tolerant readers of event fields: a missing or mistyped field reads as empty
// (events from older runs, or from a log cut short, must never crash a report).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mk::fields {

inline std::string str(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

inline std::optional<double> optnum(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

inline int64_t integer(const nlohmann::json& j, const char* key, int64_t def = 0) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return def;
  return it->is_number_integer() ? it->get<int64_t>() : static_cast<int64_t>(it->get<double>());
}

inline bool boolean(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

inline std::vector<std::string> strings(const nlohmann::json& j, const char* key) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& x : *it)
    if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}

}  // namespace mk::fields
