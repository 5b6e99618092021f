// `mkevolve eval`: verify, time and police candidate kernels against problems
// through one worker pool. One row (or one JSON line) per (problem, kernel)
// pair: --problem P with each --kernel, then each line of --batch FILE.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli/args.h"
#include "cli/flags.h"
#include "cli/method_common.h"
#include "cli/registry.h"
#include "eval/batch_file.h"
#include "eval/shapes.h"
#include "eval/cache.h"
#include "eval/calibration.h"
#include "eval/calibration_file.h"
#include "eval/gpus.h"
#include "eval/inputs.h"
#include "eval/pool.h"
#include "eval/roofline.h"
#include "eval/sources.h"
#include "util/config.h"

namespace mk::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using eval::BatchPair;
using eval::Verdict;

// One spelling per file, so "p.py" and "./p.py" count as one problem.
std::string file_key(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal().string() : c.string();
}

// The table's name for each problem: its file stem, or its path where two
// different problems share a stem. Empty when there is only one problem (no
// problem column then).
std::map<std::string, std::string> problem_labels(const std::vector<BatchPair>& pairs) {
  std::map<std::string, fs::path> distinct;
  for (const auto& p : pairs) distinct.emplace(file_key(p.problem), p.problem);
  std::map<std::string, std::string> labels;
  if (distinct.size() < 2) return labels;
  std::map<std::string, int> stems;
  for (const auto& [key, path] : distinct) ++stems[path.stem().string()];
  for (const auto& [key, path] : distinct)
    labels[key] = stems[path.stem().string()] > 1 ? path.string() : path.stem().string();
  return labels;
}

// The model name of the visible GPU a verdict ran on ("" for the CPU slot).
std::string gpu_name_of(const std::vector<eval::Gpu>& gpus, int index) {
  for (const auto& g : gpus)
    if (g.index == index) return g.name;
  return {};
}

