// The MKEvolve outer loop (Algorithm 1), EvolveSubproblemTopology
// (Algorithm 2), Evaluate, Swap and PostFuse, and the baselines that share
// its prompts, evaluator and budget.
#include <future>

#include <fmt/format.h>

#include "problem/compose.h"
#include "search/internal.h"
#include "search/search.h"
#include "util/fs.h"

namespace mk::search {

namespace {

using problem::Subproblem;
using problem::Topology;

fs::path subproblem_file(const SearchContext& ctx, const Subproblem& sp) {
  return ctx.workspace / "subproblems" / fmt::format("{}-{}.py", sp.name, sp.hash.substr(0, 12));
}

/// What the last end-to-end Evaluate found (Algorithm 2's local/global check
/// and AllocateLLMBudget's runtime shares read it).
struct LastEval {
  bool attempted = false;          ///< every subproblem had a correct kernel, so it was composed
  bool e2e_correct = false;
  std::map<std::string, double> runtime_ms;
};

std::string failure_summary(const BeamState& b) {
  const Candidate* c = b.best();
  if (!c) return "No kernel has been written for it yet.";
  if (!c->evaluated) return "The best attempt produced no usable file: " + c->reply_error;
  return agents::trim_text(agents::eval_feedback(c->result), 12, 8, 1500);
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
  return {{"type", "best"},         {"iteration", s.iteration},  {"speedup", s.speedup},
          {"correct", s.correct},   {"method", s.method},        {"subproblems", s.topology.names()},
          {"contains_pytorch_subkernels", !s.pytorch.empty()}};
}

// ---- baselines ---------------------------------------------------------------

Solution run_baseline(SearchContext& ctx, const problem::Problem& problem) {
  KernelTask task{problem.name, problem.path, problem.source, std::nullopt, "generate", false};
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
    if (top && (top->reward > best.speedup || (!best.correct && top->correct()) || best.kernels.empty())) {
      best = monolithic_solution(problem, *top, ctx.opts.method, t);
      emit(ctx, best_event(best));
    }
    emit(ctx, {{"type", "iteration"},
               {"iteration", t},
               {"method", ctx.opts.method},
               {"best_speedup", best.speedup},
               {"correct", best.correct},
               {"kernel_calls", ctx.acct ? ctx.acct->kernel_calls() : 0}});
  }
  return best;
}

// ---- MKEvolve ------------------------------------------------------------------

Solution run_mkevolve(SearchContext& ctx, const problem::Problem& problem) {
  const SearchOptions& o = ctx.opts;
  const bool refine = o.method != "single-split";
  Topology topo = llm_decompose(ctx, problem, ctx.sink);
  if (ctx.sink) ctx.sink->snapshot_topology(0, topo);

  std::map<std::string, BeamState> beams;  // by subproblem content hash
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
        const BeamState& b = beams[sp.hash];
        if (!b.best_correct()) failing[sp.name] = failure_summary(b);
      }
      if (!failing.empty()) {
        auto r = llm_refine(ctx, problem, topo, "split", failing, "", t, ctx.sink);
        if (r) {
          topo = std::move(*r);
          reason = "split";
        } else {
          emit(ctx, {{"type", "topology"}, {"iteration", t}, {"reason", "split_failed"},
                     {"detail", "kept the previous structure"}, {"failing", [&] {
                        std::vector<std::string> n;
                        for (const auto& [k, v] : failing) n.push_back(k);
                        return n;
                      }()}});
        }
      } else if (o.fuse && topo.subproblems.size() >= 2) {
        std::string table;
        double total_ms = 0;
        for (const auto& sp : topo.subproblems)
          total_ms += last.runtime_ms.count(sp.name) ? last.runtime_ms.at(sp.name) : 0;
        for (const auto& sp : topo.subproblems) {
          const Candidate* c = beams[sp.hash].best_correct();
          double ms = last.runtime_ms.count(sp.name) ? last.runtime_ms.at(sp.name) : 0;
          table += fmt::format("- {}: {:.3f}x vs torch.compile, {:.4g} ms, {:.0f}% of end-to-end time\n", sp.name,
                               c ? c->reward : 0.0, ms, total_ms > 0 ? 100 * ms / total_ms : 0.0);
        }
        auto r = llm_refine(ctx, problem, topo, "fuse", {}, table, t, ctx.sink);
        if (r) {
          topo = std::move(*r);
          reason = "fuse";
        } else {
          emit(ctx, {{"type", "topology"}, {"iteration", t}, {"reason", "fuse_declined"},
                     {"detail", "kept the previous structure"}});
        }
      }
    }
    if (refine && last.attempted && !last.e2e_correct && !topo.monolithic) {
      // Every subkernel passed locally but the composition failed: fall back
      // to the monolithic problem (TotalFuse).
      topo = Topology::wrap_original(problem);
      topo.origin = "total_fuse";
      reason = "total_fuse";
    }
    // FilterKernels / InitEmptyKernels: beams are keyed by subproblem content,
    // so kernels survive exactly for unchanged subproblems.
    std::map<std::string, BeamState> kept;
    for (const auto& sp : topo.subproblems) kept[sp.hash] = beams.count(sp.hash) ? beams[sp.hash] : BeamState{};
    beams = std::move(kept);
    if (!reason.empty()) {
      auto d = problem::diff(before, topo);
      emit(ctx, {{"type", "topology"}, {"iteration", t}, {"reason", reason}, {"diff", d.to_json()},
                 {"subproblems", topo.names()}});
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

    // AllocateLLMBudget.
    std::vector<bool> needs_work;
    std::vector<double> runtime;
    for (const auto& sp : topo.subproblems) {
      const BeamState& b = beams[sp.hash];
      needs_work.push_back(!b.best_correct());
      double ms = 0;
      if (last.runtime_ms.count(sp.name)) ms = last.runtime_ms.at(sp.name);
      else if (b.best_correct() && b.best_correct()->result.runtime.valid) ms = b.best_correct()->result.runtime.median_ms;
      runtime.push_back(ms);
    }
    auto budget = allocate_budget(o.calls_per_iter, needs_work, runtime);
    nlohmann::json alloc = nlohmann::json::object();
    for (size_t i = 0; i < budget.size(); ++i) alloc[topo.subproblems[i].name] = budget[i];
    emit(ctx, {{"type", "budget"}, {"iteration", t}, {"allocation", alloc},
               {"rule", std::find(needs_work.begin(), needs_work.end(), true) != needs_work.end() ? "even"
                                                                                                 : "runtime"}});

    // LLMEvolveKernel for every subproblem, concurrently; events in subproblem order.
    {
      std::vector<std::unique_ptr<BufferedSink>> bufs;
      std::vector<std::future<BeamState>> futs;
      for (size_t i = 0; i < topo.subproblems.size(); ++i) {
        const Subproblem& sp = topo.subproblems[i];
        bufs.push_back(std::make_unique<BufferedSink>(ctx.sink));
        KernelTask task{sp.name, subproblem_file(ctx, sp), sp.source, std::nullopt, "generate", false};
        BeamState start = beams[sp.hash];
        BufferedSink* buf = bufs.back().get();
        int b = budget[i];
        futs.push_back(std::async(std::launch::async, [&ctx, task, start, b, t, buf]() mutable {
          return evolve_kernel(ctx, task, std::move(start), b, t, buf);
        }));
      }
      for (size_t i = 0; i < futs.size(); ++i) {
        beams[topo.subproblems[i].hash] = futs[i].get();
        bufs[i]->flush();
      }
    }

    // Evaluate: compose the best subkernels and verify end to end.
    std::map<std::string, std::string> kernels;
    std::map<std::string, nlohmann::json> local;
    std::vector<std::string> missing;
    for (const auto& sp : topo.subproblems) {
      const BeamState& b = beams[sp.hash];
      if (b.best()) local[sp.name] = b.best()->summary();
      if (const Candidate* c = b.best_correct()) kernels[sp.name] = c->source;
      else missing.push_back(sp.name);
    }
    Solution cur;
    cur.method = o.method;
    cur.topology = topo;
    cur.kernels = kernels;
    cur.local = local;
    cur.iteration = t;
    last = LastEval{};
    nlohmann::json e2e_json = {{"attempted", false}, {"missing", missing}};
    if (missing.empty() && !ctx.should_stop()) {
      cur.e2e = evaluate_composed(ctx, problem, topo, kernels, ctx.workspace / "e2e" / fmt::format("t{}", t), false,
                                  fmt::format("t{}", t));
      cur.correct = cur.e2e.correct();
      cur.speedup = cur.correct ? cur.e2e.speedup_compile : 0;
      last.attempted = true;
      last.e2e_correct = cur.correct;
      const auto& raw = cur.e2e.raw;
      if (raw.is_object() && raw.contains("subkernel_runtime_ms") && raw["subkernel_runtime_ms"].is_object()) {
        for (auto it = raw["subkernel_runtime_ms"].begin(); it != raw["subkernel_runtime_ms"].end(); ++it)
          if (it.value().is_number()) last.runtime_ms[it.key()] = it.value().get<double>();
      } else {
        for (const auto& sp : topo.subproblems) {
          const Candidate* c = beams[sp.hash].best_correct();
          if (c && c->result.runtime.valid) last.runtime_ms[sp.name] = c->result.runtime.median_ms;
        }
      }
      e2e_json = {{"attempted", true}, {"status", eval::to_string(cur.e2e.status)}, {"speedup", cur.speedup}};
    }
    if (cur.speedup >= best.speedup) {
      best = cur;
      emit(ctx, best_event(best));
    }
    nlohmann::json subs = nlohmann::json::array();
    for (const auto& sp : topo.subproblems) {
      const BeamState& b = beams[sp.hash];
      const Candidate* c = b.best_correct();
      nlohmann::json s = {{"name", sp.name},
                          {"correct", c != nullptr},
                          {"speedup", c ? c->reward : 0.0},
                          {"calls", b.calls},
                          {"budget", alloc[sp.name]}};
      if (c && c->result.runtime.valid) s["runtime_ms"] = c->result.runtime.median_ms;
      if (last.runtime_ms.count(sp.name)) s["e2e_runtime_ms"] = last.runtime_ms.at(sp.name);
      if (!c && b.best()) s["status"] = b.best()->evaluated ? eval::to_string(b.best()->result.status) : "no_kernel";
      subs.push_back(s);
    }
    emit(ctx, {{"type", "iteration"},
               {"iteration", t},
               {"method", o.method},
               {"topology_change", reason},
               {"subproblems", subs},
               {"e2e", e2e_json},
               {"speedup", cur.speedup},
               {"best_speedup", best.speedup},
               {"kernel_calls", ctx.acct ? ctx.acct->kernel_calls() : 0},
               {"calls_used", ctx.acct ? ctx.acct->to_json().value("calls", 0) : 0},
               {"tokens", ctx.acct ? ctx.acct->to_json().value("tokens", 0LL) : 0LL}});
  }
  return best;
}

