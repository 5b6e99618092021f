// `mkevolve run`: the whole method (or a baseline) on one problem, in a run
// directory that can be resumed.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli/method_common.h"
#include "cli/args.h"
#include "cli/flags.h"
#include "cli/registry.h"
#include "run/run_in_directory.h"

namespace mk::cli {
namespace {

int run_cmd(int argc, char** argv) {
  CLI::App app{"Runs MKEvolve on a KernelBench-format problem: decompose it into subproblems, evolve a Triton "
               "kernel per subproblem with beam search, split failing subproblems (and fuse passing ones with "
               "--fuse), and compose the verified subkernels into DIR/solution. --method picks a baseline "
               "instead (parallel sampling, end-to-end beam search, a single decomposition) with the same "
               "prompts, evaluator and budget. Before any paid LLM call it loads the problem and runs its reference "
               "once, and probes the LLM endpoint. A run can be resumed after a crash, Ctrl-C or a full disk.",
               argv[0]};
  app.footer(help_footer({
                     "mkevolve run model.py --llm anthropic:claude-opus-4-5 --out runs/model",
                     "mkevolve run model.py --llm openai:Qwen/Qwen3-32B --base-url http://localhost:8000/v1 --out runs/q --iterations 3",
                     "mkevolve run --resume runs/model"},
                    {
                     {0, "a correct solution was written to DIR/solution"},
                     {1, "no correct kernel was found"},
                     {2, "bad usage or input: a flag, a broken problem file, an --out that cannot hold a run"},
                     {3, "something missing on this machine: no GPU, no torch, no LLM, an unreachable endpoint or a refused key, a full disk"},
                     {130, "interrupted (continue with mkevolve run --resume DIR)"}}));
  run::RunRequest req;
  req.cmd = "run";
  std::string problem, out, resume;
  bool quiet = false, events_json = false;
  Flags flags;
  std::optional<OptionGroup> group;
  group.emplace(app, "Input and output");
  app.add_option("problem", problem, "the problem file (Model, get_inputs, get_init_inputs)")->type_name("FILE");
  app.add_option("--out", out, "the run directory to create (must not exist or be empty)")->type_name("DIR");
  app.add_option("--resume", resume, "continue the run in this directory (same settings; cached LLM replies and "
                                     "evaluations are not paid for again)")
      ->type_name("DIR");
  app.add_flag("-q,--quiet", quiet, "print nothing but the result");
  app.add_flag("--events-json", events_json, "print every event as one JSON line (for scripts)");
  group.reset();
  flags.search.eval.shapes = "check";  // the returned solution is also checked at shape variants
  add_flags(app, "run", flags);
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  req.opts = flags.search;
  req.env = flags.env;
  req.swap_with = flags.swap_with;
  auto usage = [](const char* m) {
    std::fprintf(stderr, "mkevolve run: %s\n", m);
    return kExitUsage;
  };
  if (!resume.empty()) {
    if (!problem.empty())
      return usage("give either a problem file (a new run) or --resume DIR (the run in DIR keeps its own problem), "
                   "not both");
    if (!out.empty() && out != resume) return usage("give either --resume DIR or --out DIR, not both");
    req.resume = true;
    req.out = resume;
  } else {
    if (problem.empty()) return usage("give the problem file (mkevolve run P.py --llm SPEC --out DIR)");
    if (out.empty()) return usage("give the run directory with --out DIR");
    req.problem_file = problem;
    req.out = out;
  }
  if (std::string err = method::search_options_error(req.opts); !err.empty()) return usage(err.c_str());
  req.mode = quiet ? report::StatusLine::Mode::kQuiet
                   : events_json ? report::StatusLine::Mode::kEventsJson : report::StatusLine::Mode::kAuto;
  return run::run_in_directory(std::move(req), method::env_setup());
}

static Register reg_run("run", "run MKEvolve (or a baseline) on a problem: decompose, evolve, compose; resumable",
                    &run_cmd);

}  // namespace
}  // namespace mk::cli
