#include <algorithm>
#include <cmath>
#include <fstream>
#include <future>

#include <fmt/format.h>

#include "agents/reply.h"
#include "eval/shapes.h"
#include "records/events.h"
#include "search/internal.h"
#include "search/search.h"

#include <chrono>
#include <thread>
#include "util/fs.h"

namespace mk::search {

// ---- context and accounting ------------------------------------------------

int SearchContext::reserve_samples(const std::string& stream, int n) {
  std::lock_guard<std::mutex> lk(mu_);
  int base = samples_[stream];
  samples_[stream] = base + n;
  return base;
}

void SearchContext::set_fatal(const std::string& message) {
  std::lock_guard<std::mutex> lk(mu_);
  if (fatal_.empty()) fatal_ = message;
}

void SearchContext::request_stop() {
  if (stop) stop->store(true);
  else set_fatal("interrupted");
}

bool SearchContext::should_stop() const {
  if (stop && stop->load()) return true;
  std::lock_guard<std::mutex> lk(mu_);
  return !fatal_.empty();
}

std::string SearchContext::fatal_message() const {
  std::lock_guard<std::mutex> lk(mu_);
  return fatal_;
}

void AgentAccounting::add(const agents::CallRecord& c) {
  std::lock_guard<std::mutex> lk(mu_);
  auto& e = by_agent_[c.agent];
  e.first += 1;
  e.second += c.usage;
}

int AgentAccounting::calls(const std::string& agent) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_agent_.find(agent);
  return it == by_agent_.end() ? 0 : it->second.first;
}

int AgentAccounting::kernel_calls() const {
  std::lock_guard<std::mutex> lk(mu_);
  int n = 0;
  for (const auto& [agent, e] : by_agent_)
    if (records::is_kernel_agent(agent)) n += e.first;
  return n;
}

int AgentAccounting::calls() const {
  std::lock_guard<std::mutex> lk(mu_);
  int n = 0;
  for (const auto& [agent, e] : by_agent_) n += e.first;
  return n;
}

int64_t AgentAccounting::tokens() const {
  std::lock_guard<std::mutex> lk(mu_);
  llm::Usage total;
  for (const auto& [agent, e] : by_agent_) total += e.second;
  return total.total();
}

nlohmann::json AgentAccounting::to_json() const {
  std::lock_guard<std::mutex> lk(mu_);
  nlohmann::json j = nlohmann::json::object();
  llm::Usage total;
  int calls = 0;
  for (const auto& [agent, e] : by_agent_) {
    j[agent] = {{"calls", e.first},
                {"input", e.second.input},
                {"output", e.second.output},
                {"cache_read", e.second.cache_read},
                {"cache_write", e.second.cache_write},
                {"estimated", e.second.estimated}};
    total += e.second;
    calls += e.first;
  }
  return {{"by_agent", j},
          {"calls", calls},
          {"tokens", total.total()},
          {"input", total.input},
          {"output", total.output},
          {"estimated", total.estimated}};
}

// ---- events ----------------------------------------------------------------

