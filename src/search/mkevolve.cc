// The MKEvolve outer loop (Algorithm 1), EvolveSubproblemTopology
// (Algorithm 2), Evaluate, Swap and PostFuse, and the baselines that share
// its prompts, evaluator and budget.
#include <algorithm>
#include <chrono>
#include <future>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "agents/reply.h"
#include "problem/compose.h"
#include "eval/roofline.h"
#include "eval/shapes.h"
#include "rundir/events.h"
#include "search/internal.h"
#include "search/search.h"
#include "util/fs.h"
#include "util/hash.h"

namespace mk::search {

namespace detail {

/// An end-to-end evaluation and its eval event, not yet emitted (the event is
/// empty when nothing was evaluated: the package could not be written).
struct Composed {
  eval::Verdict r;
  std::optional<rundir::events::Eval> event;
  /// The kernels as evaluated: with options.plain_env, pinned (each Triton
  /// dot naming its precision), which are the ones to ship once it passes.
  std::map<std::string, std::string> kernels;
  nlohmann::json precision;  ///< the pinning's account (Evaluator::pin_precision); null when not pinned
};

}  // namespace detail

using detail::Composed;

/// A final check started before the search ended (the last iteration's
/// end-to-end evaluation runs beside it): the solution it checks, and its result.
struct SearchContext::EarlyCheck {
  std::map<std::string, std::string> kernels;
  std::string top_level;
  bool allow_pytorch = false;
  std::shared_future<Composed> result;
  bool taken = false;
};

namespace {

using problem::Subproblem;
using problem::Topology;

/// A subproblem's beam: by name, source and the layouts the top level passes
/// its inputs in, so that two subproblems with the same code get a beam each,
/// and a changed subproblem (or one called with other layouts) starts afresh.
std::string beam_key(const Subproblem& sp) {
  std::string key = sp.name + "#" + sp.hash;
  if (!sp.input_layouts.is_null()) key += "#" + sha256_hex(sp.input_layouts.dump()).substr(0, 12);
  return key;
}

/// A file with trailing spaces and trailing blank lines dropped: how a reply's
/// files come back may differ from the earlier run's in nothing else.
std::string normalized(const std::string& src) {
  std::istringstream in(src);
  std::string line, out;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.pop_back();
    out += line + "\n";
  }
  while (out.size() >= 2 && out[out.size() - 1] == '\n' && out[out.size() - 2] == '\n') out.pop_back();
  return out;
}

/// A subproblem file with its module-level numeric constants (its sizes) and
/// blank lines set aside: two files equal this way define the same module for
/// other shapes.
std::string without_sizes(const std::string& src) {
  static const std::regex sizes(R"(^[A-Za-z_][A-Za-z0-9_]*\s*=\s*[-+0-9.eE*/(), ]+(#.*)?$)");
  std::istringstream in(normalized(src));
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.empty() || std::regex_match(line, sizes)) continue;
    out += line + "\n";
  }
  return out;
}

fs::path subproblem_file(const SearchContext& ctx, const Subproblem& sp) {
  return ctx.workspace / "subproblems" / fmt::format("{}-{}.py", sp.name, sp.hash.substr(0, 12));
}

/// LLMEvolveKernel's task for a subproblem: its file, its source, and the
/// layouts the top level passes its inputs in.
KernelTask subproblem_task(const SearchContext& ctx, const Subproblem& sp) {
  KernelTask task{sp.name, subproblem_file(ctx, sp), sp.source, std::nullopt, "generate", false, {}};
  task.input_layouts = sp.input_layouts;
  return task;
}

/// What the last end-to-end Evaluate found (Algorithm 2's local/global check
/// and AllocateLLMBudget's runtime shares read it).
struct LastEval {
  bool attempted = false;          ///< every subproblem had a correct kernel, so it was composed
  bool e2e_correct = false;
  /// The composition failed by its own fault while every subkernel passed
  /// locally (a wrong answer, an error, a timeout, a rule broken): local and
  /// global checks disagree. A harness failure (no verdict) never counts.
  bool e2e_failed = false;
  std::string e2e_status;  ///< the composition's status (and kind), for people
  /// The subproblem the failure pointed into, whose kernel went back to its
  /// beam ("" : it pointed nowhere, so TotalFuse follows).
  std::string blamed;
  std::map<std::string, double> runtime_ms;
};

/// Whether a composition's verdict is a failure of its own (every status
/// but correct and no verdict, the harness's).
bool composition_failed(const eval::Verdict& r) {
  return !r.correct() && r.status != eval::Status::kNoVerdict;
}

