#include "llm/wire.h"

#include "util/env.h"
#include "util/hash.h"

namespace mk::llm {

using nlohmann::json;

Reply error_reply(LlmError::Kind kind, std::string message, bool retryable) {
  LlmError e;
  e.kind = kind;
  e.message = redact_secrets(std::move(message));
  e.retryable = retryable;
  return Reply::Err(std::move(e));
}

json openai_chat_body(const Request& req, const std::string& model, const std::string& max_tokens_field) {
  json msgs = json::array();
  if (!req.system.empty()) msgs.push_back({{"role", "system"}, {"content", req.system}});
  for (const auto& m : req.messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
  json body = {{"model", model}, {"messages", msgs}};
  if (req.max_tokens > 0) body[max_tokens_field.empty() ? "max_tokens" : max_tokens_field] = req.max_tokens;
  if (req.temperature) body["temperature"] = *req.temperature;
  if (req.top_p) body["top_p"] = *req.top_p;
  if (req.seed) body["seed"] = *req.seed;
  if (!req.reasoning_effort.empty()) body["reasoning_effort"] = req.reasoning_effort;
  return body;
}

namespace {

int64_t int_or(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return 0;
  const auto& v = j[key];
  return v.is_number() ? v.get<int64_t>() : 0;
}

}  // namespace

Reply parse_openai_chat(const std::string& body, const Request& req, const std::string& who) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return error_reply(LlmError::Kind::kMalformed, who + " returned a reply that is not JSON: " + excerpt(body, 80));
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty() || !j["choices"][0].is_object())
    return error_reply(LlmError::Kind::kMalformed, who + " returned JSON without choices[0]");
  const json& choice = j["choices"][0];
  Completion c;
  if (choice.contains("message") && choice["message"].is_object()) {
    const json& m = choice["message"];
    if (m.contains("content") && m["content"].is_string()) c.text = m["content"].get<std::string>();
  } else if (choice.contains("text") && choice["text"].is_string()) {
    c.text = choice["text"].get<std::string>();
  }
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
    c.finish_reason = choice["finish_reason"].get<std::string>();
  c.truncated = c.finish_reason == "length";
  if (j.contains("model") && j["model"].is_string()) c.model = j["model"].get<std::string>();
  if (j.contains("usage") && j["usage"].is_object()) {
    const json& u = j["usage"];
    int64_t prompt = int_or(u, "prompt_tokens"), cached = 0;
    if (u.contains("prompt_tokens_details")) cached = int_or(u["prompt_tokens_details"], "cached_tokens");
    // OpenAI counts cached tokens inside prompt_tokens; we keep them apart.
    c.usage.cache_read = cached;
    c.usage.input = prompt >= cached ? prompt - cached : prompt;
    c.usage.output = int_or(u, "completion_tokens");
  } else {
    c.usage = estimate_usage(req, c.text);
  }
  if (c.text.empty()) {
    Reply r = error_reply(LlmError::Kind::kEmpty,
                          who + " returned an empty reply" +
                              (c.truncated ? " (finish_reason length: the token limit was spent before any text; raise "
                                             "max_tokens)"
                                           : ""));
    r.error->billed = c.usage;  // billed all the same (the reasoning tokens, the prompt)
    return r;
  }
  return Reply::Ok(std::move(c));
}

std::optional<int> thinking_budget(const std::string& effort) {
  if (effort.empty()) return 0;
  if (effort == "low") return 2048;
  if (effort == "medium") return 8192;
  if (effort == "high") return 24576;
  return std::nullopt;
}

std::string request_fingerprint(const Request& req) {
  Hasher h;
  h.update("mkevolve-request-v1").update(req.system);
  h.update(std::to_string(req.messages.size()));
  for (const auto& m : req.messages) h.update(m.role).update(m.content);
  h.update(std::to_string(req.max_tokens));
  h.update(req.temperature ? json(*req.temperature).dump() : "-");
  h.update(req.top_p ? json(*req.top_p).dump() : "-");
  h.update(req.seed ? std::to_string(*req.seed) : "-");
  h.update(req.reasoning_effort);
  h.update(std::to_string(req.sample));
  return h.hex();
}

