// After the search: PostFuse (--postfuse N: one more beam search, for a single
// fused kernel) and Swap (--swap TAU: subkernels slower than TAU x
// torch.compile replaced by their PyTorch reference or a --swap-with kernel).
#include <fmt/format.h>

#include "problem/compose.h"
#include "records/events.h"
#include "search/internal.h"
#include "search/search.h"

namespace mk::search {

using detail::emit;
using detail::monolithic_solution;

namespace detail {

std::optional<Solution> postfuse(SearchContext& ctx, const problem::Problem& problem, const Solution& best) {
  int n = ctx.opts.postfuse;
  if (!best.correct || best.topology.subproblems.size() < 2) {
    records::Postfuse e;
    e.status = "skipped";
    e.accepted = false;
    e.detail = !best.correct ? "no correct modular solution to fuse" : "the solution is already a single kernel";
    emit(ctx, e);
    return std::nullopt;
  }
  auto conv = agents::postfuse_prompt(ctx.kernel_context(), problem, best.topology, best.kernels, best.speedup);
  if (!conv) {
    ctx.set_fatal(conv.error());
    return std::nullopt;
  }
  KernelTask task{problem.name, problem.path, problem.source, *conv, "postfuse", false, {}};
  int iteration = ctx.opts.iterations + 1;
  BeamState beam = evolve_kernel(ctx, task, {}, n, iteration, ctx.sink);
  const Candidate* c = beam.best_correct();
  bool accept = c && c->reward > best.speedup;
  records::Postfuse e;
  e.attempt = beam.calls;
  e.status = accept ? "accepted" : "not accepted";
  if (c) e.speedup_compile = c->reward;
  e.accepted = accept;
  e.modular_speedup = best.speedup;
  emit(ctx, e);
  if (!accept) return std::nullopt;
  Solution s = monolithic_solution(problem, *c, best.method, iteration);
  s.topology.origin = "postfuse";
  return s;
}

}  // namespace detail

std::optional<Solution> swap_subkernels(SearchContext& ctx, const problem::Problem& problem, const Solution& best,
                                        double tau) {
  const auto& subs = best.topology.subproblems;
  std::map<std::string, double> speed;
  for (const auto& sp : subs) {
    double s = 0;
    if (best.kernels.count(sp.name) && best.local.count(sp.name)) s = best.local.at(sp.name).value("reward", 0.0);
    if (best.pytorch.count(sp.name)) s = 1.0;  // already the reference
    speed[sp.name] = s;
  }
  auto skip = [&](const std::string& why) {
    emit(ctx, records::SwapSkipped{tau, why});
    return std::nullopt;
  };
  if (subs.size() < 2) return skip("fewer than two subkernels");
  bool any_fast = false;
  for (const auto& [n, s] : speed) any_fast = any_fast || s >= 1.0;
  if (!any_fast) return skip("every subkernel is slower than torch.compile");
  Solution s = best;
  std::vector<records::SwapReplacement> replaced;
  for (const auto& sp : subs) {
    if (speed[sp.name] >= tau || best.pytorch.count(sp.name)) continue;
    auto alt = ctx.opts.swap_with.find(sp.name);
    if (alt != ctx.opts.swap_with.end()) {
      s.kernels[sp.name] = alt->second;
      replaced.push_back({sp.name, "user kernel", speed[sp.name]});
    } else {
      s.kernels[sp.name] = problem::pytorch_implementation(sp);
      s.pytorch.insert(sp.name);
      replaced.push_back({sp.name, "pytorch", speed[sp.name]});
    }
  }
  if (replaced.empty()) return skip(fmt::format("no subkernel is below tau = {}", tau));
  s.e2e = evaluate_composed(ctx, problem, s.topology, s.kernels, ctx.workspace / "swap", !s.pytorch.empty(), "swap");
  s.correct = s.e2e.correct();
  s.speedup = s.correct ? s.e2e.speedup_compile : 0;
  s.iteration = best.iteration;
  if (!s.correct || (best.correct && s.speedup < best.speedup)) {
    // Not taken: the solution stays as it was, so no swap event (reports would mark it swapped).
    records::SwapRejected rej;
    rej.replaced = replaced;
    rej.tau = tau;
    rej.speedup_before = best.speedup;
    if (s.correct) rej.speedup_after = s.speedup;
    rej.reason = !s.correct ? "the composition with the replacements failed end to end"
                            : "the composition with the replacements is slower";
    emit(ctx, rej);
    return std::nullopt;
  }
  for (const auto& r : replaced) {  // one swap event per replaced subkernel
    records::Swap sw;
    sw.name = r.name;
    sw.from = best.local.count(sw.name) ? best.local.at(sw.name).value("id", "kernel") : "kernel";
    sw.to = r.with;
    if (best.correct) sw.speedup_before = best.speedup;
    if (s.correct) sw.speedup_after = s.speedup;
    sw.triggered = true;
    sw.tau = tau;
    sw.subkernel_speedup = r.speedup;
    sw.correct = s.correct;
    sw.contains_pytorch_subkernels = !s.pytorch.empty();
    emit(ctx, sw);
  }
  return s;
}

}  // namespace mk::search
