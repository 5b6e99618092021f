// Shared by `mkevolve decompose`, `evolve` and `run`: their flags, building the
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
#include "eval/pool.h"
#include "llm/accounting.h"
#include "llm/provider.h"
#include "report/status_line.h"
#include "run/run_dir.h"
#include "search/search.h"
#include "util/config.h"

namespace mk::cli::method {

namespace fs = std::filesystem;

/// Where the LLM and the evaluator come from.
struct EnvFlags {
  std::string llm, judge, base_url, config_path, python, record;
  int llm_concurrency = 0;
  int gpu = -1;
  int slots_per_gpu = 1;
  bool test_cpu = false;  ///< hidden: the worker's CPU test mode (CI end-to-end tests only)
};

void add_env_flags(CLI::App& app, EnvFlags& f, bool with_judge);
/// The evaluator's settings (trials, timeouts, tolerances).
void add_eval_flags(CLI::App& app, eval::EvalOptions& o);

/// Everything a search needs from the outside world. Not movable (providers
/// point at `acc`).
struct Env {
  std::optional<Config> config;
  llm::Accounting acc;
  std::shared_ptr<llm::Provider> llm, judge;
  std::unique_ptr<eval::WorkerPool> pool;
  agents::Prompts prompts;
  std::string hardware;
  run::Versions versions;
};

/// Builds the providers (caching into llm_cache when non-empty) and the pool
/// (need_gpu: a CUDA GPU is required unless --test-cpu-unsafe). Prints one
/// line per missing thing; returns 0 or the exit status.
int setup(const std::string& cmd, const EnvFlags& flags, const fs::path& llm_cache, const fs::path& eval_cache,
          bool need_gpu, Env* env);

/// The search's sink for a run directory: events to RunDir::log_event (skipping,
/// on a resume, the prefix the log already holds), candidates and topology
/// snapshots to their files, live progress to the status line.
class RunSink : public search::EventSink {
 public:
  RunSink(run::RunDir* dir, report::StatusLine* status, std::vector<nlohmann::json> already_logged);
  void emit(const nlohmann::json& e) override;
  void progress(const nlohmann::json& e) override;
  void store_candidate(const search::CandidateRecord& c) override;
  void snapshot_topology(int iteration, const problem::Topology& t) override;
  /// The first storage error (disk full, ...): the caller stops the run.
  std::string error() const;
  int skipped() const { return skipped_; }

 private:
  run::RunDir* dir_;
  report::StatusLine* status_;
  std::vector<nlohmann::json> replay_;  ///< events of the interrupted run, in order
  size_t next_ = 0;
  bool replaying_ = true;
  int skipped_ = 0;
  mutable std::mutex mu_;
  std::string error_;
};

/// Sets *stop when run::Interrupt fires (Ctrl-C / SIGTERM) or the sink fails.
class StopWatcher {
 public:
  StopWatcher(std::atomic<bool>* stop, const RunSink* sink);
  ~StopWatcher();

 private:
  std::atomic<bool>* stop_;
  const RunSink* sink_;
  std::atomic<bool> done_{false};
  std::thread th_;
};

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
