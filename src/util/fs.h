// File helpers: whole-file reads, atomic writes, private temp directories.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace mk {

namespace fs = std::filesystem;

/// Reads a whole file. The error names the path and the reason.
Result<std::string> read_file(const fs::path& path);

/// Reads and parses a JSON file. The error names the path and what is wrong.
Result<nlohmann::json> read_json_file(const fs::path& path);

/// Writes via a temp file in the same directory, fsync, then rename, so readers
/// see either the old or the new content, never a torn file. Creates parent dirs.
Status write_file_atomic(const fs::path& path, std::string_view content);

/// Appends one record and fsyncs it (for append-only logs).
Status append_durable(const fs::path& path, std::string_view record);

/// Why a folder could not be made or written, and what to do about it.
struct WriteFailure {
  /// kBadInput: the path the user gave cannot hold it (read-only, not theirs,
  /// a file in the way): choose another. kMissing: the machine lacks space
  /// (or the cause is unknown): free space, then the same command again.
  ErrorKind kind = ErrorKind::kMissing;
  std::string advice;  ///< one clause: "... is on a read-only file system: choose ..."
};
/// Looks at `dir`, or the nearest folder above it that exists, after a write
/// there failed: read-only file system, permission denied, a file where a
/// folder should be, or a full disk. `flag` names the option that gave the
/// path ("--out"), for the advice.
WriteFailure diagnose_write_failure(const fs::path& dir, const std::string& flag);

/// A directory removed (recursively) on destruction unless keep() was called.
class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "mkevolve");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  void keep() { keep_ = true; }

 private:
  fs::path path_;
  bool keep_ = false;
};

/// Where MKEvolve's run-time files (the Python worker, the prompt templates,
/// the bundled examples) are: $MKEVOLVE_HOME when set; else, for an installed
/// copy (`cmake --install`), the share/mkevolve folder beside the binary's
/// bin/ when it holds the worker; else the source tree the binary was built from.
fs::path install_root();
/// Where install_root() looks, in order, for messages that say where a
/// missing file was looked for.
std::string install_root_search();

}  // namespace mk
