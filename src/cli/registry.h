// The subcommand table. Each src/cli/<name>.cc registers its commands with a
// static Register object; main.cc dispatches and prints help.
#pragma once

#include <string>
#include <vector>

namespace mk::cli {

/// Process exit statuses, shared by every subcommand.
enum Exit : int {
  kExitOk = 0,
  kExitFailure = 1,      ///< the command ran and the answer is "no" (violations, incorrect kernel, failed run)
  kExitUsage = 2,        ///< bad flags or bad input files
  kExitEnvironment = 3,  ///< something missing on this machine: GPU, torch, Triton, LLM endpoint
  kExitInterrupted = 130,
};

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
