// The sections of a run's report, from the end-to-end speedups to the
// environment, and the one function that puts the document together.
#include "report/sections.h"

#include <cstdio>

#include <fmt/format.h>

#include "eval/shapes.h"
#include "report/charts.h"
#include "report/format.h"
#include "report/report.h"

namespace mk::report {

using namespace doc;

namespace {

std::string tokens_note(const records::LlmTally& t) {
  return human_count(static_cast<double>(t.total())) + (t.estimated ? " (some estimated)" : "");
}

std::string column_label(const StructureGrid& g, size_t c) {
  return "t=" + std::to_string(g.t[c]) +
         (g.change[c].empty() || g.change[c] == "unchanged" ? "" : " (" + g.change[c] + ")");
}

const char* grid_mark(StructureGrid::Cell c) {
  switch (c) {
    case StructureGrid::kOk: return "\u2713";
    case StructureGrid::kFailed: return "\u2717";
    case StructureGrid::kNew: return "new";
    default: return "";
  }
}

/// mkevolve adapt: how the "Reused subkernels" section begins.
std::string reuse_lead() {
  return "This run adapted an earlier run to a variant of its problem (mkevolve adapt). Each subproblem of the "
         "variant that matches one of the earlier run's was checked with that run's verified subkernel first, with "
         "no LLM call; one that failed the check was evolved like a new subproblem.";
}
const char* kCallsSavedNote = "what the earlier run spent on the subkernels reused here, each counted once";

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

/// One line for a composition_failure event: what failed and where it went.
std::string composition_failure_text(const records::CompositionFailure& f) {
  std::string what = "t=" + std::to_string(f.iteration) + ": " + f.status + (f.kind.empty() ? "" : " (" + f.kind + ")");
  if (f.action == "back_to_beam")
    return what + " inside subkernel " + f.task + " (" + f.candidate + "): sent back to its beam with this error";
  if (f.action == "total_fuse") return what + ", pointing into no one subkernel: TotalFuse, back to the whole problem";
  return what + ", pointing into no one subkernel (this method keeps its structure)";
}

// ------------------------------------------------------------------- blocks

Block para(Text t) { return {Paragraph{std::move(t)}}; }
/// A section's introduction: report.html opens each section with one; report.md does not.
Block lead(Text t) { return html_only({Paragraph{std::move(t), Paragraph::Kind::kLead}}); }
Block figure(std::string svg) { return html_only({Figure{std::move(svg)}}); }
Text plain(std::string s) { return {words(std::move(s))}; }
Text val(std::string s) { return {value(std::move(s))}; }
Text flat(std::string s) { return {one_line(std::move(s))}; }
Table::Column column(Text head) { return {std::move(head)}; }
Table::Column column(std::string head) { return {plain(std::move(head))}; }

/// A status as both reports show it: a pill in HTML, its words in markdown.
Span status_pill(const std::string& status) {
  if (status == "correct") return pill(words("\u2713 correct"), "ok");
  if (status == "failing") return pill(words("\u2717 failing"), "no");
  return pill(value(status), "new");
}

// ----------------------------------------------------------------- sections

Section e2e_section(const ReportData& s) {
  Section sec{plain("End-to-end speedup per iteration")};
  sec.blocks.push_back(
      lead(plain("Composed module vs torch.compile (solid) and eager PyTorch (dashed); iterations "
                 "whose end-to-end check failed are marked in the red strip.")));
  if (s.iterations.empty()) {
    sec.blocks.push_back(para(plain("No iteration has finished yet.")));
    return sec;
  }
  sec.blocks.push_back(figure(e2e_chart(s)));
  Table t;
  t.columns = {column(either("t", "iteration")),
               column("status"),
               column("vs torch.compile"),
               column("vs eager"),
               column("runtime (ms)"),
               column("LLM calls"),
               column("tokens")};
  for (const auto& r : s.iterations)
    t.rows.push_back(
        {{{html_only(words("t=")), value(std::to_string(r.t))},
          {r.e2e_status == "correct" ? status_pill("correct") : pill(one_line("\u2717 " + r.e2e_status), "no")},
          val(speedup(r.speedup_compile)),
          val(speedup(r.speedup_eager)),
          val(ms(r.runtime_ms)),
          val(std::to_string(r.calls_used)),
          val(human_count(static_cast<double>(r.tokens)))}});
  sec.blocks.push_back({std::move(t)});
  return sec;
}

/// report.md's table of subkernel speedups per iteration (blank: not in that iteration).
Section subkernel_table_section(const ReportData& s) {
  Section sec{plain("Subkernel speedup per iteration (vs torch.compile; \u2717 = incorrect, blank = not in that "
                    "iteration)"),
              {},
              Only::kMarkdown};
  Table t;
  t.columns.push_back(column("subkernel"));
  for (const auto& r : s.iterations) t.columns.push_back(column("t=" + std::to_string(r.t)));
  for (const auto& name : s.subproblem_order) {
    bool any = false;
    for (const auto& r : s.iterations) any = any || r.subkernels.count(name);
    if (!any) continue;
    Table::Row row{{flat(name)}};
    for (const auto& r : s.iterations) {
      auto it = r.subkernels.find(name);
      if (it == r.subkernels.end())
        row.cells.push_back({});
      else if (!it->second.correct)
        row.cells.push_back(plain("\u2717"));
      else
        row.cells.push_back(val(speedup(it->second.speedup_compile)));
    }
    t.rows.push_back(std::move(row));
  }
  Table::Row e2e{{{styled(words("end-to-end"), Span::Style::kStrong)}}, true};
  for (const auto& r : s.iterations)
    e2e.cells.push_back(r.e2e_status == "correct"
                            ? Text{styled(value(speedup(r.speedup_compile)), Span::Style::kStrong)}
                            : plain("\u2717"));
  t.rows.push_back(std::move(e2e));
  sec.blocks.push_back({std::move(t)});
  return sec;
}

/// report.html's chart of subkernel speedups per iteration.
Section subkernel_chart_section(const ReportData& s) {
  return {plain("Subkernel speedups"),
          {lead(plain("Each subkernel against torch.compile of its own subproblem, with the end-to-end kernel in "
                      "black. A cross in the red strip is an incorrect subkernel.")),
           figure(subkernel_chart(s))},
          Only::kHtml};
}

/// The structure as report.md's table: a row per subproblem, a column per iteration.
Block structure_table(const ReportData& s) {
  const StructureGrid& g = s.grid;
  Table t;
  t.centered = true;
  t.columns.push_back(column("subproblem"));
  for (size_t c = 0; c < g.t.size(); ++c) t.columns.push_back(column(val(column_label(g, c))));
  for (size_t r = 0; r < g.rows.size(); ++r) {
    Text name = flat(g.rows[r]);
    if (auto note = s.lineage.find(g.rows[r]); note != s.lineage.end())
      name.insert(name.end(), {words(" ("), one_line(note->second), words(")")});
    Table::Row row{{std::move(name)}};
    // An absent subproblem's mark is empty: a cell, not a blank one (report.md's "|  |").
    for (size_t c = 0; c < g.t.size(); ++c) row.cells.push_back(plain(grid_mark(g.cells[r][c])));
    t.rows.push_back(std::move(row));
  }
  return md_only({std::move(t)});
}

Section structure_section(const ReportData& s) {
  Section sec{plain("Subproblem structure")};
  sec.blocks.push_back(lead({words("Which subproblems each iteration worked on: \u2713 correct subkernel, \u2717 "
                                   "incorrect, "),
                             styled(words("new"), Span::Style::kItalic),
                             words(" no kernel yet. Splits replace a failing subproblem by smaller ones; fusions "
                                   "merge passing neighbours.")}));
  if (s.grid.t.empty()) {
    sec.blocks.push_back(para(plain("No decomposition recorded yet.")));
  } else {
    sec.blocks.push_back(md_only(para(plain("\u2713 correct subkernel, \u2717 incorrect, new = no kernel yet."))));
    sec.blocks.push_back(structure_table(s));
    sec.blocks.push_back(figure(structure_chart(s)));
    List changes;
    for (const auto& col : s.structure)
      if (!col.detail.empty())
        changes.items.push_back(
            {styled(value("t=" + std::to_string(col.iteration) + " " + col.change), Span::Style::kStrongInHtml),
             words(": "), value(col.detail)});
    if (!changes.items.empty()) {
      sec.blocks.push_back(md_only(para(plain("Changes:"))));
      sec.blocks.push_back({std::move(changes)});
    }
  }
  if (std::string v = verification_text(s); !v.empty())
    sec.blocks.push_back(
        para({words("Decomposition checks (the outputs against the original's, under the same seed): "), one_line(v),
              words(".")}));
  if (!s.composition_failures.empty()) {
    sec.blocks.push_back(para(plain("Compositions that failed while every subkernel passed its own checks:")));
    List failures;
    for (const auto& f : s.composition_failures) failures.items.push_back(flat(composition_failure_text(f)));
    sec.blocks.push_back({std::move(failures)});
  }
  return sec;
}

/// A final subkernel's name, with what HTML notes under it and both tag it with.
Text subkernel_name(const ReportData& s, const SubkernelRow& r) {
  Text t = flat(r.name);
  if (auto note = s.lineage.find(r.name); note != s.lineage.end())
    t.push_back(html_only(styled(value(note->second), Span::Style::kNote)));
  if (r.uses_pytorch) t.insert(t.end(), {md_only(words(" (PyTorch)")), html_only(pill(words("PyTorch"), "torch"))});
  if (!r.reused_from.empty())
    t.insert(t.end(), {md_only(words(" (reused from ")), md_only(one_line(r.reused_from)), md_only(words(")")),
                       html_only(pill(words("reused"), "reused")),
                       html_only(styled(value("from " + r.reused_from), Span::Style::kNote))});
  return t;
}

Section subkernels_section(const ReportData& s) {
  Section sec{either("Final subkernels", "Subkernels")};
  sec.blocks.push_back(
      lead(plain("The subkernels of the latest iteration; tokens are those of LLM calls made for "
                 "that subproblem.")));
  if (s.final_subkernels.empty()) {
    sec.blocks.push_back(para(plain("None yet.")));
    return sec;
  }
  // The roofline column only where some subkernel has one (a GPU run with work records).
  bool roof = false;
  const SubkernelRow* most = nullptr;
  for (const auto& r : s.final_subkernels) {
    roof = roof || r.roofline_fraction.has_value();
    if (r.headroom && (!most || *r.headroom > *most->headroom)) most = &r;
  }
  Table t;
  t.columns = {column("subkernel"), column("status"), column("runtime (ms)"),
               column(either("speedup vs torch.compile", "vs torch.compile")),
               column(either("share of end-to-end time", "share of e2e time"))};
  if (roof) t.columns.push_back(column("of the roofline"));
  t.columns.insert(t.columns.end(), {column("LLM calls"), column("tokens")});
  for (const auto& r : s.final_subkernels) {
    Table::Row row{{subkernel_name(s, r),
                    {status_pill(r.status)},
                    val(ms(r.runtime_ms)),
                    val(speedup(r.speedup_compile)),
                    val(pct(r.share))}};
    if (roof)
      row.cells.push_back(r.roofline_fraction ? val(fmt::format("{:.0f}% ({})", 100 * *r.roofline_fraction, r.bound) +
                                                    (r.headroom ? "" : ", model does not fit"))
                                              : plain("\u2014"));
    row.cells.insert(row.cells.end(), {val(std::to_string(r.usage.calls)), val(tokens_note(r.usage))});
    t.rows.push_back(std::move(row));
  }
  sec.blocks.push_back({std::move(t)});
  if (most)
    sec.blocks.push_back(
        para({words("Most headroom: "), styled(one_line(most->name), Span::Style::kStrongInHtml), words(", "),
              value(fmt::format("{:.2f}x its {} roofline time", *most->headroom, most->bound)),
              words(" (the time its bytes and FLOPs need at the GPU's datasheet peaks).")}));
  return sec;
}

/// mkevolve adapt: what the earlier run's subkernels did on the variant.
Section reuse_section(const ReportData& s) {
  Section sec{plain("Reused subkernels")};
  const std::string saved = std::to_string(s.calls_saved());
  sec.blocks.push_back(
      md_only(para(plain(reuse_lead() + " LLM calls saved: " + saved + " (" + kCallsSavedNote + ")."))));
  sec.blocks.push_back(lead(val(reuse_lead())));
  sec.blocks.push_back(
      html_only({Paragraph{{words("LLM calls saved: "), styled(value(saved), Span::Style::kStrong), words(" "),
                            styled(value(std::string("(") + kCallsSavedNote + ")"), Span::Style::kSmall)},
                           Paragraph::Kind::kKeyFigure}}));
  Table t;
  t.columns = {column("subproblem"),
               {plain("from"), true},
               column("match"),
               column("re-verified here"),
               column("LLM calls saved")};
  for (const auto& u : s.reuse) {
    Text verified = {u.correct ? status_pill("correct") : pill(one_line("\u2717 " + u.status), "no")};
    if (!u.correct) verified.insert(verified.end(), {md_only(words(",")), words(" evolved")});
    t.rows.push_back({{flat(u.task),
                       {styled(one_line(u.from_run), Span::Style::kCodeInHtml), words(": "), one_line(u.from_task)},
                       flat(u.match),
                       std::move(verified),
                       val(std::to_string(u.saved()))}});
  }
  sec.blocks.push_back({std::move(t)});
  return sec;
}

Section agents_section(const ReportData& s) {
  Section sec{plain("LLM usage by agent")};
  sec.blocks.push_back(
      lead(plain("Tokens paid for, by agent. Replies served from the response cache cost nothing "
                 "and count only as cached calls.")));
  if (s.agents.empty()) {
    sec.blocks.push_back(para(plain("No LLM calls recorded.")));
    return sec;
  }
  sec.blocks.push_back(md_only(para(plain("Cached replies cost nothing and are not counted in the token columns."))));
  sec.blocks.push_back(figure(agent_chart(s)));
  Table t;
  for (const char* c :
       {"agent", "calls", "cached", "failed", "truncated", "input", "output", "cache read", "cache write"})
    t.columns.push_back(column(c));
  t.columns.push_back(column(either("total tokens", "total")));
  auto row = [&](Text name, const records::LlmTally& u, bool total) {
    t.rows.push_back(
        {{std::move(name), val(std::to_string(u.calls)), val(std::to_string(u.cached)), val(std::to_string(u.failed)),
          val(std::to_string(u.truncated)), val(grouped(u.input)), val(grouped(u.output)), val(grouped(u.cache_read)),
          val(grouped(u.cache_write)), val(grouped(u.total()) + (u.estimated ? " (est.)" : ""))},
         total});
  };
  for (const auto& [name, u] : s.agents) row(flat(name), u, false);
  row({md_only(styled(words("all"), Span::Style::kStrong)), html_only(words("all agents"))}, s.llm_total, true);
  sec.blocks.push_back({std::move(t)});
  return sec;
}

Block swaps_table(const ReportData& s) {
  Table t;
  t.columns = {column(either("subkernel", "swap")), column("from"), column("to"),
               column(either("end-to-end before", "e2e before")), column(either("after", "e2e after"))};
  for (const auto& e : s.swaps)
    t.rows.push_back({{flat(joined(swapped_names(e))), flat(e.from), flat(e.to), val(speedup(e.speedup_before)),
                       val(speedup(e.speedup_after))}});
  return {std::move(t)};
}

Block postfuse_table(const ReportData& s) {
  Table t;
  t.columns = {column(either("attempt", "post-fusion attempt")), column("status"),
               column(either("speedup vs torch.compile", "vs torch.compile"))};
  for (const auto& e : s.postfuse)
    t.rows.push_back({{val(std::to_string(e.attempt)), flat(e.status), val(speedup(e.speedup_compile))}});
  return {std::move(t)};
}

/// Swaps and PostFuse: a section each in report.md, one in report.html.
void add_after_the_search(const ReportData& s, std::vector<Section>& out) {
  if (!s.swaps.empty()) out.push_back({plain("Swaps"), {swaps_table(s)}, Only::kMarkdown});
  if (!s.postfuse.empty()) out.push_back({plain("Post-fusion attempts"), {postfuse_table(s)}, Only::kMarkdown});
  if (s.swaps.empty() && s.postfuse.empty()) return;
  Section after{plain("After the search"), {}, Only::kHtml};
  if (!s.swaps.empty()) after.blocks.push_back(swaps_table(s));
  if (!s.postfuse.empty()) after.blocks.push_back(postfuse_table(s));
  out.push_back(std::move(after));
}

/// Wall time against the LLM critical path (rundir/critical_path.h), phase by
/// phase.
Section time_section(const rundir::TimeAccount& t) {
  auto secs = [](std::optional<double> v) { return v ? fmt::format("{:.1f} s", *v) : std::string("\u2014"); };
  Section sec{plain("Time")};
  auto ra = t.ratio();
  sec.blocks.push_back(
      para(val("Wall time " + secs(t.wall_s) + ". LLM critical path: " +
               (t.llm_s ? fmt::format("{} rounds, {}", t.rounds, secs(t.llm_s)) : std::string("\u2014")) +
               " (the longest chain of LLM rounds that depend on one another, each as long as its slowest call). "
               "Wall time / critical path: " +
               (ra ? fmt::format("{:.2f}", *ra) : std::string("\u2014")) + ".")));
  sec.blocks.push_back(para(plain(
      "The path is what each phase's wall time waited for: the slowest decomposition worker of each round, each "
      "split/fuse try, the subproblem whose beam rounds took longest (each round's slowest candidate: LLM calls, "
      "waiting for a slot, evaluating, baselines), then the end-to-end evaluations. Other: what the path does not "
      "explain.")));
  Table table;
  for (const char* c : {"phase", "LLM rounds", "LLM critical path", "wall", "path: LLM", "evaluating",
                        "waiting for a slot", "baselines", "end-to-end", "decomposition checks", "other"})
    table.columns.push_back(column(c));
  auto row = [&](Text label, int rounds, std::optional<double> llm, std::optional<double> wall,
                 const rundir::PathTimes& p) {
    std::optional<double> other;
    if (wall) other = *wall - p.sum();
    table.rows.push_back({{std::move(label), val(std::to_string(rounds)), val(secs(llm)), val(secs(wall)),
                           val(secs(p.llm_s)), val(secs(p.eval_s)), val(secs(p.queued_s)), val(secs(p.baseline_s)),
                           val(secs(p.e2e_s)), val(secs(p.verify_s)), val(secs(other))}});
  };
  for (const auto& p : t.phases) row(flat(p.label), p.rounds, p.llm_s, p.wall_s, p.path);
  row({styled(words("run"), Span::Style::kStrong)}, t.rounds, t.llm_s, t.wall_s, t.path);
  table.rows.back().total = true;
  sec.blocks.push_back({std::move(table)});
  return sec;
}

/// The returned solution at each shape its final check ran it at (--shapes):
/// the benchmark's (timed), the variants it holds at, fails at (with the
/// error) and those the reference itself cannot run. report.md also says it
/// in its list of facts; report.html has no such list, so this section is the
/// only place it says where the solution fails.
Section shapes_section(const eval::ShapesRecord& r) {
  Section sec{plain("Shapes the returned solution holds at")};
  sec.blocks.push_back(para({words("Verified at shape variants derived from the problem's size constants (--shapes "),
                             one_line(r.mode), words("); timing is at the benchmark's shape.")}));
  Table t;
  t.columns = {column("shape"), column("holds at"), column("error")};
  Text benchmark = plain("benchmark");
  if (!r.benchmark.empty()) benchmark.insert(benchmark.end(), {words(" ("), one_line(r.benchmark), words(")")});
  t.rows.push_back({{std::move(benchmark), plain("\u2713 (timed)"), {}}});
  for (const auto& h : r.held) t.rows.push_back({{flat(h), plain("\u2713"), {}}});
  for (const auto& f : r.failed) t.rows.push_back({{flat(f.shape), plain("\u2717 fails"), flat(f.error)}});
  for (const auto& k : r.skipped)
    t.rows.push_back({{flat(k.shape), plain("skipped: the reference cannot run it"), flat(k.error)}});
  for (const auto& n : r.not_reached) t.rows.push_back({{flat(n), plain("not reached"), {}}});
  if (r.held.empty() && r.failed.empty() && r.skipped.empty() && !r.error.empty())
    t.rows.push_back({{plain("(no variant)"), {}, flat(r.error)}});
  sec.blocks.push_back({std::move(t)});
  return sec;
}

/// The versions, the TF32 statement and the evaluations; report.html closes
/// with the legend for "—", which report.md has in its list of facts.
Section environment_section(const ReportData& s) {
  Section sec{plain("Environment")};
  sec.footer = true;
  Table t;
  Table::Row versions;
  for (const auto& [head, key] : {std::pair{"mkevolve", "mkevolve"},
                                  {"torch", "torch"},
                                  {"triton", "triton"},
                                  {"GPU", "gpu"},
                                  {"python", "python"}}) {
    t.columns.push_back(column(head));
    versions.cells.push_back(flat(vstr(s.versions, key)));
  }
  t.rows.push_back(std::move(versions));
  sec.blocks.push_back({std::move(t)});
  sec.blocks.push_back(para({styled(value(tf32_statement(s)), Span::Style::kStrongInHtml)}));
  if (!s.evals_by_status.empty()) {
    int64_t total = 0;
    Text parts;
    for (const auto& [st, n] : s.evals_by_status) {
      total += n;
      parts.insert(parts.end(), {words((parts.empty() ? "" : ", ") + std::to_string(n) + " "), value(st)});
    }
    Text line = plain("Evaluations: " + std::to_string(total) + " (");
    line.insert(line.end(), parts.begin(), parts.end());
    line.push_back(words(")."));
    sec.blocks.push_back({Paragraph{std::move(line), Paragraph::Kind::kPlain, false}});
  }
  sec.blocks.push_back(lead(val(kUnknownLegend)));
  return sec;
}

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

Document build_document(const ReportData& s) {
  const auto shapes = eval::ShapesRecord::from_json(s.final_check.shapes);
  Document d;
  d.title = "MKEvolve report: " + (s.problem.empty() ? std::string("(unknown problem)") : s.problem);
  d.subtitle = subtitle(s);
  d.preface = preface(s, shapes);
  d.sections.push_back(e2e_section(s));
  if (!s.iterations.empty()) {
    d.sections.push_back(subkernel_table_section(s));
    d.sections.push_back(subkernel_chart_section(s));
  }
  d.sections.push_back(structure_section(s));
  d.sections.push_back(subkernels_section(s));
  if (!s.reuse.empty()) d.sections.push_back(reuse_section(s));
  d.sections.push_back(agents_section(s));
  add_after_the_search(s, d.sections);
  if (!s.time.phases.empty()) d.sections.push_back(time_section(s.time));
  if (shapes) d.sections.push_back(shapes_section(*shapes));
  d.sections.push_back(environment_section(s));
  return d;
}

}  // namespace mk::report
