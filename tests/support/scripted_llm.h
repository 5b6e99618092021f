// A Provider that answers from a script, for driving the search in tests
// through the real llm::Provider interface. Rules match on agent, task,
// sample and a substring of the last user message; the first matching rule
// (in the order added) answers. An unmatched request is an error naming it,
// like the replay provider's.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "llm/provider.h"

namespace mk::testing {

class ScriptedLlm : public llm::Provider {
 public:
  using Responder = std::function<std::optional<std::string>(const llm::Request&)>;

  /// Any request from `agent` ("*" = any) for `task` ("*" = any).
  ScriptedLlm& on(const std::string& agent, const std::string& reply) { return on(agent, "*", reply); }
  ScriptedLlm& on(const std::string& agent, const std::string& task, const std::string& reply);
  /// Only the request with this sample index.
  ScriptedLlm& on_sample(const std::string& agent, const std::string& task, int sample, const std::string& reply);
  /// Requests whose last user message contains `needle`.
  ScriptedLlm& on_contains(const std::string& agent, const std::string& needle, const std::string& reply);
  /// Anything else: a function that may decline with nullopt.
  ScriptedLlm& when(Responder fn);
  /// Fail every call of `agent` with this error kind, as the real stack hands
  /// it on after its retries: a network error, timeout or HTTP error is still
  /// marked retryable (transient, the retries ran out) unless `final` says the
  /// endpoint cannot be reached at all (refused, no such host: never retried).
  ScriptedLlm& fail(const std::string& agent, llm::LlmError::Kind kind, const std::string& message,
                    bool final = false);

  std::string spec() const override { return "scripted:test"; }
  llm::Reply complete(const llm::Request& req) override;

  std::vector<llm::Request> requests() const;
  int count(const std::string& agent) const;
  int max_in_flight() const { return max_in_flight_; }

 private:
  struct Rule {
    std::string agent = "*", task = "*", contains;
    int sample = -1;
    std::string reply;
    Responder fn;
    std::optional<llm::LlmError> error;
  };
  mutable std::mutex mu_;
  std::vector<Rule> rules_;
  std::vector<llm::Request> log_;
  int in_flight_ = 0, max_in_flight_ = 0;
};

/// A reply carrying one kernel file whose first line is `# FAKE: <marker>`
/// (read by FakeEvaluator), e.g. kernel_reply("correct speedup=1.3").
std::string kernel_reply(const std::string& marker, const std::string& extra = "");

/// A reply carrying files (path -> source) as tagged fenced blocks.
std::string files_reply(const std::map<std::string, std::string>& files);

}  // namespace mk::testing
