// `mkevolve eval`: verify, time and police candidate kernels against a problem
// through the worker pool. One row (or one JSON line) per --kernel.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/method_common.h"
#include "cli/registry.h"
#include "eval/cache.h"
#include "eval/gpus.h"
#include "eval/inputs.h"
#include "eval/pool.h"
#include "eval/sources.h"
#include "util/config.h"

namespace mk::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using eval::EvalResult;

json timing_or_null(const eval::Timing& t) { return t.valid ? json(t.median_ms) : json(nullptr); }

// The error only when the outputs were compared (the worker omits it or sends
// null / -1 otherwise).
json max_abs_err_json(const EvalResult& r) {
  if (!r.raw.is_object()) return nullptr;
  auto it = r.raw.find("max_abs_err");
  if (it == r.raw.end() || !it->is_number() || it->get<double>() < 0) return nullptr;
  return r.max_abs_err;
}

json result_json(const fs::path& problem, const fs::path& kernel, const EvalResult& r) {
  json j{{"kernel", kernel.string()},
         {"problem", problem.string()},
         {"status", eval::to_string(r.status)},
         {"kind", r.kind},
         {"reasons", r.reasons},
         {"message", r.feedback},
         {"runtime_ms", timing_or_null(r.runtime)},
         {"runtime_mean_ms", r.runtime.valid ? json(r.runtime.mean_ms) : json(nullptr)},
         {"baseline_ms", {{"eager", timing_or_null(r.eager)}, {"compile", timing_or_null(r.compiled)}}},
         {"speedup", {{"eager", r.speedup_eager}, {"compile", r.speedup_compile}}},
         {"max_abs_err", max_abs_err_json(r)},
         {"uses_pytorch", r.uses_pytorch},
         {"cached", r.cached},
         {"gpu", r.gpu}};
  if (r.raw.is_object()) {
    if (r.raw.contains("checks")) j["checks"] = r.raw["checks"];
    if (r.raw.contains("baseline_error")) j["baseline_error"] = r.raw["baseline_error"];
  }
  return j;
}

std::string ms(const eval::Timing& t) {
  if (!t.valid) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g ms", t.median_ms);
  return buf;
}

std::string times(double x) {
  if (x <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", x);
  return buf;
}

std::string err_text(const EvalResult& r) {
  if (max_abs_err_json(r).is_null()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", r.max_abs_err);
  return buf;
}

void print_table(const std::vector<fs::path>& kernels, const std::vector<EvalResult>& results, const json& hello,
                 const eval::EvalOptions& opts, const std::string& isolation) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"kernel", "status", "kind", "runtime", "eager", "compile", "vs eager", "vs compile", "max err"});
  for (size_t i = 0; i < kernels.size(); ++i) {
    const auto& r = results[i];
    std::string name = kernels[i].string() + (r.cached ? " (cached)" : "");
    rows.push_back({name, eval::to_string(r.status), r.kind.empty() ? "-" : r.kind, ms(r.runtime), ms(r.eager),
                    ms(r.compiled), times(r.speedup_eager), times(r.speedup_compile), err_text(r)});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      std::string cell = row[c];
      if (c + 1 < row.size()) cell.resize(width[c] + 2, ' ');
      line += cell;
    }
    std::printf("%s\n", line.c_str());
  }
  for (size_t i = 0; i < kernels.size(); ++i) {
    const auto& r = results[i];
    if (r.correct() && r.reasons.empty()) continue;
    std::printf("\n%s: %s%s\n", kernels[i].string().c_str(), eval::to_string(r.status),
                r.kind.empty() ? "" : (" (" + r.kind + ")").c_str());
    for (const auto& reason : r.reasons) std::printf("  - %s\n", reason.c_str());
    bool repeated = std::any_of(r.reasons.begin(), r.reasons.end(),
                                [&](const std::string& x) { return x.find(r.feedback) != std::string::npos; });
    if (!r.feedback.empty() && !repeated) {
      std::string fb = r.feedback;
      for (size_t p = fb.find('\n'); p != std::string::npos; p = fb.find('\n', p + 3)) fb.replace(p, 1, "\n    ");
      std::printf("    %s\n", fb.c_str());
    }
    if (r.raw.is_object() && r.raw.contains("baseline_error") && r.raw["baseline_error"].is_string())
      std::printf("  baselines: %s\n", r.raw["baseline_error"].get<std::string>().c_str());
  }
  if (hello.is_object()) {
    auto str = [&](const char* k) {
      return hello.contains(k) && hello[k].is_string() ? hello[k].get<std::string>() : std::string("?");
    };
    std::printf("\nworker: python %s, torch %s, triton %s%s; TF32 off for reference and candidate",
                str("python").c_str(), str("torch").c_str(), hello.contains("triton") && hello["triton"].is_string() ? str("triton").c_str() : "none",
                opts.test_cpu ? "; TEST MODE on CPU (not a GPU measurement)" : "");
    if (opts.measure_perf)
      std::printf("; times are medians of %d timed calls after %d warm-up calls", opts.perf_trials, opts.warmup);
    std::printf("; servers contained by %s\n", isolation.c_str());
  }
}

