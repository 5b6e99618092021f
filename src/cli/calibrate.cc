// `mkevolve calibrate`: per-output tolerances measured from the reference
// itself (the paper's Appendix D): the reference in its own precision against
// a float64 run of it over N input seeds and every kind of trial input,
// max + 3 sigma with rtol 0. `--tolerance calibrated|FILE` on eval, run,
// evolve and bench then judges each (sub)problem at its own tolerances.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/flags.h"
#include "cli/registry.h"
#include "eval/cache.h"
#include "eval/calibration.h"
#include "eval/calibration_file.h"
#include "eval/gpus.h"
#include "eval/pool.h"
#include "eval/sources.h"
#include "util/config.h"

namespace mk::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The kinds of trial inputs, in the worker's order (calibration.KINDS).
const char* const kKinds[] = {"x1", "signed", "x3", "x0.01", "neg"};

// What to calibrate: a problem file, or a run directory's problem and every
// subproblem it has had (work/problem.py, work/subproblems/*.py).
Result<std::vector<fs::path>> targets(const fs::path& target, bool* is_run) {
  std::error_code ec;
  *is_run = false;
  if (fs::is_regular_file(target, ec)) return std::vector<fs::path>{target};
  if (!fs::is_directory(target, ec)) return Error{target.string() + ": no such file or directory"};
  if (!fs::is_regular_file(target / "config.json", ec))
    return Error{target.string() + ": not a run directory (no config.json); give a problem file or a run directory"};
  *is_run = true;
  std::vector<fs::path> out;
  if (fs::is_regular_file(target / "work" / "problem.py", ec)) out.push_back(target / "work" / "problem.py");
  std::vector<fs::path> subs;
  if (fs::is_directory(target / "work" / "subproblems", ec))
    for (const auto& e : fs::directory_iterator(target / "work" / "subproblems", ec))
      if (e.is_regular_file() && e.path().extension() == ".py") subs.push_back(e.path());
  std::sort(subs.begin(), subs.end());
  out.insert(out.end(), subs.begin(), subs.end());
  if (out.empty())
    return Error{target.string() + ": the run has no problem or subproblem files yet (work/problem.py, "
                                   "work/subproblems/*.py)"};
  return out;
}

std::string number(const json& v) { return v.is_number() ? fmt::format("{:.3g}", v.get<double>()) : "-"; }

void print_entry(const fs::path& problem, const json& a) {
  std::printf("%s: %d runs on %s, against %s\n", problem.string().c_str(), a.value("runs", 0),
              a.value("device", std::string("?")).c_str(),
              a.contains("high_precision") ? a["high_precision"].dump().c_str() : "?");
  std::printf("  %-12s %-10s", "output", "dtype");
  for (const char* k : kKinds) std::printf(" %-22s", (std::string(k) + " atol (max, sd)").c_str());
  std::printf("\n");
  for (const auto& [path, o] : a["outputs"].items()) {
    std::printf("  %-12s %-10s", path.empty() ? "output" : path.c_str(), o.value("dtype", std::string("?")).c_str());
    for (const char* k : kKinds) {
      std::string cell = "-";
      if (o["by_kind"].contains(k)) {
        const json& v = o["by_kind"][k];
        cell = number(v["atol"]) + " (" + number(v.value("max", json())) + ", " + number(v.value("std", json())) + ")";
      }
      std::printf(" %-22s", cell.c_str());
    }
    std::printf("\n");
  }
  if (a.contains("skipped") && a["skipped"].is_object())
    for (const auto& [k, why] : a["skipped"].items())
      std::printf("  %s inputs: not calibrated: %s\n", k.c_str(), why.is_string() ? why.get<std::string>().c_str() : "");
}

