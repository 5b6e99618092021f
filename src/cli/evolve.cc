// `mkevolve evolve`: LLMEvolveKernel alone, beam search on one problem with a
// budget of B LLM calls (the paper's end-to-end beam search baseline).
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>

#include "cli/method_common.h"
#include "cli/args.h"
#include "cli/flags.h"
#include "cli/registry.h"
#include "run/run_in_directory.h"

namespace mk::cli {
namespace {

std::string default_out(const std::string& problem) {
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&now));
  return "runs/" + std::filesystem::path(problem).stem().string() + "-evolve-" + buf;
}

int evolve_cmd(int argc, char** argv) {
  CLI::App app{"Evolves a Triton kernel for one problem with beam search (width 4, expansion 1 by default), "
               "spending exactly B LLM calls: debug prompts for failing kernels, optimize prompts for passing "
               "ones. Writes a run directory with every candidate and the best kernel as a solution package.",
               argv[0]};
  app.footer(help_footer({
                     "mkevolve evolve model.py --llm anthropic:claude-opus-4-5 --budget 16",
                     "mkevolve evolve model.py --llm SPEC --out runs/beam --beam-width 8 --expansion 2",
                     "mkevolve run --resume runs/beam   (evolve's run directories resume with run)"},
                    {
                     {0, "a correct solution was written to DIR/solution"},
                     {1, "no correct kernel was found"},
                     {2, "bad usage or input: a flag, a broken problem file, an --out that cannot hold a run"},
                     {3, "something missing on this machine: no GPU, no torch, no LLM, an unreachable endpoint or a refused key, a full disk"},
                     {130, "interrupted (continue with mkevolve run --resume DIR)"}}));
  run::RunRequest req;
  req.cmd = "evolve";
  std::string problem, out;
  int budget = 32;
  bool quiet = false, events_json = false;
  std::optional<OptionGroup> group;
  group.emplace(app, "Input and output");
  app.add_option("problem", problem, "the problem file (Model, get_inputs, get_init_inputs)")
      ->required()
      ->type_name("FILE");
  app.add_option("--out", out, "the run directory (default: runs/<problem>-evolve-<time>)")->type_name("DIR");
  app.add_flag("-q,--quiet", quiet, "print nothing but the result");
  app.add_flag("--events-json", events_json, "print every event as one JSON line (for scripts)");
  group.reset();
  group.emplace(app, "Budget");
  app.add_option("--budget", budget, "LLM calls to spend")->capture_default_str();
  group.reset();
  Flags flags;
  flags.search.eval.shapes = "check";  // the returned solution is also checked at shape variants
  add_flags(app, "evolve", flags);
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  req.opts = flags.search;
  req.env = flags.env;
  if (budget < 1 || req.opts.beam_width < 1 || req.opts.expansion < 1) {
    std::fprintf(stderr, "mkevolve evolve: --budget, --beam-width and --expansion must be positive\n");
    return kExitUsage;
  }
  if (std::string e = eval::tolerance_error(req.opts.eval); !e.empty()) {
    std::fprintf(stderr, "mkevolve evolve: %s\n", e.c_str());
    return kExitUsage;
  }
  req.opts.method = "beam";
  req.opts.iterations = 1;
  req.opts.calls_per_iter = budget;
  req.problem_file = problem;
  req.out = out.empty() ? default_out(problem) : out;
  req.mode = quiet ? report::StatusLine::Mode::kQuiet
                   : events_json ? report::StatusLine::Mode::kEventsJson : report::StatusLine::Mode::kAuto;
  return run::run_in_directory(std::move(req), method::env_setup());
}

static Register reg_evolve("evolve", "beam-search a Triton kernel for one problem with a budget of LLM calls", &evolve_cmd);

}  // namespace
}  // namespace mk::cli
