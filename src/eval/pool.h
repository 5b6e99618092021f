// The worker pool: the real Evaluator. One worker server per visible GPU (or
// several: slots_per_gpu), a shared queue, per-request deadlines, restarts of
// dead or hung servers, and the result and baseline caches. Defined in pool.cc
// (the queue and slots), pool_baselines.cc and pool_calibration.cc.
//
//   auto pool = WorkerPool::create(opts);        // discovers GPUs, starts nothing yet
//   if (auto st = (*pool)->probe(); !st) ...      // environment problems (exit 3)
//   Verdict r = (*pool)->evaluate({problem, kernel, options});
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "eval/admission.h"
#include "eval/cache.h"
#include "eval/calibration.h"
#include "eval/evaluator.h"
#include "eval/gpus.h"
#include "eval/server.h"
#include "util/fs.h"
#include "util/subprocess.h"

namespace mk::eval {

struct PoolOptions {
  std::string python = "python3";          ///< the worker's interpreter (resolve_python())
  /// The server command; empty = {python, "-m", "mkevolve_worker", "serve"} (+ "--test-mode").
  /// Tests put the fake worker here.
  std::vector<std::string> worker_command;
  std::filesystem::path worker_dir;        ///< PYTHONPATH for the worker; empty = install_root()/worker
  bool test_mode = false;                  ///< start servers with --test-mode (allows test_cpu evals)
  /// Concurrent candidates per GPU at most (0: auto, the most the CPUs allow);
  /// memory admission (below) decides how many really run at once.
  int slots_per_gpu = 1;
  /// Start an evaluation only when its measured (or estimated) footprint fits
  /// in the host's and its GPU's free memory beside those running (admission.h).
  bool memory_admission = true;
  /// Host memory kept free; 0: max(2 GiB, 5% of what is available at start).
  double host_headroom_bytes = 0;
  /// The host memory admission may hand out; 0: what /proc/meminfo (or a cgroup
  /// limit) says is available at start, less the headroom. Tests set it.
  double host_capacity_bytes = 0;
  /// Retries of an evaluation whose failure was the harness's (the reference
  /// side: status no_verdict; a server that died), each alone on its GPU.
  int harness_retries = 2;
  /// Each server keeps a candidate's processes forked and warmed (CUDA, Triton,
  /// the profiler) before the candidate arrives; false starts them on demand
  /// (less GPU memory held: a CUDA context per idle process).
  bool prestart = true;
  /// Each slot starts its server (and its spares) as the pool starts, not at
  /// its first job. A search sets it: its slots are otherwise cold when a
  /// round's evaluations first fill them all at once, and each then paid a
  /// server start (docs/PERFORMANCE.md); started early, they warm while the
  /// decomposition's LLM calls are in flight.
  bool start_servers = false;
  /// How many jobs the caller submits at once, where it knows (a batch's
  /// pairs; 0: unknown): a GPU gets no more slots than its share of them,
  /// so no server starts that no job would use. `eval --batch` sets it with
  /// start_servers: every server then starts at once as the pool does,
  /// beside the probe's, where before the probe's server started first and
  /// the others only when the jobs came, one start after the other
  /// (docs/PERFORMANCE.md, 2026-12-06).
  size_t expected_jobs = 0;
  /// When a server replaces the spares an evaluation took. kWhenQuiet: at the
  /// evaluation's start only when more evaluations wait for this GPU than it
  /// has idle slots (back-to-back work); otherwise later, by op `refill`, once
  /// no job runs or waits on the GPU, or after spares_idle_refill_s idle. A
  /// search round's evaluations start together, and three warm-ups each
  /// beside them slowed every one (docs/PERFORMANCE.md). kAtStart: always at
  /// the start (the old way). $MKEVOLVE_SPARES_REFILL (quiet, start) overrides.
  enum class SparesRefill { kWhenQuiet, kAtStart } spares_refill = SparesRefill::kWhenQuiet;
  double spares_idle_refill_s = 10;
  std::optional<std::vector<Gpu>> gpus;    ///< override discovery (tests); empty vector = no GPU
  int only_gpu = -1;                       ///< >= 0: use only this visible GPU (--gpu N)
  std::filesystem::path work_dir;          ///< server logs and private cwds; empty = a temp dir removed at exit
  std::filesystem::path cache_dir;         ///< verdict cache; empty = no verdict cache
  std::filesystem::path baseline_dir;      ///< baseline cache; empty = default_cache_root()/baselines
  bool cache_baselines = true;
  /// The pool's backstop for a server that stops answering: deadline_factor x
  /// the candidate's timeout_s + grace_s. The worker enforces timeout_s itself on
  /// each of the up to three processes one eval runs (reference, candidate,
  /// reference again) and waits at most timeout_s for the GPU timing lock, so a
  /// healthy server always answers before this.
  double deadline_factor = 4;
  /// 90: a minute, plus the two deferrals to evaluations of higher priority
  /// the worker may make (its shared steps, its timed phase), each at most
  /// gpulock.MAX_DEFER_S = 15 s.
  double grace_s = 90;
  double start_timeout_s = 180;            ///< for the hello (imports torch and Triton)
  double baseline_timeout_s = 1800;        ///< for a `baseline` op (torch.compile can take minutes)
  double info_timeout_s = 120;             ///< gpu_info, check
  /// kAuto: a PID namespace when running as root and `unshare` works, else
  /// process groups + token; $MKEVOLVE_ISOLATION (auto, pid-namespace,
  /// process-group) overrides kAuto.
  enum class Isolation { kAuto, kPidNamespace, kProcessGroup } isolation = Isolation::kAuto;
  Env extra_env;                           ///< added to every server's scrubbed environment (tests)
};

/// --python, else $MKEVOLVE_PYTHON, else the config value (each taken as
/// given), else the first of default_pythons() that has torch (as
/// scripts/demo.sh chooses), else "python3" (whose hello then says torch is
/// missing, and how to choose another).
std::string resolve_python(const std::string& flag, const std::string& config_value);
/// python3 (PATH's), /usr/bin/python3 (Debian's python3-torch), /usr/local/bin/python3.
const std::vector<std::string>& default_pythons();
/// The first interpreter of `candidates` that finds the torch package; the
/// first candidate when none does.
std::string first_python_with_torch(const std::vector<std::string>& candidates);

class WorkerPool final : public Evaluator {
 public:
  static Result<std::unique_ptr<WorkerPool>> create(PoolOptions opts);
  ~WorkerPool() override;  ///< aborts work in flight, stops every server and its descendants

