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

}  // namespace mk
