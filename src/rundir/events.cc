#include "rundir/events.h"

#include <cstdio>

#include "util/json_fields.h"

namespace mk::rundir::events {

namespace {
nlohmann::json opt(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

bool is_type(const nlohmann::json& j, const char* type) {
  return j.is_object() && j.contains("type") && j["type"].is_string() && j["type"].get<std::string>() == type;
}
int integer(const nlohmann::json& j, const char* key) { return static_cast<int>(fields::integer(j, key)); }
using fields::optnum;
using fields::str;
/// A speedup for people: "1.23x".
std::string fmt_x(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", v);
  return buf;
}
}  // namespace

namespace {

// What j holds that known (the record as this build writes it back) lacks,
// at any depth: a key known lacks, or inside an object or an equally long
// array both hold, what the nested value lacks. Empty when nothing.
nlohmann::json unknown_part(const nlohmann::json& j, const nlohmann::json& known) {
  if (j.is_object() && known.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, x] : j.items()) {
      auto it = known.find(k);
      if (it == known.end()) out[k] = x;
      else if (auto d = unknown_part(x, *it); !d.empty()) out[k] = std::move(d);
    }
    return out;
  }
  if (j.is_array() && known.is_array() && j.size() == known.size()) {
    nlohmann::json out = nlohmann::json::array();
    bool any = false;
    for (size_t i = 0; i < j.size(); ++i) {
      out.push_back(unknown_part(j[i], known[i]));
      any = any || !out.back().empty();
    }
    return any ? out : nlohmann::json::object();
  }
  return nlohmann::json::object();
}

// Puts back what unknown_part took out, never over a field this build wrote.
void merge_unknown(nlohmann::json& dst, const nlohmann::json& extra) {
  if (dst.is_object() && extra.is_object()) {
    for (const auto& [k, x] : extra.items()) {
      if (!dst.contains(k)) dst[k] = x;
      else merge_unknown(dst[k], x);
    }
  } else if (dst.is_array() && extra.is_array() && dst.size() == extra.size()) {
    for (size_t i = 0; i < dst.size(); ++i) merge_unknown(dst[i], extra[i]);
  }
}

// The envelope every typed record shares: its schema version, the fields a
// newer writer added (kept), and the log's seq and ts when it has them.
void put_meta(nlohmann::json& j, const Meta& m) {
  j["v"] = m.v;
  merge_unknown(j, m.extra);
  if (m.seq) j["seq"] = *m.seq;
  if (!m.ts.empty()) j["ts"] = m.ts;
}

Meta get_meta(const nlohmann::json& j, const nlohmann::json& known) {
  Meta m;
  if (auto it = j.find("seq"); it != j.end() && it->is_number_integer()) m.seq = it->get<int64_t>();
  m.ts = str(j, "ts");
  m.v = static_cast<int>(fields::integer(j, "v", 1));
  m.extra = unknown_part(j, known);
  for (const char* k : {"seq", "ts", "v"}) m.extra.erase(k);
  return m;
}

}  // namespace

std::optional<Envelope> Envelope::from_json(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  auto t = j.find("type");
  if (t == j.end() || !t->is_string()) return std::nullopt;
  Envelope e{t->get<std::string>()};
  if (auto it = j.find("seq"); it != j.end() && it->is_number_integer()) e.seq = it->get<int64_t>();
  e.ts = str(j, "ts");
  return e;
}

ReplayKey ReplayKey::of(const nlohmann::json& j) {
  ReplayKey k;
  if (!j.is_object()) return k;
  if (auto e = Envelope::from_json(j)) k.type = e->type;
  auto at = [&](const char* name) { return j.value(name, nlohmann::json()); };
  k.agent = at("agent");
  k.task = at("task");
  k.candidate = at("candidate");
  k.iteration = at("iteration");
  k.sample = at("sample");
  return k;
}

nlohmann::json LlmCall::to_json() const {
  nlohmann::json j = {{"type", kType},
                      {"agent", agent},
                      {"task", task},
                      {"usage",
                       {{"input", usage.input},
                        {"output", usage.output},
                        {"cache_read", usage.cache_read},
                        {"cache_write", usage.cache_write},
                        {"estimated", usage.estimated}}},
                      {"cached", cached},
                      {"truncated", truncated},
                      {"ok", ok},
                      {"iteration", iteration},
                      {"sample", sample}};
  if (latency_ms) j["latency_ms"] = *latency_ms;
  if (!ok || !error.empty()) j["error"] = error;
  if (round) j["round"] = *round;
  if (!candidate.empty()) j["candidate"] = candidate;
  if (!model.empty()) j["model"] = model;
  put_meta(j, meta);
  return j;
}

