// `mkevolve adapt`: a finished run's verified subkernels reused for a variant
// of its problem (issue 17). The variant is decomposed with the earlier
// decomposition as the starting point; each subproblem that matches one of
// the earlier run's is checked with that run's subkernel first, at no LLM
// cost; only the new or failing ones are evolved, with --budget kernel calls.
// The result is a run directory like `run`'s, resumable with `run --resume`.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "records/run_config.h"
#include "run/problem_run.h"
#include "run/run_in_directory.h"
#include "cli/args.h"
#include "cli/flags.h"
#include "cli/method_common.h"
#include "cli/registry.h"
#include "util/fs.h"

namespace mk::cli {
namespace {

int adapt_cmd(int argc, char** argv) {
  CLI::App app{"Adapts a finished run to a variant of its problem: the variant is decomposed starting from the "
               "run's decomposition; every subproblem that matches one of the run's (the same file, the same "
               "module at other shapes, or the same name) is checked with the run's verified subkernel first, with "
               "no LLM call; only the new or failing subproblems are evolved, with --budget kernel calls; then the "
               "subkernels are composed and verified end to end. Writes a run directory as `run` does (resume it "
               "with `mkevolve run --resume DIR`, adapt it again). The evaluator's settings (--trials, --timeout, "
               "...), the LLM and the cheat judge are the earlier run's unless given here.",
               argv[0]};
  app.footer(help_footer({
                     "mkevolve adapt runs/model variant.py --out runs/variant",
                     "mkevolve adapt runs/model variant.py --out runs/variant --budget 16 --llm anthropic:claude-opus-4-5",
                     "mkevolve adapt runs/model large.py --out runs/large --trials 2 --perf-trials 2 --warmup 1 --timeout 120",
                     "mkevolve run --resume runs/variant"},
                    {
                     {0, "a correct solution was written to DIR/solution"},
                     {1, "no correct kernel was found"},
                     {2, "bad usage or input: a flag, a broken problem file, an --out that cannot hold a run"},
                     {3, "something missing on this machine: no GPU, no torch, no LLM, an unreachable endpoint or a refused key, a full disk"},
                     {130, "interrupted (continue with mkevolve run --resume DIR)"}}));
  run::RunRequest req;
  req.cmd = "adapt";
  std::string from, variant, out;
  int budget = 8;
  bool quiet = false, events_json = false;
  std::optional<OptionGroup> group;
  group.emplace(app, "Input and output");
  app.add_option("run_dir", from, "the finished run whose verified subkernels to reuse")->required()->type_name("DIR");
  app.add_option("variant", variant, "the variant's problem file (Model, get_inputs, get_init_inputs)")
      ->required()
      ->type_name("FILE");
  app.add_option("--out", out, "the run directory to create (must not exist or be empty)")
      ->required()
      ->type_name("DIR");
  app.add_flag("-q,--quiet", quiet, "print nothing but the result");
  app.add_flag("--events-json", events_json, "print every event as one JSON line (for scripts)");
  group.reset();
  group.emplace(app, "Budget");
  app.add_option("--budget", budget, "kernel LLM calls for the new or failing subproblems")->capture_default_str();
  group.reset();
  Flags flags;
  add_flags(app, "adapt", flags);
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  req.env = flags.env;
  auto say = [](const std::string& m) {
    std::fprintf(stderr, "mkevolve adapt: %s\n", m.c_str());
    return kExitUsage;
  };
  if (budget < 1) return say("--budget must be at least 1");
  auto reuse = run::load_reuse(from);
  if (!reuse) return say(reuse.error());
  auto cfg_read = read_json_file(fs::path(from) / "config.json");
  auto cfg = records::RunConfig::from_json(cfg_read ? *cfg_read : nlohmann::json());
  if (!cfg) return say(from + "/config.json: not a JSON object");
  auto opts = search::options_from_json(cfg->options);
  if (!opts) return say(from + "/config.json: " + opts.error());
  // The earlier run's settings (its tolerances, beam, token limits), one
  // iteration of --budget calls, no structure changes and no Swap or PostFuse.
  req.opts = *opts;
  // Evaluator settings given here replace the earlier run's (a larger
  // variant may want fewer trials or a longer --timeout).
  {
    Flags earlier;
    earlier.search = req.opts;
    take_given(app, "adapt", "Evaluation", flags, &earlier);
    req.opts = earlier.search;
  }
  req.opts.method = "adapt";
  req.opts.iterations = 1;
  req.opts.calls_per_iter = budget;
  req.opts.fuse = false;
  req.opts.postfuse = 0;
  req.opts.swap_tau.reset();
  req.opts.swap_with.clear();
  req.opts.reuse = std::move(*reuse);
  // The variant's kernels are checked at its shape variants as the earlier
  // run's were (--shapes, given, was taken above); a run recorded before
  // --shapes existed gets check.
  if (app.get_option("--shapes")->count() == 0 &&
      !(cfg->options.is_object() && cfg->options.value("eval", nlohmann::json::object()).contains("shapes")))
    req.opts.eval.shapes = "check";
  // The earlier run's LLM, endpoint and cheat judge, unless this command names them.
  if (req.env.llm.empty()) {
    req.env.llm = cfg->llm;
    if (req.env.base_url.empty()) req.env.base_url = cfg->base_url;
  }
  if (req.env.judge.empty()) req.env.judge = cfg->judge;
  req.problem_file = variant;
  req.out = out;
  if (std::string err = method::search_options_error(req.opts); !err.empty()) return say(err);
  req.mode = quiet ? report::StatusLine::Mode::kQuiet
                   : events_json ? report::StatusLine::Mode::kEventsJson : report::StatusLine::Mode::kAuto;
  return run::run_in_directory(std::move(req), method::env_setup());
}

static Register reg_adapt("adapt", "reuse a finished run's verified subkernels for a variant of its problem; evolve only "
                             "the new or failing subproblems",
                    &adapt_cmd);

}  // namespace
}  // namespace mk::cli
