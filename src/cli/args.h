// Small pieces every subcommand needs around CLI11 and the configuration.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "cli/registry.h"
#include "eval/pool.h"
#include "util/config.h"

namespace mk::cli {

/// Parses argv into app. nullopt: go on; otherwise the command's exit status,
/// after CLI11 has printed the help (kExitOk) or the parse error (kExitUsage).
inline std::optional<int> parse_args(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  return std::nullopt;
}

/// The worker's Python: --python, else $MKEVOLVE_PYTHON, else the config's
/// `python`, else python3. An error names a malformed config value.
inline Result<std::string> worker_python(const std::string& flag, const Config& config) {
  auto from_config = config.get_string("python", "");
  if (!from_config) return Error{from_config.error()};
  return eval::resolve_python(flag, *from_config);
}

}  // namespace mk::cli
