// Shared by `mkevolve decompose`, `evolve`, `run`, `adapt` and `bench`: building the
// LLM provider stack and the worker pool (with clear "what is missing" errors,
// exit 3), and the EventSink that feeds the run directory and the status line.
#pragma once

#include <CLI/CLI.hpp>

#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agents/prompts.h"
#include "cli/flags.h"
#include "run/problem_run.h"
#include "eval/pool.h"
#include "llm/accounting.h"
#include "llm/provider.h"
#include "report/status_line.h"
#include "rundir/run_dir.h"
#include "search/search.h"
#include "util/config.h"

namespace mk::cli::method {

namespace fs = std::filesystem;

using cli::EnvFlags;  // cli/flags.h: the flags that say where the LLM and the evaluator come from

/// A usage error of the tolerance flags ("" when none): --tolerance calibrated
/// or FILE with --atol/--rtol.
std::string tolerance_error(const eval::EvalOptions& o);
/// Empty when the search settings are usable, else a one-line usage error.
std::string search_options_error(const search::SearchOptions& o);

/// Everything a search needs from the outside world. Not movable (providers
/// point at `acc`).
struct Env {
  std::optional<Config> config;
  llm::Accounting acc;
  std::shared_ptr<llm::Provider> llm, judge;
  std::unique_ptr<eval::WorkerPool> pool;
  agents::Prompts prompts;
  std::string hardware;
  rundir::Versions versions;
};

/// Builds the providers (caching into llm_cache when non-empty) and the pool
/// (need_gpu: a CUDA GPU is required unless --test-cpu-unsafe; server logs and
/// private working directories under work_dir, a temp dir when empty). Prints
/// one line per missing thing; returns 0 or the exit status.
int setup(const std::string& cmd, const EnvFlags& flags, const fs::path& llm_cache, const fs::path& eval_cache,
          bool need_gpu, Env* env, const fs::path& work_dir = {});

/// The two halves of setup(), for callers that create the run directory in
/// between (the pool's work_dir lives in it). Missing things are appended to
/// *missing; the return value is a usage/environment exit status for errors
/// that stop at once (0 otherwise).
int setup_llm(const std::string& cmd, const EnvFlags& flags, const fs::path& llm_cache, Env* env,
              std::vector<std::string>* missing);
int setup_pool(const std::string& cmd, const EnvFlags& flags, const fs::path& eval_cache, const fs::path& work_dir,
               bool need_gpu, Env* env, std::vector<std::string>* missing);
/// Prints the missing things; kExitEnvironment if any, else 0.
int report_missing(const std::string& cmd, const std::vector<std::string>& missing);

/// What the runs of this process share, for run::run_problem.
run::Shared shared_of(const Env& env);

using RunSink = run::RunSink;
using StopWatcher = run::StopWatcher;

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
int run_in_directory(RunRequest req);

}  // namespace mk::cli::method
