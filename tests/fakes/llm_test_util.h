// Helpers for tests that build providers against the fake servers: short
// timeouts and backoffs, an isolated environment, and recorded retry waits.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "llm/factory.h"
#include "util/subprocess.h"

namespace mk::fakes {

/// Records the waits the retry layer asked for instead of sleeping them (all but
/// a token 1 ms), so tests see Retry-After and backoff without spending seconds.
struct SleepLog {
  std::mutex mu;
  std::vector<double> waits;
  std::function<void(double)> fn() {
    return [this](double s) {
      std::lock_guard lock(mu);
      waits.push_back(s);
    };
  }
  std::vector<double> get() {
    std::lock_guard lock(mu);
    return waits;
  }
};

/// Options for tests: explicit environment (no keys unless added), 2 s connect
/// and 5 s total timeouts, 3 retries with 10-50 ms backoff.
inline llm::ProviderOptions test_options(const std::string& spec, const std::string& base_url, const Env* env,
                                         SleepLog* sleeps = nullptr) {
  llm::ProviderOptions o;
  o.spec = spec;
  o.base_url = base_url;
  o.connect_timeout_s = 2;
  o.total_timeout_s = 5;
  o.max_retries = 3;
  o.initial_backoff_s = 0.01;
  o.max_backoff_s = 0.05;
  o.env = env;
  o.home = "/nonexistent-home";
  if (sleeps) o.sleep = sleeps->fn();
  return o;
}

inline llm::Request make_request(const std::string& prompt, const std::string& agent = "generate",
                                 const std::string& task = "L1/1") {
  llm::Request r;
  r.system = "You write Triton kernels.";
  r.messages.push_back({"user", prompt});
  r.max_tokens = 256;
  r.agent = agent;
  r.task = task;
  return r;
}

/// A loopback port with nothing listening (bound, then closed).
int closed_port();

}  // namespace mk::fakes

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

inline int mk::fakes::closed_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}
