// The TOML configuration file shared by every subcommand.
//
// Search order: `--config FILE` (must exist), ./mkevolve.toml, then
// ~/.config/mkevolve/config.toml. No file found is fine: an empty Config, so
// every accessor returns its default. Keys are dotted paths ("llm.concurrency",
// `llm.prices."openai:gpt-4o".input`). Errors name the file, the line and the key:
//   mkevolve.toml:7: llm.concurrency: expected an integer, found a string
// CLI flags override the file; the file overrides built-in defaults.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace mk {

class Config {
 public:
  Config();  ///< empty: no file
  ~Config();
  Config(const Config&);
  Config& operator=(const Config&);
  Config(Config&&) noexcept;
  Config& operator=(Config&&) noexcept;

  /// Parses TOML text; source names it in errors (usually the file path).
  static Result<Config> parse(std::string_view text, std::string source);
  /// Reads and parses one file.
  static Result<Config> load_file(const std::filesystem::path& path);
  /// Applies the search order above. explicit_path empty = search; home empty = $HOME.
  static Result<Config> discover(const std::filesystem::path& explicit_path,
                                 const std::filesystem::path& cwd = {},
                                 const std::filesystem::path& home = {});

  /// The file this came from; empty when no file was found.
  const std::filesystem::path& path() const { return path_; }
  bool empty() const;

  /// True when the key exists (any type).
  bool has(std::string_view key) const;

  /// Typed lookups: nullopt when absent, an error when present with the wrong type.
  Result<std::optional<std::string>> find_string(std::string_view key) const;
  Result<std::optional<int64_t>> find_int(std::string_view key) const;
  Result<std::optional<double>> find_number(std::string_view key) const;  ///< integers accepted
  Result<std::optional<bool>> find_bool(std::string_view key) const;
  Result<std::optional<std::vector<std::string>>> find_strings(std::string_view key) const;

  /// Lookups with a default for an absent key.
  Result<std::string> get_string(std::string_view key, std::string def) const;
  Result<int64_t> get_int(std::string_view key, int64_t def) const;
  Result<double> get_number(std::string_view key, double def) const;
  Result<bool> get_bool(std::string_view key, bool def) const;

  /// Names of the entries of a table ("llm.prices" -> {"openai:gpt-4o", ...});
  /// empty when the key is absent; an error when it is not a table.
  Result<std::vector<std::string>> table_keys(std::string_view key) const;

  /// "file:line" of a key, or the file alone when the line is unknown ("" without a file).
  std::string where(std::string_view key) const;
  /// An error "file:line: key: message" for callers that validate values themselves.
  Error error_at(std::string_view key, std::string_view message) const;

  /// Keys in the file that no pattern names, each as "file:line: unknown key
  /// 'a.b' (ignored)", plus "; did you mean 'a.c'?" where a known key is one or
  /// two edits away. A pattern is a dotted key whose parts may be "*" (any
  /// name: "llm.providers.*.spec"); a table is known when it begins a pattern.
  std::vector<std::string> unknown_keys(const std::vector<std::string>& patterns) const;

  /// Splits a dotted key into parts, honouring "quoted" parts.
  static std::vector<std::string> split_key(std::string_view key);

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
  std::filesystem::path path_;
  std::string source_;
};

}  // namespace mk
