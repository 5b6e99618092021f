// `mkevolve report DIR`: report.md and a self-contained report.html from a run
// directory's event log. Works on a finished run and on one still running.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/registry.h"
#include "report/report.h"

namespace mk::cli {
namespace {

int report_cmd_main(int argc, char** argv) {
  CLI::App app{"Writes report.md and report.html (inline SVG charts, no scripts, no network) for a run directory: "
               "end-to-end and per-subkernel speedups per iteration, the evolving subproblem structure, tokens and "
               "calls by agent, the subkernel table, versions and the TF32 setting.",
               argv[0]};
  app.footer(help_footer({
                     "mkevolve report runs/model",
                     "mkevolve report runs/model --out /tmp/model-report -q"},
                    {
                     {0, "report.md and report.html were written"},
                     {2, "bad usage, or not a run directory (no readable events.jsonl)"}}));
  std::string dir, out;
  bool quiet = false;
  app.add_option("dir", dir, "run directory (holds events.jsonl)")->required()->type_name("DIR");
  app.add_option("--out", out, "where to write the reports (default: the run directory)")->type_name("DIR");
  app.add_flag("-q,--quiet", quiet, kQuietFilesHelp);
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  std::vector<std::string> warnings;
  auto written = report::write_report(dir, out.empty() ? dir : out, &warnings);
  for (const auto& w : warnings) std::fprintf(stderr, "mkevolve report: warning: %s\n", w.c_str());
  if (!written) {
    std::fprintf(stderr, "mkevolve report: %s\n", written.error().c_str());
    return kExitUsage;
  }
  if (!quiet)
    for (const auto& p : *written) std::printf("%s\n", p.c_str());
  return kExitOk;
}

static Register reg_report("report", "write report.md and report.html for a run directory", &report_cmd_main);

}  // namespace
}  // namespace mk::cli