std::optional<LlmCall> LlmCall::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  LlmCall c;
  c.agent = str(j, "agent");
  c.task = str(j, "task");
  if (auto u = j.find("usage"); u != j.end() && u->is_object())
    c.usage = {fields::integer(*u, "input"), fields::integer(*u, "output"), fields::integer(*u, "cache_read"),
               fields::integer(*u, "cache_write"), fields::boolean(*u, "estimated")};
  c.cached = fields::boolean(j, "cached");
  c.truncated = fields::boolean(j, "truncated");
  if (auto l = j.find("latency_ms"); l != j.end() && l->is_number()) c.latency_ms = fields::integer(j, "latency_ms");
  c.ok = !(j.contains("ok") && j["ok"].is_boolean() && !j["ok"].get<bool>());
  c.error = str(j, "error");
  if (auto r = j.find("round"); r != j.end() && r->is_number_integer()) c.round = r->get<int>();
  c.candidate = str(j, "candidate");
  c.iteration = integer(j, "iteration");
  c.sample = integer(j, "sample");
  c.model = str(j, "model");
  nlohmann::json known = c.to_json();
  c.meta = get_meta(j, known);
  return c;
}

nlohmann::json llm_call(const LlmCall& c) { return c.to_json(); }

namespace {
std::optional<int> optint(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return static_cast<int>(fields::integer(j, key));
}
std::optional<int64_t> optint64(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return fields::integer(j, key);
}
}  // namespace

nlohmann::json Eval::to_json() const {
  nlohmann::json j = {{"type", kType},
                      {"task", task},
                      {"candidate", candidate},
                      {"status", status},
                      {"kind", kind},
                      {"speedup_compile", opt(speedup_compile)},
                      {"speedup_eager", opt(speedup_eager)},
                      {"runtime_ms", opt(runtime_ms)},
                      {"uses_pytorch", uses_pytorch},
                      {"iteration", iteration},
                      {"cached", cached}};
  if (e2e) j["e2e"] = true;
  if (compile_tf32_ms) j["compile_tf32_ms"] = *compile_tf32_ms;
  if (speedup_compile_tf32) j["speedup_compile_tf32"] = *speedup_compile_tf32;
  if (queued_s) j["queued_s"] = *queued_s;
  if (eval_s) j["eval_s"] = *eval_s;
  if (baseline_s) j["baseline_s"] = *baseline_s;
  if (waited_s) j["waited_s"] = *waited_s;
  if (!scope.empty()) j["scope"] = scope;
  if (reward) j["reward"] = *reward;
  put_meta(j, meta);
  return j;
}

std::optional<Eval> Eval::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  Eval e;
  e.task = str(j, "task");
  e.candidate = str(j, "candidate");
  e.status = str(j, "status");
  e.kind = str(j, "kind");
  e.speedup_compile = optnum(j, "speedup_compile");
  e.speedup_eager = optnum(j, "speedup_eager");
  e.runtime_ms = optnum(j, "runtime_ms");
  e.uses_pytorch = fields::boolean(j, "uses_pytorch");
  e.e2e = fields::boolean(j, "e2e");
  e.compile_tf32_ms = optnum(j, "compile_tf32_ms");
  e.speedup_compile_tf32 = optnum(j, "speedup_compile_tf32");
  e.queued_s = optnum(j, "queued_s");
  e.eval_s = optnum(j, "eval_s");
  e.baseline_s = optnum(j, "baseline_s");
  e.waited_s = optnum(j, "waited_s");
  e.scope = str(j, "scope");
  e.iteration = integer(j, "iteration");
  e.reward = optnum(j, "reward");
  e.cached = fields::boolean(j, "cached");
  e.meta = get_meta(j, e.to_json());
  return e;
}

nlohmann::json eval(const Eval& e) { return e.to_json(); }

nlohmann::json Topology::to_json() const {
  nlohmann::json subs = nlohmann::json::array();
  for (const auto& s : subproblems) subs.push_back({{"name", s.name}, {"status", s.status}});
  nlohmann::json j = {{"type", kType}, {"iteration", iteration}, {"change", change},
                      {"subproblems", subs}, {"detail", detail}};
  if (!from.empty()) j["from"] = from;
  if (!into.empty()) j["into"] = into;
  if (!reason.empty()) j["reason"] = reason;
  if (!diff.is_null()) j["diff"] = diff;
  if (worker) j["worker"] = *worker;
  if (round) j["round"] = *round;
  if (!failing.empty()) j["failing"] = failing;
  if (subproblems_unknown) j["subproblems_unknown"] = true;
  put_meta(j, meta);
  return j;
}

