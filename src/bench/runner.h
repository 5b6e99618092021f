// `mkevolve bench`'s engine: the problems of a suite (one shard of it), each a
// resumable run in OUT/<method>/<problem-id>/, up to `jobs` at a time. Finished
// problems (summary.json says so) are skipped, unfinished ones resumed; one
// problem failing (a broken file, an exception, an error status) is recorded
// in its summary.json (status failed, incorrect) and never stops the others.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bench/metrics.h"
#include "run/problem_run.h"
#include "bench/suite.h"

namespace mk::bench {

namespace fs = std::filesystem;

struct SuiteOptions {
  fs::path out;            ///< the bench directory
  std::string cmd = "bench";
  search::SearchOptions opts;  ///< opts.method names the subfolder
  std::string llm, judge;  ///< recorded in each new run's config.json
  bool test_cpu = false;
  int jobs = 1;
  report::StatusLine::Mode mode = report::StatusLine::Mode::kQuiet;  ///< per-problem status lines
  const std::atomic<bool>* cancel = nullptr;  ///< no new problem starts once true (besides rundir::Interrupt)
  std::function<void(const std::string&)> log;  ///< one progress line (thread-safe calls); empty: none
};

/// What one problem needs to do.
enum class Action { kSkip, kResume, kCreate };
/// OUT/<method>/<id>: skip when its summary.json says finished, resume when it
/// holds a run (config.json), create otherwise.
Action plan(const fs::path& dir);
fs::path problem_dir(const SuiteOptions& o, const SuiteProblem& p);

struct SuiteRun {
  std::vector<run::Outcome> outcomes;  ///< in suite order; status "missing" for problems not started (interrupted suite)
  int skipped = 0, resumed = 0, created = 0, failed = 0, not_started = 0;
};

/// Runs the problems with the shared LLM and evaluator. Never throws.
SuiteRun run_suite(const run::Shared& shared, const std::vector<SuiteProblem>& problems, const SuiteOptions& o);

}  // namespace mk::bench