namespace detail {

nlohmann::json timed_result_json(const eval::Verdict& r) {
  nlohmann::json j = result_json(r);
  // Diagnostics for files only (events stay free of wall-clock times, so a
  // replayed run logs the same events): where the evaluation's time went.
  if (r.eval_s > 0) {
    j["queued_s"] = r.queued_s;
    j["eval_s"] = r.eval_s;
    if (r.server_start_s > 0) j["server_start_s"] = r.server_start_s;
  }
  if (auto phases = r.worker_checks().phases_s; !phases.is_null()) j["phases_s"] = phases;
  return j;
}

nlohmann::json result_json(const eval::Verdict& r) {
  eval::Verdict s = r;
  s.feedback = agents::trim_text(r.feedback, 10, 10, 2000);
  return eval::summary_json(std::move(s));
}

records::LlmCall llm_event(const agents::CallRecord& c, int iteration, std::optional<int> round,
                           const std::string& candidate) {
  records::LlmCall l;
  l.agent = c.agent;
  l.task = c.task;
  l.usage = {c.usage.input, c.usage.output, c.usage.cache_read, c.usage.cache_write, c.usage.estimated};
  l.cached = c.from_cache;
  l.truncated = c.truncated;
  l.ok = c.ok;
  l.error = c.error;
  // A measurement, like the run directory's timestamps: a resume matches
  // events by what they are (RunSink), never by their times.
  l.latency_ms = static_cast<int64_t>(std::llround(c.latency_s * 1000));
  l.round = round;
  l.candidate = candidate;
  l.sample = c.sample;
  l.iteration = iteration;
  l.model = c.model;
  return l;
}

records::Eval eval_event(const std::string& task, const std::string& candidate, int iteration,
                          const eval::Verdict& r, double reward, const std::string& scope) {
  records::Eval e;
  e.task = task;
  e.candidate = candidate;
  e.status = eval::to_string(r.status);
  e.kind = r.kind;
  if (r.correct()) {
    e.speedup_compile = r.speedup_compile;
    e.speedup_eager = r.speedup_eager;
  }
  if (r.runtime.valid) e.runtime_ms = r.runtime.median_ms;
  if (r.compiled_tf32.valid) {  // --baseline-tf32
    e.compile_tf32_ms = r.compiled_tf32.median_ms;
    if (r.correct() && r.speedup_compile_tf32 > 0) e.speedup_compile_tf32 = r.speedup_compile_tf32;
  }
  e.uses_pytorch = r.uses_pytorch;
  e.e2e = scope == "e2e";
  // Where the evaluation's time went (critical_path.h); measured only by an
  // evaluator that times itself, and never for a cached verdict.
  if (r.eval_s > 0) {
    e.queued_s = r.queued_s;
    e.eval_s = r.eval_s;
    e.baseline_s = r.baseline_s;
    if (r.server_start_s > 0) e.server_start_s = r.server_start_s;
  }
  e.scope = scope;
  e.iteration = iteration;
  e.reward = reward;
  e.cached = r.cached;
  return e;
}

records::TopologyChange topology_event(int iteration, const std::string& reason, const problem::Topology& topo,
                              const std::map<std::string, std::string>& status, const std::string& detail,
                              const std::vector<std::string>& from, const std::vector<std::string>& into) {
  records::TopologyChange t;
  t.iteration = iteration;
  t.change = reason == "decompose"                                   ? "initial"
             : reason == "total_fuse"                                ? "totalfuse"
             : (reason == "split_failed" || reason == "fuse_declined") ? "unchanged"
                                                                       : reason;
  for (const auto& sp : topo.subproblems) {
    auto it = status.find(sp.name);
    t.subproblems.push_back({sp.name, it == status.end() ? "new" : it->second});
  }
  t.detail = detail;
  t.from = from;
  t.into = into;
  t.reason = reason;
  return t;
}

agents::Exchange call(SearchContext& ctx, llm::Provider& llm, const agents::Conversation& conv,
                      const std::string& agent, const std::string& task, int sample, int iteration,
                      std::vector<records::Event>* events, std::optional<int> round, const std::string& candidate) {
  if (ctx.sink) ctx.sink->progress(records::LlmStart{.agent = agent, .task = task, .sample = sample});
  // The effort is for the agents that write and restructure code; the judge's review is short.
  std::string effort = agent == "judge" ? std::string() : ctx.opts.reasoning_effort;
  auto ex = agents::call_llm(llm, conv, agent, task, sample, ctx.gate, ctx.opts.max_tokens, effort);
  if (ex.call.cancelled) {
    // Cut short by Ctrl-C: stop the search at once, as interrupted (the stop
    // flag's own watcher may notice the interrupt only later, and until then
    // every further call would fail instantly and burn the budget). The call
    // is neither counted nor logged: a resumed run makes it for real.
    ctx.request_stop();
    return ex;
  }
  if (ctx.acct) ctx.acct->add(ex.call);
  if (ex.call.fatal) ctx.set_fatal(fmt::format("LLM call for {} ({}) failed: {}", task, agent, ex.call.error));
  const records::LlmCall ev = llm_event(ex.call, iteration, round, candidate);
  if (events) events->push_back(ev);
  if (ctx.sink) {
    // Live progress only, under its own type: the durable llm_call record is
    // the one in `events`, logged once with the job's other events (a second
    // llm_call here made --events-json and the status line count every call twice).
    ctx.sink->progress(records::LlmDone(ev));
  }
  return ex;
}

eval::Verdict evaluate(SearchContext& ctx, eval::EvalRequest req) {
  if (ctx.sink) ctx.sink->progress(records::EvalStart{.task = req.task});
  eval::Verdict r;
  try {
    r = ctx.evaluator->evaluate(std::move(req));
  } catch (const std::exception& e) {
    r = {};
    r.status = eval::VerdictStatus::kCrashed;
    r.kind = "evaluator_error";
    r.feedback = std::string("the evaluator failed: ") + e.what();
  }
  if (!r.correct()) {
    r.speedup_compile = 0;
    r.speedup_eager = 0;
  }
  if (ctx.sink) ctx.sink->progress(records::EvalDone{.status = eval::to_string(r.status)});
  return r;
}

std::string safe_name(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  return out;
}

}  // namespace detail

