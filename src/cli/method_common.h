// Shared by `mkevolve decompose`, `evolve`, `run`, `adapt`, `bench` and `swap`:
// building the LLM provider stack and the worker pool (with clear "what is
// missing" errors, exit 3). The run core they hand it to is run/'s
// (run_in_directory.h, swap.h, problem_run.h).
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
#include "run/run_env.h"
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

/// Empty when the search settings are usable, else a one-line usage error.
std::string search_options_error(const search::SearchOptions& o);

/// Everything a search needs from the outside world (run/run_env.h).
using run::Env;

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
/// setup_llm and setup_pool, as the run core calls them (run::run_in_directory,
/// run::swap_in_directory).
run::EnvSetup env_setup();

using run::report_missing;  ///< prints the missing things; kExitEnvironment if any, else 0
using run::shared_of;       ///< what the runs of this process share, for run::run_problem

using RunSink = run::RunSink;
using StopWatcher = run::StopWatcher;

}  // namespace mk::cli::method
