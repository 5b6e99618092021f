// One problem's run in a run directory, given the LLM and the evaluator: the
// core shared by `mkevolve run/evolve` (one problem) and `mkevolve bench` (many
// problems at once sharing one worker pool and one provider stack). It writes
// events, candidates, the solution package, report.md and summary.json.
#pragma once

#include <optional>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agents/prompts.h"
#include "eval/evaluator.h"
#include "llm/provider.h"
#include "problem/problem.h"
#include "report/status_line.h"
#include "run/summary_json.h"
#include "rundir/run_dir.h"
#include "search/search.h"
#include "util/result.h"

namespace mk::run {

namespace fs = std::filesystem;

/// What every run of a process shares (not owned).
struct Shared {
  llm::Provider* llm = nullptr;
  llm::Provider* judge = nullptr;  ///< may be null
  eval::Evaluator* evaluator = nullptr;
  const agents::Prompts* prompts = nullptr;
  std::string hardware;
  rundir::Versions versions;
};

/// The search's sink for a run directory: events to RunDir::log_event (skipping,
/// on a resume, the prefix the log already holds), candidates and topology
/// snapshots to their files, live progress to the status line.
class RunSink : public search::EventSink {
 public:
  RunSink(rundir::RunDir* dir, report::StatusLine* status, std::vector<nlohmann::json> already_logged);
  void emit(const records::Event& e) override;
  void progress(const records::Event& e) override;
  void store_candidate(const search::CandidateRecord& c) override;
  void snapshot_topology(int iteration, const problem::Topology& t) override;
  void store_e2e(const std::string& name, const nlohmann::json& result) override;
  /// The first storage error (disk full, ...): the caller stops the run.
  std::string error() const;
  int skipped() const { return skipped_; }

 private:
  rundir::RunDir* dir_;
  report::StatusLine* status_;
  std::vector<nlohmann::json> replay_;  ///< events of the interrupted run, in order
  size_t next_ = 0;
  bool replaying_ = true;
  int skipped_ = 0;
  mutable std::mutex mu_;
  std::string error_;
};

/// Sets *stop when rundir::Interrupt fires (Ctrl-C / SIGTERM), *also (when given)
/// becomes true, or the sink fails.
class StopWatcher {
 public:
  StopWatcher(std::atomic<bool>* stop, const RunSink* sink, const std::atomic<bool>* also = nullptr);
  ~StopWatcher();

 private:
  std::atomic<bool>* stop_;
  const RunSink* sink_;
  const std::atomic<bool>* also_;
  std::atomic<bool> done_{false};
  std::thread th_;
};

/// A run directory opened for --resume with what its config.json says.
struct Resumed {
  std::unique_ptr<rundir::RunDir> dir;
  problem::Problem problem;
  search::SearchOptions opts;
  std::string llm, judge;
  std::string base_url;     ///< the --base-url the run was started with ("" = none)
  std::string config_path;  ///< the config file it read (absolute; "" = none)
  bool test_cpu = false;
  std::string problem_id;  ///< config's "problem_id" (bench runs), else ""
};
/// Errors name the directory and what is wrong.
Result<Resumed> open_for_resume(const fs::path& dir);

/// mkevolve adapt: what a finished run offers a variant of its problem: its
/// solution's decomposition (the topology of the solution's iteration), each
/// verified Triton subkernel (PyTorch stand-ins from Swap are left out) and the
/// kernel LLM calls the run spent on it (its llm_call events, plus what it saved
/// itself when it was an adaptation). Reads only; takes no lock. Errors are bad
/// input (ErrorKind::kBadInput) naming the file and what is wrong.
Result<search::EarlierRun> load_reuse(const fs::path& dir);

/// Whether `dir` holds a run that never started: only what creating a run
/// directory and its pre-flight checks write (no LLM call, no evaluation, no
/// candidate, no file of anyone else's), e.g. left by a start whose endpoint
/// was down. A fresh run may take such a directory over.
bool holds_no_progress(const fs::path& dir);

/// Whether the log shows a search that ran to its end (a run_end with result
/// "ok" or "no_correct", no LLM call logged after it): then a resume makes
/// only calls whose replies are cached, and needs no endpoint. False when in
/// doubt (interrupted, failed, never started), so the resume probes it.
bool search_completed_in_log(const std::vector<nlohmann::json>& events);

/// The run's final run_end event when the run completed: the log's last run_end
/// (with no resume after it) has result "ok" or "no_correct", and summary.json
/// (written after the solution and the report) says "finished". nullopt when the
/// run was interrupted, failed or never finished, i.e. when --resume has work to
/// do. Events logged after the end by other commands (`mkevolve swap`) do not count.
std::optional<nlohmann::json> finished_run_end(const std::vector<nlohmann::json>& events, const fs::path& run_root);

/// Creates the run directory with its config.json and problem.py.
struct NewRun {
  std::string cmd;  ///< run, evolve, bench
  fs::path problem_file;
  std::string llm, judge;
  /// Where the LLM calls go, recorded so that a resume goes to the same place
  /// (never a secret: the URL and the config file's path).
  std::string base_url, config_path;
  bool test_cpu = false;
  std::string problem_id;  ///< stored for bench runs; empty for lone runs
};
Result<std::unique_ptr<rundir::RunDir>> create_run(const fs::path& out, const NewRun& n, const problem::Problem& problem,
                                                const search::SearchOptions& opts, const rundir::Versions& versions);

struct ProblemRun {
  rundir::RunDir* dir = nullptr;
  problem::Problem problem;
  search::SearchOptions opts;
  bool resumed = false;
  std::string problem_id;  ///< summary's problem_id (empty: the problem's name)
  report::StatusLine::Mode mode = report::StatusLine::Mode::kAuto;
  FILE* status_out = stdout;
  const std::atomic<bool>* cancel = nullptr;  ///< an outside stop (besides rundir::Interrupt)
  /// A resume's LLM settings that differ from the run's (--allow-llm-change):
  /// [{flag, from, to}], logged in its resume event.
  nlohmann::json llm_changes = nlohmann::json::array();
};

struct ProblemRunResult {
  search::RunResult res;
  bool wrote_solution = false;
  std::string solution_error;  ///< the solution package could not be written
  std::string sink_error;      ///< the run directory could not be written
  std::string report_error;
  records::Log log;            ///< the run's records as logged, parsed once (summary.json and the closing lines fold it)
  run::Outcome outcome;             ///< what summary.json holds
  std::string summary_error;   ///< summary.json could not be written
};

/// Runs the search (the caller installs rundir::Interrupt), then writes the solution
/// package, report.md and summary.json. Never throws for search errors: they are
/// in res.status/res.error and the summary.
ProblemRunResult run_problem(const Shared& shared, ProblemRun run);

/// Writes DIR/summary.json (atomically) from an outcome.
Status write_summary(const fs::path& dir, const run::Outcome& o);

}  // namespace mk::run