std::optional<Topology> Topology::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  Topology t;
  t.iteration = integer(j, "iteration");
  t.change = str(j, "change");
  if (auto sp = j.find("subproblems"); sp != j.end() && sp->is_array())
    for (const auto& x : *sp)
      if (x.is_object()) t.subproblems.push_back({str(x, "name"), str(x, "status")});
  t.detail = str(j, "detail");
  t.from = fields::strings(j, "from");
  t.into = fields::strings(j, "into");
  t.reason = str(j, "reason");
  if (auto d = j.find("diff"); d != j.end()) t.diff = *d;
  t.worker = optint(j, "worker");
  t.round = optint(j, "round");
  t.failing = fields::strings(j, "failing");
  t.subproblems_unknown = fields::boolean(j, "subproblems_unknown");
  t.meta = get_meta(j, t.to_json());
  return t;
}

nlohmann::json topology(const Topology& t) { return t.to_json(); }

nlohmann::json Iteration::to_json() const {
  nlohmann::json subs = nlohmann::json::array();
  for (const auto& s : subkernels) {
    nlohmann::json sj = {{"name", s.name},
                         {"correct", s.correct},
                         {"speedup_compile", opt(s.speedup_compile)},
                         {"runtime_ms", opt(s.runtime_ms)},
                         {"share", opt(s.share)}};
    if (s.uses_pytorch) sj["uses_pytorch"] = true;
    if (s.roofline.is_object()) sj["roofline"] = s.roofline;
    if (s.calls) sj["calls"] = *s.calls;
    if (s.budget) sj["budget"] = *s.budget;
    if (!s.status.empty()) sj["status"] = s.status;
    subs.push_back(std::move(sj));
  }
  nlohmann::json e = {{"status", e2e.status},
                      {"speedup_compile", opt(e2e.speedup_compile)},
                      {"speedup_eager", opt(e2e.speedup_eager)},
                      {"runtime_ms", opt(e2e.runtime_ms)}};
  if (!e2e.missing.empty()) e["missing"] = e2e.missing;
  nlohmann::json j = {{"type", kType},         {"t", t},           {"iteration", t},
                      {"e2e", e},              {"subkernels", subs}, {"calls_used", calls_used},
                      {"tokens", tokens}};
  if (!method.empty()) j["method"] = method;
  if (!topology_change.empty()) j["topology_change"] = topology_change;
  if (speedup) j["speedup"] = *speedup;
  if (best_speedup) j["best_speedup"] = *best_speedup;
  if (correct) j["correct"] = *correct;
  if (kernel_calls) j["kernel_calls"] = *kernel_calls;
  put_meta(j, meta);
  return j;
}

std::optional<Iteration> Iteration::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  Iteration it;
  it.t = integer(j, "t");
  if (auto e = j.find("e2e"); e != j.end() && e->is_object()) {
    it.e2e.status = str(*e, "status");
    it.e2e.speedup_compile = optnum(*e, "speedup_compile");
    it.e2e.speedup_eager = optnum(*e, "speedup_eager");
    it.e2e.runtime_ms = optnum(*e, "runtime_ms");
    it.e2e.missing = fields::strings(*e, "missing");
  }
  if (auto sk = j.find("subkernels"); sk != j.end() && sk->is_array()) {
    for (const auto& x : *sk) {
      if (!x.is_object()) continue;
      SubkernelSummary k;
      k.name = str(x, "name");
      k.correct = fields::boolean(x, "correct");
      k.speedup_compile = optnum(x, "speedup_compile");
      k.runtime_ms = optnum(x, "runtime_ms");
      k.share = optnum(x, "share");
      k.uses_pytorch = fields::boolean(x, "uses_pytorch");
      if (auto r = x.find("roofline"); r != x.end() && r->is_object()) k.roofline = *r;
      k.calls = optint64(x, "calls");
      k.budget = optint64(x, "budget");
      k.status = str(x, "status");
      it.subkernels.push_back(std::move(k));
    }
  }
  it.calls_used = fields::integer(j, "calls_used");
  it.tokens = fields::integer(j, "tokens");
  it.method = str(j, "method");
  it.topology_change = str(j, "topology_change");
  it.speedup = optnum(j, "speedup");
  it.best_speedup = optnum(j, "best_speedup");
  if (auto c = j.find("correct"); c != j.end() && c->is_boolean()) it.correct = c->get<bool>();
  it.kernel_calls = optint64(j, "kernel_calls");
  it.meta = get_meta(j, it.to_json());
  return it;
}