// ---- candidates --------------------------------------------------------------

nlohmann::json Candidate::summary() const {
  nlohmann::json j = {{"id", id},       {"task", task},       {"agent", agent}, {"iteration", iteration},
                      {"sample", sample}, {"parent", parent}, {"reward", reward}};
  if (evaluated) j["result"] = detail::result_json(result);
  if (!reply_error.empty()) j["reply_error"] = reply_error;
  return j;
}

namespace {

int progress_rank(const Candidate& c) {
  if (!c.evaluated) return 0;
  switch (c.result.status) {
    case eval::VerdictStatus::kCorrect: return 6;
    case eval::VerdictStatus::kIncorrect: return 5;
    case eval::VerdictStatus::kRuntimeError: return 4;
    case eval::VerdictStatus::kTimeout: return 3;
    case eval::VerdictStatus::kCrashed: return 3;
    case eval::VerdictStatus::kCompileError: return 2;
    case eval::VerdictStatus::kCheating: return 1;
    case eval::VerdictStatus::kNoVerdict: return 0;
  }
  return 0;
}

}  // namespace

bool better(const Candidate& a, const Candidate& b) {
  if (a.reward != b.reward) return a.reward > b.reward;
  // Without a torch.compile baseline (a torch without it, or a compile past
  // its deadline) every reward is 0: the eager speedup still orders them.
  // One subproblem's candidates share their baselines, so this changes no
  // order where torch.compile's figure exists.
  if (a.correct() && b.correct() && a.result.speedup_eager != b.result.speedup_eager)
    return a.result.speedup_eager > b.result.speedup_eager;
  int ra = progress_rank(a), rb = progress_rank(b);
  if (ra != rb) return ra > rb;
  if (a.iteration != b.iteration) return a.iteration > b.iteration;
  if (a.sample != b.sample) return a.sample > b.sample;
  return a.id < b.id;
}

