#include "eval/protocol.h"

#include <cmath>

#include "util/env.h"

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
              {"shapes", o.shapes},
              {"test_cpu", o.test_cpu},
              {"timing", o.timing},
              {"plain_env", o.plain_env},
              {"compile_timeout_s", o.compile_timeout_s},
              {"profile_ncu", o.profile == "ncu"},
              {"baselines", false},
              {"calibrated", o.calibrated},
              {"tf32", o.tf32},
              {"input_layouts", o.input_layouts}};
}

namespace {

std::string string_or(const json& j, const char* key, std::string def = {}) {
  auto it = j.find(key);
  if (it != j.end() && it->is_string()) return it->get<std::string>();
  return def;
}

// An error answer's fields besides the envelope and what the verdict says
// itself (kept in raw, as every field the Verdict does not type).
json untyped(const json& msg) {
  json out = json::object();
  for (const auto& [k, v] : msg.items())
    if (k != "id" && k != "type" && k != "message" && k != "kind") out[k] = v;
  return out;
}

}  // namespace

Verdict pool_failure(VerdictStatus status, std::string kind, std::string message) {
  Verdict r;
  r.status = status;
  r.kind = std::move(kind);
  r.feedback = message;
  r.reasons.push_back(std::move(message));
  return r;
}

namespace {
/// Every string in j with the known secrets hidden (util/env.h).
void redact_strings(json& j) {
  if (j.is_string()) {
    j = redact_secrets(j.get<std::string>());
  } else if (j.is_object() || j.is_array()) {
    for (auto& v : j) redact_strings(v);
  }
}
}  // namespace

Verdict redacted(Verdict v) {
  v.feedback = redact_secrets(std::move(v.feedback));
  v.kind = redact_secrets(std::move(v.kind));
  for (auto& r : v.reasons) r = redact_secrets(std::move(r));
  redact_strings(v.raw);
  return v;
}

Verdict parse_eval_result(const json& msg) { return redacted(parse_eval_answer(msg)); }

Verdict parse_eval_answer(const json& msg) {
  if (!msg.is_object()) return pool_failure(VerdictStatus::kCrashed, "protocol_error", "the worker's answer is not a JSON object");
  std::string type = string_or(msg, "type");
  if (type == "error") {
    std::string m = string_or(msg, "message", "(no message)");
    // The problem's own fault (its reference raised, its declaration is
    // wrong): said as the worker words it, naming the file.
    if (string_or(msg, "kind") == "problem_error") {
      Verdict r = pool_failure(VerdictStatus::kCrashed, "problem_error", m);
      r.raw = untyped(msg);
      return r;
    }
    Verdict r = pool_failure(VerdictStatus::kCrashed, "worker_error", "the worker reported an error: " + m);
    r.raw = untyped(msg);
    return r;
  }
  // Accept the fields either at the top level (protocol v1) or nested in "result".
  const json& body = (msg.contains("result") && msg["result"].is_object()) ? msg["result"] : msg;
  auto v = Verdict::from_json(body);
  if (!v) {
    Verdict r = pool_failure(VerdictStatus::kCrashed, "protocol_error", "the worker's result: " + v.error());
    r.raw = untyped(body);
    return r;
  }
  // The pool sets these; a worker's copy would stand for a measurement it did not make.
  v->cached = false;
  v->clear_pool_clocks();
  return std::move(*v);
}

}  // namespace mk::eval
