// One field table per record, and the one codec generated from it.
//
// A record is a plain struct with a static `fields()` that lists, once, each
// member with its JSON key and when it is written:
//
//   struct Preflight {
//     std::string what{};
//     bool ok = false;
//     static constexpr auto fields() {
//       return std::tuple{field("what", &Preflight::what), field("ok", &Preflight::ok)};
//     }
//   };
//
// write_fields() and read_fields() walk that table. Reading is tolerant: a
// missing or mistyped field leaves the member at its default (records from
// older runs, or a log cut short, must never crash a reader); numbers are
// taken whether written as integers or not. Nested records (a member whose
// type has its own fields()) and vectors of them are read and written through
// their own tables.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mk::records {

/// When a field is written.
enum class When {
  kAlways,    ///< always (an empty optional is written as null)
  kIfSet,     ///< only when set: a non-empty string or vector, a true bool, an optional with a value, non-null JSON
  kIfObject,  ///< JSON only: written, and read, only when it is an object
};

template <class T, class M>
struct Field {
  const char* key;
  M T::*member;
  When when;
};

template <class T, class M>
constexpr Field<T, M> field(const char* key, M T::*member, When when = When::kAlways) {
  return {key, member, when};
}

template <class T>
concept HasFields = requires { T::fields(); };

template <HasFields T>
nlohmann::json write_fields(const T& r);
template <HasFields T>
void read_fields(const nlohmann::json& j, T& r);

namespace codec {

// encode(v): the JSON of a value. decode(j, v): sets v from j and returns true
// when j has the right type; leaves v alone otherwise. is_set(v): for kIfSet.

inline nlohmann::json encode(const std::string& v) { return v; }
inline bool decode(const nlohmann::json& j, std::string& v) {
  if (!j.is_string()) return false;
  v = j.get<std::string>();
  return true;
}
inline bool is_set(const std::string& v) { return !v.empty(); }

inline nlohmann::json encode(bool v) { return v; }
inline bool decode(const nlohmann::json& j, bool& v) {
  if (!j.is_boolean()) return false;
  v = j.get<bool>();
  return true;
}
inline bool is_set(bool v) { return v; }

template <class I>
  requires(std::integral<I> && !std::same_as<I, bool>)
nlohmann::json encode(I v) {
  return v;
}
template <class I>
  requires(std::integral<I> && !std::same_as<I, bool>)
bool decode(const nlohmann::json& j, I& v) {
  if (!j.is_number()) return false;
  v = static_cast<I>(j.is_number_integer() ? j.get<int64_t>() : static_cast<int64_t>(j.get<double>()));
  return true;
}
template <class I>
  requires(std::integral<I> && !std::same_as<I, bool>)
bool is_set(I v) {
  return v != 0;
}

inline nlohmann::json encode(double v) { return v; }
inline bool decode(const nlohmann::json& j, double& v) {
  if (!j.is_number()) return false;
  v = j.get<double>();
  return true;
}
inline bool is_set(double v) { return v != 0; }

inline nlohmann::json encode(const nlohmann::json& v) { return v; }
inline bool decode(const nlohmann::json& j, nlohmann::json& v) {
  v = j;
  return true;
}
inline bool is_set(const nlohmann::json& v) { return !v.is_null(); }

/// Subproblem -> count, written as an object (read back in the object's key order).
inline nlohmann::json encode(const std::vector<std::pair<std::string, int>>& v) {
  nlohmann::json o = nlohmann::json::object();
  for (const auto& [k, n] : v) o[k] = n;
  return o;
}
inline bool decode(const nlohmann::json& j, std::vector<std::pair<std::string, int>>& v) {
  if (!j.is_object()) return false;
  v.clear();
  for (const auto& [k, n] : j.items())
    if (n.is_number_integer()) v.emplace_back(k, n.get<int>());
  return true;
}
inline bool is_set(const std::vector<std::pair<std::string, int>>& v) { return !v.empty(); }

template <HasFields R>
nlohmann::json encode(const R& r) {
  return write_fields(r);
}
template <HasFields R>
bool is_set(const R&) {
  return true;
}
template <HasFields R>
bool decode(const nlohmann::json& j, R& r) {
  if (!j.is_object()) return false;
  read_fields(j, r);
  return true;
}

template <class U>
nlohmann::json encode(const std::optional<U>& v) {
  return v ? encode(*v) : nlohmann::json(nullptr);
}
template <class U>
bool decode(const nlohmann::json& j, std::optional<U>& v) {
  U u{};
  if (!decode(j, u)) return false;
  v = std::move(u);
  return true;
}
template <class U>
bool is_set(const std::optional<U>& v) {
  return v.has_value();
}

/// A vector: an array of its elements; elements of the wrong type are skipped.
template <class U>
nlohmann::json encode(const std::vector<U>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& x : v) a.push_back(encode(x));
  return a;
}
template <class U>
bool decode(const nlohmann::json& j, std::vector<U>& v) {
  if (!j.is_array()) return false;
  v.clear();
  for (const auto& x : j) {
    U u{};
    if (decode(x, u)) v.push_back(std::move(u));
  }
  return true;
}
template <class U>
bool is_set(const std::vector<U>& v) {
  return !v.empty();
}

}  // namespace codec

template <class R, class T, class M>
void write_field(nlohmann::json& j, const R& r, const Field<T, M>& f) {
  const M& v = r.*(f.member);
  if constexpr (std::is_same_v<M, nlohmann::json>) {
    if (f.when == When::kIfObject && !v.is_object()) return;
  }
  if (f.when == When::kIfSet && !codec::is_set(v)) return;
  j[f.key] = codec::encode(v);
}

template <class R, class T, class M>
void read_field(const nlohmann::json& j, R& r, const Field<T, M>& f) {
  auto it = j.find(f.key);
  if (it == j.end()) return;
  if constexpr (std::is_same_v<M, nlohmann::json>) {
    if (f.when == When::kIfObject && !it->is_object()) return;
  }
  codec::decode(*it, r.*(f.member));
}

/// The record's fields as a JSON object, as its table says.
template <HasFields T>
nlohmann::json write_fields(const T& r) {
  nlohmann::json j = nlohmann::json::object();
  std::apply([&](const auto&... f) { (write_field(j, r, f), ...); }, T::fields());
  return j;
}

/// Sets the record's fields from j (an object) as its table says.
template <HasFields T>
void read_fields(const nlohmann::json& j, T& r) {
  if (!j.is_object()) return;
  std::apply([&](const auto&... f) { (read_field(j, r, f), ...); }, T::fields());
}

/// The keys of a record's table, in its order (for tests that hold another
/// writer, such as the Python worker, to the same names).
template <HasFields T>
std::vector<std::string> field_keys() {
  std::vector<std::string> out;
  std::apply([&](const auto&... f) { (out.emplace_back(f.key), ...); }, T::fields());
  return out;
}

}  // namespace mk::records
