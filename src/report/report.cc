#include "report/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "eval/shapes.h"
#include "report/charts.h"
#include "report/svg.h"
#include "rundir/event_log.h"
#include "records/events.h"
#include "util/fs.h"

namespace mk::report {

namespace fs = std::filesystem;
using nlohmann::json;
using svg::escape;
using svg::num;

namespace {

std::string fixed2(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}
// 0 is what an incorrect kernel, or one without a torch.compile baseline, scores: no speed to show.
std::string speedup(const std::optional<double>& v) {
  return v && std::isfinite(*v) && *v > 0 ? fixed2(*v) + "\u00d7" : "\u2014";
}

// 1234567 -> "1,234,567"
std::string grouped(int64_t v) {
  std::string d = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return (v < 0 ? "-" : "") + out;
}
std::string ms(const std::optional<double>& v) { return v ? num(*v, *v < 1 ? 4 : 3) : "\u2014"; }
std::string pct(const std::optional<double>& v) { return v ? num(*v * 100, 1) + "%" : "\u2014"; }

std::string vstr(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "unknown";
  if (it->is_string()) return it->get<std::string>().empty() ? "unknown" : it->get<std::string>();
  return it->dump();
}

std::string md_cell(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

std::string joined(const std::vector<std::string>& v, const std::string& sep = ", ") {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

std::string status_word(const ReportData& s) {
  if (!s.ended) return "in progress (or stopped without a run_end event)";
  return s.end_status.empty() ? "ended" : s.end_status;
}

std::string tokens_note(const records::LlmTally& t) {
  return human_count(static_cast<double>(t.total())) + (t.estimated ? " (some estimated)" : "");
}

std::string budget_text(int64_t used, const std::optional<int64_t>& budget) {
  return human_count(static_cast<double>(used)) + (budget ? " of " + human_count(static_cast<double>(*budget)) : "");
}

std::string column_label(const StructureGrid& g, size_t c) {
  return "t=" + std::to_string(g.t[c]) + (g.change[c].empty() || g.change[c] == "unchanged" ? "" : " (" + g.change[c] + ")");
}

const char* grid_mark(StructureGrid::Cell c) {
  switch (c) {
    case StructureGrid::kOk: return "\u2713";
    case StructureGrid::kFailed: return "\u2717";
    case StructureGrid::kNew: return "new";
    default: return "";
  }
}

// Why the end-to-end check failed, in terms of subkernels ("" when it did not fail).
std::string traceability_detail(const ReportData& s) {
  if (!s.final_e2e_failed) return "";
  if (!s.failing_locally.empty())
    return (s.failing_locally.size() > 1 ? "Subkernels failing their own checks: " : "Subkernel failing its own check: ") +
           joined(s.failing_locally) + ".";
  return "Every subkernel passes its own check, so the failure comes from composing them "
         "(for example a layout, dtype or parameter mismatch between subproblems).";
}

std::string traceability_text(const ReportData& s) {
  if (!s.final_e2e_failed) return "";
  return "The final end-to-end evaluation failed (" + s.final_e2e_status + "). " + traceability_detail(s);
}

std::string pytorch_detail(const ReportData& s) {
  if (s.pytorch_subkernels.empty()) return "The search reports that the final solution runs PyTorch code.";
  return "Subkernel" + std::string(s.pytorch_subkernels.size() > 1 ? "s" : "") + " running PyTorch code: " +
         joined(s.pytorch_subkernels) + ".";
}

std::string pytorch_text(const ReportData& s) {
  if (!s.contains_pytorch) return "";
  return "Contains PyTorch subkernels: not pure Triton. " + pytorch_detail(s);
}

/// The worker's CPU test mode: no GPU, PyTorch stand-ins pass as kernels.
bool test_mode(const ReportData& s) {
  if (auto it = s.config.find("test_cpu"); s.config.is_object() && it != s.config.end() && it->is_boolean() &&
                                             it->get<bool>())
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

/// mkevolve adapt: what the "Reused subkernels" sections of both reports say.
std::string reuse_lead() {
  return "This run adapted an earlier run to a variant of its problem (mkevolve adapt). Each subproblem of the "
         "variant that matches one of the earlier run's was checked with that run's verified subkernel first, with "
         "no LLM call; one that failed the check was evolved like a new subproblem.";
}
const char* kCallsSavedNote = "what the earlier run spent on the subkernels reused here, each counted once";

}  // namespace

std::string tf32_statement(const ReportData& s) {
  auto it = s.versions.find("tf32");
  bool on = it != s.versions.end() && it->is_boolean() && it->get<bool>();
  if (on)
    return "WARNING: TF32 was ON for this run (torch.backends.cuda.matmul.allow_tf32 / cudnn.allow_tf32), so fp32 "
           "results and baselines are not comparable with TF32-off runs.";
  return "TF32 is off for the PyTorch baselines (eager and torch.compile) and for the Triton kernels alike "
         "(torch.backends.cuda.matmul.allow_tf32 = False, torch.backends.cudnn.allow_tf32 = False; fp32 tl.dot in "
         "IEEE precision). Speedups are ratios of median runtimes on the same GPU.";
}

Result<ReportData> load_run(const fs::path& run_dir, std::vector<std::string>* warnings) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) return Error{run_dir.string() + ": no such run directory"};
  const fs::path log = run_dir / "events.jsonl";
  if (!fs::exists(log, ec)) return Error{run_dir.string() + " is not a run directory (no events.jsonl)"};
  auto events = rundir::read_event_log(log, warnings);
  if (!events) return Error{events.error()};
  auto read_json = [&](const char* name) -> json {
    fs::path p = run_dir / name;
    if (!fs::exists(p, ec)) {
      if (warnings) warnings->push_back(p.string() + " is missing; the report leaves it out");
      return json::object();
    }
    auto text = read_file(p);
    json j = text ? json::parse(*text, nullptr, false) : json();
    if (j.is_discarded() || !j.is_object()) {
      if (warnings) warnings->push_back(p.string() + " is not a JSON object; the report leaves it out");
      return json::object();
    }
    return j;
  };
  return summarize(*events, read_json("versions.json"), read_json("config.json"));
}

// ---------------------------------------------------------------- markdown

/// Wall time against the LLM critical path (rundir/critical_path.h), phase by phase.
static std::string time_section(const rundir::TimeAccount& t) {
  if (t.phases.empty()) return "";
  auto secs = [](std::optional<double> v) { return v ? fmt::format("{:.1f} s", *v) : std::string("\u2014"); };
  std::string md = "## Time\n\n";
  auto ra = t.ratio();
  md += "Wall time " + secs(t.wall_s) + ". LLM critical path: " +
        (t.llm_s ? fmt::format("{} rounds, {}", t.rounds, secs(t.llm_s)) : std::string("\u2014")) +
        " (the longest chain of LLM rounds that depend on one another, each as long as its slowest call). "
        "Wall time / critical path: " +
        (ra ? fmt::format("{:.2f}", *ra) : std::string("\u2014")) + ".\n\n";
  md += "The path is what each phase's wall time waited for: the slowest decomposition worker of each round, each "
        "split/fuse try, the subproblem whose beam rounds took longest (each round's slowest candidate: LLM calls, "
        "waiting for a slot, evaluating, baselines), then the end-to-end evaluations. Other: what the path does not "
        "explain.\n\n";
  md += "| phase | LLM rounds | LLM critical path | wall | path: LLM | evaluating | waiting for a slot | baselines | "
        "end-to-end | decomposition checks | other |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  auto row = [&](const std::string& label, int rounds, std::optional<double> llm, std::optional<double> wall,
                 const rundir::PathTimes& p) {
    std::optional<double> other;
    if (wall) other = *wall - p.sum();
    md += "| " + md_cell(label) + " | " + std::to_string(rounds) + " | " + secs(llm) + " | " + secs(wall) + " | " +
          secs(p.llm_s) + " | " + secs(p.eval_s) + " | " + secs(p.queued_s) + " | " + secs(p.baseline_s) + " | " +
          secs(p.e2e_s) + " | " + secs(p.verify_s) + " | " + secs(other) + " |\n";
  };
  for (const auto& p : t.phases) row(p.label, p.rounds, p.llm_s, p.wall_s, p.path);
  row("**run**", t.rounds, t.llm_s, t.wall_s, t.path);
  return md + "\n";
}

namespace {
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
/// The decomposition checks in one line: how many passed and failed, and for
/// those that passed the largest difference from the original and the bound
/// it was held to ("" : none logged).
std::string verification_text(const ReportData& s) {
  if (s.verifications.empty()) return "";
  int passed = 0, failed = 0;
  std::optional<double> worst;
  const nlohmann::json* bound = nullptr;
  for (const auto& v : s.verifications) {
    (v.ok ? passed : failed) += 1;
    if (!v.ok || !v.max_abs_err) continue;
    if (!worst || *v.max_abs_err >= *worst) {
      worst = v.max_abs_err;
      if (v.tolerance.is_object() && v.tolerance.contains("outputs") && v.tolerance["outputs"].is_array() &&
          !v.tolerance["outputs"].empty())
        bound = &v.tolerance["outputs"][0];
    }
  }
  char buf[64];
  std::string out = std::to_string(passed) + " passed, " + std::to_string(failed) + " failed";
  if (worst) {
    std::snprintf(buf, sizeof buf, "%.2g", *worst);
    out += std::string("; the largest difference from the original among those that passed: ") + buf;
    if (bound && (*bound).contains("atol") && (*bound)["atol"].is_number()) {
      std::snprintf(buf, sizeof buf, "atol %.2g + rtol %.2g", (*bound)["atol"].get<double>(),
                    (*bound).value("rtol", 0.0));
      out += std::string(" (allowed per element: ") + buf + " \u00d7 the original's magnitude, " +
             (*bound).value("dtype", std::string("its dtype")) + ", a fraction of the problem's tolerance)";
    }
  }
  return out;
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

/// One line for a composition_failure event: what failed and where it went.
std::string composition_failure_text(const records::CompositionFailure& f) {
  std::string what = "t=" + std::to_string(f.iteration) + ": " + f.status + (f.kind.empty() ? "" : " (" + f.kind + ")");
  if (f.action == "back_to_beam")
    return what + " inside subkernel " + f.task + " (" + f.candidate + "): sent back to its beam with this error";
  if (f.action == "total_fuse") return what + ", pointing into no one subkernel: TotalFuse, back to the whole problem";
  return what + ", pointing into no one subkernel (this method keeps its structure)";
}
}  // namespace

/// Why the speedup vs torch.compile is "—" though a correct end-to-end kernel
/// exists: no baseline was measured ("" when it is known or nothing is correct).
std::string no_compile_baseline_text(const ReportData& s) {
  if (s.final_e2e_status == "correct" && !known(s.final_speedup_compile) && !known(s.best_speedup_compile))
    return "no torch.compile baseline on this machine";
  return "";
}
constexpr const char* kUnknownLegend =
    "\u2014 means not known: no correct kernel, or no baseline measured (never 0\u00d7)";

/// The returned solution at each shape its final check ran it at (--shapes):
/// the benchmark's (timed), the variants it holds at, fails at (with the
/// error) and those the reference itself cannot run.
static std::string shapes_table(const eval::ShapesRecord& r) {
  std::string md = "## Shapes the returned solution holds at\n\n";
  md += "Verified at shape variants derived from the problem's size constants (--shapes " + md_cell(r.mode) +
        "); timing is at the benchmark's shape.\n\n| shape | holds at | error |\n|---|---|---|\n";
  md += "| benchmark" + (r.benchmark.empty() ? std::string() : " (" + md_cell(r.benchmark) + ")") +
        " | \u2713 (timed) | |\n";
  for (const auto& h : r.held) md += "| " + md_cell(h) + " | \u2713 | |\n";
  for (const auto& f : r.failed) md += "| " + md_cell(f.shape) + " | \u2717 fails | " + md_cell(f.error) + " |\n";
  for (const auto& k : r.skipped)
    md += "| " + md_cell(k.shape) + " | skipped: the reference cannot run it | " + md_cell(k.error) + " |\n";
  for (const auto& n : r.not_reached) md += "| " + md_cell(n) + " | not reached | |\n";
  if (r.held.empty() && r.failed.empty() && r.skipped.empty() && !r.error.empty())
    md += "| (no variant) | | " + md_cell(r.error) + " |\n";
  return md + "\n";
}

std::string render_markdown(const ReportData& s) {
  std::string md;
  md += "# MKEvolve report: " + (s.problem.empty() ? std::string("(unknown problem)") : s.problem) + "\n\n";
  md += "- Method: " + (s.method.empty() ? std::string("unknown") : s.method) + "\n";
  md += "- Status: " + status_word(s) + (s.end_message.empty() ? "" : " (" + s.end_message + ")") + "\n";
  const std::string source = best_source_text(s);
  const std::string no_baseline = no_compile_baseline_text(s);
  md += "- Best end-to-end speedup vs torch.compile: " + speedup(s.best_speedup_compile) +
        (!no_baseline.empty() ? " (" + no_baseline + ")" : source.empty() ? "" : " (" + source + ")") + "\n";
  md += "- Final end-to-end: " + (s.final_e2e_status.empty() ? std::string("not evaluated") : s.final_e2e_status) +
        ", " + speedup(s.final_speedup_compile) + " vs torch.compile, " + speedup(s.final_speedup_eager) +
        " vs eager, " + ms(s.final_runtime_ms) + " ms\n";
  if (!s.final_check.result.empty()) md += "- Final check: " + s.final_check.text() + "\n";
  const auto shapes = eval::ShapesRecord::from_json(s.final_check.shapes);
  if (shapes) md += "- Holds at: " + md_cell(shapes->holds_at_text()) + "\n";
  md += "- " + std::string(kUnknownLegend) + "\n";
  if (s.final_speedup_compile_tf32)
    md += "- Final check vs torch.compile with TF32 on (--baseline-tf32): " + speedup(s.final_speedup_compile_tf32) +
          " (the TF32-off figure above is the one the search rewards)\n";
  md += "- LLM: " + human_count(static_cast<double>(s.llm_total.calls)) + " calls" +
        (s.max_calls ? " (" + budget_text(s.llm_total.kernel_calls, s.max_calls) +
                           " in the kernel budget; decompose, split, fuse and judge calls are outside it)"
                     : std::string()) +
        ", " +
        budget_text(s.llm_total.total(), s.max_tokens) + " tokens" + (s.llm_total.estimated ? " (some estimated)" : "") +
        "\n";
  if (std::string t = llm_text(s); !t.empty()) md += "- Model: " + md_cell(t) + "\n";
  md += "- Cheat judge: " + md_cell(judge_text(s)) + "\n";
  if (!s.solution_dir.empty()) md += "- Solution: `" + s.solution_dir + "`\n";
  if (s.resumes) md += "- Resumed " + std::to_string(s.resumes) + " time" + (s.resumes > 1 ? "s" : "") + "\n";
  for (const auto& c : s.llm_changes) md += "- LLM changed on resume (--allow-llm-change): " + md_cell(c) + "\n";
  md += "\n";
  if (test_mode(s)) md += "> **" + test_mode_text() + "**\n\n";
  if (std::string t = pytorch_text(s); !t.empty()) md += "> **WARNING: " + t + "**\n\n";
  if (std::string t = traceability_text(s); !t.empty()) md += "> **" + t + "**\n\n";

  md += "## End-to-end speedup per iteration\n\n";
  if (s.iterations.empty()) {
    md += "No iteration has finished yet.\n\n";
  } else {
    md += "| t | status | vs torch.compile | vs eager | runtime (ms) | LLM calls | tokens |\n";
    md += "|---|---|---|---|---|---|---|\n";
    for (const auto& r : s.iterations)
      md += "| " + std::to_string(r.t) + " | " + (r.e2e_status == "correct" ? "\u2713 " : "\u2717 ") +
            md_cell(r.e2e_status) + " | " + speedup(r.speedup_compile) + " | " + speedup(r.speedup_eager) + " | " +
            ms(r.runtime_ms) + " | " + std::to_string(r.calls_used) + " | " + human_count(static_cast<double>(r.tokens)) +
            " |\n";
    md += "\n";

    md += "## Subkernel speedup per iteration (vs torch.compile; \u2717 = incorrect, blank = not in that iteration)\n\n";
    md += "| subkernel |";
    for (const auto& r : s.iterations) md += " t=" + std::to_string(r.t) + " |";
    md += "\n|---|";
    for (size_t i = 0; i < s.iterations.size(); ++i) md += "---|";
    md += "\n";
    for (const auto& name : s.subproblem_order) {
      bool any = false;
      for (const auto& r : s.iterations) any = any || r.subkernels.count(name);
      if (!any) continue;
      md += "| " + md_cell(name) + " |";
      for (const auto& r : s.iterations) {
        auto it = r.subkernels.find(name);
        if (it == r.subkernels.end()) md += " |";
        else if (!it->second.correct) md += " \u2717 |";
        else md += " " + speedup(it->second.speedup_compile) + " |";
      }
      md += "\n";
    }
    md += "| **end-to-end** |";
    for (const auto& r : s.iterations)
      md += std::string(" ") + (r.e2e_status == "correct" ? "**" + speedup(r.speedup_compile) + "**" : "\u2717") + " |";
    md += "\n\n";
  }

  md += "## Subproblem structure\n\n";
  const StructureGrid& g = s.grid;
  if (g.t.empty()) {
    md += "No decomposition recorded yet.\n\n";
  } else {
    md += "\u2713 correct subkernel, \u2717 incorrect, new = no kernel yet.\n\n| subproblem |";
    for (size_t c = 0; c < g.t.size(); ++c) md += " " + column_label(g, c) + " |";
    md += "\n|---|";
    for (size_t c = 0; c < g.t.size(); ++c) md += ":---:|";
    md += "\n";
    for (size_t r = 0; r < g.rows.size(); ++r) {
      auto note = s.lineage.find(g.rows[r]);
      md += "| " + md_cell(g.rows[r]) + (note != s.lineage.end() ? " (" + md_cell(note->second) + ")" : "") + " |";
      for (size_t c = 0; c < g.t.size(); ++c) md += std::string(" ") + grid_mark(g.cells[r][c]) + " |";
      md += "\n";
    }
    md += "\n";
    bool header = false;
    for (const auto& col : s.structure) {
      if (col.detail.empty()) continue;
      if (!header) md += "Changes:\n\n", header = true;
      md += "- t=" + std::to_string(col.iteration) + " " + col.change + ": " + col.detail + "\n";
    }
    if (header) md += "\n";
  }
  if (std::string v = verification_text(s); !v.empty())
    md += "Decomposition checks (the outputs against the original's, under the same seed): " + md_cell(v) + ".\n\n";
  if (!s.composition_failures.empty()) {
    md += "Compositions that failed while every subkernel passed its own checks:\n\n";
    for (const auto& f : s.composition_failures) md += "- " + md_cell(composition_failure_text(f)) + "\n";
    md += "\n";
  }

  md += "## Final subkernels\n\n";
  if (s.final_subkernels.empty()) {
    md += "None yet.\n\n";
  } else {
    // The roofline column only where some subkernel has one (a GPU run with work records).
    bool roof = false;
    const SubkernelRow* most = nullptr;
    for (const auto& r : s.final_subkernels) {
      roof = roof || r.roofline_fraction.has_value();
      if (r.headroom && (!most || *r.headroom > *most->headroom)) most = &r;
    }
    md += "| subkernel | status | runtime (ms) | speedup vs torch.compile | share of end-to-end time |" +
          std::string(roof ? " of the roofline |" : "") + " LLM calls | tokens |\n";
    md += std::string("|---|---|---|---|---|") + (roof ? "---|" : "") + "---|---|\n";
    for (const auto& r : s.final_subkernels) {
      std::string rf;
      if (roof)
        rf = (r.roofline_fraction ? fmt::format("{:.0f}% ({})", 100 * *r.roofline_fraction, r.bound) +
                                        (r.headroom ? "" : ", model does not fit")
                                  : std::string("\u2014")) +
             " | ";
      md += "| " + md_cell(r.name) + (r.uses_pytorch ? " (PyTorch)" : "") +
            (r.reused_from.empty() ? "" : " (reused from " + md_cell(r.reused_from) + ")") + " | " +
            (r.status == "correct" ? "\u2713 correct" : r.status == "failing" ? "\u2717 failing" : r.status) + " | " +
            ms(r.runtime_ms) + " | " + speedup(r.speedup_compile) + " | " + pct(r.share) + " | " + rf +
            std::to_string(r.usage.calls) + " | " + tokens_note(r.usage) + " |\n";
    }
    md += "\n";
    if (most)
      md += fmt::format("Most headroom: {}, {:.2f}x its {} roofline time (the time its bytes and FLOPs need at the "
                        "GPU's datasheet peaks).\n\n",
                        md_cell(most->name), *most->headroom, most->bound);
  }

  if (!s.reuse.empty()) {
    // mkevolve adapt: what the earlier run's subkernels did on the variant.
    md += "## Reused subkernels\n\n";
    md += reuse_lead() + " LLM calls saved: " + std::to_string(s.calls_saved()) + " (" + kCallsSavedNote + ").\n\n";
    md += "| subproblem | from | match | re-verified here | LLM calls saved |\n|---|---|---|---|---|\n";
    for (const auto& u : s.reuse)
      md += "| " + md_cell(u.task) + " | " + md_cell(u.from_run) + ": " + md_cell(u.from_task) + " | " +
            md_cell(u.match) + " | " + (u.correct ? "\u2713 correct" : "\u2717 " + md_cell(u.status) + ", evolved") +
            " | " + std::to_string(u.saved()) + " |\n";
    md += "\n";
  }

  md += "## LLM usage by agent\n\n";
  if (s.agents.empty()) {
    md += "No LLM calls recorded.\n\n";
  } else {
    md += "Cached replies cost nothing and are not counted in the token columns.\n\n";
    md += "| agent | calls | cached | failed | truncated | input | output | cache read | cache write | total tokens |\n";
    md += "|---|---|---|---|---|---|---|---|---|---|\n";
    auto row = [&](const std::string& name, const records::LlmTally& t) {
      md += "| " + md_cell(name) + " | " + std::to_string(t.calls) + " | " + std::to_string(t.cached) + " | " +
            std::to_string(t.failed) + " | " + std::to_string(t.truncated) + " | " + grouped(t.input) + " | " +
            grouped(t.output) + " | " + grouped(t.cache_read) + " | " + grouped(t.cache_write) + " | " +
            grouped(t.total()) + (t.estimated ? " (est.)" : "") + " |\n";
    };
    for (const auto& [name, t] : s.agents) row(name, t);
    row("**all**", s.llm_total);
    md += "\n";
  }

  if (!s.swaps.empty()) {
    md += "## Swaps\n\n| subkernel | from | to | end-to-end before | after |\n|---|---|---|---|---|\n";
    for (const auto& e : s.swaps) {
      md += "| " + md_cell(joined(swapped_names(e))) + " | " + md_cell(e.from) + " | " + md_cell(e.to) + " | " +
            speedup(e.speedup_before) + " | " + speedup(e.speedup_after) + " |\n";
    }
    md += "\n";
  }
  if (!s.postfuse.empty()) {
    md += "## Post-fusion attempts\n\n| attempt | status | speedup vs torch.compile |\n|---|---|---|\n";
    for (const auto& e : s.postfuse) {
      md += "| " + std::to_string(e.attempt) + " | " + md_cell(e.status) + " | " + speedup(e.speedup_compile) + " |\n";
    }
    md += "\n";
  }

  md += time_section(s.time);
  if (shapes) md += shapes_table(*shapes);
  md += "## Environment\n\n| mkevolve | torch | triton | GPU | python |\n|---|---|---|---|---|\n";
  md += "| " + md_cell(vstr(s.versions, "mkevolve")) + " | " + md_cell(vstr(s.versions, "torch")) + " | " +
        md_cell(vstr(s.versions, "triton")) + " | " + md_cell(vstr(s.versions, "gpu")) + " | " +
        md_cell(vstr(s.versions, "python")) + " |\n\n";
  md += tf32_statement(s) + "\n\n";
  if (!s.evals_by_status.empty()) {
    int64_t total = 0;
    std::string parts;
    for (const auto& [st, n] : s.evals_by_status) {
      total += n;
      parts += (parts.empty() ? "" : ", ") + std::to_string(n) + " " + st;
    }
    md += "Evaluations: " + std::to_string(total) + " (" + parts + ").\n";
  }
  return md;
}

// -------------------------------------------------------------------- html

namespace {

const char* kCss = R"CSS(
*{box-sizing:border-box}
body{margin:0;background:#f3f4f7;color:#1f2328;font:14px/1.5 -apple-system,"Segoe UI","DejaVu Sans",Helvetica,Arial,sans-serif}
main{max-width:1120px;margin:0 auto;padding:28px 28px 40px}
header h1{font-size:24px;margin:0 0 4px;font-weight:650;letter-spacing:-.2px}
header .sub{color:#57606a;margin:0 0 18px}
code{font:12.5px/1.4 "DejaVu Sans Mono",Menlo,Consolas,monospace;background:#eef0f3;padding:1px 5px;border-radius:4px}
.cards{display:grid;grid-template-columns:repeat(4,1fr);gap:12px;margin-bottom:16px}
.kpi{background:#fff;border:1px solid #e1e4e8;border-radius:10px;padding:14px 16px}
.kpi .label{color:#57606a;font-size:12px;text-transform:uppercase;letter-spacing:.5px}
.kpi .value{font-size:26px;font-weight:650;margin-top:2px}
.kpi .note{color:#6e7781;font-size:12px}
.good{color:#1a7f37}.bad{color:#cf222e}.warn{color:#9a6700}
.banner{border-radius:10px;padding:12px 16px;margin:0 0 14px;font-weight:600;border:1px solid}
.banner.pytorch{background:#fff8c5;border-color:#d4a72c;color:#6b4d00}
.banner.fail{background:#ffebe9;border-color:#ff8182;color:#82071e}
.banner .small{font-weight:400;display:block;margin-top:2px}
section{background:#fff;border:1px solid #e1e4e8;border-radius:10px;padding:18px 20px;margin:0 0 16px}
section h2{font-size:17px;margin:0 0 4px;font-weight:650}
section p.lead{color:#57606a;margin:0 0 12px}
.chart{overflow-x:auto}
svg{max-width:100%;height:auto;display:block}
table{border-collapse:collapse;width:100%;font-size:13px;margin-top:8px}
th,td{padding:6px 10px;border-bottom:1px solid #eaecef;text-align:right;white-space:nowrap}
th{background:#f6f8fa;color:#424a53;font-weight:600}
th:first-child,td:first-child{text-align:left;white-space:normal}
td .note{color:#8c959f;font-size:11.5px}
tr.total td{font-weight:650;border-top:2px solid #d0d7de}
.pill{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600}
.pill.ok{background:#dafbe1;color:#1a7f37}.pill.no{background:#ffebe9;color:#cf222e}.pill.new{background:#eaeef2;color:#57606a}
.pill.torch{background:#fff8c5;color:#7d4e00;margin-left:6px}
.pill.reused{background:#ddf4ff;color:#0550ae;margin-left:6px}
th.path,td.path{white-space:normal;word-break:break-all;text-align:left}
p.saved{font-size:15px;margin:0 0 4px}
p.saved .small{color:#6e7781;font-size:12.5px;font-weight:400}
.changes{margin:10px 0 0;padding-left:18px;color:#424a53}
footer{color:#6e7781;font-size:12.5px}
footer table{font-size:12.5px}
.split2{display:grid;grid-template-columns:1fr;gap:8px}
)CSS";

std::string td(const std::string& s, const std::string& cls = "") {
  return "<td" + (cls.empty() ? "" : " class=\"" + cls + "\"") + ">" + s + "</td>";
}

std::string pill(const std::string& status) {
  if (status == "correct") return "<span class=\"pill ok\">\u2713 correct</span>";
  if (status == "failing") return "<span class=\"pill no\">\u2717 failing</span>";
  return "<span class=\"pill new\">" + escape(status) + "</span>";
}

std::string kpi(const std::string& label, const std::string& value, const std::string& note, const std::string& cls = "") {
  return "<div class=\"kpi\"><div class=\"label\">" + escape(label) + "</div><div class=\"value" +
         (cls.empty() ? "" : " " + cls) + "\">" + value + "</div><div class=\"note\">" + note + "</div></div>";
}

}  // namespace

std::string render_html(const ReportData& s) {
  std::string h;
  std::string title = "MKEvolve report: " + (s.problem.empty() ? std::string("(unknown problem)") : s.problem);
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
       "<meta name=\"generator\" content=\"mkevolve report\"><title>" + escape(title) + "</title><style>" + kCss +
       "</style></head><body><main>\n";
  h += "<header><h1>" + escape(title) + "</h1><p class=\"sub\">Method <b>" +
       escape(s.method.empty() ? "unknown" : s.method) + "</b> \u00b7 " + std::to_string(s.iterations.size()) +
       " iteration" + (s.iterations.size() == 1 ? "" : "s") + " \u00b7 " + std::to_string(s.events) + " events" +
       (s.resumes ? " \u00b7 resumed " + std::to_string(s.resumes) + "\u00d7" : "") +
       (s.solution_dir.empty() ? "" : " \u00b7 solution in <code>" + escape(s.solution_dir) + "</code>") +
       (llm_text(s).empty() ? "" : " \u00b7 model <b>" + escape(llm_text(s)) + "</b>") + "</p></header>\n";
  if (test_mode(s)) h += "<div class=\"banner fail\">" + escape(test_mode_text()) + "</div>\n";

  // Key numbers.
  std::string status = status_word(s);
  std::string status_cls = s.end_status == "finished" ? "good" : s.end_status == "failed" ? "bad" : "warn";
  h += "<div class=\"cards\">";
  h += kpi("Best vs torch.compile", speedup(s.best_speedup_compile),
           s.best_t >= 0 && s.best_speedup_compile    ? escape(best_source_text(s))
           : !no_compile_baseline_text(s).empty() ? no_compile_baseline_text(s)
                                                  : "no correct end-to-end kernel",
           !s.best_speedup_compile ? "bad" : *s.best_speedup_compile >= 1 ? "good" : "");
  h += kpi("Final end-to-end",
           s.final_e2e_status == "correct" ? speedup(s.final_speedup_compile) : s.final_e2e_status.empty() ? "\u2014" : "\u2717",
           s.final_e2e_status.empty()        ? "not evaluated"
           : s.final_e2e_status != "correct" ? escape(s.final_e2e_status)
                                             : "correct \u00b7 " + speedup(s.final_speedup_eager) + " vs eager" +
                                                   (s.final_speedup_compile_tf32
                                                        ? " \u00b7 " + speedup(s.final_speedup_compile_tf32) +
                                                              " vs torch.compile with TF32 on"
                                                        : std::string()),
           s.final_e2e_status == "correct" ? "" : "bad");
  if (!s.final_check.result.empty()) {
    const auto& fc = s.final_check;
    h += kpi("Final check",
             fc.result == "passed"       ? "passed"
             : fc.result == "no_verdict" ? "no verdict"
             : fc.result == "incomplete" ? "not finished"
                                         : "failed",
             escape(fc.text()), fc.result == "passed" ? "good" : fc.result == "failed" ? "bad" : "warn");
  }
  h += kpi("Run status", escape(s.ended ? (s.end_status.empty() ? "ended" : s.end_status) : "in progress"),
           escape(s.end_message.empty() ? (s.ended ? "" : "no run_end event yet") : s.end_message), status_cls);
  h += kpi("LLM", human_count(static_cast<double>(s.llm_total.total())) + " tokens",
           std::to_string(s.llm_total.calls) + " calls" +
               // The budget counts kernel calls only, never all calls against it.
               (s.max_calls ? " \u00b7 " + std::to_string(s.llm_total.kernel_calls) + " of " + std::to_string(*s.max_calls) +
                                  " in the kernel budget"
                            : "") +
               (s.max_tokens ? " \u00b7 budget " + human_count(static_cast<double>(*s.max_tokens)) : "") +
               (s.llm_total.estimated ? " \u00b7 some estimated" : "") +
               (s.reuse.empty() ? "" : " \u00b7 " + std::to_string(s.calls_saved()) + " saved by reuse"));
  const bool judged = !s.judge_spec.empty() || s.judged_on_entry.asked + s.judged_after_beam.asked > 0;
  h += kpi("Cheat judge", judged ? "ran" : "none", escape(judge_text(s)), judged ? "" : "warn");
  h += "</div>\n";

  if (std::string t = pytorch_text(s); !t.empty())
    h += "<div class=\"banner pytorch\">\u26a0 Contains PyTorch subkernels: not pure Triton.<span class=\"small\">" +
         escape(pytorch_detail(s)) + "</span></div>\n";
  if (std::string t = traceability_text(s); !t.empty())
    h += "<div class=\"banner fail\">\u2717 The final end-to-end evaluation failed (" + escape(s.final_e2e_status) +
         ").<span class=\"small\">" + escape(traceability_detail(s)) + "</span></div>\n";

  h += "<section><h2>End-to-end speedup per iteration</h2><p class=\"lead\">Composed module vs torch.compile "
       "(solid) and eager PyTorch (dashed); iterations whose end-to-end check failed are marked in the red strip.</p>";
  if (s.iterations.empty()) {
    h += "<p>No iteration has finished yet.</p>";
  } else {
    h += "<div class=\"chart\">" + e2e_chart(s) + "</div>";
    h += "<table><tr><th>iteration</th><th>status</th><th>vs torch.compile</th><th>vs eager</th><th>runtime (ms)</th>"
         "<th>LLM calls</th><th>tokens</th></tr>";
    for (const auto& r : s.iterations)
      h += "<tr>" + td("t=" + std::to_string(r.t)) +
           td(r.e2e_status == "correct" ? pill("correct") : "<span class=\"pill no\">\u2717 " + escape(r.e2e_status) + "</span>") +
           td(speedup(r.speedup_compile)) + td(speedup(r.speedup_eager)) + td(ms(r.runtime_ms)) +
           td(std::to_string(r.calls_used)) + td(human_count(static_cast<double>(r.tokens))) + "</tr>";
    h += "</table>";
  }
  h += "</section>\n";

  if (!s.iterations.empty()) {
    h += "<section><h2>Subkernel speedups</h2><p class=\"lead\">Each subkernel against torch.compile of its own "
         "subproblem, with the end-to-end kernel in black. A cross in the red strip is an incorrect subkernel.</p>"
         "<div class=\"chart\">" + subkernel_chart(s) + "</div></section>\n";
  }

  h += "<section><h2>Subproblem structure</h2><p class=\"lead\">Which subproblems each iteration worked on: "
       "\u2713 correct subkernel, \u2717 incorrect, <i>new</i> no kernel yet. Splits replace a failing subproblem by "
       "smaller ones; fusions merge passing neighbours.</p>";
  if (s.grid.t.empty()) {
    h += "<p>No decomposition recorded yet.</p>";
  } else {
    h += "<div class=\"chart\">" + structure_chart(s) + "</div>";
    std::string changes;
    for (const auto& col : s.structure)
      if (!col.detail.empty())
        changes += "<li><b>t=" + std::to_string(col.iteration) + " " + escape(col.change) + "</b>: " +
                   escape(col.detail) + "</li>";
    if (!changes.empty()) h += "<ul class=\"changes\">" + changes + "</ul>";
  }
  if (std::string v = verification_text(s); !v.empty())
    h += "<p>Decomposition checks (the outputs against the original's, under the same seed): " + escape(v) + ".</p>";
  if (!s.composition_failures.empty()) {
    h += "<p>Compositions that failed while every subkernel passed its own checks:</p><ul class=\"changes\">";
    for (const auto& f : s.composition_failures) h += "<li>" + escape(composition_failure_text(f)) + "</li>";
    h += "</ul>";
  }
  h += "</section>\n";

  h += "<section><h2>Subkernels</h2><p class=\"lead\">The subkernels of the latest iteration; tokens are those "
       "of LLM calls made for that subproblem.</p>";
  if (s.final_subkernels.empty()) {
    h += "<p>None yet.</p>";
  } else {
    // As in report.md: the roofline column only where some subkernel has one.
    bool roof = false;
    const SubkernelRow* most = nullptr;
    for (const auto& r : s.final_subkernels) {
      roof = roof || r.roofline_fraction.has_value();
      if (r.headroom && (!most || *r.headroom > *most->headroom)) most = &r;
    }
    h += "<table><tr><th>subkernel</th><th>status</th><th>runtime (ms)</th><th>vs torch.compile</th>"
         "<th>share of e2e time</th>" +
         std::string(roof ? "<th>of the roofline</th>" : "") + "<th>LLM calls</th><th>tokens</th></tr>";
    for (const auto& r : s.final_subkernels) {
      auto note = s.lineage.find(r.name);
      std::string rf;
      if (roof)
        rf = td(r.roofline_fraction ? escape(fmt::format("{:.0f}% ({})", 100 * *r.roofline_fraction, r.bound) +
                                             (r.headroom ? "" : ", model does not fit"))
                                    : std::string("\u2014"));
      h += "<tr>" +
           td(escape(r.name) + (note != s.lineage.end() ? "<div class=\"note\">" + escape(note->second) + "</div>" : "") +
              (r.uses_pytorch ? "<span class=\"pill torch\">PyTorch</span>" : "") +
              (r.reused_from.empty() ? ""
                                     : "<span class=\"pill reused\">reused</span><div class=\"note\">from " +
                                           escape(r.reused_from) + "</div>")) +
           td(pill(r.status)) + td(ms(r.runtime_ms)) + td(speedup(r.speedup_compile)) + td(pct(r.share)) + rf +
           td(std::to_string(r.usage.calls)) + td(escape(tokens_note(r.usage))) + "</tr>";
    }
    h += "</table>";
    if (most)
      h += "<p>Most headroom: <b>" + escape(most->name) + "</b>, " +
           escape(fmt::format("{:.2f}x its {} roofline time", *most->headroom, most->bound)) +
           " (the time its bytes and FLOPs need at the GPU's datasheet peaks).</p>";
  }
  h += "</section>\n";

  if (!s.reuse.empty()) {
    // mkevolve adapt: what the earlier run's subkernels did on the variant.
    h += "<section><h2>Reused subkernels</h2><p class=\"lead\">" + escape(reuse_lead()) +
         "</p><p class=\"saved\">LLM calls saved: <b>" + std::to_string(s.calls_saved()) +
         "</b> <span class=\"small\">(" + escape(kCallsSavedNote) + ")</span></p>";
    h += "<table><tr><th>subproblem</th><th class=\"path\">from</th><th>match</th><th>re-verified here</th>"
         "<th>LLM calls saved</th></tr>";
    for (const auto& u : s.reuse)
      h += "<tr>" + td(escape(u.task)) +
           td("<code>" + escape(u.from_run) + "</code>: " + escape(u.from_task), "path") + td(escape(u.match)) +
           td(u.correct ? pill("correct") : "<span class=\"pill no\">\u2717 " + escape(u.status) + "</span> evolved") +
           td(std::to_string(u.saved())) + "</tr>";
    h += "</table></section>\n";
  }

  h += "<section><h2>LLM usage by agent</h2><p class=\"lead\">Tokens paid for, by agent. Replies served from the "
       "response cache cost nothing and count only as cached calls.</p>";
  if (s.agents.empty()) {
    h += "<p>No LLM calls recorded.</p>";
  } else {
    h += "<div class=\"chart\">" + agent_chart(s) + "</div>";
    h += "<table><tr><th>agent</th><th>calls</th><th>cached</th><th>failed</th><th>truncated</th><th>input</th>"
         "<th>output</th><th>cache read</th><th>cache write</th><th>total</th></tr>";
    auto row = [&](const std::string& name, const records::LlmTally& t, bool total) {
      h += std::string(total ? "<tr class=\"total\">" : "<tr>") + td(escape(name)) + td(std::to_string(t.calls)) +
           td(std::to_string(t.cached)) + td(std::to_string(t.failed)) + td(std::to_string(t.truncated)) +
           td(grouped(t.input)) + td(grouped(t.output)) + td(grouped(t.cache_read)) + td(grouped(t.cache_write)) +
           td(grouped(t.total()) + (t.estimated ? " (est.)" : "")) + "</tr>";
    };
    for (const auto& [name, t] : s.agents) row(name, t, false);
    row("all agents", s.llm_total, true);
    h += "</table>";
  }
  h += "</section>\n";

  if (!s.swaps.empty() || !s.postfuse.empty()) {
    h += "<section><h2>After the search</h2>";
    if (!s.swaps.empty()) {
      h += "<table><tr><th>swap</th><th>from</th><th>to</th><th>e2e before</th><th>e2e after</th></tr>";
      for (const auto& e : s.swaps) {
        h += "<tr>" + td(escape(joined(swapped_names(e)))) + td(escape(e.from)) + td(escape(e.to)) +
             td(speedup(e.speedup_before)) + td(speedup(e.speedup_after)) + "</tr>";
      }
      h += "</table>";
    }
    if (!s.postfuse.empty()) {
      h += "<table><tr><th>post-fusion attempt</th><th>status</th><th>vs torch.compile</th></tr>";
      for (const auto& e : s.postfuse) {
        h += "<tr>" + td(std::to_string(e.attempt)) + td(escape(e.status)) + td(speedup(e.speedup_compile)) + "</tr>";
      }
      h += "</table>";
    }
    h += "</section>\n";
  }

  h += "<section><footer><h2 style=\"color:#1f2328\">Environment</h2><table><tr><th>mkevolve</th><th>torch</th>"
       "<th>triton</th><th>GPU</th><th>python</th></tr><tr>" +
       td(escape(vstr(s.versions, "mkevolve"))) + td(escape(vstr(s.versions, "torch"))) +
       td(escape(vstr(s.versions, "triton"))) + td(escape(vstr(s.versions, "gpu"))) +
       td(escape(vstr(s.versions, "python"))) + "</tr></table><p><b>" + escape(tf32_statement(s)) + "</b></p>";
  if (!s.evals_by_status.empty()) {
    int64_t total = 0;
    std::string parts;
    for (const auto& [st, n] : s.evals_by_status) {
      total += n;
      parts += (parts.empty() ? "" : ", ") + std::to_string(n) + " " + escape(st);
    }
    h += "<p>Evaluations: " + std::to_string(total) + " (" + parts + ").</p>";
  }
  h += "<p class=\"lead\">" + escape(kUnknownLegend) + "</p>";
  h += "</footer></section>\n</main></body></html>\n";
  return h;
}

Result<std::vector<fs::path>> write_report(const fs::path& run_dir, const fs::path& out_dir,
                                           std::vector<std::string>* warnings) {
  auto summary = load_run(run_dir, warnings);
  if (!summary) return Error{summary.error()};
  std::vector<fs::path> written = {out_dir / "report.md", out_dir / "report.html"};
  if (Status st = write_file_atomic(written[0], render_markdown(*summary)); !st.ok()) return Error{st.error()};
  if (Status st = write_file_atomic(written[1], render_html(*summary)); !st.ok()) return Error{st.error()};
  return written;
}

}  // namespace mk::report
