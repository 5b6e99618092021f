#include "support/scripted_llm.h"

#include <fmt/format.h>

namespace mk::testing {

ScriptedLlm& ScriptedLlm::on(const std::string& agent, const std::string& task, const std::string& reply) {
  std::lock_guard<std::mutex> lk(mu_);
  Rule r;
  r.agent = agent;
  r.task = task;
  r.reply = reply;
  rules_.push_back(r);
  return *this;
}

ScriptedLlm& ScriptedLlm::on_sample(const std::string& agent, const std::string& task, int sample,
                                    const std::string& reply) {
  std::lock_guard<std::mutex> lk(mu_);
  Rule r;
  r.agent = agent;
  r.task = task;
  r.sample = sample;
  r.reply = reply;
  rules_.push_back(r);
  return *this;
}

ScriptedLlm& ScriptedLlm::on_contains(const std::string& agent, const std::string& needle, const std::string& reply) {
  std::lock_guard<std::mutex> lk(mu_);
  Rule r;
  r.agent = agent;
  r.contains = needle;
  r.reply = reply;
  rules_.push_back(r);
  return *this;
}

ScriptedLlm& ScriptedLlm::when(Responder fn) {
  std::lock_guard<std::mutex> lk(mu_);
  Rule r;
  r.fn = std::move(fn);
  rules_.push_back(r);
  return *this;
}

ScriptedLlm& ScriptedLlm::fail(const std::string& agent, llm::LlmError::Kind kind, const std::string& message,
                               bool final) {
  std::lock_guard<std::mutex> lk(mu_);
  Rule r;
  r.agent = agent;
  using K = llm::LlmError::Kind;
  const bool transient = !final && (kind == K::kNetwork || kind == K::kTimeout || kind == K::kHttp);
  r.error = llm::LlmError{kind, 0, message, transient, -1, {}};
  rules_.push_back(r);
  return *this;
}

llm::Reply ScriptedLlm::complete(const llm::Request& req) {
  std::vector<Rule> rules;
  {
    std::lock_guard<std::mutex> lk(mu_);
    log_.push_back(req);
    rules = rules_;
    max_in_flight_ = std::max(max_in_flight_, ++in_flight_);
  }
  const std::string last = req.messages.empty() ? "" : req.messages.back().content;
  std::optional<std::string> text;
  std::optional<llm::LlmError> err;
  for (const auto& r : rules) {
    if (r.agent != "*" && r.agent != req.agent) continue;
    if (r.task != "*" && r.task != req.task) continue;
    if (r.sample >= 0 && r.sample != req.sample) continue;
    if (!r.contains.empty() && last.find(r.contains) == std::string::npos) continue;
    if (r.error) {
      err = r.error;
      break;
    }
    if (r.fn) {
      text = r.fn(req);
      if (!text) continue;
      break;
    }
    text = r.reply;
    break;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    --in_flight_;
  }
  if (err) return llm::Reply::Err(*err);
  if (!text)
    return llm::Reply::Err({llm::LlmError::Kind::kUnmatchedReplay, 0,
                            fmt::format("scripted LLM: no rule for agent={} task={} sample={}", req.agent, req.task,
                                        req.sample),
                            false, -1, {}});
  llm::Completion c;
  c.text = *text;
  size_t in = req.system.size();
  for (const auto& m : req.messages) in += m.content.size();
  c.usage.input = static_cast<int64_t>(in / 4);
  c.usage.output = static_cast<int64_t>(text->size() / 4);
  c.usage.estimated = true;
  c.finish_reason = "stop";
  c.model = "scripted";
  return llm::Reply::Ok(c);
}

std::vector<llm::Request> ScriptedLlm::requests() const {
  std::lock_guard<std::mutex> lk(mu_);
  return log_;
}

int ScriptedLlm::count(const std::string& agent) const {
  std::lock_guard<std::mutex> lk(mu_);
  int n = 0;
  for (const auto& r : log_) n += r.agent == agent;
  return n;
}

std::string kernel_reply(const std::string& marker, const std::string& extra) {
  return fmt::format(
      "Here is the kernel.\n\n```python file=kernel.py\n# FAKE: {}\nimport torch\nimport torch.nn as nn\nimport "
      "triton\nimport triton.language as tl\n{}\n\nclass ModelNew(nn.Module):\n    pass\n```\n",
      marker, extra);
}

std::string files_reply(const std::map<std::string, std::string>& files) {
  std::string out = "Here are the files.\n\n";
  for (const auto& [path, src] : files) out += fmt::format("```python file={}\n{}\n```\n\n", path, src);
  return out;
}

}  // namespace mk::testing