nlohmann::json iteration(const Iteration& it) { return it.to_json(); }

nlohmann::json Best::to_json() const {
  nlohmann::json j = {{"type", kType},
                      {"t", t},
                      {"speedup_compile", correct ? opt(speedup_compile) : nlohmann::json(nullptr)},
                      {"correct", correct},
                      {"contains_pytorch_subkernels", contains_pytorch_subkernels}};
  if (!method.empty()) j["method"] = method;
  if (!subproblems.empty()) j["subproblems"] = subproblems;
  if (speedup) j["speedup"] = *speedup;
  put_meta(j, meta);
  return j;
}

std::optional<Best> Best::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  Best b;
  b.t = integer(j, "t");
  b.speedup_compile = optnum(j, "speedup_compile");
  b.correct = !(j.contains("correct") && j["correct"].is_boolean() && !j["correct"].get<bool>());
  b.method = str(j, "method");
  b.subproblems = fields::strings(j, "subproblems");
  b.contains_pytorch_subkernels = fields::boolean(j, "contains_pytorch_subkernels");
  b.speedup = optnum(j, "speedup");
  b.meta = get_meta(j, b.to_json());
  return b;
}

nlohmann::json best(int t, double speedup_compile) {
  Best b;
  b.t = t;
  b.speedup_compile = speedup_compile;
  return b.to_json();
}

nlohmann::json ReplyError::to_json() const {
  nlohmann::json j = {{"type", kType}, {"task", task}, {"agent", agent}, {"iteration", iteration}, {"error", error}};
  if (!candidate.empty()) j["candidate"] = candidate;
  put_meta(j, meta);
  return j;
}

std::optional<ReplyError> ReplyError::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  ReplyError e{str(j, "task"), str(j, "agent"), integer(j, "iteration"), str(j, "error"), str(j, "candidate")};
  e.meta = get_meta(j, e.to_json());
  return e;
}

nlohmann::json reply_error(const ReplyError& e) { return e.to_json(); }
std::optional<ReplyError> parse_reply_error(const nlohmann::json& j) { return ReplyError::from_json(j); }

nlohmann::json VerifyDecomposition::to_json() const {
  nlohmann::json j = {{"type", kType}, {"task", task}, {"agent", agent},       {"iteration", iteration},
                      {"sample", sample}, {"ok", ok},    {"failures", failures}};
  if (seconds) j["seconds"] = *seconds;
  if (max_abs_err) j["max_abs_err"] = *max_abs_err;
  if (!tolerance.is_null()) j["tolerance"] = tolerance;
  put_meta(j, meta);
  return j;
}

std::optional<VerifyDecomposition> VerifyDecomposition::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  VerifyDecomposition v{str(j, "task"),         str(j, "agent"),           integer(j, "iteration"),
                        integer(j, "sample"),      fields::boolean(j, "ok"), fields::strings(j, "failures"),
                        optnum(j, "seconds")};
  v.max_abs_err = optnum(j, "max_abs_err");
  if (j.contains("tolerance") && j["tolerance"].is_object()) v.tolerance = j["tolerance"];
  v.meta = get_meta(j, v.to_json());
  return v;
}

nlohmann::json verify_decomposition(const VerifyDecomposition& v) { return v.to_json(); }
std::optional<VerifyDecomposition> parse_verify_decomposition(const nlohmann::json& j) {
  return VerifyDecomposition::from_json(j);
}

nlohmann::json Judge::to_json() const {
  nlohmann::json e = {{"type", kType},        {"task", task},       {"candidate", candidate},
                      {"iteration", iteration}, {"verdict", verdict}, {"reason", reason}};
  if (!policy.empty()) e["policy"] = policy;
  if (!stage.empty()) e["stage"] = stage;
  put_meta(e, meta);
  return e;
}

std::optional<Judge> Judge::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  Judge r{str(j, "task"), str(j, "candidate"), integer(j, "iteration"), str(j, "verdict"), str(j, "reason"),
          str(j, "policy"), str(j, "stage")};
  r.meta = get_meta(j, r.to_json());
  return r;
}

nlohmann::json judge(const Judge& j) { return j.to_json(); }
std::optional<Judge> parse_judge(const nlohmann::json& j) { return Judge::from_json(j); }

