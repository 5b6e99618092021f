// `mkevolve run`, `evolve` and `adapt` in a run directory: a new run (the
// directory made, a failed start leaving none behind) or a resumed one (the
// same LLM unless a change is meant), the search, then the solution package,
// the report and the lines a person reads last.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "report/status_line.h"
#include "run/run_env.h"
#include "search/search.h"

namespace mk::run {

namespace fs = std::filesystem;

/// Runs ctx.opts.method on `problem` in a run directory (new, or resumed when
/// resume is set), writes the solution package and the report, prints where
/// things are. Returns the exit status.
struct RunRequest {
  std::string cmd;                 ///< "run" or "evolve"
  fs::path problem_file;           ///< unused on resume
  fs::path out;                    ///< the run directory
  bool resume = false;
  search::SearchOptions opts;
  EnvFlags env;
  report::StatusLine::Mode mode = report::StatusLine::Mode::kAuto;
  std::vector<std::string> swap_with;  ///< NAME=FILE
};
/// setup builds the LLM providers (before the directory is made) and the
/// pool (after: its logs go to DIR/eval).
int run_in_directory(RunRequest req, const EnvSetup& setup);

}  // namespace mk::run
