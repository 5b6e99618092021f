// Provider wrappers, each adding one concern around an inner Provider.
// make_provider() stacks them: backend -> retry -> concurrency cap -> cache ->
// record -> accounting (the last is outermost).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include "llm/accounting.h"
#include "llm/provider.h"

namespace mk::llm {

struct RetryOptions {
  int max_retries = 6;            ///< extra attempts after the first
  double initial_backoff_s = 1;   ///< doubles per attempt, with jitter in [50%, 100%]
  double max_backoff_s = 60;
  double max_retry_after_s = 300; ///< a longer Retry-After is capped at this
  /// How to wait; tests may replace it. Default: std::this_thread::sleep_for.
  std::function<void(double seconds)> sleep;
  /// When it returns true, no further attempt is made (and the default sleep ends early).
  std::function<bool()> cancelled;
  /// Told before each wait: the error, the attempt that failed (1-based), the
  /// attempts allowed in all, and the seconds it will wait (a 429 is then not
  /// seconds of silence). Empty: nothing is said.
  std::function<void(const LlmError& error, int attempt, int attempts, double wait_s)> on_retry;
};

/// Retries replies whose error is retryable; honours Retry-After.
std::shared_ptr<Provider> with_retry(std::shared_ptr<Provider> inner, RetryOptions o);

/// At most `limit` complete() calls in flight at once (counting semaphore).
std::shared_ptr<Provider> with_concurrency_cap(std::shared_ptr<Provider> inner, int limit);

/// Content-addressed response cache: one JSON file per successful reply under
/// dir/<2 hex>/<64 hex>.json, keyed by spec, model-relevant parameters, system,
/// messages and sample (request_fingerprint), never by agent/task; and by
/// endpoint, a base URL other than the provider's default ("" for the
/// default, so keys made before endpoints counted stay valid). Hits carry
/// from_cache = true. Unreadable entries count as misses.
std::shared_ptr<Provider> with_cache(std::shared_ptr<Provider> inner, std::filesystem::path dir,
                                     std::string endpoint = "");

/// The cache key of req for a provider spec and endpoint (exposed for tests and tools).
std::string cache_key(const std::string& spec, const Request& req, const std::string& endpoint = "");

/// Appends every finished call (reply or final error) to a JSON-lines file in the
/// replay format (docs/LLM.md). No headers, no keys.
std::shared_ptr<Provider> with_recording(std::shared_ptr<Provider> inner, std::filesystem::path file);

/// Records each call's usage, latency and outcome into acc (not owned; must outlive the provider).
std::shared_ptr<Provider> with_accounting(std::shared_ptr<Provider> inner, Accounting* acc);

}  // namespace mk::llm
