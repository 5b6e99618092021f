// A run's summary.json (what bench-report and the suite's metrics read): its
// contents (Outcome), read and written (outcome_from_summary, summary_to_json),
// and built from the run's event log, so it can be (re)computed for any run
// directory, finished or not.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "records/events.h"
#include "records/fields.h"
#include "util/result.h"

namespace mk::run {

/// Best-so-far state of one problem's run after a number of LLM calls.
struct TimelinePoint {
  int64_t calls = 0;
  int64_t tokens = 0;
  bool correct = false;
  std::optional<double> speedup_compile;  ///< nullopt: not correct, or no baseline measured
  std::optional<double> speedup_eager;
  static constexpr auto fields() {
    using records::field, records::When;
    return std::tuple{field("calls", &TimelinePoint::calls), field("tokens", &TimelinePoint::tokens),
                      field("correct", &TimelinePoint::correct),
                      field("speedup_compile", &TimelinePoint::speedup_compile, When::kPositive),
                      field("speedup_eager", &TimelinePoint::speedup_eager, When::kPositive)};
  }
};

/// The result of one method on one problem (from the run's summary.json).
struct Outcome {
  std::string problem_id;
  std::string problem_name;
  std::string method;
  std::string status;          ///< finished, failed, interrupted, missing
  bool correct = false;
  /// Unknown is nullopt (null in summary.json, "n/a" in text), never 0: not
  /// correct, or no baseline on that machine (a torch without torch.compile).
  /// Files that wrote 0 for unknown read back as nullopt.
  std::optional<double> speedup_compile;
  /// --baseline-tf32: the final check against torch.compile with TF32 on; nullopt unless correct and measured.
  std::optional<double> speedup_compile_tf32;
  std::optional<double> speedup_eager;
  /// Who measured the speedups: "final_check" (the passing final check's own
  /// timing) or "search" (no final check passed with a measurement); "" : unknown.
  std::string speedup_measured_by;
  int64_t tokens = 0;
  int64_t calls = 0;
  bool uses_pytorch = false;   ///< solution contains PyTorch subkernels (Swap); unknown (false) in test mode
  /// Run in the worker's CPU test mode (--test-cpu-unsafe): its "kernels" may
  /// be PyTorch stand-ins run on a CPU, and its speedups mean nothing.
  bool test_mode = false;
  std::string error;
  std::vector<TimelinePoint> timeline;
  /// Wall time, the LLM critical path and where the rest went
  /// (rundir::TimeAccount::to_json); null when not known.
  nlohmann::json time;
  /// What the final checks came to (records::FinalCheckOutcome::to_json; null: none logged)
  nlohmann::json final_check;

  /// summary.json's one table. What it cannot say, summary_to_json and
  /// outcome_from_summary add: in test mode uses_pytorch is null and a note
  /// says why; the speedups of a run that is not correct, and of a timeline
  /// point that is not, read as unknown; the timeline reads in call order;
  /// "tokens" may be an older file's plain number; problem_name defaults to problem_id.
  static constexpr auto fields() {
    using records::field, records::When;
    return std::tuple{field("problem_id", &Outcome::problem_id),
                      field("problem_name", &Outcome::problem_name),
                      field("method", &Outcome::method),
                      field("status", &Outcome::status),
                      field("correct", &Outcome::correct),
                      field("speedup/compile", &Outcome::speedup_compile, When::kPositive),
                      field("speedup/eager", &Outcome::speedup_eager, When::kPositive),
                      field("speedup/compile_tf32", &Outcome::speedup_compile_tf32, When::kIfSet),
                      field("speedup/measured_by", &Outcome::speedup_measured_by, When::kIfSet),
                      field("tokens/total", &Outcome::tokens),
                      field("calls", &Outcome::calls),
                      field("uses_pytorch", &Outcome::uses_pytorch),
                      field("test_mode", &Outcome::test_mode),
                      field("error", &Outcome::error),
                      field("timeline", &Outcome::timeline),
                      field("time", &Outcome::time, When::kIfSet),
                      field("final_check", &Outcome::final_check, When::kIfSet)};
  }
};

/// What a test-mode run's summary.json and manifest.json say of its figures.
inline constexpr const char* kTestModeNote =
    "TEST MODE: run in the worker's CPU test mode (--test-cpu-unsafe): the kernels may be PyTorch stand-ins, "
    "run on a CPU; they are not GPU kernels, and the speedups mean nothing";

/// Parses a run's summary.json. Errors name the field that is wrong.
Result<Outcome> outcome_from_summary(const nlohmann::json& summary);
nlohmann::json summary_to_json(const Outcome& o);
/// Whether RUN_DIR/summary.json says the run finished (false when it is
/// missing or is not a summary).
bool summary_says_finished(const std::filesystem::path& run_dir);

struct SummaryInfo {
  std::string problem_id;    ///< the suite id ([level-]name-hash8), or the problem name for a lone run
  std::string problem_name;
  std::string method;
  /// Overrides what the log says: "failed" with an error (setup failed, an
  /// exception, the run directory could not be written), or "interrupted".
  std::string status;
  std::string error;
  bool test_mode = false;  ///< the run's config says --test-cpu-unsafe
};

/// The outcome of a run from its events:
///  - status: run_end's "ok"/"no_correct" -> finished, "interrupted" -> interrupted,
///    "error" -> failed; no run_end -> interrupted (the process died mid-run);
///  - correct/speedups/uses_pytorch from the last "best" event and run_end's solution;
///  - calls/tokens: run_end's accounting when present, else the llm_call events;
///  - timeline: the best-so-far after every outer iteration and every new best,
///    at the cumulative LLM calls and tokens of that moment.
/// A run that did not finish is never counted correct.
Outcome outcome_from_events(const records::Log& events, const SummaryInfo& info);

}  // namespace mk::run
