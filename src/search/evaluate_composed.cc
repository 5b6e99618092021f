// Evaluate: a solution's subkernels composed into a package and evaluated
// end to end (each iteration, Swap and the final check go through it).
#include <cstdlib>

#include "eval/shapes.h"
#include "problem/compose.h"
#include "search/internal.h"
#include "search/search.h"

namespace mk::search {

using problem::Topology;

using detail::compose_and_evaluate;
using detail::emit;

eval::Verdict evaluate_composed(SearchContext& ctx, const problem::Problem& problem, const Topology& topo,
                                   const std::map<std::string, std::string>& kernels, const fs::path& dir,
                                   bool allow_pytorch, const std::string& label) {
  eval::EvalOptions o = ctx.opts.eval;
  o.shapes = eval::candidate_shapes(o.shapes);
  Composed c = compose_and_evaluate(ctx, problem, topo, kernels, dir, allow_pytorch, label, o);
  if (c.event) emit(ctx, *c.event);
  return c.r;
}

namespace detail {

Composed compose_and_evaluate(SearchContext& ctx, const problem::Problem& problem, const Topology& topo,
                              const std::map<std::string, std::string>& kernels, const fs::path& dir,
                              bool allow_pytorch, const std::string& label, const eval::EvalOptions& options) {
  problem::PackageContents man;
  man.record.problem = problem.name;
  man.record.problem_hash = problem.hash;
  eval::Verdict r;
  Composed out;
  out.kernels = kernels;
  int iteration = 0;
  if (label.size() > 1 && label[0] == 't') iteration = std::atoi(label.c_str() + 1);
  if (options.plain_env && ctx.evaluator) {
    // Evaluated as it will run in a user's process: its dots name the
    // precision every search-time process computed them in.
    std::map<std::string, std::string> files;
    for (const auto& [name, src] : kernels) files["subkernel_implementations/" + name + ".py"] = src;
    auto pinned = ctx.evaluator->pin_precision(files);
    if (!pinned) {
      // The harness's failure, never the solution's: no verdict.
      out.r.status = eval::VerdictStatus::kNoVerdict;
      out.r.kind = "pin_failed";
      out.r.feedback = pinned.error();
      out.event = detail::eval_event(problem.name, label, iteration, out.r, 0, "e2e");
      return out;
    }
    for (auto& [name, src] : out.kernels) src = pinned->files.at("subkernel_implementations/" + name + ".py");
    out.precision = pinned->report;
  }
  Status st = problem::check_composable(topo, out.kernels);
  if (!st) {
    r.status = eval::VerdictStatus::kCrashed;
    r.kind = "compose_error";
    r.feedback = "cannot compose " + (dir / "solution").string() + ": " + st.error();
  } else if (st = problem::write_solution_package(dir / "solution", topo, out.kernels, man, /*durable=*/false); !st) {
    // This machine's failure (a full disk, say), never the solution's: no
    // verdict, nothing logged as evaluated, and the run stops so that it can
    // be resumed once there is room (its LLM replies are cached).
    ctx.set_fatal(st.error() + "; free space (or fix the directory), then resume");
    out.r.status = eval::VerdictStatus::kNoVerdict;
    out.r.kind = "io_error";
    out.r.feedback = st.error();
    return out;
  } else {
    eval::EvalRequest req;
    req.problem = problem.path;
    req.kernel = dir / "solution" / "decomposed_solution.py";
    req.options = options;
    req.options.allow_pytorch = allow_pytorch;
    req.task = problem.name;
    req.priority = detail::kEndToEndPriority;
    r = detail::evaluate(ctx, req);
    if (ctx.sink && r.status != eval::VerdictStatus::kNoVerdict)
      ctx.sink->store_e2e(dir.filename().string(), detail::timed_result_json(r));
  }
  out.r = r;
  out.event = detail::eval_event(problem.name, label, iteration, r, r.correct() ? r.speedup_compile : 0, "e2e");
  return out;
}

}  // namespace detail

}  // namespace mk::search
