// exec:COMMAND: one `sh -c COMMAND` per request. The request arrives on stdin as
// an OpenAI chat-completions body (plus "mkevolve": {agent, task, sample});
// stdout is the reply, as plain text or as a chat-completion JSON with usage.
#include <cctype>
#include <cstdio>

#include "llm/backends.h"
#include "llm/wire.h"
#include "util/env.h"

namespace mk::llm {

namespace {

std::string tail_line(const std::string& s, size_t max) {
  std::string t = s.size() > max ? "..." + s.substr(s.size() - max) : s;
  for (auto& c : t)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  while (!t.empty() && t.back() == ' ') t.pop_back();
  return t;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%gs", s);
  return buf;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

class ExecBackend : public Provider {
 public:
  explicit ExecBackend(ExecOptions o) : o_(std::move(o)) {}
  /// Credentials on the command line are recorded by fingerprint, never by value.
  std::string spec() const override { return "exec:" + redact_credentials(o_.command); }

  Reply complete(const Request& req) override {
    nlohmann::json in = openai_chat_body(req, "exec");
    in["mkevolve"] = {{"agent", req.agent}, {"task", req.task}, {"sample", req.sample}};
    SubprocessOptions so;
    so.argv = {"/bin/sh", "-c", o_.command};
    Env env = o_.env;
    env["MKEVOLVE_AGENT"] = req.agent;
    env["MKEVOLVE_TASK"] = req.task;
    env["MKEVOLVE_SAMPLE"] = std::to_string(req.sample);
    so.env = std::move(env);
    auto ms = std::chrono::milliseconds(static_cast<int64_t>(o_.timeout_s * 1000));
    SubprocessResult r = run_subprocess(so, in.dump() + "\n", ms, o_.cancelled);
    const std::string who = "exec provider '" + o_.command + "'";
    if (!r.spawn_error.empty()) return error_reply(LlmError::Kind::kConfig, who + ": cannot start: " + r.spawn_error);
    if (r.cancelled) return error_reply(LlmError::Kind::kCancelled, who + ": cancelled (interrupted)");
    if (r.timed_out)
      return error_reply(LlmError::Kind::kTimeout,
                         who + ": no reply within " + seconds(o_.timeout_s) +
                             " (raise llm.timeout_s); stderr: " + tail_line(r.err, 300),
                         true);
    if (!r.ok())
      return error_reply(LlmError::Kind::kHttp, who + ": " + r.describe() + "; stderr: " + tail_line(r.err, 300));
    std::string out = trim(r.out);
    if (!out.empty() && out.front() == '{') {
      auto j = nlohmann::json::parse(out, nullptr, false);
      if (!j.is_discarded() && j.is_object() && j.contains("choices")) return parse_openai_chat(out, req, who);
    }
    if (out.empty()) return error_reply(LlmError::Kind::kEmpty, who + ": empty reply on stdout; stderr: " + tail_line(r.err, 300));
    Completion c;
    c.text = out;
    c.finish_reason = "stop";
    c.model = "exec";
    c.usage = estimate_usage(req, c.text);
    return Reply::Ok(std::move(c));
  }

 private:
  ExecOptions o_;
};

}  // namespace

std::shared_ptr<Provider> make_exec_backend(ExecOptions o) { return std::make_shared<ExecBackend>(std::move(o)); }

}  // namespace mk::llm
