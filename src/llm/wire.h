// JSON forms of requests and replies shared by the backends, the response
// cache, recordings and replays, plus request fingerprints and usage estimates.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "llm/provider.h"
#include "util/result.h"

namespace mk::llm {

/// The OpenAI chat-completions body for req (system as the first message).
nlohmann::json openai_chat_body(const Request& req, const std::string& model,
                                const std::string& max_tokens_field = "max_tokens");

/// Parses an OpenAI chat-completion reply. `who` names the source in errors.
/// Missing usage -> estimated. Empty text -> kEmpty; bad JSON or shape -> kMalformed.
Reply parse_openai_chat(const std::string& body, const Request& req, const std::string& who);

/// Claude's extended thinking takes a token budget, not an effort level: "low"
/// 2048, "medium" 8192, "high" 24576 tokens; 0 for no effort; nullopt for a
/// value that is none of these.
std::optional<int> thinking_budget(const std::string& effort);

/// Hash of what determines the answer: system, messages, max_tokens, temperature,
/// top_p, seed, reasoning_effort and sample. Not agent, task or cache_prefix_messages.
std::string request_fingerprint(const Request& req);

/// Full request (agent and task included), for recordings.
nlohmann::json request_to_json(const Request& req);
Result<Request> request_from_json(const nlohmann::json& j);

nlohmann::json usage_to_json(const Usage& u);
Usage usage_from_json(const nlohmann::json& j);

/// Completion without from_cache (a stored reply is the same reply wherever it is read).
nlohmann::json completion_to_json(const Completion& c);
Result<Completion> completion_from_json(const nlohmann::json& j);

/// About four characters a token; marked estimated.
Usage estimate_usage(const Request& req, const std::string& reply_text);

/// The start of the last user message, on one line, for error messages.
std::string prompt_excerpt(const Request& req, size_t max_chars = 80);

/// text on one line, quoted, cut after max_chars.
std::string excerpt(const std::string& text, size_t max_chars = 80);

/// "agent=generate task=L1/19"
std::string request_label(const Request& req);

/// Stable names for error kinds in recordings ("network", "timeout", "http", ...).
std::string error_kind_name(LlmError::Kind k);
LlmError::Kind error_kind_from_name(const std::string& name);  ///< unknown -> kHttp
nlohmann::json error_to_json(const LlmError& e);
LlmError error_from_json(const nlohmann::json& j);

/// Makes an LlmError reply.
Reply error_reply(LlmError::Kind kind, std::string message, bool retryable = false);

}  // namespace mk::llm