nlohmann::json Reuse::to_json() const {
  nlohmann::json j = {{"type", kType},        {"task", task},       {"from_run", from_run},
                      {"from_task", from_task}, {"match", match},     {"candidate", candidate},
                      {"status", status},       {"correct", correct}, {"calls_saved", calls_saved}};
  put_meta(j, meta);
  return j;
}

std::optional<Reuse> Reuse::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  Reuse r{str(j, "task"),      str(j, "from_run"), str(j, "from_task"),           str(j, "match"),
          str(j, "candidate"), str(j, "status"),   fields::boolean(j, "correct"), integer(j, "calls_saved")};
  r.meta = get_meta(j, r.to_json());
  return r;
}

nlohmann::json CompositionFailure::to_json() const {
  nlohmann::json j = {{"type", kType},     {"iteration", iteration}, {"task", task},     {"candidate", candidate},
                      {"status", status},  {"kind", kind},           {"message", message}, {"action", action}};
  put_meta(j, meta);
  return j;
}

std::optional<CompositionFailure> CompositionFailure::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  CompositionFailure c{integer(j, "iteration"), str(j, "task"), str(j, "candidate"), str(j, "status"),
                       str(j, "kind"),          str(j, "message"), str(j, "action")};
  c.meta = get_meta(j, c.to_json());
  return c;
}

nlohmann::json reuse(const Reuse& r) { return r.to_json(); }
std::optional<Reuse> parse_reuse(const nlohmann::json& j) { return Reuse::from_json(j); }

nlohmann::json Budget::to_json() const {
  nlohmann::json alloc = nlohmann::json::object();
  for (const auto& [name, calls] : allocation) alloc[name] = calls;
  nlohmann::json j = {{"type", kType}, {"iteration", iteration}, {"allocation", alloc}, {"rule", rule}};
  put_meta(j, meta);
  return j;
}

std::optional<Budget> Budget::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  Budget b{integer(j, "iteration"), {}, str(j, "rule")};
  if (auto a = j.find("allocation"); a != j.end() && a->is_object())
    for (const auto& [name, calls] : a->items())
      if (calls.is_number_integer()) b.allocation.emplace_back(name, calls.get<int>());
  b.meta = get_meta(j, b.to_json());
  return b;
}

nlohmann::json budget(const Budget& b) { return b.to_json(); }
std::optional<Budget> parse_budget(const nlohmann::json& j) { return Budget::from_json(j); }

nlohmann::json SwapSkipped::to_json() const {
  nlohmann::json j = {{"type", kType}, {"tau", opt(tau)}, {"reason", reason}};
  put_meta(j, meta);
  return j;
}

std::optional<SwapSkipped> SwapSkipped::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  SwapSkipped s{optnum(j, "tau"), str(j, "reason")};
  s.meta = get_meta(j, s.to_json());
  return s;
}

nlohmann::json swap_skipped(double tau, const std::string& reason) { return SwapSkipped{tau, reason}.to_json(); }

nlohmann::json SwapRejected::to_json() const {
  nlohmann::json rep = nlohmann::json::array();
  for (const auto& x : replaced) rep.push_back({{"name", x.name}, {"with", x.with}, {"speedup", opt(x.speedup)}});
  nlohmann::json j = {{"type", kType},
                      {"replaced", rep},
                      {"tau", opt(tau)},
                      {"speedup_before", opt(speedup_before)},
                      {"speedup_after", opt(speedup_after)},
                      {"reason", reason}};
  if (!result.is_null()) j["result"] = result;
  put_meta(j, meta);
  return j;
}

std::optional<SwapRejected> SwapRejected::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
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
  nlohmann::json known = r.to_json();
  if (!j.contains("replaced")) known.update(nlohmann::json{{"name", nullptr}, {"to", nullptr}});  // read into replaced
  r.meta = get_meta(j, known);
  return r;
}

nlohmann::json swap_rejected(const SwapRejected& r) { return r.to_json(); }
std::optional<SwapRejected> parse_swap_rejected(const nlohmann::json& j) { return SwapRejected::from_json(j); }

namespace {
std::optional<bool> optbool(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}
nlohmann::json member(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? nlohmann::json() : *it;
}
}  // namespace

nlohmann::json Swap::to_json() const {
  nlohmann::json j = {{"type", kType},
                      {"name", name},
                      {"from", from},
                      {"to", to},
                      {"speedup_before", opt(speedup_before)},
                      {"speedup_after", opt(speedup_after)}};
  if (triggered) j["triggered"] = *triggered;
  if (tau) j["tau"] = *tau;
  if (triggered) j["subkernel_speedup"] = opt(subkernel_speedup);  // the search's: null when unknown
  if (correct) j["correct"] = *correct;
  if (contains_pytorch_subkernels) j["contains_pytorch_subkernels"] = *contains_pytorch_subkernels;
  if (!local.is_null()) j["local"] = local;
  if (!e2e.is_null()) j["e2e"] = e2e;
  if (!by.empty()) j["by"] = by;
  put_meta(j, meta);
  return j;
}