  std::future<Verdict> submit(EvalRequest req) override;
  std::future<DecompositionResult> verify_decomposition(DecompositionRequest req) override;
  nlohmann::json hardware_info() override;
  /// Pre-flight: the problem fits this machine (its meta-device footprint),
  /// loads, and its reference runs once on the device that will evaluate.
  /// The error names the file and what is wrong.
  mk::Status check_problem(const std::filesystem::path& problem, bool test_cpu) override {
    return check_problem(problem, test_cpu, "benchmark", nullptr);
  }
  mk::Status check_problem(const std::filesystem::path& problem, bool test_cpu, const std::string& shapes,
                           nlohmann::json* shapes_out) override;
  /// Queues the problem's baseline measurement (eager, torch.compile) unless the
  /// baseline cache has it; an evaluation that needs it meanwhile joins it.
  void prefetch_baselines(const std::filesystem::path& problem, const EvalOptions& options) override;

  /// The worker's `calibrate` op on one problem (runs input seeds): its
  /// answer, or an error naming the file.
  Result<nlohmann::json> calibrate(const std::filesystem::path& problem, int runs, bool test_cpu, int seed = 42);

  /// Starts one server (if none runs) and checks its hello: the environment
  /// errors (no interpreter, no torch, no Triton, wrong protocol) show up here.
  mk::Status probe();
  /// The worker's `check` op (static checks; no GPU needed): the answer object.
  Result<nlohmann::json> check(const std::filesystem::path& kernel);
  Result<PinnedSources> pin_precision(const std::map<std::string, std::string>& files) override;

