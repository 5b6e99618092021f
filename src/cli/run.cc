// `mkevolve run`: the whole method (or a baseline) on one problem, in a run
// directory that can be resumed.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli/method_common.h"
#include "cli/registry.h"

namespace mk::cli {
namespace {

int run_cmd(int argc, char** argv) {
  CLI::App app{"Runs MKEvolve on a KernelBench-format problem: decompose it into subproblems, evolve a Triton "
               "kernel per subproblem with beam search, split failing subproblems (and fuse passing ones with "
               "--fuse), and compose the verified subkernels into DIR/solution. --method picks a baseline "
               "instead (parallel sampling, end-to-end beam search, a single decomposition) with the same "
               "prompts, evaluator and budget. Exit status: 0 a correct solution, 1 none found, 2 bad usage, "
               "3 no GPU or LLM (or the LLM refused), 130 interrupted (resume with --resume DIR).",
               argv[0]};
  method::RunRequest req;
  req.cmd = "run";
  std::string problem, out, resume;
  bool quiet = false, events_json = false;
  search::SearchOptions& o = req.opts;
  app.add_option("problem", problem, "the problem file (Model, get_inputs, get_init_inputs)");
  app.add_option("--out", out, "the run directory to create (must not exist or be empty)");
  app.add_option("--resume", resume, "continue the run in this directory (same settings; cached LLM replies and "
                                     "evaluations are not paid for again)");
  app.add_option("--method", o.method, "mkevolve, parallel, beam or single-split")
      ->check(CLI::IsMember({"mkevolve", "parallel", "beam", "single-split"}))
      ->capture_default_str();
  app.add_flag("--fuse", o.fuse, "let LLMFuse merge subproblems when none fails (MKEvolve (Fuse))");
  app.add_option("--swap", o.swap_tau,
                 "after the search, replace subkernels slower than TAU x their subproblem's torch.compile with the "
                 "PyTorch reference (or --swap-with); the solution is then marked as containing PyTorch")
      ->expected(0, 1)
      ->default_str("0.9");
  app.add_option("--swap-with", req.swap_with, "NAME=FILE: Swap's alternative kernel for subproblem NAME (repeatable)");
  app.add_option("--postfuse", o.postfuse, "LLM calls for fusing the final modular solution into one kernel")
      ->capture_default_str();
  app.add_option("--iterations", o.iterations, "outer iterations T")->capture_default_str();
  app.add_option("--refine-every", o.refine_every, "split/fuse every L iterations (when t mod L == 0)")
      ->capture_default_str();
  app.add_option("--calls-per-iter", o.calls_per_iter, "kernel-writing LLM calls per iteration")->capture_default_str();
  app.add_option("--beam-width", o.beam_width, "beam width")->capture_default_str();
  app.add_option("--expansion", o.expansion, "children per beam member per round")->capture_default_str();
  app.add_option("--decompose-workers", o.decompose_workers, "parallel decomposition workers K")->capture_default_str();
  app.add_option("--decompose-attempts", o.decompose_attempts, "tries per decomposition worker")
      ->capture_default_str();
  app.add_option("--refine-attempts", o.refine_attempts, "tries per split or fuse")->capture_default_str();
  app.add_option("--max-tokens", o.max_tokens, "reply token limit per LLM call")->capture_default_str();
  method::add_env_flags(app, req.env, true);
  method::add_eval_flags(app, o.eval);
  app.add_flag("-q,--quiet", quiet, "print nothing but the result");
  app.add_flag("--events-json", events_json, "print every event as one JSON line (for scripts)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  auto usage = [](const char* m) {
    std::fprintf(stderr, "mkevolve run: %s\n", m);
    return kExitUsage;
  };
  if (!resume.empty()) {
    if (!out.empty() && out != resume) return usage("give either --resume DIR or --out DIR, not both");
    req.resume = true;
    req.out = resume;
  } else {
    if (problem.empty()) return usage("give the problem file (mkevolve run P.py --llm SPEC --out DIR)");
    if (out.empty()) return usage("give the run directory with --out DIR");
    req.problem_file = problem;
    req.out = out;
  }
  if (o.iterations < 1 || o.calls_per_iter < 1 || o.beam_width < 1 || o.expansion < 1 || o.refine_every < 1 ||
      o.decompose_workers < 1 || o.decompose_attempts < 1 || o.refine_attempts < 1 || o.postfuse < 0)
    return usage("--iterations, --calls-per-iter, --beam-width, --expansion, --refine-every and the attempt counts "
                 "must be positive; --postfuse not negative");
  if (o.swap_tau && *o.swap_tau <= 0) return usage("--swap TAU must be positive");
  req.mode = quiet ? report::StatusLine::Mode::kQuiet
                   : events_json ? report::StatusLine::Mode::kEventsJson : report::StatusLine::Mode::kAuto;
  return method::run_in_directory(std::move(req));
}

static Register reg("run", "run MKEvolve (or a baseline) on a problem: decompose, evolve, compose; resumable",
                    &run_cmd);

}  // namespace
}  // namespace mk::cli
