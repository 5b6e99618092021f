// Helpers shared by the search's .cc files (not part of the public interface).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rundir/events.h"
#include "search/search.h"

namespace mk::search::detail {

/// round and candidate: the call's place on its chain (rundir/critical_path.h).
nlohmann::json llm_event(const agents::CallRecord& c, int iteration, std::optional<int> round = std::nullopt,
                         const std::string& candidate = "");
rundir::events::Eval eval_event(const std::string& task, const std::string& candidate, int iteration,
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
                      std::vector<nlohmann::json>* events, std::optional<int> round = std::nullopt,
                      const std::string& candidate = "");

/// The candidate c, whose source is known (parsed from a reply, or reused by
/// `mkevolve adapt`), evaluated against task's problem: its file written under
/// the workspace, the evaluation (retried after a no-verdict), the cheat judge
/// (when judge is true and one is configured), its reward, its eval event and
/// its stored record. A failure to write the file is the machine's: no verdict,
/// and the run stops (events cleared, so the resume redoes it).
/// priority: its EvalRequest's (the beam rounds its subproblem has left).
void evaluate_source(SearchContext& ctx, const KernelTask& task, Candidate& c, CandidateRecord& rec,
                     std::vector<nlohmann::json>& events, int iteration, bool judge, int round = 0,
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
                      std::vector<nlohmann::json>& events);

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
rundir::events::Topology topology_event(int iteration, const std::string& reason, const problem::Topology& topo,
                              const std::map<std::string, std::string>& status, const std::string& detail,
                              const std::vector<std::string>& from = {}, const std::vector<std::string>& into = {});


}  // namespace mk::search::detail
