// `mkevolve swap DIR --subkernel NAME --with FILE|pytorch`: its command line.
// What it does (verify the replacement, then install it) is run/swap.h's.
#include <CLI/CLI.hpp>

#include "cli/args.h"
#include "cli/flags.h"
#include "cli/method_common.h"
#include "cli/registry.h"
#include "run/swap.h"

namespace mk::cli {
namespace {

int swap_cmd(int argc, char** argv) {
  CLI::App app{"Replaces one subkernel of a run's solution package (DIR/solution) with a kernel file or with the "
               "subproblem's PyTorch reference (`pytorch`, evaluated under the allow-PyTorch policy; the solution "
               "is then marked as containing PyTorch subkernels). The replacement is verified against its "
               "subproblem on every input configuration, then the composed module against the original problem; "
               "only if both pass is it installed, with the new speedups in solution/manifest.json and a `swap` "
               "event in DIR/events.jsonl.",
               argv[0]};
  app.footer(help_footer({
                     "mkevolve swap runs/model --subkernel matmul_0 --with my_matmul.py",
                     "mkevolve swap runs/model --subkernel gelu_1 --with pytorch"},
                    {
                     {0, "swapped"},
                     {1, "the replacement failed its checks (nothing changed)"},
                     {2, "bad usage or input"},
                     {3, "something missing on this machine: no GPU, torch or worker"}}));
  std::string dir_s, name, with;
  Flags flags;
  app.add_option("dir", dir_s, "the run directory")->required()->type_name("DIR");
  app.add_option("--subkernel", name, "the subkernel (subproblem) to replace")->required();
  app.add_option("--with", with, "a file with a ModelNew for that subproblem, or `pytorch`")->required();
  add_flags(app, "swap", flags);
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  run::SwapRequest req;
  req.dir = dir_s;
  req.subkernel = name;
  req.with = with;
  req.env = flags.env;
  req.options = flags.search.eval;
  return run::swap_in_directory(std::move(req), method::env_setup());
}

static Register reg_swap("swap", "replace one subkernel of a run's solution and re-verify it", &swap_cmd);

}  // namespace
}  // namespace mk::cli