int calibrate_cmd_main(int argc, char** argv) {
  CLI::App app{"Calibrate per-output tolerances (the paper's Appendix D): the reference in its own precision "
               "against a float64 run of it, over --runs input seeds and every kind of trial input (x1, signed, "
               "x3, x0.01, neg); each output's tolerance is max + 3 sigma of its error, at least one ulp of its "
               "dtype, with rtol 0. Then --tolerance calibrated (or FILE) on eval, run, evolve and bench judges "
               "each (sub)problem at its own tolerances.",
               argv[0]};
  app.footer(help_footer({
                     "mkevolve calibrate examples/precision/attention_bf16.py --runs 20",
                     "mkevolve calibrate runs/bf16   (the run's problem and every subproblem)",
                     "mkevolve eval P.py K.py --tolerance calibrated"},
                    {
                     {0, "every problem was calibrated"},
                     {2, "bad usage, or a problem that could not be calibrated (named)"},
                     {3, "something missing on this machine: no GPU, torch or worker"}}));
  std::string target, out;
  int runs = 20, seed = 42;
  bool as_json = false;
  Flags flags;
  const EnvFlags& env = flags.env;
  app.add_option("target", target,
                 "a problem file, or a run directory (its problem and every subproblem it has had)")
      ->required()
      ->type_name("PATH");
  app.add_option("--runs", runs, "input seeds per problem")->check(CLI::Range(2, 1000))->capture_default_str();
  app.add_option("--out", out,
                 "the calibration file to add to (default: a run directory's calibration.json; for a problem file, "
                 "the cache's calibration.json, which eval --tolerance calibrated reads)");
  app.add_option("--seed", seed, "seed for the weights (as eval's --seed)")->capture_default_str();
  app.add_flag("--json", as_json, "print each problem's calibration as one JSON line");
  add_flags(app, "calibrate", flags);
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  auto say = [](const std::string& m) { std::fprintf(stderr, "mkevolve calibrate: %s\n", m.c_str()); };

  bool is_run = false;
  auto problems = targets(target, &is_run);
  if (!problems) {
    say(problems.error());
    return kExitUsage;
  }
  fs::path file = !out.empty() ? fs::path(out) : eval::calibration_file(is_run ? fs::path(target) : fs::path());
  auto cf = eval::CalibrationFile::load(file);
  if (!cf) {
    say(cf.error());
    return kExitUsage;
  }
  auto config = discover_config("calibrate", env.config_path);
  if (!config) {
    say(config.error());
    return kExitUsage;
  }
  auto py = worker_python(env.python, *config);
  if (!py) {
    say(py.error());
    return kExitUsage;
  }
  eval::PoolOptions po = pool_options(env, *py);
  po.slots_per_gpu = 1;  // one problem at a time, each with the whole GPU
  po.prestart = false;
  if (!env.test_cpu) {
    auto gpus = eval::discover_gpus();
    if (gpus.empty()) {
      say("no CUDA GPU visible: calibration runs the reference where it is evaluated, on a GPU");
      return kExitEnvironment;
    }
    po.gpus = gpus;
  }
  auto pool = eval::WorkerPool::create(po);
  if (!pool) {
    say(pool.error());
    return pool.error().rfind("--gpu", 0) == 0 ? kExitUsage : kExitEnvironment;
  }
  if (auto st = (*pool)->probe(); !st) {
    say(st.error());
    return kExitEnvironment;
  }
  int failed = 0;
  for (const auto& p : *problems) {
    auto hash = eval::hash_sources(p);
    if (!hash) {
      say(hash.error());
      ++failed;
      continue;
    }
    auto a = (*pool)->calibrate(p, runs, env.test_cpu, seed);
    if (!a) {
      say(a.error());
      ++failed;
      continue;
    }
    if (auto st = cf->put(*hash, fs::absolute(p), *a); !st) {
      say(st.error());
      return kExitEnvironment;
    }
    if (as_json) {
      json j = *a;
      j["problem"] = p.string();
      j["problem_hash"] = *hash;
      std::printf("%s\n", j.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
    } else {
      print_entry(p, *a);
    }
    std::fflush(stdout);
  }
  if (!as_json)
    std::printf("%zu of %zu problem(s) calibrated; %s holds %zu; rule: %s\n", problems->size() - failed,
                problems->size(), file.string().c_str(), cf->size(),
                "max + 3 sigma of max|reference - float64 reference| over the runs, at least one ulp, rtol 0");
  return failed ? kExitUsage : kExitOk;
}

const Register reg_calibrate("calibrate",
                   "per-output tolerances from the reference against float64 (Appendix D), for --tolerance calibrated",
                   &calibrate_cmd_main);

}  // namespace
}  // namespace mk::cli
