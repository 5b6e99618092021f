// Fake LLM endpoints for tests, speaking the real wire protocols over loopback
// sockets: OpenAI chat completions, Anthropic messages and Bedrock Converse
// (which verifies SigV4 signatures with known test credentials). Each test
// scripts the replies (status, Retry-After, delay, malformed body, truncation,
// usage) and inspects what arrived (headers, bodies, peak concurrency).
#pragma once

// Tests script replies with designated initializers (Step{.status = 429}); the
// members left out keep their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <algorithm>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fakes/http_server.h"
#include "fakes/sigv4_verifier.h"

namespace mk::fakes {

enum class Protocol { kOpenAi, kAnthropic, kBedrock };

struct FakeUsage {
  int64_t input = 11, output = 7, cache_read = 0, cache_write = 0;
};

/// One scripted reply. Defaults: 200 with text "hello" and FakeUsage{}.
struct Step {
  int status = 200;
  std::string text = "hello";
  std::optional<FakeUsage> usage = FakeUsage{};  ///< nullopt: no usage block at all
  bool truncated = false;                         ///< finish_reason length / stop_reason max_tokens
  std::optional<std::string> raw_body;            ///< sent verbatim instead of a protocol body
  std::vector<std::pair<std::string, std::string>> headers;  ///< e.g. {"Retry-After", "1"}
  double delay_s = 0;
  bool hang_up = false;
  std::string thinking;  ///< non-empty: a thinking (reasoning) block before the text (Anthropic, Bedrock)
};

class FakeLlm {
 public:
  explicit FakeLlm(Protocol p, AwsTestCredentials creds = {})
      : protocol_(p), creds_(std::move(creds)), server_([this](const ReceivedRequest& r) { return handle(r); }) {}

  /// Queue replies; once the queue is empty every request gets `fallback`.
  void push(Step s) {
    std::lock_guard lock(mu_);
    script_.push_back(std::move(s));
  }
  void set_fallback(Step s) {
    std::lock_guard lock(mu_);
    fallback_ = std::move(s);
  }

  /// Base URL to configure the client with (Bedrock's has no suffix either).
  std::string base_url() const { return server_.url() + (protocol_ == Protocol::kOpenAi ? "/v1" : ""); }

  std::vector<ReceivedRequest> received() const {
    std::lock_guard lock(mu_);
    return received_;
  }
  int count() const {
    std::lock_guard lock(mu_);
    return static_cast<int>(received_.size());
  }
  int max_in_flight() const {
    std::lock_guard lock(mu_);
    return max_in_flight_;
  }
  /// Requests that arrived at a path or with a signature the fake rejected.
  std::vector<std::string> problems() const {
    std::lock_guard lock(mu_);
    return problems_;
  }

 private:
  std::string body_for(const Step& s) const {
    using nlohmann::json;
    if (protocol_ == Protocol::kOpenAi) {
      json j = {{"id", "chatcmpl-fake"},
                {"object", "chat.completion"},
                {"model", "fake-model"},
                {"choices",
                 json::array({{{"index", 0},
                               {"message", {{"role", "assistant"}, {"content", s.text}}},
                               {"finish_reason", s.truncated ? "length" : "stop"}}})}};
      if (s.usage)
        j["usage"] = {{"prompt_tokens", s.usage->input + s.usage->cache_read},
                      {"completion_tokens", s.usage->output},
                      {"total_tokens", s.usage->input + s.usage->cache_read + s.usage->output},
                      {"prompt_tokens_details", {{"cached_tokens", s.usage->cache_read}}}};
      return j.dump();
    }
    if (protocol_ == Protocol::kAnthropic) {
      json j = {{"id", "msg_fake"},
                {"type", "message"},
                {"role", "assistant"},
                {"model", "fake-claude"},
                {"content", s.thinking.empty()
                                ? json::array({{{"type", "text"}, {"text", s.text}}})
                                : json::array({{{"type", "thinking"}, {"thinking", s.thinking}, {"signature", "c2ln"}},
                                               {{"type", "text"}, {"text", s.text}}})},
                {"stop_reason", s.truncated ? "max_tokens" : "end_turn"}};
      if (s.usage)
        j["usage"] = {{"input_tokens", s.usage->input},
                      {"output_tokens", s.usage->output},
                      {"cache_read_input_tokens", s.usage->cache_read},
                      {"cache_creation_input_tokens", s.usage->cache_write}};
      return j.dump();
    }
    json content = json::array({{{"text", s.text}}});
    if (!s.thinking.empty())
      content.insert(content.begin(),
                     json{{"reasoningContent", {{"reasoningText", {{"text", s.thinking}, {"signature", "c2ln"}}}}}});
    json j = {{"output", {{"message", {{"role", "assistant"}, {"content", content}}}}},
              {"stopReason", s.truncated ? "max_tokens" : "end_turn"},
              {"metrics", {{"latencyMs", 5}}}};
    if (s.usage)
      j["usage"] = {{"inputTokens", s.usage->input},
                    {"outputTokens", s.usage->output},
                    {"totalTokens", s.usage->input + s.usage->output},
                    {"cacheReadInputTokens", s.usage->cache_read},
                    {"cacheWriteInputTokens", s.usage->cache_write}};
    return j.dump();
  }

