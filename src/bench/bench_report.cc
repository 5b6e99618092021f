#include "bench/bench_report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "eval/shapes.h"
#include "report/svg.h"
#include "util/fs.h"

namespace mk::bench {

namespace {

std::string fmt2(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", x);
  return b;
}

// A figure that may be unknown: "n/a" in text (the legend says why), never 0.
std::string fmt2(const std::optional<double>& x) { return x ? fmt2(*x) : std::string("n/a"); }
// The same for CSV: an empty field.
std::string csv_num(const std::optional<double>& x) {
  if (!x) return "";
  std::ostringstream o;
  o << *x;
  return o.str();
}

// Whether any run measured the --baseline-tf32 baseline (then the tables show it).
bool any_tf32(const BenchReport& r) {
  for (const auto& [m, outs] : r.results.by_method)
    for (const auto& x : outs)
      if (x.speedup_compile_tf32) return true;
  return false;
}

// The returned solution's final check at the shape variants (--shapes), or
// nullopt when it was not checked there.
std::optional<eval::ShapesRecord> shapes_of(const run::Outcome& x) {
  if (!x.final_check.is_object() || !x.final_check.contains("shapes")) return std::nullopt;
  return eval::ShapesRecord::from_json(x.final_check["shapes"]);
}
bool any_shapes(const BenchReport& r) {
  for (const auto& [m, outs] : r.results.by_method)
    for (const auto& x : outs)
      if (shapes_of(x)) return true;
  return false;
}
/// The "holds at" cell: variants held of those tried, and the first failure.
std::string holds_at_cell(const run::Outcome& x) {
  auto s = shapes_of(x);
  if (!s) return "–";
  const size_t tried = s->held.size() + s->failed.size();
  if (tried == 0) return s->not_reached.empty() ? "benchmark only" : "–";
  std::string c = std::to_string(s->held.size()) + "/" + std::to_string(tried) + " variants";
  if (!s->failed.empty()) c += " (fails at " + s->failed[0].shape + ")";
  return c;
}

struct Counts {
  int runs = 0, test_mode = 0, no_compile = 0, no_eager = 0;
};
Counts counts(const BenchReport& r) {
  Counts c;
  for (const auto& m : r.metrics) {
    c.runs += m.problems;
    c.test_mode += m.test_mode;
    c.no_compile += m.no_compile_baseline;
    c.no_eager += m.no_eager_baseline;
  }
  return c;
}

// The lines that say what the figures are: test mode first (then they are
// not GPU timings at all), the legend of n/a, and why figures are missing.
std::vector<std::string> caveats(const BenchReport& r) {
  const Counts c = counts(r);
  std::vector<std::string> out;
  if (c.test_mode > 0)
    out.push_back(std::to_string(c.test_mode) + " of the " + std::to_string(c.runs) +
                  " runs ran in the worker's CPU TEST MODE (--test-cpu-unsafe): their kernels may be PyTorch "
                  "stand-ins run on a CPU, not GPU kernels, and their speedups mean nothing.");
  out.push_back("n/a: not known (no correct kernel, or no baseline measured); it is never counted as 0, is left "
                "out of the geomeans and is never \"faster than p\".");
  if (c.no_compile > 0)
    out.push_back(std::to_string(c.no_compile) + " correct problem" + (c.no_compile == 1 ? " has" : "s have") +
                  " no torch.compile baseline on the machine that ran " + (c.no_compile == 1 ? "it" : "them") +
                  " (a torch without a working torch.compile): their speedup vs torch.compile is n/a.");
  if (c.no_eager > 0)
    out.push_back(std::to_string(c.no_eager) + " correct problem" + (c.no_eager == 1 ? " has" : "s have") +
                  " no eager baseline: their speedup vs eager is n/a.");
  return out;
}

std::string status_text(const run::Outcome& x) {
  return x.status + (x.test_mode ? " (test mode)" : "") + (x.error.empty() ? "" : " (" + x.error + ")");
}

std::string fmt_tokens(double t) {
  char b[32];
  if (t >= 1e6) std::snprintf(b, sizeof b, "%.2fM", t / 1e6);
  else if (t >= 1e3) std::snprintf(b, sizeof b, "%.1fk", t / 1e3);
  else std::snprintf(b, sizeof b, "%.0f", t);
  return b;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

Result<SuiteResults> load_results(const std::vector<std::filesystem::path>& dirs) {
  SuiteResults res;
  struct Seen { std::filesystem::path file; bool finished; };
  std::map<std::pair<std::string, std::string>, Seen> seen;
  std::map<std::pair<std::string, std::string>, size_t> index;
  if (dirs.empty()) return Error{"no bench directories given"};
  for (const auto& d : dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(d, ec)) return Error{d.string() + ": not a directory (expected a bench --out directory)"};
    std::vector<std::filesystem::path> files;
    for (auto it = std::filesystem::recursive_directory_iterator(d, ec); !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
      if (it->is_regular_file() && it->path().filename() == "summary.json") files.push_back(it->path());
    if (ec) return Error{"cannot list " + d.string() + ": " + ec.message()};
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      auto text = read_file(f);
      if (!text.ok()) { res.warnings.push_back(text.error()); continue; }
      nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
      if (j.is_discarded()) { res.warnings.push_back(f.string() + ": not valid JSON, skipped"); continue; }
      auto o = run::outcome_from_summary(j);
      if (!o.ok()) { res.warnings.push_back(f.string() + ": " + o.error() + ", skipped"); continue; }
      auto key = std::make_pair(o->method, o->problem_id);
      bool finished = o->status == "finished";
      auto& list = res.by_method[o->method];
      if (auto it = seen.find(key); it != seen.end()) {
        bool replace = finished || !it->second.finished;
        res.warnings.push_back("problem " + o->problem_id + " appears twice for method " + o->method + " (" +
                               it->second.file.string() + ", " + f.string() + "); keeping " +
                               (replace ? f.string() : it->second.file.string()));
        if (replace) {
          list[index[key]] = std::move(*o);
          it->second = {f, finished};
        }
        continue;
      }
      seen[key] = {f, finished};
      index[key] = list.size();
      list.push_back(std::move(*o));
    }
  }
  if (res.by_method.empty()) return Error{"no summary.json found under the given directories: have the runs finished?"};
  return res;
}

BenchReport build_report(SuiteResults results, int64_t curve_step) {
  BenchReport r;
  for (const auto& [m, outs] : results.by_method) {
    r.metrics.push_back(compute_metrics(m, outs));
    r.curves[m] = compute_curve(outs, curve_step);
  }
  r.win_rate = compute_win_rate(results.by_method);
  r.results = std::move(results);
  return r;
}

std::string render_markdown(const BenchReport& r) {
  std::ostringstream o;
  const Counts c = counts(r);
  o << "# MKEvolve benchmark report\n\n";
  if (c.test_mode > 0) o << "**TEST MODE**: " << caveats(r).front() << "\n\n";
  o << "Speedups are baseline time / kernel time on the same " << (c.test_mode == c.runs ? "machine" : "GPU")
    << ", fp32, TF32 disabled for PyTorch and Triton. "
       "fast_p is the share of all problems whose kernel is correct and more than p times as fast as the "
       "baseline (KernelBench's definition; an incorrect kernel counts as 0). Geomean is over correct problems "
       "with a measured baseline.\n\n";
  for (size_t i = c.test_mode > 0 ? 1 : 0; i < caveats(r).size(); ++i) o << "- " << caveats(r)[i] << "\n";
  o << "\n## Metrics vs torch.compile\n\n"
    << "| Method | Problems | Correct | Fast_0.5 | Fast_1 | Fast_2 | Geomean | Tokens (total) | Tokens (mean) |\n"
    << "|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& m : r.metrics) {
    o << "| " << m.method << (m.with_pytorch ? " †" : "") << " | " << m.problems << " | " << fmt2(m.correct) << " | "
      << fmt2(m.fast_compile.at("0.5")) << " | " << fmt2(m.fast_compile.at("1")) << " | " << fmt2(m.fast_compile.at("2"))
      << " | " << fmt2(m.geomean_compile) << " | " << fmt_tokens(static_cast<double>(m.total_tokens)) << " | "
      << fmt_tokens(m.mean_tokens) << " |\n";
  }
  bool any_pt = std::any_of(r.metrics.begin(), r.metrics.end(), [](const MethodMetrics& m) { return m.with_pytorch > 0; });
  if (any_pt) o << "\n† some solutions contain PyTorch subkernels (Swap): they are not pure Triton.\n";
  o << "\n## Metrics vs eager PyTorch\n\n| Method | Fast_0.5 | Fast_1 | Fast_2 | Geomean |\n|---|---|---|---|---|\n";
  for (const auto& m : r.metrics)
    o << "| " << m.method << " | " << fmt2(m.fast_eager.at("0.5")) << " | " << fmt2(m.fast_eager.at("1")) << " | "
      << fmt2(m.fast_eager.at("2")) << " | " << fmt2(m.geomean_eager) << " |\n";
  if (r.win_rate.methods.size() > 1) {
    o << "\n## Win rate\n\nShare of the problems both methods ran where the row method's speedup vs torch.compile "
         "is strictly higher than the column method's.\n\n| |";
    for (const auto& m : r.win_rate.methods) o << " " << m << " |";
    o << "\n|---|";
    for (size_t i = 0; i < r.win_rate.methods.size(); ++i) o << "---|";
    o << "\n";
    for (size_t i = 0; i < r.win_rate.methods.size(); ++i) {
      o << "| " << r.win_rate.methods[i] << " |";
      for (size_t j = 0; j < r.win_rate.methods.size(); ++j)
        o << " " << (i == j ? std::string("–") : fmt2(r.win_rate.rate[i][j])) << " |";
      o << "\n";
    }
  }
  // --baseline-tf32 runs: torch.compile with TF32 on, beside the TF32-off column (never instead of it).
  const bool tf32 = any_tf32(r);
  // --shapes check|search: the shapes each returned solution holds at (its final check's).
  const bool shapes = any_shapes(r);
  o << "\n## Per problem\n\n| Problem | Method | Status | Correct | vs compile |"
    << (tf32 ? " vs compile (TF32 on) |" : "") << " vs eager |" << (shapes ? " holds at |" : "") << " Tokens | Calls |\n"
    << "|---|---|---|---|---|" << (tf32 ? "---|" : "") << "---|" << (shapes ? "---|" : "") << "---|---|\n";
  for (const auto& [m, outs] : r.results.by_method)
    for (const auto& x : outs)
      o << "| " << x.problem_name << " | " << m << (x.uses_pytorch ? " †" : "") << " | " << status_text(x) << " | " << (x.correct ? "yes" : "no") << " | "
        << fmt2(x.speedup_compile) << " | " << (tf32 ? fmt2(x.speedup_compile_tf32) + " | " : std::string())
        << fmt2(x.speedup_eager) << " | " << (shapes ? holds_at_cell(x) + " | " : std::string()) << x.tokens << " | "
        << x.calls << " |\n";
  if (!r.results.warnings.empty()) {
    o << "\n## Warnings\n\n";
    for (const auto& w : r.results.warnings) o << "- " << w << "\n";
  }
  return o.str();
}

nlohmann::json render_json(const BenchReport& r) {
  nlohmann::json j;
  j["definitions"] = {{"fast_p", "share of all problems that are correct and have speedup > p (KernelBench)"},
                      {"geomean", "geometric mean of speedup over correct problems with a measured baseline"},
                      {"null", "not known (no correct kernel, or no baseline measured); never counted as 0"},
                      {"tf32", "disabled for PyTorch and Triton"}};
  j["notes"] = caveats(r);
  j["test_mode_runs"] = counts(r).test_mode;
  for (const auto& m : r.metrics) {
    j["methods"][m.method] = {{"problems", m.problems}, {"correct", m.correct}, {"fast_compile", m.fast_compile},
                              {"fast_eager", m.fast_eager},
                              {"geomean_compile", m.geomean_compile ? nlohmann::json(*m.geomean_compile) : nlohmann::json()},
                              {"geomean_eager", m.geomean_eager ? nlohmann::json(*m.geomean_eager) : nlohmann::json()},
                              {"no_compile_baseline", m.no_compile_baseline}, {"test_mode_runs", m.test_mode},
                              {"total_tokens", m.total_tokens},
                              {"mean_tokens", m.mean_tokens}, {"with_pytorch_subkernels", m.with_pytorch},
                              {"failed_runs", m.failed_runs}};
    nlohmann::json curve = nlohmann::json::array();
    for (const auto& c : r.curves.at(m.method))
      curve.push_back({{"calls", c.calls}, {"mean_tokens", c.mean_tokens}, {"correct", c.correct},
                       {"fast_0.5", c.fast_0_5}, {"fast_1", c.fast_1}, {"fast_2", c.fast_2}});
    j["curves"][m.method] = curve;
  }
  j["win_rate"] = {{"methods", r.win_rate.methods}, {"rate", r.win_rate.rate}, {"shared", r.win_rate.shared}};
  j["problems"] = nlohmann::json::array();
  for (const auto& [m, outs] : r.results.by_method)
    for (const auto& x : outs) j["problems"].push_back(run::summary_to_json(x));
  j["warnings"] = r.results.warnings;
  return j;
}

std::string render_csv(const BenchReport& r) {
  std::ostringstream o;
  // An unknown speedup is an empty field, never 0; test_mode 1: the row's
  // figures come from the worker's CPU test mode and mean nothing.
  o << "method,problem_id,problem_name,status,correct,speedup_compile,speedup_eager,tokens,calls,uses_pytorch,"
       "test_mode,error\n";
  for (const auto& [m, outs] : r.results.by_method)
    for (const auto& x : outs)
      o << csv_field(m) << "," << csv_field(x.problem_id) << "," << csv_field(x.problem_name) << "," << x.status << ","
        << (x.correct ? 1 : 0) << "," << csv_num(x.speedup_compile) << "," << csv_num(x.speedup_eager) << ","
        << x.tokens << "," << x.calls << "," << (x.test_mode ? "" : x.uses_pytorch ? "1" : "0") << ","
        << (x.test_mode ? 1 : 0) << "," << csv_field(x.error) << "\n";
  return o.str();
}

}  // namespace mk::bench