namespace detail {

int rounds_left(int remaining, int members, int width, int expansion) {
  if (remaining <= 0) return 0;
  width = std::max(1, width);
  expansion = std::max(1, expansion);
  int first = members > 0 ? std::min(remaining, std::min(members, width) * expansion) : std::min(width, remaining);
  int rest = remaining - first;
  return 1 + (rest + width * expansion - 1) / (width * expansion);
}

JudgeAnswer ask_judge(SearchContext& ctx, const std::string& problem_source, const std::string& kernel,
                      const std::string& task, const std::string& candidate, int iteration, int round,
                      std::vector<records::Event>& events) {
  auto jc = agents::judge_prompt(*ctx.prompts, problem_source, kernel);
  if (!jc) return {"none", ""};  // no judge prompt: nothing was asked
  // Each try is one logged, counted call; the provider retried each already.
  agents::Exchange jex;
  for (int k = 0; k < std::max(1, ctx.opts.judge_attempts) && !ctx.should_stop(); ++k) {
    int js = ctx.reserve_samples("judge:" + task, 1);
    jex = detail::call(ctx, *ctx.judge, *jc, "judge", task, js, iteration, &events, round, candidate);
    if (jex.call.ok || jex.call.cancelled || jex.call.fatal) break;
  }
  if (jex.call.cancelled) return {"none", ""};
  if (!jex.call.ok) return {"failed", jex.call.error};
  auto v = agents::parse_verdict(jex.reply);
  if (!v) return {"unparseable", v.error()};
  return {v->cheating ? "cheat" : "pass", v->reason};
}

void judged_cheating(eval::Verdict& r, const std::string& reason) {
  r.status = eval::VerdictStatus::kCheating;
  r.kind = "judge";
  r.reasons.push_back("cheat judge: " + reason);
  r.feedback = "An LLM reviewer judged this kernel to be cheating: " + reason;
  r.speedup_compile = r.speedup_eager = 0;
}

void evaluate_source(SearchContext& ctx, const KernelTask& task, Candidate& c, CandidateRecord& rec,
                     std::vector<records::Event>& events, int iteration, bool judge, int round, int priority) {
  fs::path file = ctx.workspace / "candidates" / detail::safe_name(task.task) / (c.id + ".py");
  if (auto st = problem::write_file_plain(file, c.source); !st) {
    // This machine's failure (a full disk, say), never the candidate's: no
    // verdict, and the run stops so that it can be resumed once there is room.
    // The reply is in the LLM cache, so the resume does not pay for it again.
    // Nothing was evaluated, so nothing of this job is logged, its LLM call
    // included: the resume redoes the job, its reply served from the cache
    // (as after a kill between the call and its verdict).
    events.clear();
    ctx.set_fatal(st.error() + "; free space (or fix the directory), then resume");
    c.result.status = eval::VerdictStatus::kNoVerdict;
    c.result.kind = "io_error";
    c.result.feedback = st.error();
    c.no_verdict = true;
    return;
  } else {
    eval::EvalRequest req;
    req.problem = task.problem_file;
    req.kernel = file;
    req.options = ctx.opts.eval;
    req.options.shapes = eval::candidate_shapes(req.options.shapes);  // search: every candidate at the variants
    req.options.allow_pytorch = task.allow_pytorch;
    req.options.input_layouts = task.input_layouts;
    req.task = task.task;
    req.priority = priority;
    c.result = detail::evaluate(ctx, req);
    // No verdict: the harness failed (the pool already retried it). Try again
    // later; it is never this candidate's failure.
    double wait = ctx.opts.no_verdict_wait_s;
    // (A pass that overran even alone, pass_overrun, would overrun again: no
    // verdict, never charged, not asked for again.)
    for (int k = 0; k < 3 && c.result.status == eval::VerdictStatus::kNoVerdict && c.result.kind != "too_large" &&
                    c.result.kind != "pass_overrun";
         ++k) {
      for (double waited = 0; waited < wait && !ctx.should_stop(); waited += 0.1)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (ctx.should_stop()) break;
      c.result = detail::evaluate(ctx, req);
      wait *= 3;
    }
  }
  c.evaluated = true;
  c.no_verdict = c.result.status == eval::VerdictStatus::kNoVerdict;

  if (judge && ctx.judge && c.result.correct()) {
    JudgeAnswer a = ask_judge(ctx, task.problem_source, c.source, task.task, c.id, iteration, round, events);
    if (a.verdict == "failed") {
      bool hold = ctx.opts.judge_failure != "pass";
      events.push_back(records::Judge{c.task, c.id, iteration, "failed", a.reason, hold ? "hold" : "pass"});
      if (hold) {
        // Not judged is not passed: the candidate has no verdict yet.
        c.result.status = eval::VerdictStatus::kNoVerdict;
        c.result.kind = "judge_failed";
        c.result.feedback = "the cheat judge could not be asked: " + a.reason;
        c.result.speedup_compile = c.result.speedup_eager = 0;
        c.no_verdict = true;
      }
    } else if (a.decided()) {
      if (a.verdict == "cheat") judged_cheating(c.result, a.reason);
      events.push_back(records::Judge{c.task, c.id, iteration, a.verdict, a.reason, ""});
    }
  }
  c.reward = c.result.correct() ? c.result.speedup_compile : 0;
  events.push_back(detail::eval_event(c.task, c.id, iteration, c.result, c.reward, "local"));
  rec.files["kernel.py"] = c.source;
  rec.result = detail::timed_result_json(c.result);
  rec.result["reward"] = c.reward;  // the search's, beside the verdict
  if (ctx.sink) ctx.sink->store_candidate(rec);
}


}  // namespace detail

