// Helpers shared by the search's .cc files (not part of the public interface):
// beam.cc, topology.cc, mkevolve.cc (run_method), mkevolve_loop.cc,
// final_check.cc, evaluate_composed.cc, swap_postfuse.cc, reuse.cc, options.cc.
#pragma once

#include <future>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "records/events.h"
#include "search/search.h"

namespace mk::search::detail {

/// round and candidate: the call's place on its chain (rundir/critical_path.h).
records::LlmCall llm_event(const agents::CallRecord& c, int iteration, std::optional<int> round = std::nullopt,
                           const std::string& candidate = "");
records::Eval eval_event(const std::string& task, const std::string& candidate, int iteration,
                          const eval::Verdict& r, double reward, const std::string& scope);
/// The verdict as candidates' records, manifests and events embed it: its
/// JSON form without the worker's fields and the pool's timings, feedback trimmed.
nlohmann::json result_json(const eval::Verdict& r);
/// result_json plus where the evaluation's time went, for files only (never
/// events): queued_s, eval_s (when the pool timed it) and the worker's phases_s.
nlohmann::json timed_result_json(const eval::Verdict& r);

/// Calls the LLM, records accounting and fatal errors, appends the llm_call
/// event (with its round and candidate, when given).
agents::Exchange call(SearchContext& ctx, llm::Provider& llm, const agents::Conversation& conv,
                      const std::string& agent, const std::string& task, int sample, int iteration,
                      std::vector<records::Event>* events, std::optional<int> round = std::nullopt,
                      const std::string& candidate = "");

/// The candidate c, whose source is known (parsed from a reply, or reused by
/// `mkevolve adapt`), evaluated against task's problem: its file written under
/// the workspace, the evaluation (retried after a no-verdict), the cheat judge
/// (when judge is true and one is configured), its reward, its eval event and
/// its stored record. A failure to write the file is the machine's: no verdict,
/// and the run stops (events cleared, so the resume redoes it).
/// priority: its EvalRequest's (the beam rounds its subproblem has left).
void evaluate_source(SearchContext& ctx, const KernelTask& task, Candidate& c, CandidateRecord& rec,
                     std::vector<records::Event>& events, int iteration, bool judge, int round = 0,
                     int priority = 0);

/// What the cheat judge said of one kernel: pass, cheat, unparseable (its reply;
/// counts as a pass), failed (every try failed: reason holds the error), or
/// none (interrupted, or no judge prompt: nothing was decided, nothing is logged).
struct JudgeAnswer {
  std::string verdict;
  std::string reason;
  bool decided() const { return verdict != "none"; }
};
/// Asks the cheat judge (ctx.judge) about `kernel` against `problem_source`,
/// up to --judge-attempts tries, each a logged, counted call on `candidate`'s
/// chain. Appends the calls' events but not the judge event: the caller knows
/// what the answer decides.
JudgeAnswer ask_judge(SearchContext& ctx, const std::string& problem_source, const std::string& kernel,
                      const std::string& task, const std::string& candidate, int iteration, int round,
                      std::vector<records::Event>& events);

/// Turns a verdict into the cheat judge's `cheating` (kind judge, reward 0).
void judged_cheating(eval::Verdict& r, const std::string& reason);

/// The end-to-end evaluation's EvalRequest::priority: the next iteration waits
/// for it, so it goes before every beam's candidates.
inline constexpr int kEndToEndPriority = 1 << 20;

/// The beam rounds a subproblem has left, this one included, with `remaining`
/// calls and `members` in its beam (none: the first round asks for `width`).
int rounds_left(int remaining, int members, int width, int expansion);

/// Evaluates, turning an evaluator exception into a crashed result.
eval::Verdict evaluate(SearchContext& ctx, eval::EvalRequest req);
std::string safe_name(const std::string& s);

/// A rundir/events.h topology event. reason is the search's own word for the
/// change (decompose, fallback, split, fuse, total_fuse, split_failed,
/// fuse_declined), its reason field; status maps a subproblem name to
/// new, correct or failing (absent: new). Callers fill the rest (worker,
/// round, diff, failing) before to_json().
records::TopologyChange topology_event(int iteration, const std::string& reason, const problem::Topology& topo,
                              const std::map<std::string, std::string>& status, const std::string& detail,
                              const std::vector<std::string>& from = {}, const std::vector<std::string>& into = {});

/// An end-to-end evaluation and its eval event, not yet emitted (the event is
/// empty when nothing was evaluated: the package could not be written).
struct Composed {
  eval::Verdict r;
  std::optional<records::Eval> event;
  /// The kernels as evaluated: with options.plain_env, pinned (each Triton
  /// dot naming its precision), which are the ones to ship once it passes.
  std::map<std::string, std::string> kernels;
  nlohmann::json precision;  ///< the pinning's account (Evaluator::pin_precision); null when not pinned
};

}  // namespace mk::search::detail