  std::string check_path(const ReceivedRequest& r) const {
    if (r.method != "POST") return "method " + r.method;
    if (protocol_ == Protocol::kOpenAi && r.path != "/v1/chat/completions") return "path " + r.path;
    if (protocol_ == Protocol::kAnthropic && r.path != "/v1/messages") return "path " + r.path;
    if (protocol_ == Protocol::kBedrock) {
      if (r.path.rfind("/model/", 0) != 0 || r.path.size() < 16 || r.path.substr(r.path.size() - 9) != "/converse")
        return "path " + r.path;
      if (r.path.find(':') != std::string::npos) return "model id not percent-encoded in " + r.path;
      std::string why = verify_sigv4(r, creds_);
      if (!why.empty()) return "SigV4: " + why;
    }
    return check_thinking(r);
  }

  /// Extended thinking as the real APIs constrain it: a budget of at least 1024
  /// tokens and below the token limit, and no temperature or top_p beside it.
  std::string check_thinking(const ReceivedRequest& r) const {
    using nlohmann::json;
    json b = json::parse(r.body, nullptr, false);
    if (!b.is_object()) return "";
    const json* t = nullptr;
    const json* limits = &b;
    std::string max_key = "max_tokens", temp_key = "temperature", top_key = "top_p";
    if (protocol_ == Protocol::kAnthropic && b.contains("thinking")) t = &b["thinking"];
    if (protocol_ == Protocol::kBedrock && b.contains("additionalModelRequestFields") &&
        b["additionalModelRequestFields"].contains("thinking")) {
      t = &b["additionalModelRequestFields"]["thinking"];
      if (!b.contains("inferenceConfig")) return "thinking without inferenceConfig.maxTokens";
      limits = &b["inferenceConfig"];
      max_key = "maxTokens", temp_key = "temperature", top_key = "topP";
    }
    if (!t) return "";
    if (!t->is_object() || t->value("type", "") != "enabled" || !t->contains("budget_tokens") ||
        !(*t)["budget_tokens"].is_number_integer())
      return "malformed thinking block";
    int budget = (*t)["budget_tokens"].get<int>();
    if (budget < 1024) return "thinking budget below 1024";
    if (!limits->contains(max_key) || !(*limits)[max_key].is_number_integer() || (*limits)[max_key].get<int>() <= budget)
      return "thinking budget not below the token limit";
    if (limits->contains(temp_key) || limits->contains(top_key)) return "temperature or top_p sent with thinking";
    return "";
  }

  ScriptedResponse handle(const ReceivedRequest& r) {
    Step s;
    std::string problem = check_path(r);
    {
      std::lock_guard lock(mu_);
      received_.push_back(r);
      if (!problem.empty()) problems_.push_back(problem);
      ++in_flight_;
      max_in_flight_ = std::max(max_in_flight_, in_flight_);
      if (!script_.empty()) {
        s = script_.front();
        script_.pop_front();
      } else {
        s = fallback_;
      }
    }
    ScriptedResponse out;
    if (!problem.empty()) {
      out.status = protocol_ == Protocol::kBedrock ? 403 : 404;
      out.body = nlohmann::json{{"message", "fake rejected the request: " + problem}}.dump();
    } else {
      out.status = s.status;
      out.headers = s.headers;
      out.delay_s = s.delay_s;
      out.hang_up = s.hang_up;
      if (s.raw_body) {
        out.body = *s.raw_body;
      } else if (s.status == 200) {
        out.body = body_for(s);
      } else {
        out.body = nlohmann::json{{"error", {{"type", "fake_error"}, {"message", "scripted status " + std::to_string(s.status)}}}}.dump();
      }
    }
    // The request stays in flight until its (possibly delayed) reply is written.
    out.after = [this] {
      std::lock_guard lock(mu_);
      --in_flight_;
    };
    return out;
  }

  Protocol protocol_;
  AwsTestCredentials creds_;
  mutable std::mutex mu_;
  std::deque<Step> script_;
  Step fallback_;
  std::vector<ReceivedRequest> received_;
  std::vector<std::string> problems_;
  int in_flight_ = 0, max_in_flight_ = 0;
  HttpServer server_;  // last: destroyed (stopped) first
};

}  // namespace mk::fakes