std::optional<Swap> Swap::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  Swap s;
  s.name = str(j, "name");
  s.from = str(j, "from");
  s.to = str(j, "to");
  s.speedup_before = optnum(j, "speedup_before");
  s.speedup_after = optnum(j, "speedup_after");
  s.triggered = optbool(j, "triggered");
  s.tau = optnum(j, "tau");
  s.subkernel_speedup = optnum(j, "subkernel_speedup");
  s.correct = optbool(j, "correct");
  s.contains_pytorch_subkernels = optbool(j, "contains_pytorch_subkernels");
  s.local = member(j, "local");
  s.e2e = member(j, "e2e");
  s.by = str(j, "by");
  s.meta = get_meta(j, s.to_json());
  return s;
}

nlohmann::json swap(const Swap& s) { return s.to_json(); }

nlohmann::json Postfuse::to_json() const {
  nlohmann::json j = {{"type", kType}, {"attempt", attempt}, {"status", status}, {"speedup_compile", opt(speedup_compile)}};
  if (accepted) j["accepted"] = *accepted;
  if (modular_speedup) j["modular_speedup"] = *modular_speedup;
  if (!detail.empty()) j["detail"] = detail;
  put_meta(j, meta);
  return j;
}

std::optional<Postfuse> Postfuse::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  Postfuse p;
  p.attempt = integer(j, "attempt");
  p.status = str(j, "status");
  p.speedup_compile = optnum(j, "speedup_compile");
  p.accepted = optbool(j, "accepted");
  p.modular_speedup = optnum(j, "modular_speedup");
  p.detail = str(j, "detail");
  p.meta = get_meta(j, p.to_json());
  return p;
}

nlohmann::json postfuse(int attempt, const std::string& status, std::optional<double> speedup_compile) {
  Postfuse p;
  p.attempt = attempt;
  p.status = status;
  p.speedup_compile = speedup_compile;
  return p.to_json();
}

nlohmann::json RunStart::to_json() const {
  nlohmann::json j = {{"type", kType}, {"method", method}, {"problem", problem},
                      {"settings", settings.is_null() ? nlohmann::json::object() : settings}};
  if (!problem_hash.empty()) j["problem_hash"] = problem_hash;
  if (!options.is_null()) j["options"] = options;
  if (!prompts_version.empty()) j["prompts_version"] = prompts_version;
  if (llm) j["llm"] = *llm;
  if (judge) j["judge"] = *judge;
  if (!hardware.is_null()) j["hardware"] = hardware;
  put_meta(j, meta);
  return j;
}

std::optional<RunStart> RunStart::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  RunStart r;
  r.method = str(j, "method");
  r.problem = str(j, "problem");
  if (auto st = j.find("settings"); st != j.end() && st->is_object()) r.settings = *st;
  r.problem_hash = str(j, "problem_hash");
  r.options = member(j, "options");
  r.prompts_version = str(j, "prompts_version");
  if (auto l = j.find("llm"); l != j.end() && l->is_string()) r.llm = l->get<std::string>();
  if (auto l = j.find("judge"); l != j.end() && l->is_string()) r.judge = l->get<std::string>();
  r.hardware = member(j, "hardware");
  r.meta = get_meta(j, r.to_json());
  return r;
}

nlohmann::json run_start(const std::string& method, const std::string& problem, const nlohmann::json& settings) {
  RunStart r;
  r.method = method;
  r.problem = problem;
  r.settings = settings;
  return r.to_json();
}

nlohmann::json Resume::to_json() const {
  nlohmann::json j = {{"type", kType}, {"events_before", events_before}, {"notices", notices}};
  if (!llm_changes.empty()) {
    nlohmann::json ch = nlohmann::json::array();
    for (const auto& c : llm_changes) ch.push_back({{"flag", c.flag}, {"from", c.from}, {"to", c.to}});
    j["llm_changes"] = ch;
  }
  put_meta(j, meta);
  return j;
}

std::optional<Resume> Resume::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  Resume r;
  r.events_before = fields::integer(j, "events_before");
  r.notices = fields::strings(j, "notices");
  if (auto ch = j.find("llm_changes"); ch != j.end() && ch->is_array())
    for (const auto& c : *ch)
      if (c.is_object()) r.llm_changes.push_back({str(c, "flag"), str(c, "from"), str(c, "to")});
  r.meta = get_meta(j, r.to_json());
  return r;
}

