// Amazon Bedrock Converse API: POST {base}/model/{modelId}/converse, signed
// with SigV4 by hand (sigv4.h explains why not curl's aws-sigv4).
#include "llm/backends.h"
#include "llm/wire.h"

namespace mk::llm {

using nlohmann::json;

namespace {

int64_t int_or(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<int64_t>() : 0;
}

struct UrlParts {
  std::string scheme, authority, path;  // path without a trailing '/'
};

UrlParts split_url(const std::string& url) {
  UrlParts p;
  auto sep = url.find("://");
  size_t start = sep == std::string::npos ? 0 : sep + 3;
  p.scheme = sep == std::string::npos ? "https" : url.substr(0, sep);
  auto slash = url.find('/', start);
  p.authority = url.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
  p.path = slash == std::string::npos ? "" : url.substr(slash);
  while (!p.path.empty() && p.path.back() == '/') p.path.pop_back();
  return p;
}

class BedrockBackend : public Provider {
 public:
  explicit BedrockBackend(BackendOptions o) : o_(std::move(o)) {
    who_ = {"bedrock",
            o_.key_hint.empty() ? "the AWS credentials (" + o_.aws.source + "), region " + o_.region : o_.key_hint,
            o_.url_hint.empty() ? "--base-url / AWS_REGION" : o_.url_hint, o_.model};
  }
  std::string spec() const override { return o_.spec; }

  json body(const Request& req) const {
    json msgs = json::array();
    for (size_t i = 0; i < req.messages.size(); ++i) {
      json content = json::array({{{"text", req.messages[i].content}}});
      if (o_.prompt_caching && req.cache_prefix_messages > 0 && static_cast<int>(i) == req.cache_prefix_messages - 1)
        content.push_back({{"cachePoint", {{"type", "default"}}}});
      msgs.push_back({{"role", req.messages[i].role}, {"content", content}});
    }
    json j = {{"messages", msgs}};
    if (!req.system.empty()) {
      json sys = json::array({{{"text", req.system}}});
      if (o_.prompt_caching) sys.push_back({{"cachePoint", {{"type", "default"}}}});
      j["system"] = sys;
    }
    json inf = json::object();
    if (req.max_tokens > 0) inf["maxTokens"] = req.max_tokens;
    int budget = thinking_budget(req.reasoning_effort).value_or(0);
    if (budget > 0) {
      // Claude's extended thinking, as the model's own request field; the
      // budget comes on top of the reply's room, and no temperature or topP.
      j["additionalModelRequestFields"] = {{"thinking", {{"type", "enabled"}, {"budget_tokens", budget}}}};
      inf["maxTokens"] = (req.max_tokens > 0 ? req.max_tokens : 4096) + budget;
    } else {
      if (req.temperature) inf["temperature"] = *req.temperature;
      if (req.top_p) inf["topP"] = *req.top_p;
    }
    j["inferenceConfig"] = inf;
    return j;
  }

  Reply parse(const std::string& text, const Request& req) const {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return error_reply(LlmError::Kind::kMalformed, "bedrock returned a reply that is not JSON");
    const json* content = nullptr;
    if (j.contains("output") && j["output"].is_object() && j["output"].contains("message") &&
        j["output"]["message"].is_object() && j["output"]["message"].contains("content") &&
        j["output"]["message"]["content"].is_array())
      content = &j["output"]["message"]["content"];
    if (!content) return error_reply(LlmError::Kind::kMalformed, "bedrock returned JSON without output.message.content");
    Completion c;
    for (const auto& block : *content)
      if (block.is_object() && block.contains("text") && block["text"].is_string()) c.text += block["text"].get<std::string>();
    if (j.contains("stopReason") && j["stopReason"].is_string()) c.finish_reason = j["stopReason"].get<std::string>();
    c.truncated = c.finish_reason == "max_tokens";
    c.model = o_.model;
    if (j.contains("usage") && j["usage"].is_object()) {
      const json& u = j["usage"];
      c.usage.input = int_or(u, "inputTokens");
      c.usage.output = int_or(u, "outputTokens");
      c.usage.cache_read = int_or(u, "cacheReadInputTokens");
      c.usage.cache_write = int_or(u, "cacheWriteInputTokens");
    } else {
      c.usage = estimate_usage(req, c.text);
    }
    if (c.text.empty()) {
      Reply r = error_reply(LlmError::Kind::kEmpty, std::string("bedrock returned an empty reply") +
                                                        (c.truncated ? " (stopReason max_tokens: raise max_tokens)" : ""));
      r.error->billed = c.usage;  // billed all the same
      return r;
    }
    return Reply::Ok(std::move(c));
  }

  Reply complete(const Request& req) override {
    if (!req.reasoning_effort.empty()) {
      if (!thinking_budget(req.reasoning_effort))
        return error_reply(LlmError::Kind::kBadRequest, "bedrock: reasoning effort '" + req.reasoning_effort +
                                                            "' is not low, medium or high");
      if (o_.model.find("anthropic.") == std::string::npos)
        return error_reply(LlmError::Kind::kBadRequest,
                           "bedrock: a reasoning effort is sent only to Anthropic Claude models (as a thinking "
                           "budget); " + o_.model + " is not one: leave --reasoning-effort unset");
    }
    UrlParts url = split_url(o_.base_url);
    // The model id is encoded once on the wire ("v1:0" -> "v1%3A0"); the signer
    // encodes the path again for the canonical request.
    std::string path = url.path + "/model/" + uri_encode(o_.model) + "/converse";
    HttpRequest h;
    h.url = url.scheme + "://" + url.authority + path;
    h.connect_timeout_s = o_.connect_timeout_s;
    h.total_timeout_s = o_.total_timeout_s;
    h.cancelled = o_.cancelled;
    h.body = body(req).dump();
    SigV4Request s;
    s.method = "POST";
    s.host = url.authority;
    s.path = path;
    s.headers = {{"content-type", "application/json"}};
    s.payload = h.body;
    s.region = o_.region;
    s.service = "bedrock";
    s.amz_date = amz_date_now();
    SigV4Result signed_ = sigv4_sign(s, o_.aws);
    h.headers = mkevolve_headers(req);
    h.headers.emplace_back("Host", url.authority);
    h.headers.emplace_back("Content-Type", "application/json");
    h.headers.emplace_back("Accept", "application/json");
    for (auto& kv : signed_.headers) h.headers.push_back(kv);
    return http_exchange(http_, h, who_, [&](const std::string& b) { return parse(b, req); });
  }

 private:
  BackendOptions o_;
  EndpointInfo who_;
  HttpClient http_;
};

}  // namespace

std::shared_ptr<Provider> make_bedrock_backend(BackendOptions o) { return std::make_shared<BedrockBackend>(std::move(o)); }

}  // namespace mk::llm
