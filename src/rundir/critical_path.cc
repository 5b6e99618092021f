#include "rundir/critical_path.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "rundir/clock.h"
#include "records/events.h"
#include "util/json_fields.h"

namespace mk::rundir {

namespace {

using nlohmann::json;

json num_or_null(const std::optional<double>& v) {
  return v ? json(std::round(*v * 1000) / 1000) : json(nullptr);
}
double r3(double v) { return std::round(v * 1000) / 1000; }

json path_json(const PathTimes& p, std::optional<double> other) {
  return {{"llm_s", r3(p.llm_s)},       {"verify_s", r3(p.verify_s)},     {"queued_s", r3(p.queued_s)},
          {"eval_s", r3(p.eval_s)},     {"baseline_s", r3(p.baseline_s)}, {"e2e_s", r3(p.e2e_s)},
          {"other_s", num_or_null(other)}};
}

/// One LLM call, as its llm_call event places it.
struct Call {
  std::optional<double> latency_s;
  std::optional<int> round;
  std::string agent, task, candidate;
  int sample = 0;
};

/// A kernel job: its LLM calls (the kernel call, then any judge calls) and its evaluation.
struct Job {
  double llm_s = 0;
  bool has_call = false;
  double queued_s = 0, eval_s = 0, baseline_s = 0;
  double duration() const { return llm_s + queued_s + eval_s; }
};

/// A phase's events, grouped the way its chains run.
struct PhaseData {
  bool unknown = false;                                       ///< a call without round or latency
  std::map<int, std::vector<Call>> decompose, refine;         ///< by round
  std::map<std::string, std::map<int, std::map<std::string, Job>>> tasks;  ///< task -> round -> candidate -> job
  std::map<std::pair<std::string, int>, double> verify_s;    ///< (agent, sample) -> the check's seconds
  double e2e_s = 0;
  double wall_s = 0;
  bool any = false;
};

bool is_post_type(const std::string& t) {
  return t == records::kPostfuse || t == records::kSwap || t == records::kSwapSkipped || t == records::kSwapRejected ||
         t == records::kFinalCheck || t == records::kRunEnd;
}

/// Decomposition or split/fuse rounds: each round as long as its slowest worker
/// (its call, then its check). Adds the LLM-only length to *llm and the path
/// (the slowest worker's call and check) to *path; returns the rounds.
int structural_rounds(const std::map<int, std::vector<Call>>& rounds, const PhaseData& d, double* llm,
                      PathTimes* path) {
  int n = 0;
  for (const auto& [r, calls] : rounds) {
    double llm_max = 0, best = -1, best_llm = 0, best_verify = 0;
    for (const auto& c : calls) {
      double lat = c.latency_s.value_or(0);
      auto v = d.verify_s.find({c.agent, c.sample});
      double ver = v == d.verify_s.end() ? 0 : v->second;
      llm_max = std::max(llm_max, lat);
      if (lat + ver > best) {
        best = lat + ver;
        best_llm = lat;
        best_verify = ver;
      }
    }
    *llm += llm_max;
    path->llm_s += best_llm;
    path->verify_s += best_verify;
    ++n;
  }
  return n;
}

}  // namespace

PathTimes& PathTimes::operator+=(const PathTimes& o) {
  llm_s += o.llm_s;
  verify_s += o.verify_s;
  queued_s += o.queued_s;
  eval_s += o.eval_s;
  baseline_s += o.baseline_s;
  e2e_s += o.e2e_s;
  return *this;
}

json PhaseTime::to_json() const {
  std::optional<double> other;
  if (wall_s) other = *wall_s - path.sum();
  return {{"iteration", iteration}, {"label", label},        {"rounds", rounds}, {"llm_s", num_or_null(llm_s)},
          {"wall_s", num_or_null(wall_s)}, {"path", path_json(path, other)}};
}

std::optional<double> TimeAccount::ratio() const {
  if (!wall_s || !llm_s || *llm_s <= 0) return std::nullopt;
  return *wall_s / *llm_s;
}

std::optional<double> TimeAccount::other_s() const {
  if (!wall_s) return std::nullopt;
  return *wall_s - path.sum();
}

json TimeAccount::to_json() const {
  json ph = json::array();
  for (const auto& p : phases) ph.push_back(p.to_json());
  auto ra = ratio();
  return {{"wall_s", num_or_null(wall_s)},
          {"critical_path", {{"rounds", rounds}, {"llm_s", num_or_null(llm_s)}}},
          {"ratio", ra ? json(std::round(*ra * 1000) / 1000) : json(nullptr)},
          {"path", path_json(path, other_s())},
          {"phases", ph}};
}

std::string TimeAccount::line() const {
  auto secs = [](std::optional<double> v) { return v ? fmt::format("{:.1f} s", *v) : std::string("—"); };
  std::string s = "time: wall " + secs(wall_s) + "; LLM critical path ";
  if (llm_s) s += fmt::format("{} round{}, {}", rounds, rounds == 1 ? "" : "s", secs(llm_s));
  else s += "— (some llm_call events carry no round or latency)";
  auto ra = ratio();
  s += "; wall / critical path " + (ra ? fmt::format("{:.2f}", *ra) : std::string("—"));
  if (wall_s) {
    s += fmt::format(
        "; besides its LLM calls the path spent: evaluating candidates {:.1f} s, waiting for a slot {:.1f} s, "
        "baselines {:.1f} s, end-to-end evaluations {:.1f} s, decomposition checks {:.1f} s, other {:.1f} s",
        path.eval_s, path.queued_s, path.baseline_s, path.e2e_s, path.verify_s, *other_s());
  }
  return s;
}

TimeAccount time_account(const records::Log& events) {
  TimeAccount out;
  // T: the run's outer iterations (after the last one comes PostFuse, Swap, the final check).
  int T = -1, max_t = 0;
  for (const auto& e : events) {
    if (const auto* rs = std::get_if<records::RunStart>(&e)) {
      // settings is the run's free-form knobs (events.h, RunStart): T is one of them.
      if (!rs->settings.empty()) T = static_cast<int>(fields::integer(rs->settings, "T", -1));
    } else if (const auto* it = std::get_if<records::Iteration>(&e)) {
      max_t = std::max(max_t, it->t);
    }
  }
  if (T < 0) T = max_t;
  const int post = T + 1;

  std::map<int, PhaseData> data;
  std::map<std::string, records::Eval> local_evals;  // candidate -> its (last) local eval record
  std::map<std::string, int> local_phase;
  std::optional<std::chrono::system_clock::time_point> prev;
  bool any_ts = false;
  int cur = 0;
  bool after_last = false;
  for (const records::Event& rec : events) {
    auto env = records::envelope_of(rec);
    if (!env) continue;
    const std::string& type = env->type;
    // The records this account reads, and the outer iteration a record names
    // (records without one, and those whose type carries none, stay in the
    // current phase; an iteration record names its t).
    const auto* call = std::get_if<records::LlmCall>(&rec);
    const auto* verify = std::get_if<records::VerifyDecomposition>(&rec);
    const auto* ev = std::get_if<records::Eval>(&rec);
    const auto* iter = std::get_if<records::Iteration>(&rec);
    const std::optional<int> named = std::visit(
        records::Visit{[](const records::LlmCall& r) -> std::optional<int> { return r.iteration; },
                       [](const records::VerifyDecomposition& r) -> std::optional<int> { return r.iteration; },
                       [](const records::Eval& r) -> std::optional<int> { return r.iteration; },
                       [](const records::Iteration& r) -> std::optional<int> { return r.t; },
                       [](const records::TopologyChange& r) -> std::optional<int> { return r.iteration; },
                       [](const records::ReplyError& r) -> std::optional<int> { return r.iteration; },
                       [](const records::Judge& r) -> std::optional<int> { return r.iteration; },
                       [](const records::Budget& r) -> std::optional<int> { return r.iteration; },
                       [](const auto&) -> std::optional<int> { return std::nullopt; }},
        rec);
    int p = cur;
    if (is_post_type(type)) p = post;
    else if (named) p = *named;
    p = after_last ? post : std::max(p, cur);
    cur = p;
    PhaseData& d = data[p];
    d.any = true;
    if (iter && iter->t >= T) {
      after_last = true;
      cur = post;
    }
    // Wall time: the time up to an event is its phase's; the downtime before a resume is nobody's.
    if (auto ts = parse_iso8601_utc(env->ts)) {
      any_ts = true;
      if (prev && type != records::kResume) d.wall_s += std::max(0.0, std::chrono::duration<double>(*ts - *prev).count());
      prev = ts;
    }
    if (call) {
      Call c;
      if (call->latency_ms) c.latency_s = static_cast<double>(*call->latency_ms) / 1000.0;
      c.round = call->round;
      c.agent = call->agent;
      c.task = call->task;
      c.candidate = call->candidate;
      c.sample = call->sample;
      if (!c.latency_s || !c.round) {
        d.unknown = true;
        continue;
      }
      if (c.agent == "decompose") {
        d.decompose[*c.round].push_back(c);
      } else if (c.agent == "split" || c.agent == "fuse") {
        d.refine[*c.round].push_back(c);
      } else {
        std::string key = !c.candidate.empty() ? c.candidate : fmt::format("sample {}", c.sample);
        if (c.candidate.empty() && c.agent == "judge") d.unknown = true;  // cannot be paired with its job
        Job& j = d.tasks[c.task][*c.round][key];
        j.llm_s += *c.latency_s;
        j.has_call = true;
      }
    } else if (verify) {
      if (verify->seconds) d.verify_s[{verify->agent, verify->sample}] = *verify->seconds;
    } else if (ev) {
      const double q = ev->queued_s.value_or(0), evs = ev->eval_s.value_or(0);
      if (ev->e2e) {
        // A final check started early (beside the last iteration's evaluation):
        // the path waited only for what was left of it.
        d.e2e_s += ev->waited_s.value_or(q + evs);
      } else {
        local_phase[ev->candidate] = p;
        local_evals.insert_or_assign(ev->candidate, *ev);
      }
    }
  }
  // Each local evaluation joins its job (a reused subkernel's, with no LLM call, is round 0 of its task).
  for (const auto& [cand, e] : local_evals) {
    PhaseData& d = data[local_phase[cand]];
    Job* job = nullptr;
    for (auto& [task, rounds] : d.tasks)
      for (auto& [r, jobs] : rounds)
        if (auto it = jobs.find(cand); it != jobs.end()) job = &it->second;
    if (!job) job = &d.tasks[e.task][0][cand];
    job->queued_s = e.queued_s.value_or(0);
    job->baseline_s = e.baseline_s.value_or(0);
    job->eval_s = e.eval_s.value_or(0);
  }

  bool unknown = false;
  double total_llm = 0;
  double total_wall = 0;
  for (auto& [p, d] : data) {
    if (!d.any) continue;
    PhaseTime ph;
    ph.iteration = p;
    ph.label = p == 0 ? "decomposition" : p == post ? "after the search" : fmt::format("iteration {}", p);
    double llm = 0;
    ph.rounds += structural_rounds(d.decompose, d, &llm, &ph.path);
    ph.rounds += structural_rounds(d.refine, d, &llm, &ph.path);
    // The beams run together: the LLM chain is the task whose rounds' slowest
    // calls add up to most; the path is the task whose rounds took longest.
    double best_llm = 0, best_wall = -1;
    int best_llm_rounds = 0;
    PathTimes best_path;
    for (const auto& [task, rounds] : d.tasks) {
      double t_llm = 0, t_wall = 0;
      int t_rounds = 0;
      PathTimes t_path;
      for (const auto& [r, jobs] : rounds) {
        double llm_max = 0, dur_max = -1;
        bool any_call = false;
        const Job* slow = nullptr;
        for (const auto& [cand, j] : jobs) {
          llm_max = std::max(llm_max, j.llm_s);
          any_call = any_call || j.has_call;
          if (j.duration() > dur_max) {
            dur_max = j.duration();
            slow = &j;
          }
        }
        if (any_call) ++t_rounds;
        t_llm += llm_max;
        if (slow) {
          t_wall += slow->duration();
          t_path.llm_s += slow->llm_s;
          t_path.queued_s += slow->queued_s;
          t_path.baseline_s += slow->baseline_s;
          t_path.eval_s += std::max(0.0, slow->eval_s - slow->baseline_s);
        }
      }
      if (t_llm > best_llm || (t_llm == best_llm && t_rounds > best_llm_rounds)) {
        best_llm = t_llm;
        best_llm_rounds = t_rounds;
      }
      if (t_wall > best_wall) {
        best_wall = t_wall;
        best_path = t_path;
      }
    }
    llm += best_llm;
    ph.rounds += best_llm_rounds;
    ph.path += best_path;
    ph.path.e2e_s += d.e2e_s;
    if (d.unknown) unknown = true;
    else ph.llm_s = llm;
    if (any_ts) ph.wall_s = d.wall_s;
    total_llm += llm;
    total_wall += d.wall_s;
    out.rounds += ph.rounds;
    out.path += ph.path;
    out.phases.push_back(std::move(ph));
  }
  if (!unknown) out.llm_s = total_llm;
  if (any_ts) out.wall_s = total_wall;
  return out;
}

}  // namespace mk::rundir
