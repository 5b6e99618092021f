#include "report/report_data.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "records/events.h"
#include "util/json_fields.h"
#include "report/svg.h"

namespace mk::report {

namespace {

using nlohmann::json;
using namespace fields;

std::optional<int64_t> budget(const json& settings, const json& config, std::initializer_list<const char*> keys) {
  for (const json* src : {&settings, &config}) {
    if (!src->is_object()) continue;
    for (const char* k : keys)
      if (auto v = optnum(*src, k); v && *v > 0) return static_cast<int64_t>(*v);
    if (auto b = src->find("budget"); b != src->end() && b->is_object())
      for (const char* k : keys)
        if (auto v = optnum(*b, k); v && *v > 0) return static_cast<int64_t>(*v);
  }
  return std::nullopt;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

}  // namespace

std::string human_count(double v) {
  if (v >= 1e9) return svg::num(v / 1e9, 2) + "G";
  if (v >= 1e6) return svg::num(v / 1e6, 2) + "M";
  if (v >= 1e4) return svg::num(v / 1e3, 1) + "K";
  return svg::num(v, 0);
}

std::optional<double> known(std::optional<double> v) {
  return v && *v > 0 && std::isfinite(*v) ? v : std::nullopt;
}

ReportData summarize(const records::Log& events, const json& versions, const json& config) {
  ReportData s;
  s.versions = versions.is_object() ? versions : json::object();
  s.config = config.is_object() ? config : json::object();
  s.events = static_cast<int64_t>(events.size());
  std::map<std::string, records::LlmTally> agents;
  std::map<int, IterationRow> iterations;
  std::map<int, StructureColumn> structure;
  std::vector<std::string> order;
  std::set<std::string> prev_names;
  bool have_prev = false;
  // The subkernels as they stand now: from the latest iteration, then swaps.
  std::vector<SubkernelRow> current;
  records::BestSoFar best;  // the best solution as the records tell it (the status line's and summary.json's fold)

  auto place_after = [&](const std::vector<std::string>& parents, const std::vector<std::string>& children) {
    size_t pos = order.size();
    for (const auto& p : parents) {
      auto it = std::find(order.begin(), order.end(), p);
      if (it != order.end()) pos = pos == order.size() ? static_cast<size_t>(it - order.begin()) : std::max(pos, static_cast<size_t>(it - order.begin()));
    }
    size_t at = pos == order.size() ? order.size() : pos + 1;
    for (const auto& c : children) {
      if (std::find(order.begin(), order.end(), c) != order.end()) continue;
      order.insert(order.begin() + static_cast<std::ptrdiff_t>(at), c);
      ++at;
    }
  };

  // Each record read once, by its type.
  for (const auto& ev : events) {
    std::visit(
        records::Visit{
            [&](const records::RunStart& rs) {
              if (s.method.empty()) s.method = rs.method;
              if (s.problem.empty()) s.problem = rs.problem;
              if (rs.settings.is_object()) s.settings = rs.settings;
              if (rs.judge) s.judge_spec = *rs.judge;
            },
            [&](const records::Resume& r) {
              ++s.resumes;
              for (const auto& c : r.llm_changes)
                s.llm_changes.push_back(fmt::format("{} '{}' -> '{}' (resume {})", c.flag, c.from, c.to, s.resumes));
            },
            [&](const records::LlmCall& c) {
              agents[c.agent.empty() ? "(unknown)" : c.agent].add(c);
              s.by_task[c.task].add(c);
              s.llm_total.add(c);
            },
            [&](const records::Eval& e) { ++s.evals_by_status[e.status.empty() ? "unknown" : e.status]; },
            [&](const records::Judge& j) {
              auto& looks = j.candidate == "final"    ? s.judged_final
                            : j.stage == "after_beam" ? s.judged_after_beam
                                                      : s.judged_on_entry;
              ++looks.asked;
              if (j.verdict == "cheat") ++looks.cheats;
            },
            [&](const records::TopologyChange& tp) {
              StructureColumn col;
              col.iteration = tp.iteration;
              col.change = tp.change;
              col.detail = tp.detail;
              col.from = tp.from;
              col.into = tp.into;
              std::set<std::string> names;
              if (tp.subproblems_unknown && !structure.empty()) {
                col.subproblems = structure.rbegin()->second.subproblems;
                for (const auto& [n, st] : col.subproblems) names.insert(n);
              } else {
                for (const auto& x : tp.subproblems) {
                  col.subproblems.emplace_back(x.name, x.status);
                  names.insert(x.name);
                }
              }
              // Which subproblems were replaced by which: as the event says, else by difference.
              std::vector<std::string> from = col.from, into = col.into;
              if (have_prev && from.empty() && into.empty()) {
                for (const auto& n : prev_names)
                  if (!names.count(n)) from.push_back(n);
                for (const auto& [n, st] : col.subproblems)
                  if (!prev_names.count(n)) into.push_back(n);
              }
              if (!from.empty() && !into.empty()) {
                place_after(from, into);
                std::string note = from.size() == 1 && into.size() > 1   ? "split of " + from[0]
                                   : into.size() == 1 && from.size() > 1 ? "fusion of " + join(from, " + ")
                                                                         : "from " + join(from, ", ");
                for (const auto& c : into)
                  if (!s.lineage.count(c)) s.lineage[c] = note;
              }
              for (const auto& [n, st] : col.subproblems)
                if (std::find(order.begin(), order.end(), n) == order.end()) order.push_back(n);
              prev_names = names;
              have_prev = true;
              // Several events for one iteration (a failed split, then a fallback): the last one stands,
              // but a "kept the previous structure" note does not hide a real change.
              if (auto it = structure.find(col.iteration);
                  it != structure.end() && col.change == "unchanged" && it->second.change != "unchanged") {
                it->second.detail += (it->second.detail.empty() ? "" : "; ") + col.detail;
              } else {
                structure[col.iteration] = std::move(col);
              }
            },
            [&](const records::Iteration& it) {
              IterationRow row;
              row.t = it.t;
              row.e2e_status = it.e2e.status;
              row.speedup_compile = it.e2e.speedup_compile;
              row.speedup_eager = it.e2e.speedup_eager;
              row.runtime_ms = it.e2e.runtime_ms;
              // The calls and tokens so far, counted in the log itself (as every
              // other count here), never the search's own tally: a resumed process's
              // tally misses what was paid for before it.
              row.calls_used = s.llm_total.calls;
              row.tokens = s.llm_total.total();
              current.clear();
              for (const auto& x : it.subkernels) {
                SubkernelPoint p;
                p.correct = x.correct;
                p.speedup_compile = x.speedup_compile;
                p.runtime_ms = x.runtime_ms;
                p.share = x.share;
                p.uses_pytorch = x.uses_pytorch;
                row.subkernels[x.name] = p;
                if (std::find(order.begin(), order.end(), x.name) == order.end()) order.push_back(x.name);
                SubkernelRow r;
                r.name = x.name;
                r.status = p.correct ? "correct" : "failing";
                r.runtime_ms = p.runtime_ms;
                r.speedup_compile = p.speedup_compile;
                r.share = p.share;
                r.uses_pytorch = p.uses_pytorch;
                if (x.roofline.is_object()) {
                  r.roofline_fraction = optnum(x.roofline, "fraction");
                  r.headroom = optnum(x.roofline, "headroom");
                  r.bound = str(x.roofline, "bound");
                }
                current.push_back(r);
              }
              s.final_e2e_status = row.e2e_status;
              s.final_speedup_compile = row.speedup_compile;
              s.final_speedup_eager = row.speedup_eager;
              s.final_runtime_ms = row.runtime_ms;
              iterations[row.t] = std::move(row);
            },
            [&](const records::Best& b) { best.add(b); },
            [&](const records::ReuseMatch& r) {
              s.reuse.push_back({r.task, r.from_run, r.from_task, r.match, r.status, r.correct, r.calls_saved});
            },
            [&](const records::Swap& sw) {
              best.add(sw);
              std::vector<std::string> names = swapped_names(sw);
              for (auto& r : current) {
                if (std::find(names.begin(), names.end(), r.name) == names.end()) continue;
                r.uses_pytorch = sw.to == "pytorch";
                r.status = "correct";
                r.speedup_compile.reset();
                r.runtime_ms.reset();
                r.share.reset();
              }
              if (sw.speedup_after) {
                s.final_speedup_compile = sw.speedup_after;
                s.final_e2e_status = "correct";
              }
              s.swaps.push_back(sw);
            },
            [&](const records::Postfuse& pf) { s.postfuse.push_back(pf); },
            [&](const records::VerifyDecomposition& vd) { s.verifications.push_back(vd); },
            [&](const records::CompositionFailure& cf) { s.composition_failures.push_back(cf); },
            [&](const records::FinalCheck& fc) {
              // --baseline-tf32: the returned solution against torch.compile with TF32 on.
              if (fc.passed) s.final_speedup_compile_tf32 = fc.speedup_compile_tf32;
            },
            [&](const records::RunEnd& end) {
              best.add(end);
              s.ended = true;
              s.end_status = end.status;
              s.end_message = end.message;
              s.solution_dir = end.solution_dir;
            },
            [](const auto&) {}},
        ev);
  }

  s.final_check = records::final_check_outcome(events);
  for (auto& [t, row] : iterations) s.iterations.push_back(std::move(row));
  for (auto& [t, col] : structure) s.structure.push_back(std::move(col));
  s.subproblem_order = order;
  for (auto& [name, tot] : agents) s.agents.emplace_back(name, tot);
  std::stable_sort(s.agents.begin(), s.agents.end(),
                   [](const auto& a, const auto& b) { return a.second.total() > b.second.total(); });

  // Best: the records' word, else the best correct iteration.
  s.contains_pytorch = best.contains_pytorch;
  s.best_speedup_compile = best.speedup_compile;
  s.best_t = best.speedup_compile ? best.t : -1;
  if (!s.best_speedup_compile) {
    for (const auto& row : s.iterations) {
      if (row.e2e_status == "correct" && row.speedup_compile &&
          (!s.best_speedup_compile || *row.speedup_compile > *s.best_speedup_compile)) {
        s.best_speedup_compile = row.speedup_compile;
        s.best_t = row.t;
      }
    }
  }

  // The figure reported for the returned solution is its final check's own
  // measurement, where one passed and recorded it.
  if (s.final_check.result == "passed" && s.final_check.speedup_compile) {
    s.best_search_speedup_compile = s.final_check.search_speedup_compile;
    s.best_speedup_compile = s.final_check.speedup_compile;
    s.best_from_final_check = true;
    s.best_t = s.final_check.iteration;
  }

  // Final subkernels: from the last iteration (and swaps), else from the last topology.
  if (current.empty() && !s.structure.empty()) {
    for (const auto& [n, st] : s.structure.back().subproblems) {
      SubkernelRow r;
      r.name = n;
      r.status = st == "correct" ? "correct" : st == "failing" ? "failing" : "new";
      current.push_back(r);
    }
  }
  std::stable_sort(current.begin(), current.end(), [&](const SubkernelRow& a, const SubkernelRow& b) {
    return std::find(order.begin(), order.end(), a.name) < std::find(order.begin(), order.end(), b.name);
  });
  for (auto& r : current) {
    if (auto it = s.by_task.find(r.name); it != s.by_task.end()) r.usage = it->second;
    // adapt: a subkernel that passed as reused, got no kernel call since and
    // was not swapped is the reused one.
    bool swapped = false;
    for (const auto& sw : s.swaps) {
      auto names = swapped_names(sw);
      swapped |= std::find(names.begin(), names.end(), r.name) != names.end();
    }
    for (const auto& u : s.reuse)
      if (u.task == r.name && u.correct && r.usage.calls == 0 && r.status == "correct" && !swapped)
        r.reused_from = u.from_run;
    if (r.uses_pytorch) s.pytorch_subkernels.push_back(r.name);
    if (r.status != "correct") s.failing_locally.push_back(r.name);
  }
  s.final_subkernels = std::move(current);
  if (!s.pytorch_subkernels.empty()) s.contains_pytorch = true;
  s.final_e2e_failed = !s.final_e2e_status.empty() && s.final_e2e_status != "correct";

  // The structure grid: one column per finished iteration, plus structures
  // formed after the last one (a live run). A column shows the latest
  // structure formed at or before its iteration, labelled with the change
  // that formed it since the previous column.
  std::set<int> ts;
  for (const auto& r : s.iterations) ts.insert(r.t);
  int last_t = ts.empty() ? std::numeric_limits<int>::min() : *ts.rbegin();
  for (const auto& c : s.structure)
    if (c.iteration > last_t) ts.insert(c.iteration);
  s.grid.rows = order;
  s.grid.cells.assign(order.size(), {});
  int prev_t = std::numeric_limits<int>::min();
  for (int t : ts) {
    const StructureColumn* col = nullptr;
    std::string change, detail;
    for (const auto& c : s.structure) {
      if (c.iteration > t) break;
      col = &c;
      if (c.iteration > prev_t && c.change != "unchanged") {
        change = c.change;
        detail = c.detail.empty() ? detail : c.detail;
      }
    }
    prev_t = t;
    const IterationRow* row = nullptr;
    for (const auto& r : s.iterations)
      if (r.t == t) row = &r;
    s.grid.t.push_back(t);
    s.grid.change.push_back(change);
    s.grid.detail.push_back(detail);
    auto from_status = [](const std::string& st) {
      return st == "correct" ? StructureGrid::kOk : st == "failing" ? StructureGrid::kFailed : StructureGrid::kNew;
    };
    for (size_t i = 0; i < order.size(); ++i) {
      const std::string& name = order[i];
      StructureGrid::Cell cell = StructureGrid::kAbsent;
      std::optional<std::string> status;
      if (col)
        for (const auto& [n, st] : col->subproblems)
          if (n == name) status = st;
      if (row && row->subkernels.count(name))
        cell = row->subkernels.at(name).correct ? StructureGrid::kOk : StructureGrid::kFailed;
      else if (status)
        cell = from_status(*status);
      s.grid.cells[i].push_back(cell);
    }
  }

  s.max_calls = budget(s.settings, s.config, {"max_calls", "call_budget", "calls"});
  s.max_tokens = budget(s.settings, s.config, {"max_tokens_total", "token_budget", "max_total_tokens", "tokens"});
  s.time = rundir::time_account(events);
  return s;
}

std::vector<std::string> swapped_names(const records::Swap& s) {
  std::vector<std::string> out;
  const auto& extra = s.meta.extra;
  if (extra.is_object() && extra.contains("names") && extra["names"].is_array())
    for (const auto& n : extra["names"])
      if (n.is_string()) out.push_back(n.get<std::string>());
  if (out.empty()) out.push_back(s.name);
  return out;
}

}  // namespace mk::report
