#include "run/events.h"

namespace mk::run::events {

namespace {
nlohmann::json opt(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }
}  // namespace

nlohmann::json run_start(const std::string& method, const std::string& problem, const nlohmann::json& settings) {
  return {{"type", kRunStart}, {"method", method}, {"problem", problem},
          {"settings", settings.is_null() ? nlohmann::json::object() : settings}};
}

nlohmann::json resume(int64_t events_before, const std::vector<std::string>& notices,
                      const nlohmann::json& llm_changes) {
  nlohmann::json e = {{"type", kResume}, {"events_before", events_before}, {"notices", notices}};
  if (llm_changes.is_array() && !llm_changes.empty()) e["llm_changes"] = llm_changes;
  return e;
}

nlohmann::json preflight(const std::string& what, bool ok, double seconds, const std::string& message) {
  return {{"type", kPreflight}, {"what", what}, {"ok", ok}, {"seconds", seconds}, {"message", message}};
}

nlohmann::json final_check(bool passed, int seed, const std::string& status, const std::string& kind,
                           std::optional<double> speedup_compile, const std::string& message) {
  return {{"type", kFinalCheck},
          {"passed", passed},
          {"seed", seed},
          {"status", status},
          {"kind", kind},
          {"speedup_compile", speedup_compile ? nlohmann::json(*speedup_compile) : nlohmann::json()},
          {"message", message}};
}

nlohmann::json llm_call(const LlmCall& c) {
  nlohmann::json j = {{"type", kLlmCall},
                      {"agent", c.agent},
                      {"task", c.task},
                      {"usage",
                       {{"input", c.usage.input},
                        {"output", c.usage.output},
                        {"cache_read", c.usage.cache_read},
                        {"cache_write", c.usage.cache_write},
                        {"estimated", c.usage.estimated}}},
                      {"cached", c.cached},
                      {"truncated", c.truncated},
                      {"latency_ms", c.latency_ms},
                      {"ok", c.ok}};
  if (!c.ok || !c.error.empty()) j["error"] = c.error;
  return j;
}

nlohmann::json eval(const Eval& e) {
  nlohmann::json j = {{"type", kEval},
                      {"task", e.task},
                      {"candidate", e.candidate},
                      {"status", e.status},
                      {"kind", e.kind},
                      {"speedup_compile", opt(e.speedup_compile)},
                      {"speedup_eager", opt(e.speedup_eager)},
                      {"runtime_ms", opt(e.runtime_ms)},
                      {"uses_pytorch", e.uses_pytorch}};
  if (e.e2e) j["e2e"] = true;
  return j;
}

nlohmann::json topology(const Topology& t) {
  nlohmann::json subs = nlohmann::json::array();
  for (const auto& s : t.subproblems) subs.push_back({{"name", s.name}, {"status", s.status}});
  nlohmann::json j = {{"type", kTopology}, {"iteration", t.iteration}, {"change", t.change},
                      {"subproblems", subs}, {"detail", t.detail}};
  if (!t.from.empty()) j["from"] = t.from;
  if (!t.into.empty()) j["into"] = t.into;
  return j;
}

nlohmann::json iteration(const Iteration& it) {
  nlohmann::json subs = nlohmann::json::array();
  for (const auto& s : it.subkernels) {
    nlohmann::json sj = {{"name", s.name},
                         {"correct", s.correct},
                         {"speedup_compile", opt(s.speedup_compile)},
                         {"runtime_ms", opt(s.runtime_ms)},
                         {"share", opt(s.share)}};
    if (s.uses_pytorch) sj["uses_pytorch"] = true;
    subs.push_back(std::move(sj));
  }
  return {{"type", kIteration},
          {"t", it.t},
          {"e2e",
           {{"status", it.e2e.status},
            {"speedup_compile", opt(it.e2e.speedup_compile)},
            {"speedup_eager", opt(it.e2e.speedup_eager)},
            {"runtime_ms", opt(it.e2e.runtime_ms)}}},
          {"subkernels", subs},
          {"calls_used", it.calls_used},
          {"tokens", it.tokens}};
}

nlohmann::json best(int t, double speedup_compile) {
  return {{"type", kBest}, {"t", t}, {"speedup_compile", speedup_compile}};
}

nlohmann::json swap(const Swap& s) {
  return {{"type", kSwap},
          {"name", s.name},
          {"from", s.from},
          {"to", s.to},
          {"speedup_before", opt(s.speedup_before)},
          {"speedup_after", opt(s.speedup_after)}};
}

nlohmann::json postfuse(int attempt, const std::string& status, std::optional<double> speedup_compile) {
  return {{"type", kPostfuse}, {"attempt", attempt}, {"status", status}, {"speedup_compile", opt(speedup_compile)}};
}

nlohmann::json run_end(const RunEnd& e) {
  return {{"type", kRunEnd},
          {"status", e.status},
          {"best_speedup_compile", opt(e.best_speedup_compile)},
          {"solution_dir", e.solution_dir},
          {"message", e.message}};
}

}  // namespace mk::run::events
