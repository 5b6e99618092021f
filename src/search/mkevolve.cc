// The search's entry (run_method): the run_start event, the method it names
// (the MKEvolve loop, mkevolve_loop.cc, or one of the baselines that share
// its prompts, evaluator and budget: parallel sampling and beam search),
// PostFuse and Swap (swap_postfuse.cc), the final check (final_check.cc) and
// run_end; the helpers every part of the search uses to announce a solution.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "records/events.h"
#include "search/internal.h"
#include "search/search.h"
#include "util/fs.h"

namespace mk::search {

using problem::Topology;

using detail::announce_best;
using detail::emit;
using detail::final_check;
using detail::monolithic_solution;
using detail::postfuse;
using detail::run_mkevolve;

namespace {

records::Best best_event(const Solution& s) {
  records::Best b;
  b.t = s.iteration;
  b.speedup_compile = s.speedup;  // written as null when not correct
  b.correct = s.correct;
  b.method = s.method;
  b.subproblems = s.topology.names();
  b.contains_pytorch_subkernels = !s.pytorch.empty();
  return b;
}

}  // namespace

namespace detail {

void emit(SearchContext& ctx, const records::Event& e) {
  if (ctx.sink) ctx.sink->emit(e);
}

Solution monolithic_solution(const problem::Problem& problem, const Candidate& best, const std::string& method,
                             int iteration) {
  Solution s;
  s.method = method;
  s.topology = Topology::wrap_original(problem);
  s.topology.origin = method;
  s.iteration = iteration;
  const std::string name = s.topology.subproblems[0].name;
  if (!best.source.empty()) s.kernels[name] = best.source;
  s.local[name] = best.summary();
  s.e2e = best.result;
  s.correct = best.correct();
  s.speedup = best.reward;
  return s;
}

void announce_best(SearchContext& ctx, const Solution& s) {
  emit(ctx, best_event(s));
  ctx.bests.push_back(std::make_shared<const Solution>(s));
}

}  // namespace detail

namespace {

// ---- baselines ---------------------------------------------------------------

Solution run_baseline(SearchContext& ctx, const problem::Problem& problem) {
  KernelTask task{problem.name, problem.path, problem.source, std::nullopt, "generate", false, {}};
  const bool parallel = ctx.opts.method == "parallel";
  std::vector<Candidate> all;
  BeamState beam;
  Solution best;
  best.method = ctx.opts.method;
  best.topology = Topology::wrap_original(problem);
  for (int t = 1; t <= ctx.opts.iterations && !ctx.should_stop(); ++t) {
    const Candidate* top = nullptr;
    if (parallel) {
      auto wave = parallel_sampling(ctx, task, ctx.opts.calls_per_iter, t, ctx.sink);
      for (auto& c : wave) all.push_back(std::move(c));
      std::stable_sort(all.begin(), all.end(), better);
      top = all.empty() ? nullptr : &all.front();
    } else {
      beam = evolve_kernel(ctx, task, std::move(beam), ctx.opts.calls_per_iter, t, ctx.sink);
      top = beam.best();
    }
    if (ctx.should_stop()) break;  // the iteration is not over (as in run_mkevolve)
    if (top && (top->reward > best.speedup || (!best.correct && top->correct()) || best.kernels.empty())) {
      best = monolithic_solution(problem, *top, ctx.opts.method, t);
      if (best.correct) announce_best(ctx, best);  // a best event is a correct solution, never a placeholder
    }
    records::Iteration it;
    it.t = t;
    it.e2e.status = top ? (top->evaluated ? eval::to_string(top->result.status) : "no_kernel") : "no_kernel";
    if (top && top->correct()) {
      it.e2e.speedup_compile = top->result.speedup_compile;
      it.e2e.speedup_eager = top->result.speedup_eager;
      if (top->result.runtime.valid) it.e2e.runtime_ms = top->result.runtime.median_ms;
    }
    it.calls_used = ctx.acct ? ctx.acct->calls() : 0;
    it.tokens = ctx.acct ? ctx.acct->tokens() : 0;
    it.method = ctx.opts.method;
    it.best_speedup = best.speedup;
    it.correct = best.correct;
    it.kernel_calls = ctx.acct ? ctx.acct->kernel_calls() : 0;
    emit(ctx, it);
  }
  // The next-best verified kernels (the last beam's members, or every sample,
  // best first), each a distinct source: the final check falls back on them
  // when the best fails it. A one-iteration run (evolve) has no earlier best.
  std::vector<const Candidate*> pool;
  for (const auto& c : parallel ? all : beam.members) pool.push_back(&c);
  std::stable_sort(pool.begin(), pool.end(), [](const Candidate* a, const Candidate* b) { return better(*a, *b); });
  std::set<std::string> sources;
  for (const auto& [name, src] : best.kernels) sources.insert(src);
  for (const Candidate* c : pool) {
    if (ctx.runners_up.size() >= 2) break;
    if (!c->correct() || c->source.empty() || !sources.insert(c->source).second) continue;
    ctx.runners_up.push_back(std::make_shared<const Solution>(monolithic_solution(problem, *c, ctx.opts.method,
                                                                                  c->iteration)));
  }
  return best;
}

}  // namespace

records::SolutionManifest Solution::manifest() const {
  records::SolutionManifest m;
  m.method = method;
  m.iteration = iteration;
  m.speedup = speedup;
  m.correct = correct;
  m.monolithic = topology.monolithic;
  m.origin = topology.origin;
  m.contains_pytorch_subkernels = !pytorch.empty();
  if (correct || e2e.status != eval::VerdictStatus::kCrashed || !e2e.kind.empty()) m.e2e = detail::result_json(e2e);
  return m;
}

nlohmann::json Solution::to_json() const {
  // The manifest's figures, with the search's own view of each subproblem.
  nlohmann::json j = manifest().to_json();
  nlohmann::json subs = nlohmann::json::array();
  for (const auto& sp : topology.subproblems) {
    nlohmann::json s = {{"name", sp.name}, {"has_kernel", kernels.count(sp.name) > 0},
                        {"pytorch", pytorch.count(sp.name) > 0}};
    if (local.count(sp.name)) s["local"] = local.at(sp.name);
    if (reused.count(sp.name)) s["reused_from"] = reused.at(sp.name);
    subs.push_back(s);
  }
  j["subkernels"] = subs;
  return j;
}

namespace {

/// run_end in the schema (status finished, interrupted or failed); the
/// search's own result word (ok, no_correct, interrupted, error) is `result`.
records::RunEnd run_end_event(const RunResult& res, const Solution& best) {
  records::RunEnd r;
  r.status = res.status == "error" ? "failed" : res.status == "interrupted" ? "interrupted" : "finished";
  if (best.correct) r.best_speedup_compile = best.speedup;
  r.message = res.error;
  // The caller writes a correct, complete solution to <run dir>/solution after this event.
  if (best.correct && !best.kernels.empty() && best.kernels.size() == best.topology.subproblems.size())
    r.solution_dir = "solution";
  r.result = res.status;
  r.correct = best.correct;
  r.contains_pytorch_subkernels = !best.pytorch.empty();
  if (res.status != "error" || !best.kernels.empty()) {
    r.solution = best.to_json();
    r.accounting = res.accounting;
  }
  return r;
}

}  // namespace

RunResult run_method(SearchContext& ctx, const problem::Problem& problem_in) {
  RunResult res;
  const SearchOptions& o = ctx.opts;
  // The search works on its own copy of the problem, so later edits to the
  // user's file cannot change a run (or its resume).
  problem::Problem problem = problem_in;
  problem.path = ctx.workspace / "problem.py";
  if (auto st = write_file_atomic(problem.path, problem.source); !st) {
    res.status = "error";
    res.error = st.error();
    return res;
  }
  {
    records::RunStart e;
    e.method = o.method;
    e.problem = problem.name;
    e.settings = {{"T", o.iterations}, {"L", o.refine_every}, {"budget_per_iter", o.calls_per_iter},
                  {"beam_width", o.beam_width}, {"max_calls", o.total_budget() + o.postfuse}};
    e.problem_hash = problem.hash;
    e.options = to_json(o);
    e.prompts_version = ctx.prompts ? ctx.prompts->version() : "";
    e.llm = ctx.llm ? ctx.llm->spec() : "";
    e.judge = ctx.judge ? ctx.judge->spec() : "";
    e.hardware = ctx.hardware;
    emit(ctx, e);
  }
  // The whole problem's baselines (its end-to-end evaluations and the final
  // check need them) are measured while the first LLM calls are in flight.
  if (ctx.evaluator) ctx.evaluator->prefetch_baselines(problem.path, o.eval);
  Solution best;
  if (o.method == "parallel" || o.method == "beam") {
    best = run_baseline(ctx, problem);
  } else if (o.method == "mkevolve" || o.method == "single-split" || (o.method == "adapt" && o.reuse)) {
    best = run_mkevolve(ctx, problem);
  } else {
    res.status = "error";
    res.error = o.method == "adapt" ? std::string("method adapt needs the run it adapts (mkevolve adapt RUN_DIR ...)")
                                    : fmt::format("unknown method '{}': use parallel, beam, mkevolve or single-split",
                                                  o.method);
    emit(ctx, run_end_event(res, Solution{}));
    return res;
  }
  if (o.postfuse > 0 && !ctx.should_stop()) {
    if (auto pf = postfuse(ctx, problem, best)) {
      best = std::move(*pf);
      announce_best(ctx, best);
    }
  }
  if (o.swap_tau && !ctx.should_stop()) {
    if (auto sw = swap_subkernels(ctx, problem, best, *o.swap_tau); sw && (!best.correct || sw->speedup >= best.speedup)) {
      best = std::move(*sw);
      announce_best(ctx, best);
    }
  }
  // The final check of the solution about to be returned, falling back to the
  // next-best verified ones when it fails (final_check.cc).
  final_check(ctx, problem, best);
  // Early final checks that were not needed (the other solution was returned) still run: wait for them.
  for (const auto& e : ctx.early_checks) e->result.wait();
  ctx.early_checks.clear();
  res.best = best;
  res.accounting = ctx.acct ? ctx.acct->to_json() : nlohmann::json::object();
  if (!ctx.fatal_message().empty()) {
    res.status = "error";
    res.error = ctx.fatal_message();
  } else if (ctx.stop && ctx.stop->load()) {
    res.status = "interrupted";
  } else {
    res.status = best.correct ? "ok" : "no_correct";
  }
  emit(ctx, run_end_event(res, best));
  return res;
}

}  // namespace mk::search
