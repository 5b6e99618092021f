// OpenAI-compatible chat completions: OpenAI itself, vLLM, SGLang, Ollama,
// LiteLLM and other proxies. POST {base}/chat/completions.
#include "llm/backends.h"
#include "llm/wire.h"

namespace mk::llm {

namespace {

class OpenAiBackend : public Provider {
 public:
  explicit OpenAiBackend(BackendOptions o) : o_(std::move(o)) {
    who_ = {"openai", o_.key_hint.empty() ? "OPENAI_API_KEY" : o_.key_hint,
            o_.url_hint.empty() ? "--base-url / OPENAI_BASE_URL" : o_.url_hint, o_.model};
  }
  std::string spec() const override { return o_.spec; }

  Reply complete(const Request& req) override {
    HttpRequest h;
    h.url = o_.base_url + "/chat/completions";
    h.connect_timeout_s = o_.connect_timeout_s;
    h.total_timeout_s = o_.total_timeout_s;
    h.cancelled = o_.cancelled;
    h.headers = mkevolve_headers(req);
    h.headers.emplace_back("Content-Type", "application/json");
    // No key, no auth header: local servers and proxies work without one.
    if (!o_.api_key.empty()) h.headers.emplace_back("Authorization", "Bearer " + o_.api_key);
    h.body = openai_chat_body(req, o_.model, o_.max_tokens_field).dump();
    return http_exchange(http_, h, who_, [&](const std::string& body) { return parse_openai_chat(body, req, "openai"); });
  }

  std::optional<LlmError> probe() override {
    HttpRequest h;
    h.method = "GET";
    h.url = o_.base_url + "/models";
    h.connect_timeout_s = o_.connect_timeout_s;
    h.cancelled = o_.cancelled;
    if (!o_.api_key.empty()) h.headers.emplace_back("Authorization", "Bearer " + o_.api_key);
    return probe_endpoint(http_, std::move(h), who_);
  }

 private:
  BackendOptions o_;
  EndpointInfo who_;
  HttpClient http_;
};

}  // namespace

std::shared_ptr<Provider> make_openai_backend(BackendOptions o) { return std::make_shared<OpenAiBackend>(std::move(o)); }

}  // namespace mk::llm