// The Verdict's one JSON form (eval/verdict.h, docs/EVAL.md) with the pair's
// kernel and problem and the roofline.
json result_json(const fs::path& problem, const fs::path& kernel, const Verdict& r, const std::string& gpu_name,
                 bool tf32) {
  json j = r.to_json();
  // --baseline-tf32 asked for the TF32-on baseline: unknown is null, never left out.
  if (tf32 && !j["baseline_ms"].contains("compile_tf32")) {
    j["baseline_ms"]["compile_tf32"] = nullptr;
    j["speedup"]["compile_tf32"] = nullptr;
  }
  j["kernel"] = kernel.string();
  j["problem"] = problem.string();
  // Where the time goes against the GPU's peaks (eval/roofline.h); null
  // unless correct and timed on a GPU of the peaks table.
  j["roofline"] = eval::roofline::analysis_json(r, gpu_name);
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

std::string err_text(const Verdict& r) {
  if (!r.max_abs_err) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", *r.max_abs_err);
  return buf;
}

void print_table(const std::vector<BatchPair>& pairs, const std::vector<Verdict>& results, const json& hello,
                 const eval::EvalOptions& opts, const std::string& isolation, const std::vector<eval::Gpu>& gpus,
                 bool roofline_blocks) {
  const auto labels = problem_labels(pairs);
  const bool problem_column = !labels.empty();
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"kernel", "status", "kind", "runtime", "eager", "compile", "vs eager", "vs compile", "max err"});
  // --baseline-tf32: torch.compile with TF32 on, beside the TF32-off columns.
  if (opts.baseline_tf32) {
    rows[0].insert(rows[0].begin() + 8, "vs compile tf32");
    rows[0].insert(rows[0].begin() + 6, "compile tf32");
  }
  if (problem_column) rows[0].insert(rows[0].begin(), "problem");
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& r = results[i];
    std::string name = pairs[i].kernel.string() + (r.cached ? " (cached)" : "");
    rows.push_back({name, eval::to_string(r.status), r.kind.empty() ? "-" : r.kind, ms(r.runtime), ms(r.eager),
                    ms(r.compiled), times(r.speedup_eager), times(r.speedup_compile), err_text(r)});
    if (opts.baseline_tf32) {
      rows.back().insert(rows.back().begin() + 8, times(r.speedup_compile_tf32));
      rows.back().insert(rows.back().begin() + 6, ms(r.compiled_tf32));
    }
    if (problem_column) rows.back().insert(rows.back().begin(), labels.at(file_key(pairs[i].problem)));
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
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& r = results[i];
    if (r.correct() && r.reasons.empty()) continue;
    std::string name = pairs[i].kernel.string();
    if (problem_column) name += " on " + labels.at(file_key(pairs[i].problem));
    std::printf("\n%s: %s%s\n", name.c_str(), eval::to_string(r.status),
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
  // --shapes check|search: the shapes each kernel holds at besides the benchmark's.
  bool shapes_header = false;
  for (size_t i = 0; i < pairs.size(); ++i) {
    auto sh = eval::ShapesRecord::from_checks(results[i].raw);
    if (!sh) continue;
    if (!shapes_header)
      std::printf("\nholds at (--shapes %s: shape variants from the problem's size constants; timed at the "
                  "benchmark's shape):\n",
                  opts.shapes.c_str());
    shapes_header = true;
    std::string name = pairs[i].kernel.string();
    if (problem_column) name += " on " + labels.at(file_key(pairs[i].problem));
    std::printf("  %s: %s\n", name.c_str(), sh->holds_at_text().c_str());
  }
  // The roofline of each correct, timed kernel: one line, or with --roofline
  // the block an optimize prompt would carry for it.
  bool roof_header = false;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& r = results[i];
    const std::string gpu = gpu_name_of(gpus, r.gpu);
    auto a = eval::roofline::analyze(r, gpu);
    std::string block = roofline_blocks ? eval::roofline::prompt_block(r, gpu) : std::string();
    if (!a && block.empty()) continue;
    if (!roof_header) std::printf("\nroofline (bytes and FLOPs one call must do, against the GPU's peaks):\n");
    roof_header = true;
    std::string name = pairs[i].kernel.filename().string();
    if (problem_column) name += " on " + labels.at(file_key(pairs[i].problem));
    if (roofline_blocks) {
      for (size_t p = block.find('\n'); p != std::string::npos && p + 1 < block.size(); p = block.find('\n', p + 3))
        block.replace(p, 1, "\n    ");
      std::printf("  %s:\n    %s", name.c_str(), block.c_str());
      continue;
    }
    const auto& v = a->fit;
    if (v.model_does_not_fit)
      std::printf("  %s: %s-bound; measured below its roofline time (%.4g ms): the byte/FLOP model does not fit it\n",
                  name.c_str(), v.bound.c_str(), v.t_roof_ms);
    else
      std::printf("%s", fmt::format("  {}: {}-bound, {:.0f}% of the roofline (headroom {:.2f}x); {:.0f} GB/s{}\n", name,
                                    v.bound, 100 * v.fraction, v.headroom, v.achieved_gb_s,
                                    v.achieved_tflops > 0 ? fmt::format(", {:.3g} TFLOP/s", v.achieved_tflops) : "")
                            .c_str());
  }
  if (hello.is_object()) {
    auto str = [&](const char* k) {
      return hello.contains(k) && hello[k].is_string() ? hello[k].get<std::string>() : std::string("?");
    };
    // What the candidates' fp32 tl.dot does when it names no input_precision (serve.py's hello).
    const bool has_triton = hello.contains("triton") && hello["triton"].is_string();
    const std::string f32 = hello.contains("triton_f32_default") && hello["triton_f32_default"].is_string()
                                ? " (Triton's fp32 tl.dot default: IEEE)"
                            : has_triton ? " (this Triton ignores TRITON_F32_DEFAULT: an fp32 tl.dot naming no "
                                           "input_precision may use TF32)"
                                         : "";
    std::printf("\nworker: python %s, torch %s, triton %s%s; TF32 off for reference and candidate%s%s",
                str("python").c_str(), str("torch").c_str(), has_triton ? str("triton").c_str() : "none",
                opts.test_cpu ? "; TEST MODE on CPU (not a GPU measurement)" : "", f32.c_str(),
                opts.baseline_tf32 && opts.measure_perf
                    ? " and for the eager and compile baselines; \"compile tf32\" is torch.compile with TF32 on"
                    : "");
    if (opts.measure_perf)
      std::printf("; times are medians of %d timed calls after %d warm-up calls", opts.perf_trials, opts.warmup);
    std::printf("; servers contained by %s\n", isolation.c_str());
  }
}

// Everything wrong with the input, found before any worker starts; an empty
// list means the pairs are ready. Each entry is one line for stderr.
struct Checked {
  std::vector<BatchPair> pairs;
  std::vector<std::string> errors;
  bool environment = false;  ///< the definitions peek could not run Python
};

