#include "llm/factory.h"

#include <algorithm>
#include <cstdlib>

#include "llm/backends.h"
#include "llm/decorators.h"
#include "util/env.h"
#include "util/strings.h"

namespace mk::llm {

namespace {

const char* kKinds[] = {"openai", "anthropic", "bedrock", "exec", "replay"};
const char* kUsage = "use openai:MODEL, anthropic:MODEL, bedrock:MODEL, exec:COMMAND or replay:FILE";

std::string env_get(const Env& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

/// Looks settings up in [llm.providers.ALIAS], then [llm.KIND], then [llm].
struct Settings {
  const Config& cfg;
  std::string alias;  // "" when the spec was not an alias
  std::string kind;

  std::vector<std::string> places(const std::string& key, bool general) const {
    std::vector<std::string> out;
    if (!alias.empty()) out.push_back("llm.providers.\"" + alias + "\"." + key);
    out.push_back("llm." + kind + "." + key);
    if (general) out.push_back("llm." + key);
    return out;
  }
  Result<std::optional<std::string>> str(const std::string& key, bool general = false) const {
    for (const auto& k : places(key, general)) {
      auto v = cfg.find_string(k);
      if (!v.ok() || v->has_value()) return v;
    }
    return std::optional<std::string>();
  }
  Result<std::optional<double>> num(const std::string& key, bool general = true) const {
    for (const auto& k : places(key, general)) {
      auto v = cfg.find_number(k);
      if (!v.ok() || v->has_value()) return v;
    }
    return std::optional<double>();
  }
  Result<std::optional<bool>> flag(const std::string& key, bool general = false) const {
    for (const auto& k : places(key, general)) {
      auto v = cfg.find_bool(k);
      if (!v.ok() || v->has_value()) return v;
    }
    return std::optional<bool>();
  }
};

#define MK_TRY(var, expr)                          \
  auto var##_r = (expr);                           \
  if (!var##_r.ok()) return var##_r.error_info();   \
  auto var = *var##_r;

Status check_url(const std::string& url, const std::string& from) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
    return Error{"base URL '" + url + "' (from " + from + ") must start with http:// or https://"};
  return Status::Ok();
}

}  // namespace

std::string no_llm_message(const std::string& flag) {
  return "no LLM: pass " + flag + " SPEC (e.g. " + kDefaultAnthropicSpec +
         ", openai:MODEL with --base-url for a local server, replay:FILE), or set $MKEVOLVE_LLM, llm.provider in "
         "mkevolve.toml, ANTHROPIC_API_KEY or OPENAI_API_KEY";
}

Result<ResolvedSpec> resolve_spec(const std::string& flag, const Env* env_in, const Config& cfg) {
  const Env env = env_in ? *env_in : current_environment();
  ResolvedSpec r;
  r.spec = flag;
  if (r.spec.empty()) r.spec = env_get(env, "MKEVOLVE_LLM");
  if (r.spec.empty()) {
    MK_TRY(s, cfg.find_string("llm.provider"));
    if (s) r.spec = *s;
  }
  if (r.spec.empty()) {
    for (auto [var, spec] : {std::pair{"ANTHROPIC_API_KEY", kDefaultAnthropicSpec},
                             std::pair{"OPENAI_API_KEY", kDefaultOpenAiSpec}}) {
      if (env_get(env, var).empty()) continue;
      r.spec = spec;
      r.chosen_because = std::string(var) + " is set";
      break;
    }
  }
  return r;
}

Result<SpecParts> parse_spec(const std::string& spec) {
  if (spec.empty()) return Error{no_llm_message(), ErrorKind::kMissing};
  auto colon = spec.find(':');
  std::string kind = spec.substr(0, colon);
  std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  bool known = std::any_of(std::begin(kKinds), std::end(kKinds), [&](const char* k) { return kind == k; });
  if (!known) {
    const std::string best = nearest(kind, std::vector<std::string>(std::begin(kKinds), std::end(kKinds)));
    std::string msg = "unknown LLM provider '" + kind + "' in '" + spec + "'";
    if (!best.empty()) msg += " (did you mean '" + best + ":" + rest + "'?)";
    return Error{msg + ": " + kUsage, ErrorKind::kBadInput};
  }
  while (!rest.empty() && rest.front() == ' ') rest.erase(rest.begin());
  if (rest.empty()) {
    std::string what = kind == "exec" ? "command" : kind == "replay" ? "file" : "model";
    std::string example = kind == "openai"      ? "openai:gpt-4o"
                          : kind == "anthropic" ? "anthropic:claude-sonnet-4-5"
                          : kind == "bedrock"   ? "bedrock:anthropic.claude-3-5-sonnet-20240620-v1:0"
                          : kind == "exec"      ? "exec:./my-llm.sh"
                                                : "replay:session.jsonl";
    return Error{"LLM provider '" + spec + "' names no " + what + ": write " + kind + ":" +
                     (kind == "exec" ? "COMMAND" : kind == "replay" ? "FILE" : "MODEL") + ", e.g. " + example,
                 ErrorKind::kBadInput};
  }
  return SpecParts{kind, rest};
}

Result<std::shared_ptr<Provider>> make_provider(const ProviderOptions& opts, const Config* cfg_in) {
  static const Config kEmpty;
  const Config& cfg = cfg_in ? *cfg_in : kEmpty;
  const Env env = opts.env ? *opts.env : current_environment();
  std::filesystem::path home = opts.home;
  if (home.empty()) home = env_get(env, "HOME");

  // The spec: the caller's, then $MKEVOLVE_LLM, then llm.provider, then an API key's default model.
  MK_TRY(resolved, resolve_spec(opts.spec, &env, cfg));
  std::string spec = resolved.spec;
  // A config alias: [llm.providers.NAME] spec = "kind:model", plus settings.
  std::string alias;
  if (!spec.empty() && spec.find(':') == std::string::npos && cfg.has("llm.providers.\"" + spec + "\"")) {
    alias = spec;
    std::string key = "llm.providers.\"" + alias + "\".spec";
    MK_TRY(s, cfg.find_string(key));
    if (!s) return cfg.error_at("llm.providers.\"" + alias + "\"", "provider alias has no spec = \"kind:model\"");
    spec = *s;
  }
  MK_TRY(parts, parse_spec(spec));
  Settings set{cfg, alias, parts.kind};

  // General settings: options win, then the config, then defaults.
  MK_TRY(conc_c, set.num("concurrency"));
  MK_TRY(conn_c, set.num("connect_timeout_s"));
  MK_TRY(tot_c, set.num("timeout_s"));
  MK_TRY(retr_c, set.num("max_retries"));
  MK_TRY(ib_c, set.num("initial_backoff_s"));
  MK_TRY(mb_c, set.num("max_backoff_s"));
  MK_TRY(cache_c, cfg.find_bool("llm.cache"));
  int concurrency = opts.concurrency > 0 ? opts.concurrency : static_cast<int>(conc_c.value_or(8));
  double connect_s = opts.connect_timeout_s > 0 ? opts.connect_timeout_s : conn_c.value_or(10);
  double total_s = opts.total_timeout_s > 0 ? opts.total_timeout_s : tot_c.value_or(600);
  RetryOptions retry;
  retry.max_retries = opts.max_retries >= 0 ? opts.max_retries : static_cast<int>(retr_c.value_or(6));
  retry.initial_backoff_s = opts.initial_backoff_s >= 0 ? opts.initial_backoff_s : ib_c.value_or(1);
  retry.max_backoff_s = opts.max_backoff_s >= 0 ? opts.max_backoff_s : mb_c.value_or(60);
  retry.sleep = opts.sleep;
  retry.on_retry = opts.on_retry;
  retry.cancelled = opts.cancelled;
  if (concurrency < 1) return Error{"LLM concurrency must be at least 1 (--llm-concurrency / llm.concurrency)"};
  if (retry.max_retries < 0) return Error{"llm.max_retries must not be negative"};

  BackendOptions b;
  b.spec = spec;
  b.model = parts.rest;
  b.connect_timeout_s = connect_s;
  b.total_timeout_s = total_s;
  b.cancelled = opts.cancelled;

  // The base URL: --base-url, then the alias, then the environment, then [llm.KIND], then the default.
  // A reply cached from one endpoint is never served for another: a base URL
  // other than the provider's default goes into the cache key.
  std::string cache_endpoint;
  auto resolve_base = [&](const char* env_name, const std::string& def) -> Result<std::string> {
    std::string url, from;
    if (!opts.base_url.empty()) {
      url = opts.base_url, from = "--base-url";
    } else {
      std::optional<std::string> alias_url;
      if (!alias.empty()) {
        auto a = cfg.find_string("llm.providers.\"" + alias + "\".base_url");
        if (!a.ok()) return Error{a.error()};
        alias_url = *a;
      }
      std::string e = env_name ? env_get(env, env_name) : "";
      if (alias_url) {
        url = *alias_url, from = cfg.where("llm.providers.\"" + alias + "\".base_url");
      } else if (!e.empty()) {
        url = e, from = env_name;
      } else {
        auto k = cfg.find_string("llm." + parts.kind + ".base_url");
        if (!k.ok()) return Error{k.error()};
        if (*k) {
          url = **k, from = cfg.where("llm." + parts.kind + ".base_url");
        } else {
          url = def, from = "the default";
        }
      }
    }
    while (!url.empty() && url.back() == '/') url.pop_back();
    register_credentials(url);  // a password in the URL's userinfo is hidden wherever text travels
    Status st = check_url(url, from);
    if (!st.ok()) return Error{st.error(), ErrorKind::kBadInput};  // the user's --base-url or config value
    if (from != "the default") cache_endpoint = url;
    return url;
  };
  // A key: the alias/config's api_key_env names a variable, else the standard
  // variable, else an api_key in the config file.
  auto resolve_key = [&](const char* std_env, std::string* hint) -> Result<std::string> {
    auto var = set.str("api_key_env");
    if (!var.ok()) return Error{var.error()};
    std::string name = var->value_or(std_env);
    *hint = name;
    std::string key = env_get(env, name.c_str());
    if (key.empty()) {
      auto k = set.str("api_key");
      if (!k.ok()) return Error{k.error()};
      if (*k) key = **k, *hint = name + " (or api_key in " + cfg.path().string() + ")";
    }
    register_secret(key);
    return key;
  };

  std::shared_ptr<Provider> backend;
  if (parts.kind == "openai") {
    MK_TRY(url, resolve_base("OPENAI_BASE_URL", "https://api.openai.com/v1"));
    MK_TRY(key, resolve_key("OPENAI_API_KEY", &b.key_hint));
    MK_TRY(field, set.str("max_tokens_field"));
    b.base_url = url;
    b.api_key = key;
    b.url_hint = "--base-url / OPENAI_BASE_URL / llm.openai.base_url";
    // Local servers need no key; OpenAI itself always does, so say so now.
    if (key.empty() && url == "https://api.openai.com/v1")
      return Error{"openai: no API key: set " + b.key_hint +
                   " (or llm.openai.api_key), or point --base-url at an OpenAI-compatible server that needs none"};
    if (field) {
      if (*field != "max_tokens" && *field != "max_completion_tokens")
        return cfg.error_at("llm.openai.max_tokens_field", "use \"max_tokens\" or \"max_completion_tokens\"");
      b.max_tokens_field = *field;
    }
    backend = make_openai_backend(b);
  } else if (parts.kind == "anthropic") {
    MK_TRY(url, resolve_base("ANTHROPIC_BASE_URL", "https://api.anthropic.com"));
    MK_TRY(key, resolve_key("ANTHROPIC_API_KEY", &b.key_hint));
    MK_TRY(version, set.str("version"));
    MK_TRY(caching, set.flag("prompt_caching"));
    b.base_url = url;
    b.api_key = key;
    b.url_hint = "--base-url / ANTHROPIC_BASE_URL / llm.anthropic.base_url";
    if (version) b.anthropic_version = *version;
    b.prompt_caching = caching.value_or(true);
    if (key.empty() && url == "https://api.anthropic.com")
      return Error{"anthropic: no API key: set " + b.key_hint + " or llm.anthropic.api_key in the config"};
    backend = make_anthropic_backend(b);
  } else if (parts.kind == "bedrock") {
    MK_TRY(profile, set.str("profile"));
    MK_TRY(region_c, set.str("region"));
    MK_TRY(caching, set.flag("prompt_caching"));
    std::string region = resolve_aws_region(env, home, profile.value_or(""), region_c.value_or(""));
    if (region.empty())
      return Error{"bedrock: no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION) or llm.bedrock.region in the config"};
    MK_TRY(creds, load_aws_credentials(env, home, profile.value_or("")));
    MK_TRY(url, resolve_base("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "https://bedrock-runtime." + region + ".amazonaws.com"));
    b.base_url = url;
    b.region = region;
    b.aws = creds;
    b.url_hint = "--base-url / AWS_REGION / llm.bedrock.base_url";
    // Cache points exist for Anthropic and Amazon Nova models; others reject them.
    bool supports = parts.rest.find("anthropic.") != std::string::npos ||
                    parts.rest.find("amazon.nova") != std::string::npos;
    b.prompt_caching = caching.value_or(supports);
    backend = make_bedrock_backend(b);
  } else if (parts.kind == "exec") {
    ExecOptions e;
    e.command = parts.rest;
    register_credentials(e.command);  // keys on the command line never reach a log, a prompt or a run directory
    e.timeout_s = total_s;
    e.env = env;  // a command the user wrote is trusted like the user
    e.cancelled = opts.cancelled;
    backend = make_exec_backend(std::move(e));
  } else {  // replay
    auto r = make_replay_backend(parts.rest);
    if (!r.ok()) return Error{r.error(), ErrorKind::kBadInput};  // the session file the user named
    backend = *r;
  }

  // backend -> retry -> concurrency cap -> cache -> record -> accounting
  std::shared_ptr<Provider> p = backend;
  if (parts.kind != "replay") {
    p = with_retry(p, retry);
    p = with_concurrency_cap(p, concurrency);
    if (!opts.cache_dir.empty() && cache_c.value_or(true)) p = with_cache(p, opts.cache_dir, cache_endpoint);
  }
  if (!opts.record_path.empty()) p = with_recording(p, opts.record_path);
  if (opts.accounting) {
    if (!opts.accounting->has_prices()) {
      auto prices = prices_from_config(cfg);
      if (!prices.ok()) return Error{prices.error()};
      if (!prices->empty()) opts.accounting->set_prices(*prices);
    }
    p = with_accounting(p, opts.accounting);
  }
  return p;
}

}  // namespace mk::llm
