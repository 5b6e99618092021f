#include "bench/summary.h"

#include <cmath>

#include "run/critical_path.h"

namespace mk::bench {

namespace {

// Tokens of one llm_call event: the sum of its usage (schema: src/run/events.h).
int64_t call_tokens(const nlohmann::json& e) {
  if (!e.contains("usage")) return 0;
  const auto& t = e["usage"];
  if (!t.is_object()) return 0;
  int64_t s = 0;
  for (const char* k : {"input", "output", "cache_read", "cache_write"})
    if (t.contains(k) && t[k].is_number()) s += t[k].get<int64_t>();
  return s;
}

double num(const nlohmann::json& e, const char* k) {
  if (!e.is_object() || !e.contains(k) || !e[k].is_number()) return 0;
  return e[k].get<double>();
}

}  // namespace

Outcome outcome_from_events(const std::vector<nlohmann::json>& events, const SummaryInfo& info) {
  Outcome o;
  o.problem_id = info.problem_id;
  o.problem_name = info.problem_name.empty() ? info.problem_id : info.problem_name;
  o.method = info.method;

  int64_t calls = 0, tokens = 0;
  bool best_correct = false, best_pytorch = false;
  double best_compile = 0, best_eager = 0;
  // Eager speedups of correct whole-problem evaluations, by their compile speedup,
  // so a "best" event (which carries only the compile speedup) finds its eager one.
  std::vector<std::pair<double, double>> whole;
  const nlohmann::json* end = nullptr;

  auto push_point = [&] {
    TimelinePoint p{calls, tokens, best_correct, best_correct ? best_compile : 0, best_correct ? best_eager : 0};
    if (!o.timeline.empty()) {
      auto& last = o.timeline.back();
      if (last.correct == p.correct && last.speedup_compile == p.speedup_compile &&
          last.speedup_eager == p.speedup_eager) {
        return;  // nothing new: the earlier point already says it
      }
      if (last.calls == p.calls) {
        last = p;
        return;
      }
    }
    o.timeline.push_back(p);
  };

  double tf32 = 0;  // --baseline-tf32: the passing final check's speedup vs torch.compile with TF32 on
  for (const auto& e : events) {
    if (!e.is_object()) continue;
    const std::string type = e.value("type", "");
    if (type == "llm_call") {
      ++calls;
      tokens += call_tokens(e);
    } else if (type == "eval") {
      const bool is_whole = e.value("e2e", false) || e.value("task", "") == info.problem_name;
      if (is_whole && e.value("status", "") == "correct")
        whole.emplace_back(num(e, "speedup_compile"), num(e, "speedup_eager"));
    } else if (type == "best") {
      best_correct = e.value("correct", false);
      best_compile = num(e, "speedup_compile");
      best_pytorch = e.value("contains_pytorch_subkernels", false);
      best_eager = 0;
      for (auto it = whole.rbegin(); it != whole.rend(); ++it)
        if (std::fabs(it->first - best_compile) <= 1e-9 * std::max(1.0, best_compile)) {
          best_eager = it->second;
          break;
        }
      push_point();
    } else if (type == "iteration") {
      push_point();
    } else if (type == "final_check") {
      if (e.value("passed", false)) tf32 = num(e, "speedup_compile_tf32");
    } else if (type == "run_end") {
      end = &e;
    } else if (type == "resume") {
      end = nullptr;  // a later run_end (of the resumed process) decides
    }
  }

  std::string status = "interrupted";
  if (end) {
    const std::string s = end->value("status", "");
    if (s == "ok" || s == "no_correct" || s == "finished") status = "finished";
    else if (s == "interrupted") status = "interrupted";
    else {
      status = "failed";
      o.error = end->is_object() && (*end).contains("message") && (*end)["message"].is_string()
                    ? (*end)["message"].get<std::string>()
                    : std::string();
      if (o.error.empty()) o.error = s.empty() ? "the run ended without a status" : "the run ended with status " + s;
    }
    if (end->contains("correct")) best_correct = end->value("correct", false);
    if (end->contains("best_speedup_compile")) best_compile = num(*end, "best_speedup_compile");
    if (end->contains("contains_pytorch_subkernels")) best_pytorch = end->value("contains_pytorch_subkernels", false);
    if (end->contains("solution") && (*end)["solution"].contains("e2e")) {
      const auto& sol_e2e = (*end)["solution"]["e2e"];
      if (num(sol_e2e, "speedup_eager") > 0) best_eager = num(sol_e2e, "speedup_eager");
    }
    if (end->contains("accounting") && (*end)["accounting"].is_object()) {
      const auto& a = (*end)["accounting"];
      if (a.contains("calls") && a["calls"].is_number()) calls = std::max(calls, a["calls"].get<int64_t>());
      if (a.contains("tokens") && a["tokens"].is_number()) tokens = std::max(tokens, a["tokens"].get<int64_t>());
    }
    push_point();
  }
  if (!info.status.empty()) status = info.status;
  if (!info.error.empty()) o.error = info.error;
  o.status = status;
  o.correct = status == "finished" && best_correct;
  o.speedup_compile = o.correct ? best_compile : 0;
  o.speedup_eager = o.correct ? best_eager : 0;
  o.speedup_compile_tf32 = o.correct ? tf32 : 0;
  o.uses_pytorch = o.correct && best_pytorch;
  o.calls = calls;
  o.tokens = tokens;
  o.time = run::time_account(events).to_json();
  return o;
}

}  // namespace mk::bench
