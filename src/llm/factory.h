// Builds a ready-to-use Provider from a spec string, CLI options and the config
// file: backend -> retry -> concurrency cap -> cache -> record -> accounting.
//
//   mk::llm::Accounting acc;
//   mk::llm::ProviderOptions o;
//   o.spec = "anthropic:claude-sonnet-4-5";      // or "" to use llm.provider
//   o.cache_dir = run_dir / "llm-cache";
//   o.accounting = &acc;
//   auto p = mk::llm::make_provider(o, &config);  // Result<shared_ptr<Provider>>
//
// Specs: openai:MODEL, anthropic:MODEL, bedrock:MODEL, exec:COMMAND,
// replay:FILE, or the NAME of a [llm.providers.NAME] table in the config.
// Settings and their precedence are documented in docs/LLM.md.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "llm/accounting.h"
#include "llm/provider.h"
#include "util/config.h"
#include "util/result.h"
#include "util/subprocess.h"

namespace mk::llm {

struct ProviderOptions {
  std::string spec;          ///< --llm; empty: the config's llm.provider
  std::string base_url;      ///< --base-url; empty: env, then config, then the provider's default
  int concurrency = 0;       ///< --llm-concurrency; 0: config, else 8
  double connect_timeout_s = 0;  ///< 0: config llm.connect_timeout_s, else 10
  double total_timeout_s = 0;    ///< per attempt; 0: config llm.timeout_s, else 600
  int max_retries = -1;          ///< -1: config llm.max_retries, else 6
  double initial_backoff_s = -1; ///< -1: config llm.initial_backoff_s, else 1 (tests use ~0.01)
  double max_backoff_s = -1;     ///< -1: config llm.max_backoff_s, else 60
  std::filesystem::path cache_dir;    ///< empty: no response cache (config llm.cache = false also disables)
  std::filesystem::path record_path;  ///< non-empty: append every call here (replay format)
  Accounting* accounting = nullptr;   ///< not owned; gets prices from [llm.prices] unless it has some
  /// Where keys and AWS settings come from; nullptr: this process's environment.
  const Env* env = nullptr;
  std::filesystem::path home;         ///< for ~/.aws; empty: $HOME
  /// Replaces the retry wait (tests); empty: sleep.
  std::function<void(double seconds)> sleep;
  /// Told before each retry's wait (RetryOptions::on_retry); empty: nothing.
  std::function<void(const LlmError& error, int attempt, int attempts, double wait_s)> on_retry;
  /// Polled while requests wait (e.g. rundir::Interrupt::requested); true aborts
  /// HTTP requests in flight and stops retrying. Empty: never cancelled.
  std::function<bool()> cancelled;
};

/// The full stack for opts.spec. Errors are one line naming the problem and the
/// fix: an unknown provider, a missing model, a bad base URL, missing credentials,
/// a missing replay file, or a bad config value (with file and line).
Result<std::shared_ptr<Provider>> make_provider(const ProviderOptions& opts, const Config* cfg);

/// Splits "kind:rest". Unknown kinds get an error with the list of kinds (and a
/// did-you-mean); aliases are resolved by make_provider, not here.
struct SpecParts {
  std::string kind;  ///< openai, anthropic, bedrock, exec, replay
  std::string rest;  ///< model, command or file
};
Result<SpecParts> parse_spec(const std::string& spec);

/// The models an API key alone stands for (README, scripts/demo.sh).
inline constexpr const char* kDefaultAnthropicSpec = "anthropic:claude-opus-4-5";
inline constexpr const char* kDefaultOpenAiSpec = "openai:gpt-5";

/// Which LLM a command uses and why.
struct ResolvedSpec {
  std::string spec;  ///< "" when nothing names one (no_llm_message says what to do)
  /// Set when the spec was not written anywhere but chosen from an API key in
  /// the environment: "ANTHROPIC_API_KEY is set", for the line a command prints.
  std::string chosen_because;
};

/// The spec `flag` (--llm), else $MKEVOLVE_LLM, else llm.provider in the
/// config, else a default model for ANTHROPIC_API_KEY, else for
/// OPENAI_API_KEY. env: nullptr for this process's environment. An error only
/// for a malformed config value.
Result<ResolvedSpec> resolve_spec(const std::string& flag, const Env* env, const Config& cfg);

/// The one wording of "no LLM was given" (ask, run, bench, decompose, ...):
/// what to pass or set. Its kind is ErrorKind::kMissing (exit 3).
std::string no_llm_message(const std::string& flag = "--llm");

}  // namespace mk::llm
