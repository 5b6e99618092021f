// The agents: one prompt each (decompose, generate, debug, optimize, split,
// fuse, postfuse, judge), a call through llm::Provider, and a parsed reply.
// Agents make single calls; the retry policies (re-ask on a parse error,
// retry on verification feedback, how calls count against budgets) belong to
// search/, which knows the budgets.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agents/prompts.h"
#include "eval/evaluator.h"
#include "llm/provider.h"
#include "problem/problem.h"

namespace mk::agents {

/// A conversation to send: system prompt plus messages (ending with a user turn).
struct Conversation {
  std::string system;
  std::vector<llm::Message> messages;
  static Conversation from(const RenderedPrompt& p);
  /// The conversation continued: the assistant's reply, then a new user turn.
  Conversation followed_by(const std::string& assistant, const std::string& user) const;
};

/// Bounds how many LLM calls are in flight at once (on top of whatever cap the
/// provider stack enforces), so a wide search does not start hundreds of threads' calls.
class Gate {
 public:
  explicit Gate(int slots) : free_(slots < 1 ? 1 : slots) {}
  void acquire();
  void release();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;
};

/// One LLM call's outcome, as logged in llm_call events.
struct CallRecord {
  std::string agent, task;
  int sample = 0;
  bool ok = false;
  std::string error;                 ///< one line when !ok
  bool fatal = false;                ///< auth/config/unmatched replay/unreachable endpoint: stop the run
  bool cancelled = false;            ///< the provider gave up because the run is being interrupted
  llm::Usage usage;
  bool from_cache = false;
  bool truncated = false;
  std::string model;
  /// From the request to the reply, once a place under the Gate was had (the
  /// provider stack's retries and concurrency waits included).
  double latency_s = 0;
  nlohmann::json to_json() const;
};

struct Exchange {
  std::string reply;   ///< empty when the call failed
  CallRecord call;
};

/// Sends conv as a Request with agent/task/sample set. Never throws.
Exchange call_llm(llm::Provider& llm, const Conversation& conv, const std::string& agent,
                  const std::string& task, int sample, Gate* gate = nullptr, int max_tokens = 16384,
                  const std::string& reasoning_effort = "");

/// Concise feedback for the LLM: status, kind, reasons, trimmed message, first
/// mismatch, speedups against torch.compile and eager. Never whole logs.
std::string eval_feedback(const eval::Verdict& r);

/// Hardware facts for kernel prompts, from Evaluator::hardware_info(); says so
/// when the evaluator could not tell.
std::string hardware_text(const nlohmann::json& info);

/// Keeps the first `head` and last `tail` lines and at most max_chars.
std::string trim_text(const std::string& s, size_t head, size_t tail, size_t max_chars);

/// Prompt builders. Each renders its template; errors are template errors.
struct KernelContext {
  const Prompts* prompts = nullptr;
  std::string hardware;  ///< hardware_text(...)
  std::string gpu_name;  ///< for the optimize prompt's roofline block (eval/roofline.h); empty: none
  std::string shapes;    ///< shapes_text(...) of the run's --shapes; empty: nothing said
};
/// The kernel prompts' `shapes` block: the shapes a kernel is checked at under
/// a run's --shapes mode (eval/shapes.h), and whether they are fixed.
std::string shapes_text(const std::string& mode);
/// previous: an earlier decomposition of a module this one is a variant of
/// (mkevolve adapt), in the prompt's file format; empty for a plain decompose.
Result<Conversation> decompose_prompt(const Prompts& p, const problem::Problem& problem,
                                      const std::string& previous = {});
/// The kernel prompts' `inputs` block: how the kernel's inputs arrive and are
/// checked, from the layouts the top level passes them in
/// (eval::EvalOptions::input_layouts; null: contiguous, and "" is returned).
std::string inputs_text(const nlohmann::json& input_layouts);
/// inputs: inputs_text(...) of the task ("" : nothing to say).
Result<Conversation> generate_prompt(const KernelContext& k, const std::string& problem_source,
                                     const std::string& inputs = "");
Result<Conversation> debug_prompt(const KernelContext& k, const std::string& problem_source,
                                  const std::string& kernel, const eval::Verdict& result,
                                  const std::string& inputs = "");
Result<Conversation> optimize_prompt(const KernelContext& k, const std::string& problem_source,
                                     const std::string& kernel, const eval::Verdict& result,
                                     const std::string& inputs = "");
/// failing: subproblem name -> what went wrong with its best kernel.
Result<Conversation> split_prompt(const Prompts& p, const problem::Problem& problem, const problem::Topology& topo,
                                  const std::map<std::string, std::string>& failing);
/// status: one line per subproblem (speedup, share of end-to-end time).
Result<Conversation> fuse_prompt(const Prompts& p, const problem::Problem& problem, const problem::Topology& topo,
                                 const std::string& status_table);
Result<Conversation> postfuse_prompt(const KernelContext& k, const problem::Problem& problem,
                                     const problem::Topology& topo, const std::map<std::string, std::string>& kernels,
                                     double speedup);
Result<Conversation> judge_prompt(const Prompts& p, const std::string& problem_source, const std::string& kernel);

/// User turns that continue a conversation.
Result<std::string> reask_message(const Prompts& p, const std::string& error, const std::string& format_hint);
Result<std::string> decompose_feedback_message(const Prompts& p, const std::vector<std::string>& failures,
                                               const std::string& feedback);
Result<std::string> refine_feedback_message(const Prompts& p, const std::vector<std::string>& failures,
                                            const std::string& feedback);

}  // namespace mk::agents
