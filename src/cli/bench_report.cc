// `mkevolve bench-report DIR...`: merges bench directories (shards, methods) and
// writes the suite metrics as report.md, report.html, report.json and report.csv.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_report.h"
#include "cli/args.h"
#include "cli/registry.h"
#include "util/fs.h"

namespace mk::cli {
namespace {

namespace fs = std::filesystem;

int bench_report_cmd(int argc, char** argv) {
  CLI::App app{"Merges the summary.json files of bench directories (any number of shards and methods) and writes "
               "report.md, report.html (inline SVG, no scripts), report.json and report.csv: per method Correct, "
               "fast_p vs torch.compile and eager (p = 0.5, 1, 2; correct AND speedup > p, over all problems), "
               "geometric-mean speedup over correct problems, tokens; the per-problem table; the win-rate matrix; "
               "metric-vs-LLM-calls curves. Definitions: docs/BENCH.md.",
               argv[0]};
  app.footer(help_footer({
                     "mkevolve bench-report bench/",
                     "mkevolve bench-report shard0/ shard1/ --out merged/report.md -q"},
                    {
                     {0, "the reports were written"},
                     {1, "a report file could not be written"},
                     {2, "bad usage, or no summary.json under the directories"}}));
  std::vector<std::string> dirs;
  std::string out;
  int64_t step = 16;
  bool quiet = false;
  app.add_option("dirs", dirs, "bench directories (or single run directories)")->required()->type_name("DIR");
  app.add_option("--out", out,
                 "a directory to write the four files into, or a FILE.md/.html/.json/.csv whose siblings get "
                 "the other three (default: the first DIR)")
      ->type_name("PATH");
  app.add_option("--curve-step", step, "LLM calls between curve points")->capture_default_str();
  app.add_flag("-q,--quiet", quiet, kQuietFilesHelp);
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  if (step < 1) {
    std::fprintf(stderr, "mkevolve bench-report: --curve-step must be at least 1\n");
    return kExitUsage;
  }
  std::vector<fs::path> paths(dirs.begin(), dirs.end());
  for (const auto& p : paths)
    if (!fs::is_directory(p)) {
      std::fprintf(stderr, "mkevolve bench-report: %s is not a directory\n", p.string().c_str());
      return kExitUsage;
    }
  auto results = bench::load_results(paths);
  if (!results) {
    std::fprintf(stderr, "mkevolve bench-report: %s\n", results.error().c_str());
    return kExitUsage;
  }
  auto report = bench::build_report(std::move(*results), step);
  for (const auto& w : report.results.warnings) std::fprintf(stderr, "mkevolve bench-report: warning: %s\n", w.c_str());

  fs::path dir, stem = "report";
  if (out.empty()) {
    dir = paths.front();
  } else {
    fs::path o = out;
    std::string ext = o.extension().string();
    if (ext == ".md" || ext == ".html" || ext == ".json" || ext == ".csv") {
      dir = o.parent_path().empty() ? fs::path(".") : o.parent_path();
      stem = o.stem();
    } else {
      dir = o;
    }
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string md = bench::render_markdown(report);
  const std::pair<std::string, std::string> files[] = {
      {".md", md},
      {".html", bench::render_html(report)},
      {".json", bench::render_json(report).dump(2) + "\n"},
      {".csv", bench::render_csv(report)},
  };
  std::vector<std::string> written;
  for (const auto& [ext, text] : files) {
    fs::path p = dir / (stem.string() + ext);
    if (auto st = write_file_atomic(p, text); !st) {
      std::fprintf(stderr, "mkevolve bench-report: %s\n", st.error().c_str());
      return kExitFailure;
    }
    written.push_back(p.string());
  }
  if (!quiet) {
    std::printf("%s\n", md.c_str());
    for (const auto& w : written) std::printf("wrote %s\n", w.c_str());
  }
  return kExitOk;
}

static Register reg_bench_report("bench-report", "merge bench directories and write the suite metrics (md, html, json, csv)",
                    &bench_report_cmd);

}  // namespace
}  // namespace mk::cli