json request_to_json(const Request& req) {
  json msgs = json::array();
  for (const auto& m : req.messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
  json j = {{"system", req.system}, {"messages", msgs}, {"max_tokens", req.max_tokens}};
  if (req.temperature) j["temperature"] = *req.temperature;
  if (req.top_p) j["top_p"] = *req.top_p;
  if (req.seed) j["seed"] = *req.seed;
  if (!req.reasoning_effort.empty()) j["reasoning_effort"] = req.reasoning_effort;
  if (req.cache_prefix_messages) j["cache_prefix_messages"] = req.cache_prefix_messages;
  return j;
}

Result<Request> request_from_json(const json& j) {
  if (!j.is_object()) return Error{"request is not a JSON object"};
  Request r;
  try {
    r.system = j.value("system", "");
    if (j.contains("messages")) {
      if (!j["messages"].is_array()) return Error{"request.messages is not an array"};
      for (const auto& m : j["messages"]) r.messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
    }
    r.max_tokens = j.value("max_tokens", r.max_tokens);
    if (j.contains("temperature")) r.temperature = j["temperature"].get<double>();
    if (j.contains("top_p")) r.top_p = j["top_p"].get<double>();
    if (j.contains("seed")) r.seed = j["seed"].get<int64_t>();
    r.reasoning_effort = j.value("reasoning_effort", "");
    r.cache_prefix_messages = j.value("cache_prefix_messages", 0);
  } catch (const json::exception& e) {
    return Error{std::string("bad request object: ") + e.what()};
  }
  return r;
}

json usage_to_json(const Usage& u) {
  return {{"input", u.input}, {"output", u.output}, {"cache_read", u.cache_read}, {"cache_write", u.cache_write},
          {"estimated", u.estimated}};
}

Usage usage_from_json(const json& j) {
  Usage u;
  if (!j.is_object()) return u;
  u.input = int_or(j, "input");
  u.output = int_or(j, "output");
  u.cache_read = int_or(j, "cache_read");
  u.cache_write = int_or(j, "cache_write");
  u.estimated = j.contains("estimated") && j["estimated"].is_boolean() && j["estimated"].get<bool>();
  return u;
}

json completion_to_json(const Completion& c) {
  return {{"text", c.text}, {"usage", usage_to_json(c.usage)}, {"finish_reason", c.finish_reason},
          {"truncated", c.truncated}, {"model", c.model}};
}

Result<Completion> completion_from_json(const json& j) {
  if (!j.is_object()) return Error{"response is not a JSON object"};
  if (!j.contains("text") || !j["text"].is_string()) return Error{"response has no \"text\" string"};
  Completion c;
  c.text = j["text"].get<std::string>();
  if (j.contains("usage")) c.usage = usage_from_json(j["usage"]);
  c.finish_reason = j.contains("finish_reason") && j["finish_reason"].is_string() ? j["finish_reason"].get<std::string>() : "stop";
  c.truncated = j.contains("truncated") && j["truncated"].is_boolean() && j["truncated"].get<bool>();
  c.model = j.contains("model") && j["model"].is_string() ? j["model"].get<std::string>() : "";
  return c;
}

namespace {
const std::pair<LlmError::Kind, const char*> kKindNames[] = {
    {LlmError::Kind::kNetwork, "network"},     {LlmError::Kind::kTimeout, "timeout"},
    {LlmError::Kind::kHttp, "http"},           {LlmError::Kind::kAuth, "auth"},
    {LlmError::Kind::kBadRequest, "bad_request"}, {LlmError::Kind::kNotFound, "not_found"},
    {LlmError::Kind::kMalformed, "malformed"}, {LlmError::Kind::kEmpty, "empty"},
    {LlmError::Kind::kUnmatchedReplay, "unmatched_replay"}, {LlmError::Kind::kConfig, "config"},
    {LlmError::Kind::kCancelled, "cancelled"}};
}  // namespace

std::string error_kind_name(LlmError::Kind k) {
  for (const auto& [kind, name] : kKindNames)
    if (kind == k) return name;
  return "http";
}

LlmError::Kind error_kind_from_name(const std::string& name) {
  for (const auto& [kind, n] : kKindNames)
    if (name == n) return kind;
  return LlmError::Kind::kHttp;
}

json error_to_json(const LlmError& e) {
  json j = {{"kind", error_kind_name(e.kind)}, {"message", redact_secrets(e.message)}, {"retryable", e.retryable}};
  if (e.http_status) j["http_status"] = e.http_status;
  if (e.billed.total() > 0) j["billed"] = usage_to_json(e.billed);
  return j;
}

LlmError error_from_json(const json& j) {
  LlmError e;
  if (!j.is_object()) {
    e.message = "recorded error";
    return e;
  }
  e.kind = error_kind_from_name(j.value("kind", "http"));
  e.message = j.value("message", "recorded error");
  e.retryable = j.value("retryable", false);
  e.http_status = j.value("http_status", 0);
  if (j.contains("billed") && j["billed"].is_object()) e.billed = usage_from_json(j["billed"]);
  return e;
}

Usage estimate_usage(const Request& req, const std::string& reply_text) {
  size_t in_chars = req.system.size();
  for (const auto& m : req.messages) in_chars += m.content.size() + 4;
  Usage u;
  u.input = static_cast<int64_t>((in_chars + 3) / 4);
  u.output = static_cast<int64_t>((reply_text.size() + 3) / 4);
  u.estimated = true;
  return u;
}

std::string prompt_excerpt(const Request& req, size_t max_chars) {
  std::string text;
  for (auto it = req.messages.rbegin(); it != req.messages.rend(); ++it)
    if (it->role == "user") {
      text = it->content;
      break;
    }
  if (text.empty() && !req.messages.empty()) text = req.messages.back().content;
  return excerpt(text, max_chars);
}

std::string excerpt(const std::string& text, size_t max_chars) {
  std::string out;
  for (char c : text) {
    char d = (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
    if (!(d == ' ' && !out.empty() && out.back() == ' ')) out += d;
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
  }
  return "'" + out + "'";
}

std::string request_label(const Request& req) {
  return "agent=" + (req.agent.empty() ? std::string("-") : req.agent) +
         " task=" + (req.task.empty() ? std::string("-") : req.task) + " sample=" + std::to_string(req.sample);
}

}  // namespace mk::llm