namespace mk::search {

using detail::Composed;

/// A final check started before the search ended (the last iteration's
/// end-to-end evaluation runs beside it): the solution it checks, and its result.
struct SearchContext::EarlyCheck {
  std::map<std::string, std::string> kernels;
  std::string top_level;
  bool allow_pytorch = false;
  std::shared_future<Composed> result;
  bool taken = false;
};

}  // namespace mk::search

namespace mk::search::detail {

/// Sends e to ctx.sink, when there is one.
void emit(SearchContext& ctx, const records::Event& e);
/// A single-kernel solution of the whole problem (the baselines, PostFuse).
Solution monolithic_solution(const problem::Problem& problem, const Candidate& best, const std::string& method,
                             int iteration);
/// A new best: its event, and its place in the history the final check
/// falls back along.
void announce_best(SearchContext& ctx, const Solution& s);

/// A subproblem's beam: by name, source and the layouts the top level passes
/// its inputs in, so that two subproblems with the same code get a beam each,
/// and a changed subproblem (or one called with other layouts) starts afresh.
std::string beam_key(const problem::Subproblem& sp);
/// Where a subproblem's reference file lives in the workspace.
fs::path subproblem_file(const SearchContext& ctx, const problem::Subproblem& sp);
/// LLMEvolveKernel's task for a subproblem: its file, its source, and the
/// layouts the top level passes its inputs in.
KernelTask subproblem_task(const SearchContext& ctx, const problem::Subproblem& sp);

/// Composes the package under dir (its dots pinned with options.plain_env) and
/// evaluates it end to end; the eval event is left to the caller.
Composed compose_and_evaluate(SearchContext& ctx, const problem::Problem& problem, const problem::Topology& topo,
                              const std::map<std::string, std::string>& kernels, const fs::path& dir,
                              bool allow_pytorch, const std::string& label, const eval::EvalOptions& options);
/// Starts the final check of a solution that the search may return, on a
/// thread of its own; run_method takes its result instead of checking again.
void start_early_check(SearchContext& ctx, const problem::Problem& problem, const problem::Topology& topo,
                       const std::map<std::string, std::string>& kernels, bool allow_pytorch);
/// The final check of `best` (when it is correct), with its fallbacks: `best`
/// becomes what it settled on, or incorrect when nothing passed.
void final_check(SearchContext& ctx, const problem::Problem& problem, Solution& best);

/// mkevolve adapt: each subproblem of the variant that matches one of the
/// earlier run's starts its beam with that run's subkernel, re-verified here
/// on the variant's subproblem with no kernel LLM call (the cheat judge, when
/// one is set, reviews it only if the earlier run had none). A correct one
/// needs no kernel calls; a failing one is the first member its debug prompts
/// start from; one without a verdict is left out. The calls an earlier
/// subkernel cost are saved once, by the first subproblem that reuses it.
void seed_reused(SearchContext& ctx, const EarlierRun& r, const problem::Topology& topo,
                 std::map<std::string, BeamState>& beams);
/// The MKEvolve outer loop (Algorithms 1 and 2; also single-split and adapt).
Solution run_mkevolve(SearchContext& ctx, const problem::Problem& problem);
/// PostFuse: up to --postfuse calls for one fused kernel; the solution when it beats best.
std::optional<Solution> postfuse(SearchContext& ctx, const problem::Problem& problem, const Solution& best);

}  // namespace mk::search::detail
