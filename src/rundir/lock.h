// The run lock: DIR/lock stops two processes from writing one run. It holds
// {pid, host, started, heartbeat, proc_start} as JSON and is flock()ed for as
// long as the holder lives, so a crashed holder's lock is released by the
// kernel; the content lets a human (and another host) see who holds it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "util/result.h"

namespace mk::rundir {

/// What a lock file says about its holder.
struct LockInfo {
  int pid = 0;
  std::string host;
  std::string started;     ///< ISO-8601 UTC
  std::string heartbeat;   ///< ISO-8601 UTC, refreshed while the holder runs
  uint64_t proc_start = 0; ///< the holder's start time in clock ticks since boot (Linux), 0 if unknown
};

/// Parses a lock file's content; an error says what is wrong with it.
Result<LockInfo> parse_lock(const std::string& content);

/// True while a process with this pid exists on this host and, when proc_start
/// is known, it is the same process (not a later one that reused the pid).
bool process_alive(int pid, uint64_t proc_start);

/// This process's start time in clock ticks since boot (0 if unknown).
uint64_t own_proc_start();

class RunLock {
 public:
  struct Options {
    std::chrono::milliseconds heartbeat_interval{std::chrono::seconds(30)};
    /// A lock from another host whose heartbeat is older than this is stale.
    std::chrono::milliseconds stale_after{std::chrono::minutes(10)};
  };

  /// Takes the lock at path (creating the file). A stale lock (dead holder on
  /// this host, or an old heartbeat from another host) is taken over and a
  /// message added to *notices. A live holder is an error naming its pid.
  static Result<std::unique_ptr<RunLock>> acquire(const std::filesystem::path& path,
                                                  std::vector<std::string>* notices);
  static Result<std::unique_ptr<RunLock>> acquire(const std::filesystem::path& path,
                                                  std::vector<std::string>* notices, Options opts);

  /// Stops the heartbeat, removes the lock file and releases the lock.
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  /// Rewrites the heartbeat now (the background thread does this periodically).
  Status heartbeat();
  const LockInfo& info() const { return info_; }

 private:
  RunLock() = default;
  Status write_content();
  void heartbeat_loop();

  std::filesystem::path path_;
  int fd_ = -1;
  Options opts_;
  LockInfo info_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace mk::rundir
