// The one interface every LLM backend and every wrapper (retry, cache, record,
// accounting) implements. Agents and search see only this.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mk::llm {

struct Message {
  std::string role;     ///< "user" or "assistant"
  std::string content;
};

struct Request {
  std::string system;                 ///< system prompt (may be empty)
  std::vector<Message> messages;
  int max_tokens = 16384;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> seed;
  std::string reasoning_effort;       ///< "", "low", "medium", "high"
  /// Who asks and for what: sent as X-MKEvolve-Agent / X-MKEvolve-Task headers
  /// and used for token accounting. Not part of the cache key.
  std::string agent;                  ///< decompose, generate, debug, optimize, split, fuse, postfuse, judge, ask
  std::string task;                   ///< problem or subproblem id
  /// Number of leading messages that form a stable shared prefix worth caching
  /// (Anthropic cache_control); 0 = only the system prompt.
  int cache_prefix_messages = 0;
  /// Index of an intended independent sample of the same request (parallel
  /// sampling asks the same prompt many times). Part of the response-cache key,
  /// never sent. Resume relies on it: the k-th sample is cached as the k-th.
  int sample = 0;
};

struct Usage {
  int64_t input = 0;
  int64_t output = 0;
  int64_t cache_read = 0;
  int64_t cache_write = 0;
  bool estimated = false;  ///< true when the provider reported none and we estimated
  int64_t total() const { return input + output + cache_read + cache_write; }
  Usage& operator+=(const Usage& o) {
    input += o.input;
    output += o.output;
    cache_read += o.cache_read;
    cache_write += o.cache_write;
    estimated = estimated || o.estimated;
    return *this;
  }
};

struct Completion {
  std::string text;
  Usage usage;
  std::string finish_reason;   ///< as the provider said it ("stop", "length", "end_turn", "max_tokens", ...)
  bool truncated = false;      ///< the reply hit the token limit
  std::string model;
  bool from_cache = false;     ///< served from the response cache: cost nothing this time
};

struct LlmError {
  /// kCancelled: the run is being interrupted (Ctrl-C); the caller should stop, not retry or count it.
  enum class Kind { kNetwork, kTimeout, kHttp, kAuth, kBadRequest, kNotFound, kMalformed, kEmpty, kUnmatchedReplay, kConfig,
                    kCancelled };
  Kind kind = Kind::kNetwork;
  int http_status = 0;
  std::string message;   ///< one line: what happened and what to do about it
  bool retryable = false;
  double retry_after_s = -1;  ///< from Retry-After, when the server sent one
  /// Tokens the endpoint billed for the failed answer (an empty reply that
  /// reported its usage, say), summed over the attempts the retries made: the
  /// run's token counts include them, as the bill does.
  Usage billed;
};

/// Either a Completion or an LlmError.
struct Reply {
  std::optional<Completion> completion;
  std::optional<LlmError> error;
  bool ok() const { return completion.has_value(); }
  static Reply Ok(Completion c) { return Reply{std::move(c), std::nullopt}; }
  static Reply Err(LlmError e) { return Reply{std::nullopt, std::move(e)}; }
};

class Provider {
 public:
  virtual ~Provider() = default;
  /// "openai:gpt-5", "anthropic:claude-opus-4-5", "replay:session.jsonl", ...
  virtual std::string spec() const = 0;
  /// Thread-safe. Blocks until the reply, or a final error, arrives.
  virtual Reply complete(const Request& req) = 0;
  /// Before the first paid call: one free request (the endpoint's models
  /// list) that shows the endpoint answers and takes the key. An error only
  /// for what no retry fixes: the server cannot be reached (refused, DNS,
  /// TLS, timeout) or it refuses the key (401/403); any other answer counts
  /// as reachable. nullopt also where there is nothing to probe (exec:,
  /// replay:, bedrock:). Thread-safe; never retried.
  virtual std::optional<LlmError> probe() { return std::nullopt; }
};

}  // namespace mk::llm
