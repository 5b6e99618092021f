// The event schema: one builder per event type, so the writer (search) and the
// readers (report, status line, resume) agree on names and shapes. Every event
// is a JSON object with "type"; RunDir::log_event adds "seq" and "ts".
// docs/RUN-DIRECTORY.md documents the same schema for users and scripts.
//
// Speedups are "x times faster than the baseline" (>1 is faster); null when the
// kernel failed. Times are milliseconds. Optional fields are null or absent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <variant>

#include <nlohmann/json.hpp>

#include "records/record.h"

namespace mk::records {

// The "type" values.
inline constexpr const char* kRunStart = "run_start";
inline constexpr const char* kResume = "resume";
inline constexpr const char* kLlmCall = "llm_call";
inline constexpr const char* kEval = "eval";
inline constexpr const char* kTopology = "topology";
inline constexpr const char* kIteration = "iteration";
inline constexpr const char* kBest = "best";
inline constexpr const char* kSwap = "swap";
inline constexpr const char* kPostfuse = "postfuse";
inline constexpr const char* kRunEnd = "run_end";
inline constexpr const char* kPreflight = "preflight";
inline constexpr const char* kFinalCheck = "final_check";
inline constexpr const char* kReplyError = "reply_error";
inline constexpr const char* kVerifyDecomposition = "verify_decomposition";
inline constexpr const char* kJudge = "judge";
inline constexpr const char* kReuse = "reuse";
inline constexpr const char* kBudget = "budget";
inline constexpr const char* kSwapSkipped = "swap_skipped";
inline constexpr const char* kSwapRejected = "swap_rejected";
inline constexpr const char* kCompositionFailure = "composition_failure";

/// What every record carries whatever its type, one this build does not know
/// included: its "type", and the log's seq and ts (RunDir::log_event). For a
/// reader that handles every record alike (the time account's clock, the
/// resume's replay) before it asks for the record's own type.
struct Envelope {
  std::string type{};
  std::optional<int64_t> seq{};
  std::string ts{};  ///< ISO-8601 UTC ("" : none)
  /// nullopt when j is not an object with a string "type".
  static std::optional<Envelope> from_json(const nlohmann::json& j);
};

/// What makes a record logged before a resume "the same event" as one the
/// resumed run emits again: its type and, where the record type has them, its
/// agent, task, candidate, iteration and sample (absent fields are null, so
/// they compare equal only to absent ones).
struct ReplayKey {
  std::string type{};
  nlohmann::json agent{}, task{}, candidate{}, iteration{}, sample{};
  static ReplayKey of(const nlohmann::json& j);
  bool operator==(const ReplayKey&) const = default;
};

/// Token counts of one LLM call (mirrors llm::Usage without depending on llm/).
struct TokenUsage {
  int64_t input = 0, output = 0, cache_read = 0, cache_write = 0;
  bool estimated = false;
  int64_t total() const { return input + output + cache_read + cache_write; }
  static constexpr auto fields() {
    return std::tuple{
        field("input", &TokenUsage::input),
        field("output", &TokenUsage::output),
        field("cache_read", &TokenUsage::cache_read),
        field("cache_write", &TokenUsage::cache_write),
        field("estimated", &TokenUsage::estimated)};
  }
};

/// llm_call: one LLM call, logged once when it ends (the live copy the status
/// line sees while the run goes is a progress event of type llm_done).
struct LlmCall {
  static constexpr const char* kType = "llm_call";
  std::string agent{};   ///< decompose, generate, debug, optimize, split, fuse, postfuse, judge
  std::string task{};    ///< the problem or subproblem the call works on
  TokenUsage usage{};
  bool cached = false;     ///< served from the response cache (cost nothing this time)
  bool truncated = false;  ///< the reply hit the token limit
  /// From the request to the reply as the search saw it (the provider's
  /// retries and its --llm-concurrency waits included; a cache hit is fast);
  /// absent in logs written before it existed (the search always sets it).
  std::optional<int64_t> latency_ms{};
  bool ok = true;
  std::string error{};       ///< when !ok: one line (no secrets)
  /// The dependent step of the call's chain (critical_path.h): the
  /// decomposition round, the split/fuse try, or the beam round of its task in
  /// its iteration (0, 1, ...); absent in logs written before it existed.
  std::optional<int> round{};
  /// The kernel candidate the call wrote or judged (kernel agents and judge).
  std::string candidate{};
  int iteration = 0;     ///< the outer iteration (0: the decomposition)
  int sample = 0;        ///< the call's stable sample number (its cache key's part)
  std::string model{};   ///< as the provider reported it ("" when unknown)
  Meta meta{};