// ---------------------------------------------------------------------------
// HTML

namespace mk::bench {

namespace {

namespace svg = mk::report::svg;

std::string heatmap(const WinRate& w) {
  const double cell = 70, left = 150, top = 110;
  size_t n = w.methods.size();
  svg::Canvas c(left + cell * static_cast<double>(n) + 20, top + cell * static_cast<double>(n) + 20);
  for (size_t j = 0; j < n; ++j)
    c.text(left + cell * (static_cast<double>(j) + 0.5), top - 10, w.methods[j], "start", 12, "#333", "normal", -40);
  for (size_t i = 0; i < n; ++i) {
    double y = top + cell * static_cast<double>(i);
    c.text(left - 8, y + cell / 2 + 4, w.methods[i], "end", 12);
    for (size_t j = 0; j < n; ++j) {
      double x = left + cell * static_cast<double>(j);
      if (i == j) {
        c.rect(x, y, cell - 2, cell - 2, "#eee");
        continue;
      }
      double r = w.rate[i][j];
      // White (0) to a deep blue (1).
      int red = static_cast<int>(255 - r * 200), green = static_cast<int>(255 - r * 140);
      char fill[16];
      std::snprintf(fill, sizeof fill, "#%02x%02xff", red, green);
      std::string tip = w.methods[i] + " beats " + w.methods[j] + " on " + svg::num(r * 100, 0) + "% of " +
                        std::to_string(w.shared[i][j]) + " shared problems";
      c.rect(x, y, cell - 2, cell - 2, fill, 0, "", tip);
      c.text(x + cell / 2 - 1, y + cell / 2 + 4, svg::num(r, 2), "middle", 13, r > 0.6 ? "#fff" : "#222");
    }
  }
  return c.str("Win rate: row method beats column method");
}

std::string curve_chart(const BenchReport& r, const std::string& metric) {
  svg::LineChart lc;
  lc.title = metric + " vs LLM calls per problem";
  lc.y_label = metric + " (share of problems)";
  lc.y_suffix = "";  // a fraction of the problems, not a speedup
  lc.x_label = "LLM calls per problem (mean tokens per problem)";
  size_t longest = 0;
  std::string longest_method;
  for (const auto& [m, c] : r.curves)
    if (c.size() > longest) longest = c.size(), longest_method = m;
  for (size_t i = 0; i < longest; ++i) {
    const auto& cp = r.curves.at(longest_method)[i];
    lc.x_ticks.push_back(std::to_string(cp.calls) + " (" + fmt_tokens(cp.mean_tokens) + ")");
  }
  size_t k = 0;
  for (const auto& [m, c] : r.curves) {
    svg::Series s;
    s.name = m;
    s.color = svg::palette()[k++ % svg::palette().size()];
    for (size_t i = 0; i < longest; ++i) {
      if (i >= c.size()) {
        s.y.push_back(std::nullopt);
        continue;
      }
      const auto& cp = c[i];
      double v = metric == "Correct" ? cp.correct : metric == "Fast_0.5" ? cp.fast_0_5 : metric == "Fast_1" ? cp.fast_1 : cp.fast_2;
      s.y.push_back(v);
    }
    s.failed.assign(s.y.size(), false);
    lc.series.push_back(std::move(s));
  }
  return svg::line_chart(lc);
}

}  // namespace

std::string render_html(const BenchReport& r) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>MKEvolve benchmark report</title>\n"
       "<style>body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1000px;"
       "color:#222;line-height:1.45}table{border-collapse:collapse;margin:1em 0;font-size:14px}th,td{border:1px solid #ddd;"
       "padding:4px 8px;text-align:right}th{background:#f4f6f8}td:first-child,th:first-child{text-align:left}"
       ".note{color:#555;font-size:13px}.warn{color:#a33}h2{margin-top:1.6em;border-bottom:1px solid #eee}</style>"
       "</head><body>\n<h1>MKEvolve benchmark report</h1>\n";
  const Counts c = counts(r);
  const auto notes = caveats(r);
  if (c.test_mode > 0)
    o << "<p class=\"warn\" style=\"border:2px solid #a33;padding:8px\"><b>TEST MODE</b>: " << svg::escape(notes.front())
      << "</p>\n";
  o << "<p class=\"note\">Speedup = baseline time / kernel time on the same "
    << (c.test_mode == c.runs ? "machine" : "GPU")
    << "; fp32; TF32 disabled for PyTorch and Triton. fast_p = share of all problems whose kernel is correct and "
       "more than p&times; as fast (KernelBench's definition; incorrect counts as 0). Geomean over correct problems "
       "with a measured baseline.</p>\n<ul class=\"note\">";
  for (size_t i = c.test_mode > 0 ? 1 : 0; i < notes.size(); ++i) o << "<li>" << svg::escape(notes[i]) << "</li>";
  o << "</ul>\n";
  o << "<h2>Metrics vs torch.compile</h2>\n<table><tr><th>Method</th><th>Problems</th><th>Correct</th><th>Fast<sub>0.5</sub>"
       "</th><th>Fast<sub>1</sub></th><th>Fast<sub>2</sub></th><th>Geomean</th><th>Fast<sub>1</sub> vs eager</th>"
       "<th>Tokens</th><th>Mean tokens</th></tr>\n";
  for (const auto& m : r.metrics)
    o << "<tr><td>" << svg::escape(m.method) << (m.with_pytorch ? " &dagger;" : "") << "</td><td>" << m.problems
      << "</td><td>" << fmt2(m.correct) << "</td><td>" << fmt2(m.fast_compile.at("0.5")) << "</td><td>"
      << fmt2(m.fast_compile.at("1")) << "</td><td>" << fmt2(m.fast_compile.at("2")) << "</td><td>"
      << fmt2(m.geomean_compile) << "</td><td>" << fmt2(m.fast_eager.at("1")) << "</td><td>"
      << fmt_tokens(static_cast<double>(m.total_tokens)) << "</td><td>" << fmt_tokens(m.mean_tokens) << "</td></tr>\n";
  o << "</table>\n";
  if (std::any_of(r.metrics.begin(), r.metrics.end(), [](const MethodMetrics& m) { return m.with_pytorch > 0; }))
    o << "<p class=\"warn\">&dagger; some solutions contain PyTorch subkernels (Swap): they are not pure Triton.</p>\n";
  if (r.win_rate.methods.size() > 1) o << "<h2>Win rate</h2>\n" << heatmap(r.win_rate) << "\n";
  o << "<h2>Metrics vs LLM calls and tokens</h2>\n";
  for (const char* metric : {"Correct", "Fast_0.5", "Fast_1", "Fast_2"}) o << curve_chart(r, metric) << "\n";
  const bool tf32 = any_tf32(r);
  o << "<h2>Per problem</h2>\n<table><tr><th>Problem</th><th>Method</th><th>Status</th><th>Correct</th>"
       "<th>vs compile</th>"
    << (tf32 ? "<th>vs compile (TF32 on)</th>" : "") << "<th>vs eager</th><th>Tokens</th><th>Calls</th></tr>\n";
  for (const auto& [m, outs] : r.results.by_method)
    for (const auto& x : outs)
      o << "<tr><td>" << svg::escape(x.problem_name) << "</td><td>" << svg::escape(m) << (x.uses_pytorch ? " &dagger;" : "")
        << "</td><td>" << svg::escape(status_text(x)) << "</td><td>" << (x.correct ? "&#10003;" : "&#10007;") << "</td><td>" << fmt2(x.speedup_compile) << "</td><td>"
        << (tf32 ? fmt2(x.speedup_compile_tf32) + "</td><td>" : std::string())
        << fmt2(x.speedup_eager) << "</td><td>" << x.tokens << "</td><td>" << x.calls << "</td></tr>\n";
  o << "</table>\n";
  if (!r.results.warnings.empty()) {
    o << "<h2>Warnings</h2><ul>";
    for (const auto& w : r.results.warnings) o << "<li class=\"warn\">" << svg::escape(w) << "</li>";
    o << "</ul>\n";
  }
  o << "</body></html>\n";
  return o.str();
}

}  // namespace mk::bench
