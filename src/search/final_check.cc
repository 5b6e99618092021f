// The final check: the solution about to be returned, evaluated once more
// with a fresh seed and every check on (its dots pinned, in a plain process),
// the cheat judge's last look with --judge, and the fallbacks to the next-best
// verified solutions; and the early final checks the last iteration starts.
#include <algorithm>
#include <chrono>
#include <future>

#include <fmt/format.h>

#include "agents/reply.h"
#include "eval/shapes.h"
#include "records/events.h"
#include "search/internal.h"
#include "search/search.h"

namespace mk::search {

using problem::Topology;

using detail::compose_and_evaluate;
using detail::emit;

namespace {

/// The options of the final check: the search's, with a fresh seed (new inputs
/// and weights) and every check on: all of the scaled trials (x1, x3, x0.01,
/// neg), whatever --trials-dist the search used, and at least the default
/// number of trials. Tolerances stay the run's: they define correct. The
/// deadline grows with the work: a search that ran one trial to fit a large
/// problem under --timeout must not see its final check time out on nine.
eval::EvalOptions final_check_options(const SearchContext& ctx) {
  eval::EvalOptions o = ctx.opts.eval;
  const eval::EvalOptions defaults;
  o.seed += 1;
  // The returned solution is also run at the shape variants (unless --shapes benchmark).
  o.shapes = eval::final_shapes(o.shapes);
  // In a plain process, its dots pinned (compose_and_evaluate): what passes is what ships.
  o.plain_env = true;
  o.trials_dist = defaults.trials_dist;
  o.trials = std::max(o.trials, defaults.trials);
  // Runs of the candidate: its trials, one per scaled trial, and the timed phase.
  auto runs = [](const eval::EvalOptions& x) {
    int scaled = 0;
    if (x.trials_dist != "none" && !x.trials_dist.empty())
      scaled = 1 + static_cast<int>(std::count(x.trials_dist.begin(), x.trials_dist.end(), ','));
    return static_cast<double>(std::max(x.trials, 1) + scaled + 1);
  };
  o.timeout_s *= std::max(1.0, runs(o) / runs(ctx.opts.eval));
  return o;
}

/// The cheat judge's second look at a solution about to be returned (the
/// paper: only kernels that pass the cheating detector one more time are
/// returned): each of its own subkernels against its subproblem, together.
/// Swap's PyTorch stand-ins are not judged. Logs each subkernel's calls and
/// its `judge` event (candidate "final") in subkernel order.
struct FinalJudgement {
  std::string verdict = "pass";  ///< pass, cheat, failed (a judge call kept failing)
  std::string reason;
};
FinalJudgement judge_final(SearchContext& ctx, const Solution& s, int iteration) {
  struct One {
    std::string name;
    std::vector<records::Event> events;
    std::string verdict = "pass", reason;
  };
  std::vector<One> ones;
  for (const auto& sp : s.topology.subproblems)
    if (s.kernels.count(sp.name) && !s.pytorch.count(sp.name)) ones.push_back({sp.name, {}, "pass", ""});
  std::vector<std::future<void>> futs;
  for (auto& one : ones)
    futs.push_back(std::async(std::launch::async, [&ctx, &s, &one, iteration] {
      const problem::Subproblem* sp = s.topology.find(one.name);
      const std::string cand = detail::safe_name(one.name) + "-final";
      auto a = detail::ask_judge(ctx, sp->source, s.kernels.at(one.name), one.name, cand, iteration, 0, one.events);
      if (!a.decided()) return;
      // An unparseable verdict lets it pass, as in the beam (the evaluator's checks passed).
      if (a.verdict == "failed" || a.verdict == "cheat") {
        one.verdict = a.verdict;
        one.reason = a.reason;
      }
      one.events.push_back(records::Judge{one.name, "final", iteration, a.verdict, a.reason,
           a.verdict == "failed" ? (ctx.opts.judge_failure != "pass" ? "hold" : "pass") : ""});
    }));
  for (auto& f : futs) f.get();
  FinalJudgement out;
  for (const auto& one : ones) {
    for (const auto& e : one.events) emit(ctx, e);
    if (one.verdict == "cheat" && out.verdict != "cheat") out = {"cheat", one.name + ": " + one.reason};
    else if (one.verdict == "failed" && out.verdict == "pass") out = {"failed", one.name + ": " + one.reason};
  }
  return out;
}

}  // namespace

namespace detail {

void start_early_check(SearchContext& ctx, const problem::Problem& problem, const Topology& topo,
                       const std::map<std::string, std::string>& kernels, bool allow_pytorch) {
  auto e = std::make_shared<SearchContext::EarlyCheck>();
  e->kernels = kernels;
  e->top_level = topo.top_level;
  e->allow_pytorch = allow_pytorch;
  fs::path dir = ctx.workspace / fmt::format("final-early-{}", ctx.early_checks.size());
  eval::EvalOptions o = final_check_options(ctx);
  e->result = std::async(std::launch::async, [&ctx, problem, topo, kernels, dir, allow_pytorch, o] {
                return compose_and_evaluate(ctx, problem, topo, kernels, dir, allow_pytorch, "final", o);
              }).share();
  ctx.early_checks.push_back(std::move(e));
}

void final_check(SearchContext& ctx, const problem::Problem& problem, Solution& best) {
  const SearchOptions& o = ctx.opts;
  // The final check: the solution about to be returned, once more, with a
  // fresh seed (new inputs and weights) and every check on. One that fails
  // it is not returned as correct: the next-best verified solution (the
  // earlier bests and the baselines' runners-up, fastest first, each a
  // distinct package) is checked in its place, up to kFinalCheckTries in
  // all; if none passes, no correct kernel was found.
  if (best.correct && !ctx.should_stop() && ctx.fatal_message().empty()) {
    constexpr size_t kFinalCheckTries = 3;
    // The fallbacks, fastest first: the earlier bests (newest first, as the
    // best only ever improves) and the baselines' runners-up.
    std::vector<std::shared_ptr<const Solution>> behind(ctx.bests.rbegin(), ctx.bests.rend());
    behind.insert(behind.end(), ctx.runners_up.begin(), ctx.runners_up.end());
    std::stable_sort(behind.begin(), behind.end(), [](const auto& a, const auto& b) { return a->speedup > b->speedup; });
    std::vector<Solution> order{best};
    for (auto it = behind.begin(); it != behind.end() && order.size() < kFinalCheckTries; ++it) {
      const Solution& s = **it;
      bool seen = false;
      for (const auto& o2 : order) seen |= o2.kernels == s.kernels && o2.topology.top_level == s.topology.top_level;
      if (s.correct && !seen) order.push_back(s);
    }
    const int seed = ctx.opts.eval.seed;
    bool settled = false;
    for (size_t k = 0; k < order.size() && !settled && ctx.fatal_message().empty() && !ctx.should_stop(); ++k) {
      const Solution& cand = order[k];
      Composed c;
      std::shared_ptr<SearchContext::EarlyCheck> early;
      for (const auto& e : ctx.early_checks)
        if (!e->taken && e->kernels == cand.kernels && e->top_level == cand.topology.top_level &&
            e->allow_pytorch == !cand.pytorch.empty())
          early = e;
      if (early) {
        // Started beside the last iteration's end-to-end evaluation: the path
        // waited only for what was left of it (critical_path.h reads waited_s).
        early->taken = true;
        auto w0 = std::chrono::steady_clock::now();
        c = early->result.get();
        if (c.event)
          c.event->waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
      } else {
        c = compose_and_evaluate(ctx, problem, cand.topology, cand.kernels,
                                 ctx.workspace / (k == 0 ? std::string("final") : fmt::format("final-{}", k)),
                                 !cand.pytorch.empty(), "final", final_check_options(ctx));
      }
      if (c.event) emit(ctx, *c.event);
      eval::Verdict fc = c.r;
      bool passed = fc.correct();
      // No verdict (the harness failed) is logged and charged to nobody. A
      // package that could not be written was not checked: the run stops
      // (fatal, below) and its resume checks it.
      if (!ctx.fatal_message().empty()) break;
      if (passed && ctx.judge) {
        // With --judge, the cheat judge looks at its kernels once more.
        FinalJudgement j = judge_final(ctx, cand, o.iterations + 1);
        if (ctx.should_stop() || !ctx.fatal_message().empty()) break;
        if (j.verdict == "cheat") {
          passed = false;
          fc.status = eval::VerdictStatus::kCheating;
          fc.kind = "judge";
          fc.feedback = "An LLM reviewer judged this kernel to be cheating: " + j.reason;
        } else if (j.verdict == "failed" && o.judge_failure != "pass") {
          passed = false;  // not judged: no verdict, so the solution stays as it was (below)
          fc.status = eval::VerdictStatus::kNoVerdict;
          fc.kind = "judge_failed";
          fc.feedback = "the cheat judge could not be asked: " + j.reason;
        }
      }
      records::FinalCheck e;
      e.passed = passed;
      e.seed = seed + 1;
      e.status = eval::to_string(fc.status);
      e.kind = fc.kind;
      if (passed) {
        e.speedup_compile = fc.speedup_compile;
        e.speedup_eager = fc.speedup_eager;
        if (fc.runtime.valid) e.runtime_ms = fc.runtime.median_ms;
        e.search_speedup_compile = cand.speedup;
      } else {
        e.message = agents::trim_text(fc.feedback, 6, 6, 800);
      }
      e.iteration = cand.iteration;
      e.fallback = static_cast<int>(k);  // 0: the best itself; k: the k-th next-best verified solution
      e.precision = c.precision;
      if (auto sh = eval::ShapesRecord::from_checks(fc.raw)) e.shapes = sh->to_json();
      // --baseline-tf32: the same solution against torch.compile with TF32 on, beside the reward's TF32-off figure.
      if (passed && fc.speedup_compile_tf32 > 0) e.speedup_compile_tf32 = fc.speedup_compile_tf32;
      emit(ctx, e);
      if (passed || fc.status == eval::VerdictStatus::kNoVerdict) {
        if (k > 0) best = cand;  // the next-best verified solution, checked
        // What ships is what this check evaluated: its dots name their precision.
        if (!c.precision.is_null()) best.kernels = c.kernels;
        if (passed) {
          // The figure reported for the returned solution is the final
          // check's own measurement (fresh inputs, every check on), not the
          // search's; the search's stays in the final_check event beside it.
          best.speedup = fc.speedup_compile;
          best.e2e = fc;
        }
        settled = true;
      }
    }
    if (!settled && ctx.fatal_message().empty() && !ctx.should_stop()) {
      best.correct = false;
      best.speedup = 0;
    }
  }
}

}  // namespace detail

}  // namespace mk::search