std::optional<Solution> postfuse(SearchContext& ctx, const problem::Problem& problem, const Solution& best) {
  int n = ctx.opts.postfuse;
  if (!best.correct || best.topology.subproblems.size() < 2) {
    emit(ctx, {{"type", "postfuse"}, {"attempts", 0}, {"accepted", false},
               {"detail", !best.correct ? "skipped: no correct modular solution to fuse"
                                        : "skipped: the solution is already a single kernel"}});
    return std::nullopt;
  }
  auto conv = agents::postfuse_prompt(ctx.kernel_context(), problem, best.topology, best.kernels, best.speedup);
  if (!conv) {
    ctx.set_fatal(conv.error());
    return std::nullopt;
  }
  KernelTask task{problem.name, problem.path, problem.source, *conv, "postfuse", false};
  int iteration = ctx.opts.iterations + 1;
  BeamState beam = evolve_kernel(ctx, task, {}, n, iteration, ctx.sink);
  const Candidate* c = beam.best_correct();
  bool accept = c && c->reward > best.speedup;
  emit(ctx, {{"type", "postfuse"}, {"attempts", beam.calls}, {"accepted", accept},
             {"best_speedup", c ? c->reward : 0.0}, {"modular_speedup", best.speedup}});
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
          {"swap_tau", o.swap_tau ? nlohmann::json(*o.swap_tau) : nlohmann::json(nullptr)},
          {"swap_with", o.swap_with},
          {"postfuse", o.postfuse},
          {"decompose_workers", o.decompose_workers},
          {"decompose_attempts", o.decompose_attempts},
          {"refine_attempts", o.refine_attempts},
          {"max_tokens", o.max_tokens},
          {"total_budget", o.total_budget()},
          {"eval",
           {{"trials", o.eval.trials},
            {"perf_trials", o.eval.perf_trials},
            {"warmup", o.eval.warmup},
            {"atol", o.eval.atol},
            {"rtol", o.eval.rtol},
            {"timeout_s", o.eval.timeout_s},
            {"seed", o.eval.seed},
            {"test_cpu", o.eval.test_cpu},
            {"gpu", o.eval.gpu}}}};
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
    if (j.contains("swap_tau") && j["swap_tau"].is_number()) o.swap_tau = j["swap_tau"].get<double>();
    if (j.contains("swap_with") && j["swap_with"].is_object())
      o.swap_with = j["swap_with"].get<std::map<std::string, std::string>>();
    o.postfuse = j.value("postfuse", o.postfuse);
    o.decompose_workers = j.value("decompose_workers", o.decompose_workers);
    o.decompose_attempts = j.value("decompose_attempts", o.decompose_attempts);
    o.refine_attempts = j.value("refine_attempts", o.refine_attempts);
    o.max_tokens = j.value("max_tokens", o.max_tokens);
    if (j.contains("eval")) {
      const auto& e = j["eval"];
      o.eval.trials = e.value("trials", o.eval.trials);
      o.eval.perf_trials = e.value("perf_trials", o.eval.perf_trials);
      o.eval.warmup = e.value("warmup", o.eval.warmup);
      o.eval.atol = e.value("atol", o.eval.atol);
      o.eval.rtol = e.value("rtol", o.eval.rtol);
      o.eval.timeout_s = e.value("timeout_s", o.eval.timeout_s);
      o.eval.seed = e.value("seed", o.eval.seed);
      o.eval.test_cpu = e.value("test_cpu", o.eval.test_cpu);
      o.eval.gpu = e.value("gpu", o.eval.gpu);
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

eval::EvalResult evaluate_composed(SearchContext& ctx, const problem::Problem& problem, const Topology& topo,
                                   const std::map<std::string, std::string>& kernels, const fs::path& dir,
                                   bool allow_pytorch, const std::string& label) {
  problem::SolutionManifest man;
  man.extra = {{"problem", problem.name}, {"problem_hash", problem.hash}};
  auto st = problem::write_solution_package(dir / "solution", topo, kernels, man, /*durable=*/false);
  eval::EvalResult r;
  if (!st) {
    r.status = eval::Status::kCrashed;
    r.kind = "compose_error";
    r.feedback = st.error();
  } else {
    eval::EvalRequest req;
    req.problem = problem.path;
    req.kernel = dir / "solution" / "decomposed_solution.py";
    req.options = ctx.opts.eval;
    req.options.allow_pytorch = allow_pytorch;
    req.task = problem.name;
    r = detail::evaluate(ctx, req);
  }
  int iteration = 0;
  if (label.size() > 1 && label[0] == 't') iteration = std::atoi(label.c_str() + 1);
  emit(ctx, detail::eval_event(problem.name, label, iteration, r, r.correct() ? r.speedup_compile : 0, "e2e"));
  return r;
}

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
    emit(ctx, {{"type", "swap"}, {"triggered", false}, {"tau", tau}, {"reason", why}});
    return std::nullopt;
  };
  if (subs.size() < 2) return skip("fewer than two subkernels");
  bool any_fast = false;
  for (const auto& [n, s] : speed) any_fast = any_fast || s >= 1.0;
  if (!any_fast) return skip("every subkernel is slower than torch.compile");
  Solution s = best;
  nlohmann::json replaced = nlohmann::json::array();
  for (const auto& sp : subs) {
    if (speed[sp.name] >= tau || best.pytorch.count(sp.name)) continue;
    auto alt = ctx.opts.swap_with.find(sp.name);
    if (alt != ctx.opts.swap_with.end()) {
      s.kernels[sp.name] = alt->second;
      replaced.push_back({{"name", sp.name}, {"speedup", speed[sp.name]}, {"with", "user kernel"}});
    } else {
      s.kernels[sp.name] = problem::pytorch_implementation(sp);
      s.pytorch.insert(sp.name);
      replaced.push_back({{"name", sp.name}, {"speedup", speed[sp.name]}, {"with", "pytorch"}});
    }
  }
  if (replaced.empty()) return skip(fmt::format("no subkernel is below tau = {}", tau));
  s.e2e = evaluate_composed(ctx, problem, s.topology, s.kernels, ctx.workspace / "swap", !s.pytorch.empty(), "swap");
  s.correct = s.e2e.correct();
  s.speedup = s.correct ? s.e2e.speedup_compile : 0;
  s.iteration = best.iteration;
  emit(ctx, {{"type", "swap"},
             {"triggered", true},
             {"tau", tau},
             {"replaced", replaced},
             {"before", best.speedup},
             {"after", s.speedup},
             {"correct", s.correct},
             {"contains_pytorch_subkernels", !s.pytorch.empty()}});
  if (!s.correct) return std::nullopt;
  return s;
}

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
  emit(ctx, {{"type", "run_start"},
             {"method", o.method},
             {"problem", problem.name},
             {"problem_hash", problem.hash},
             {"options", to_json(o)},
             {"settings", {{"T", o.iterations}, {"L", o.refine_every}, {"budget_per_iter", o.calls_per_iter},
                           {"beam_width", o.beam_width}, {"max_calls", o.total_budget() + o.postfuse}}},
             {"prompts_version", ctx.prompts ? ctx.prompts->version() : ""},
             {"llm", ctx.llm ? ctx.llm->spec() : ""},
             {"judge", ctx.judge ? ctx.judge->spec() : ""},
             {"hardware", ctx.hardware}});
  Solution best;
  if (o.method == "parallel" || o.method == "beam") {
    best = run_baseline(ctx, problem);
  } else if (o.method == "mkevolve" || o.method == "single-split") {
    best = run_mkevolve(ctx, problem);
  } else {
    res.status = "error";
    res.error = fmt::format("unknown method '{}': use parallel, beam, mkevolve or single-split", o.method);
    emit(ctx, {{"type", "run_end"}, {"status", res.status}, {"error", res.error}});
    return res;
  }
  if (o.postfuse > 0 && !ctx.should_stop()) {
    if (auto pf = postfuse(ctx, problem, best)) {
      best = std::move(*pf);
      emit(ctx, best_event(best));
    }
  }
  if (o.swap_tau && !ctx.should_stop()) {
    if (auto sw = swap_subkernels(ctx, problem, best, *o.swap_tau); sw && (!best.correct || sw->speedup >= best.speedup)) {
      best = std::move(*sw);
      emit(ctx, best_event(best));
    }
  }
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
  nlohmann::json end = {{"type", "run_end"},
                        {"status", res.status},
                        {"best_speedup", best.speedup},
                        {"correct", best.correct},
                        {"contains_pytorch_subkernels", !best.pytorch.empty()},
                        {"solution", best.to_json()},
                        {"accounting", res.accounting}};
  if (!res.error.empty()) end["error"] = res.error;
  emit(ctx, end);
  return res;
}

}  // namespace mk::search
