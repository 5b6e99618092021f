#include "rundir/run_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "rundir/clock.h"
#include "rundir/event_log.h"
#include "rundir/lock.h"
#include "rundir/secrets.h"
#include "util/fs.h"

namespace mk::rundir {

namespace fs = std::filesystem;

namespace {

std::string errno_text(int e) { return std::strerror(e); }

// Dumps without throwing on invalid UTF-8 (LLM text and error messages can hold any bytes).
std::string dump(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// rel must be a relative path that stays inside the run directory.
Status check_relative(const fs::path& rel, std::string_view what) {
  if (rel.empty()) return Error{std::string(what) + ": empty path"};
  if (rel.is_absolute()) return Error{std::string(what) + " '" + rel.string() + "' must be relative to the run directory"};
  for (const auto& part : rel) {
    if (part == "..") return Error{std::string(what) + " '" + rel.string() + "' must not contain '..'"};
  }
  return Status::Ok();
}

// One path component: a task or candidate id.
Status check_component(const std::string& s, std::string_view what) {
  if (s.empty()) return Error{std::string(what) + " is empty"};
  if (s == "." || s == ".." || s.find('/') != std::string::npos || s.find('\0') != std::string::npos)
    return Error{std::string(what) + " '" + s + "' is not a valid directory name"};
  return Status::Ok();
}

}  // namespace

nlohmann::json to_json(const Versions& v) {
  return {{"mkevolve", v.mkevolve}, {"torch", v.torch},   {"triton", v.triton},          {"gpu", v.gpu},
          {"python", v.python},     {"tf32", v.tf32},     {"run_format", kRunFormat}};
}

std::string shell_quote(const std::string& s) {
  bool plain = !s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") == std::string::npos;
  if (plain) return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

fs::path RunDir::topology_rel(int iteration) { return fs::path("topology") / ("iteration-" + std::to_string(iteration) + ".json"); }

namespace {
/// The first entry of dir other than its lock file, or "".
std::string first_entry(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename() != "lock") return e.path().filename().string();
  }
  return {};
}
}  // namespace

Status RunDir::creatable(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::Ok();
  if (!fs::is_directory(dir, ec)) return Error{"cannot create run directory " + dir.string() + ": it exists and is not a directory"};
  if (std::string first = first_entry(dir); !first.empty()) {
    std::string hint = fs::exists(dir / "config.json") ? "; it holds a run: continue it with 'mkevolve run --resume " +
                                                             shell_quote(dir.string()) + "', or choose a new directory"
                                                       : "; choose a new or empty directory";
    return Error{"cannot create run directory " + dir.string() + ": it is not empty (has " + first + ")" + hint};
  }
  return Status::Ok();
}

Result<std::unique_ptr<RunDir>> RunDir::create(const fs::path& dir, const nlohmann::json& config, const Versions& v) {
  std::error_code ec;
  if (Status st = creatable(dir); !st) return Error{st.error()};
  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) return Error{"cannot create run directory " + dir.string() + ": " + ec.message()};
  }
  auto nonempty = [&]() { return first_entry(dir); };
  std::unique_ptr<RunDir> rd(new RunDir());
  rd->root_ = dir;
  auto lock = RunLock::acquire(dir / "lock", &rd->notices_);
  if (!lock) return Error{lock.error()};
  rd->lock_ = std::move(*lock);
  // Another process may have created the run between our check and the lock.
  if (std::string first = nonempty(); !first.empty())
    return Error{"cannot create run directory " + dir.string() + ": another process created a run in it first"};

  std::vector<std::string> dropped;
  rd->config_ = strip_secrets(config.is_null() ? nlohmann::json::object() : config, &dropped);
  for (const auto& d : dropped)
    rd->notices_.push_back("config: left out '" + d + "' (looks like a credential; run directories never hold secrets)");
  rd->versions_ = to_json(v);
  rd->versions_["recorded"] = iso8601_utc();
  for (const char* sub : {"cache/llm", "cache/eval", "candidates", "topology"}) {
    fs::create_directories(dir / sub, ec);
    if (ec) return Error{"cannot create " + (dir / sub).string() + ": " + ec.message()};
  }
  if (Status st = rd->write_json("versions.json", rd->versions_); !st.ok()) return Error{st.error()};
  if (Status st = rd->open_log(); !st.ok()) return Error{st.error()};
  // config.json last: its presence marks a complete run directory.
  if (Status st = rd->write_json("config.json", rd->config_); !st.ok()) return Error{st.error()};
  return rd;
}