  /// The tokens this call was billed for in this run: 0 for a cached reply
  /// (the call that filled the cache paid for it); what LlmTally (tally.h),
  /// behind every count of tokens shown to a person, adds for it.
  int64_t billed_tokens() const { return cached ? 0 : usage.total(); }
  static constexpr auto fields() {
    return std::tuple{
        field("agent", &LlmCall::agent),
        field("task", &LlmCall::task),
        field("usage", &LlmCall::usage),
        field("cached", &LlmCall::cached),
        field("truncated", &LlmCall::truncated),
        field("ok", &LlmCall::ok),
        field("iteration", &LlmCall::iteration),
        field("sample", &LlmCall::sample),
        field("latency_ms", &LlmCall::latency_ms, When::kIfSet),
        field("round", &LlmCall::round, When::kIfSet),
        field("candidate", &LlmCall::candidate, When::kIfSet),
        field("model", &LlmCall::model, When::kIfSet),
        field("error", &LlmCall::error, When::kIfSet)};
  }
  MK_RECORD_JSON(LlmCall)
  /// A failed call writes its error even when empty.
  void finish_json(nlohmann::json& j) const;
};

/// The agents whose calls the kernel budget counts: generate, debug, optimize,
/// postfuse (decompose, split, fuse and judge calls are outside it).
inline bool is_kernel_agent(std::string_view agent) {
  return agent == "generate" || agent == "debug" || agent == "optimize" || agent == "postfuse";
}

/// eval: one candidate's verdict, as the search used it.
struct Eval {
  static constexpr const char* kType = "eval";
  std::string task{};        ///< subproblem name, or the problem for end-to-end evaluations
  std::string candidate{};   ///< candidate id (its directory under candidates/<task>/)
  std::string status{};      ///< correct, incorrect, cheating, compile_error, runtime_error, timeout, crashed
  std::string kind{};        ///< finer cause (mismatch, oom, ...); empty when correct
  std::optional<double> speedup_compile{}, speedup_eager{}, runtime_ms{};
  /// --baseline-tf32: torch.compile with TF32 on, and the speedup against it
  /// (the reward stays speedup_compile); absent when not measured.
  std::optional<double> compile_tf32_ms{}, speedup_compile_tf32{};
  bool uses_pytorch = false;  ///< the candidate calls PyTorch ops for part of its work
  bool e2e = false;           ///< an end-to-end evaluation of the composed module
  /// Seconds waiting for an evaluation slot, evaluating (baselines measured
  /// for it included), and of that the baselines and starting the slot's
  /// worker server; absent when not measured (a cached verdict, an evaluator
  /// that does not time itself).
  std::optional<double> queued_s{}, eval_s{}, baseline_s{}, server_start_s{};
  /// A final check started beside the last iteration's end-to-end evaluation:
  /// how long it then waited for it (critical_path.h).
  std::optional<double> waited_s{};
  std::string scope{};              ///< local, e2e, swap, final ("" : not said)
  int iteration = 0;
  std::optional<double> reward{};   ///< the beam's score (speedup vs torch.compile, 0 when failed)
  bool cached = false;              ///< the verdict came from the verdict cache
  Meta meta{};

  static constexpr auto fields() {
    return std::tuple{
        field("task", &Eval::task),
        field("candidate", &Eval::candidate),
        field("status", &Eval::status),
        field("kind", &Eval::kind),
        field("speedup_compile", &Eval::speedup_compile),
        field("speedup_eager", &Eval::speedup_eager),
        field("runtime_ms", &Eval::runtime_ms),
        field("uses_pytorch", &Eval::uses_pytorch),
        field("iteration", &Eval::iteration),
        field("cached", &Eval::cached),
        field("e2e", &Eval::e2e, When::kIfSet),
        field("compile_tf32_ms", &Eval::compile_tf32_ms, When::kIfSet),
        field("speedup_compile_tf32", &Eval::speedup_compile_tf32, When::kIfSet),
        field("queued_s", &Eval::queued_s, When::kIfSet),
        field("eval_s", &Eval::eval_s, When::kIfSet),
        field("baseline_s", &Eval::baseline_s, When::kIfSet),
        field("server_start_s", &Eval::server_start_s, When::kIfSet),
        field("waited_s", &Eval::waited_s, When::kIfSet),
        field("scope", &Eval::scope, When::kIfSet),
        field("reward", &Eval::reward, When::kIfSet)};
  }
  MK_RECORD_JSON(Eval)
};

/// One subproblem in a topology: status new (no kernel yet), correct or failing.
struct TopologyEntry {
  std::string name{};
  std::string status{};
  static constexpr auto fields() {
    return std::tuple{
        field("name", &TopologyEntry::name),
        field("status", &TopologyEntry::status)};
  }
};
/// topology: the structure an iteration works on.
struct TopologyChange {
  static constexpr const char* kType = "topology";
  int iteration = 0;
  std::string change{};                 ///< initial, split, fuse, totalfuse, fallback, unchanged
  std::vector<TopologyEntry> subproblems{};
  std::string detail{};                 ///< one line for people: "split 4 into 4a, 4b"
  std::vector<std::string> from{}, into{};  ///< for split/fuse: the subproblems replaced and their replacements
  /// The search's word for it: decompose, fallback, split, fuse, total_fuse,
  /// split_failed, fuse_declined ("" : not said).
  std::string reason{};
  nlohmann::json diff{};                ///< problem::TopologyDiff's JSON for a change (null: none)
  std::optional<int> worker{}, round{};  ///< the decomposition that won: its worker and round
  std::vector<std::string> failing{};   ///< split_failed: the subproblems that were to be split
  bool subproblems_unknown = false;     ///< older logs: the subproblems are the previous event's
  Meta meta{};