  const std::vector<Gpu>& gpus() const { return gpus_; }
  size_t slot_count() const { return slots_.size(); }
  /// "pid-namespace" or "process-group" (how descendants are contained).
  std::string isolation() const { return pid_namespace_ ? "pid-namespace" : "process-group"; }
  const std::filesystem::path& work_dir() const { return work_dir_; }
  /// The hello of the first server that started (null before).
  nlohmann::json hello() const;

  struct Stats {
    long requests = 0;         ///< requests sent to servers (any op)
    long evals = 0;            ///< eval requests sent
    long cache_hits = 0;
    long joined = 0;           ///< requests answered by an identical evaluation already in flight
    long baseline_runs = 0;    ///< baseline ops sent
    long restarts = 0;         ///< servers killed after a timeout, death or protocol error
    long starts = 0;           ///< servers started
    long retries = 0;          ///< evaluations run again after a harness failure
    long no_verdicts = 0;      ///< evaluations still without a verdict after their retries
    long spares_later = 0;     ///< evaluations that left their spares to a later refill
    long refills = 0;          ///< refill ops sent (the spares of a quiet or idle slot)
  };
  Stats stats() const;

 private:
  struct Slot;
  struct Job {
    int gpu = -1;  ///< required visible GPU index, -1 any
    /// Taken only when no other job waits (prefetched baselines: they must
    /// never hold back an evaluation or a decomposition check).
    bool background = false;
    /// Higher first, then first come. An evaluation's is its
    /// EvalRequest::priority; every other job (a decomposition check, a
    /// problem check, a calibration: few, short, and their callers wait on
    /// them) goes first.
    int priority = std::numeric_limits<int>::max();
    bool eval = false;  ///< an evaluation: takes a server's spares
    /// A slot on visible GPU `on` may run it.
    bool fits(int on) const { return gpu < 0 || gpu == on; }
    std::function<void(Slot&)> run;
    std::function<void(const std::string&)> cancel;
  };

  explicit WorkerPool(PoolOptions opts);
  void enqueue(Job job);
  void slot_loop(Slot& slot);
  /// "now" or "later": when the server refills the spares this evaluation
  /// takes (PoolOptions::spares_refill); "later" leaves the slot owing them.
  /// credited: how many of the slot's spares' contexts the admission took
  /// off the GPU's overhead as it admitted the evaluation (Ticket::credit).
  std::string spares_when(Slot& slot, int credited = 0);
  /// Whether the slot's spares count in its GPU's admission overhead.
  bool counts_spares(const Slot& slot) const;
  static constexpr int kSpareContexts = 3;  ///< idle pre-started processes per slot (spares.py ROLES)
  /// No job runs on or waits for `gpu` (under mu_).
  bool gpu_quiet(int gpu) const;
  /// Sends the slot's server op `refill` (its owed spares), if it is alive.
  void refill_spares(Slot& slot);
  /// Counts the slot's spares' contexts in its GPU's overhead again (a
  /// refill, a new server); only_where_they_fit: only beside what runs now,
  /// else false and nothing changes.
  bool count_spares_again(Slot& slot, bool only_where_they_fit);
  /// After an evaluation: an owing slot's spares it left idle (the answer's
  /// spares_idle) count in the overhead again.
  void spares_left_idle(Slot& slot, const nlohmann::json& answer);
  mk::Status ensure_server(Slot& slot);
  Server::Reply call(Slot& slot, nlohmann::json req, double timeout_s);
  void drop_server(Slot& slot);
  Verdict run_eval(Slot& slot, const EvalRequest& req);
  Verdict eval_once(Slot& slot, const EvalRequest& req, const std::optional<Footprint>& fp, bool exclusive);
  bool stopping() const;  ///< the pool is shutting down (takes mu_)
  std::optional<Footprint> footprint_for(Slot& slot, const EvalRequest& req, const std::string& fkey);
  /// Why one call of a problem with footprint fp cannot fit here ("" when it can).
  std::string too_large(Slot& slot, const std::optional<Footprint>& fp);
  /// The footprint of one evaluation of `problem` (sources hashed to
  /// problem_hash) in the default options: what a problem check and a
  /// calibration go by. nullopt without memory admission or when none is known.
  std::optional<Footprint> default_footprint(Slot& slot, const std::filesystem::path& problem,
                                             const std::string& problem_hash, bool test_cpu);
  void add_baselines(Slot& slot, const EvalRequest& req, const std::string& problem_hash, Verdict& r);
  /// --baseline-tf32: the second baseline (TF32 on), cached and measured like the first.
  void add_tf32_baseline(Slot& slot, const EvalRequest& req, const std::string& problem_hash, Verdict& r);
  /// The identity a baseline is kept under (the pool-wide torch when the slot's server is gone).
  EvalIdentity baseline_identity(const Slot& slot) const;
  /// Measures the baselines under `key` on this slot, or waits for the request
  /// already measuring them; a failure lets a later request try again.
  Result<Baseline> measure_baselines(Slot& slot, const EvalRequest& req, const std::string& problem_hash,
                                     const EvalIdentity& id, const std::string& key);
  EvalIdentity identity_for(const Slot& slot) const;
  std::optional<EvalIdentity> identity_for_gpu(int gpu) const;

