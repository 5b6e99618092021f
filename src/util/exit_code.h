// The process's exit status, chosen from an error's kind (util/result.h)
// through one table shared by every command. docs/ARCHITECTURE.md lists it.
#pragma once

#include "util/result.h"

namespace mk {

/// 0 when the command did what was asked; otherwise the status of its error's kind.
inline constexpr int kExitStatusOk = 0;

/// The one table: kOther 1 (the command ran and the answer is "no"), kBadInput
/// 2 (fix the flags or files), kMissing 3 (something missing on this machine),
/// kInterrupted 130 (128 + SIGINT, as a shell reports it).
constexpr int exit_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kOther:
      return 1;
    case ErrorKind::kBadInput:
      return 2;
    case ErrorKind::kMissing:
      return 3;
    case ErrorKind::kInterrupted:
      return 130;
  }
  return 1;
}

/// Process exit statuses, shared by every subcommand and the run core: each
/// is the one table's status for an error kind. A command that holds an error
/// returns exit_code(error.kind).
enum Exit : int {
  kExitOk = kExitStatusOk,
  kExitFailure = exit_code(ErrorKind::kOther),           ///< the command ran and the answer is "no"
  kExitUsage = exit_code(ErrorKind::kBadInput),          ///< bad flags or bad input files
  kExitEnvironment = exit_code(ErrorKind::kMissing),     ///< something missing on this machine
  kExitInterrupted = exit_code(ErrorKind::kInterrupted),
};

}  // namespace mk
