// `mkevolve check`: the static (AST) cheat checks on candidate files. Needs
// neither a GPU nor torch: it runs the worker's static checker in plain Python.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/flags.h"
#include "cli/registry.h"
#include "eval/inputs.h"
#include "eval/pool.h"
#include "eval/sources.h"
#include "util/config.h"
#include "util/fs.h"

namespace mk::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

int check_cmd_main(int argc, char** argv) {
  CLI::App app{"Static checks of candidate kernels (no GPU, no torch): ModelNew must launch a Triton kernel; no "
               "torch compute on the data path, no side streams, patching, threads, processes or exec. Prints one "
               "line per violation: file:line: rule: message.",
               argv[0]};
  app.footer(help_footer({
                     "mkevolve check examples/kernels/03_linear_gelu__tiled.py",
                     "mkevolve check runs/model/solution --json"},
                    {
                     {0, "every file is clean"},
                     {1, "a file has violations"},
                     {2, "bad usage, or a file that cannot be read"},
                     {3, "no Python to run the checker"}}));
  std::vector<std::string> files;
  bool as_json = false;
  Flags flags;
  app.add_option("kernel", files, "candidate files (or solution package directories)")->required()->type_name("FILE");
  app.add_flag("--json", as_json, "one JSON object per file: {file, clean, violations}");
  add_flags(app, "check", flags);
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  auto config = discover_config("check", flags.env.config_path);
  if (!config) {
    std::fprintf(stderr, "mkevolve check: %s\n", config.error().c_str());
    return kExitUsage;
  }
  auto resolved = worker_python(flags.env.python, *config);
  if (!resolved) {
    std::fprintf(stderr, "mkevolve check: %s\n", resolved.error().c_str());
    return kExitUsage;
  }
  const std::string& py = *resolved;

  int worst = kExitOk;
  for (const auto& f : files) {
    auto path = eval::resolve_kernel_path(f);
    if (path) {
      if (auto text = read_file(*path); !text) path = Error{text.error()};
    }
    if (!path) {
      std::fprintf(stderr, "mkevolve check: %s\n", path.error().c_str());
      worst = kExitUsage;
      continue;
    }
    auto sc = eval::run_static_check(py, *path, flags.search.eval.allow_pytorch);
    if (!sc) {
      std::fprintf(stderr, "mkevolve check: %s: %s\n", path->c_str(), sc.error().c_str());
      return kExitEnvironment;
    }
    if (as_json) {
      json v = json::array();
      for (const auto& x : sc->violations)
        v.push_back({{"file", x.file}, {"line", x.line}, {"rule", x.rule}, {"message", x.message}});
      std::printf("%s\n", json{{"file", path->string()}, {"clean", sc->clean}, {"violations", v}}
                              .dump(-1, ' ', false, json::error_handler_t::replace)
                              .c_str());
    } else {
      for (const auto& x : sc->violations) std::printf("%s\n", x.to_line().c_str());
    }
    if (!sc->clean && worst == kExitOk) worst = kExitFailure;
  }
  return worst;
}

const Register reg_check("check", "static cheat checks of candidate kernels (no GPU or torch needed)", &check_cmd_main);

}  // namespace
}  // namespace mk::cli