Result<std::unique_ptr<RunDir>> RunDir::open(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Error{"cannot open run " + dir.string() + ": no such directory"};
  if (!fs::is_directory(dir, ec)) return Error{"cannot open run " + dir.string() + ": not a directory"};
  if (!fs::exists(dir / "config.json", ec))
    return Error{"cannot open run " + dir.string() + ": not a run directory (no config.json)"};
  std::unique_ptr<RunDir> rd(new RunDir());
  rd->root_ = dir;
  auto lock = RunLock::acquire(dir / "lock", &rd->notices_);
  if (!lock) return Error{lock.error()};
  rd->lock_ = std::move(*lock);

  auto config = read_json_file(dir / "config.json");
  if (!config) return Error{"cannot open run: " + config.error()};
  rd->config_ = std::move(*config);
  if (fs::exists(dir / "versions.json", ec)) {
    auto versions = read_json_file(dir / "versions.json");
    if (!versions) return Error{"cannot open run: " + versions.error()};
    rd->versions_ = std::move(*versions);
    // A newer mkevolve's run: its events or files may mean what this binary
    // cannot tell. Refuse before anything is read, written or paid for.
    if (auto f = rd->versions_.find("run_format"); f != rd->versions_.end() && f->is_number_integer() &&
                                                    f->get<int>() > kRunFormat) {
      std::string by = rd->versions_.value("mkevolve", std::string());
      return Error{"cannot open run " + dir.string() + ": it was written by a newer mkevolve" +
                       (by.empty() ? std::string() : " (" + by + ")") + ", in run format " +
                       std::to_string(f->get<int>()) + "; this mkevolve reads formats up to " +
                       std::to_string(kRunFormat) + ". Use the newer mkevolve for it",
                   ErrorKind::kBadInput};
    }
  } else {
    rd->versions_ = nlohmann::json::object();
    rd->notices_.push_back((dir / "versions.json").string() + " is missing; versions will be unknown in reports");
  }

  const fs::path log = rd->events_path();
  if (fs::exists(log, ec)) {
    auto content = read_file(log);
    if (!content) return Error{"cannot open run: " + content.error()};
    EventLogScan scan = scan_event_log(*content);
    if (scan.bad_line) {
      return Error{log.string() + ": line " + std::to_string(scan.bad_line) + " is " + scan.bad_reason +
                   ". A crash only ever damages the last line, so this file was changed by something else; "
                   "fix or delete that line by hand, then resume again"};
    }
    if (scan.torn_tail) {
      int n = 1;
      while (fs::exists(log.string() + ".corrupt-" + std::to_string(n), ec)) ++n;
      fs::path aside = log.string() + ".corrupt-" + std::to_string(n);
      if (Status st = write_file_atomic(aside, scan.tail); !st.ok())
        return Error{"cannot move the damaged last line of " + log.string() + " aside: " + st.error()};
      if (::truncate(log.c_str(), static_cast<off_t>(scan.good_bytes)) != 0)
        return Error{"cannot cut the damaged last line off " + log.string() + ": " + errno_text(errno)};
      rd->notices_.push_back(log.string() + ": the last line (line " + std::to_string(scan.tail_line) +
                             ", " + std::to_string(scan.tail.size()) +
                             " bytes) was incomplete, from a crash during a write; moved it to " + aside.string() +
                             " and continued from the event before it");
    }
    rd->events_ = std::move(scan.events);
    for (const auto& e : rd->events_) {
      if (e.contains("seq") && e["seq"].is_number_integer()) rd->next_seq_ = std::max(rd->next_seq_, e["seq"].get<int64_t>() + 1);
    }
    rd->next_seq_ = std::max<int64_t>(rd->next_seq_, static_cast<int64_t>(rd->events_.size()));
    if (Status st = rd->open_log(); !st.ok()) return Error{st.error()};
    if (scan.missing_newline && !scan.torn_tail) {
      if (::write(rd->log_fd_, "\n", 1) != 1 || ::fsync(rd->log_fd_) != 0)
        return Error{"cannot repair " + log.string() + " (add the missing final newline): " + errno_text(errno)};
    }
  } else {
    rd->notices_.push_back(log.string() + " was missing; started an empty event log");
    if (Status st = rd->open_log(); !st.ok()) return Error{st.error()};
  }
  return rd;
}

