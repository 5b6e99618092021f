#include "util/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace mk {

namespace {

using Clock = std::chrono::steady_clock;

// A child may exit without reading all of its stdin (an `exec:` LLM command
// that ignores the request, a crashed worker). Writing to that pipe raises
// SIGPIPE, whose default action kills the whole program. While one of these
// guards lives, the calling thread has SIGPIPE blocked, so the write fails with
// EPIPE instead; the destructor discards the pending signal and restores the mask.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
    was_blocked_ = sigismember(&old_, SIGPIPE) == 1;
  }
  ~SigpipeGuard() {
    if (was_blocked_) return;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    struct timespec zero = {0, 0};
    while (::sigtimedwait(&set, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t old_;
  bool was_blocked_ = false;
};

struct Prepared {
  std::vector<std::string> env_strings;
  std::vector<char*> argv, envp;
};

Prepared prepare(const SubprocessOptions& opts) {
  Prepared p;
  for (const auto& a : opts.argv) p.argv.push_back(const_cast<char*>(a.c_str()));
  p.argv.push_back(nullptr);
  if (opts.env) {
    for (const auto& [k, v] : *opts.env) p.env_strings.push_back(k + "=" + v);
    for (auto& s : p.env_strings) p.envp.push_back(s.data());
    p.envp.push_back(nullptr);
  }
  return p;
}

// Runs in the child after fork(): only async-signal-safe calls until exec.
[[noreturn]] void exec_child(const Prepared& p, const SubprocessOptions& opts, int in_fd, int out_fd,
                             int err_fd, int report_fd) {
  ::setpgid(0, 0);
  ::signal(SIGPIPE, SIG_DFL);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (::dup2(in_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) _exit(127);
  if (!opts.cwd.empty() && ::chdir(opts.cwd.c_str()) != 0) {
    int e = errno;
    (void)!::write(report_fd, &e, sizeof e);
    _exit(127);
  }
  char** envp = opts.env ? const_cast<char**>(p.envp.data()) : environ;
  ::execvpe(p.argv[0], p.argv.data(), envp);
  int e = errno;
  (void)!::write(report_fd, &e, sizeof e);
  _exit(127);
}

// fork+exec with the given child fds. Returns pid or -1 with *err filled.
pid_t spawn(const SubprocessOptions& opts, int in_fd, int out_fd, int err_fd, std::string* err) {
  if (opts.argv.empty()) {
    *err = "no command given";
    return -1;
  }
  Prepared p = prepare(opts);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    *err = std::string("pipe: ") + std::strerror(errno);
    return -1;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    *err = std::string("fork: ") + std::strerror(errno);
    ::close(report[0]);
    ::close(report[1]);
    return -1;
  }
  if (pid == 0) {
    ::close(report[0]);
    exec_child(p, opts, in_fd, out_fd, err_fd, report[1]);
  }
  ::setpgid(pid, pid);  // also from the parent, to win the race with kill_group
  ::close(report[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == sizeof child_errno) {
    ::waitpid(pid, nullptr, 0);
    *err = "cannot run '" + opts.argv[0] + "'" +
           (opts.cwd.empty() ? "" : " in " + opts.cwd.string()) + ": " + std::strerror(child_errno);
    return -1;
  }
  return pid;
}

void decode_status(int status, int* exit_code, int* term_signal) {
  if (WIFEXITED(status)) *exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) *term_signal = WTERMSIG(status);
}

}  // namespace

std::string SubprocessResult::describe() const {
  if (!spawn_error.empty()) return spawn_error;
  if (timed_out) return "timed out";
  if (cancelled) return "cancelled";
  if (term_signal) return "killed by signal " + std::to_string(term_signal) + " (" + strsignal(term_signal) + ")";
  return "exit " + std::to_string(exit_code);
}

SubprocessResult run_subprocess(const SubprocessOptions& opts, const std::string& stdin_data,
                                std::chrono::milliseconds timeout, const std::function<bool()>& cancelled) {
  SubprocessResult r;
  int in[2], out[2], errp[2];
  if (::pipe2(in, O_CLOEXEC) || ::pipe2(out, O_CLOEXEC) || ::pipe2(errp, O_CLOEXEC)) {
    r.spawn_error = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  pid_t pid = spawn(opts, in[0], out[1], errp[1], &r.spawn_error);
  ::close(in[0]);
  ::close(out[1]);
  ::close(errp[1]);
  if (pid < 0) {
    ::close(in[1]);
    ::close(out[0]);
    ::close(errp[0]);
    return r;
  }
  ::fcntl(in[1], F_SETFL, O_NONBLOCK);
  size_t written = 0;
  int in_fd = in[1];
  if (stdin_data.empty()) {
    ::close(in_fd);
    in_fd = -1;
  }
  int out_fd = out[0], err_fd = errp[0];
  auto deadline = Clock::now() + timeout;
  char buf[65536];
  while (out_fd >= 0 || err_fd >= 0) {
    pollfd fds[3];
    int nf = 0;
    int idx_out = -1, idx_err = -1, idx_in = -1;
    if (out_fd >= 0) { fds[nf] = {out_fd, POLLIN, 0}; idx_out = nf++; }
    if (err_fd >= 0) { fds[nf] = {err_fd, POLLIN, 0}; idx_err = nf++; }
    if (in_fd >= 0) { fds[nf] = {in_fd, POLLOUT, 0}; idx_in = nf++; }
    int wait_ms = -1;
    if (timeout.count() > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        r.timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(std::min<long long>(left, 1000));
    }
    if (cancelled) {
      if (cancelled()) {
        r.cancelled = true;
        break;
      }
      wait_ms = wait_ms < 0 ? 50 : std::min(wait_ms, 50);
    }
    int rc = ::poll(fds, nf, wait_ms);
    if (rc < 0 && errno != EINTR) break;
    if (rc <= 0) continue;
    auto drain = [&](int idx, int& fd, std::string& sink) {
      if (idx < 0 || !(fds[idx].revents & (POLLIN | POLLHUP | POLLERR))) return;
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) sink.append(buf, static_cast<size_t>(n));
      else if (n == 0 || (errno != EINTR && errno != EAGAIN)) { ::close(fd); fd = -1; }
    };
    drain(idx_out, out_fd, r.out);
    drain(idx_err, err_fd, r.err);
    if (idx_in >= 0 && (fds[idx_in].revents & (POLLOUT | POLLERR | POLLHUP))) {
      SigpipeGuard no_sigpipe;
      ssize_t n = ::write(in_fd, stdin_data.data() + written, stdin_data.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) written = stdin_data.size();
      if (written >= stdin_data.size()) { ::close(in_fd); in_fd = -1; }
    }
  }
  if (r.timed_out || r.cancelled) ::kill(-pid, SIGKILL);
  if (in_fd >= 0) ::close(in_fd);
  if (out_fd >= 0) ::close(out_fd);
  if (err_fd >= 0) ::close(err_fd);
  int status = 0;
  // Output closed, but the child may still run (it closed its stdout and stderr):
  // keep enforcing the deadline and the cancel predicate while waiting for it.
  for (;;) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) break;
    if (w == 0) {
      bool over = timeout.count() > 0 && Clock::now() >= deadline;
      if (!r.timed_out && !r.cancelled && (over || (cancelled && cancelled()))) {
        (over ? r.timed_out : r.cancelled) = true;
        ::kill(-pid, SIGKILL);
      }
      ::poll(nullptr, 0, 20);
    }
  }
  decode_status(status, &r.exit_code, &r.term_signal);
  if (!r.timed_out && !r.cancelled) ::kill(-pid, SIGKILL);  // leftovers in its group die with it
  return r;
}

