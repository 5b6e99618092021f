#include "records/record.h"

#include "util/json_fields.h"

namespace mk::records {

bool is_type(const nlohmann::json& j, const char* type) {
  return j.is_object() && j.contains("type") && j["type"].is_string() && j["type"].get<std::string>() == type;
}

// What j holds that known (the record as this build writes it back) lacks,
// at any depth: a key known lacks, or inside an object or an equally long
// array both hold, what the nested value lacks. Empty when nothing.
nlohmann::json unknown_part(const nlohmann::json& j, const nlohmann::json& known) {
  if (j.is_object() && known.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, x] : j.items()) {
      auto it = known.find(k);
      if (it == known.end()) out[k] = x;
      else if (auto d = unknown_part(x, *it); !d.empty()) out[k] = std::move(d);
    }
    return out;
  }
  if (j.is_array() && known.is_array() && j.size() == known.size()) {
    nlohmann::json out = nlohmann::json::array();
    bool any = false;
    for (size_t i = 0; i < j.size(); ++i) {
      out.push_back(unknown_part(j[i], known[i]));
      any = any || !out.back().empty();
    }
    return any ? out : nlohmann::json::object();
  }
  return nlohmann::json::object();
}

// Puts back what unknown_part took out, never over a field this build wrote.
void merge_unknown(nlohmann::json& dst, const nlohmann::json& extra) {
  if (dst.is_object() && extra.is_object()) {
    for (const auto& [k, x] : extra.items()) {
      if (!dst.contains(k)) dst[k] = x;
      else merge_unknown(dst[k], x);
    }
  } else if (dst.is_array() && extra.is_array() && dst.size() == extra.size()) {
    for (size_t i = 0; i < dst.size(); ++i) merge_unknown(dst[i], extra[i]);
  }
}

// The envelope every typed record shares: its schema version, the fields a
// newer writer added (kept), and the log's seq and ts when it has them.
void put_meta(nlohmann::json& j, const Meta& m) {
  j["v"] = m.v;
  merge_unknown(j, m.extra);
  if (m.seq) j["seq"] = *m.seq;
  if (!m.ts.empty()) j["ts"] = m.ts;
}

Meta get_meta(const nlohmann::json& j, const nlohmann::json& known) {
  Meta m;
  if (auto it = j.find("seq"); it != j.end() && it->is_number_integer()) m.seq = it->get<int64_t>();
  m.ts = fields::str(j, "ts");
  m.v = static_cast<int>(fields::integer(j, "v", 1));
  m.extra = unknown_part(j, known);
  for (const char* k : {"seq", "ts", "v"}) m.extra.erase(k);
  return m;
}

}  // namespace mk::records