Status RunDir::open_log() {
  const fs::path log = events_path();
  log_fd_ = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd_ < 0) return Error{"cannot open " + log.string() + " for writing: " + errno_text(errno)};
  if (::fsync(log_fd_) != 0) return Error{"cannot fsync " + log.string() + ": " + errno_text(errno)};
  int dfd = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

RunDir::~RunDir() {
  if (log_fd_ >= 0) ::close(log_fd_);
  lock_.reset();
}

Status RunDir::log_event(const records::Event& record) {
  if (records::type_of(record).empty())
    return Error{"log_event: an event must be a JSON object with a string \"type\""};
  std::lock_guard g(mu_);
  const fs::path log = events_path();
  if (!broken_.empty())
    return Error{"cannot append to " + log.string() + ": the log has been unusable since an earlier failure (" + broken_ + ")"};
  records::Event logged = record;
  records::stamp(logged, next_seq_, iso8601_utc());
  const nlohmann::json event = records::to_json(logged);
  std::string line = dump(event) + "\n";
  off_t before = ::lseek(log_fd_, 0, SEEK_END);
  const char* p = line.data();
  size_t left = line.size();
  int err = 0;
  while (left > 0) {
    ssize_t n = ::write(log_fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  const std::string resume = "; the run stops here, and 'mkevolve run --resume " + shell_quote(root_.string()) +
                             "' continues it once the problem is fixed";
  if (err != 0) {
    std::string what = errno_text(err);
    // Take back a partial line, so the log stays a sequence of whole events.
    if (before >= 0 && ::ftruncate(log_fd_, before) != 0) {
      broken_ = what;
      return Error{"cannot append to " + log.string() + ": " + what + " (and could not remove the partial line: " +
                   errno_text(errno) + ")" + resume};
    }
    return Error{"cannot append to " + log.string() + ": " + what + resume};
  }
  if (::fsync(log_fd_) != 0) {
    // After a failed fsync the kernel may have dropped the data: nothing after it can be trusted.
    broken_ = "fsync failed: " + errno_text(errno);
    return Error{"cannot fsync " + log.string() + ": " + errno_text(errno) + resume};
  }
  ++next_seq_;
  events_.push_back(event);
  for (const auto& fn : listeners_) fn(logged);
  return Status::Ok();
}

std::vector<nlohmann::json> RunDir::events() const {
  std::lock_guard g(mu_);
  return events_;
}

void RunDir::add_listener(std::function<void(const records::Event&)> fn) {
  std::lock_guard g(mu_);
  listeners_.push_back(std::move(fn));
}

Status RunDir::write_text(const fs::path& rel, std::string_view text) {
  if (Status st = check_relative(rel, "run file"); !st.ok()) return st;
  return write_file_atomic(root_ / rel, text);
}

Status RunDir::write_json(const fs::path& rel, const nlohmann::json& j) { return write_text(rel, dump(j, 2) + "\n"); }

Result<fs::path> RunDir::store_candidate(const std::string& task, const std::string& id,
                                         const std::map<std::string, std::string>& files, const nlohmann::json& result) {
  if (Status st = check_component(task, "task"); !st.ok()) return Error{"store_candidate: " + st.error()};
  if (Status st = check_component(id, "candidate id"); !st.ok()) return Error{"store_candidate: " + st.error()};
  const fs::path rel = fs::path("candidates") / task / id;
  for (const auto& [name, text] : files) {
    if (Status st = check_relative(name, "candidate file"); !st.ok()) return Error{"store_candidate: " + st.error()};
    if (name == "result.json") return Error{"store_candidate: a candidate file may not be named result.json"};
  }
  for (const auto& [name, text] : files) {
    if (Status st = write_text(rel / name, text); !st.ok()) return Error{st.error()};
  }
  if (Status st = write_json(rel / "result.json", result); !st.ok()) return Error{st.error()};
  return root_ / rel;
}

std::string RunDir::resume_command() const { return "mkevolve run --resume " + shell_quote(root_.string()); }

}  // namespace mk::rundir
