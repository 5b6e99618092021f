// LLMDecompose, LLMSplit and LLMFuse: agents that change the subproblem
// structure, each verified by Evaluator::verify_decomposition.
#include <chrono>
#include <cmath>
#include <future>

#include <fmt/format.h>

#include "agents/reply.h"
#include "records/events.h"
#include "search/internal.h"
#include "search/search.h"

namespace mk::search {

namespace {

struct Attempt {
  std::optional<problem::Topology> topology;  ///< verified
  agents::Conversation next;                  ///< the conversation for the next try
  std::vector<records::Event> events;
  bool gave_up = false;                       ///< the LLM declined (fuse: NO_CHANGE)
};

/// One try: call, parse, build the topology, verify. On failure, `next` holds
/// the conversation continued with what went wrong.
Attempt attempt(SearchContext& ctx, const problem::Problem& problem, const problem::Topology* base,
                const agents::Conversation& conv, const std::string& agent, int sample, int iteration, int round,
                const fs::path& dir, const std::vector<std::string>& must_replace, bool prefetch) {
  Attempt a;
  a.next = conv;
  auto ex = detail::call(ctx, *ctx.llm, conv, agent, problem.name, sample, iteration, &a.events, round);
  if (!ex.call.ok) return a;  // retry the same conversation
  if (agent == "fuse" && agents::is_no_change_reply(ex.reply)) {
    a.gave_up = true;
    return a;
  }
  auto reask = [&](const std::string& err) {
    auto msg = agents::reask_message(*ctx.prompts, err, agents::kFilesFormatHint);
    a.next = conv.followed_by(ex.reply, msg ? *msg : err);
    a.events.push_back(records::ReplyError{problem.name, agent, iteration, err, ""});
  };
  auto files = agents::parse_files_reply(ex.reply);
  if (!files) {
    reask(files.error());
    return a;
  }
  auto topo = problem::topology_from_files(*files, base, agent);
  if (!topo) {
    reask(topo.error());
    return a;
  }
  for (const auto& name : must_replace) {
    if (topo->find(name) && topo->find(name)->hash == base->find(name)->hash) {
      reask(fmt::format("subproblem {} is still imported unchanged; replace it with exactly two new subproblems "
                        "with new names", name));
      return a;
    }
  }
  if (base && problem::diff(*base, *topo).empty()) {
    reask("the files you sent leave the decomposition unchanged");
    return a;
  }
  if (agent == "split" && base && !must_replace.empty()) {
    // LLMSplit splits each listed subproblem into exactly two. Which new part
    // came from which listed one is not visible, and two split subproblems
    // may share a new part, so: exactly 2 new for one, 2 to 2k for k.
    const size_t k = must_replace.size(), added = problem::diff(*base, *topo).added.size();
    if (k == 1 ? added != 2 : (added < 2 || added > 2 * k)) {
      reask(k == 1 ? fmt::format("split {} into exactly two new subproblems; the files you sent add {}",
                                 must_replace[0], added)
                   : fmt::format("split each of the {} listed subproblems into exactly two new subproblems (at most "
                                 "{} new ones in all); the files you sent add {}",
                                 k, 2 * k, added));
      return a;
    }
  }
  if (auto st = topo->write_to(dir, /*durable=*/false); !st) {
    // This machine's failure (a full disk, say), not the reply's: the run
    // stops, and its resume takes the cached reply from here.
    ctx.set_fatal(st.error() + "; free space (or fix the directory), then resume");
    a.events.clear();  // nothing of this try is logged: the resume redoes it from the cache
    return a;
  }
  if (prefetch && ctx.evaluator) {
    // The new subproblems' baselines (eager and a cold torch.compile: the
    // slowest part of a subproblem's first evaluations) start now, beside
    // this check, rather than once it passed. Keyed by content, so the
    // search's own prefetch of the same files later joins them.
    for (const auto& sp : topo->subproblems)
      if (!base || !base->find(sp.name) || base->find(sp.name)->hash != sp.hash)
        ctx.evaluator->prefetch_baselines(dir / sp.file(), ctx.opts.eval);
  }
  eval::DecompositionRequest req;
  req.problem = problem.path;
  req.decomposed = dir / "decomposed_problem.py";
  req.subproblems_dir = dir / "subkernel_problems";
  req.test_cpu = ctx.opts.eval.test_cpu;
  req.timeout_s = ctx.opts.eval.timeout_s;
  req.atol = ctx.opts.eval.atol;
  req.rtol = ctx.opts.eval.rtol;
  eval::DecompositionResult vr;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    vr = ctx.evaluator->verify_decomposition(req).get();
  } catch (const std::exception& e) {
    vr.ok = false;
    vr.failures = {std::string("the verifier failed: ") + e.what()};
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  records::VerifyDecomposition ve{problem.name, agent,       iteration, sample,
                                         vr.ok,        vr.failures, std::round(secs * 1000) / 1000};
  ve.max_abs_err = vr.max_abs_err;
  ve.tolerance = vr.tolerance;
  a.events.push_back(ve);
  if (vr.ok) {
    // Each subproblem's trials from now on use the layouts its calls had here.
    for (auto& sp : topo->subproblems) {
      auto it = vr.input_layouts.find(sp.name);
      sp.input_layouts = it == vr.input_layouts.end() ? nlohmann::json() : it->second;
    }
    a.topology = std::move(*topo);
    return a;
  }
  auto msg = agent == "decompose" ? agents::decompose_feedback_message(*ctx.prompts, vr.failures, vr.feedback)
                                  : agents::refine_feedback_message(*ctx.prompts, vr.failures, vr.feedback);
  a.next = conv.followed_by(ex.reply, msg ? *msg : "verification failed");
  return a;
}

}  // namespace

problem::Topology llm_decompose(SearchContext& ctx, const problem::Problem& problem, EventSink* sink) {
  // mkevolve adapt: the earlier run's decomposition is the starting point.
  std::string previous;
  if (const auto& r = ctx.opts.reuse) {
    previous = "### decomposed_problem.py\n\n```python\n" + r->top_level + "```\n";
    for (const auto& [name, src] : r->problems)
      previous += "\n### subkernel_problems/" + name + ".py\n\n```python\n" + src + "```\n";
  }
  auto first = agents::decompose_prompt(*ctx.prompts, problem, previous);
  const int k = std::max(1, ctx.opts.decompose_workers);
  if (first) {
    std::vector<agents::Conversation> convs(k, *first);
    for (int round = 0; round < ctx.opts.decompose_attempts && !ctx.should_stop(); ++round) {
      int base = ctx.reserve_samples("decompose:" + problem.name, k);
      std::vector<std::future<Attempt>> futs;
      for (int w = 0; w < k; ++w) {
        fs::path dir = ctx.workspace / "decompose" / fmt::format("w{}-a{}", w, round);
        futs.push_back(std::async(std::launch::async, [&, w, dir] {
          // Worker 0's proposal wins whenever it passes: its baselines start with its check.
          return attempt(ctx, problem, nullptr, convs[w], "decompose", base + w, 0, round, dir, {}, w == 0);
        }));
      }
      std::optional<problem::Topology> winner;
      int winner_worker = -1;
      for (int w = 0; w < k; ++w) {
        Attempt a = futs[w].get();
        if (sink)
          for (const auto& e : a.events) sink->emit(e);
        convs[w] = a.next;
        if (a.topology && !winner) {
          winner = std::move(a.topology);
          winner_worker = w;
        }
      }
      if (winner) {
        winner->origin = "decompose";
        if (sink) {
          auto e = detail::topology_event(
              0, "decompose", *winner, {},
              fmt::format("decomposed into {} subproblems (worker {}, round {})", winner->subproblems.size(),
                          winner_worker, round));
          e.worker = winner_worker;
          e.round = round;
          sink->emit(e);
        }
        return *winner;
      }
    }
  } else {
    ctx.set_fatal(first.error());
  }
  auto t = problem::Topology::wrap_original(problem);
  // Stopped (Ctrl-C, or a fatal error such as a full disk): no decomposition
  // was judged, so none is logged as the fallback; the resume goes on from
  // the decomposition calls.
  if (ctx.should_stop()) return t;
  if (sink)
    sink->emit(detail::topology_event(
                   0, "fallback", t, {}, "no decomposition passed verification; the original module is the only subproblem")
                   );
  return t;
}

std::optional<problem::Topology> llm_refine(SearchContext& ctx, const problem::Problem& problem,
                                            const problem::Topology& topo, const std::string& kind,
                                            const std::map<std::string, std::string>& failing,
                                            const std::string& status_table, int iteration, EventSink* sink) {
  auto conv = kind == "split" ? agents::split_prompt(*ctx.prompts, problem, topo, failing)
                              : agents::fuse_prompt(*ctx.prompts, problem, topo, status_table);
  if (!conv) {
    ctx.set_fatal(conv.error());
    return std::nullopt;
  }
  std::vector<std::string> must_replace;
  if (kind == "split")
    for (const auto& [name, why] : failing) must_replace.push_back(name);
  agents::Conversation c = *conv;
  int tries = std::max(1, ctx.opts.refine_attempts);
  for (int i = 0; i < tries && !ctx.should_stop(); ++i) {
    int sample = ctx.reserve_samples(kind + ":" + problem.name, 1);
    fs::path dir = ctx.workspace / "topologies" / fmt::format("t{}-{}-a{}", iteration, kind, i);
    Attempt a = attempt(ctx, problem, &topo, c, kind, sample, iteration, i, dir, must_replace, /*prefetch=*/true);
    if (sink)
      for (const auto& e : a.events) sink->emit(e);
    if (a.gave_up) return std::nullopt;
    if (a.topology) {
      a.topology->origin = kind;
      return a.topology;
    }
    c = a.next;
  }
  return std::nullopt;
}

}  // namespace mk::search
