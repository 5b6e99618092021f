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

#include <nlohmann/json.hpp>

namespace mk::run::events {

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

/// run_start: the search begins. settings holds T, L, budget_per_iter,
/// beam_width and any other knob worth seeing in the report; budgets, when set,
/// are settings.max_calls (LLM calls) and settings.token_budget (tokens).
nlohmann::json run_start(const std::string& method, const std::string& problem, const nlohmann::json& settings);

/// resume: a run was reopened; events_before is how many events it had.
/// llm_changes: what --allow-llm-change let this resume use instead of what the
/// run started with, [{flag, from, to}] (empty: nothing changed).
nlohmann::json resume(int64_t events_before, const std::vector<std::string>& notices,
                      const nlohmann::json& llm_changes = nlohmann::json::array());

/// preflight: a check made before the first paid LLM call. what: "problem"
/// (it loads and its reference runs) or "endpoint" (the LLM answers).
nlohmann::json preflight(const std::string& what, bool ok, double seconds, const std::string& message);

/// final_check: the solution about to be returned, evaluated once more with
/// a fresh seed and every check on, just before run_end. passed: it is
/// returned as correct; otherwise the run reports no correct kernel.
nlohmann::json final_check(bool passed, int seed, const std::string& status, const std::string& kind,
                           std::optional<double> speedup_compile, const std::string& message);

/// Token counts of one LLM call (mirrors llm::Usage without depending on llm/).
struct TokenUsage {
  int64_t input = 0, output = 0, cache_read = 0, cache_write = 0;
  bool estimated = false;
  int64_t total() const { return input + output + cache_read + cache_write; }
};

struct LlmCall {
  std::string agent{};   ///< decompose, generate, debug, optimize, split, fuse, postfuse, judge
  std::string task{};    ///< the problem or subproblem the call works on
  TokenUsage usage{};
  bool cached = false;     ///< served from the response cache (cost nothing this time)
  bool truncated = false;  ///< the reply hit the token limit
  /// From the request to the reply as the search saw it (the provider's
  /// retries and its --llm-concurrency waits included; a cache hit is fast).
  int64_t latency_ms = 0;
  bool ok = true;
  std::string error{};       ///< when !ok: one line (no secrets)
  /// The dependent step of the call's chain (critical_path.h): the
  /// decomposition round, the split/fuse try, or the beam round of its task in
  /// its iteration (0, 1, ...); absent in logs written before it existed.
  std::optional<int> round{};
  /// The kernel candidate the call wrote or judged (kernel agents and judge).
  std::string candidate{};
};
nlohmann::json llm_call(const LlmCall& c);

/// The agents whose calls the kernel budget counts: generate, debug, optimize,
/// postfuse (decompose, split, fuse and judge calls are outside it).
inline bool is_kernel_agent(std::string_view agent) {
  return agent == "generate" || agent == "debug" || agent == "optimize" || agent == "postfuse";
}

struct Eval {
  std::string task{};        ///< subproblem name, or the problem for end-to-end evaluations
  std::string candidate{};   ///< candidate id (its directory under candidates/<task>/)
  std::string status{};      ///< correct, incorrect, cheating, compile_error, runtime_error, timeout, crashed
  std::string kind{};        ///< finer cause (mismatch, oom, ...); empty when correct
  std::optional<double> speedup_compile{}, speedup_eager{}, runtime_ms{};
  bool uses_pytorch = false;  ///< the candidate calls PyTorch ops for part of its work
  bool e2e = false;           ///< an end-to-end evaluation of the composed module
  /// Seconds waiting for an evaluation slot, evaluating (baselines measured
  /// for it included), and of that the baselines; absent when not measured
  /// (a cached verdict, an evaluator that does not time itself).
  std::optional<double> queued_s{}, eval_s{}, baseline_s{};
};
nlohmann::json eval(const Eval& e);

/// One subproblem in a topology: status new (no kernel yet), correct or failing.
struct TopologyEntry {
  std::string name{};
  std::string status{};
};
struct Topology {
  int iteration = 0;
  std::string change{};                 ///< initial, split, fuse, totalfuse, fallback, unchanged
  std::vector<TopologyEntry> subproblems{};
  std::string detail{};                 ///< one line for people: "split 4 into 4a, 4b"
  std::vector<std::string> from{}, into{};  ///< for split/fuse: the subproblems replaced and their replacements
};
nlohmann::json topology(const Topology& t);

struct E2E {
  std::string status{};  ///< correct, incorrect, ... or "skipped" when not every subkernel was correct
  std::optional<double> speedup_compile{}, speedup_eager{}, runtime_ms{};
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
};
struct Iteration {
  int t = 0;
  E2E e2e{};
  std::vector<SubkernelSummary> subkernels{};
  int64_t calls_used = 0;  ///< LLM calls so far (cumulative)
  int64_t tokens = 0;      ///< tokens so far (cumulative)
};
nlohmann::json iteration(const Iteration& it);

nlohmann::json best(int t, double speedup_compile);

struct Swap {
  std::string name{};   ///< the subkernel replaced
  std::string from{};   ///< what was there (candidate id, file or "pytorch")
  std::string to{};     ///< what replaced it (file, candidate id or "pytorch")
  std::optional<double> speedup_before{}, speedup_after{};  ///< end-to-end, vs torch.compile
};
nlohmann::json swap(const Swap& s);

nlohmann::json postfuse(int attempt, const std::string& status, std::optional<double> speedup_compile);

/// reply_error: an LLM reply that could not be used (unparseable, or a call
/// that failed); the agent is asked again or the candidate is lost.
struct ReplyError {
  std::string task{};
  std::string agent{};
  int iteration = 0;
  std::string error{};
  std::string candidate{};  ///< the kernel candidate's id; empty for decompose/split/fuse replies
};
nlohmann::json reply_error(const ReplyError& e);
std::optional<ReplyError> parse_reply_error(const nlohmann::json& j);

/// verify_decomposition: one decomposition (or split/fuse) attempt's verdict.
struct VerifyDecomposition {
  std::string task{};
  std::string agent{};  ///< decompose, split, fuse
  int iteration = 0;
  int sample = 0;
  bool ok = false;
  std::vector<std::string> failures{};
  std::optional<double> seconds{};  ///< how long the check took (absent: not measured)
};
nlohmann::json verify_decomposition(const VerifyDecomposition& v);
std::optional<VerifyDecomposition> parse_verify_decomposition(const nlohmann::json& j);

/// judge: the cheat judge's word on a correct candidate. verdict: pass, cheat,
/// unparseable (the reply), or failed (it could not be asked; policy then says
/// whether the candidate was held without a verdict or let pass).
struct Judge {
  std::string task{};
  std::string candidate{};
  int iteration = 0;
  std::string verdict{};
  std::string reason{};
  std::string policy{};  ///< hold or pass; only when verdict is failed
};
nlohmann::json judge(const Judge& j);
std::optional<Judge> parse_judge(const nlohmann::json& j);

/// reuse (mkevolve adapt): a subproblem of the variant met a verified
/// subkernel of the run it adapts. match: same source, same module, other
/// shapes, or same name (search.h, match_reuse); status/correct: that subkernel re-verified
/// on the variant's subproblem (its eval event follows, agent "reused"). A
/// correct one takes no kernel LLM call: calls_saved is what the earlier run
/// spent on it.
struct Reuse {
  std::string task{};        ///< the variant's subproblem
  std::string from_run{};    ///< the earlier run's directory
  std::string from_task{};   ///< its subproblem
  std::string match{};
  std::string candidate{};
  std::string status{};
  bool correct = false;
  int calls_saved = 0;
};
nlohmann::json reuse(const Reuse& r);
std::optional<Reuse> parse_reuse(const nlohmann::json& j);

/// budget: AllocateLLMBudget's split of one iteration's calls. rule: even
/// (some subproblem has no correct kernel yet) or runtime.
struct Budget {
  int iteration = 0;
  std::vector<std::pair<std::string, int>> allocation{};  ///< subproblem -> calls (parsed back: by name)
  std::string rule{};
};
nlohmann::json budget(const Budget& b);
std::optional<Budget> parse_budget(const nlohmann::json& j);

/// swap_skipped: Swap did not trigger, and why.
nlohmann::json swap_skipped(double tau, const std::string& reason);

/// swap_rejected: a swap was tried and not taken (the solution is unchanged):
/// by the search (tau set, several replacements) or by `mkevolve swap` (one
/// replacement, with the failing check's verdict in result).
struct SwapReplacement {
  std::string name{};
  std::string with{};                ///< pytorch, "user kernel", or the replacement file
  std::optional<double> speedup{};   ///< the replaced subkernel's own speedup vs torch.compile
};
struct SwapRejected {
  std::vector<SwapReplacement> replaced{};
  std::optional<double> tau{};
  std::optional<double> speedup_before{}, speedup_after{};  ///< end to end, vs torch.compile
  std::string reason{};
  nlohmann::json result{};  ///< the failing check's verdict summary (mkevolve swap); null otherwise
};
nlohmann::json swap_rejected(const SwapRejected& r);
std::optional<SwapRejected> parse_swap_rejected(const nlohmann::json& j);

struct RunEnd {
  std::string status{};  ///< finished, interrupted, failed
  std::optional<double> best_speedup_compile{};
  std::string solution_dir{};
  std::string message{};
};
nlohmann::json run_end(const RunEnd& e);

}  // namespace mk::run::events