int run(int argc, char** argv) {
  CLI::App app{"Check candidate kernels against a KernelBench-format problem: correctness, cheating, timing and "
               "speedup over PyTorch eager and torch.compile.",
               argv[0]};
  std::string problem, python, config_path, cache_dir;
  std::vector<std::string> kernels;
  bool as_json = false, no_perf = false, no_cache = false, test_cpu = false, allow_pytorch = false;
  int gpu = -1, slots = 1;
  eval::EvalOptions opts;
  app.add_option("--problem", problem, "problem file (Model, get_inputs, get_init_inputs)")->required();
  app.add_option("--kernel", kernels,
                 "candidate file with ModelNew, or a solution package directory (decomposed_solution.py); repeat "
                 "to evaluate several concurrently")
      ->required();
  app.add_flag("--json", as_json, "one JSON object per kernel, one per line");
  app.add_option("--gpu", gpu, "use only this visible GPU (index)");
  method::add_eval_flags(app, opts);
  app.add_flag("--no-perf", no_perf, "correctness and cheat checks only, no timing");
  app.add_flag("--allow-pytorch", allow_pytorch, "Swap's policy: a PyTorch implementation may pass (it is marked)");
  app.add_option("--python", python, "the worker's Python (default: $MKEVOLVE_PYTHON, config 'python', python3)");
  app.add_option("--config", config_path, "configuration file (default: ./mkevolve.toml, ~/.config/mkevolve/config.toml)");
  app.add_option("--cache-dir", cache_dir, "verdict cache directory (default: ~/.cache/mkevolve/results)");
  app.add_flag("--no-cache", no_cache, "evaluate again even when a cached verdict exists (and store none)");
  app.add_option("--slots-per-gpu", slots, "candidates evaluated at once per GPU")->capture_default_str();
  // Test-only: torch-only candidates on the CPU through the worker's test mode.
  // Never a real measurement; hidden from --help on purpose.
  app.add_flag("--test-cpu-unsafe", test_cpu)->group("");
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  opts.measure_perf = !no_perf;
  opts.allow_pytorch = allow_pytorch;
  opts.test_cpu = test_cpu;
  if (opts.trials < 1 || opts.perf_trials < 1 || opts.warmup < 0 || opts.timeout_s <= 0 || opts.atol < 0 ||
      opts.rtol < 0 || slots < 1) {
    std::fprintf(stderr, "mkevolve eval: --trials, --perf-trials, --timeout and --slots-per-gpu must be positive; "
                         "--warmup, --atol and --rtol not negative\n");
    return kExitUsage;
  }

  auto config = Config::discover(config_path);
  if (!config) {
    std::fprintf(stderr, "mkevolve eval: %s\n", config.error().c_str());
    return kExitUsage;
  }
  auto resolved = worker_python(python, *config);
  if (!resolved) {
    std::fprintf(stderr, "mkevolve eval: %s\n", resolved.error().c_str());
    return kExitUsage;
  }
  const std::string& py = *resolved;

  // Bad input first, before any worker starts.
  if (std::error_code ec; !fs::is_regular_file(problem, ec)) {
    std::fprintf(stderr, "mkevolve eval: %s: %s\n", problem.c_str(),
                 fs::exists(problem, ec) ? "not a regular file" : "no such file");
    return kExitUsage;
  }
  std::vector<fs::path> kernel_paths;
  for (const auto& k : kernels) {
    auto r = eval::resolve_kernel_path(k);
    if (!r) {
      std::fprintf(stderr, "mkevolve eval: %s\n", r.error().c_str());
      return kExitUsage;
    }
    kernel_paths.push_back(*r);
  }
  std::vector<fs::path> peek_files{problem};
  peek_files.insert(peek_files.end(), kernel_paths.begin(), kernel_paths.end());
  auto defs = eval::peek_definitions(py, peek_files);
  if (!defs) {
    std::fprintf(stderr, "mkevolve eval: %s\n", defs.error().c_str());
    return kExitEnvironment;
  }
  int bad = 0;
  if (auto e = eval::problem_input_error((*defs)[0]); !e.empty()) {
    std::fprintf(stderr, "mkevolve eval: %s\n", e.c_str());
    ++bad;
  }
  for (size_t i = 1; i < defs->size(); ++i)
    if (auto e = eval::kernel_input_error((*defs)[i]); !e.empty()) {
      std::fprintf(stderr, "mkevolve eval: %s\n", e.c_str());
      ++bad;
    }
  if (bad) return kExitUsage;

  eval::PoolOptions po;
  po.python = py;
  po.test_mode = test_cpu;
  po.slots_per_gpu = slots;
  po.only_gpu = gpu;
  if (!no_cache) po.cache_dir = cache_dir.empty() ? eval::default_cache_root() / "results" : fs::path(cache_dir);
  if (!test_cpu) {
    auto gpus = eval::discover_gpus();
    if (gpus.empty()) {
      std::fprintf(stderr, "mkevolve eval: no CUDA GPU visible: eval needs a GPU (mkevolve check still works)\n");
      return kExitEnvironment;
    }
    po.gpus = gpus;
  } else {
    po.gpus = std::vector<eval::Gpu>{};  // test mode: the CPU slot, even on a GPU machine
    po.only_gpu = -1;
  }
  auto pool = eval::WorkerPool::create(po);
  if (!pool) {
    std::fprintf(stderr, "mkevolve eval: %s\n", pool.error().c_str());
    return pool.error().rfind("--gpu", 0) == 0 ? kExitUsage : kExitEnvironment;
  }
  if (auto st = (*pool)->probe(); !st) {
    std::fprintf(stderr, "mkevolve eval: %s\n", st.error().c_str());
    return kExitEnvironment;
  }

  std::vector<std::future<EvalResult>> futs;
  for (const auto& k : kernel_paths) {
    eval::EvalRequest req;
    req.problem = problem;
    req.kernel = k;
    req.options = opts;
    req.task = fs::path(problem).stem().string();
    futs.push_back((*pool)->submit(std::move(req)));
  }
  std::vector<EvalResult> results;
  for (auto& f : futs) {
    results.push_back(f.get());
    if (as_json) {
      std::printf("%s\n", result_json(problem, kernel_paths[results.size() - 1], results.back())
                              .dump(-1, ' ', false, json::error_handler_t::replace)
                              .c_str());
      std::fflush(stdout);
    }
  }
  if (!as_json) print_table(kernel_paths, results, (*pool)->hello(), opts, (*pool)->isolation());

  bool env_problem = false, all_correct = true;
  for (const auto& r : results) {
    env_problem |= r.kind == "environment";
    all_correct &= r.correct();
  }
  if (env_problem) {
    for (const auto& r : results)
      if (r.kind == "environment") {
        std::fprintf(stderr, "mkevolve eval: %s\n", r.feedback.c_str());
        break;
      }
    return kExitEnvironment;
  }
  return all_correct ? kExitOk : kExitFailure;
}

const Register reg("eval", "verify, time and police candidate kernels against a problem (GPU)", &run);

}  // namespace
}  // namespace mk::cli