namespace {

struct Job {
  agents::Conversation conv;
  std::string agent;
  std::string parent;
  int sample = 0;
  int round = 0;     ///< the beam round it belongs to (its llm_call events say so)
  int priority = 0;  ///< its evaluation's: the rounds its subproblem has left (rounds_left)
};

struct JobOut {
  Candidate cand;
  std::vector<records::Event> events;
};

JobOut run_job(SearchContext& ctx, const KernelTask& task, const Job& job, int iteration) {
  JobOut out;
  Candidate& c = out.cand;
  c.task = task.task;
  c.agent = job.agent;
  c.parent = job.parent;
  c.iteration = iteration;
  c.sample = job.sample;
  c.id = fmt::format("{}-s{}", detail::safe_name(task.task), job.sample);
  c.conversation = job.conv;

  CandidateRecord rec;
  rec.id = c.id;
  rec.task = c.task;
  rec.agent = c.agent;
  rec.iteration = iteration;
  rec.sample = c.sample;

  auto ex = detail::call(ctx, *ctx.llm, job.conv, job.agent, task.task, job.sample, iteration, &out.events,
                         job.round, c.id);
  if (ex.call.cancelled) {
    // Interrupted: nothing to log or store; a resumed run makes this call for real.
    c.reply_error = "LLM call cancelled (interrupted)";
    return out;
  }
  if (!ex.call.ok) {
    c.reply_error = "LLM call failed: " + ex.call.error;
    rec.result = {{"status", "llm_error"}, {"error", ex.call.error}};
    out.events.push_back(records::ReplyError{c.task, c.agent, iteration, c.reply_error, c.id});
    if (ctx.sink) ctx.sink->store_candidate(rec);
    return out;
  }
  auto parsed = agents::parse_kernel_reply(ex.reply);
  if (!parsed) {
    c.reply_error = parsed.error();
    c.raw_reply = ex.reply;
    rec.files["reply.md"] = ex.reply;
    rec.result = {{"status", "unparseable"}, {"error", parsed.error()}};
    out.events.push_back(records::ReplyError{c.task, c.agent, iteration, c.reply_error, c.id});
    if (ctx.sink) ctx.sink->store_candidate(rec);
    return out;
  }
  c.source = *parsed;
  c.raw_reply = ex.reply;
  detail::evaluate_source(ctx, task, c, rec, out.events, iteration, true, job.round, job.priority);
  return out;
}

/// Runs jobs concurrently (LLM calls bounded by ctx.gate), returns results by
/// index and emits their events in index order.
std::vector<Candidate> run_jobs(SearchContext& ctx, const KernelTask& task, const std::vector<Job>& jobs,
                                int iteration, EventSink* sink) {
  constexpr size_t kMaxThreads = 64;
  std::vector<Candidate> out;
  for (size_t start = 0; start < jobs.size(); start += kMaxThreads) {
    size_t end = std::min(jobs.size(), start + kMaxThreads);
    std::vector<std::future<JobOut>> futs;
    for (size_t i = start; i < end; ++i)
      futs.push_back(std::async(std::launch::async, [&, i] { return run_job(ctx, task, jobs[i], iteration); }));
    for (auto& f : futs) {
      JobOut o = f.get();
      if (sink)
        for (const auto& e : o.events) sink->emit(e);
      out.push_back(std::move(o.cand));
    }
  }
  return out;
}

Job next_job(SearchContext& ctx, const KernelTask& task, const Candidate& m, int sample) {
  Job j;
  j.parent = m.id;
  j.sample = sample;
  if (m.source.empty()) {
    j.agent = m.agent;
    if (!m.raw_reply.empty()) {
      auto msg = agents::reask_message(*ctx.prompts, m.reply_error, agents::kKernelFormatHint);
      j.conv = m.conversation.followed_by(m.raw_reply, msg ? *msg : m.reply_error);
    } else {
      j.conv = m.conversation;  // the call itself failed: ask again
    }
    return j;
  }
  auto k = ctx.kernel_context();
  const std::string inputs = agents::inputs_text(task.input_layouts);
  Result<agents::Conversation> conv = m.correct()
                                          ? agents::optimize_prompt(k, task.problem_source, m.source, m.result, inputs)
                                          : agents::debug_prompt(k, task.problem_source, m.source, m.result, inputs);
  j.agent = m.correct() ? "optimize" : "debug";
  if (!conv) {
    ctx.set_fatal(conv.error());
    return j;
  }
  j.conv = *conv;
  return j;
}

}  // namespace