  static constexpr auto fields() {
    return std::tuple{
        field("iteration", &TopologyChange::iteration),
        field("change", &TopologyChange::change),
        field("subproblems", &TopologyChange::subproblems),
        field("detail", &TopologyChange::detail),
        field("from", &TopologyChange::from, When::kIfSet),
        field("into", &TopologyChange::into, When::kIfSet),
        field("reason", &TopologyChange::reason, When::kIfSet),
        field("diff", &TopologyChange::diff, When::kIfSet),
        field("worker", &TopologyChange::worker, When::kIfSet),
        field("round", &TopologyChange::round, When::kIfSet),
        field("failing", &TopologyChange::failing, When::kIfSet),
        field("subproblems_unknown", &TopologyChange::subproblems_unknown, When::kIfSet)};
  }
  MK_RECORD_JSON(TopologyChange)
};

struct E2E {
  std::string status{};  ///< correct, incorrect, ... or "skipped" when not every subkernel was correct
  std::optional<double> speedup_compile{}, speedup_eager{}, runtime_ms{};
  std::vector<std::string> missing{};  ///< skipped: the subproblems without a correct kernel
  static constexpr auto fields() {
    return std::tuple{
        field("status", &E2E::status),
        field("speedup_compile", &E2E::speedup_compile),
        field("speedup_eager", &E2E::speedup_eager),
        field("runtime_ms", &E2E::runtime_ms),
        field("missing", &E2E::missing, When::kIfSet)};
  }
};
struct SubkernelSummary {
  std::string name{};
  bool correct = false;
  std::optional<double> speedup_compile{}, runtime_ms{};
  std::optional<double> share{};  ///< fraction (0..1) of the end-to-end time spent in this subkernel
  bool uses_pytorch = false;
  /// Its best kernel against the GPU's roofline (eval/roofline.h summary_json:
  /// fraction, headroom, bound, t_roof_ms, model_does_not_fit, gpu); null when unknown.
  nlohmann::json roofline{};
  std::optional<int64_t> calls{}, budget{};  ///< the search's calls on it so far, and this iteration's budget
  std::string status{};  ///< without a correct kernel: its best candidate's status ("" otherwise)
  static constexpr auto fields() {
    return std::tuple{
        field("name", &SubkernelSummary::name),
        field("correct", &SubkernelSummary::correct),
        field("speedup_compile", &SubkernelSummary::speedup_compile),
        field("runtime_ms", &SubkernelSummary::runtime_ms),
        field("share", &SubkernelSummary::share),
        field("uses_pytorch", &SubkernelSummary::uses_pytorch, When::kIfSet),
        field("roofline", &SubkernelSummary::roofline, When::kIfObject),
        field("calls", &SubkernelSummary::calls, When::kIfSet),
        field("budget", &SubkernelSummary::budget, When::kIfSet),
        field("status", &SubkernelSummary::status, When::kIfSet)};
  }
};
/// iteration: the results of outer iteration t.
struct Iteration {
  static constexpr const char* kType = "iteration";
  int t = 0;
  E2E e2e{};
  std::vector<SubkernelSummary> subkernels{};
  int64_t calls_used = 0;  ///< LLM calls so far (cumulative; the search's tally)
  int64_t tokens = 0;      ///< tokens so far (cumulative; the search's tally)
  std::string method{};
  std::string topology_change{};           ///< mkevolve: the change that formed this iteration's structure
  std::optional<double> speedup{};         ///< mkevolve: this iteration's end-to-end speedup (0: failed)
  std::optional<double> best_speedup{};    ///< the best so far
  std::optional<bool> correct{};           ///< baselines (parallel, beam): the best so far is correct
  std::optional<int64_t> kernel_calls{};   ///< the calls the kernel budget counts, so far
  Meta meta{};

