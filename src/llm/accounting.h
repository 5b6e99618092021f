// Token and cost accounting: per request, per agent, per task and in total.
// Thread-safe. A listener sees every call as it finishes (the run log records
// them); events never hold prompt text, replies or keys.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm/provider.h"
#include "util/result.h"

namespace mk {
class Config;
}

namespace mk::llm {

/// US dollars per million tokens.
struct Prices {
  double input = 0, output = 0, cache_read = 0, cache_write = 0;
  double cost(const Usage& u) const {
    return (input * u.input + output * u.output + cache_read * u.cache_read + cache_write * u.cache_write) / 1e6;
  }
};

/// Reads [llm.prices."SPEC-or-MODEL"] tables {input, output, cache_read, cache_write}.
/// cache_read defaults to input/10 and cache_write to input*1.25 when left out.
Result<std::map<std::string, Prices>> prices_from_config(const Config& cfg);

/// One finished call (after retries; cache hits included).
struct CallEvent {
  std::string spec;          ///< provider spec, e.g. "anthropic:claude-sonnet-4-5"
  std::string model;         ///< as the provider reported it
  std::string agent, task;
  int sample = 0;
  Usage usage;               ///< what this call cost: zero for cache hits
  bool cached = false;       ///< served from the response cache
  bool ok = true;
  std::string error;         ///< one line, redacted, when !ok
  bool truncated = false;
  double latency_s = 0;
  std::optional<double> cost_usd;  ///< when a price is known
  nlohmann::json to_json() const;
};

struct Tally {
  int64_t calls = 0, cached_calls = 0, errors = 0, truncated = 0;
  Usage usage;
  double cost_usd = 0;
  bool cost_complete = true;  ///< false when some call had no price
  double latency_s = 0;       ///< summed
  void add(const CallEvent& e);
  nlohmann::json to_json() const;
  static Tally from_json(const nlohmann::json& j);
};

class Accounting {
 public:
  using Listener = std::function<void(const CallEvent&)>;

  /// Prices keyed by provider spec ("openai:gpt-4o") or bare model ("gpt-4o").
  void set_prices(std::map<std::string, Prices> prices);
  bool has_prices() const;
  /// Called after each record(), outside the lock, on the calling thread.
  void set_listener(Listener fn);

  /// Fills cost_usd from the price table, adds the call to every tally, calls the listener.
  void record(CallEvent e);

  Tally total() const;
  std::map<std::string, Tally> by_agent() const;
  std::map<std::string, Tally> by_task() const;
  std::vector<CallEvent> calls() const;  ///< per request, in completion order

  /// {"total": Tally, "by_agent": {...}, "by_task": {...}, "calls": [CallEvent...]}
  nlohmann::json to_json(bool include_calls = true) const;
  /// Adds the tallies (and calls) of an earlier to_json(), e.g. when a run resumes.
  Status merge_json(const nlohmann::json& j);

 private:
  std::optional<Prices> price_for(const std::string& spec, const std::string& model) const;
  mutable std::mutex mu_;
  std::map<std::string, Prices> prices_;
  Listener listener_;
  Tally total_;
  std::map<std::string, Tally> by_agent_, by_task_;
  std::vector<CallEvent> calls_;
};

}  // namespace mk::llm
