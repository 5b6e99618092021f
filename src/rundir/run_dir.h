// The run directory: everything one MKEvolve run writes, in one place, durably.
//
//   DIR/config.json      the run's settings (never secrets)
//   DIR/versions.json    mkevolve, torch, triton, GPU, python, TF32 setting
//   DIR/events.jsonl     the append-only event log (see run/events.h), fsync'd per event
//   DIR/lock             who is writing the run (see run/lock.h)
//   DIR/candidates/<task>/<id>/   every candidate's files and result.json
//   DIR/topology/iteration-<t>.json  the decomposition used in iteration t
//   DIR/cache/llm, DIR/cache/eval   response and evaluation caches
//   DIR/solution/        the final package;  DIR/report.{md,html}
//
// docs/RUN-DIRECTORY.md describes the layout and the event schema for users.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "records/events.h"
#include "util/result.h"

namespace mk::rundir {

class RunLock;

/// Software and settings a run's numbers depend on; stored in versions.json.
struct Versions {
  std::string mkevolve, torch, triton, gpu, python;
  bool tf32 = false;  ///< TF32 for matmul/cuDNN in baselines and candidates (MKEvolve turns it off)
};

nlohmann::json to_json(const Versions& v);

/// The run directory's format: its layout, config.json, summary.json and the
/// event schema of run/events.h. versions.json records it as "run_format";
/// a directory without it was written before the number existed (format 0, read
/// as format 1 is). Raise it when a reader of the old format would misread the
/// new one; open() refuses a directory of a newer format than this binary reads.
inline constexpr int kRunFormat = 1;

class RunDir {
 public:
  /// Ok when DIR may hold a new run (absent, or an empty directory); else why
  /// not, in words for the user (their input's fault, never the machine's).
  static Status creatable(const std::filesystem::path& dir);
  /// Creates DIR (it must not exist, or be empty) and takes its lock; writes
  /// config.json (keys that look like credentials are dropped, with a notice)
  /// and versions.json, and an empty events.jsonl.
  static Result<std::unique_ptr<RunDir>> create(const std::filesystem::path& dir, const nlohmann::json& config,
                                                const Versions& v);

  /// Opens an existing run to continue it: takes the lock (a stale one is taken
  /// over, with a notice), then checks events.jsonl. A torn final line is moved
  /// to events.jsonl.corrupt-<n> (notice); a bad line in the middle is an error.
  static Result<std::unique_ptr<RunDir>> open(const std::filesystem::path& dir);

  ~RunDir();
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path llm_cache_dir() const { return root_ / "cache" / "llm"; }
  std::filesystem::path eval_cache_dir() const { return root_ / "cache" / "eval"; }
  std::filesystem::path candidates_dir() const { return root_ / "candidates"; }
  std::filesystem::path solution_dir() const { return root_ / "solution"; }
  std::filesystem::path events_path() const { return root_ / "events.jsonl"; }
  /// Relative path of iteration t's topology snapshot: "topology/iteration-<t>.json".
  static std::filesystem::path topology_rel(int iteration);

  const nlohmann::json& config() const { return config_; }
  const nlohmann::json& versions() const { return versions_; }

  /// What create/open had to tell the user (stale lock taken over, log repaired,
  /// config keys dropped). The caller prints them.
  std::vector<std::string> notices() const { return notices_; }

  /// Appends one event: sets its "seq" (monotonic from 0) and "ts" (ISO-8601
  /// UTC), writes one line and fsyncs. Thread-safe. On failure (disk full, I/O
  /// error) the log is left without a partial line where possible and the
  /// error says what happened; the caller should stop the run.
  Status log_event(const records::Event& event);

  /// Every event so far (read at open, plus those logged since), in order.
  std::vector<nlohmann::json> events() const;

  /// Called with each event after it is durably logged (status line,
  /// --events-json), its seq and ts set. Listeners run under the log's lock:
  /// they must not call log_event.
  void add_listener(std::function<void(const records::Event&)> fn);

  /// Atomic (temp file + rename) writes under root; rel must stay inside root.
  Status write_text(const std::filesystem::path& rel, std::string_view text);
  Status write_json(const std::filesystem::path& rel, const nlohmann::json& j);

  /// Stores a candidate's source files and eval result in
  /// candidates/<task>/<id>/{files..., result.json}; returns that directory.
  /// result.json is written last, so its presence marks a complete candidate.
  Result<std::filesystem::path> store_candidate(const std::string& task, const std::string& id,
                                                const std::map<std::string, std::string>& files,
                                                const nlohmann::json& result);

  /// "mkevolve run --resume 'DIR'": what to print when a run stops early.
  std::string resume_command() const;

 private:
  RunDir() = default;
  Status open_log();

  std::filesystem::path root_;
  std::unique_ptr<RunLock> lock_;
  nlohmann::json config_, versions_;
  std::vector<std::string> notices_;
  mutable std::mutex mu_;
  std::vector<nlohmann::json> events_;
  int64_t next_seq_ = 0;
  int log_fd_ = -1;
  std::string broken_;  ///< non-empty after a write failure that left the log uncertain
  std::vector<std::function<void(const records::Event&)>> listeners_;
};

/// Quotes s for a POSIX shell when it needs quoting.
std::string shell_quote(const std::string& s);

}  // namespace mk::rundir
