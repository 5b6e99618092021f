// The subcommand table. Each src/cli/<name>.cc registers its commands with a
// static Register object; main.cc dispatches and prints help.
#pragma once

#include <string>
#include <vector>

#include "util/exit_code.h"

namespace mk::cli {

// The exit statuses (util/exit_code.h), by the names every command and main.cc use.
using mk::Exit;
using mk::kExitOk, mk::kExitFailure, mk::kExitUsage, mk::kExitEnvironment, mk::kExitInterrupted;

using CommandFn = int (*)(int argc, char** argv);  ///< argv[0] is "mkevolve <name>"

struct Command {
  std::string name;
  std::string summary;
  CommandFn fn;
};

/// Registers a subcommand at static-initialisation time.
struct Register {
  Register(std::string name, std::string summary, CommandFn fn);
};

const std::vector<Command>& commands();

}  // namespace mk::cli
