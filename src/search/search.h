// The search: LLMEvolveKernel (beam search), parallel sampling, LLMDecompose,
// LLMSplit/LLMFuse, AllocateLLMBudget, and the MKEvolve outer loop
// (Algorithms 1 and 2 of the paper) with Swap and PostFuse. See docs/METHOD.md.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agents/agents.h"
#include "eval/evaluator.h"
#include "llm/provider.h"
#include "problem/problem.h"
#include "records/manifest.h"
#include "search/event_sink.h"

namespace mk::search {

namespace fs = std::filesystem;

/// `mkevolve adapt` (issue 17): a finished run whose verified subkernels a run
/// on a variant of its problem reuses. Copied whole into config.json, so a
/// resume needs no access to that run.
struct EarlierRun {
  std::string from;                             ///< that run's directory, as given
  std::string top_level;                        ///< its decomposed_problem.py
  std::map<std::string, std::string> problems;  ///< subproblem name -> its reference source
  std::map<std::string, std::string> kernels;   ///< subproblem name -> its verified subkernel
  std::map<std::string, int> calls;             ///< subproblem name -> kernel LLM calls that run spent on it
  bool judged = false;                          ///< that run had a cheat judge (its kernels passed it)
  nlohmann::json to_json() const;
  static Result<EarlierRun> from_json(const nlohmann::json& j);
};

/// How a subproblem of the variant matches one of the earlier run's, best
/// first: the same file (source and shapes); the same module with other
/// shapes (the file with its module-level numeric constants set aside); or
/// only the same name. The old subkernel is re-verified in every case.
struct EarlierSubproblem {
  std::string name;   ///< the earlier run's subproblem
  std::string how;    ///< "same source", "same module, other shapes", "same name"
};
std::optional<EarlierSubproblem> match_reuse(const EarlierRun& r, const problem::Subproblem& sp);

/// Every setting of a run; each is a flag of `mkevolve run`.
struct SearchOptions {
  std::string method = "mkevolve";  ///< parallel | beam | mkevolve | single-split
  int iterations = 5;               ///< T
  int refine_every = 2;             ///< L: split/fuse when t mod L == 0
  int calls_per_iter = 32;          ///< kernel-writing LLM calls per iteration
  int beam_width = 4;
  int expansion = 1;                ///< children per beam member per round
  bool fuse = false;                ///< LLMFuse when no subkernel fails
  /// AllocateLLMBudget's weights once every subkernel passes: "runtime" (the
  /// paper's rule: each subkernel's end-to-end runtime) or "headroom" (runtime
  /// x its headroom over the roofline, eval/roofline.h; 1 where unknown).
  std::string allocate = "runtime";
  std::optional<double> swap_tau;   ///< --swap TAU (Swap off when unset)
  std::map<std::string, std::string> swap_with;  ///< subproblem -> alternative kernel source (user/other run)
  int postfuse = 0;                 ///< --postfuse N: LLM calls for the end-to-end fusion attempt
  /// method "adapt": the run to reuse subkernels from (its decomposition is the
  /// decompose prompt's starting point); kernel calls go only to subproblems
  /// without a verified subkernel, and the structure is not refined.
  std::optional<EarlierRun> reuse;
  int decompose_workers = 4;        ///< K
  int decompose_attempts = 3;       ///< sequential tries per decompose worker
  int refine_attempts = 3;          ///< tries per split/fuse
  int max_tokens = 16384;
  /// "", "low", "medium" or "high": sent with every call but the judge's
  /// (OpenAI-compatible reasoning_effort; a thinking budget for Claude).
  std::string reasoning_effort;
  /// A judge call that still fails after judge_attempts tries: "hold" (the
  /// candidate has no verdict: no reward, kept out of the beam, its call given
  /// back to the budget) or "pass" (it counts as passed). Both are logged.
  std::string judge_failure = "hold";
  int judge_attempts = 3;
  eval::EvalOptions eval;
  /// A candidate whose evaluation had no verdict (the harness failed, and the
  /// pool's own retries did too) is evaluated again after this many seconds,
  /// then 3x and 9x as long; not part of config.json (it changes no decision).
  double no_verdict_wait_s = 10;
  /// The budget of the baselines: the same total number of kernel calls.
  int total_budget() const { return iterations * calls_per_iter; }
};

/// The options as stored in the run directory's config.json (swap_with sources
/// included, so a resume reproduces the run), and back.
nlohmann::json to_json(const SearchOptions& o);
Result<SearchOptions> options_from_json(const nlohmann::json& j);

/// Thread-safe token and call accounting, per agent.
class AgentAccounting {
 public:
  void add(const agents::CallRecord& c);
  int calls(const std::string& agent) const;
  int kernel_calls() const;   ///< generate + debug + optimize + postfuse
  int calls() const;          ///< every agent's calls so far
  int64_t tokens() const;     ///< every agent's tokens so far (llm::Usage::total)
  nlohmann::json to_json() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::pair<int, llm::Usage>> by_agent_;
};

/// What every search function needs. Pointers are borrowed.
/// The kernel prompts' sentence on how outputs are judged: the tolerances
/// the evaluation really uses (the flags', else the defaults by output dtype,
/// and the problem's own MKEVOLVE_TOLERANCE where it declares one).
std::string correctness_fact(const eval::EvalOptions& o);

struct Solution;

struct SearchContext {
  llm::Provider* llm = nullptr;
  llm::Provider* judge = nullptr;       ///< --judge; nullptr: no cheat judge
  eval::Evaluator* evaluator = nullptr;
  const agents::Prompts* prompts = nullptr;
  std::string hardware;                 ///< agents::hardware_text(evaluator->hardware_info())
  std::string gpu_name;                 ///< the GPU's reported name (the roofline's peaks); empty without one
  EventSink* sink = nullptr;
  fs::path workspace;                   ///< candidate files, composed packages, topologies
  SearchOptions opts;
  agents::Gate* gate = nullptr;         ///< bounds LLM calls in flight
  /// Every solution that became the best, in order (the final check falls
  /// back along it and runners_up, fastest first, when the best fails it).
  std::vector<std::shared_ptr<const Solution>> bests;
  /// The baselines' runners-up: the next-best correct candidates of the last
  /// beam or of all samples (an earlier best among them), for the final
  /// check to fall back on beside the bests.
  std::vector<std::shared_ptr<const Solution>> runners_up;
  /// Final checks started before the search ended (final_check.cc): the last
  /// iteration runs the final check of each solution it may return beside its
  /// own end-to-end evaluation, and run_method takes their results.
  struct EarlyCheck;
  std::vector<std::shared_ptr<EarlyCheck>> early_checks;
  /// Whether the last iteration overlaps the final check so (benchmarks
  /// switch it off to measure what it saves; it changes no result).
  bool overlap_final_check = true;
  std::atomic<bool>* stop = nullptr;    ///< set by SIGINT: finish the round and return
  AgentAccounting* acct = nullptr;