BeamState evolve_kernel(SearchContext& ctx, const KernelTask& task, BeamState beam, int budget, int iteration,
                        EventSink* sink) {
  beam.rounds_run = 0;
  const int width = std::max(1, ctx.opts.beam_width);
  const int expansion = std::max(1, ctx.opts.expansion);
  int remaining = budget;
  for (int round = 0; remaining > 0 && !ctx.should_stop(); ++round) {
    std::vector<Job> jobs;
    if (beam.members.empty()) {
      int n = std::min(width, remaining);
      int base = ctx.reserve_samples(task.task, n);
      agents::Conversation conv;
      if (task.initial) {
        conv = *task.initial;
      } else {
        auto g = agents::generate_prompt(ctx.kernel_context(), task.problem_source,
                                         agents::inputs_text(task.input_layouts));
        if (!g) {
          ctx.set_fatal(g.error());
          break;
        }
        conv = *g;
      }
      for (int i = 0; i < n; ++i) jobs.push_back({conv, task.initial_agent, "", base + i, round});
    } else {
      int n = std::min(remaining, static_cast<int>(beam.members.size()) * expansion);
      int base = ctx.reserve_samples(task.task, n);
      for (int i = 0; i < n; ++i) {
        jobs.push_back(next_job(ctx, task, beam.members[i / expansion], base + i));
        jobs.back().round = round;
      }
      if (ctx.should_stop()) break;
    }
    const int left = detail::rounds_left(remaining, static_cast<int>(beam.members.size()), width, expansion);
    for (auto& j : jobs) j.priority = left;
    auto children = run_jobs(ctx, task, jobs, iteration, sink);
    remaining -= static_cast<int>(jobs.size());
    beam.calls += static_cast<int>(jobs.size());
    // Candidates without a verdict stay out of the beam (no reward of 0, no
    // debug prompt) and their calls are given back to the budget, as long as
    // the round got some verdict: a harness that answers nothing stops the run.
    int no_verdict = 0;
    std::string why;
    for (const auto& c : children)
      if (c.no_verdict) {
        ++no_verdict;
        why = c.result.feedback;
      }
    if (no_verdict > 0 && no_verdict == static_cast<int>(children.size())) {
      ctx.set_fatal(fmt::format("no evaluation of {} gave a verdict (the evaluator failed, not the candidates): {}",
                                task.task, why));
      break;
    }
    remaining += no_verdict;
    for (auto& c : children)
      if (!c.no_verdict) beam.members.push_back(std::move(c));
    beam.apply_rejected();  // sorts the members
    if (static_cast<int>(beam.members.size()) > width) beam.members.resize(width);
    beam.rounds_run = round + 1;
  }
  return beam;
}