/// The subproblem a failed composition's error points into. The innermost
/// frame of a traceback decides (Python prints it last): one in a subkernel's
/// own file (`subkernel_implementations/<name>.py:LINE in F`, as the worker
/// names a package's frames, or Python's `File ".../subkernel_implementations/<name>.py", line N`),
/// or one in the top level whose line calls exactly one subproblem, by its
/// import alias or the attribute that holds it (say, a constructor called with
/// arguments the kernel's ModelNew does not take). Looked for in the verdict's
/// message, then its reasons, then the process's stderr tail. nullopt when no
/// frame points into one subproblem.
std::optional<std::string> blamed_subkernel(const eval::Verdict& r, const Topology& topo) {
  // Aliases and the attributes that hold each subproblem, from the top level.
  std::map<std::string, std::string> callee;  // alias or "self.<attr>" -> subproblem
  if (auto imports = problem::parse_top_imports(topo.top_level)) {
    for (const auto& im : *imports) callee[im.alias] = im.module;
    static const std::regex held(R"(self\.(\w+)\s*=\s*(\w+)\s*\()");
    for (auto it = std::sregex_iterator(topo.top_level.begin(), topo.top_level.end(), held);
         it != std::sregex_iterator(); ++it)
      if (callee.count((*it)[2].str())) callee["self." + (*it)[1].str()] = callee[(*it)[2].str()];
  }
  static const std::regex frame(
      R"((subkernel_implementations/(\w+)\.py|decomposed_solution\.py)(?::\d+ in \w+|", line \d+, in \w+)[^\n]*\n?([^\n]*))");
  std::vector<std::string> texts = {r.feedback};
  std::string reasons;
  for (const auto& x : r.reasons) reasons += x + "\n";
  texts.push_back(reasons);
  if (r.raw.is_object() && r.raw.contains("stderr_tail") && r.raw["stderr_tail"].is_string())
    texts.push_back(r.raw["stderr_tail"].get<std::string>());
  for (const auto& text : texts) {
    std::smatch last;
    bool any = false;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), frame); it != std::sregex_iterator(); ++it) {
      last = *it;
      any = true;
    }
    if (!any) continue;
    if (last[2].matched) {
      if (topo.find(last[2].str())) return last[2].str();
      continue;
    }
    // A top-level frame: the subproblem its line calls, if exactly one.
    const std::string code = last[3].str();
    std::set<std::string> called;
    for (const auto& [name, sp] : callee) {
      for (size_t at = code.find(name); at != std::string::npos; at = code.find(name, at + name.size())) {
        auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; };
        size_t p = at + name.size();
        while (p < code.size() && code[p] == ' ') ++p;
        if ((at == 0 || !word(code[at - 1])) && p < code.size() && code[p] == '(') called.insert(sp);
      }
    }
    if (called.size() == 1) return *called.begin();
  }
  return std::nullopt;
}

std::string failure_summary(const BeamState& b) {
  const Candidate* c = b.best();
  if (!c) return "No kernel has been written for it yet.";
  if (!c->evaluated) return "The best attempt produced no usable file: " + c->reply_error;
  return agents::trim_text(agents::eval_feedback(c->result), 12, 8, 1500);
}