nlohmann::json resume(int64_t events_before, const std::vector<std::string>& notices,
                      const nlohmann::json& llm_changes) {
  Resume r;
  r.events_before = events_before;
  r.notices = notices;
  if (llm_changes.is_array())
    for (const auto& c : llm_changes)
      if (c.is_object()) r.llm_changes.push_back({str(c, "flag"), str(c, "from"), str(c, "to")});
  return r.to_json();
}

nlohmann::json Preflight::to_json() const {
  nlohmann::json j = {{"type", kType}, {"what", what}, {"ok", ok}, {"seconds", seconds}, {"message", message}};
  put_meta(j, meta);
  return j;
}

std::optional<Preflight> Preflight::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  Preflight p{str(j, "what"), fields::boolean(j, "ok"), optnum(j, "seconds").value_or(0), str(j, "message")};
  p.meta = get_meta(j, p.to_json());
  return p;
}

nlohmann::json preflight(const std::string& what, bool ok, double seconds, const std::string& message) {
  return Preflight{what, ok, seconds, message}.to_json();
}

nlohmann::json FinalCheck::to_json() const {
  nlohmann::json j = {{"type", kType},   {"passed", passed},     {"seed", seed},
                      {"status", status}, {"kind", kind},         {"speedup_compile", opt(speedup_compile)},
                      {"message", message}, {"iteration", iteration}, {"fallback", fallback}};
  if (speedup_compile_tf32) j["speedup_compile_tf32"] = *speedup_compile_tf32;
  if (speedup_eager) j["speedup_eager"] = *speedup_eager;
  if (runtime_ms) j["runtime_ms"] = *runtime_ms;
  if (search_speedup_compile) j["search_speedup_compile"] = *search_speedup_compile;
  if (!precision.is_null()) j["precision"] = precision;
  if (!shapes.is_null()) j["shapes"] = shapes;
  put_meta(j, meta);
  return j;
}

std::optional<FinalCheck> FinalCheck::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  FinalCheck f;
  f.passed = fields::boolean(j, "passed");
  f.seed = integer(j, "seed");
  f.status = str(j, "status");
  f.kind = str(j, "kind");
  f.speedup_compile = optnum(j, "speedup_compile");
  f.speedup_compile_tf32 = optnum(j, "speedup_compile_tf32");
  f.speedup_eager = optnum(j, "speedup_eager");
  f.runtime_ms = optnum(j, "runtime_ms");
  f.search_speedup_compile = optnum(j, "search_speedup_compile");
  if (j.contains("precision") && j["precision"].is_object()) f.precision = j["precision"];
  if (j.contains("shapes") && j["shapes"].is_object()) f.shapes = j["shapes"];
  f.message = str(j, "message");
  f.iteration = integer(j, "iteration");
  f.fallback = integer(j, "fallback");
  f.meta = get_meta(j, f.to_json());
  return f;
}

FinalCheckOutcome final_check_outcome(const std::vector<nlohmann::json>& events) {
  FinalCheckOutcome o;
  bool finished = false;  // a run_end with status finished since the last final_check
  for (const auto& e : events) {
    if (Resume::from_json(e)) {
      o = FinalCheckOutcome{};  // a resumed process checks again
    } else if (auto end = RunEnd::from_json(e)) {
      finished = end->status == "finished";
    } else if (auto f = FinalCheck::from_json(e)) {
      finished = false;
      if (o.result == "failed") ++o.failed_before;  // the one before failed: this one is its fallback
      o.result = f->passed ? "passed" : f->status == "no_verdict" ? "no_verdict" : "failed";
      o.iteration = f->iteration;
      o.fallback = f->fallback;
      o.seed = f->seed;
      o.status = f->status;
      o.kind = f->kind;
      o.message = f->message;
      o.speedup_compile = f->passed ? f->speedup_compile : std::nullopt;
      o.speedup_eager = f->passed ? f->speedup_eager : std::nullopt;
      o.runtime_ms = f->passed ? f->runtime_ms : std::nullopt;
      o.search_speedup_compile = f->passed ? f->search_speedup_compile : std::nullopt;
      o.shapes = f->shapes;
    }
  }
  // A failure decides only when the run went on to finish: until then the
  // next-best solution may still be checked.
  if (o.result == "failed" && !finished) o.result = "incomplete";
  return o;
}