std::unique_ptr<Subprocess> Subprocess::start(const SubprocessOptions& opts, std::string* err) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) || ::pipe2(out, O_CLOEXEC)) {
    *err = std::string("pipe: ") + std::strerror(errno);
    return nullptr;
  }
  std::string errpath = opts.stderr_path.empty() ? "/dev/null" : opts.stderr_path.string();
  int err_fd = ::open(errpath.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (err_fd < 0) {
    *err = "cannot open " + errpath + ": " + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<Subprocess> sp(new Subprocess());
  sp->pid_ = spawn(opts, in[0], out[1], err_fd, err);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err_fd);
  sp->in_fd_ = in[1];
  sp->out_fd_ = out[0];
  if (sp->pid_ < 0) return nullptr;  // destructor closes the fds
  return sp;
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !exited_) terminate(std::chrono::milliseconds(0));
  if (in_fd_ >= 0) ::close(in_fd_);
  if (out_fd_ >= 0) ::close(out_fd_);
}

bool Subprocess::write_all(const std::string& data) {
  SigpipeGuard no_sigpipe;
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(in_fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) n = ::write(in_fd_, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}

Subprocess::Read Subprocess::read_line(std::string* line, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  char buf[65536];
  for (;;) {
    if (auto nl = buf_.find('\n'); nl != std::string::npos) {
      line->assign(buf_, 0, nl);
      buf_.erase(0, nl + 1);
      return Read::kLine;
    }
    if (out_fd_ < 0) return Read::kEof;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return Read::kTimeout;
    pollfd pfd{out_fd_, POLLIN, 0};
    int rc = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (rc < 0 && errno != EINTR) return Read::kEof;
    if (rc <= 0) continue;
    ssize_t n = ::read(out_fd_, buf, sizeof buf);
    if (n > 0) {
      buf_.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      ::close(out_fd_);
      out_fd_ = -1;
      if (!buf_.empty()) {  // a last line without newline
        line->swap(buf_);
        buf_.clear();
        return Read::kLine;
      }
      return Read::kEof;
    }
  }
}

void Subprocess::kill_group(int sig) {
  if (pid_ > 0) ::kill(-pid_, sig);
}

bool Subprocess::poll_exited() {
  if (exited_) return true;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exited_ = true;
    decode_status(status, &exit_code_, &term_signal_);
  }
  return exited_;
}

void Subprocess::terminate(std::chrono::milliseconds grace) {
  if (pid_ <= 0 || exited_) return;
  if (grace.count() > 0) {
    kill_group(SIGTERM);
    auto deadline = Clock::now() + grace;
    while (Clock::now() < deadline) {
      if (poll_exited()) break;
      ::usleep(20000);
    }
  }
  kill_group(SIGKILL);
  if (!exited_) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {}
    exited_ = true;
    decode_status(status, &exit_code_, &term_signal_);
  }
}

}  // namespace mk
