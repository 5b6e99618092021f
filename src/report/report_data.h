// What a report shows, computed from a run's events (rundir/events.h): iterations,
// the evolving subproblem structure, token use by agent and by subkernel, the
// final subkernels and, when the end-to-end check failed, which subkernels fail
// on their own. Rendering (markdown, HTML) only reads this.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rundir/critical_path.h"
#include "records/tally.h"
#include "records/events.h"

namespace mk::report {

struct SubkernelPoint {
  bool correct = false;
  std::optional<double> speedup_compile, runtime_ms, share;
  bool uses_pytorch = false;
};

struct IterationRow {
  int t = 0;
  std::string e2e_status;
  std::optional<double> speedup_compile, speedup_eager, runtime_ms;
  std::map<std::string, SubkernelPoint> subkernels;
  int64_t calls_used = 0, tokens = 0;
};

/// The structure used in one iteration (a topology event).
struct StructureColumn {
  int iteration = 0;
  std::string change, detail;
  std::vector<std::string> from, into;
  std::vector<std::pair<std::string, std::string>> subproblems;  ///< name, status (new|correct|failing)
};

/// Figure 1 (left) as data: which subproblems existed in each iteration and
/// whether their kernel was correct.
struct StructureGrid {
  enum Cell : char { kAbsent = ' ', kOk = 'y', kFailed = 'n', kNew = '?' };
  std::vector<int> t;                    ///< one column per iteration
  std::vector<std::string> change;       ///< initial, split, fuse, ... per column ("" when unchanged)
  std::vector<std::string> detail;       ///< per column
  std::vector<std::string> rows;         ///< subproblem names, children after parents
  std::vector<std::vector<Cell>> cells;  ///< [row][column]
};

/// One row of the final subkernel table.
struct SubkernelRow {
  std::string name;
  std::string status;  ///< correct, failing, new
  std::optional<double> runtime_ms, speedup_compile, share;
  bool uses_pytorch = false;
  records::LlmTally usage;   ///< LLM calls made for this subproblem
  std::optional<double> roofline_fraction, headroom;  ///< against the GPU's roofline, when known
  std::string bound;   ///< memory or compute (with roofline_fraction)
  std::string reused_from;  ///< mkevolve adapt: the run its verified subkernel came from ("" if none)
};

/// mkevolve adapt: one subproblem that met an earlier run's subkernel (a reuse event).
struct ReuseRow {
  std::string task, from_run, from_task, match, status;
  bool correct = false;
  int64_t calls_saved = 0;  ///< as the reuse event says (0 for the second subproblem that reuses one kernel)
  int64_t saved() const { return correct ? calls_saved : 0; }  ///< none unless it passed here
};

struct ReportData {
  std::string method, problem;
  nlohmann::json settings = nlohmann::json::object();
  nlohmann::json versions = nlohmann::json::object();
  nlohmann::json config = nlohmann::json::object();
  int resumes = 0;
  /// What resumes changed of the LLM (--allow-llm-change), as "--llm 'a' -> 'b'".
  std::vector<std::string> llm_changes;
  int64_t events = 0;

  std::vector<IterationRow> iterations;       ///< by t
  std::vector<StructureColumn> structure;     ///< by iteration
  std::vector<std::string> subproblem_order;  ///< every subproblem ever seen, children after parents
  std::map<std::string, std::string> lineage; ///< name -> "split of 4" / "fusion of 4a + 4b"
  StructureGrid grid;

  std::vector<std::pair<std::string, records::LlmTally>> agents;  ///< by agent, most tokens first
  std::map<std::string, records::LlmTally> by_task;
  records::LlmTally llm_total;  ///< in all; its kernel_calls are what the kernel budget (max_calls) counts
  std::map<std::string, int64_t> evals_by_status;
  /// The cheat judge's looks, from the judge events: on a candidate's entry
  /// into a beam, after a beam search, and at the final check; each with how
  /// many it called cheating.
  struct JudgeLooks {
    int64_t asked = 0, cheats = 0;
  };
  JudgeLooks judged_on_entry, judged_after_beam, judged_final;
  std::string judge_spec;  ///< run_start's judge ("" : none was configured)

  std::vector<SubkernelRow> final_subkernels;
  std::vector<records::Swap> swaps;
  std::vector<records::Postfuse> postfuse;
  /// The decomposition, split and fusion checks (verify_decomposition events).
  std::vector<records::VerifyDecomposition> verifications;
  /// Compositions that failed while every subkernel passed, and where each went.
  std::vector<records::CompositionFailure> composition_failures;

  /// The returned solution's speedup: the passing final check's own timing
  /// when there is one (best_from_final_check), else the search's figure.
  std::optional<double> best_speedup_compile;
  bool best_from_final_check = false;
  std::optional<double> best_search_speedup_compile;  ///< the search's figure for it, when the check's is shown
  int best_t = -1;
  std::optional<double> final_speedup_compile, final_speedup_eager, final_runtime_ms;
  /// --baseline-tf32: the final check's speedup against torch.compile with TF32 on (the
  /// last passing final_check's; unset without the flag).
  std::optional<double> final_speedup_compile_tf32;
  std::string final_e2e_status;   ///< last known end-to-end status ("" if never evaluated)
  /// What the final checks came to (result "" : none was logged).
  records::FinalCheckOutcome final_check;
  bool ended = false;
  std::string end_status, end_message, solution_dir;

  std::vector<std::string> pytorch_subkernels;  ///< final subkernels that run PyTorch code
  bool contains_pytorch = false;                ///< the final solution runs PyTorch code (names may be unknown)
  bool final_e2e_failed = false;
  std::vector<std::string> failing_locally;     ///< final subkernels that fail their own check
  std::vector<ReuseRow> reuse;                  ///< adapt: the subkernels met in the earlier run, in order
  int64_t calls_saved() const {  // each earlier subkernel's calls once (the search saves them once)
    int64_t n = 0;
    for (const auto& r : reuse) n += r.saved();
    return n;
  }

  std::optional<int64_t> max_calls, max_tokens;  ///< budgets from run_start settings / config
  rundir::TimeAccount time;  ///< wall time, the LLM critical path, and where the rest went
};

/// Builds the summary from a run's records (records/events.h). Unknown record types and missing fields are tolerated.
ReportData summarize(const records::Log& events, const nlohmann::json& versions,
                     const nlohmann::json& config);

/// "1.23M", "45.6K", "789".
std::string human_count(double v);

/// A speedup that is known: a correct kernel's speedup is positive, so 0 or
/// none means it is unknown (no baseline), not 0x.
std::optional<double> known(std::optional<double> v);

/// The subkernels one swap replaced: its name, or the list an older build
/// wrote as "names" (kept in the record's meta.extra).
std::vector<std::string> swapped_names(const records::Swap& s);

}  // namespace mk::report
