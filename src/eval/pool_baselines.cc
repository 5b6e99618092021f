// The worker pool's baselines: a problem's eager and torch.compile timings,
// measured once per problem and machine (a job of their own, prefetched or
// queued beside the first candidate), cached, and waited for by the
// evaluations that need them.
#include "eval/pool.h"

#include <future>

#include "eval/pool_internal.h"
#include "eval/protocol.h"
#include "eval/sources.h"

namespace mk::eval {

namespace fs = std::filesystem;
using nlohmann::json;

using detail::absolute_path;
using detail::clip_tail;
using detail::fmt_seconds;
using detail::footprint_key;
using detail::timed_without_lock;

EvalIdentity WorkerPool::baseline_identity(const Slot& slot) const {
  EvalIdentity id = identity_for(slot);
  if (id.torch.empty()) {  // the candidate took the server down: use the pool-wide identity
    std::lock_guard lock(mu_);
    id.torch = torch_.value_or("");
  }
  return id;
}

void WorkerPool::prefetch_baselines(const fs::path& problem, const EvalOptions& options) {
  queue_baselines(problem, options, /*background=*/true);
}

void WorkerPool::queue_baselines(const fs::path& problem, const EvalOptions& options, bool background) {
  if (!options.measure_perf || (options.test_cpu && !opts_.test_mode) || (gpus_.empty() && !options.test_cpu)) return;
  EvalRequest req;
  req.problem = absolute_path(problem);
  req.options = options;
  req.task = "baselines";
  Job job;
  job.gpu = options.gpu;
  job.background = background;
  job.run = [this, req, background](Slot& slot) {
    if (slot.gpu < 0 && !req.options.test_cpu) return;
    auto ph = hash_sources(req.problem);
    if (!ph || !ensure_server(slot)) return;  // the first evaluation of the problem will say why
    EvalIdentity id = baseline_identity(slot);
    std::string key = baseline_key(*ph, id, req.options);
    if (baselines_ && baselines_->get(key)) return;
    {
      // An evaluation got there first and measures them: nothing to add. Nor
      // when the candidate that queued them measured them itself meanwhile
      // (one slot: it got there before this job).
      std::lock_guard lock(baseline_mu_);
      if (baseline_inflight_.count(key)) return;
      if (!background && !baseline_started_.count(key)) return;
    }
    // Admitted by the problem's footprint, estimated here when none was measured
    // yet (as its first evaluation would), so that it need not run alone.
    if (opts_.memory_admission) (void)footprint_for(slot, req, footprint_key(*ph, id, req.options));
    (void)measure_baselines(slot, req, *ph, id, key);
  };
  job.cancel = [](const std::string&) {};
  enqueue(std::move(job));
}

Result<Baseline> WorkerPool::measure_baselines(Slot& slot, const EvalRequest& req, const std::string& problem_hash,
                                               const EvalIdentity& id, const std::string& key) {
  std::shared_future<Result<Baseline>> fut;
  std::shared_ptr<std::promise<Result<Baseline>>> mine;
  {
    std::lock_guard lock(baseline_mu_);
    auto it = baseline_inflight_.find(key);
    if (it != baseline_inflight_.end()) {
      fut = it->second;
    } else {
      mine = std::make_shared<std::promise<Result<Baseline>>>();
      fut = mine->get_future().share();
      baseline_inflight_.emplace(key, fut);
      baseline_started_.erase(key);  // a queued job for them has nothing left to do
    }
  }
  if (mine) {
    Result<Baseline> got = Error{"no baseline"};
    if (auto st = ensure_server(slot); !st) {
      got = Error{st.error()};
    } else {
      {
        std::lock_guard lock(mu_);
        ++stats_.baseline_runs;
      }
      EvalOptions bo = req.options;
      json msg{{"op", "baseline"}, {"problem", req.problem.string()}, {"options", options_to_json(bo)}};
      // The baseline process holds the problem's timing inputs on the host and
      // the GPU like an evaluation does: it is admitted by the same footprint
      // (alone while that is unknown).
      std::optional<Admission::Ticket> ticket;
      if (opts_.memory_admission) {
        auto fp = footprints_->get(footprint_key(problem_hash, id, req.options));
        const bool alone = !fp || alone_until_measured(*fp, admission_->device_capacity(slot.gpu));
        ticket = admission_->acquire(slot.gpu, fp ? fp->host_bytes : 0, fp ? fp->device_bytes : 0, alone,
                                     [this] { return stopping(); });
      }
      auto rep = ticket || !opts_.memory_admission
                     ? call(slot, std::move(msg), opts_.baseline_timeout_s)
                     : Server::Reply{Server::Outcome::kDied, {}, "the evaluator shut down"};
      if (ticket) admission_->release(*ticket);
      if (rep.outcome == Server::Outcome::kAnswered)
        got = parse_baseline(rep.message);
      else
        got = Error{"baseline measurement failed: " + (rep.outcome == Server::Outcome::kTimeout
                                                          ? "no answer within " + fmt_seconds(opts_.baseline_timeout_s) + " s"
                                                          : clip_tail(rep.detail, 300))};
    }
    if (got && baselines_ && !timed_without_lock(got->raw)) {
      json about{{"problem", req.problem.string()}, {"gpu_model", id.gpu_model}, {"torch", id.torch}};
      (void)baselines_->put(key, *got, about);
    }
    mine->set_value(got);
    if (!got) {  // let a later request try again
      std::lock_guard lock(baseline_mu_);
      baseline_inflight_.erase(key);
    }
  }
  return fut.get();
}

void WorkerPool::add_baselines(Slot& slot, const EvalRequest& req, const std::string& problem_hash, Verdict& r) {
  if (r.eager.valid) return;  // the worker measured them itself
  EvalIdentity id = baseline_identity(slot);
  std::string key = baseline_key(problem_hash, id, req.options);
  if (baselines_) {
    if (auto b = baselines_->get(key)) {
      r.eager = b->eager;
      r.compiled = b->compiled;
      return;
    }
  }
  const Result<Baseline> b = measure_baselines(slot, req, problem_hash, id, key);
  if (b) {
    r.eager = b->eager;
    r.compiled = b->compiled;
    // The GPU's clock while the baselines were timed, beside the candidate's
    // own (checks.gpu_clock): a speedup compares two moments of the GPU.
    if (b->raw.is_object() && b->raw.contains("gpu_clock") && b->raw["gpu_clock"].is_object()) {
      r.mutable_checks()["baseline_gpu_clock"] = b->raw["gpu_clock"];
    }
    // Why there is no torch.compile figure (a compile error, or its step's deadline).
    if (!b->compiled.valid && b->raw.is_object() && b->raw.contains("compile_error") &&
        b->raw["compile_error"].is_string()) {
      r.mutable_checks()["baseline_compile_error"] = b->raw["compile_error"];
    }
    if (timed_without_lock(b->raw)) {  // fine for now, not for the verdict cache
      if (!r.raw.is_object()) r.raw = json::object();
      r.raw["baseline_timed_without_lock"] = true;
    }
  } else {
    if (!r.raw.is_object()) r.raw = json::object();
    r.raw["baseline_error"] = b.error();
  }
}

void WorkerPool::add_tf32_baseline(Slot& slot, const EvalRequest& req, const std::string& problem_hash, Verdict& r) {
  EvalRequest t = req;
  t.options.tf32 = true;
  t.options.calibrated = nullptr;
  EvalIdentity id = baseline_identity(slot);
  std::string key = baseline_key(problem_hash, id, t.options);
  std::optional<Baseline> cached = baselines_ ? baselines_->get(key) : std::nullopt;
  Result<Baseline> b = cached ? Result<Baseline>(*cached) : measure_baselines(slot, t, problem_hash, id, key);
  json& checks = r.mutable_checks();
  if (!b) {
    checks["baseline_tf32"] = {{"error", b.error()}};
    return;
  }
  r.compiled_tf32 = b->compiled;
  json rec{{"tf32", true},
           {"eager_ms", b->eager.valid ? json(b->eager.median_ms) : json(nullptr)},
           {"compile_ms", b->compiled.valid ? json(b->compiled.median_ms) : json(nullptr)}};
  if (b->raw.is_object() && b->raw.contains("compile_error")) rec["compile_error"] = b->raw["compile_error"];
  checks["baseline_tf32"] = rec;
  if (timed_without_lock(b->raw)) r.raw["baseline_timed_without_lock"] = true;
}

}  // namespace mk::eval
