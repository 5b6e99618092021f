// The top of the report, before its first section: report.md's list of
// facts, report.html's line under the title and its key-figure tiles, and the
// banners both carry (test mode, PyTorch inside, a failed end-to-end check).
#include "eval/shapes.h"
#include "report/format.h"
#include "report/sections.h"

namespace mk::report {

using namespace doc;

namespace {

std::string budget_text(int64_t used, const std::optional<int64_t>& budget) {
  return human_count(static_cast<double>(used)) + (budget ? " of " + human_count(static_cast<double>(*budget)) : "");
}

std::string status_word(const ReportData& s) {
  if (!s.ended) return "in progress (or stopped without a run_end event)";
  return s.end_status.empty() ? "ended" : s.end_status;
}

// Why the end-to-end check failed, in terms of subkernels.
std::string traceability_detail(const ReportData& s) {
  if (!s.failing_locally.empty())
    return (s.failing_locally.size() > 1 ? "Subkernels failing their own checks: "
                                         : "Subkernel failing its own check: ") +
           joined(s.failing_locally) + ".";
  return "Every subkernel passes its own check, so the failure comes from composing them "
         "(for example a layout, dtype or parameter mismatch between subproblems).";
}

std::string pytorch_detail(const ReportData& s) {
  if (s.pytorch_subkernels.empty()) return "The search reports that the final solution runs PyTorch code.";
  return "Subkernel" + std::string(s.pytorch_subkernels.size() > 1 ? "s" : "") +
         " running PyTorch code: " + joined(s.pytorch_subkernels) + ".";
}

/// The worker's CPU test mode: no GPU, PyTorch stand-ins pass as kernels.
bool test_mode(const ReportData& s) {
  if (auto it = s.config.find("test_cpu");
      s.config.is_object() && it != s.config.end() && it->is_boolean() && it->get<bool>())
    return true;
  const std::string gpu = vstr(s.versions, "gpu");
  return gpu.find("test mode") != std::string::npos;
}

std::string test_mode_text() {
  return "TEST MODE: evaluated on the CPU by the worker's test mode, where PyTorch stand-ins pass as kernels and "
         "nothing runs on a GPU. Its correctness and speedups say nothing about GPU kernels.";
}

/// The LLM the run used: its spec, the judge's, and the endpoint override.
std::string llm_text(const ReportData& s) {
  if (!s.config.is_object()) return "";
  auto text = [&](const char* k) {
    auto it = s.config.find(k);
    return it != s.config.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::string spec = text("llm"), judge = text("judge"), base = text("base_url");
  if (spec.empty()) return "";
  std::string out = spec;
  if (!base.empty()) out += " at " + base;
  if (!judge.empty()) out += "; cheat judge " + judge;
  return out;
}

/// Where the best figure comes from: the final check's own timing, or the
/// search's when no final check passed with a measurement ("" : no best).
std::string best_source_text(const ReportData& s) {
  if (!s.best_speedup_compile || s.best_t < 0) return "";
  const std::string it = "iteration " + std::to_string(s.best_t);
  if (s.best_from_final_check)
    return it + "; measured by the final check, fresh seed " + std::to_string(s.final_check.seed) +
           (s.best_search_speedup_compile && *s.best_search_speedup_compile > 0
                ? "; the search measured " + speedup(s.best_search_speedup_compile)
                : "");
  return it + "; as the search measured it" +
         (s.final_check.result.empty() ? ", no final check" : ", not re-measured by the final check");
}

/// Why the speedup vs torch.compile is "—" though a correct end-to-end kernel
/// exists: no baseline was measured ("" when it is known or nothing is correct).
std::string no_compile_baseline_text(const ReportData& s) {
  if (s.final_e2e_status == "correct" && !known(s.final_speedup_compile) && !known(s.best_speedup_compile))
    return "no torch.compile baseline on this machine";
  return "";
}

/// What the cheat judge did, or plainly that none ran.
std::string judge_text(const ReportData& s) {
  const auto& e = s.judged_on_entry;
  const auto& b = s.judged_after_beam;
  const auto& f = s.judged_final;
  if (s.judge_spec.empty() && e.asked + b.asked + f.asked == 0)
    return "none ran (no --judge): kernels were accepted on the evaluator's static and runtime checks alone";
  auto looks = [](const ReportData::JudgeLooks& l, const char* what) {
    return std::to_string(l.asked) + " " + what + " (" + std::to_string(l.cheats) + " called cheating)";
  };
  return (s.judge_spec.empty() ? std::string("an LLM judge") : s.judge_spec) + ": " +
         looks(e, "candidates on entry into a beam") + ", " + looks(b, "second looks after a beam search") + ", " +
         looks(f, "kernels at the final check");
}

/// report.md's list of facts; report.html shows them in its subtitle, tiles and footer.
Block facts(const ReportData& s, const std::optional<eval::ShapesRecord>& shapes) {
  List l;
  auto fact = [&](Text t) { l.items.push_back(std::move(t)); };
  fact({words("Method: "), value(s.method.empty() ? "unknown" : s.method)});
  fact({words("Status: "), value(status_word(s) + (s.end_message.empty() ? "" : " (" + s.end_message + ")"))});
  const std::string source = best_source_text(s), no_baseline = no_compile_baseline_text(s);
  fact({words("Best end-to-end speedup vs torch.compile: "),
        value(speedup(s.best_speedup_compile) + (!no_baseline.empty() ? " (" + no_baseline + ")"
                                                 : source.empty()     ? ""
                                                                      : " (" + source + ")"))});
  fact({words("Final end-to-end: "),
        value((s.final_e2e_status.empty() ? std::string("not evaluated") : s.final_e2e_status) + ", " +
              speedup(s.final_speedup_compile) + " vs torch.compile, " + speedup(s.final_speedup_eager) +
              " vs eager, " + ms(s.final_runtime_ms) + " ms")});
  if (!s.final_check.result.empty()) fact({words("Final check: "), value(s.final_check.text())});
  if (shapes) fact({words("Holds at: "), one_line(shapes->holds_at_text())});
  fact({words(kUnknownLegend)});
  if (s.final_speedup_compile_tf32)
    fact({words("Final check vs torch.compile with TF32 on (--baseline-tf32): "),
          value(speedup(s.final_speedup_compile_tf32)),
          words(" (the TF32-off figure above is the one the search rewards)")});
  fact({words("LLM: "),
        value(human_count(static_cast<double>(s.llm_total.calls)) + " calls" +
              (s.max_calls ? " (" + budget_text(s.llm_total.kernel_calls, s.max_calls) +
                                 " in the kernel budget; decompose, split, fuse and judge calls are outside it)"
                           : std::string()) +
              ", " + budget_text(s.llm_total.total(), s.max_tokens) + " tokens" +
              (s.llm_total.estimated ? " (some estimated)" : ""))});
  if (std::string t = llm_text(s); !t.empty()) fact({words("Model: "), one_line(t)});
  fact({words("Cheat judge: "), one_line(judge_text(s))});
  if (!s.solution_dir.empty()) fact({words("Solution: "), styled(value(s.solution_dir), Span::Style::kCode)});
  if (s.resumes) fact({words("Resumed " + std::to_string(s.resumes) + " time" + (s.resumes > 1 ? "s" : ""))});
  for (const auto& c : s.llm_changes) fact({words("LLM changed on resume (--allow-llm-change): "), one_line(c)});
  return md_only(Block{std::move(l)});
}

/// report.html's tiles of key figures; report.md has these in its list of facts.
Block key_figures(const ReportData& s) {
  using Tone = KeyFigures::Tone;
  KeyFigures k;
  const std::string no_baseline = no_compile_baseline_text(s);
  k.tiles.push_back({"Best vs torch.compile", speedup(s.best_speedup_compile),
                     s.best_t >= 0 && s.best_speedup_compile ? best_source_text(s)
                     : !no_baseline.empty()                  ? no_baseline
                                                             : "no correct end-to-end kernel",
                     !s.best_speedup_compile        ? Tone::kBad
                     : *s.best_speedup_compile >= 1 ? Tone::kGood
                                                    : Tone::kPlain});
  const bool correct = s.final_e2e_status == "correct";
  k.tiles.push_back(
      {"Final end-to-end",
       correct                      ? speedup(s.final_speedup_compile)
       : s.final_e2e_status.empty() ? "\u2014"
                                    : "\u2717",
       s.final_e2e_status.empty() ? "not evaluated"
       : !correct                 ? s.final_e2e_status
                                  : "correct \u00b7 " + speedup(s.final_speedup_eager) + " vs eager" +
                        (s.final_speedup_compile_tf32
                             ? " \u00b7 " + speedup(s.final_speedup_compile_tf32) + " vs torch.compile with TF32 on"
                             : std::string()),
       correct ? Tone::kPlain : Tone::kBad});
  if (const auto& fc = s.final_check; !fc.result.empty())
    k.tiles.push_back({"Final check",
                       fc.result == "passed"       ? "passed"
                       : fc.result == "no_verdict" ? "no verdict"
                       : fc.result == "incomplete" ? "not finished"
                                                   : "failed",
                       fc.text(),
                       fc.result == "passed"   ? Tone::kGood
                       : fc.result == "failed" ? Tone::kBad
                                               : Tone::kWarn});
  k.tiles.push_back({"Run status", s.ended ? (s.end_status.empty() ? "ended" : s.end_status) : "in progress",
                     s.end_message.empty() ? (s.ended ? "" : "no run_end event yet") : s.end_message,
                     s.end_status == "finished" ? Tone::kGood
                     : s.end_status == "failed" ? Tone::kBad
                                                : Tone::kWarn});
  k.tiles.push_back({"LLM", human_count(static_cast<double>(s.llm_total.total())) + " tokens",
                     std::to_string(s.llm_total.calls) + " calls" +
                         // The budget counts kernel calls only, never all calls against it.
                         (s.max_calls ? " \u00b7 " + std::to_string(s.llm_total.kernel_calls) + " of " +
                                            std::to_string(*s.max_calls) + " in the kernel budget"
                                      : "") +
                         (s.max_tokens ? " \u00b7 budget " + human_count(static_cast<double>(*s.max_tokens)) : "") +
                         (s.llm_total.estimated ? " \u00b7 some estimated" : "") +
                         (s.reuse.empty() ? "" : " \u00b7 " + std::to_string(s.calls_saved()) + " saved by reuse")});
  const bool judged = !s.judge_spec.empty() || s.judged_on_entry.asked + s.judged_after_beam.asked > 0;
  k.tiles.push_back({"Cheat judge", judged ? "ran" : "none", judge_text(s), judged ? Tone::kPlain : Tone::kWarn});
  return html_only(Block{std::move(k)});
}

}  // namespace

Text subtitle(const ReportData& s) {
  const size_t n = s.iterations.size();
  Text t = {words("Method "), styled(value(s.method.empty() ? "unknown" : s.method), Span::Style::kStrong),
            words(" \u00b7 " + std::to_string(n) + " iteration" + (n == 1 ? "" : "s") + " \u00b7 " +
                  std::to_string(s.events) + " events" +
                  (s.resumes ? " \u00b7 resumed " + std::to_string(s.resumes) + "\u00d7" : ""))};
  if (!s.solution_dir.empty())
    t.insert(t.end(), {words(" \u00b7 solution in "), styled(value(s.solution_dir), Span::Style::kCode)});
  if (std::string m = llm_text(s); !m.empty())
    t.insert(t.end(), {words(" \u00b7 model "), styled(value(m), Span::Style::kStrong)});
  return t;
}

std::vector<Block> preface(const ReportData& s, const std::optional<eval::ShapesRecord>& shapes) {
  std::vector<Block> out = {facts(s, shapes)};
  if (test_mode(s)) out.push_back({Banner{Banner::Kind::kAlert, test_mode_text()}});
  out.push_back(key_figures(s));
  if (s.contains_pytorch)
    out.push_back({Banner{Banner::Kind::kWarning, "Contains PyTorch subkernels: not pure Triton.", pytorch_detail(s)}});
  if (s.final_e2e_failed)
    out.push_back(
        {Banner{Banner::Kind::kFailure, "The final end-to-end evaluation failed (" + s.final_e2e_status + ").",
                traceability_detail(s)}});
  return out;
}

}  // namespace mk::report