std::string FinalCheckOutcome::text() const {
  const std::string how = "fresh seed " + std::to_string(seed) + ", every check on";
  const std::string before =
      failed_before == 1 ? "1 better solution failed it" : std::to_string(failed_before) + " better solutions failed it";
  if (result == "passed") {
    // The figure the run reports is this check's own timing; the search's is beside it.
    // Without a torch.compile baseline (a torch without it, or a compile past
    // its deadline) the figure is against eager: never a 0.00x.
    std::string figure;
    if (speedup_compile && *speedup_compile > 0) {
      figure = ": " + fmt_x(*speedup_compile) + " vs torch.compile";
      if (search_speedup_compile && *search_speedup_compile > 0)
        figure += " (the search measured " + fmt_x(*search_speedup_compile) + ")";
    } else if (speedup_eager && *speedup_eager > 0) {
      figure = ": " + fmt_x(*speedup_eager) + " vs eager (no torch.compile baseline)";
    }
    if (failed_before == 0) return "passed (" + how + ")" + figure;
    return "passed by the solution of iteration " + std::to_string(iteration) + " (" + how + "), after " + before +
           figure;
  }
  if (result == "no_verdict" && kind == "judge_failed") {
    return "no verdict from the cheat judge (" + message + "): the solution of iteration " +
           std::to_string(iteration) + " passed the fresh-seed evaluation (" + how +
           ") and is returned without the judge's second look" +
           (failed_before ? "; before it, " + before : std::string());
  }
  if (result == "no_verdict") {
    return "no verdict (" + (message.empty() ? std::string("the check could not be made") : message) +
           "): the solution of iteration " + std::to_string(iteration) +
           " is returned on its verdict from the search, not checked again" +
           (failed_before ? "; before it, " + before : std::string());
  }
  if (result == "incomplete") {
    const int n = failed_before + 1;
    return "not finished: " + (n == 1 ? std::string("the best solution") : std::to_string(n) + " solutions") +
           " failed it (last: " + status + (kind.empty() ? "" : ", " + kind) +
           ") and the run stopped before the next-best was checked; a resume checks again";
  }
  if (result == "failed") {
    const int n = failed_before + 1;
    return "failed by " + (n == 1 ? std::string("the solution") : "each of the " + std::to_string(n) + " solutions") +
           " checked (last: " + status + (kind.empty() ? "" : ", " + kind) + "): no correct kernel is returned";
  }
  return "";
}

nlohmann::json FinalCheckOutcome::to_json() const {
  if (result.empty()) return nullptr;
  nlohmann::json j = {{"result", result},  {"iteration", iteration},         {"fallback", fallback},
                      {"seed", seed},      {"failed_before", failed_before}, {"status", status},
                      {"kind", kind}};
  if (!message.empty()) j["message"] = message;
  if (speedup_compile) j["speedup_compile"] = *speedup_compile;
  if (speedup_eager) j["speedup_eager"] = *speedup_eager;
  if (runtime_ms) j["runtime_ms"] = *runtime_ms;
  if (search_speedup_compile) j["search_speedup_compile"] = *search_speedup_compile;
  if (!shapes.is_null()) j["shapes"] = shapes;
  return j;
}

nlohmann::json RunEnd::to_json() const {
  nlohmann::json j = {{"type", kType},
                      {"status", status},
                      {"best_speedup_compile", opt(best_speedup_compile)},
                      {"solution_dir", solution_dir},
                      {"message", message}};
  if (!result.empty()) j["result"] = result;
  if (correct) j["correct"] = *correct;
  if (contains_pytorch_subkernels) j["contains_pytorch_subkernels"] = *contains_pytorch_subkernels;
  if (!solution.is_null()) j["solution"] = solution;
  if (!accounting.is_null()) j["accounting"] = accounting;
  put_meta(j, meta);
  return j;
}

std::optional<RunEnd> RunEnd::from_json(const nlohmann::json& j) {
  if (!is_type(j, kType)) return std::nullopt;
  RunEnd e;
  e.status = str(j, "status");
  e.best_speedup_compile = optnum(j, "best_speedup_compile");
  e.solution_dir = str(j, "solution_dir");
  e.message = str(j, "message");
  e.result = str(j, "result");
  e.correct = optbool(j, "correct");
  e.contains_pytorch_subkernels = optbool(j, "contains_pytorch_subkernels");
  e.solution = member(j, "solution");
  e.accounting = member(j, "accounting");
  e.meta = get_meta(j, e.to_json());
  return e;
}

nlohmann::json run_end(const RunEnd& e) { return e.to_json(); }

}  // namespace mk::rundir::events
