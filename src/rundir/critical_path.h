// A run's LLM critical path, and where its wall time went, from its event log
// (issue 12, "Wall time"; docs/RUN-DIRECTORY.md, "Time").
//
// The LLM critical path is the method's own lower bound: the longest chain of
// LLM rounds that depend on one another, each as long as its slowest call.
// Per phase (the decomposition, each outer iteration, what follows the search):
//   decomposition rounds (the K workers of one round run together)
//   + split/fuse tries (one after another)
//   + the longest task's beam rounds (the subproblems' beams run together; a
//     round waits for all its jobs; a job is its kernel call, then its judge calls)
// The run's is their sum. Calls are placed by the llm_call fields `iteration`,
// `round` and `candidate`, their length is `latency_ms`.
//
// Wall time is read from the events' timestamps, phase by phase (the time up
// to an event goes to that event's phase), with the downtime before each
// `resume` left out. "The path" says what the wall time of each phase
// followed: the slowest decomposition worker of each round (its LLM call, then
// its check), each split/fuse try, the task whose rounds took longest (each
// round's slowest job: LLM calls, queue wait, evaluation with its baselines),
// then the end-to-end evaluations (each iteration's, Swap's, the final
// checks). What the path does not explain is `other`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "records/events.h"

namespace mk::rundir {

/// Seconds spent along the path, by what was waited for.
struct PathTimes {
  double llm_s = 0;       ///< LLM calls
  double verify_s = 0;    ///< decomposition checks (LLMDecompose, split, fuse)
  double queued_s = 0;    ///< candidates waiting for an evaluation slot
  double eval_s = 0;      ///< candidates' evaluations, their baselines excepted
  double baseline_s = 0;  ///< baselines measured (or waited for) inside a candidate's evaluation
  double e2e_s = 0;       ///< end-to-end evaluations, their queue waits and baselines included
  PathTimes& operator+=(const PathTimes& o);
  double sum() const { return llm_s + verify_s + queued_s + eval_s + baseline_s + e2e_s; }
};

struct PhaseTime {
  /// 0: the decomposition (and adapt's re-verification); 1..T: an outer
  /// iteration (a baseline method's iteration); T+1: after the search
  /// (PostFuse, Swap, the final check).
  int iteration = 0;
  std::string label;            ///< "decomposition", "iteration 3", "after the search"
  int rounds = 0;               ///< LLM rounds on its critical path
  std::optional<double> llm_s;  ///< their length; null when a call lacks its round or latency
  std::optional<double> wall_s; ///< null without timestamps
  PathTimes path;
  nlohmann::json to_json() const;
};

struct TimeAccount {
  std::vector<PhaseTime> phases;  ///< those with any event, in order
  int rounds = 0;                 ///< the run's LLM critical path, in rounds
  std::optional<double> llm_s;    ///< and in seconds (null: unknown, see PhaseTime)
  std::optional<double> wall_s;   ///< the run's wall time (sessions summed)
  PathTimes path;                 ///< summed over the phases
  /// wall / critical path; null when either is unknown or the path is 0 s
  /// (every reply came from a cache).
  std::optional<double> ratio() const;
  /// The wall time the path does not explain (null without a wall time).
  std::optional<double> other_s() const;
  /// {"wall_s", "critical_path": {"rounds", "llm_s"}, "ratio", "path": {...,
  /// "other_s"}, "phases": [...]}; unknowns are null.
  nlohmann::json to_json() const;
  /// One line for people: the wall time, the critical path, the ratio, and
  /// the path's other parts.
  std::string line() const;
};

/// Reads the account from a run's records (as logged: with "ts"). Never
/// throws; unknown or missing fields give nulls.
TimeAccount time_account(const records::Log& events);

}  // namespace mk::rundir