void judge_after_beam(SearchContext& ctx, const KernelTask& task, BeamState& beam, int iteration, EventSink* sink) {
  std::vector<records::Event> events;
  while (const Candidate* c = beam.best_correct()) {
    if (beam.judge_passed.count(c->source) || ctx.should_stop()) break;
    const std::string id = c->id, source = c->source;
    auto a = detail::ask_judge(ctx, task.problem_source, source, task.task, id, iteration, beam.rounds_run, events);
    if (!a.decided()) break;
    records::Judge j{task.task, id, iteration, a.verdict, a.reason, ""};
    j.stage = "after_beam";
    if (a.verdict == "failed") j.policy = "kept";
    events.push_back(j);
    if (a.verdict == "cheat") {
      eval::Verdict v = c->result;
      detail::judged_cheating(v, a.reason);
      beam.rejected[source] = v;
      beam.apply_rejected();
      continue;  // the next correct member gets the same look
    }
    // Passed (an unparseable verdict passes, as on entry), or the judge could
    // not be asked: the member was judged on entry, so it stays (METHOD.md).
    if (a.verdict != "failed") beam.judge_passed.insert(source);
    break;
  }
  if (sink)
    for (const auto& e : events) sink->emit(e);
}

void BeamState::apply_rejected() {
  for (auto& m : members) {
    auto it = rejected.find(m.source);
    if (it == rejected.end() || !m.correct()) continue;
    m.result = it->second;
    m.reward = 0;
  }
  std::stable_sort(members.begin(), members.end(), better);
}

std::vector<Candidate> parallel_sampling(SearchContext& ctx, const KernelTask& task, int budget, int iteration,
                                         EventSink* sink) {
  auto g = agents::generate_prompt(ctx.kernel_context(), task.problem_source, agents::inputs_text(task.input_layouts));
  if (!g) {
    ctx.set_fatal(g.error());
    return {};
  }
  if (ctx.should_stop() || budget <= 0) return {};
  int base = ctx.reserve_samples(task.task, budget);
  std::vector<Job> jobs;
  for (int i = 0; i < budget; ++i) jobs.push_back({*g, "generate", "", base + i, 0});
  std::vector<Candidate> all = run_jobs(ctx, task, jobs, iteration, sink);
  std::stable_sort(all.begin(), all.end(), better);
  return all;
}

std::vector<int> allocate_budget(int total, const std::vector<bool>& needs_work, const std::vector<double>& runtime_ms) {
  size_t n = needs_work.size();
  std::vector<int> out(n, 0);
  if (n == 0 || total <= 0) return out;
  std::vector<double> weight(n, 0);
  bool any_work = std::find(needs_work.begin(), needs_work.end(), true) != needs_work.end();
  if (any_work) {
    for (size_t i = 0; i < n; ++i) weight[i] = needs_work[i] ? 1 : 0;
  } else {
    double sum = 0;
    for (size_t i = 0; i < n; ++i) {
      weight[i] = i < runtime_ms.size() && runtime_ms[i] > 0 ? runtime_ms[i] : 0;
      sum += weight[i];
    }
    if (sum <= 0) std::fill(weight.begin(), weight.end(), 1.0);
  }
  double wsum = 0;
  for (double w : weight) wsum += w;
  // Largest remainder: floors first, then the largest fractions (ties: lower index).
  std::vector<std::pair<double, size_t>> frac;
  int given = 0;
  for (size_t i = 0; i < n; ++i) {
    double exact = total * weight[i] / wsum;
    out[i] = static_cast<int>(exact);
    given += out[i];
    if (weight[i] > 0) frac.push_back({exact - out[i], i});
  }
  std::stable_sort(frac.begin(), frac.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < total; k = (k + 1) % frac.size()) {
    out[frac[k].second] += 1;
    ++given;
  }
  return out;
}

}  // namespace mk::search