std::string join_names(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

/// new (no kernel yet), correct or failing, per subproblem name.
std::map<std::string, std::string> beam_status(const Topology& topo, std::map<std::string, BeamState>& beams) {
  std::map<std::string, std::string> out;
  for (const auto& sp : topo.subproblems) {
    auto it = beams.find(beam_key(sp));
    if (it == beams.end() || !it->second.best()) out[sp.name] = "new";
    else out[sp.name] = it->second.best_correct() ? "correct" : "failing";
  }
  return out;
}

void emit(SearchContext& ctx, const nlohmann::json& e) {
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

nlohmann::json best_event(const Solution& s) {
  rundir::events::Best b;
  b.t = s.iteration;
  b.speedup_compile = s.speedup;  // written as null when not correct
  b.correct = s.correct;
  b.method = s.method;
  b.subproblems = s.topology.names();
  b.contains_pytorch_subkernels = !s.pytorch.empty();
  return b.to_json();
}

/// A new best: its event, and its place in the history the final check
/// falls back along.
void announce_best(SearchContext& ctx, const Solution& s) {
  emit(ctx, best_event(s));
  ctx.bests.push_back(std::make_shared<const Solution>(s));
}

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

Composed compose_and_evaluate(SearchContext& ctx, const problem::Problem& problem, const Topology& topo,
                              const std::map<std::string, std::string>& kernels, const fs::path& dir,
                              bool allow_pytorch, const std::string& label, const eval::EvalOptions& options);

/// Starts the final check of a solution that the search may return, on a
/// thread of its own; run_method takes its result instead of checking again.
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
    std::vector<nlohmann::json> events;
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
      one.events.push_back(rundir::events::judge(
          {one.name, "final", iteration, a.verdict, a.reason,
           a.verdict == "failed" ? (ctx.opts.judge_failure != "pass" ? "hold" : "pass") : ""}));
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
    rundir::events::Iteration it;
    it.t = t;
    it.e2e.status = top ? (top->evaluated ? eval::to_string(top->result.status) : "no_kernel") : "no_kernel";
    if (top && top->correct()) {
      it.e2e.speedup_compile = top->result.speedup_compile;
      it.e2e.speedup_eager = top->result.speedup_eager;
      if (top->result.runtime.valid) it.e2e.runtime_ms = top->result.runtime.median_ms;
    }
    it.calls_used = ctx.acct ? ctx.acct->to_json().value("calls", 0) : 0;
    it.tokens = ctx.acct ? ctx.acct->to_json().value("tokens", int64_t{0}) : 0;
    it.method = ctx.opts.method;
    it.best_speedup = best.speedup;
    it.correct = best.correct;
    it.kernel_calls = ctx.acct ? ctx.acct->kernel_calls() : 0;
    emit(ctx, it.to_json());
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

// ---- MKEvolve ------------------------------------------------------------------

/// mkevolve adapt: each subproblem of the variant that matches one of the
/// earlier run's starts its beam with that run's subkernel, re-verified here
/// on the variant's subproblem with no kernel LLM call (the cheat judge, when
/// one is set, reviews it only if the earlier run had none). A correct one
/// needs no kernel calls; a failing one is the first member its debug prompts
/// start from; one without a verdict is left out. The calls an earlier
/// subkernel cost are saved once, by the first subproblem that reuses it.
void seed_reused(SearchContext& ctx, const Reuse& r, const Topology& topo, std::map<std::string, BeamState>& beams) {
  // The re-verifications are independent of one another: they run at once,
  // and their outcomes are taken in subproblem order.
  struct Seed {
    const Subproblem* sp;
    ReuseMatch m;
    Candidate c;
    CandidateRecord rec;
    std::vector<nlohmann::json> events;
  };
  std::vector<Seed> seeds;
  for (const auto& sp : topo.subproblems) {
    auto m = match_reuse(r, sp);
    if (!m || ctx.should_stop()) continue;
    if (auto st = problem::write_file_plain(subproblem_file(ctx, sp), sp.source); !st) {
      ctx.set_fatal(st.error());
      return;
    }
    Seed s{&sp, *m, {}, {}, {}};
    s.c.task = sp.name;
    s.c.agent = "reused";
    s.c.parent = m->name;
    s.c.id = fmt::format("{}-reused", detail::safe_name(sp.name));
    s.c.source = r.kernels.at(m->name);
    s.rec = CandidateRecord{s.c.id, s.c.task, s.c.agent, 0, 0, {}, nlohmann::json()};
    seeds.push_back(std::move(s));
  }
  std::vector<std::future<void>> futs;
  for (auto& s : seeds)
    futs.push_back(std::async(std::launch::async, [&ctx, &r, &s] {
      KernelTask task = subproblem_task(ctx, *s.sp);
      detail::evaluate_source(ctx, task, s.c, s.rec, s.events, 0, !r.judged, 0);
    }));
  for (auto& f : futs) f.get();
  std::set<std::string> counted;
  for (auto& s : seeds) {
    if (!ctx.fatal_message().empty() || ctx.should_stop()) return;
    Candidate& c = s.c;
    int saved = c.correct() && r.calls.count(s.m.name) && counted.insert(s.m.name).second ? r.calls.at(s.m.name) : 0;
    emit(ctx, rundir::events::reuse({s.sp->name, r.from, s.m.name, s.m.how, c.id, eval::to_string(c.result.status),
                                  c.correct(), saved}));
    for (const auto& e : s.events) emit(ctx, e);
    if (c.no_verdict) continue;  // no evidence either way: evolved as a new subproblem
    BeamState b;
    b.members.push_back(std::move(c));
    beams[beam_key(*s.sp)] = std::move(b);
  }
}

/// A composition that failed by its own fault while every subkernel passed
/// locally is never a dead end. Where its error points into one subkernel,
/// that kernel leaves its beam's correct members: it keeps its place as a
/// failing member whose verdict is the composition's, so the next iteration
/// gives its subproblem budget and debugs it with the error it met in place.
/// Where the error points nowhere, last.blamed stays empty and the next
/// iteration's EvolveSubproblemTopology falls back to TotalFuse.
void route_composition_failure(SearchContext& ctx, const Topology& topo, std::map<std::string, BeamState>& beams,
                               const eval::Verdict& e2e, int t, LastEval& last) {
  rundir::events::CompositionFailure ev;
  ev.iteration = t;
  ev.status = eval::to_string(e2e.status);
  ev.kind = e2e.kind;
  ev.message = agents::trim_text(agents::eval_feedback(e2e), 12, 12, 1500);
  ev.action = "total_fuse";
  if (auto name = blamed_subkernel(e2e, topo)) {
    BeamState& b = beams[beam_key(*topo.find(*name))];
    if (!b.members.empty() && b.members.front().correct()) {
      const Candidate& c = b.members.front();
      eval::Verdict demoted = e2e;
      demoted.raw = nlohmann::json::object();
      demoted.runtime = demoted.eager = demoted.compiled = demoted.compiled_tf32 = {};
      demoted.speedup_compile = demoted.speedup_eager = demoted.speedup_compile_tf32 = 0;
      demoted.feedback =
          "This kernel passed its own trials, but inside the composed solution, called by the top level with the "
          "inputs it really passes, it failed (" + ev.status + (e2e.kind.empty() ? "" : ", " + e2e.kind) +
          "). Make it work there. The composed solution's error:\n" + e2e.feedback;
      ev.task = *name;
      ev.candidate = c.id;
      ev.action = "back_to_beam";
      // Every member with this source fails the same way in place, and so
      // does any later candidate that writes it again.
      b.rejected[c.source] = demoted;
      b.apply_rejected();
      last.blamed = *name;
    }
  }
  // A refining method falls back to TotalFuse; single-split and adapt keep their structure.
  if (ev.action == "total_fuse" && (ctx.opts.method == "single-split" || ctx.opts.method == "adapt"))
    ev.action = "none";
  emit(ctx, ev.to_json());
}

Solution run_mkevolve(SearchContext& ctx, const problem::Problem& problem) {
  const SearchOptions& o = ctx.opts;
  // adapt keeps the structure its decomposition gives (the variant's, drawn
  // from the earlier run's); single-split never refines.
  const bool refine = o.method != "single-split" && o.method != "adapt";
  Topology topo = llm_decompose(ctx, problem, ctx.sink);
  if (ctx.sink && !ctx.should_stop()) ctx.sink->snapshot_topology(0, topo);

  std::map<std::string, BeamState> beams;  // by beam_key: subproblem name and content hash
  if (o.reuse && !ctx.should_stop()) seed_reused(ctx, *o.reuse, topo, beams);
  LastEval last;
  Solution best;
  best.method = o.method;
  best.topology = topo;

  for (int t = 1; t <= o.iterations && !ctx.should_stop(); ++t) {
    // Algorithm 2: EvolveSubproblemTopology.
    Topology before = topo;
    std::string reason;
    if (refine && o.refine_every > 0 && t % o.refine_every == 0) {
      std::map<std::string, std::string> failing;
      for (const auto& sp : topo.subproblems) {
        const BeamState& b = beams[beam_key(sp)];
        // A subkernel the last composition just sent back to its beam has
        // had no round to mend what it met in place: it is not split yet.
        if (!b.best_correct() && sp.name != last.blamed) failing[sp.name] = failure_summary(b);
      }
      if (!failing.empty()) {
        auto r = llm_refine(ctx, problem, topo, "split", failing, "", t, ctx.sink);
        if (r) {
          topo = std::move(*r);
          reason = "split";
        } else {
          std::vector<std::string> names;
          for (const auto& [k, v] : failing) names.push_back(k);
          auto e = detail::topology_event(t, "split_failed", topo, beam_status(topo, beams),
                                          "split of " + join_names(names, ", ") +
                                              " failed; kept the previous structure");
          e.failing = names;
          emit(ctx, e.to_json());
        }
      } else if (o.fuse && topo.subproblems.size() >= 2) {
        std::string table;
        double total_ms = 0;
        for (const auto& sp : topo.subproblems)
          total_ms += last.runtime_ms.count(sp.name) ? last.runtime_ms.at(sp.name) : 0;
        for (const auto& sp : topo.subproblems) {
          const Candidate* c = beams[beam_key(sp)].best_correct();
          double ms = last.runtime_ms.count(sp.name) ? last.runtime_ms.at(sp.name) : 0;
          table += fmt::format("- {}: {:.3f}x vs torch.compile, {:.4g} ms, {:.0f}% of end-to-end time\n", sp.name,
                               c ? c->reward : 0.0, ms, total_ms > 0 ? 100 * ms / total_ms : 0.0);
        }
        auto r = llm_refine(ctx, problem, topo, "fuse", {}, table, t, ctx.sink);
        if (r) {
          topo = std::move(*r);
          reason = "fuse";
        } else {
          emit(ctx, detail::topology_event(t, "fuse_declined", topo, beam_status(topo, beams),
                                           "fusion declined; kept the previous structure")
                        .to_json());
        }
      }
    }
    if (refine && last.attempted && last.e2e_failed && last.blamed.empty() && !topo.monolithic) {
      // Every subkernel passed locally but the composition failed, and its
      // error points into no one subkernel: fall back to the monolithic
      // problem (TotalFuse).
      topo = Topology::wrap_original(problem);
      topo.origin = "total_fuse";
      reason = "total_fuse";
    }
    // FilterKernels / InitEmptyKernels: beams are keyed by subproblem name and
    // content, so kernels survive exactly for unchanged subproblems.
    std::map<std::string, BeamState> kept;
    for (const auto& sp : topo.subproblems) kept[beam_key(sp)] = beams.count(beam_key(sp)) ? beams[beam_key(sp)] : BeamState{};
    beams = std::move(kept);
    if (!reason.empty()) {
      auto d = problem::diff(before, topo);
      std::string what;
      if (reason == "total_fuse")
        what = "every subkernel passed locally but the composition failed (" + last.e2e_status +
               "): back to the whole problem";
      else
        what = fmt::format("{} {} into {}", reason, join_names(d.removed, ", "), join_names(d.added, ", "));
      auto e = detail::topology_event(t, reason, topo, beam_status(topo, beams), what, d.removed, d.added);
      e.diff = d.to_json();
      emit(ctx, e.to_json());
      last = LastEval{};
    }
    if (ctx.sink) ctx.sink->snapshot_topology(t, topo);
    for (const auto& sp : topo.subproblems) {
      if (auto st = problem::write_file_plain(subproblem_file(ctx, sp), sp.source); !st) {
        ctx.set_fatal(st.error());
        break;
      }
    }
    if (ctx.should_stop()) break;
    // Each subproblem's baselines are measured while its first kernel calls
    // are in flight, not by its first candidate's evaluation (cached ones cost nothing).
    for (const auto& sp : topo.subproblems) ctx.evaluator->prefetch_baselines(subproblem_file(ctx, sp), o.eval);

    // AllocateLLMBudget.
    std::vector<bool> needs_work;
    std::vector<double> runtime;
    for (const auto& sp : topo.subproblems) {
      const BeamState& b = beams[beam_key(sp)];
      needs_work.push_back(!b.best_correct());
      double ms = 0;
      if (last.runtime_ms.count(sp.name)) ms = last.runtime_ms.at(sp.name);
      else if (b.best_correct() && b.best_correct()->result.runtime.valid) ms = b.best_correct()->result.runtime.median_ms;
      // --allocate headroom: weigh by how far the subkernel is from its
      // roofline too (1 where that is not known: no GPU, no work record).
      if (o.allocate == "headroom" && b.best_correct())
        if (auto a = eval::roofline::analyze(b.best_correct()->result, ctx.gpu_name))
          ms *= std::max(1.0, a->verdict.headroom);  // 0 when the model does not fit: weight 1
      runtime.push_back(ms);
    }
    auto budget = allocate_budget(o.calls_per_iter, needs_work, runtime);
    // adapt: kernel calls go only where no verified subkernel is yet.
    if (o.reuse && std::find(needs_work.begin(), needs_work.end(), true) == needs_work.end())
      std::fill(budget.begin(), budget.end(), 0);
    rundir::events::Budget be;
    be.iteration = t;
    for (size_t i = 0; i < budget.size(); ++i) be.allocation.emplace_back(topo.subproblems[i].name, budget[i]);
    be.rule = std::find(needs_work.begin(), needs_work.end(), true) != needs_work.end() ? "even" : o.allocate;
    emit(ctx, rundir::events::budget(be));

    // LLMEvolveKernel for every subproblem, concurrently; events in subproblem order.
    {
      std::vector<std::unique_ptr<BufferedSink>> bufs;
      std::vector<std::future<BeamState>> futs;
      for (size_t i = 0; i < topo.subproblems.size(); ++i) {
        const Subproblem& sp = topo.subproblems[i];
        bufs.push_back(std::make_unique<BufferedSink>(ctx.sink));
        KernelTask task = subproblem_task(ctx, sp);
        BeamState start = beams[beam_key(sp)];
        BufferedSink* buf = bufs.back().get();
        int b = budget[i];
        futs.push_back(std::async(std::launch::async, [&ctx, task, start, b, t, buf]() mutable {
          BeamState out = evolve_kernel(ctx, task, std::move(start), b, t, buf);
          if (ctx.judge) judge_after_beam(ctx, task, out, t, buf);
          return out;
        }));
      }
      for (size_t i = 0; i < futs.size(); ++i) {
        beams[beam_key(topo.subproblems[i])] = futs[i].get();
        bufs[i]->flush();
      }
    }

    // Evaluate: compose the best subkernels and verify end to end.
    std::map<std::string, std::string> kernels;
    std::map<std::string, nlohmann::json> local;
    std::vector<std::string> missing;
    for (const auto& sp : topo.subproblems) {
      const BeamState& b = beams[beam_key(sp)];
      if (b.best()) local[sp.name] = b.best()->summary();
      if (const Candidate* c = b.best_correct()) kernels[sp.name] = c->source;
      else missing.push_back(sp.name);
    }
    Solution cur;
    cur.method = o.method;
    cur.topology = topo;
    cur.kernels = kernels;
    for (const auto& sp : topo.subproblems)
      if (const Candidate* c = beams[beam_key(sp)].best_correct(); c && c->agent == "reused" && o.reuse)
        cur.reused[sp.name] = o.reuse->from;
    cur.local = local;
    cur.iteration = t;
    last = LastEval{};
    if (missing.empty() && !ctx.should_stop()) {
      // The last iteration, when nothing but the final check follows it: the
      // final check of each solution the run may return (this one, or the
      // best so far) runs beside this end-to-end evaluation instead of after it.
      if (t == o.iterations && o.postfuse == 0 && !o.swap_tau && ctx.overlap_final_check) {
        start_early_check(ctx, problem, topo, kernels, false);
        if (best.correct) start_early_check(ctx, problem, best.topology, best.kernels, !best.pytorch.empty());
      }
      cur.e2e = evaluate_composed(ctx, problem, topo, kernels, ctx.workspace / "e2e" / fmt::format("t{}", t), false,
                                  fmt::format("t{}", t));
      cur.correct = cur.e2e.correct();
      cur.speedup = cur.correct ? cur.e2e.speedup_compile : 0;
      // No verdict (the harness failed, not the composition) is no evidence
      // of a local/global disagreement: it never triggers TotalFuse.
      last.attempted = cur.e2e.status != eval::Status::kNoVerdict;
      last.e2e_correct = cur.correct;
      last.e2e_failed = composition_failed(cur.e2e);
      if (last.e2e_failed) {
        last.e2e_status = std::string(eval::to_string(cur.e2e.status)) + (cur.e2e.kind.empty() ? "" : ", " + cur.e2e.kind);
        route_composition_failure(ctx, topo, beams, cur.e2e, t, last);
      }
      // Each subkernel's GPU time inside the composed forward (the worker's
      // profile of the end-to-end evaluation: a subproblem instantiated N
      // times counts N times), where the worker attributed any; else its own
      // standalone runtime.
      const auto& raw = cur.e2e.raw;
      const nlohmann::json* per = nullptr;
      if (raw.is_object() && raw.contains("subkernel_runtime_ms") && raw["subkernel_runtime_ms"].is_object())
        per = &raw["subkernel_runtime_ms"];
      for (const auto& sp : topo.subproblems) {
        if (per && per->contains(sp.name) && (*per)[sp.name].is_number()) {
          last.runtime_ms[sp.name] = (*per)[sp.name].get<double>();
          continue;
        }
        const Candidate* c = beams[beam_key(sp)].best_correct();
        if (c && c->result.runtime.valid) last.runtime_ms[sp.name] = c->result.runtime.median_ms;
      }
    }
    // Stopped part-way (Ctrl-C, a full disk): the iteration is not over. Its
    // resume redoes the rest from the log, so nothing logs it as done.
    if (ctx.should_stop()) break;
    // r >= r*, the newer winning ties. A correct solution always beats an
    // incorrect one, and where no torch.compile baseline exists (every
    // speedup 0) the eager speedup decides.
    bool take = cur.correct != best.correct ? cur.correct
                : cur.speedup != best.speedup ? cur.speedup > best.speedup
                                              : cur.e2e.speedup_eager >= best.e2e.speedup_eager;
    if (take) {
      best = cur;
      if (best.correct) announce_best(ctx, best);  // no "new best" for an iteration without a solution
    }
    rundir::events::Iteration it;
    it.t = t;
    if (!last.attempted) {
      it.e2e.status = "skipped";
    } else {
      it.e2e.status = eval::to_string(cur.e2e.status);
      if (cur.correct) {
        it.e2e.speedup_compile = cur.e2e.speedup_compile;
        it.e2e.speedup_eager = cur.e2e.speedup_eager;
        if (cur.e2e.runtime.valid) it.e2e.runtime_ms = cur.e2e.runtime.median_ms;
      }
    }
    double total_ms = 0;
    for (const auto& [n, ms] : last.runtime_ms) total_ms += ms;
    for (size_t i = 0; i < topo.subproblems.size(); ++i) {
      const Subproblem& sp = topo.subproblems[i];
      const BeamState& b = beams[beam_key(sp)];
      const Candidate* c = b.best_correct();
      rundir::events::SubkernelSummary k;
      k.calls = b.calls;
      k.budget = i < budget.size() ? budget[i] : 0;
      if (!c && b.best()) k.status = b.best()->evaluated ? eval::to_string(b.best()->result.status) : "no_kernel";
      k.name = sp.name;
      k.correct = c != nullptr;
      if (c) k.speedup_compile = c->reward;
      if (c && c->result.runtime.valid) k.runtime_ms = c->result.runtime.median_ms;
      if (last.runtime_ms.count(sp.name) && total_ms > 0) k.share = last.runtime_ms.at(sp.name) / total_ms;
      k.uses_pytorch = c && c->result.uses_pytorch;
      if (c && !ctx.gpu_name.empty()) k.roofline = eval::roofline::summary_json(c->result, ctx.gpu_name);
      it.subkernels.push_back(k);
    }
    it.calls_used = ctx.acct ? ctx.acct->to_json().value("calls", 0) : 0;
    it.tokens = ctx.acct ? ctx.acct->to_json().value("tokens", int64_t{0}) : 0;
    it.method = o.method;
    it.topology_change = reason;
    it.speedup = cur.speedup;
    it.best_speedup = best.speedup;
    it.kernel_calls = ctx.acct ? ctx.acct->kernel_calls() : 0;
    it.e2e.missing = missing;
    emit(ctx, it.to_json());
  }
  return best;
}

std::optional<Solution> postfuse(SearchContext& ctx, const problem::Problem& problem, const Solution& best) {
  int n = ctx.opts.postfuse;
  if (!best.correct || best.topology.subproblems.size() < 2) {
    rundir::events::Postfuse e;
    e.status = "skipped";
    e.accepted = false;
    e.detail = !best.correct ? "no correct modular solution to fuse" : "the solution is already a single kernel";
    emit(ctx, e.to_json());
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
  rundir::events::Postfuse e;
  e.attempt = beam.calls;
  e.status = accept ? "accepted" : "not accepted";
  if (c) e.speedup_compile = c->reward;
  e.accepted = accept;
  e.modular_speedup = best.speedup;
  emit(ctx, e.to_json());
  if (!accept) return std::nullopt;
  Solution s = monolithic_solution(problem, *c, best.method, iteration);
  s.topology.origin = "postfuse";
  return s;
}

}  // namespace

nlohmann::json to_json(const SearchOptions& o) {
  return {{"method", o.method},
          {"iterations", o.iterations},
          {"refine_every", o.refine_every},
          {"calls_per_iter", o.calls_per_iter},
          {"beam_width", o.beam_width},
          {"expansion", o.expansion},
          {"fuse", o.fuse},
          {"allocate", o.allocate},
          {"swap_tau", o.swap_tau ? nlohmann::json(*o.swap_tau) : nlohmann::json(nullptr)},
          {"swap_with", o.swap_with},
          {"postfuse", o.postfuse},
          {"decompose_workers", o.decompose_workers},
          {"decompose_attempts", o.decompose_attempts},
          {"refine_attempts", o.refine_attempts},
          {"max_tokens", o.max_tokens},
          {"reasoning_effort", o.reasoning_effort},
          {"judge_failure", o.judge_failure},
          {"reuse", o.reuse ? o.reuse->to_json() : nlohmann::json(nullptr)},
          {"total_budget", o.total_budget()},
          {"eval",
           {{"trials", o.eval.trials},
            {"perf_trials", o.eval.perf_trials},
            {"warmup", o.eval.warmup},
            {"atol", o.eval.atol ? nlohmann::json(*o.eval.atol) : nlohmann::json(nullptr)},
            {"rtol", o.eval.rtol ? nlohmann::json(*o.eval.rtol) : nlohmann::json(nullptr)},
            {"pass_rate", o.eval.pass_rate ? nlohmann::json(*o.eval.pass_rate) : nlohmann::json(nullptr)},
            {"trials_dist", o.eval.trials_dist},
            {"shapes", o.eval.shapes},
            {"tolerance", o.eval.tolerance},
            {"calibration_runs", o.eval.calibration_runs},
            {"timeout_s", o.eval.timeout_s},
            {"seed", o.eval.seed},
            {"test_cpu", o.eval.test_cpu},
            {"timing", o.eval.timing},
            {"compile_timeout_s", o.eval.compile_timeout_s},
            {"gpu", o.eval.gpu}}}};
}

nlohmann::json Reuse::to_json() const {
  return {{"from", from},       {"top_level", top_level}, {"problems", problems},
          {"kernels", kernels}, {"calls", calls},         {"judged", judged}};
}

Result<Reuse> Reuse::from_json(const nlohmann::json& j) {
  if (!j.is_object()) return Error{"reuse: not an object"};
  try {
    Reuse r;
    r.from = j.value("from", std::string());
    r.top_level = j.value("top_level", std::string());
    if (j.contains("problems")) r.problems = j["problems"].get<std::map<std::string, std::string>>();
    if (j.contains("kernels")) r.kernels = j["kernels"].get<std::map<std::string, std::string>>();
    if (j.contains("calls")) r.calls = j["calls"].get<std::map<std::string, int>>();
    r.judged = j.value("judged", false);
    return r;
  } catch (const std::exception& e) {
    return Error{std::string("reuse: ") + e.what()};
  }
}

std::optional<ReuseMatch> match_reuse(const Reuse& r, const Subproblem& sp) {
  // Each kind of match tries the subproblem of the same name first.
  auto find = [&](auto same, const char* how) -> std::optional<ReuseMatch> {
    if (r.problems.count(sp.name) && r.kernels.count(sp.name) && same(r.problems.at(sp.name)))
      return ReuseMatch{sp.name, how};
    for (const auto& [name, src] : r.problems)
      if (r.kernels.count(name) && same(src)) return ReuseMatch{name, how};
    return std::nullopt;
  };
  const std::string same = normalized(sp.source);
  if (auto m = find([&](const std::string& s) { return normalized(s) == same; }, "same source")) return m;
  const std::string mine = without_sizes(sp.source);
  if (auto m = find([&](const std::string& s) { return without_sizes(s) == mine; }, "same module, other shapes"))
    return m;
  if (r.problems.count(sp.name) && r.kernels.count(sp.name)) return ReuseMatch{sp.name, "same name"};
  return std::nullopt;
}

std::string correctness_fact(const eval::EvalOptions& o) {
  std::string s = "Correctness: every output element within atol + rtol * |expected| of the reference";
  if (o.tolerance != "default") {
    s += ", at each output's own calibrated atol with rtol = 0: the largest error of the reference in its own "
         "precision against a float64 run of it over many input draws, plus 3 standard deviations (at least one "
         "unit in the last place of the output's dtype). A kernel that accumulates in float32 and rounds once "
         "passes; one that accumulates in a lower precision, or changes the arithmetic, usually does not";
  } else if (o.atol && o.rtol) {
    s += fmt::format(", atol = {:.3g}, rtol = {:.3g} for every output dtype", *o.atol, *o.rtol);
  } else {
    s += ", by output dtype unless the problem file declares MKEVOLVE_TOLERANCE: float32 atol = rtol = 1e-4; "
         "float16 and bfloat16 atol = rtol = 1e-2; float8 atol = 0.1, rtol = 0.2 with 85% of elements within";
    if (o.atol) s += fmt::format(" (atol = {:.3g} for every dtype)", *o.atol);
    if (o.rtol) s += fmt::format(" (rtol = {:.3g} for every dtype)", *o.rtol);
  }
  if (o.pass_rate)
    s += fmt::format("; at least {:g}% of each output's elements must be within it", *o.pass_rate * 100);
  s += ". The output's dtype must be the reference's; a NaN or inf where the reference is finite always fails";
  return s;
}

Result<SearchOptions> options_from_json(const nlohmann::json& j) {
  try {
    SearchOptions o;
    o.method = j.value("method", o.method);
    o.iterations = j.value("iterations", o.iterations);
    o.refine_every = j.value("refine_every", o.refine_every);
    o.calls_per_iter = j.value("calls_per_iter", o.calls_per_iter);
    o.beam_width = j.value("beam_width", o.beam_width);
    o.expansion = j.value("expansion", o.expansion);
    o.fuse = j.value("fuse", o.fuse);
    o.allocate = j.value("allocate", std::string("runtime"));  // runs before the option: the paper's rule
    if (j.contains("swap_tau") && j["swap_tau"].is_number()) o.swap_tau = j["swap_tau"].get<double>();
    if (j.contains("swap_with") && j["swap_with"].is_object())
      o.swap_with = j["swap_with"].get<std::map<std::string, std::string>>();
    o.postfuse = j.value("postfuse", o.postfuse);
    o.decompose_workers = j.value("decompose_workers", o.decompose_workers);
    o.decompose_attempts = j.value("decompose_attempts", o.decompose_attempts);
    o.refine_attempts = j.value("refine_attempts", o.refine_attempts);
    o.max_tokens = j.value("max_tokens", o.max_tokens);
    o.reasoning_effort = j.value("reasoning_effort", o.reasoning_effort);
    o.judge_failure = j.value("judge_failure", o.judge_failure);
    if (j.contains("reuse") && j["reuse"].is_object()) {
      auto r = Reuse::from_json(j["reuse"]);
      if (!r) return Error{"run options: " + r.error()};
      o.reuse = std::move(*r);
    }
    if (j.contains("eval")) {
      const auto& e = j["eval"];
      o.eval.trials = e.value("trials", o.eval.trials);
      o.eval.perf_trials = e.value("perf_trials", o.eval.perf_trials);
      o.eval.warmup = e.value("warmup", o.eval.warmup);
      // null (or absent): by the output's dtype; a run recorded before
      // dtype defaults has its numbers, and keeps them.
      auto opt = [&](const char* k) -> std::optional<double> {
        if (e.contains(k) && e[k].is_number()) return e[k].get<double>();
        return std::nullopt;
      };
      o.eval.atol = opt("atol");
      o.eval.rtol = opt("rtol");
      o.eval.pass_rate = opt("pass_rate");
      // A run recorded before the scaled trials had none, and keeps none.
      o.eval.trials_dist = e.value("trials_dist", std::string("none"));
      o.eval.tolerance = e.value("tolerance", std::string("default"));
      // A run recorded before --shapes verified only the benchmark's shapes, and keeps to them.
      o.eval.shapes = e.value("shapes", std::string("benchmark"));
      o.eval.calibration_runs = e.value("calibration_runs", o.eval.calibration_runs);
      o.eval.timeout_s = e.value("timeout_s", o.eval.timeout_s);
      o.eval.seed = e.value("seed", o.eval.seed);
      o.eval.test_cpu = e.value("test_cpu", o.eval.test_cpu);
      o.eval.gpu = e.value("gpu", o.eval.gpu);
      o.eval.timing = e.value("timing", o.eval.timing);
      o.eval.compile_timeout_s = e.value("compile_timeout_s", o.eval.compile_timeout_s);
    }
    return o;
  } catch (const std::exception& e) {
    return Error{std::string("run options: ") + e.what()};
  }
}

nlohmann::json Solution::to_json() const {
  nlohmann::json subs = nlohmann::json::array();
  for (const auto& sp : topology.subproblems) {
    nlohmann::json s = {{"name", sp.name}, {"has_kernel", kernels.count(sp.name) > 0},
                        {"pytorch", pytorch.count(sp.name) > 0}};
    if (local.count(sp.name)) s["local"] = local.at(sp.name);
    if (reused.count(sp.name)) s["reused_from"] = reused.at(sp.name);
    subs.push_back(s);
  }
  nlohmann::json j = {{"method", method},
                      {"iteration", iteration},
                      {"speedup", speedup},
                      {"correct", correct},
                      {"monolithic", topology.monolithic},
                      {"origin", topology.origin},
                      {"contains_pytorch_subkernels", !pytorch.empty()},
                      {"subkernels", subs}};
  if (correct || e2e.status != eval::Status::kCrashed || !e2e.kind.empty()) j["e2e"] = detail::result_json(e2e);
  return j;
}

eval::Verdict evaluate_composed(SearchContext& ctx, const problem::Problem& problem, const Topology& topo,
                                   const std::map<std::string, std::string>& kernels, const fs::path& dir,
                                   bool allow_pytorch, const std::string& label) {
  eval::EvalOptions o = ctx.opts.eval;
  o.shapes = eval::candidate_shapes(o.shapes);
  Composed c = compose_and_evaluate(ctx, problem, topo, kernels, dir, allow_pytorch, label, o);
  if (c.event) emit(ctx, c.event->to_json());
  return c.r;
}

namespace {

Composed compose_and_evaluate(SearchContext& ctx, const problem::Problem& problem, const Topology& topo,
                              const std::map<std::string, std::string>& kernels, const fs::path& dir,
                              bool allow_pytorch, const std::string& label, const eval::EvalOptions& options) {
  problem::SolutionManifest man;
  man.extra = {{"problem", problem.name}, {"problem_hash", problem.hash}};
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
      out.r.status = eval::Status::kNoVerdict;
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
    r.status = eval::Status::kCrashed;
    r.kind = "compose_error";
    r.feedback = "cannot compose " + (dir / "solution").string() + ": " + st.error();
  } else if (st = problem::write_solution_package(dir / "solution", topo, out.kernels, man, /*durable=*/false); !st) {
    // This machine's failure (a full disk, say), never the solution's: no
    // verdict, nothing logged as evaluated, and the run stops so that it can
    // be resumed once there is room (its LLM replies are cached).
    ctx.set_fatal(st.error() + "; free space (or fix the directory), then resume");
    out.r.status = eval::Status::kNoVerdict;
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
    if (ctx.sink && r.status != eval::Status::kNoVerdict)
      ctx.sink->store_e2e(dir.filename().string(), detail::timed_result_json(r));
  }
  out.r = r;
  out.event = detail::eval_event(problem.name, label, iteration, r, r.correct() ? r.speedup_compile : 0, "e2e");
  return out;
}

}  // namespace

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
    emit(ctx, rundir::events::swap_skipped(tau, why));
    return std::nullopt;
  };
  if (subs.size() < 2) return skip("fewer than two subkernels");
  bool any_fast = false;
  for (const auto& [n, s] : speed) any_fast = any_fast || s >= 1.0;
  if (!any_fast) return skip("every subkernel is slower than torch.compile");
  Solution s = best;
  std::vector<rundir::events::SwapReplacement> replaced;
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
    rundir::events::SwapRejected rej;
    rej.replaced = replaced;
    rej.tau = tau;
    rej.speedup_before = best.speedup;
    if (s.correct) rej.speedup_after = s.speedup;
    rej.reason = !s.correct ? "the composition with the replacements failed end to end"
                            : "the composition with the replacements is slower";
    emit(ctx, rundir::events::swap_rejected(rej));
    return std::nullopt;
  }
  for (const auto& r : replaced) {  // one swap event per replaced subkernel
    rundir::events::Swap sw;
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
    emit(ctx, sw.to_json());
  }
  return s;
}

namespace {

/// run_end in the schema (status finished, interrupted or failed); the
/// search's own result word (ok, no_correct, interrupted, error) is `result`.
nlohmann::json run_end_event(const RunResult& res, const Solution& best) {
  rundir::events::RunEnd r;
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
  return r.to_json();
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
    rundir::events::RunStart e;
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
    emit(ctx, e.to_json());
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
      if (c.event) emit(ctx, c.event->to_json());
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
          fc.status = eval::Status::kCheating;
          fc.kind = "judge";
          fc.feedback = "An LLM reviewer judged this kernel to be cheating: " + j.reason;
        } else if (j.verdict == "failed" && o.judge_failure != "pass") {
          passed = false;  // not judged: no verdict, so the solution stays as it was (below)
          fc.status = eval::Status::kNoVerdict;
          fc.kind = "judge_failed";
          fc.feedback = "the cheat judge could not be asked: " + j.reason;
        }
      }
      rundir::events::FinalCheck e;
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
      emit(ctx, e.to_json());
      if (passed || fc.status == eval::Status::kNoVerdict) {
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