  static constexpr auto fields() {
    return std::tuple{
        field("t", &Iteration::t),
        field("e2e", &Iteration::e2e),
        field("subkernels", &Iteration::subkernels),
        field("calls_used", &Iteration::calls_used),
        field("tokens", &Iteration::tokens),
        field("method", &Iteration::method, When::kIfSet),
        field("topology_change", &Iteration::topology_change, When::kIfSet),
        field("speedup", &Iteration::speedup, When::kIfSet),
        field("best_speedup", &Iteration::best_speedup, When::kIfSet),
        field("correct", &Iteration::correct, When::kIfSet),
        field("kernel_calls", &Iteration::kernel_calls, When::kIfSet)};
  }
  MK_RECORD_JSON(Iteration)
  /// Also writes "iteration" (= t) for older readers.
  void finish_json(nlohmann::json& j) const;
};

/// best: a new best solution (always a correct one since issue 13; older
/// logs hold correct: false placeholders, which readers skip).
struct Best {
  static constexpr const char* kType = "best";
  int t = 0;
  std::optional<double> speedup_compile{};  ///< null when not correct
  bool correct = true;
  std::string method{};
  std::vector<std::string> subproblems{};
  bool contains_pytorch_subkernels = false;
  std::optional<double> speedup{};          ///< the search's score (0 when not correct)
  Meta meta{};

