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

// Besides the table's top-level keys: the keys to_json and from_json handle
// themselves, the protocol envelope's (id, type), and an older build's flat
// summary (read, never written). None of them is kept in raw.
constexpr std::string_view kAlsoTyped[] = {"runtime_mean_ms", "v", "id", "type", "feedback",
                                           "speedup_compile", "speedup_eager", "compile_ms", "eager_ms"};

// The worker's fields this build keeps in raw on purpose (read where they
// are used: checks by roofline, shapes, the pool and the prompts; the rest
// by the pool's retry logic and the eval command's --json).
constexpr std::string_view kWorkerRaw[] = {"checks", "device", "elapsed_s", "subkernel_runtime_ms", "stderr_tail",
                                           "retryable"};

const std::vector<std::string>& typed_keys() {
  static const std::vector<std::string> keys = [] {
    auto k = records::top_level_keys<Verdict>();
    k.insert(k.end(), std::begin(kAlsoTyped), std::end(kAlsoTyped));
    return k;
  }();
  return keys;
}

bool typed(const std::string& key) {
  for (const auto& k : typed_keys())
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

}  // namespace

std::vector<std::string> verdict_typed_keys() { return typed_keys(); }
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
  j.update(records::write_fields(*this));
  j["v"] = kVerdictSchema;
  j["runtime_mean_ms"] = runtime.valid ? json(runtime.mean_ms) : json(nullptr);
  if (!compiled_tf32.valid) j["speedup"].erase("compile_tf32");  // --baseline-tf32 only, beside its baseline
  if (eval_s <= 0)  // the pool's clocks, only where it measured them
    for (const char* k : {"queued_s", "eval_s", "baseline_s", "server_start_s"}) j.erase(k);
  return j;
}

void Verdict::clear_pool_clocks() {
  queued_s = eval_s = baseline_s = server_start_s = 0;
  if (!raw.is_object()) return;
  if (auto it = raw.find("checks"); it != raw.end() && it->is_object()) it->erase("server_startup_s");
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
  r.clear_pool_clocks();
  return r.to_json();
}

// Besides the JSON form and the worker's answer, from_json reads the flat
// summary older builds embedded in events, manifests and candidates' records
// (speedup_compile, speedup_eager, compile_ms, eager_ms, feedback), so their
// logs and manifests still read.
Result<Verdict> Verdict::from_json(const json& j) {
  if (!j.is_object()) return Error{"the verdict is not a JSON object"};
  std::string status_text = string_or(j, "status");
  if (!status_from_string(status_text))
    return Error{status_text.empty() ? "the verdict has no status" : "the verdict has an unknown status '" + status_text + "'"};
  Verdict r;
  records::read_fields(j, r);
  // What the table cannot read: reasons may be {file, line, rule, message}
  // objects; a worker's answer says "feedback"; the mean beside the median.
  r.reasons.clear();
  if (auto it = j.find("reasons"); it != j.end() && it->is_array())
    for (const auto& x : *it) r.reasons.push_back(reason_line(x));
  if (r.feedback.empty()) r.feedback = string_or(j, "feedback");
  if (auto mean = number(j, "runtime_mean_ms"); mean && r.runtime.valid) r.runtime.mean_ms = *mean;
  // An older build's flat summary.
  if (auto it = j.find("speedup"); it == j.end() || !it->is_object()) {
    r.speedup_eager = number(j, "speedup_eager").value_or(0);
    r.speedup_compile = number(j, "speedup_compile").value_or(0);
  }
  if (!j.contains("baseline_ms")) {
    if (auto it = j.find("eager_ms"); it != j.end()) r.eager = parse_timing(*it);
    if (auto it = j.find("compile_ms"); it != j.end()) r.compiled = parse_timing(*it);
  }
  // The worker writes -1 (or null) when it did not compare the outputs.
  if (r.max_abs_err && !(*r.max_abs_err >= 0)) r.max_abs_err.reset();
  auto v = j.find("v");
  r.v = v != j.end() && v->is_number_integer() ? v->get<int>() : 1;
  for (const auto& [key, value] : j.items())
    if (!typed(key)) r.raw[key] = value;
  if (r.status != VerdictStatus::kCorrect && r.feedback.empty() && !r.reasons.empty()) r.feedback = r.reasons.front();
  return r;
}

}  // namespace mk::eval
