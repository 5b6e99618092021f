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
//
// A key with a '/' names a field inside an object: "speedup/compile" is the
// "compile" member of the "speedup" object (a flat struct can so write the
// nested shape its file has). A type of the program's own with a JSON shape
// of its own (a status written as its name, a timing written as a number)
// says so once, by specialising ValueCodec<T>.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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
  kPositive,  ///< a number (or an optional one): written as null unless above 0, read only when above 0
};

/// The JSON shape of a type of the program's own: specialise with
///   static nlohmann::json encode(const T&);
///   static bool decode(const nlohmann::json&, T&);  // false: j is not a T (v left alone)
///   static bool is_set(const T&);                    // for When::kIfSet
template <class T>
struct ValueCodec;

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

template <class T>
concept HasValueCodec = requires(const T& v, T& m, const nlohmann::json& j) {
  { ValueCodec<T>::encode(v) } -> std::convertible_to<nlohmann::json>;
  { ValueCodec<T>::decode(j, m) } -> std::same_as<bool>;
  { ValueCodec<T>::is_set(v) } -> std::same_as<bool>;
};
template <HasValueCodec T>
nlohmann::json encode(const T& v) {
  return ValueCodec<T>::encode(v);
}
template <HasValueCodec T>
bool decode(const nlohmann::json& j, T& v) {
  return ValueCodec<T>::decode(j, v);
}
template <HasValueCodec T>
bool is_set(const T& v) {
  return ValueCodec<T>::is_set(v);
}

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

/// The object a key's value lives in ("a/b": j's "a", made an object when
/// it is none), and the last part of the key.
inline std::pair<nlohmann::json*, std::string_view> slot_for_write(nlohmann::json& j, std::string_view key) {
  nlohmann::json* at = &j;
  for (auto slash = key.find('/'); slash != std::string_view::npos; slash = key.find('/')) {
    nlohmann::json& next = (*at)[std::string(key.substr(0, slash))];
    if (!next.is_object()) next = nlohmann::json::object();
    at = &next;
    key.remove_prefix(slash + 1);
  }
  return {at, key};
}

/// The value at a key ("a/b" inside j's "a"), or nullptr when it is absent.
inline const nlohmann::json* value_at(const nlohmann::json& j, std::string_view key) {
  const nlohmann::json* at = &j;
  for (;;) {
    if (!at->is_object()) return nullptr;
    auto slash = key.find('/');
    auto it = at->find(std::string(key.substr(0, slash)));
    if (it == at->end()) return nullptr;
    if (slash == std::string_view::npos) return &*it;
    at = &*it;
    key.remove_prefix(slash + 1);
  }
}

/// A number, or an optional one: what When::kPositive applies to.
template <class M>
inline constexpr bool kNumeric = std::is_arithmetic_v<M> && !std::is_same_v<M, bool>;
template <class U>
inline constexpr bool kNumeric<std::optional<U>> = kNumeric<U>;

/// When::kPositive: whether a number (or an optional one) is there and above 0.
template <class M>
bool is_positive(const M& v) {
  if constexpr (std::is_arithmetic_v<M>) return v > 0;
  else return v && *v > 0;
}

template <class R, class T, class M>
void write_field(nlohmann::json& j, const R& r, const Field<T, M>& f) {
  const M& v = r.*(f.member);
  if constexpr (std::is_same_v<M, nlohmann::json>) {
    if (f.when == When::kIfObject && !v.is_object()) return;
  }
  if (f.when == When::kIfSet && !codec::is_set(v)) return;
  auto [obj, key] = slot_for_write(j, f.key);
  if constexpr (kNumeric<M>) {
    if (f.when == When::kPositive) {
      (*obj)[std::string(key)] = is_positive(v) ? codec::encode(v) : nlohmann::json(nullptr);
      return;
    }
  }
  (*obj)[std::string(key)] = codec::encode(v);
}

template <class R, class T, class M>
void read_field(const nlohmann::json& j, R& r, const Field<T, M>& f) {
  const nlohmann::json* it = value_at(j, f.key);
  if (it == nullptr) return;
  if constexpr (std::is_same_v<M, nlohmann::json>) {
    if (f.when == When::kIfObject && !it->is_object()) return;
  }
  if (f.when == When::kPositive && !(it->is_number() && it->get<double>() > 0)) return;
  codec::decode(*it, r.*(f.member));
}

/// Whether a table can be written as it says, checked when it is compiled:
/// When::kPositive only on numbers, and no key that is also the object
/// another key's "a/b" writes into (one would overwrite the other).
template <HasFields T>
consteval bool table_is_sound() {
  constexpr auto table = T::fields();
  bool ok = true;
  std::apply([&](const auto&... f) {
    auto numeric_where_positive = [](const auto& fld) {
      using M = std::remove_cvref_t<decltype(std::declval<T>().*(fld.member))>;
      return fld.when != When::kPositive || kNumeric<M>;
    };
    ok = ok && (numeric_where_positive(f) && ...);
    const std::string_view keys[] = {std::string_view(f.key)...};
    for (auto a : keys)
      for (auto b : keys)
        if (b.size() > a.size() && b.substr(0, a.size()) == a && b[a.size()] == '/') ok = false;
  }, table);
  return ok;
}

/// The record's fields as a JSON object, as its table says.
template <HasFields T>
nlohmann::json write_fields(const T& r) {
  static_assert(table_is_sound<T>(), "a field table writes a key inside another key's value, or has When::kPositive on a non-number");
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

/// The top-level keys a record's table writes ("a/b" counts as "a"), once each, in its order.
template <HasFields T>
std::vector<std::string> top_level_keys() {
  std::vector<std::string> out;
  for (const auto& key : field_keys<T>()) {
    std::string top = key.substr(0, key.find('/'));
    if (std::find(out.begin(), out.end(), top) == out.end()) out.push_back(std::move(top));
  }
  return out;
}

}  // namespace mk::records
