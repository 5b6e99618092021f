#include "report/charts.h"

#include <algorithm>

#include "report/svg.h"

namespace mk::report {

std::string e2e_chart(const ReportData& s) {
  svg::LineChart c;
  c.title = "End-to-end speedup per iteration";
  c.y_label = "speedup";
  c.x_label = "outer-loop iteration";
  c.reference = 1.0;
  c.reference_label = "torch.compile (1\u00d7)";
  svg::Series compile{"vs torch.compile", "#0b3d91", {}, {}, 3, ""};
  svg::Series eager{"vs eager", "#8c959f", {}, {}, 2, "6 4"};
  bool any_eager = false;
  for (const auto& r : s.iterations) {
    c.x_ticks.push_back("t=" + std::to_string(r.t));
    bool ok = r.e2e_status == "correct";
    compile.y.push_back(ok ? known(r.speedup_compile) : std::nullopt);
    compile.failed.push_back(!ok);
    eager.y.push_back(ok ? known(r.speedup_eager) : std::nullopt);
    eager.failed.push_back(false);
    any_eager = any_eager || (ok && known(r.speedup_eager));
  }
  c.series.push_back(compile);
  if (any_eager) c.series.push_back(eager);
  return svg::line_chart(c);
}

std::string subkernel_chart(const ReportData& s) {
  svg::LineChart c;
  c.title = "Subkernel and end-to-end speedup per iteration";
  c.y_label = "speedup vs torch.compile";
  c.x_label = "outer-loop iteration";
  c.reference = 1.0;
  c.reference_label = "torch.compile (1\u00d7)";
  for (const auto& r : s.iterations) c.x_ticks.push_back("t=" + std::to_string(r.t));
  size_t color = 0;
  for (const auto& name : s.subproblem_order) {
    svg::Series ser{name, svg::palette()[color % svg::palette().size()], {}, {}, 2, ""};
    bool any = false;
    for (const auto& r : s.iterations) {
      auto it = r.subkernels.find(name);
      if (it == r.subkernels.end()) {
        ser.y.push_back(std::nullopt);
        ser.failed.push_back(false);
        continue;
      }
      any = true;
      ser.y.push_back(it->second.correct ? known(it->second.speedup_compile) : std::nullopt);
      ser.failed.push_back(!it->second.correct);
    }
    if (!any) continue;
    ++color;
    c.series.push_back(std::move(ser));
  }
  svg::Series e2e{"E2E", "#111", {}, {}, 3.5, ""};
  for (const auto& r : s.iterations) {
    bool ok = r.e2e_status == "correct";
    e2e.y.push_back(ok ? known(r.speedup_compile) : std::nullopt);
    e2e.failed.push_back(!ok);
  }
  c.series.push_back(e2e);
  c.height = std::max(340.0, 60.0 + 19.0 * static_cast<double>(c.series.size() + 1) + 78);
  return svg::line_chart(c);
}

std::string structure_chart(const ReportData& s) {
  const StructureGrid& g = s.grid;
  svg::Grid out;
  out.title = "Subproblem structure per iteration";
  for (size_t c = 0; c < g.t.size(); ++c) {
    out.column_heads.push_back("t=" + std::to_string(g.t[c]));
    out.column_subheads.push_back(g.change[c].empty() ? "" : g.change[c]);
    out.column_tooltips.push_back(g.detail[c]);
  }
  for (size_t r = 0; r < g.rows.size(); ++r) {
    out.row_labels.push_back(g.rows[r]);
    auto note = s.lineage.find(g.rows[r]);
    out.row_notes.push_back(note == s.lineage.end() ? "" : note->second);
    std::vector<svg::Cell> cells;
    std::vector<std::string> tips;
    for (size_t c = 0; c < g.t.size(); ++c) {
      svg::Cell cell = svg::Cell::kAbsent;
      std::string tip = g.rows[r] + " at t=" + std::to_string(g.t[c]) + ": ";
      switch (g.cells[r][c]) {
        case StructureGrid::kOk: cell = svg::Cell::kOk, tip += "correct"; break;
        case StructureGrid::kFailed: cell = svg::Cell::kFailed, tip += "incorrect"; break;
        case StructureGrid::kNew: cell = svg::Cell::kPending, tip += "no kernel yet"; break;
        default: tip += "not a subproblem"; break;
      }
      cells.push_back(cell);
      tips.push_back(tip);
    }
    out.cells.push_back(cells);
    out.cell_tooltips.push_back(tips);
  }
  return svg::grid(out);
}

std::string agent_chart(const ReportData& s) {
  svg::BarChart c;
  c.title = "Tokens by agent";
  c.part_names = {"input", "output", "cache read", "cache write"};
  c.part_colors = {"#0072B2", "#E69F00", "#56B4E9", "#CC79A7"};
  for (const auto& [name, t] : s.agents) {
    svg::Bar b;
    b.label = name;
    b.parts = {static_cast<double>(t.input), static_cast<double>(t.output), static_cast<double>(t.cache_read),
               static_cast<double>(t.cache_write)};
    b.note = human_count(static_cast<double>(t.total())) + " tokens \u00b7 " + std::to_string(t.calls) + " call" +
             (t.calls == 1 ? "" : "s");
    c.bars.push_back(b);
  }
  return svg::bar_chart(c);
}

}  // namespace mk::report
