// What a run needs from the outside world (Env: the LLM providers, the worker
// pool, the prompts), the flags that say where it comes from (EnvFlags), and
// how a command builds it (EnvSetup). The building itself stays with the
// command line (cli/method_common.h: setup_llm, setup_pool), which owns the
// configuration file's discovery and the flag table; the run core
// (run_in_directory.h, swap.h) calls it through EnvSetup.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agents/prompts.h"
#include "eval/pool.h"
#include "llm/accounting.h"
#include "llm/provider.h"
#include "run/problem_run.h"
#include "rundir/run_dir.h"
#include "util/config.h"

namespace mk::run {

namespace fs = std::filesystem;

/// Where the LLM and the evaluator come from.
struct EnvFlags {
  std::string llm, judge, base_url, config_path, python, record;
  int llm_concurrency = 0;
  int gpu = -1;
  int slots_per_gpu = 0;  ///< 0: auto (docs/EVAL.md, "How evaluation runs")
  bool no_prestart = false;  ///< start each candidate's processes on demand (PoolOptions::prestart)
  bool allow_llm_change = false;  ///< a resume may use another --llm, --judge, --base-url or --config
  bool test_cpu = false;  ///< hidden: the worker's CPU test mode (CI end-to-end tests only)
};

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

/// How a command builds an Env, in two halves, for callers that create the
/// run directory in between (the pool's work_dir lives in it). Each appends
/// what is missing to *missing and returns a usage/environment exit status
/// for errors that stop at once (0 otherwise). cli/method_common.h gives
/// its setup_llm and setup_pool (method::env_setup()).
struct EnvSetup {
  /// The providers, caching into llm_cache when non-empty.
  std::function<int(const std::string& cmd, const EnvFlags& flags, const fs::path& llm_cache, Env* env,
                    std::vector<std::string>* missing)>
      llm;
  /// The pool (need_gpu: a CUDA GPU is required unless --test-cpu-unsafe;
  /// server logs and private working directories under work_dir).
  std::function<int(const std::string& cmd, const EnvFlags& flags, const fs::path& eval_cache,
                    const fs::path& work_dir, bool need_gpu, Env* env, std::vector<std::string>* missing)>
      pool;
};

/// Prints the missing things; kExitEnvironment if any, else 0.
int report_missing(const std::string& cmd, const std::vector<std::string>& missing);

/// What the runs of this process share, for run::run_problem.
Shared shared_of(const Env& env);

}  // namespace mk::run
