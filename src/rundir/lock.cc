#include "rundir/lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "rundir/clock.h"

namespace mk::rundir {

namespace fs = std::filesystem;

namespace {

std::string errno_text(int e) { return std::strerror(e); }

std::string hostname() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

uint64_t proc_start_of(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return 0;
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Field 2 (comm) is in parentheses and may hold spaces; fields after it are plain.
  size_t close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(s.substr(close + 1));
  std::string field;
  // After ')' come fields 3.. ; starttime is field 22, i.e. the 20th token here.
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return 0;
  }
  try {
    return std::stoull(field);
  } catch (...) {
    return 0;
  }
}

Result<std::string> read_fd(int fd) {
  std::string out;
  char buf[4096];
  off_t off = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error{errno_text(errno)};
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    off += n;
  }
  return out;
}

std::string describe_age(std::chrono::system_clock::duration d) {
  auto s = std::chrono::duration_cast<std::chrono::seconds>(d).count();
  if (s < 120) return std::to_string(s) + "s";
  if (s < 7200) return std::to_string(s / 60) + "m";
  return std::to_string(s / 3600) + "h";
}

}  // namespace

uint64_t own_proc_start() { return proc_start_of(static_cast<int>(::getpid())); }

bool process_alive(int pid, uint64_t proc_start) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A zombie has exited: it holds nothing any more.
  std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
  if (st) {
    std::string s((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
    size_t close = s.rfind(')');
    if (close != std::string::npos && close + 2 < s.size() && (s[close + 2] == 'Z' || s[close + 2] == 'X'))
      return false;
  }
  if (proc_start != 0) {
    uint64_t now = proc_start_of(pid);
    if (now != 0 && now != proc_start) return false;  // the pid was reused by a later process
  }
  return true;
}

Result<LockInfo> parse_lock(const std::string& content) {
  nlohmann::json j = nlohmann::json::parse(content, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error{"not a JSON object"};
  LockInfo info;
  try {
    info.pid = j.at("pid").get<int>();
    info.host = j.at("host").get<std::string>();
    info.started = j.value("started", "");
    info.heartbeat = j.value("heartbeat", "");
    info.proc_start = j.value("proc_start", uint64_t{0});
  } catch (const nlohmann::json::exception& e) {
    return Error{std::string("missing or wrong field: ") + e.what()};
  }
  return info;
}

Result<std::unique_ptr<RunLock>> RunLock::acquire(const fs::path& path, std::vector<std::string>* notices) {
  return acquire(path, notices, Options{});
}

Result<std::unique_ptr<RunLock>> RunLock::acquire(const fs::path& path, std::vector<std::string>* notices,
                                                  Options opts) {
  const std::string dir = path.parent_path().string();
  const std::string in_use_hint = "; wait for it, or remove " + path.string() + " if that process is gone";
  const std::string me_host = hostname();
  // A holder that releases unlinks the file; if we flocked the old inode just
  // before that, the lock we hold is on a file nobody else sees: retry.
  for (int attempt = 0; attempt < 20; ++attempt) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Error{"cannot create lock file " + path.string() + ": " + errno_text(errno)};
    bool flocked = true;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int e = errno;
      if (e == EWOULDBLOCK) {
        auto content = read_fd(fd);
        ::close(fd);
        auto info = content ? parse_lock(*content) : Result<LockInfo>(Error{content.error()});
        if (!info) return Error{"run " + dir + " is in use by another process (its lock is being written)" + in_use_hint};
        std::string where = info->host == me_host ? "" : " on host " + info->host;
        return Error{"run " + dir + " is in use by pid " + std::to_string(info->pid) + where + " (started " +
                     info->started + ")" + in_use_hint};
      }
      // File systems without flock (some network mounts): rely on the content alone.
      flocked = false;
    }
    struct stat by_fd {}, by_path {};
    if (::fstat(fd, &by_fd) != 0 || ::stat(path.c_str(), &by_path) != 0 || by_fd.st_ino != by_path.st_ino ||
        by_fd.st_dev != by_path.st_dev) {
      ::close(fd);
      continue;
    }
    auto content = read_fd(fd);
    if (!content) {
      ::close(fd);
      return Error{"cannot read lock file " + path.string() + ": " + content.error()};
    }
    if (!content->empty()) {
      auto info = parse_lock(*content);
      auto now = std::chrono::system_clock::now();
      if (!info) {
        // Unreadable: a holder died while writing it, or (without flock) is writing it now.
        auto age = now - std::chrono::file_clock::to_sys(fs::last_write_time(path));
        if (!flocked && age < opts.stale_after) {
          ::close(fd);
          return Error{"run " + dir + " is in use (its lock file is unreadable and was changed " + describe_age(age) +
                       " ago)" + in_use_hint};
        }
        if (notices) notices->push_back("replaced an unreadable lock file " + path.string() + " (" + info.error() + ")");
      } else if (info->pid == static_cast<int>(::getpid()) && info->host == me_host && !flocked) {
        ::close(fd);
        return Error{"run " + dir + " is already open in this process"};
      } else if (info->host == me_host) {
        if (process_alive(info->pid, info->proc_start) && info->pid != static_cast<int>(::getpid())) {
          ::close(fd);
          return Error{"run " + dir + " is in use by pid " + std::to_string(info->pid) + " (started " + info->started +
                       ")" + in_use_hint};
        }
        if (notices)
          notices->push_back("took over a stale lock on " + dir + " held by pid " + std::to_string(info->pid) +
                             " (dead; started " + info->started + ")");
      } else {
        auto hb = parse_iso8601_utc(info->heartbeat);
        auto age = hb ? now - *hb : std::chrono::system_clock::duration::max();
        if (hb && age < opts.stale_after) {
          ::close(fd);
          return Error{"run " + dir + " is in use by pid " + std::to_string(info->pid) + " on host " + info->host +
                       " (started " + info->started + ", last heartbeat " + describe_age(age) +
                       " ago); wait for it, or remove " + path.string() + " if that machine is gone"};
        }
        if (notices)
          notices->push_back("took over a stale lock on " + dir + " held by pid " + std::to_string(info->pid) +
                             " on host " + info->host + " (last heartbeat " +
                             (hb ? describe_age(age) + " ago" : std::string("unknown")) + ")");
      }
    }
    std::unique_ptr<RunLock> lock(new RunLock());
    lock->path_ = path;
    lock->fd_ = fd;
    lock->opts_ = opts;
    lock->info_.pid = static_cast<int>(::getpid());
    lock->info_.host = me_host;
    lock->info_.started = iso8601_utc();
    lock->info_.heartbeat = lock->info_.started;
    lock->info_.proc_start = own_proc_start();
    if (Status st = lock->write_content(); !st.ok()) return Error{st.error()};
    lock->thread_ = std::thread([l = lock.get()] { l->heartbeat_loop(); });
    return lock;
  }
  return Error{"cannot take the lock " + path.string() + ": it keeps being replaced by another process"};
}

