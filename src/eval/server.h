// One worker server process (protocol v1): start, hello handshake, one request
// at a time with a deadline, and a kill that takes every descendant with it.
// Not thread-safe except kill_now(), which another thread may call to abort a
// request in flight.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/result.h"
#include "util/subprocess.h"

namespace mk::eval {

struct ServerConfig {
  std::vector<std::string> argv;        ///< the server command (without any unshare prefix)
  Env env;                              ///< full environment (scrubbed by the caller)
  std::filesystem::path cwd;            ///< private directory, created by the caller
  std::filesystem::path log_path;       ///< the server's stderr is appended here
  std::string token;                    ///< tags every descendant (proc.h)
  bool pid_namespace = false;           ///< run inside `unshare --pid --fork --kill-child --mount-proc`
  bool test_mode = false;               ///< the server runs with --test-mode (Triton optional)
  bool require_gpu = false;             ///< a hello with "cuda": false is an environment error
  std::string python;                   ///< for messages ("no torch in <python>")
  std::chrono::milliseconds hello_timeout{std::chrono::seconds(180)};
};

struct Hello {
  int protocol = 0;
  std::string python, torch, triton;    ///< versions; empty when the worker reported null
  bool cuda = false;
  bool test_mode = false;
  nlohmann::json raw;
};

class Server {
 public:
  /// Starts the server and validates its hello. Errors are environment
  /// problems (interpreter missing, no torch, wrong protocol, no hello).
  static Result<std::unique_ptr<Server>> start(const ServerConfig& cfg);
  ~Server();  ///< kills the whole tree

  enum class Outcome { kAnswered, kTimeout, kDied, kProtocolError };
  struct Reply {
    Outcome outcome = Outcome::kDied;
    nlohmann::json message;   ///< the final message when kAnswered
    std::string detail;       ///< what went wrong otherwise (exit status, the bad line)
  };
  using ProgressFn = std::function<void(const nlohmann::json&)>;

  /// Sends one request (an "id" is added) and waits for its final message. On
  /// anything but kAnswered the server is unusable: kill() it.
  Reply call(nlohmann::json request, std::chrono::milliseconds timeout, const ProgressFn& progress = {});

  /// Kills the server and every descendant (process group, tree, token) and reaps it.
  void kill();
  /// Same from another thread, to abort a call in flight (the call then sees kDied).
  void kill_now();
  /// Asks for a clean exit, waits up to grace, then kill().
  void shutdown(std::chrono::milliseconds grace);

  bool alive();
  pid_t pid() const { return pid_; }
  const Hello& hello() const { return hello_; }
  /// The last n bytes of the server's log, secrets redacted.
  std::string log_tail(size_t n = 1500) const;

 private:
  Server() = default;
  std::string exit_description();

  ServerConfig cfg_;
  std::unique_ptr<Subprocess> proc_;
  pid_t pid_ = -1;
  Hello hello_;
  long long next_id_ = 1;
  std::atomic<bool> killed_{false};
  std::mutex kill_mu_;
};

/// True when `unshare --pid --fork --kill-child --mount-proc` works here (root
/// or user namespaces). Probed once per process.
bool pid_namespace_available();

}  // namespace mk::eval
