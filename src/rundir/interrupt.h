// Ctrl-C handling for long runs: the first SIGINT/SIGTERM sets a flag the search
// loop polls (and makes a self-pipe readable for poll()-based loops), so the run
// can record what is in flight and print the resume command. A second signal
// exits at once with status 130.
#pragma once

namespace mk::rundir {

class Interrupt {
 public:
  /// Installs the SIGINT and SIGTERM handlers (idempotent; thread-safe).
  static void install();
  /// Puts back the handlers that were there before install().
  static void uninstall();
  /// True once a signal arrived.
  static bool requested();
  /// The first signal's number (SIGINT, SIGTERM), 0 if none.
  static int signal_number();
  /// Read end of the self-pipe: readable after the first signal (-1 before install()).
  static int fd();
  /// Clears the flag and drains the pipe (tests; a caller that handled it).
  static void reset();
  /// Acts as if the signal arrived (tests, and a UI "stop" action).
  static void raise_for_test(int sig);
};

}  // namespace mk::rundir
