// Small pieces every subcommand needs around CLI11 and the configuration.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "cli/help.h"
#include "cli/registry.h"
#include "eval/pool.h"
#include "util/config.h"
#include "util/strings.h"

namespace mk::cli {

/// -q of the commands that write report files (report, bench-report): the
/// same meaning in both.
inline constexpr const char* kQuietFilesHelp =
    "print nothing on success (not the report, not the files written); warnings and errors still go to stderr";

/// The options of app that a mistyped `arg` ("--iteratons", "--iteratons=3",
/// "-x") may have meant: "unknown option '--iteratons' (did you mean
/// '--iterations'?)", as git and cargo say it. "" when arg is no option.
inline std::string unknown_option_message(const CLI::App& app, const std::string& arg) {
  if (arg.size() < 2 || arg[0] != '-' || arg == "-") return {};
  const std::string name = arg.substr(0, arg.find('='));
  std::vector<std::string> known;
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_group().empty()) continue;  // hidden: never suggested
    for (const auto& l : o->get_lnames()) known.push_back("--" + l);
    for (const auto& s : o->get_snames()) known.push_back("-" + s);
  }
  // Closer than a third of the name (at least 3 edits for short names).
  std::string best = nearest(name, known, std::max<size_t>(3, name.size() / 3));
  return "unknown option '" + name + "'" + (best.empty() ? "" : " (did you mean '" + best + "'?)");
}

/// Parses argv into app. nullopt: go on; otherwise the command's exit status,
/// after CLI11 has printed the help (kExitOk) or the parse error (kExitUsage).
/// Every command's help is laid out by HelpFormatter (cli/help.h).
inline std::optional<int> parse_args(CLI::App& app, int argc, char** argv) {
  use_help_formatter(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e) == 0 ? kExitOk : kExitUsage;  // --help
    // One line like every other error of the command, without CLI11's raw
    // numeric limits ("not in range 0.000000 to 1797693134862315708...").
    std::string msg = e.what();
    // A mistyped flag: name it and the nearest flag, not CLI11's "The
    // following arguments were not expected: 3 --iteratons".
    if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
      for (const auto& extra : app.remaining()) {
        if (std::string m = unknown_option_message(app, extra); !m.empty()) {
          msg = m;
          break;
        }
      }
    }
    static const std::regex huge_range(R"(not in range ([-0-9.e+]+) to [0-9]{30,}[0-9.]*)");
    std::smatch m;
    if (std::regex_search(msg, m, huge_range)) {
      std::string lo = m[1].str();
      if (lo.find('.') != std::string::npos) {
        while (!lo.empty() && lo.back() == '0') lo.pop_back();
        if (!lo.empty() && lo.back() == '.') lo.pop_back();
      }
      msg = m.prefix().str() + "must be a number of at least " + lo + m.suffix().str();
    }
    std::fprintf(stderr, "%s: %s\nRun '%s --help' for its options.\n", app.get_name().c_str(), msg.c_str(),
                 app.get_name().c_str());
    return kExitUsage;
  }
  return std::nullopt;
}

/// Every key the configuration file may hold (Config::unknown_keys patterns);
/// docs/LLM.md lists them with their meaning.
inline const std::vector<std::string>& known_config_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k = {"python"};
    const char* general[] = {"provider", "cache", "max_tokens", "concurrency", "timeout_s", "connect_timeout_s",
                             "initial_backoff_s", "max_backoff_s", "max_retries"};
    const char* per_provider[] = {"base_url", "api_key", "api_key_env", "max_tokens_field", "version",
                                  "prompt_caching", "region", "profile", "concurrency", "timeout_s",
                                  "connect_timeout_s", "initial_backoff_s", "max_backoff_s", "max_retries"};
    for (const char* g : general) k.push_back(std::string("llm.") + g);
    for (const char* kind : {"openai", "anthropic", "bedrock", "exec", "replay", "providers.*"})
      for (const char* s : per_provider) k.push_back(std::string("llm.") + kind + "." + s);
    k.push_back("llm.providers.*.spec");
    for (const char* price : {"input", "output", "cache_read", "cache_write"})
      k.push_back(std::string("llm.prices.*.") + price);
    return k;
  }();
  return keys;
}

/// Config::discover, then a warning on stderr ("mkevolve CMD: FILE:LINE:
/// unknown key ...") for every key no part of mkevolve reads: a misspelt
/// setting is said, not silently ignored.
inline Result<Config> discover_config(const std::string& cmd, const std::filesystem::path& explicit_path) {
  auto cfg = Config::discover(explicit_path);
  if (!cfg) return cfg;
  for (const auto& w : cfg->unknown_keys(known_config_keys()))
    std::fprintf(stderr, "mkevolve %s: warning: %s\n", cmd.c_str(), w.c_str());
  return cfg;
}

/// The worker's Python: --python, else $MKEVOLVE_PYTHON, else the config's
/// `python`, else python3. An error names a malformed config value.
inline Result<std::string> worker_python(const std::string& flag, const Config& config) {
  auto from_config = config.get_string("python", "");
  if (!from_config) return Error{from_config.error()};
  return eval::resolve_python(flag, *from_config);
}

}  // namespace mk::cli
