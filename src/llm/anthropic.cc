// Anthropic messages API: POST {base}/v1/messages. The system prompt and the
// last message of the shared prefix carry cache_control so repeated prompts
// read the prefix from Anthropic's prompt cache. A reasoning effort turns on
// extended thinking with a token budget (thinking_budget); thinking blocks in
// the reply are not part of its text.
#include "llm/backends.h"
#include "llm/wire.h"

namespace mk::llm {

using nlohmann::json;

namespace {

int64_t int_or(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<int64_t>() : 0;
}

class AnthropicBackend : public Provider {
 public:
  explicit AnthropicBackend(BackendOptions o) : o_(std::move(o)) {
    who_ = {"anthropic", o_.key_hint.empty() ? "ANTHROPIC_API_KEY" : o_.key_hint,
            o_.url_hint.empty() ? "--base-url / ANTHROPIC_BASE_URL" : o_.url_hint, o_.model};
  }
  std::string spec() const override { return o_.spec; }

  json body(const Request& req) const {
    json j = {{"model", o_.model}, {"max_tokens", req.max_tokens > 0 ? req.max_tokens : 4096}};
    if (!req.system.empty()) {
      json block = {{"type", "text"}, {"text", req.system}};
      if (o_.prompt_caching) block["cache_control"] = {{"type", "ephemeral"}};
      j["system"] = json::array({block});
    }
    json msgs = json::array();
    for (size_t i = 0; i < req.messages.size(); ++i) {
      json block = {{"type", "text"}, {"text", req.messages[i].content}};
      if (o_.prompt_caching && req.cache_prefix_messages > 0 &&
          static_cast<int>(i) == req.cache_prefix_messages - 1)
        block["cache_control"] = {{"type", "ephemeral"}};
      msgs.push_back({{"role", req.messages[i].role}, {"content", json::array({block})}});
    }
    j["messages"] = msgs;
    int budget = thinking_budget(req.reasoning_effort).value_or(0);
    if (budget > 0) {
      // Extended thinking: the budget comes on top of the reply's own room, and
      // the API takes no temperature or top_p with it.
      j["thinking"] = {{"type", "enabled"}, {"budget_tokens", budget}};
      j["max_tokens"] = j["max_tokens"].get<int>() + budget;
      return j;
    }
    if (req.temperature) j["temperature"] = *req.temperature;
    if (req.top_p) j["top_p"] = *req.top_p;
    return j;
  }

  Reply parse(const std::string& text, const Request& req) const {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return error_reply(LlmError::Kind::kMalformed, "anthropic returned a reply that is not JSON");
    if (!j.contains("content") || !j["content"].is_array())
      return error_reply(LlmError::Kind::kMalformed, "anthropic returned JSON without a content array");
    Completion c;
    for (const auto& block : j["content"])
      if (block.is_object() && block.value("type", "") == "text" && block.contains("text") && block["text"].is_string())
        c.text += block["text"].get<std::string>();
    if (j.contains("stop_reason") && j["stop_reason"].is_string()) c.finish_reason = j["stop_reason"].get<std::string>();
    c.truncated = c.finish_reason == "max_tokens";
    if (j.contains("model") && j["model"].is_string()) c.model = j["model"].get<std::string>();
    if (j.contains("usage") && j["usage"].is_object()) {
      const json& u = j["usage"];
      c.usage.input = int_or(u, "input_tokens");
      c.usage.output = int_or(u, "output_tokens");
      c.usage.cache_read = int_or(u, "cache_read_input_tokens");
      c.usage.cache_write = int_or(u, "cache_creation_input_tokens");
    } else {
      c.usage = estimate_usage(req, c.text);
    }
    if (c.text.empty()) {
      Reply r = error_reply(LlmError::Kind::kEmpty,
                            std::string("anthropic returned an empty reply") +
                                (c.truncated ? " (stop_reason max_tokens: raise max_tokens)" : ""));
      r.error->billed = c.usage;  // billed all the same
      return r;
    }
    return Reply::Ok(std::move(c));
  }

  Reply complete(const Request& req) override {
    if (!thinking_budget(req.reasoning_effort))
      return error_reply(LlmError::Kind::kBadRequest, "anthropic: reasoning effort '" + req.reasoning_effort +
                                                          "' is not low, medium or high");
    HttpRequest h;
    h.url = o_.base_url + "/v1/messages";
    h.connect_timeout_s = o_.connect_timeout_s;
    h.total_timeout_s = o_.total_timeout_s;
    h.cancelled = o_.cancelled;
    h.headers = mkevolve_headers(req);
    h.headers.emplace_back("Content-Type", "application/json");
    h.headers.emplace_back("anthropic-version", o_.anthropic_version);
    if (!o_.api_key.empty()) h.headers.emplace_back("x-api-key", o_.api_key);
    h.body = body(req).dump();
    return http_exchange(http_, h, who_, [&](const std::string& b) { return parse(b, req); });
  }

  std::optional<LlmError> probe() override {
    HttpRequest h;
    h.url = o_.base_url + "/v1/models";
    h.connect_timeout_s = o_.connect_timeout_s;
    h.cancelled = o_.cancelled;
    h.headers.emplace_back("anthropic-version", o_.anthropic_version);
    if (!o_.api_key.empty()) h.headers.emplace_back("x-api-key", o_.api_key);
    return probe_endpoint(http_, std::move(h), who_);
  }

 private:
  BackendOptions o_;
  EndpointInfo who_;
  HttpClient http_;
};

}  // namespace

std::shared_ptr<Provider> make_anthropic_backend(BackendOptions o) {
  return std::make_shared<AnthropicBackend>(std::move(o));
}

}  // namespace mk::llm
