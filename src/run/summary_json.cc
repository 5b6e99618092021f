#include "run/summary_json.h"

#include <algorithm>
#include <cmath>

#include "eval/verdict.h"
#include "rundir/critical_path.h"
#include "records/tally.h"
#include "records/events.h"
#include "util/fs.h"

namespace mk::run {

bool summary_says_finished(const std::filesystem::path& run_dir) {
  auto text = read_file(run_dir / "summary.json");
  if (!text) return false;
  auto o = outcome_from_summary(nlohmann::json::parse(*text, nullptr, false));
  return o && o->status == "finished";
}

Result<Outcome> outcome_from_summary(const nlohmann::json& s) {
  if (!s.is_object()) return Error{"summary is not a JSON object"};
  // What makes it a summary at all: these four, of these types.
  for (auto [key, is_type, type] : {std::tuple{"problem_id", &nlohmann::json::is_string, "a string"},
                                    std::tuple{"method", &nlohmann::json::is_string, "a string"},
                                    std::tuple{"status", &nlohmann::json::is_string, "a string"},
                                    std::tuple{"correct", &nlohmann::json::is_boolean, "true or false"}}) {
    auto it = s.find(key);
    if (it == s.end()) return Error{std::string("summary lacks \"") + key + "\""};
    if (!((*it).*is_type)()) return Error{std::string("summary's \"") + key + "\" is not " + type};
  }
  Outcome o;
  records::read_fields(s, o);  // the rest is read tolerantly: what is missing or mistyped is unknown
  if (o.problem_name.empty()) o.problem_name = o.problem_id;
  if (!o.correct) o.speedup_compile = o.speedup_eager = o.speedup_compile_tf32 = std::nullopt;
  if (o.speedup_compile_tf32 && !(*o.speedup_compile_tf32 > 0)) o.speedup_compile_tf32 = std::nullopt;
  if (auto it = s.find("tokens"); it != s.end() && it->is_number()) o.tokens = it->get<int64_t>();  // an older file
  for (auto& p : o.timeline)
    if (!p.correct) p.speedup_compile = p.speedup_eager = std::nullopt;
  std::stable_sort(o.timeline.begin(), o.timeline.end(),
                   [](const TimelinePoint& a, const TimelinePoint& b) { return a.calls < b.calls; });
  return o;
}

nlohmann::json summary_to_json(const Outcome& o) {
  nlohmann::json j = records::write_fields(o);
  // Test mode lets PyTorch stand-ins pass as kernels: whether the solution
  // uses PyTorch is not known there, so it is not claimed either way.
  if (o.test_mode) {
    j["uses_pytorch"] = nullptr;
    j["test_mode_note"] = kTestModeNote;
  }
  return j;
}

Outcome outcome_from_events(const records::Log& events, const SummaryInfo& info) {
  Outcome o;
  o.problem_id = info.problem_id;
  o.problem_name = info.problem_name.empty() ? info.problem_id : info.problem_name;
  o.method = info.method;

  records::LlmTally llm;   // as report.md and the status line count calls and tokens
  records::BestSoFar best;  // as they tell the best solution
  double best_eager = 0;
  // Eager speedups of correct whole-problem evaluations, by their compile speedup,
  // so a "best" event (which carries only the compile speedup) finds its eager one.
  std::vector<std::pair<double, double>> whole;
  std::optional<records::RunEnd> end;

  auto known = [](double x) { return x > 0 ? std::optional<double>(x) : std::nullopt; };
  auto push_point = [&] {
    TimelinePoint p{llm.calls, llm.total(), best.correct,
                    best.correct ? known(best.speedup_compile.value_or(0)) : std::nullopt,
                    best.correct ? known(best_eager) : std::nullopt};
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
    std::visit(
        records::Visit{
            [&](const records::LlmCall& c) { llm.add(c); },
            [&](const records::Eval& ev) {
              const bool is_whole = ev.e2e || ev.task == info.problem_name;
              if (is_whole && ev.status == "correct")
                whole.emplace_back(ev.speedup_compile.value_or(0), ev.speedup_eager.value_or(0));
            },
            [&](const records::Best& b) {
              if (!b.correct) return;  // an older log's placeholder: no solution
              best.add(b);
              const double compile = best.speedup_compile.value_or(0);
              best_eager = 0;
              for (auto it = whole.rbegin(); it != whole.rend(); ++it)
                if (std::fabs(it->first - compile) <= 1e-9 * std::max(1.0, compile)) {
                  best_eager = it->second;
                  break;
                }
              push_point();
            },
            [&](const records::Swap& sw) { best.add(sw); },
            [&](const records::Iteration&) { push_point(); },
            [&](const records::FinalCheck& fc) {
              if (fc.passed) tf32 = fc.speedup_compile_tf32.value_or(0);
            },
            [&](const records::RunEnd& r) {
              end = r;
              best.add(r);  // in order: a later swap (mkevolve swap) has the last word on PyTorch subkernels
            },
            [&](const records::Resume&) { end.reset(); },  // a later run_end (of the resumed process) decides
            [](const auto&) {}},
        e);
  }

  std::string status = "interrupted";
  if (end) {
    const std::string& s = end->status;
    if (s == "ok" || s == "no_correct" || s == "finished") status = "finished";
    else if (s == "interrupted") status = "interrupted";
    else {
      status = "failed";
      o.error = end->message;
      if (o.error.empty()) o.error = s.empty() ? "the run ended without a status" : "the run ended with status " + s;
    }
    if (end->solution.is_object() && end->solution.contains("e2e")) {
      if (auto sol_e2e = eval::Verdict::from_json(end->solution["e2e"]); sol_e2e && sol_e2e->speedup_eager > 0)
        best_eager = sol_e2e->speedup_eager;
    }
    // Calls and tokens are the log's own llm_call records, never run_end's
    // accounting (a resumed process's tally differs from what the log holds).
    push_point();
  }
  if (!info.status.empty()) status = info.status;
  if (!info.error.empty()) o.error = info.error;
  o.status = status;
  o.correct = status == "finished" && best.correct;
  o.speedup_compile = o.correct ? known(best.speedup_compile.value_or(0)) : std::nullopt;
  o.speedup_eager = o.correct ? known(best_eager) : std::nullopt;
  o.speedup_compile_tf32 = o.correct ? known(tf32) : std::nullopt;
  o.uses_pytorch = o.correct && best.contains_pytorch && !info.test_mode;
  o.test_mode = info.test_mode;
  o.calls = llm.calls;
  o.tokens = llm.total();
  o.time = rundir::time_account(events).to_json();
  const auto fc = records::final_check_outcome(events);
  o.final_check = fc.to_json();
  if (o.correct) {
    // The returned solution's figures are its passing final check's own
    // timing where that was recorded (run_end carries the same since the
    // search takes them over); older logs keep the search's.
    if (fc.result == "passed" && fc.speedup_compile) {
      o.speedup_compile = known(*fc.speedup_compile);
      if (fc.speedup_eager) o.speedup_eager = known(*fc.speedup_eager);
      o.speedup_measured_by = "final_check";
    } else {
      o.speedup_measured_by = "search";
    }
  }
  return o;
}

}  // namespace mk::run
