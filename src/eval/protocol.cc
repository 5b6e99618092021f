#include "eval/protocol.h"

#include <cmath>

namespace mk::eval {

using nlohmann::json;

json options_to_json(const EvalOptions& o) {
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  return json{{"trials", o.trials},
              {"warmup", o.warmup},
              {"perf_trials", o.perf_trials},
              {"atol", opt(o.atol)},
              {"rtol", opt(o.rtol)},
              {"pass_rate", opt(o.pass_rate)},
              {"trials_dist", o.trials_dist},
              {"seed", o.seed},
              {"perf", o.measure_perf},
              {"timeout_s", o.timeout_s},
              {"allow_pytorch", o.allow_pytorch},
              {"test_cpu", o.test_cpu},
              {"timing", o.timing},
              {"compile_timeout_s", o.compile_timeout_s},
              {"profile_ncu", o.profile == "ncu"},
              {"baselines", false},
              {"calibrated", o.calibrated},
              {"tf32", o.tf32}};
}

namespace {

std::optional<double> number(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  double v = it->get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::string string_or(const json& j, const char* key, std::string def = {}) {
  auto it = j.find(key);
  if (it != j.end() && it->is_string()) return it->get<std::string>();
  return def;
}

}  // namespace

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

EvalResult pool_failure(Status status, std::string kind, std::string message) {
  EvalResult r;
  r.status = status;
  r.kind = std::move(kind);
  r.feedback = message;
  r.reasons.push_back(std::move(message));
  return r;
}

EvalResult parse_eval_result(const json& msg) {
  if (!msg.is_object()) return pool_failure(Status::kCrashed, "protocol_error", "the worker's answer is not a JSON object");
  std::string type = string_or(msg, "type");
  if (type == "error") {
    std::string m = string_or(msg, "message", "(no message)");
    // The problem's own fault (its reference raised, its declaration is
    // wrong): said as the worker words it, naming the file.
    if (string_or(msg, "kind") == "problem_error") {
      EvalResult r = pool_failure(Status::kCrashed, "problem_error", m);
      r.raw = msg;
      return r;
    }
    EvalResult r = pool_failure(Status::kCrashed, "worker_error", "the worker reported an error: " + m);
    r.raw = msg;
    return r;
  }
  // Accept the fields either at the top level (protocol v1) or nested in "result".
  const json& body = (msg.contains("result") && msg["result"].is_object()) ? msg["result"] : msg;
  std::string status_text = string_or(body, "status");
  auto status = status_from_string(status_text);
  if (!status) {
    EvalResult r = pool_failure(Status::kCrashed, "protocol_error",
                                status_text.empty() ? "the worker's result has no status"
                                                    : "the worker's result has an unknown status '" + status_text + "'");
    r.raw = msg;
    return r;
  }
  EvalResult r;
  r.status = *status;
  r.kind = string_or(body, "kind");
  if (auto it = body.find("reasons"); it != body.end() && it->is_array())
    for (const auto& x : *it) r.reasons.push_back(reason_line(x));
  r.feedback = string_or(body, "message");
  if (r.feedback.empty()) r.feedback = string_or(body, "feedback");
  if (auto it = body.find("runtime_ms"); it != body.end()) r.runtime = parse_timing(*it);
  if (auto it = body.find("baseline_ms"); it != body.end() && it->is_object()) {
    if (it->contains("eager")) r.eager = parse_timing((*it)["eager"]);
    if (it->contains("compile")) r.compiled = parse_timing((*it)["compile"]);
  }
  if (auto v = number(body, "max_abs_err")) r.max_abs_err = *v;
  if (auto it = body.find("uses_pytorch"); it != body.end() && it->is_boolean()) r.uses_pytorch = it->get<bool>();
  r.raw = body;
  if (r.status != Status::kCorrect && r.feedback.empty() && !r.reasons.empty()) r.feedback = r.reasons.front();
  return r;
}

namespace {
json timing_json(const Timing& t) {
  if (!t.valid) return nullptr;
  return json{{"median_ms", t.median_ms}, {"mean_ms", t.mean_ms}};
}
}  // namespace

json to_json(const EvalResult& r) {
  return json{{"status", to_string(r.status)},
              {"kind", r.kind},
              {"reasons", r.reasons},
              {"feedback", r.feedback},
              {"runtime", timing_json(r.runtime)},
              {"eager", timing_json(r.eager)},
              {"compiled", timing_json(r.compiled)},
              {"speedup_eager", r.speedup_eager},
              {"speedup_compile", r.speedup_compile},
              {"compiled_tf32", timing_json(r.compiled_tf32)},
              {"speedup_compile_tf32", r.speedup_compile_tf32},
              {"max_abs_err", r.max_abs_err},
              {"uses_pytorch", r.uses_pytorch},
              {"gpu", r.gpu},
              {"raw", r.raw}};
}

EvalResult eval_result_from_json(const json& j) {
  if (!j.is_object()) return pool_failure(Status::kCrashed, "cache_error", "cached result is not an object");
  auto status = status_from_string(string_or(j, "status"));
  if (!status) return pool_failure(Status::kCrashed, "cache_error", "cached result has no valid status");
  EvalResult r;
  r.status = *status;
  r.kind = string_or(j, "kind");
  if (auto it = j.find("reasons"); it != j.end() && it->is_array())
    for (const auto& x : *it) r.reasons.push_back(reason_line(x));
  r.feedback = string_or(j, "feedback");
  if (auto it = j.find("runtime"); it != j.end()) r.runtime = parse_timing(*it);
  if (auto it = j.find("eager"); it != j.end()) r.eager = parse_timing(*it);
  if (auto it = j.find("compiled"); it != j.end()) r.compiled = parse_timing(*it);
  r.speedup_eager = number(j, "speedup_eager").value_or(0);
  r.speedup_compile = number(j, "speedup_compile").value_or(0);
  if (auto it = j.find("compiled_tf32"); it != j.end()) r.compiled_tf32 = parse_timing(*it);
  r.speedup_compile_tf32 = number(j, "speedup_compile_tf32").value_or(0);
  r.max_abs_err = number(j, "max_abs_err").value_or(0);
  if (auto it = j.find("uses_pytorch"); it != j.end() && it->is_boolean()) r.uses_pytorch = it->get<bool>();
  if (auto it = j.find("gpu"); it != j.end() && it->is_number_integer()) r.gpu = it->get<int>();
  if (auto it = j.find("raw"); it != j.end()) r.raw = *it;
  return r;
}

}  // namespace mk::eval