  PoolOptions opts_;
  std::vector<Gpu> gpus_;
  std::unique_ptr<TempDir> own_work_dir_;
  std::filesystem::path work_dir_;
  std::filesystem::path worker_dir_;
  std::vector<std::string> command_;
  bool pid_namespace_ = false;
  std::string worker_hash_;
  std::optional<ResultCache> results_;
  std::optional<BaselineCache> baselines_;
  std::unique_ptr<Admission> admission_;
  /// Problems (footprint keys) whose first evaluation, the one that measures
  /// the footprint, is running: the others of the same problem wait for it.
  std::map<std::string, std::shared_future<void>> measuring_;
  std::optional<FootprintCache> footprints_;
  /// Where GPU servers keep the sandbox self-test's passing verdicts for the
  /// servers after them (worker/mkevolve_worker/selftest_cache.py), beside the footprints.
  std::filesystem::path sandbox_verdicts_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::vector<std::unique_ptr<Slot>> slots_;
  nlohmann::json hello_;
  std::optional<std::string> torch_, triton_;
  nlohmann::json hardware_;
  Stats stats_;

  /// Evaluations in flight, by content (problem and kernel sources, options,
  /// GPU choice), with the requests that joined them. With a verdict cache, a
  /// request identical to one in flight waits for that verdict instead of
  /// running again: the cache would have answered it a moment later, and the
  /// same code never gets two different timings in one run (a resumed run,
  /// reading the cache, sees one).
  using Promise = std::shared_ptr<std::promise<Verdict>>;
  std::map<std::string, std::vector<Promise>> inflight_;
  void deliver(const std::string& flight, const Promise& leader, Verdict r);

  /// --tolerance calibrated|FILE: the problem's entry in req.options.calibration,
  /// calibrated on this slot first when the file has none (and added to it).
  Result<nlohmann::json> calibrated_for(Slot& slot, const EvalRequest& req, const std::string& problem_hash);
  Result<nlohmann::json> calibrate_on(Slot& slot, const std::filesystem::path& problem, int runs, bool test_cpu,
                                      int seed);
  std::mutex calib_mu_;
  std::map<std::string, std::shared_ptr<CalibrationFile>> calib_files_;
  std::map<std::string, std::shared_future<Result<nlohmann::json>>> calib_inflight_;

  std::mutex baseline_mu_;
  std::map<std::string, std::shared_future<Result<Baseline>>> baseline_inflight_;
  std::set<std::string> baseline_started_;  ///< baselines a first candidate queued beside itself
  /// The problem's baselines as a job of their own: background (prefetched,
  /// only when nothing else waits) or beside a candidate just admitted
  /// (ahead of the candidates still waiting, on another slot).
  void queue_baselines(const std::filesystem::path& problem, const EvalOptions& options, bool background);
};

}  // namespace mk::eval
