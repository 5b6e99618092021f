// The MKEvolve outer loop (Algorithm 1) and EvolveSubproblemTopology
// (Algorithm 2): per iteration, split or fuse the structure (or TotalFuse),
// AllocateLLMBudget, LLMEvolveKernel per subproblem, then Evaluate the
// composition end to end; a composition that fails by its own fault sends
// the subkernel its error points into back to its beam.
#include <algorithm>
#include <future>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "agents/reply.h"
#include "eval/roofline.h"
#include "records/events.h"
#include "search/internal.h"
#include "search/search.h"
#include "util/hash.h"

namespace mk::search {

using problem::Subproblem;
using problem::Topology;

using detail::announce_best;
using detail::beam_key;
using detail::emit;
using detail::seed_reused;
using detail::start_early_check;
using detail::subproblem_file;
using detail::subproblem_task;

namespace detail {

std::string beam_key(const Subproblem& sp) {
  std::string key = sp.name + "#" + sp.hash;
  if (!sp.input_layouts.is_null()) key += "#" + sha256_hex(sp.input_layouts.dump()).substr(0, 12);
  return key;
}

fs::path subproblem_file(const SearchContext& ctx, const Subproblem& sp) {
  return ctx.workspace / "subproblems" / fmt::format("{}-{}.py", sp.name, sp.hash.substr(0, 12));
}

KernelTask subproblem_task(const SearchContext& ctx, const Subproblem& sp) {
  KernelTask task{sp.name, subproblem_file(ctx, sp), sp.source, std::nullopt, "generate", false, {}};
  task.input_layouts = sp.input_layouts;
  return task;
}

}  // namespace detail

namespace {

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
  return !r.correct() && r.status != eval::VerdictStatus::kNoVerdict;
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

/// A composition that failed by its own fault while every subkernel passed
/// locally is never a dead end. Where its error points into one subkernel,
/// that kernel leaves its beam's correct members: it keeps its place as a
/// failing member whose verdict is the composition's, so the next iteration
/// gives its subproblem budget and debugs it with the error it met in place.
/// Where the error points nowhere, last.blamed stays empty and the next
/// iteration's EvolveSubproblemTopology falls back to TotalFuse.
void route_composition_failure(SearchContext& ctx, const Topology& topo, std::map<std::string, BeamState>& beams,
                               const eval::Verdict& e2e, int t, LastEval& last) {
  records::CompositionFailure ev;
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
  emit(ctx, ev);
}

}  // namespace

namespace detail {

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
          emit(ctx, e);
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
                                           "fusion declined; kept the previous structure"));
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
      emit(ctx, e);
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
          ms *= std::max(1.0, a->fit.headroom);  // 0 when the model does not fit: weight 1
      runtime.push_back(ms);
    }
    auto budget = allocate_budget(o.calls_per_iter, needs_work, runtime);
    // adapt: kernel calls go only where no verified subkernel is yet.
    if (o.reuse && std::find(needs_work.begin(), needs_work.end(), true) == needs_work.end())
      std::fill(budget.begin(), budget.end(), 0);
    records::Budget be;
    be.iteration = t;
    for (size_t i = 0; i < budget.size(); ++i) be.allocation.emplace_back(topo.subproblems[i].name, budget[i]);
    be.rule = std::find(needs_work.begin(), needs_work.end(), true) != needs_work.end() ? "even" : o.allocate;
    emit(ctx, be);

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
      last.attempted = cur.e2e.status != eval::VerdictStatus::kNoVerdict;
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
    records::Iteration it;
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
      records::SubkernelSummary k;
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
    it.calls_used = ctx.acct ? ctx.acct->calls() : 0;
    it.tokens = ctx.acct ? ctx.acct->tokens() : 0;
    it.method = o.method;
    it.topology_change = reason;
    it.speedup = cur.speedup;
    it.best_speedup = best.speedup;
    it.kernel_calls = ctx.acct ? ctx.acct->kernel_calls() : 0;
    it.e2e.missing = missing;
    emit(ctx, it);
  }
  return best;
}

}  // namespace detail

}  // namespace mk::search
