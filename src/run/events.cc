#include "run/events.h"

#include "util/json_fields.h"

namespace mk::run::events {

namespace {
nlohmann::json opt(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

bool is_type(const nlohmann::json& j, const char* type) {
  return j.is_object() && j.contains("type") && j["type"].is_string() && j["type"].get<std::string>() == type;
}
int integer(const nlohmann::json& j, const char* key) { return static_cast<int>(fields::integer(j, key)); }
using fields::optnum;
using fields::str;
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
  if (c.round) j["round"] = *c.round;
  if (!c.candidate.empty()) j["candidate"] = c.candidate;
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
  if (e.queued_s) j["queued_s"] = *e.queued_s;
  if (e.eval_s) j["eval_s"] = *e.eval_s;
  if (e.baseline_s) j["baseline_s"] = *e.baseline_s;
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
    if (s.roofline.is_object()) sj["roofline"] = s.roofline;
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

nlohmann::json reply_error(const ReplyError& e) {
  nlohmann::json j = {{"type", kReplyError}, {"task", e.task}, {"agent", e.agent}, {"iteration", e.iteration},
                      {"error", e.error}};
  if (!e.candidate.empty()) j["candidate"] = e.candidate;
  return j;
}

std::optional<ReplyError> parse_reply_error(const nlohmann::json& j) {
  if (!is_type(j, kReplyError)) return std::nullopt;
  return ReplyError{str(j, "task"), str(j, "agent"), integer(j, "iteration"), str(j, "error"), str(j, "candidate")};
}

nlohmann::json verify_decomposition(const VerifyDecomposition& v) {
  nlohmann::json j = {{"type", kVerifyDecomposition}, {"task", v.task}, {"agent", v.agent},
                      {"iteration", v.iteration},     {"sample", v.sample}, {"ok", v.ok},
                      {"failures", v.failures}};
  if (v.seconds) j["seconds"] = *v.seconds;
  return j;
}

std::optional<VerifyDecomposition> parse_verify_decomposition(const nlohmann::json& j) {
  if (!is_type(j, kVerifyDecomposition)) return std::nullopt;
  return VerifyDecomposition{str(j, "task"),         str(j, "agent"),           integer(j, "iteration"),
                             integer(j, "sample"),      fields::boolean(j, "ok"), fields::strings(j, "failures"),
                             optnum(j, "seconds")};
}

nlohmann::json judge(const Judge& j) {
  nlohmann::json e = {{"type", kJudge},       {"task", j.task},       {"candidate", j.candidate},
                      {"iteration", j.iteration}, {"verdict", j.verdict}, {"reason", j.reason}};
  if (!j.policy.empty()) e["policy"] = j.policy;
  return e;
}

nlohmann::json reuse(const Reuse& r) {
  return {{"type", kReuse},          {"task", r.task},       {"from_run", r.from_run},
          {"from_task", r.from_task}, {"match", r.match},     {"candidate", r.candidate},
          {"status", r.status},      {"correct", r.correct}, {"calls_saved", r.calls_saved}};
}

std::optional<Reuse> parse_reuse(const nlohmann::json& j) {
  if (!is_type(j, kReuse)) return std::nullopt;
  return Reuse{str(j, "task"),   str(j, "from_run"),          str(j, "from_task"), str(j, "match"),
               str(j, "candidate"), str(j, "status"), fields::boolean(j, "correct"), integer(j, "calls_saved")};
}

std::optional<Judge> parse_judge(const nlohmann::json& j) {
  if (!is_type(j, kJudge)) return std::nullopt;
  return Judge{str(j, "task"),    str(j, "candidate"), integer(j, "iteration"),
               str(j, "verdict"), str(j, "reason"),    str(j, "policy")};
}

nlohmann::json budget(const Budget& b) {
  nlohmann::json alloc = nlohmann::json::object();
  for (const auto& [name, calls] : b.allocation) alloc[name] = calls;
  return {{"type", kBudget}, {"iteration", b.iteration}, {"allocation", alloc}, {"rule", b.rule}};
}

std::optional<Budget> parse_budget(const nlohmann::json& j) {
  if (!is_type(j, kBudget)) return std::nullopt;
  Budget b{integer(j, "iteration"), {}, str(j, "rule")};
  if (auto a = j.find("allocation"); a != j.end() && a->is_object())
    for (const auto& [name, calls] : a->items())
      if (calls.is_number_integer()) b.allocation.emplace_back(name, calls.get<int>());
  return b;
}

nlohmann::json swap_skipped(double tau, const std::string& reason) {
  return {{"type", kSwapSkipped}, {"tau", tau}, {"reason", reason}};
}

nlohmann::json swap_rejected(const SwapRejected& r) {
  nlohmann::json replaced = nlohmann::json::array();
  for (const auto& x : r.replaced)
    replaced.push_back({{"name", x.name}, {"with", x.with}, {"speedup", opt(x.speedup)}});
  nlohmann::json j = {{"type", kSwapRejected},
                      {"replaced", replaced},
                      {"tau", opt(r.tau)},
                      {"speedup_before", opt(r.speedup_before)},
                      {"speedup_after", opt(r.speedup_after)},
                      {"reason", r.reason}};
  if (!r.result.is_null()) j["result"] = r.result;
  return j;
}

std::optional<SwapRejected> parse_swap_rejected(const nlohmann::json& j) {
  if (!is_type(j, kSwapRejected)) return std::nullopt;
  SwapRejected r;
  if (auto a = j.find("replaced"); a != j.end() && a->is_array()) {
    for (const auto& x : *a)
      if (x.is_object()) r.replaced.push_back({str(x, "name"), str(x, "with"), optnum(x, "speedup")});
  } else if (!str(j, "name").empty()) {
    r.replaced.push_back({str(j, "name"), str(j, "to"), std::nullopt});  // mkevolve swap before one shape
  }
  r.tau = optnum(j, "tau");
  r.speedup_before = optnum(j, "speedup_before");
  r.speedup_after = optnum(j, "speedup_after");
  r.reason = str(j, "reason");
  if (auto res = j.find("result"); res != j.end()) r.result = *res;
  return r;
}

nlohmann::json run_end(const RunEnd& e) {
  return {{"type", kRunEnd},
          {"status", e.status},
          {"best_speedup_compile", opt(e.best_speedup_compile)},
          {"solution_dir", e.solution_dir},
          {"message", e.message}};
}

}  // namespace mk::run::events