Status RunLock::write_content() {
  nlohmann::json j = {{"pid", info_.pid},
                      {"host", info_.host},
                      {"started", info_.started},
                      {"heartbeat", info_.heartbeat},
                      {"proc_start", info_.proc_start}};
  std::string s = j.dump() + "\n";
  if (::pwrite(fd_, s.data(), s.size(), 0) != static_cast<ssize_t>(s.size()) ||
      ::ftruncate(fd_, static_cast<off_t>(s.size())) != 0 || ::fsync(fd_) != 0)
    return Error{"cannot write lock file " + path_.string() + ": " + errno_text(errno)};
  return Status::Ok();
}

Status RunLock::heartbeat() {
  std::lock_guard g(mu_);
  info_.heartbeat = iso8601_utc();
  return write_content();
}

void RunLock::heartbeat_loop() {
  std::unique_lock g(mu_);
  while (!stop_) {
    if (cv_.wait_for(g, opts_.heartbeat_interval, [this] { return stop_; })) break;
    info_.heartbeat = iso8601_utc();
    (void)write_content();  // a failed heartbeat only makes the lock look older to other hosts
  }
}

RunLock::~RunLock() {
  {
    std::lock_guard g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) {
    ::unlink(path_.c_str());  // while still holding the flock, so no one takes a file about to vanish
    ::close(fd_);
  }
}

}  // namespace mk::rundir