Checked check_inputs(const std::string& py, const std::string& problem, const std::vector<std::string>& kernels,
                     const std::string& batch) {
  Checked c;
  if (!problem.empty()) {
    bool problem_ok = true;
    if (std::error_code ec; !fs::is_regular_file(problem, ec)) {
      c.errors.push_back(problem + ": " + (fs::exists(problem, ec) ? "not a regular file" : "no such file"));
      problem_ok = false;
    }
    for (const auto& k : kernels) {
      auto r = eval::resolve_kernel_path(k);
      if (!r)
        c.errors.push_back(r.error());
      else if (problem_ok)
        c.pairs.push_back({problem, *r, 0});
    }
  }
  if (!batch.empty()) {
    // Its good lines go on to the definitions check even when others are bad.
    auto contents = eval::read_batch_file(batch);
    if (contents) {
      c.pairs.insert(c.pairs.end(), contents->pairs.begin(), contents->pairs.end());
      c.errors.insert(c.errors.end(), contents->errors.begin(), contents->errors.end());
    } else {
      c.errors.push_back(contents.error());
    }
  }

  // What each distinct file defines, over the pairs that survived the checks
  // above. A file from the batch file is named with the lines that use it.
  std::vector<fs::path> problems, kernel_files;
  std::map<std::string, std::vector<int>> problem_lines, kernel_lines;
  for (const auto& p : c.pairs) {
    auto& pl = problem_lines[file_key(p.problem)];
    if (pl.empty()) problems.push_back(p.problem);
    pl.push_back(p.line);
    auto& kl = kernel_lines[file_key(p.kernel)];
    if (kl.empty()) kernel_files.push_back(p.kernel);
    kl.push_back(p.line);
  }
  auto located = [&](const std::vector<int>& lines, const std::string& msg) {
    std::vector<int> batch_lines;
    for (int l : lines)
      if (l > 0) batch_lines.push_back(l);  // 0: from --problem/--kernel
    if (batch_lines.empty()) return msg;
    std::string out = batch + ":" + std::to_string(batch_lines[0]) + ": " + msg;
    if (batch_lines.size() > 1) {
      out += batch_lines.size() == 2 ? " (also line " : " (also lines ";
      for (size_t i = 1; i < batch_lines.size(); ++i) out += (i > 1 ? ", " : "") + std::to_string(batch_lines[i]);
      out += ")";
    }
    return out;
  };
  std::vector<fs::path> peek_files = problems;
  peek_files.insert(peek_files.end(), kernel_files.begin(), kernel_files.end());
  if (peek_files.empty()) return c;
  auto defs = eval::peek_definitions(py, peek_files);
  if (!defs) {
    // Bad input outranks a missing Python: the usage errors are what to fix first.
    if (c.errors.empty()) c.environment = true;
    c.errors.push_back(defs.error());
    return c;
  }
  for (size_t i = 0; i < defs->size(); ++i) {
    const bool is_problem = i < problems.size();
    auto e = is_problem ? eval::problem_input_error((*defs)[i]) : eval::kernel_input_error((*defs)[i]);
    if (e.empty()) continue;
    const fs::path& f = is_problem ? problems[i] : kernel_files[i - problems.size()];
    c.errors.push_back(located((is_problem ? problem_lines : kernel_lines)[file_key(f)], e));
  }
  return c;
}

