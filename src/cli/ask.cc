// `mkevolve ask`: one prompt through the full provider stack (retries, cap,
// cache, accounting), to check an LLM setup. The reply goes to stdout, a usage
// line to stderr (or everything as one JSON object with --json).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/registry.h"
#include "llm/accounting.h"
#include "llm/factory.h"
#include "llm/wire.h"
#include "util/config.h"

namespace mk::cli {
namespace {

namespace fs = std::filesystem;

std::string usage_line(const std::string& spec, const llm::Completion& c, std::optional<double> cost_usd,
                       double latency_s) {
  char buf[512];
  const llm::Usage& u = c.usage;
  std::snprintf(buf, sizeof buf, "[%s] tokens: in %lld, out %lld, cache read %lld, cache write %lld%s", spec.c_str(),
                static_cast<long long>(u.input), static_cast<long long>(u.output),
                static_cast<long long>(u.cache_read), static_cast<long long>(u.cache_write),
                u.estimated ? " (estimated)" : "");
  std::string line = buf;
  if (c.from_cache) line += "; served from the cache (cost nothing this time)";
  if (cost_usd) {
    std::snprintf(buf, sizeof buf, "; cost $%.6f", *cost_usd);
    line += buf;
  }
  std::snprintf(buf, sizeof buf, "; %.2f s", latency_s);
  line += buf;
  if (c.truncated) line += "; TRUNCATED (finish reason " + c.finish_reason + "): raise --max-tokens";
  return line;
}

/// What a failed request's error is about: endpoint problems are "missing on
/// this machine"; the exit status comes from the one table (util/exit_code.h).
ErrorKind kind_of(const llm::LlmError& e) {
  using K = llm::LlmError::Kind;
  switch (e.kind) {
    case K::kNetwork: case K::kTimeout: case K::kAuth: case K::kNotFound: case K::kConfig:
      return ErrorKind::kMissing;
    case K::kUnmatchedReplay:
      return ErrorKind::kBadInput;
    case K::kCancelled:
      return ErrorKind::kInterrupted;
    default:
      return ErrorKind::kOther;
  }
}

int exit_for(const llm::LlmError& e) { return exit_code(kind_of(e)); }

fs::path default_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "mkevolve" / "llm-cache";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "mkevolve" / "llm-cache";
  return {};
}

int ask_cmd_main(int argc, char** argv) {
  CLI::App app{"Sends one prompt to an LLM provider and prints the reply and its token usage. Use it to check a "
               "provider setup. SPEC is openai:MODEL, anthropic:MODEL, bedrock:MODEL, exec:COMMAND, replay:FILE "
               "or a [llm.providers.NAME] alias from the config. Without --llm: $MKEVOLVE_LLM, llm.provider, then "
               "ANTHROPIC_API_KEY or OPENAI_API_KEY with a default model.",
               argv[0]};
  app.footer(help_footer({
                     "mkevolve ask --llm anthropic:claude-opus-4-5 'Say hi'",
                     "OPENAI_BASE_URL=http://localhost:8000/v1 mkevolve ask --llm openai:Qwen/Qwen3-32B 'Say hi'",
                     "mkevolve ask --llm exec:./my-llm.sh --json < prompt.txt"},
                    {
                     {0, "the provider answered"},
                     {1, "the provider answered badly (empty, malformed, rejected, or still failing after the retries)"},
                     {2, "bad usage or config (a misspelt spec, an unmatched replay)"},
                     {3, "no LLM given, the endpoint is unreachable, refused the credentials or does not know the model"},
                     {130, "interrupted"}}));
  std::string spec, system, base_url, config_path, record, cache_dir, prompt, agent = "ask", task = "ask";
  int max_tokens = 0, concurrency = 0, retries = -1;
  double timeout_s = 0, temperature = -1;
  std::string reasoning_effort;
  bool no_cache = false, use_cache = false, as_json = false;
  std::optional<OptionGroup> group;
  group.emplace(app, "Request");
  app.add_option("prompt", prompt, "the prompt ('-', or none when stdin is not a terminal, reads it from stdin)")
      ->type_name("TEXT");
  app.add_option("--llm", spec,
                 "provider spec (default: $MKEVOLVE_LLM, else llm.provider in the config, else ANTHROPIC_API_KEY "
                 "or OPENAI_API_KEY with a default model)")
      ->type_name("SPEC");
  app.add_option("-s,--system", system, "system prompt");
  app.add_option("--max-tokens", max_tokens, "reply token limit (default: llm.max_tokens, else 4096)")
      ->check(CLI::PositiveNumber);
  app.add_option("--temperature", temperature, "sampling temperature (default: the provider's)");
  app.add_option("--reasoning-effort", reasoning_effort, "low, medium or high (OpenAI-compatible providers)")
      ->check(CLI::IsMember({"low", "medium", "high"}));
  group.reset();
  group.emplace(app, "Endpoint");
  app.add_option("--base-url", base_url, "endpoint override for HTTP providers (gateways, local servers)")
      ->type_name("URL");
  app.add_option("--config", config_path, "configuration file (default: ./mkevolve.toml, then ~/.config/mkevolve/config.toml)")
      ->type_name("FILE");
  app.add_option("--record", record, "append this call to FILE in the replay format")->type_name("FILE");
  app.add_flag("--cache", use_cache, "read and write the response cache (off by default: ask tests a setup, so "
                                     "every call goes to the endpoint)");
  app.add_flag("--no-cache", no_cache, "no response cache (the default; kept for scripts)");
  app.add_option("--cache-dir", cache_dir, "response cache directory, with --cache (default: ~/.cache/mkevolve/llm-cache)");
  app.add_option("--llm-concurrency", concurrency, "requests in flight per provider")->check(CLI::PositiveNumber);
  app.add_option("--timeout", timeout_s, "seconds per attempt (default: llm.timeout_s, else 600)")
      ->check(CLI::PositiveNumber);
  app.add_option("--retries", retries, "retries on transient errors (default: llm.max_retries, else 6)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--agent", agent, "X-MKEvolve-Agent header value");
  app.add_option("--task", task, "X-MKEvolve-Task header value");
  group.reset();
  group.emplace(app, "Output");
  app.add_flag("--json", as_json, "print {reply, usage, ...} as one JSON object on stdout");
  group.reset();
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  auto fail = [](const std::string& msg, int code) {
    std::fprintf(stderr, "mkevolve ask: %s\n", msg.c_str());
    return code;
  };
  auto config = discover_config("ask", config_path);
  if (!config) return fail(config.error(), kExitUsage);
  bool from_stdin = prompt == "-" || (prompt.empty() && !::isatty(STDIN_FILENO));
  if (prompt.empty() && !from_stdin)
    return fail("no prompt: give it as an argument, or pipe it in (mkevolve ask < prompt.txt)", kExitUsage);
  if (from_stdin) prompt.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  if (prompt.empty()) return fail("the prompt is empty", kExitUsage);
  if (use_cache && no_cache) return fail("--cache and --no-cache contradict each other", kExitUsage);

  // The LLM as every command finds it (llm::resolve_spec): said when an API
  // key alone chose it; none at all is "missing" (exit 3), in run's words.
  auto resolved = llm::resolve_spec(spec, nullptr, *config);
  if (!resolved) return fail(resolved.error(), kExitUsage);
  if (resolved->spec.empty()) return fail(llm::no_llm_message(), kExitEnvironment);
  if (!resolved->chosen_because.empty())
    std::fprintf(stderr, "mkevolve ask: LLM: %s (%s; choose another with --llm)\n", resolved->spec.c_str(),
                 resolved->chosen_because.c_str());
  llm::Accounting acc;
  llm::ProviderOptions o;
  o.spec = resolved->spec;
  o.base_url = base_url;
  o.concurrency = concurrency;
  o.total_timeout_s = timeout_s;
  o.max_retries = retries;
  o.record_path = record;
  o.accounting = &acc;
  if (use_cache) o.cache_dir = cache_dir.empty() ? default_cache_dir() : fs::path(cache_dir);
  o.on_retry = [](const llm::LlmError& e, int attempt, int attempts, double wait_s) {
    std::fprintf(stderr, "mkevolve ask: attempt %d of %d failed (%s); retrying in %.1f s\n", attempt, attempts,
                 e.message.c_str(), wait_s);
  };
  auto provider = llm::make_provider(o, &*config);
  if (!provider)  // a missing key is missing on this machine; the rest is the spec's or the config's fault
    return fail(provider.error(), provider.error_kind() == ErrorKind::kMissing ? kExitEnvironment : kExitUsage);

  llm::Request req;
  req.system = system;
  req.messages.push_back({"user", prompt});
  auto cfg_max = config->get_int("llm.max_tokens", 4096);
  if (!cfg_max) return fail(cfg_max.error(), kExitUsage);
  req.max_tokens = max_tokens > 0 ? max_tokens : static_cast<int>(*cfg_max);
  if (temperature >= 0) req.temperature = temperature;
  req.reasoning_effort = reasoning_effort;
  req.agent = agent;
  req.task = task;

  llm::Reply r = (*provider)->complete(req);
  const auto calls = acc.calls();
  double latency = calls.empty() ? 0 : calls.back().latency_s;
  if (!r.ok()) {
    if (as_json)
      std::printf("%s\n", nlohmann::json{{"ok", false}, {"spec", (*provider)->spec()},
                                         {"error", llm::error_to_json(*r.error)}}.dump().c_str());
    return fail(r.error->message, exit_for(*r.error));
  }
  const llm::Completion& c = *r.completion;
  if (as_json) {
    nlohmann::json j = {{"ok", true},
                        {"spec", (*provider)->spec()},
                        {"reply", c.text},
                        {"model", c.model},
                        {"finish_reason", c.finish_reason},
                        {"truncated", c.truncated},
                        {"cached", c.from_cache},
                        {"usage", llm::usage_to_json(c.usage)},
                        {"latency_s", latency}};
    if (!calls.empty() && calls.back().cost_usd) j["cost_usd"] = *calls.back().cost_usd;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::fwrite(c.text.data(), 1, c.text.size(), stdout);
    if (c.text.empty() || c.text.back() != '\n') std::fputc('\n', stdout);
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n", usage_line((*provider)->spec(), c, calls.empty() ? std::nullopt : calls.back().cost_usd, latency).c_str());
  }
  return kExitOk;
}

static Register reg_ask("ask", "send one prompt to an LLM provider and print the reply and its token usage", &ask_cmd_main);

}  // namespace
}  // namespace mk::cli