  /// Reserves n consecutive sample indices for a request stream (a task and
  /// agent family). Deterministic: each stream is planned by one thread.
  int reserve_samples(const std::string& stream, int n);
  /// Records a fatal LLM error (auth, config, unmatched replay); the search stops.
  void set_fatal(const std::string& message);
  /// An LLM call was cancelled by an interrupt: stop as if the stop flag were set.
  void request_stop();
  bool should_stop() const;
  std::string fatal_message() const;

  /// The kernel prompts' facts: the hardware, then how outputs are judged
  /// (the evaluation's real tolerances, --atol/--rtol).
  agents::KernelContext kernel_context() const {
    return {prompts, hardware + "\n- " + correctness_fact(opts.eval), gpu_name, agents::shapes_text(opts.eval.shapes)};
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, int> samples_;
  std::string fatal_;
};

/// One kernel written by an LLM, and what the evaluator (and judge) made of it.
struct Candidate {
  std::string id, task, agent, parent;
  int iteration = 0, sample = 0;
  std::string source;                  ///< empty when the reply was unusable
  std::string reply_error;             ///< parse error or LLM error
  std::string raw_reply;               ///< kept to re-ask after a parse error
  agents::Conversation conversation;   ///< what was sent
  bool evaluated = false;
  /// Evaluated, but the harness gave no verdict (eval::VerdictStatus::kNoVerdict):
  /// never in a beam, never shown to an LLM as a failure, its call refunded.
  bool no_verdict = false;
  eval::Verdict result;
  double reward = 0;                   ///< speedup vs torch.compile; 0 unless correct
  bool correct() const { return evaluated && result.correct(); }
  nlohmann::json summary() const;
};

/// Beam order: reward, then (both correct) the speedup vs eager, which decides
/// where no torch.compile baseline exists, then how far the candidate got (runs
/// but wrong beats does not compile), then newest first. A strict, deterministic order.
bool better(const Candidate& a, const Candidate& b);

/// What LLMEvolveKernel works on: the reference file the evaluator checks
/// against and the source the prompts show.
struct KernelTask {
  std::string task;
  fs::path problem_file;
  std::string problem_source;
  /// Replaces the generate prompt for the first round (PostFuse).
  std::optional<agents::Conversation> initial;
  std::string initial_agent = "generate";
  bool allow_pytorch = false;
  /// A subproblem's inputs as the top level passes them (Subproblem::input_layouts):
  /// its trials use them and its prompts state them; null: contiguous.
  nlohmann::json input_layouts;
};

struct BeamState {
  std::vector<Candidate> members;  ///< best first, at most beam_width
  int calls = 0;                   ///< LLM calls spent on it so far
  /// Kernel sources that passed their own trials but were rejected later:
  /// they failed inside the composed solution, or the cheat judge's second
  /// look after the beam search called them cheating. Each keeps the verdict
  /// it carries from then on: a member, or a later candidate, with such a
  /// source is no correct member.
  std::map<std::string, eval::Verdict> rejected;
  /// Sources that passed the cheat judge's look after a beam search (--judge):
  /// not asked about again.
  std::set<std::string> judge_passed;
  int rounds_run = 0;  ///< beam rounds the last evolve_kernel call ran
  /// Gives every member whose source was rejected that verdict (reward 0)
  /// and restores the beam's order.
  void apply_rejected();
  const Candidate* best() const { return members.empty() ? nullptr : &members.front(); }
  const Candidate* best_correct() const {
    return !members.empty() && members.front().correct() ? &members.front() : nullptr;
  }
};

/// LLMEvolveKernel: beam search (width W, expansion E) spending exactly
/// `budget` LLM calls unless stopped. Debug prompts for failing members,
/// optimize prompts for passing ones, re-asks for unusable replies.
BeamState evolve_kernel(SearchContext& ctx, const KernelTask& task, BeamState beam, int budget, int iteration,
                        EventSink* sink);

/// The cheat judge's second look after a beam search (the paper accepts a
/// subkernel only if it passes the detector once more then): the beam's best
/// correct member is judged again, unless its source passed such a look
/// before; a cheat is rejected (BeamState::rejected) and the next correct
/// member gets the same look. A judge that cannot be asked leaves the member
/// as it was (it was judged on entry). Logs judge events with stage after_beam.
void judge_after_beam(SearchContext& ctx, const KernelTask& task, BeamState& beam, int iteration, EventSink* sink);

/// Parallel sampling: `budget` independent samples of the generate prompt.
/// Returns all candidates, best first.
std::vector<Candidate> parallel_sampling(SearchContext& ctx, const KernelTask& task, int budget, int iteration,
                                         EventSink* sink);

/// AllocateLLMBudget. needs_work[i]: subproblem i is new or has no correct
/// kernel; runtime_ms[i]: its share basis. Integers summing exactly to total.
std::vector<int> allocate_budget(int total, const std::vector<bool>& needs_work, const std::vector<double>& runtime_ms);

/// LLMDecompose: K workers in lockstep rounds, each retrying on its own
/// verification feedback; the first round with a verified decomposition wins
/// (lowest worker index). Falls back to wrapping the original.
problem::Topology llm_decompose(SearchContext& ctx, const problem::Problem& problem, EventSink* sink);

/// LLMSplit (failing: name -> why) or LLMFuse (status_table). nullopt: keep
/// the previous structure (failure or, for fuse, NO_CHANGE).
std::optional<problem::Topology> llm_refine(SearchContext& ctx, const problem::Problem& problem,
                                            const problem::Topology& topo, const std::string& kind,
                                            const std::map<std::string, std::string>& failing,
                                            const std::string& status_table, int iteration, EventSink* sink);

/// A composed solution and how it did.
struct Solution {
  problem::Topology topology;
  std::map<std::string, std::string> kernels;       ///< subproblem -> implementation source
  std::map<std::string, nlohmann::json> local;      ///< subproblem -> its best candidate's summary
  std::set<std::string> pytorch;                    ///< subkernels replaced by PyTorch (Swap)
  std::map<std::string, std::string> reused;        ///< subkernel -> the run it was reused from (adapt)
  eval::Verdict e2e;
  double speedup = 0;                               ///< vs torch.compile; 0 unless correct
  bool correct = false;
  int iteration = 0;
  std::string method;
  nlohmann::json to_json() const;  ///< for run_end
  /// Its figures as manifest.json holds them (the package adds the rest).
  records::SolutionManifest manifest() const;
};

struct RunResult {
  Solution best;
  std::string status;     ///< ok, no_correct, interrupted, error
  std::string error;
  nlohmann::json accounting;
};

/// Runs the method named in ctx.opts.method on the problem (its file must exist).
RunResult run_method(SearchContext& ctx, const problem::Problem& problem);

/// Swap (exposed for tests and `mkevolve swap`): replaces subkernels below tau.
/// Returns the swapped solution when it triggered and verified; the event
/// explains the decision either way.
std::optional<Solution> swap_subkernels(SearchContext& ctx, const problem::Problem& problem, const Solution& best,
                                        double tau);

/// Composes a solution package under dir and evaluates it end to end.
eval::Verdict evaluate_composed(SearchContext& ctx, const problem::Problem& problem, const problem::Topology& topo,
                                   const std::map<std::string, std::string>& kernels, const fs::path& dir,
                                   bool allow_pytorch, const std::string& label);

}  // namespace mk::search
