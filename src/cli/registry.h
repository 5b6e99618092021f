// The subcommand table. Each src/cli/<name>.cc registers its commands with a
// static Register object; main.cc dispatches and prints help.
#pragma once

#include <string>
#include <vector>

#include "util/exit_code.h"

namespace mk::cli {

/// Process exit statuses, shared by every subcommand: each is the one table's
/// (util/exit_code.h) status for an error kind. A command that holds an error
/// returns exit_code(error.kind).
enum Exit : int {
  kExitOk = kExitStatusOk,
  kExitFailure = exit_code(ErrorKind::kOther),           ///< the command ran and the answer is "no"
  kExitUsage = exit_code(ErrorKind::kBadInput),          ///< bad flags or bad input files
  kExitEnvironment = exit_code(ErrorKind::kMissing),     ///< something missing on this machine
  kExitInterrupted = exit_code(ErrorKind::kInterrupted),
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
