// A typed record of the run's log: its field table (records/fields.h), its
// "type", and what every record carries besides (Meta: schema version, the
// log's seq and ts, and the fields a newer writer added, kept). write_record
// and read_record are the one to_json/from_json every record uses
// (MK_RECORD_JSON declares them as the record's members).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "records/fields.h"

namespace mk::records {

/// The schema version of the records this build writes: "v" in each typed
/// record (a record without it was written before the number existed and
/// reads as version 1). Raise it when a field changes meaning; a reader of an
/// older version still takes what it knows and keeps the rest (Meta::extra).
inline constexpr int kSchema = 1;

/// What every typed record carries besides its own fields.
struct Meta {
  std::optional<int64_t> seq{};  ///< its place in events.jsonl (RunDir::log_event sets seq and ts)
  std::string ts{};              ///< ISO-8601 UTC
  int v = kSchema;               ///< the schema version it was written in
  /// Fields this build does not know (a newer writer's), kept: a record read
  /// and written again loses nothing.
  nlohmann::json extra = nlohmann::json::object();
};

/// What j holds that `known` (the record as this build writes it back) lacks,
/// at any depth: a key known lacks, or inside an object or an equally long
/// array both hold, what the nested value lacks. Empty when nothing.
nlohmann::json unknown_part(const nlohmann::json& j, const nlohmann::json& known);
/// Puts back what unknown_part took out, never over a field this build wrote.
void merge_unknown(nlohmann::json& dst, const nlohmann::json& extra);
/// Writes the envelope every typed record shares: "v", the fields a newer
/// writer added (kept), and the log's seq and ts when it has them.
void put_meta(nlohmann::json& j, const Meta& m);
/// Reads it back: extra is what j holds beyond `known` (seq, ts and v aside).
Meta get_meta(const nlohmann::json& j, const nlohmann::json& known);
/// Whether j is an object whose "type" is the string `type`.
bool is_type(const nlohmann::json& j, const char* type);

/// A record: a struct with kType, meta and a field table. It may add
///  - `void finish_json(nlohmann::json& j) const`: what its table cannot say
///    (a field written under a condition on another), applied after the table;
///  - `static nlohmann::json finish_read(const nlohmann::json& j, R& r)`:
///    applied after the table has been read (an older shape of the record);
///    returns the keys it read that the record does not write back, so that
///    they are not kept as unknown;
///  - `static constexpr bool kUnversioned = true`: written without "v" (live
///    progress, never logged).
template <class R>
concept Record = HasFields<R> && requires(const R& r) {
  { R::kType } -> std::convertible_to<const char*>;
  r.meta;
};

template <Record R>
nlohmann::json write_record(const R& r) {
  nlohmann::json j = write_fields(r);
  j["type"] = R::kType;
  if constexpr (requires(nlohmann::json& x) { r.finish_json(x); }) r.finish_json(j);
  put_meta(j, r.meta);
  // Live progress that is never logged carries no schema version.
  if constexpr (requires { R::kUnversioned; }) j.erase("v");
  return j;
}

/// nullopt when j is not a record of R's type; missing or mistyped fields read as their defaults.
template <Record R>
std::optional<R> read_record(const nlohmann::json& j) {
  if (!is_type(j, R::kType)) return std::nullopt;
  R r{};
  read_fields(j, r);
  nlohmann::json also_known = nlohmann::json::object();
  if constexpr (requires { R::finish_read(j, r); }) also_known = R::finish_read(j, r);
  nlohmann::json known = write_record(r);
  known.update(also_known);
  r.meta = get_meta(j, known);
  return r;
}

/// A record that is a file of its own (config.json, manifest.json): no type
/// and no log envelope, but a member `extra` with the fields a newer writer
/// added, kept.
template <HasFields R>
nlohmann::json write_with_extra(const R& r) {
  nlohmann::json j = write_fields(r);
  merge_unknown(j, r.extra);
  return j;
}
template <HasFields R>
R read_with_extra(const nlohmann::json& j) {
  R r{};
  read_fields(j, r);
  r.extra = unknown_part(j, write_with_extra(r));
  return r;
}

}  // namespace mk::records

/// Declares a record's to_json() and from_json() as the table's codec.
#define MK_RECORD_JSON(Name)                                                       \
  nlohmann::json to_json() const { return ::mk::records::write_record(*this); }   \
  static std::optional<Name> from_json(const nlohmann::json& j) {                 \
    return ::mk::records::read_record<Name>(j);                                    \
  }
