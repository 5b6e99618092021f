#include "eval/verdict.h"

#include <cmath>
#include <initializer_list>
#include <string_view>

namespace mk::eval {

using nlohmann::json;

namespace {

constexpr struct {
  VerdictStatus status;
  const char* name;
} kStatusNames[] = {
    {VerdictStatus::kCorrect, "correct"},         {VerdictStatus::kIncorrect, "incorrect"},
    {VerdictStatus::kCheating, "cheating"},       {VerdictStatus::kCompileError, "compile_error"},
    {VerdictStatus::kRuntimeError, "runtime_error"}, {VerdictStatus::kTimeout, "timeout"},
    {VerdictStatus::kCrashed, "crashed"},         {VerdictStatus::kNoVerdict, "no_verdict"},
};

// The fields the typed members hold, and the protocol envelope's (id, type):
// none of them is kept in raw.
constexpr std::string_view kTyped[] = {"status",      "kind",     "reasons",       "message",  "feedback",
                                       "runtime_ms",  "runtime_mean_ms", "baseline_ms", "speedup", "max_abs_err",
                                       "uses_pytorch", "cached",  "gpu",           "v",        "queued_s",
                                       "eval_s",      "baseline_s", "id",          "type",
                                       // the flat summary of older builds (read, never written)
                                       "speedup_compile", "speedup_eager", "compile_ms", "eager_ms"};

// The worker's fields this build keeps in raw on purpose (read where they
// are used: checks by roofline, shapes, the pool and the prompts; the rest
// by the pool's retry logic and the eval command's --json).
constexpr std::string_view kWorkerRaw[] = {"checks", "device", "elapsed_s", "subkernel_runtime_ms", "stderr_tail",
                                           "retryable"};

bool typed(const std::string& key) {
  for (auto k : kTyped)
    if (key == k) return true;
  return false;
}

std::optional<double> number(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  double v = it->get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::string string_or(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

json median_or_null(const Timing& t) { return t.valid ? json(t.median_ms) : json(nullptr); }
json positive_or_null(double x) { return x > 0 ? json(x) : json(nullptr); }

}  // namespace

std::vector<std::string> verdict_typed_keys() { return {std::begin(kTyped), std::end(kTyped)}; }
std::vector<std::string> verdict_worker_raw_keys() { return {std::begin(kWorkerRaw), std::end(kWorkerRaw)}; }

const char* to_string(VerdictStatus s) {
  for (const auto& e : kStatusNames)
    if (e.status == s) return e.name;
  return "crashed";
}

std::optional<VerdictStatus> status_from_string(const std::string& s) {
  for (const auto& e : kStatusNames)
    if (s == e.name) return e.status;
  return std::nullopt;
}

Timing parse_timing(const json& j) {
  Timing t;
  if (j.is_number()) {
    t.median_ms = t.mean_ms = j.get<double>();
    t.valid = std::isfinite(t.median_ms) && t.median_ms > 0;
    return t;
  }
  if (!j.is_object()) return t;
  auto med = number(j, "median");
  if (!med) med = number(j, "median_ms");
  auto mean = number(j, "mean");
  if (!mean) mean = number(j, "mean_ms");
  if (!med) return t;
  t.median_ms = *med;
  t.mean_ms = mean ? *mean : *med;
  t.valid = t.median_ms > 0;
  return t;
}

std::string reason_line(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object()) {
    std::string out;
    std::string file = string_or(j, "file");
    if (!file.empty()) {
      out += file;
      if (auto it = j.find("line"); it != j.end() && it->is_number_integer()) out += ":" + std::to_string(it->get<long long>());
      out += ": ";
    }
    std::string rule = string_or(j, "rule");
    if (!rule.empty()) out += rule + ": ";
    out += string_or(j, "message");
    return out;
  }
  return j.dump();
}

json Verdict::to_json() const {
  json j = raw.is_object() ? raw : json::object();
  j["v"] = kVerdictSchema;
  j["status"] = eval::to_string(status);
  j["kind"] = kind;
  j["reasons"] = reasons;
  j["message"] = feedback;
  j["runtime_ms"] = median_or_null(runtime);
  j["runtime_mean_ms"] = runtime.valid ? json(runtime.mean_ms) : json(nullptr);
  j["baseline_ms"] = {{"eager", median_or_null(eager)}, {"compile", median_or_null(compiled)}};
  j["speedup"] = {{"eager", positive_or_null(speedup_eager)}, {"compile", positive_or_null(speedup_compile)}};
  if (compiled_tf32.valid) {  // --baseline-tf32: beside the TF32-off baseline, never replacing it
    j["baseline_ms"]["compile_tf32"] = median_or_null(compiled_tf32);
    j["speedup"]["compile_tf32"] = positive_or_null(speedup_compile_tf32);
  }
  j["max_abs_err"] = max_abs_err ? json(*max_abs_err) : json(nullptr);
  j["uses_pytorch"] = uses_pytorch;
  j["cached"] = cached;
  j["gpu"] = gpu;
  if (eval_s > 0) {
    j["queued_s"] = queued_s;
    j["eval_s"] = eval_s;
    j["baseline_s"] = baseline_s;
  }
  return j;
}

const json& Verdict::checks() const {
  static const json kNone = json::object();
  if (!raw.is_object()) return kNone;
  auto it = raw.find("checks");
  return it != raw.end() && it->is_object() ? *it : kNone;
}

json& Verdict::mutable_checks() {
  if (!raw.is_object()) raw = json::object();
  json& c = raw["checks"];
  if (!c.is_object()) c = json::object();
  return c;
}

json summary_json(Verdict r) {
  r.raw = json::object();
  r.queued_s = r.eval_s = r.baseline_s = 0;
  return r.to_json();
}

// Besides the JSON form and the worker's answer, from_json reads the flat
// summary older builds embedded in events, manifests and candidates' records
// (speedup_compile, speedup_eager, compile_ms, eager_ms, feedback), so their
// logs and manifests still read.
Result<Verdict> Verdict::from_json(const json& j) {
  if (!j.is_object()) return Error{"the verdict is not a JSON object"};
  std::string status_text = string_or(j, "status");
  auto st = status_from_string(status_text);
  if (!st)
    return Error{status_text.empty() ? "the verdict has no status" : "the verdict has an unknown status '" + status_text + "'"};
  Verdict r;
  r.status = *st;
  r.kind = string_or(j, "kind");
  if (auto it = j.find("reasons"); it != j.end() && it->is_array())
    for (const auto& x : *it) r.reasons.push_back(reason_line(x));
  r.feedback = string_or(j, "message");
  if (r.feedback.empty()) r.feedback = string_or(j, "feedback");
  if (auto it = j.find("runtime_ms"); it != j.end()) r.runtime = parse_timing(*it);
  if (auto mean = number(j, "runtime_mean_ms"); mean && r.runtime.valid) r.runtime.mean_ms = *mean;
  if (auto it = j.find("baseline_ms"); it != j.end() && it->is_object()) {
    if (auto e = it->find("eager"); e != it->end()) r.eager = parse_timing(*e);
    if (auto c = it->find("compile"); c != it->end()) r.compiled = parse_timing(*c);
    if (auto c = it->find("compile_tf32"); c != it->end()) r.compiled_tf32 = parse_timing(*c);
  }
  if (auto it = j.find("speedup"); it != j.end() && it->is_object()) {
    r.speedup_eager = number(*it, "eager").value_or(0);
    r.speedup_compile = number(*it, "compile").value_or(0);
    r.speedup_compile_tf32 = number(*it, "compile_tf32").value_or(0);
  } else {  // an older build's flat summary
    r.speedup_eager = number(j, "speedup_eager").value_or(0);
    r.speedup_compile = number(j, "speedup_compile").value_or(0);
  }
  if (!j.contains("baseline_ms")) {
    if (auto it = j.find("eager_ms"); it != j.end()) r.eager = parse_timing(*it);
    if (auto it = j.find("compile_ms"); it != j.end()) r.compiled = parse_timing(*it);
  }
  // The worker writes -1 (or null) when it did not compare the outputs.
  if (auto e = number(j, "max_abs_err"); e && *e >= 0) r.max_abs_err = *e;
  if (auto it = j.find("uses_pytorch"); it != j.end() && it->is_boolean()) r.uses_pytorch = it->get<bool>();
  if (auto it = j.find("cached"); it != j.end() && it->is_boolean()) r.cached = it->get<bool>();
  if (auto it = j.find("gpu"); it != j.end() && it->is_number_integer()) r.gpu = it->get<int>();
  if (auto it = j.find("v"); it != j.end() && it->is_number_integer()) r.v = it->get<int>();
  else r.v = 1;
  r.queued_s = number(j, "queued_s").value_or(0);
  r.eval_s = number(j, "eval_s").value_or(0);
  r.baseline_s = number(j, "baseline_s").value_or(0);
  for (const auto& [key, value] : j.items())
    if (!typed(key)) r.raw[key] = value;
  if (r.status != VerdictStatus::kCorrect && r.feedback.empty() && !r.reasons.empty()) r.feedback = r.reasons.front();
  return r;
}

}  // namespace mk::eval
