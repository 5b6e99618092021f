// Progress for `mkevolve run`: fed the same events as the log (rundir/events.h).
// On a terminal one status line stays current at the bottom, with notable
// events printed above it; otherwise each notable event is one plain line.
// Quiet prints nothing; events-json prints every event as one JSON line and
// nothing else (for scripts).
#pragma once

#include <cstdint>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "records/events.h"
#include "records/tally.h"

namespace mk::report {

class StatusLine {
 public:
  enum class Mode { kAuto, kTerminal, kPlain, kQuiet, kEventsJson };
  struct Options {
    Mode mode = Mode::kAuto;          ///< kAuto: kTerminal if out is a tty, else kPlain
    std::optional<int64_t> max_calls;  ///< LLM budgets, shown as "used/of"
    std::optional<int64_t> max_tokens;
    int iterations = 0;                ///< T; run_start's settings.T overrides when present
    int width = 0;                     ///< terminal columns; 0: ask the terminal
  };

  StatusLine(FILE* out, Options opts);
  ~StatusLine();  ///< calls finish()
  StatusLine(const StatusLine&) = delete;
  StatusLine& operator=(const StatusLine&) = delete;

  /// Thread-safe. Updates the counters and prints what the mode calls for.
  /// Also takes the search's live progress events (eval_start, eval_done).
  /// replayed: a record the log already held before this process (a resume
  /// re-executes the run and meets them again); it counts, and --events-json
  /// does not print it again.
  void on_event(const records::Event& ev, bool replayed = false);
  /// Evaluations running now (the evaluator pool knows; events do not say).
  void set_evals_in_flight(int n);
  /// A line that stays (a notice or warning); printed above the status line.
  void message(std::string_view line);
  /// Clears the status line (terminal) so later output starts on a clean line.
  void finish();

  /// The status line's text now ("mkevolve · t 2/5 · ...").
  std::string current() const;
  /// The plain line an event deserves ("" for routine events such as one LLM call).
  std::string describe(const records::Event& ev) const;
  Mode mode() const { return mode_; }

 private:
  void update(const records::Event& ev);
  void redraw();
  void print_line(const std::string& line);

  FILE* out_;
  Mode mode_;
  Options opts_;
  mutable std::mutex mu_;
  bool drawn_ = false;
  // What the line shows.
  std::string method_ = "mkevolve", problem_;
  int t_ = 0;
  int T_ = 0;
  int ok_ = 0, failed_ = 0, fresh_ = 0;
  records::BestSoFar best_;  ///< the best, swap and run_end records seen
  records::LlmTally llm_;  ///< the llm_call records seen (kernel_calls: what the budget, max_calls, counts)
  int evals_in_flight_ = 0;
  int64_t evals_done_ = 0;
  std::string phase_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace mk::report