int eval_cmd_main(int argc, char** argv) {
  CLI::App app{"Check candidate kernels against KernelBench-format problems: correctness, cheating, timing and "
               "speedup over PyTorch eager and torch.compile.",
               argv[0]};
  app.footer(help_footer({
                     "mkevolve eval examples/problems/03_linear_gelu.py examples/kernels/03_linear_gelu__tiled.py",
                     "mkevolve eval --batch pairs.txt --json --slots-per-gpu 4",
                     "mkevolve eval P.py K.py --roofline --profile ncu"},
                    {
                     {0, "every kernel is correct"},
                     {1, "a kernel is incorrect, cheats or fails"},
                     {2, "bad usage or input: a missing file, a broken problem file, a bad batch line"},
                     {3, "something missing on this machine: no GPU, torch or worker, or a problem too large for it"}}));
  std::string problem, batch, cache_dir;
  std::vector<std::string> kernels;
  bool as_json = false, no_perf = false, no_cache = false, stream = false, roofline_blocks = false;
  Flags flags;
  eval::EvalOptions& opts = flags.search.eval;
  const EnvFlags& env = flags.env;
  std::vector<std::string> files;
  app.add_option("files", files,
                 "PROBLEM [KERNEL...]: the problem file, then its candidates (the same as --problem PROBLEM "
                 "--kernel KERNEL ...)")
      ->type_name("FILE");
  auto* problem_opt = app.add_option("--problem", problem, "problem file (Model, get_inputs, get_init_inputs)");
  auto* kernel_opt = app.add_option(
      "--kernel", kernels,
      "candidate file with ModelNew, or a solution package directory (decomposed_solution.py); repeat "
      "to evaluate several concurrently");
  auto* batch_opt = app.add_option("--batch", batch,
                                   "file of 'PROBLEM KERNEL' lines (paths relative to the file; '#' comments): all "
                                   "pairs go through one worker pool, after the --problem/--kernel pairs");
  app.add_flag("--json", as_json, "one JSON object per kernel, one per line");
  app.add_flag("--stream", stream,
               "with --json: print each verdict as soon as it is in, in any order, with its 0-based "
               "\"index\" in the input (default: in input order)");
  app.add_flag("--no-perf", no_perf, "correctness and cheat checks only, no timing");
  app.add_flag("--roofline", roofline_blocks,
               "print each correct kernel's roofline as an optimize prompt would show it (bytes, FLOPs, bound, "
               "headroom, kernels by time, registers, spills, occupancy)");
  app.add_option("--cache-dir", cache_dir, "verdict cache directory (default: ~/.cache/mkevolve/results)");
  app.add_flag("--no-cache", no_cache, "evaluate again even when a cached verdict exists (and store none)");
  opts.shapes = "check";  // a correct kernel is also run at shape variants, and told where it holds
  add_flags(app, "eval", flags);
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  bool have_problem = problem_opt->count() > 0, have_kernel = kernel_opt->count() > 0;
  const bool have_batch = batch_opt->count() > 0;
  const char* usage = nullptr;
  if (!files.empty()) {
    // `eval P.py K.py`, as the other commands take their files.
    if (have_problem) {
      usage = "give the problem either as the first file or with --problem, not both";
    } else {
      problem = files.front();
      kernels.insert(kernels.begin(), files.begin() + 1, files.end());
      have_problem = true;
      have_kernel = !kernels.empty();
    }
  }
  if (usage) {
  } else if (have_kernel && !have_problem)
    usage = "--kernel needs --problem (or list 'PROBLEM KERNEL' pairs in a --batch file)";
  else if (have_problem && !have_kernel)
    usage = "the problem needs at least one kernel (eval P.py K.py, or --problem P.py --kernel K.py)";
  else if (!have_problem && !have_batch)
    usage = "nothing to evaluate: give P.py K.py (or --problem P.py --kernel K.py), or --batch FILE";
  else if ((have_problem && problem.empty()) || (have_batch && batch.empty()))
    usage = "--problem and --batch need a non-empty path";
  if (usage) {
    std::fprintf(stderr, "mkevolve eval: %s\n", usage);
    return kExitUsage;
  }
  if (std::string e = eval::tolerance_error(opts); !e.empty()) {
    std::fprintf(stderr, "mkevolve eval: %s\n", e.c_str());
    return kExitUsage;
  }
  // --tolerance calibrated: the cache's calibration file (mkevolve calibrate PROBLEM writes it).
  opts.calibration = eval::calibration_path(opts.tolerance, eval::calibration_file({}));
  opts.measure_perf = !no_perf;
  opts.test_cpu = env.test_cpu;
  if (opts.trials < 1 || opts.perf_trials < 1 || opts.warmup < 0 || opts.timeout_s <= 0 || opts.atol.value_or(0) < 0 ||
      opts.rtol.value_or(0) < 0 || env.slots_per_gpu < 0) {
    std::fprintf(stderr, "mkevolve eval: --trials, --perf-trials, --timeout and --slots-per-gpu must be positive; "
                         "--warmup, --atol and --rtol not negative\n");
    return kExitUsage;
  }

  auto config = discover_config("eval", env.config_path);
  if (!config) {
    std::fprintf(stderr, "mkevolve eval: %s\n", config.error().c_str());
    return kExitUsage;
  }
  auto resolved = worker_python(env.python, *config);
  if (!resolved) {
    std::fprintf(stderr, "mkevolve eval: %s\n", resolved.error().c_str());
    return kExitUsage;
  }
  const std::string& py = *resolved;

  // Bad input first, all of it, before any worker starts.
  Checked checked = check_inputs(py, problem, kernels, batch);
  for (const auto& e : checked.errors) std::fprintf(stderr, "mkevolve eval: %s\n", e.c_str());
  if (checked.environment) return kExitEnvironment;
  if (!checked.errors.empty()) return kExitUsage;
  const std::vector<BatchPair>& pairs = checked.pairs;

  eval::PoolOptions po = pool_options(env, py);
  // Every server the batch needs starts now, beside the probe's.
  po.start_servers = true;
  po.expected_jobs = pairs.size();
  if (!no_cache) po.cache_dir = cache_dir.empty() ? eval::default_cache_root() / "results" : fs::path(cache_dir);
  if (!env.test_cpu) {
    auto gpus = eval::discover_gpus();
    if (gpus.empty()) {
      std::fprintf(stderr, "mkevolve eval: no CUDA GPU visible: eval needs a GPU (mkevolve check still works)\n");
      return kExitEnvironment;
    }
    po.gpus = gpus;
  }
  auto pool = eval::WorkerPool::create(po);
  if (!pool) {
    std::fprintf(stderr, "mkevolve eval: %s\n", pool.error().c_str());
    return exit_code(pool.error_kind());  // --gpu past the visible GPUs: bad input; no worker: missing
  }
  if (auto st = (*pool)->probe(); !st) {
    std::fprintf(stderr, "mkevolve eval: %s\n", st.error().c_str());
    return kExitEnvironment;
  }

  // Every pair at once: the pool queues them over its slots. Verdicts print in
  // input order, each as soon as it and all before it are in.
  std::vector<std::future<Verdict>> futs;
  for (const auto& p : pairs) {
    eval::EvalRequest req;
    req.problem = p.problem;
    req.kernel = p.kernel;
    req.options = opts;
    req.task = p.problem.stem().string();
    futs.push_back((*pool)->submit(std::move(req)));
  }
  auto print_json = [&](size_t i, const Verdict& r, bool with_index) {
    json j = result_json(pairs[i].problem, pairs[i].kernel, r, gpu_name_of((*pool)->gpus(), r.gpu), opts.baseline_tf32);
    if (with_index) j["index"] = i;
    std::printf("%s\n", j.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
    std::fflush(stdout);
  };
  std::vector<Verdict> results(futs.size());
  if (as_json && stream) {
    // As they come: a long problem does not hold back the verdicts after it.
    std::vector<bool> done(futs.size(), false);
    for (size_t left = futs.size(); left > 0;) {
      bool any = false;
      for (size_t i = 0; i < futs.size(); ++i) {
        if (done[i] || futs[i].wait_for(std::chrono::seconds(0)) != std::future_status::ready) continue;
        results[i] = futs[i].get();
        done[i] = true;
        --left;
        any = true;
        print_json(i, results[i], true);
      }
      if (!any && left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } else {
    for (size_t i = 0; i < futs.size(); ++i) {
      results[i] = futs[i].get();
      if (as_json) print_json(i, results[i], false);
    }
  }
  if (!as_json)
    print_table(pairs, results, (*pool)->hello(), opts, (*pool)->isolation(), (*pool)->gpus(), roofline_blocks);

  bool env_problem = false, all_correct = true;
  const Verdict* bad_problem = nullptr;
  for (const auto& r : results) {
    // A problem too large for this machine is the machine's limit (exit 3), not a verdict.
    env_problem |= r.kind == "environment" || r.kind == "too_large";
    all_correct &= r.correct();
    if (r.kind == "problem_error" && !bad_problem) bad_problem = &r;
  }
  if (bad_problem && !env_problem) {
    // The problem file is at fault, not a kernel: the user's input (exit 2).
    std::fprintf(stderr, "mkevolve eval: %s\n", bad_problem->feedback.c_str());
    return kExitUsage;
  }
  if (env_problem) {
    for (const auto& r : results)
      if (r.kind == "environment" || r.kind == "too_large") {
        std::fprintf(stderr, "mkevolve eval: %s\n", r.feedback.c_str());
        break;
      }
    return kExitEnvironment;
  }
  return all_correct ? kExitOk : kExitFailure;
}

const Register reg_eval("eval", "verify, time and police candidate kernels against problems (GPU)", &eval_cmd_main);

}  // namespace
}  // namespace mk::cli