  static constexpr auto fields() {
    return std::tuple{
        field("t", &Best::t),
        field("speedup_compile", &Best::speedup_compile),
        field("correct", &Best::correct),
        field("contains_pytorch_subkernels", &Best::contains_pytorch_subkernels),
        field("method", &Best::method, When::kIfSet),
        field("subproblems", &Best::subproblems, When::kIfSet),
        field("speedup", &Best::speedup, When::kIfSet)};
  }
  MK_RECORD_JSON(Best)
  /// speedup_compile is null unless correct.
  void finish_json(nlohmann::json& j) const;
};

/// swap: a subkernel replaced in the solution (Swap, or `mkevolve swap`),
/// one record per replaced subkernel, only when the swap was taken.
struct Swap {
  static constexpr const char* kType = "swap";
  std::string name{};   ///< the subkernel replaced
  std::string from{};   ///< what was there (candidate id, file or "pytorch")
  std::string to{};     ///< what replaced it (file, candidate id or "pytorch")
  std::optional<double> speedup_before{}, speedup_after{};  ///< end-to-end, vs torch.compile
  std::optional<bool> triggered{};              ///< the search's Swap: tau triggered it
  std::optional<double> tau{};
  std::optional<double> subkernel_speedup{};    ///< the replaced subkernel's own speedup (search)
  std::optional<bool> correct{};                ///< the swapped solution passed end to end (search)
  std::optional<bool> contains_pytorch_subkernels{};
  nlohmann::json local{}, e2e{};               ///< mkevolve swap: the two checks' verdict summaries
  std::string by{};                             ///< "mkevolve swap" ("" : the search)
  Meta meta{};
  static constexpr auto fields() {
    return std::tuple{
        field("name", &Swap::name),
        field("from", &Swap::from),
        field("to", &Swap::to),
        field("speedup_before", &Swap::speedup_before),
        field("speedup_after", &Swap::speedup_after),
        field("triggered", &Swap::triggered, When::kIfSet),
        field("tau", &Swap::tau, When::kIfSet),
        field("correct", &Swap::correct, When::kIfSet),
        field("contains_pytorch_subkernels", &Swap::contains_pytorch_subkernels, When::kIfSet),
        field("local", &Swap::local, When::kIfSet),
        field("e2e", &Swap::e2e, When::kIfSet),
        field("by", &Swap::by, When::kIfSet),
        field("subkernel_speedup", &Swap::subkernel_speedup, When::kIfSet)};
  }
  MK_RECORD_JSON(Swap)
  /// subkernel_speedup: written (null when unknown) only for the search's swaps.
  void finish_json(nlohmann::json& j) const;
};

/// postfuse: one PostFuse outcome.
struct Postfuse {
  static constexpr const char* kType = "postfuse";
  int attempt = 0;                            ///< the calls it took (0: skipped)
  std::string status{};                       ///< skipped, accepted, not accepted
  std::optional<double> speedup_compile{};    ///< the fused kernel's, when correct
  std::optional<bool> accepted{};
  std::optional<double> modular_speedup{};    ///< the modular solution it had to beat
  std::string detail{};                       ///< skipped: why
  Meta meta{};
  static constexpr auto fields() {
    return std::tuple{
        field("attempt", &Postfuse::attempt),
        field("status", &Postfuse::status),
        field("speedup_compile", &Postfuse::speedup_compile),
        field("accepted", &Postfuse::accepted, When::kIfSet),
        field("modular_speedup", &Postfuse::modular_speedup, When::kIfSet),
        field("detail", &Postfuse::detail, When::kIfSet)};
  }
  MK_RECORD_JSON(Postfuse)
};

/// run_start: the search begins. settings holds T, L, budget_per_iter,
/// beam_width and any other knob worth seeing in the report; budgets, when set,
/// are settings.max_calls (LLM calls) and settings.token_budget (tokens).
struct RunStart {
  static constexpr const char* kType = "run_start";
  std::string method{}, problem{};
  nlohmann::json settings = nlohmann::json::object();
  std::string problem_hash{};
  nlohmann::json options{};       ///< every search option (search::to_json(SearchOptions))
  std::string prompts_version{};
  std::optional<std::string> llm{}, judge{};  ///< the provider specs (judge "" : none)
  nlohmann::json hardware{};
  Meta meta{};
  static constexpr auto fields() {
    return std::tuple{
        field("method", &RunStart::method),
        field("problem", &RunStart::problem),
        field("settings", &RunStart::settings, When::kIfObject),
        field("problem_hash", &RunStart::problem_hash, When::kIfSet),
        field("options", &RunStart::options, When::kIfSet),
        field("prompts_version", &RunStart::prompts_version, When::kIfSet),
        field("llm", &RunStart::llm, When::kIfSet),
        field("judge", &RunStart::judge, When::kIfSet),
        field("hardware", &RunStart::hardware, When::kIfSet)};
  }
  MK_RECORD_JSON(RunStart)
  /// settings is always written, {} when none.
  void finish_json(nlohmann::json& j) const;
};

/// resume: a run was reopened; events_before is how many events it had.
/// llm_changes: what --allow-llm-change let this resume use instead of what the
/// run started with (empty: nothing changed).
struct LlmChange {
  std::string flag{}, from{}, to{};
  static constexpr auto fields() {
    return std::tuple{
        field("flag", &LlmChange::flag),
        field("from", &LlmChange::from),
        field("to", &LlmChange::to)};
  }
};
struct Resume {
  static constexpr const char* kType = "resume";
  int64_t events_before = 0;
  std::vector<std::string> notices{};
  std::vector<LlmChange> llm_changes{};
  Meta meta{};
  static constexpr auto fields() {
    return std::tuple{
        field("events_before", &Resume::events_before),
        field("notices", &Resume::notices),
        field("llm_changes", &Resume::llm_changes, When::kIfSet)};
  }
  MK_RECORD_JSON(Resume)
};

/// preflight: a check made before the first paid LLM call. what: "problem"
/// (it loads and its reference runs) or "endpoint" (the LLM answers).
struct Preflight {
  static constexpr const char* kType = "preflight";
  std::string what{};
  bool ok = false;
  double seconds = 0;
  std::string message{};
  Meta meta{};
  static constexpr auto fields() {
    return std::tuple{
        field("what", &Preflight::what),
        field("ok", &Preflight::ok),
        field("seconds", &Preflight::seconds),
        field("message", &Preflight::message)};
  }
  MK_RECORD_JSON(Preflight)
};

/// final_check: the solution about to be returned, evaluated once more with
/// a fresh seed and every check on, just before run_end. passed: it is
/// returned as correct. Failed: the next-best verified solution is checked in
/// its place, and when none passes the run reports no correct kernel. No
/// verdict (status no_verdict: the harness failed, or the cheat judge could
/// not be asked): the solution is returned on its search-time verdict, and
/// every report says so (final_check_outcome).
struct FinalCheck {
  static constexpr const char* kType = "final_check";
  bool passed = false;
  int seed = 0;
  std::string status{}, kind{};
  std::optional<double> speedup_compile{};
  /// --baseline-tf32: against torch.compile with TF32 on (beside the reward's TF32-off figure)
  std::optional<double> speedup_compile_tf32{};
  /// Passed: its own timing (the figure the run reports for the solution it
  /// returns), and the speedup the search measured for the same solution.
  std::optional<double> speedup_eager{}, runtime_ms{}, search_speedup_compile{};
  /// The package was checked in a plain process, each Triton dot naming the
  /// precision it was searched in: {"pinned": [{file, line, what}], "left":
  /// [{file, line, why}], "precision"} (null: not pinned, older logs).
  nlohmann::json precision{};
  /// --shapes check/search: where the solution holds (the verdict's
  /// checks.shapes, eval::ShapesRecord's form); null when not checked.
  nlohmann::json shapes{};
  std::string message{};
  int iteration = 0;  ///< of the solution checked
  int fallback = 0;   ///< 0: the best; k: the k-th next-best verified solution (an earlier best, a runner-up)
  Meta meta{};
  static constexpr auto fields() {
    return std::tuple{
        field("passed", &FinalCheck::passed),
        field("seed", &FinalCheck::seed),
        field("status", &FinalCheck::status),
        field("kind", &FinalCheck::kind),
        field("speedup_compile", &FinalCheck::speedup_compile),
        field("message", &FinalCheck::message),
        field("iteration", &FinalCheck::iteration),
        field("fallback", &FinalCheck::fallback),
        field("speedup_compile_tf32", &FinalCheck::speedup_compile_tf32, When::kIfSet),
        field("speedup_eager", &FinalCheck::speedup_eager, When::kIfSet),
        field("runtime_ms", &FinalCheck::runtime_ms, When::kIfSet),
        field("search_speedup_compile", &FinalCheck::search_speedup_compile, When::kIfSet),
        field("precision", &FinalCheck::precision, When::kIfObject),
        field("shapes", &FinalCheck::shapes, When::kIfObject)};
  }
  MK_RECORD_JSON(FinalCheck)
};

/// What a run's final checks came to, from its final_check events (those
/// after its last resume: a resumed process checks again). The last one
/// decides: it is the one that settled, or the last that failed.
struct FinalCheckOutcome {
  /// passed, no_verdict, failed (a run_end with status finished followed),
  /// incomplete (a check failed and the run has not finished since); "" : none logged
  std::string result{};
  int iteration = 0;     ///< the deciding check's solution's iteration
  int fallback = 0;      ///< 0: the best itself; k: the k-th next-best verified solution
  int seed = 0;
  int failed_before = 0;  ///< solutions that failed it before the deciding one
  std::string status{}, kind{}, message{};  ///< the deciding check's (message: when not passed)
  /// Passed: the check's own measurement of the returned solution, and the
  /// search's figure for it (null in logs written before they were recorded).
  std::optional<double> speedup_compile{}, speedup_eager{}, runtime_ms{}, search_speedup_compile{};
  /// The deciding check's shapes record (null: not checked at shape variants).
  nlohmann::json shapes{};
  /// One line for people ("" when there was no final check).
  std::string text() const;
  nlohmann::json to_json() const;  ///< null when there was no final check
};

/// reply_error: an LLM reply that could not be used (unparseable, or a call
/// that failed); the agent is asked again or the candidate is lost.
struct ReplyError {
  static constexpr const char* kType = "reply_error";
  std::string task{};
  std::string agent{};
  int iteration = 0;
  std::string error{};
  std::string candidate{};  ///< the kernel candidate's id; empty for decompose/split/fuse replies
  Meta meta{};
  static constexpr auto fields() {
    return std::tuple{
        field("task", &ReplyError::task),
        field("agent", &ReplyError::agent),
        field("iteration", &ReplyError::iteration),
        field("error", &ReplyError::error),
        field("candidate", &ReplyError::candidate, When::kIfSet)};
  }
  MK_RECORD_JSON(ReplyError)
};

/// verify_decomposition: one decomposition (or split/fuse) attempt's verdict.
struct VerifyDecomposition {
  static constexpr const char* kType = "verify_decomposition";
  std::string task{};
  std::string agent{};  ///< decompose, split, fuse
  int iteration = 0;
  int sample = 0;
  bool ok = false;
  std::vector<std::string> failures{};
  std::optional<double> seconds{};  ///< how long the check took (absent: not measured)
  /// How far the decomposition's outputs were from the original's (absent:
  /// never compared), and the bound each output was held to: the worker's
  /// {"fraction", "outputs": [{output, dtype, atol, rtol, max_abs_err, max_rel_err, ...}]}.
  std::optional<double> max_abs_err{};
  nlohmann::json tolerance{};
  Meta meta{};
  static constexpr auto fields() {
    return std::tuple{
        field("task", &VerifyDecomposition::task),
        field("agent", &VerifyDecomposition::agent),
        field("iteration", &VerifyDecomposition::iteration),
        field("sample", &VerifyDecomposition::sample),
        field("ok", &VerifyDecomposition::ok),
        field("failures", &VerifyDecomposition::failures),
        field("seconds", &VerifyDecomposition::seconds, When::kIfSet),
        field("max_abs_err", &VerifyDecomposition::max_abs_err, When::kIfSet),
        field("tolerance", &VerifyDecomposition::tolerance, When::kIfObject)};
  }
  MK_RECORD_JSON(VerifyDecomposition)
};

/// judge: the cheat judge's word on a correct candidate. verdict: pass, cheat,
/// unparseable (the reply), or failed (it could not be asked; policy then says
/// whether the candidate was held without a verdict or let pass).
struct Judge {
  static constexpr const char* kType = "judge";
  std::string task{};
  std::string candidate{};
  int iteration = 0;
  std::string verdict{};
  std::string reason{};
  std::string policy{};  ///< hold or pass (kept: after_beam); only when verdict is failed
  /// When it was asked: "" on the candidate's entry into a beam, after_beam
  /// (the second look at a beam's best after its beam search); the final
  /// check's look has candidate "final".
  std::string stage{};
  Meta meta{};
  static constexpr auto fields() {
    return std::tuple{
        field("task", &Judge::task),
        field("candidate", &Judge::candidate),
        field("iteration", &Judge::iteration),
        field("verdict", &Judge::verdict),
        field("reason", &Judge::reason),
        field("policy", &Judge::policy, When::kIfSet),
        field("stage", &Judge::stage, When::kIfSet)};
  }
  MK_RECORD_JSON(Judge)
};

/// reuse (mkevolve adapt): a subproblem of the variant met a verified
/// subkernel of the run it adapts. match: same source, same module, other
/// shapes, or same name (search.h, match_reuse); status/correct: that subkernel re-verified
/// on the variant's subproblem (its eval event follows, agent "reused"). A
/// correct one takes no kernel LLM call: calls_saved is what the earlier run
/// spent on it.
struct ReuseMatch {
  static constexpr const char* kType = "reuse";
  std::string task{};        ///< the variant's subproblem
  std::string from_run{};    ///< the earlier run's directory
  std::string from_task{};   ///< its subproblem
  std::string match{};
  std::string candidate{};
  std::string status{};
  bool correct = false;
  int calls_saved = 0;
  Meta meta{};
  static constexpr auto fields() {
    return std::tuple{
        field("task", &ReuseMatch::task),
        field("from_run", &ReuseMatch::from_run),
        field("from_task", &ReuseMatch::from_task),
        field("match", &ReuseMatch::match),
        field("candidate", &ReuseMatch::candidate),
        field("status", &ReuseMatch::status),
        field("correct", &ReuseMatch::correct),
        field("calls_saved", &ReuseMatch::calls_saved)};
  }
  MK_RECORD_JSON(ReuseMatch)
};

/// composition_failure: every subkernel passed its own checks but the
/// composed solution failed by its own fault (wrong answer, error, timeout,
/// rule violation; never a harness failure). action "back_to_beam": the error
/// points into one subkernel's file, whose kernel was taken out of its beam's
/// correct members and goes back to it with this error as feedback;
/// "total_fuse": it points nowhere, so the next iteration works on the whole
/// problem (TotalFuse, its topology event follows).
struct CompositionFailure {
  static constexpr const char* kType = "composition_failure";
  int iteration = 0;
  std::string task{};       ///< the subproblem blamed ("" : none)
  std::string candidate{};  ///< its kernel that failed in place ("" : none)
  std::string status{}, kind{};
  std::string message{};    ///< the composition's error, trimmed
  std::string action{};     ///< back_to_beam, total_fuse
  Meta meta{};
  static constexpr auto fields() {
    return std::tuple{
        field("iteration", &CompositionFailure::iteration),
        field("task", &CompositionFailure::task),
        field("candidate", &CompositionFailure::candidate),
        field("status", &CompositionFailure::status),
        field("kind", &CompositionFailure::kind),
        field("message", &CompositionFailure::message),
        field("action", &CompositionFailure::action)};
  }
  MK_RECORD_JSON(CompositionFailure)
};

/// budget: AllocateLLMBudget's split of one iteration's calls. rule: even
/// (some subproblem has no correct kernel yet) or runtime.
struct Budget {
  static constexpr const char* kType = "budget";
  int iteration = 0;
  std::vector<std::pair<std::string, int>> allocation{};  ///< subproblem -> calls (parsed back: by name)
  std::string rule{};
  Meta meta{};
  static constexpr auto fields() {
    return std::tuple{
        field("iteration", &Budget::iteration),
        field("allocation", &Budget::allocation),
        field("rule", &Budget::rule)};
  }
  MK_RECORD_JSON(Budget)
};

/// swap_skipped: Swap did not trigger, and why.
struct SwapSkipped {
  static constexpr const char* kType = "swap_skipped";
  std::optional<double> tau{};
  std::string reason{};
  Meta meta{};
  static constexpr auto fields() {
    return std::tuple{
        field("tau", &SwapSkipped::tau),
        field("reason", &SwapSkipped::reason)};
  }
  MK_RECORD_JSON(SwapSkipped)
};

/// swap_rejected: a swap was tried and not taken (the solution is unchanged):
/// by the search (tau set, several replacements) or by `mkevolve swap` (one
/// replacement, with the failing check's verdict in result). One shape; the
/// reader also takes the older one of `mkevolve swap` (name, to).
struct SwapReplacement {
  std::string name{};
  std::string with{};                ///< pytorch, "user kernel", or the replacement file
  std::optional<double> speedup{};   ///< the replaced subkernel's own speedup vs torch.compile
  static constexpr auto fields() {
    return std::tuple{
        field("name", &SwapReplacement::name),
        field("with", &SwapReplacement::with),
        field("speedup", &SwapReplacement::speedup)};
  }
};
struct SwapRejected {
  static constexpr const char* kType = "swap_rejected";
  std::vector<SwapReplacement> replaced{};
  std::optional<double> tau{};
  std::optional<double> speedup_before{}, speedup_after{};  ///< end to end, vs torch.compile
  std::string reason{};
  nlohmann::json result{};  ///< the failing check's verdict summary (mkevolve swap); null otherwise
  Meta meta{};
  static constexpr auto fields() {
    return std::tuple{
        field("replaced", &SwapRejected::replaced),
        field("tau", &SwapRejected::tau),
        field("speedup_before", &SwapRejected::speedup_before),
        field("speedup_after", &SwapRejected::speedup_after),
        field("reason", &SwapRejected::reason),
        field("result", &SwapRejected::result, When::kIfSet)};
  }
  MK_RECORD_JSON(SwapRejected)
  /// The older shape of `mkevolve swap` (name, to) reads into replaced.
  static nlohmann::json finish_read(const nlohmann::json& j, SwapRejected& r);
};

/// run_end: the run stopped. status: finished, interrupted, failed.
struct RunEnd {
  static constexpr const char* kType = "run_end";
  std::string status{};  ///< finished, interrupted, failed
  std::optional<double> best_speedup_compile{};
  std::string solution_dir{};
  std::string message{};
  std::string result{};  ///< the search's own word: ok, no_correct, interrupted, error ("" : not said)
  std::optional<bool> correct{}, contains_pytorch_subkernels{};
  nlohmann::json solution{};    ///< the best solution's summary (null: none)
  nlohmann::json accounting{};  ///< the search's LLM accounting (null: none)
  Meta meta{};
  static constexpr auto fields() {
    return std::tuple{
        field("status", &RunEnd::status),
        field("best_speedup_compile", &RunEnd::best_speedup_compile),
        field("solution_dir", &RunEnd::solution_dir),
        field("message", &RunEnd::message),
        field("result", &RunEnd::result, When::kIfSet),
        field("correct", &RunEnd::correct, When::kIfSet),
        field("contains_pytorch_subkernels", &RunEnd::contains_pytorch_subkernels, When::kIfSet),
        field("solution", &RunEnd::solution, When::kIfSet),
        field("accounting", &RunEnd::accounting, When::kIfSet)};
  }
  MK_RECORD_JSON(RunEnd)
};

/// Live progress (search::EventSink::progress), for the status line and
/// --events-json; never logged.
struct LlmStart {
  static constexpr const char* kType = "llm_start";
  static constexpr bool kUnversioned = true;
  std::string agent{}, task{};
  int sample = 0;
  Meta meta{};
  static constexpr auto fields() {
    return std::tuple{field("agent", &LlmStart::agent), field("task", &LlmStart::task),
                      field("sample", &LlmStart::sample)};
  }
  MK_RECORD_JSON(LlmStart)
};
/// An LLM call ended: the durable llm_call record under its own type (the
/// status line counts the llm_call record, logged later with its job's events).
struct LlmDone : LlmCall {
  static constexpr const char* kType = "llm_done";
  LlmDone() = default;
  explicit LlmDone(LlmCall c) : LlmCall(std::move(c)) {}
  MK_RECORD_JSON(LlmDone)
};
struct EvalStart {
  static constexpr const char* kType = "eval_start";
  static constexpr bool kUnversioned = true;
  std::string task{};
  Meta meta{};
  static constexpr auto fields() { return std::tuple{field("task", &EvalStart::task)}; }
  MK_RECORD_JSON(EvalStart)
};
struct EvalDone {
  static constexpr const char* kType = "eval_done";
  static constexpr bool kUnversioned = true;
  std::string status{};
  Meta meta{};
  static constexpr auto fields() { return std::tuple{field("status", &EvalDone::status)}; }
  MK_RECORD_JSON(EvalDone)
};

/// A record whose type this build does not know (a newer writer's), or that
/// is no record at all (not an object, no string "type"): kept whole.
struct UnknownRecord {
  std::string type{};  ///< "" when it has none
  nlohmann::json json{};
};

/// Every record of the log and every progress event, parsed once by its
/// "type" (parse_event); readers std::visit it instead of trying one parser
/// after another.
using Event = std::variant<UnknownRecord, RunStart, Resume, Preflight, LlmCall, ReplyError, VerifyDecomposition,
                           TopologyChange, Budget, Eval, Judge, ReuseMatch, CompositionFailure, Iteration, Best, Swap,
                           SwapSkipped, SwapRejected, Postfuse, FinalCheck, RunEnd, LlmStart, LlmDone, EvalStart,
                           EvalDone>;

/// The record j holds, by its "type" (UnknownRecord for any other).
Event parse_event(const nlohmann::json& j);
/// Its JSON form (an UnknownRecord's JSON as it was read).
nlohmann::json to_json(const Event& e);
/// Its "type" ("" for an UnknownRecord without one).
std::string type_of(const Event& e);
/// The meta of a typed record (nullptr for an UnknownRecord).
const Meta* meta_of(const Event& e);
/// Its type, seq and ts, as Envelope::from_json reads them from its line
/// (nullopt for a record without a type).
std::optional<Envelope> envelope_of(const Event& e);
/// Sets the log's place and time on a record (RunDir::log_event): its meta,
/// or for a record of an unknown type, its JSON's "seq" and "ts".
void stamp(Event& e, int64_t seq, const std::string& ts);

/// A run's log (or a part of it), each record parsed once by its type; every
/// reader of the log folds this.
using Log = std::vector<Event>;
/// The records of the log's lines, in order.
Log parse_log(const std::vector<nlohmann::json>& lines);

/// What the run's final checks came to: the deciding check since the last resume.
FinalCheckOutcome final_check_outcome(const Log& events);

/// For std::visit with one lambda per record type: `std::visit(Visit{...}, event)`.
template <class... F>
struct Visit : F... {
  using F::operator()...;
};
template <class... F>
Visit(F...) -> Visit<F...>;

}  // namespace mk::records
