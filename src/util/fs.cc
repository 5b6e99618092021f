#include "util/fs.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <fstream>
#include <sstream>

namespace mk {

namespace {

std::string errno_text() { return std::strerror(errno); }

Status write_fd_all(int fd, std::string_view data, const fs::path& path) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error{"cannot write " + path.string() + ": " + errno_text()};
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> read_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return Error{path.string() + ": no such file"};
  if (fs::is_directory(path, ec)) return Error{path.string() + ": is a directory, expected a file"};
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"cannot read " + path.string() + ": " + errno_text()};
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Error{"cannot read " + path.string() + ": " + errno_text()};
  return ss.str();
}

Result<nlohmann::json> read_json_file(const fs::path& p) {
  auto text = read_file(p);
  if (!text) return Error{text.error()};
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return Error{p.string() + ": not valid JSON"};
  return j;
}

Status write_file_atomic(const fs::path& path, std::string_view content) {
  std::error_code ec;
  if (path.has_parent_path()) {
    fs::create_directories(path.parent_path(), ec);
    if (ec) return Error{"cannot create directory " + path.parent_path().string() + ": " + ec.message()};
  }
  std::string tmpl = path.string() + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return Error{"cannot create a temp file beside " + path.string() + ": " + errno_text()};
  Status st = write_fd_all(fd, content, path);
  if (st.ok() && ::fsync(fd) != 0) st = Error{"cannot fsync " + path.string() + ": " + errno_text()};
  ::fchmod(fd, 0644);
  ::close(fd);
  if (!st.ok()) {
    ::unlink(tmpl.c_str());
    return st;
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    std::string e = errno_text();
    ::unlink(tmpl.c_str());
    return Error{"cannot rename into " + path.string() + ": " + e};
  }
  // Make the rename itself durable.
  int dfd = ::open(path.has_parent_path() ? path.parent_path().c_str() : ".", O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

Status append_durable(const fs::path& path, std::string_view record) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Error{"cannot open " + path.string() + " for append: " + errno_text()};
  Status st = write_fd_all(fd, record, path);
  if (st.ok() && ::fsync(fd) != 0) st = Error{"cannot fsync " + path.string() + ": " + errno_text()};
  ::close(fd);
  return st;
}

TempDir::TempDir(std::string_view prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + std::string(prefix) + ".XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("cannot create a temp directory under " + tmpl + ": " + errno_text());
  }
  path_ = tmpl;
}

TempDir::~TempDir() {
  if (keep_) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

namespace {
/// <the binary's folder>/MKEVOLVE_DATA_REL (../share/mkevolve), or "".
fs::path installed_data_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec || exe.empty()) return {};
  return (exe.parent_path() / MKEVOLVE_DATA_REL).lexically_normal();
}
}  // namespace

fs::path install_root() {
  if (const char* h = std::getenv("MKEVOLVE_HOME"); h && *h) return fs::path(h);
  fs::path data = installed_data_dir();
  std::error_code ec;
  if (!data.empty() && fs::exists(data / "worker" / "mkevolve_worker" / "__main__.py", ec)) return data;
  return fs::path(MKEVOLVE_SOURCE_DIR);
}

WriteFailure diagnose_write_failure(const fs::path& dir, const std::string& flag) {
  std::error_code ec;
  fs::path at = fs::absolute(dir, ec).lexically_normal();
  if (ec) at = dir;
  // The nearest part of the path that exists.
  while (!at.empty() && !fs::exists(fs::symlink_status(at, ec)) && at != at.parent_path()) at = at.parent_path();
  if (at.empty()) at = ".";
  WriteFailure w;
  if (!fs::is_directory(at, ec)) {
    w.kind = ErrorKind::kBadInput;
    w.advice = fmt::format("{} is a file, not a folder: choose another {}", at.string(), flag);
    return w;
  }
  struct statvfs sv {};
  const bool have_fs = ::statvfs(at.c_str(), &sv) == 0;
  if ((have_fs && (sv.f_flag & ST_RDONLY)) || (::access(at.c_str(), W_OK | X_OK) != 0 && errno == EROFS)) {
    w.kind = ErrorKind::kBadInput;
    w.advice = fmt::format("{} is on a read-only file system: choose an {} on a writable one", at.string(), flag);
    return w;
  }
  if (::access(at.c_str(), W_OK | X_OK) != 0) {
    w.kind = ErrorKind::kBadInput;
    w.advice = fmt::format("permission denied: this user cannot write in {}: choose an {} you can write to (or "
                           "change that folder's permissions)",
                           at.string(), flag);
    return w;
  }
  if (have_fs && (sv.f_bavail == 0 || sv.f_favail == 0 ||
                  static_cast<double>(sv.f_bavail) * static_cast<double>(sv.f_frsize) < 1024.0 * 1024.0)) {
    w.advice = fmt::format("the disk holding {} is full: free space, then start the same command again", at.string());
    return w;
  }
  w.advice = fmt::format("a write under {} failed (the message above says why): fix that, then start the same "
                         "command again",
                         at.string());
  return w;
}

std::string install_root_search() {
  std::string out;
  if (const char* h = std::getenv("MKEVOLVE_HOME"); h && *h)
    return fmt::format("$MKEVOLVE_HOME is {} (unset it, or point it at an MKEvolve source tree or an installed "
                       "share/mkevolve folder)", h);
  fs::path data = installed_data_dir();
  if (!data.empty()) out = data.string() + " (an installed copy), then ";
  return "looked in " + out + MKEVOLVE_SOURCE_DIR + " (the source tree it was built from); set MKEVOLVE_HOME to the "
         "folder that holds worker/ and the prompts";
}

}  // namespace mk
