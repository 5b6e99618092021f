// A tiny HTTP/1.1 server on 127.0.0.1 (ephemeral port) for tests: real sockets,
// keep-alive, Content-Length bodies, one thread per connection. It keeps the raw
// request target, which SigV4 verification needs (cpp-httplib decodes it, and
// Debian's cpp-httplib is a compiled library the test targets do not link).
// Header-only so any test target can include it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace mk::fakes {

struct ReceivedRequest {
  std::string method;
  std::string target;  ///< raw, as on the wire: path plus "?query"
  std::string path;    ///< target without the query (still percent-encoded)
  std::string query;
  std::map<std::string, std::string> headers;  ///< lower-case names
  std::string body;
  std::string header(const std::string& lower) const {
    auto it = headers.find(lower);
    return it == headers.end() ? std::string() : it->second;
  }
};

struct ScriptedResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  double delay_s = 0;        ///< wait before answering (interrupted when the server stops)
  bool hang_up = false;      ///< close the connection without answering
  std::function<void()> after;  ///< runs once the reply is written (or dropped)
};

class HttpServer {
 public:
  using Handler = std::function<ScriptedResponse(const ReceivedRequest&)>;

  explicit HttpServer(Handler handler) : handler_(std::move(handler)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) throw std::runtime_error("socket failed");
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 64) != 0)
      throw std::runtime_error("bind/listen failed");
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~HttpServer() { stop(); }

  void stop() {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    cv_.notify_all();
    if (acceptor_.joinable()) acceptor_.join();
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      threads.swap(conn_threads_);
    }
    for (auto& t : threads) t.join();
    ::close(listen_fd_);
  }

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  bool stopping() {
    std::lock_guard lock(mu_);
    return stopping_;
  }

  void accept_loop() {
    while (!stopping()) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::lock_guard lock(mu_);
      conn_threads_.emplace_back([this, fd] { serve(fd); });
    }
  }

  /// Reads more bytes into buf; false on EOF, error or stop.
  bool fill(int fd, std::string& buf) {
    while (!stopping()) {
      pollfd p{fd, POLLIN, 0};
      int r = ::poll(&p, 1, 50);
      if (r == 0) continue;
      if (r < 0) return false;
      char tmp[65536];
      ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
      if (n <= 0) return false;
      buf.append(tmp, static_cast<size_t>(n));
      return true;
    }
    return false;
  }

  static std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }

  static std::string trim(const std::string& s) {
    size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t\r");
    return b == std::string::npos ? "" : s.substr(b, e - b + 1);
  }

  void serve(int fd) {
    std::string buf;
    while (true) {
      size_t end;
      while ((end = buf.find("\r\n\r\n")) == std::string::npos)
        if (!fill(fd, buf)) return close_fd(fd);
      ReceivedRequest req;
      std::string head = buf.substr(0, end);
      buf.erase(0, end + 4);
      size_t line_end = head.find("\r\n");
      std::string request_line = head.substr(0, line_end);
      size_t sp1 = request_line.find(' '), sp2 = request_line.rfind(' ');
      req.method = request_line.substr(0, sp1);
      req.target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
      size_t q = req.target.find('?');
      req.path = req.target.substr(0, q);
      req.query = q == std::string::npos ? "" : req.target.substr(q + 1);
      size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
      while (pos < head.size()) {
        size_t e = head.find("\r\n", pos);
        std::string line = head.substr(pos, e == std::string::npos ? std::string::npos : e - pos);
        pos = e == std::string::npos ? head.size() : e + 2;
        size_t colon = line.find(':');
        if (colon != std::string::npos) req.headers[lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
      }
      size_t length = req.headers.count("content-length") ? std::stoul(req.headers["content-length"]) : 0;
      while (buf.size() < length)
        if (!fill(fd, buf)) return close_fd(fd);
      req.body = buf.substr(0, length);
      buf.erase(0, length);

      ScriptedResponse resp = handler_(req);
      struct After {
        std::function<void()> fn;
        ~After() {
          if (fn) fn();
        }
      } after{resp.after};
      if (resp.delay_s > 0) {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, std::chrono::duration<double>(resp.delay_s), [&] { return stopping_; });
        if (stopping_) return close_fd(fd);
      }
      if (resp.hang_up) return close_fd(fd);
      std::string out = "HTTP/1.1 " + std::to_string(resp.status) + " Fake\r\nContent-Length: " +
                        std::to_string(resp.body.size()) + "\r\n";
      bool has_type = false;
      for (const auto& [k, v] : resp.headers) {
        out += k + ": " + v + "\r\n";
        has_type = has_type || lower(k) == "content-type";
      }
      if (!has_type) out += "Content-Type: application/json\r\n";
      out += "\r\n" + resp.body;
      size_t off = 0;
      while (off < out.size()) {
        ssize_t n = ::send(fd, out.data() + off, out.size() - off, MSG_NOSIGNAL);
        if (n <= 0) return close_fd(fd);
        off += static_cast<size_t>(n);
      }
    }
  }

  void close_fd(int fd) { ::close(fd); }

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<std::thread> conn_threads_;
};

}  // namespace mk::fakes
