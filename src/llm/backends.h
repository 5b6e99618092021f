// The providers that actually answer: OpenAI-compatible chat completions,
// Anthropic messages, Bedrock Converse, a command per request (exec:), and a
// recorded session (replay:). Each makes one attempt per complete() call; the
// decorators in decorators.h add retries, caps, caching and accounting.
// Most callers want make_provider() in factory.h instead.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "llm/http.h"
#include "llm/provider.h"
#include "llm/sigv4.h"
#include "util/result.h"
#include "util/subprocess.h"

namespace mk::llm {

struct BackendOptions {
  std::string spec;      ///< "openai:gpt-4o", reported by spec()
  std::string model;     ///< the part after "kind:"
  std::string base_url;  ///< resolved, without a trailing '/'
  std::string api_key;   ///< openai (optional) / anthropic
  double connect_timeout_s = 10;
  double total_timeout_s = 600;
  std::string max_tokens_field = "max_tokens";     ///< openai: or "max_completion_tokens"
  std::string anthropic_version = "2023-06-01";
  bool prompt_caching = true;                       ///< anthropic cache_control / bedrock cachePoint
  std::string region;                               ///< bedrock
  AwsCredentials aws;                               ///< bedrock
  std::string key_hint;  ///< what to check after a 401/403, e.g. "OPENAI_API_KEY"
  std::string url_hint;  ///< where the endpoint came from, e.g. "--base-url / OPENAI_BASE_URL"
  std::function<bool()> cancelled;  ///< aborts requests in flight when it returns true
};

std::shared_ptr<Provider> make_openai_backend(BackendOptions o);
std::shared_ptr<Provider> make_anthropic_backend(BackendOptions o);
std::shared_ptr<Provider> make_bedrock_backend(BackendOptions o);

struct ExecOptions {
  std::string command;       ///< run as sh -c COMMAND
  double timeout_s = 600;    ///< per request; the process group is killed after it
  Env env;                   ///< the child's environment (MKEVOLVE_AGENT/TASK/SAMPLE are added)
  std::function<bool()> cancelled;  ///< when it returns true the command's group is killed (Ctrl-C)
};
std::shared_ptr<Provider> make_exec_backend(ExecOptions o);

/// Loads a recording (format in docs/LLM.md). Errors name the file and line.
Result<std::shared_ptr<Provider>> make_replay_backend(const std::filesystem::path& file);

// Shared by the HTTP backends.

/// X-MKEvolve-Agent / X-MKEvolve-Task (always sent; "-" when unset).
std::vector<std::pair<std::string, std::string>> mkevolve_headers(const Request& req);

/// One HTTP exchange: transport errors and non-2xx statuses become LlmErrors
/// (http_error); a 2xx body goes to parse.
Reply http_exchange(HttpClient& http, const HttpRequest& hreq, const EndpointInfo& who,
                    const std::function<Reply(const std::string& body)>& parse);

/// Provider::probe() for an HTTP backend: GET url (a models list) with these
/// headers and a short deadline; an error only when the server cannot be
/// reached or refuses the key.
std::optional<LlmError> probe_endpoint(HttpClient& http, HttpRequest hreq, const EndpointInfo& who);

}  // namespace mk::llm
