// A small HTTP client for the LLM backends (libcurl behind a pimpl, so nothing
// else sees curl). One client is shared by all threads of a provider; it keeps
// idle connections for reuse. It never retries: the retry decorator does.
#pragma once

#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "llm/provider.h"

namespace mk::llm {

struct HttpRequest {
  std::string method = "POST";
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;  ///< sent as given
  std::string body;
  double connect_timeout_s = 10;
  double total_timeout_s = 600;  ///< whole exchange, including the body
  /// Polled about every 100 ms while waiting; returning true aborts the exchange.
  std::function<bool()> cancelled;
};

struct HttpResponse {
  enum class Failure { kNone, kConnect, kTimeout, kFatal, kCancelled, kOther };  ///< kFatal: bad URL or TLS, no retry
  Failure failure = Failure::kNone;  ///< kNone: status/headers/body are valid
  std::string error;                 ///< curl's description when failure != kNone
  int status = 0;
  std::map<std::string, std::string> headers;  ///< names in lower case
  std::string body;
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

class HttpClient {
 public:
  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;
  /// Thread-safe; never throws.
  HttpResponse send(const HttpRequest& req);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Seconds to wait from a Retry-After value: delta-seconds ("7") or an HTTP date
/// (relative to now). -1 when absent or unparseable; 0 for dates in the past.
double parse_retry_after(const std::string& value, std::time_t now);

/// Who we are talking to, for error messages that say what to fix.
struct EndpointInfo {
  std::string provider;  ///< "openai", "anthropic", "bedrock"
  std::string key_hint;  ///< "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "the AWS credentials (...)"
  std::string url_hint;  ///< "--base-url / OPENAI_BASE_URL"
  std::string model;
};

/// Turns a transport failure or a non-2xx response into an LlmError whose one-line
/// message names the status, the provider and the fix; retryable for timeouts,
/// dropped connections, 408, 409, 429, 500, 502, 503, 504 and 529; final at
/// once for a refused connection, a name that does not resolve, a TLS failure,
/// a bad URL, 401, 403, 404 and every other 4xx. Server text is
/// shortened and passed through redact_secrets().
LlmError http_error(const HttpResponse& resp, const HttpRequest& req, const EndpointInfo& who);

/// Replaces CR/LF and other control characters so a value is safe in a header.
std::string header_safe(std::string value);

/// Percent-encodes everything but RFC 3986 unreserved characters (A-Z a-z 0-9 - . _ ~).
std::string uri_encode(std::string_view s);

}  // namespace mk::llm
