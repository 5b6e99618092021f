// The verifier (the paper's V) as seen by search and the CLI. The real
// implementation is the worker pool (pool.h); tests use fakes with the same
// interface.
#pragma once

#include <filesystem>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/verdict.h"
#include "util/result.h"

namespace mk::eval {

struct EvalOptions {
  int trials = 5;                 ///< correctness trials, each with fresh random inputs
  int warmup = 10;
  int perf_trials = 100;
  /// Tolerances; unset: by the output's dtype (fp32 1e-4, fp16/bf16 1e-2, fp8
  /// atol 0.1 rtol 0.2 with 85% of elements), or as the problem declares
  /// (MKEVOLVE_TOLERANCE). Set, they win over both.
  std::optional<double> atol;
  std::optional<double> rtol;
  /// The fraction of each output's elements that must be within tolerance.
  std::optional<double> pass_rate;
  /// Extra correctness trials at other input scales (KernelBench-Verified's):
  /// a comma list of x1 (the regular trials), x3, x0.01, neg; or "none".
  std::string trials_dist = "x1,x3,x0.01,neg";
  /// --tolerance as given: "default" (flags, the problem's MKEVOLVE_TOLERANCE,
  /// the dtype's), "calibrated" (the command's own calibration file) or a file.
  std::string tolerance = "default";
  /// --tolerance calibrated|FILE: the calibration file whose per-output
  /// tolerances judge each problem (eval/calibration.h); empty: none. A problem
  /// not in it is calibrated first (calibration_runs seeds) and added to it.
  std::filesystem::path calibration;
  int calibration_runs = 20;
  /// Set by the pool from `calibration`: this problem's calibrated tolerances
  /// as the worker takes them ({"outputs": {PATH: {KIND: atol}}, "source"}).
  nlohmann::json calibrated;
  double timeout_s = 300;         ///< hard deadline for the candidate process
  bool measure_perf = true;       ///< time candidate and baselines
  int seed = 42;
  /// Policy set by Swap only: a PyTorch subkernel may pass (it is then marked).
  bool allow_pytorch = false;
  /// --shapes (eval/shapes.h): benchmark, check or search. On a request, what
  /// the worker verifies; in a run's options, the run's mode, which the search
  /// turns into each request's (candidate_shapes, final_shapes).
  std::string shapes = "benchmark";
  /// Test-only: run on CPU with torch-only candidates (honoured only by a worker
  /// started in test mode).
  bool test_cpu = false;
  int gpu = -1;                   ///< -1: any free GPU
  /// "device": GPU time (the worker hides the host's launch latency behind a
  /// short device-side spin); "synced": each call launched onto an idle GPU,
  /// host latency included (KernelBench's way). Both are recorded.
  std::string timing = "device";
  /// The candidate's processes run without the harness's environment
  /// (TRITON_F32_DEFAULT=ieee), as in a user's own process: the final check
  /// of a package whose dots name their precision (Evaluator::pin_precision).
  bool plain_env = false;
  /// The torch.compile baseline's compile step; past it the baseline keeps its
  /// eager figure and has no torch.compile one. 0: the worker's default,
  /// 2 x max(timeout_s, 60).
  double compile_timeout_s = 0;
  /// Where the roofline's per-kernel figures come from: "cupti" (the runtime
  /// profile every evaluation takes) or "ncu" (also Nsight Compute's hardware
  /// counters for a correct candidate: measured DRAM bytes, throughput,
  /// achieved occupancy; checks.ncu). Advisory: never changes a verdict.
  std::string profile = "cupti";
  /// --baseline-tf32: also a torch.compile baseline with TF32 on, reported
  /// beside the TF32-off one (never replacing it; rewards stay TF32-off).
  bool baseline_tf32 = false;
  /// Set by the pool on the baseline request it sends for that second
  /// baseline: the worker times it with TF32 on.
  bool tf32 = false;
  /// The layouts the composition passes this subproblem's inputs in (the
  /// decomposition check's input_layouts_seen; null: fresh contiguous
  /// inputs). Trial k uses layout k mod N, so a kernel that assumes
  /// contiguous inputs fails locally, where the debug prompt names the
  /// layout, and not only once composed (docs/EVAL.md, Input layouts).
  nlohmann::json input_layouts;
};

struct EvalRequest {
  std::filesystem::path problem;  ///< KernelBench-format reference (Model, get_inputs, ...)
  std::filesystem::path kernel;   ///< candidate file with ModelNew, or decomposed_solution.py in a package
  EvalOptions options;
  std::string task;               ///< for logs and events: problem or subproblem id
  /// Queued evaluations start highest priority first, in submission order
  /// within one priority. The search gives a candidate the beam rounds its
  /// subproblem has left in the iteration (the end-to-end evaluation more than
  /// any), so the longest chain of rounds, the run's critical path, waits
  /// least for a slot.
  int priority = 0;
};

/// Decomposition check (LLMDecompose's verification; runs on CPU too).
struct DecompositionRequest {
  std::filesystem::path problem;          ///< original problem file
  std::filesystem::path decomposed;       ///< decomposed_problem.py (top level, ModelNew)
  std::filesystem::path subproblems_dir;  ///< subkernel_problems/
  bool test_cpu = false;
  double timeout_s = 300;
  /// The run's own tolerances (--atol/--rtol), when set: the problem's
  /// tolerance the bound is a fraction of; unset, each output dtype's.
  std::optional<double> atol, rtol;
  /// The decomposition must agree with the original within this fraction of
  /// the problem's tolerance, per output (0: exactly), so that it never eats
  /// the kernels' error budget while re-expressed ops (erf GELU, a written-out
  /// softmax, a matmul plus bias) still pass.
  double tol_fraction = 0.1;
};

struct DecompositionResult {
  bool ok = false;
  std::vector<std::string> failures;  ///< one line each, actionable
  std::string feedback;               ///< concise text for the LLM
  /// The largest difference from the original the check measured (unset:
  /// the outputs were never compared), and the bound per output
  /// ({"fraction", "outputs": [{output, dtype, atol, rtol, max_abs_err, ...}]}).
  std::optional<double> max_abs_err;
  nlohmann::json tolerance;
  /// Per subproblem name, the layouts the top level passed its inputs in
  /// (EvalOptions::input_layouts' form), only where some input was not
  /// contiguous.
  std::map<std::string, nlohmann::json> input_layouts;
  nlohmann::json raw;
};

/// Sources whose Triton dots name their precision, and the worker's account:
/// {"pinned": [{file, line, what}], "left": [{file, line, why}], "precision"}.
struct PinnedSources {
  std::map<std::string, std::string> files;
  nlohmann::json report;
};

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  /// Queues a candidate evaluation. Thread-safe.
  virtual std::future<Verdict> submit(EvalRequest req) = 0;
  virtual std::future<DecompositionResult> verify_decomposition(DecompositionRequest req) = 0;
  /// Facts about the GPU the prompts should state (name, SMs, memory, ...), queried.
  virtual nlohmann::json hardware_info() = 0;
  /// Pre-flight, before any LLM call: the problem loads and its reference runs.
  /// The default (evaluators without a worker) accepts every problem.
  virtual mk::Status check_problem(const std::filesystem::path& problem, bool test_cpu) {
    return check_problem(problem, test_cpu, "benchmark", nullptr);
  }
  /// The same, and with shapes other than "benchmark" also the shape
  /// variants the problem gets: {"benchmark", "variants", "skipped": [{shape,
  /// error}], "kept", "error"} into *shapes_out (null when not derived).
  virtual mk::Status check_problem(const std::filesystem::path& problem, bool test_cpu, const std::string& shapes,
                                   nlohmann::json* shapes_out) {
    (void)problem;
    (void)test_cpu;
    (void)shapes;
    (void)shapes_out;
    return {};
  }
  /// Starts measuring a problem's baselines (eager, torch.compile) ahead of
  /// its first evaluation, so that no candidate's evaluation waits for them
  /// (the search asks for each subproblem's as soon as it is known). Returns
  /// at once. The default (evaluators without baselines of their own) does nothing.
  virtual void prefetch_baselines(const std::filesystem::path& problem, const EvalOptions& options) {
    (void)problem;
    (void)options;
  }
  /// What was verified is what ships: the files (relative path -> source)
  /// with every Triton dot that names no precision pinned to the IEEE fp32
  /// that every candidate process computes it in (the worker's precision.py).
  /// The default (evaluators without a worker) returns them unchanged.
  virtual Result<PinnedSources> pin_precision(const std::map<std::string, std::string>& files) {
    return PinnedSources{files, nlohmann::json::object()};
  }
  Verdict evaluate(EvalRequest req) { return submit(std::move(req)).get(); }
};

}  // namespace mk::eval
