// Child processes: run-to-completion with a deadline, and long-lived children
// spoken to over pipes (the worker pool, exec: providers). Every child gets its
// own process group so a deadline kills it and everything it started.
#pragma once

#include <functional>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mk {

using Env = std::map<std::string, std::string>;

struct SubprocessOptions {
  std::vector<std::string> argv;           ///< argv[0] is looked up in PATH
  std::optional<Env> env;                  ///< full environment; nullopt inherits ours
  std::filesystem::path cwd;               ///< empty: inherit
  std::filesystem::path stderr_path;       ///< Subprocess only: stderr goes here (empty: /dev/null)
};

struct SubprocessResult {
  int exit_code = -1;     ///< valid when exited normally
  int term_signal = 0;    ///< non-zero when killed by a signal
  bool timed_out = false;
  bool cancelled = false; ///< stopped because the cancel predicate said so
  std::string out, err;   ///< captured stdout and stderr
  std::string spawn_error;  ///< non-empty when the child could not be started
  bool ok() const { return spawn_error.empty() && !timed_out && !cancelled && term_signal == 0 && exit_code == 0; }
  /// A one-line description: "exit 3", "killed by signal 9", "timed out after 5s".
  std::string describe() const;
};

/// Runs argv to completion, feeding stdin_data, capturing stdout/stderr. On
/// timeout (0 = none), or as soon as `cancelled` (polled every 50 ms when set)
/// returns true, the whole process group gets SIGKILL.
SubprocessResult run_subprocess(const SubprocessOptions& opts, const std::string& stdin_data = {},
                                std::chrono::milliseconds timeout = std::chrono::milliseconds(0),
                                const std::function<bool()>& cancelled = {});

/// A long-lived child with line-oriented stdin/stdout pipes.
class Subprocess {
 public:
  static std::unique_ptr<Subprocess> start(const SubprocessOptions& opts, std::string* err);
  ~Subprocess();  ///< kills the process group and reaps
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  /// Writes all of data to the child's stdin. False if the child closed it.
  bool write_all(const std::string& data);

  enum class Read { kLine, kTimeout, kEof };
  /// Reads one '\n'-terminated line (without the newline) within timeout.
  Read read_line(std::string* line, std::chrono::milliseconds timeout);

  /// Sends sig to the whole process group.
  void kill_group(int sig);
  /// Non-blocking: true once the child has exited (fills exit_code/term_signal).
  bool poll_exited();
  /// Blocks until exit; returns after SIGKILL if it takes longer than grace.
  void terminate(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));

  pid_t pid() const { return pid_; }
  int exit_code() const { return exit_code_; }
  int term_signal() const { return term_signal_; }

 private:
  Subprocess() = default;
  pid_t pid_ = -1;
  int in_fd_ = -1, out_fd_ = -1;
  std::string buf_;
  bool exited_ = false;
  int exit_code_ = -1, term_signal_ = 0;
};

}  // namespace mk
