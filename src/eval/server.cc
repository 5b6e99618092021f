#include "eval/server.h"

#include <fcntl.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <thread>

#include "eval/proc.h"
#include "eval/protocol.h"
#include "util/env.h"
#include "util/fs.h"

namespace mk::eval {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

std::string clip(std::string s, size_t n) {
  if (s.size() > n) s = s.substr(0, n) + "...";
  return s;
}

std::string str_field(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string now_text() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

bool pid_namespace_available() {
  static const bool ok = [] {
    SubprocessOptions o;
    o.argv = {"unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "true"};
    return run_subprocess(o, {}, std::chrono::seconds(10)).ok();
  }();
  return ok;
}

Result<std::unique_ptr<Server>> Server::start(const ServerConfig& cfg) {
  std::unique_ptr<Server> s(new Server());
  s->cfg_ = cfg;
  SubprocessOptions o;
  if (cfg.pid_namespace) o.argv = {"unshare", "--pid", "--fork", "--kill-child", "--mount-proc"};
  o.argv.insert(o.argv.end(), cfg.argv.begin(), cfg.argv.end());
  o.env = cfg.env;
  (*o.env)[kTokenVar] = cfg.token;
  o.cwd = cfg.cwd;
  o.stderr_path = cfg.log_path;
  std::string header = "--- mkevolve " + now_text() + ": starting";
  for (const auto& a : o.argv) header += " " + a;
  (void)append_durable(cfg.log_path, header + "\n");

  std::string err;
  s->proc_ = Subprocess::start(o, &err);
  if (!s->proc_) {
    if (err.find("No such file") != std::string::npos)
      return Error{"cannot run the worker's Python '" + cfg.argv.front() + "': not found (pass --python or set MKEVOLVE_PYTHON)"};
    return Error{"cannot start the worker: " + err};
  }
  s->pid_ = s->proc_->pid();

  std::string line;
  auto r = s->proc_->read_line(&line, cfg.hello_timeout);
  auto fail = [&](const std::string& why) -> Result<std::unique_ptr<Server>> {
    std::string tail = s->log_tail(800);
    s->kill();
    return Error{why + (tail.empty() ? "" : "; worker log: " + tail)};
  };
  if (r == Subprocess::Read::kTimeout)
    return fail("the worker (" + cfg.python + ") did not say hello within " +
                std::to_string(cfg.hello_timeout.count() / 1000) + " s");
  if (r == Subprocess::Read::kEof)
    return fail("the worker (" + cfg.python + ") exited before its hello (" + s->exit_description() + ")");
  json hello = json::parse(line, nullptr, false);
  if (hello.is_discarded() || !hello.is_object() || str_field(hello, "type") != "hello")
    return fail("the worker (" + cfg.python + ") did not say hello; its first line was '" + clip(line, 200) + "'");
  Hello& h = s->hello_;
  h.raw = hello;
  auto proto = hello.find("protocol");
  h.protocol = proto != hello.end() && proto->is_number_integer() ? proto->get<int>() : 0;
  h.python = str_field(hello, "python");
  h.torch = str_field(hello, "torch");
  h.triton = str_field(hello, "triton");
  h.cuda = hello.contains("cuda") && hello["cuda"].is_boolean() && hello["cuda"].get<bool>();
  h.test_mode = hello.contains("test_mode") && hello["test_mode"].is_boolean() && hello["test_mode"].get<bool>();
  if (h.protocol != kProtocolVersion)
    return fail("the worker speaks protocol " + std::to_string(h.protocol) + ", this mkevolve speaks " +
                std::to_string(kProtocolVersion) + ": " + cfg.python +
                " imports a different mkevolve_worker (check PYTHONPATH and MKEVOLVE_HOME)");
  std::string werr = str_field(hello, "error");
  if (h.torch.empty())
    return fail("no torch in " + cfg.python + ": install PyTorch or pass --python" +
                (werr.empty() ? "" : " (worker: " + clip(werr, 300) + ")"));
  if (h.triton.empty() && !cfg.test_mode)
    return fail("no Triton in " + cfg.python + ": install Triton (it needs a CUDA GPU machine) or pass --python" +
                (werr.empty() ? "" : " (worker: " + clip(werr, 300) + ")"));
  if (cfg.require_gpu && !cfg.test_mode && hello.contains("cuda") && !h.cuda)
  {
    std::string cerr = str_field(hello, "cuda_error");
    return fail("torch in " + cfg.python + " sees no CUDA GPU (torch " + h.torch +
                "): eval needs a CUDA build of PyTorch and a GPU (mkevolve check still works)" +
                (cerr.empty() ? "" : "; worker: " + clip(cerr, 300)));
  }
  return s;
}

Server::~Server() { kill(); }

std::string Server::exit_description() {
  for (int i = 0; i < 50 && !proc_->poll_exited(); ++i) std::this_thread::sleep_for(10ms);
  if (!proc_->poll_exited()) return "its output closed but it is still running";
  if (proc_->term_signal()) {
    int sig = proc_->term_signal();
    return "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "exit status " + std::to_string(proc_->exit_code());
}

Server::Reply Server::call(json request, std::chrono::milliseconds timeout, const ProgressFn& progress) {
  Reply rep;
  long long id = next_id_++;
  request["id"] = id;
  std::string line = request.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  if (killed_ || !proc_->write_all(line)) {
    rep.outcome = Outcome::kDied;
    rep.detail = killed_ ? "the server was stopped" : "the server is gone (" + exit_description() + ")";
    return rep;
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      rep.outcome = Outcome::kTimeout;
      return rep;
    }
    std::string in;
    auto r = proc_->read_line(&in, left);
    if (r == Subprocess::Read::kTimeout) {
      rep.outcome = Outcome::kTimeout;
      return rep;
    }
    if (r == Subprocess::Read::kEof) {
      rep.outcome = Outcome::kDied;
      rep.detail = killed_ ? "the server was stopped" : exit_description();
      return rep;
    }
    json msg = json::parse(in, nullptr, false);
    if (msg.is_discarded() || !msg.is_object()) {
      rep.outcome = Outcome::kProtocolError;
      rep.detail = "the server wrote a line that is not a JSON object: '" + clip(in, 200) + "'";
      return rep;
    }
    std::string type = str_field(msg, "type");
    auto idit = msg.find("id");
    bool same_id = idit != msg.end() && idit->is_number_integer() && idit->get<long long>() == id;
    if (!same_id) {
      rep.outcome = Outcome::kProtocolError;
      rep.detail = "the server answered " + (idit == msg.end() ? std::string("without an id") : "id " + idit->dump()) +
                   " while request " + std::to_string(id) + " was pending";
      return rep;
    }
    if (type == "progress") {
      if (progress) progress(msg);
      continue;
    }
    if (type == "result" || type == "error") {
      rep.outcome = Outcome::kAnswered;
      rep.message = std::move(msg);
      return rep;
    }
    rep.outcome = Outcome::kProtocolError;
    rep.detail = "the server sent a message of unknown type '" + clip(type, 40) + "'";
    return rep;
  }
}

void Server::kill() {
  std::lock_guard lock(kill_mu_);
  if (!proc_) return;
  kill_process_tree(pid_, cfg_.token);
  proc_->terminate(0ms);  // reaps the direct child
  killed_ = true;
  proc_.reset();
}

void Server::kill_now() {
  std::lock_guard lock(kill_mu_);
  if (!proc_) return;
  killed_ = true;
  kill_process_tree(pid_, cfg_.token);
}

void Server::shutdown(std::chrono::milliseconds grace) {
  if (proc_ && !killed_ && alive()) {
    (void)call(json{{"op", "shutdown"}}, grace);
    auto deadline = std::chrono::steady_clock::now() + grace;
    while (std::chrono::steady_clock::now() < deadline && !proc_->poll_exited()) std::this_thread::sleep_for(10ms);
  }
  kill();
}

bool Server::alive() {
  std::lock_guard lock(kill_mu_);
  return proc_ && !killed_ && !proc_->poll_exited();
}

std::string Server::log_tail(size_t n) const {
  std::ifstream in(cfg_.log_path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  auto size = static_cast<long long>(in.tellg());
  long long from = size > static_cast<long long>(n) ? size - static_cast<long long>(n) : 0;
  in.seekg(from);
  std::string s(static_cast<size_t>(size - from), '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  // Only what this server instance wrote: cut at our last start header.
  if (auto h = s.rfind("--- mkevolve "); h != std::string::npos) {
    auto nl = s.find('\n', h);
    s = nl == std::string::npos ? std::string() : s.substr(nl + 1);
  }
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return redact_secrets(s);
}

}  // namespace mk::eval
