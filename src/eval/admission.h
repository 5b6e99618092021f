// Memory-aware admission: the pool starts an evaluation only when its
// footprint (host memory, and device memory on its GPU) fits beside the
// evaluations already running, whatever the number of slots says. Footprints
// are measured by the worker (checks.footprint) and kept per problem and
// machine in a FootprintCache; a problem's first evaluation is admitted by an
// estimate (the worker's meta-device probe), or alone when there is none.
//
//   Admission adm(host_capacity);
//   adm.set_device_capacity(gpu, bytes);
//   auto t = adm.acquire(gpu, host_bytes, device_bytes, /*exclusive=*/false, stop);
//   ... evaluate ...
//   adm.release(t);
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mk::eval {

struct Footprint {
  double host_bytes = 0;     ///< peak host memory of one evaluation
  double device_bytes = 0;   ///< peak device memory of one evaluation (0: unknown)
  double input_bytes = 0;    ///< one call's inputs
  double output_bytes = 0;   ///< one call's outputs
  double reference_s = 0;    ///< the reference's slowest trial, seconds
  bool measured = false;     ///< false: an estimate from the meta-device probe
  /// How device_bytes was measured: 2, the processes' peaks summed over the
  /// phase that held the most (worker footprint.device_phases); 1, every
  /// process's peak summed (before 2026-12-05). A cache record of another
  /// version still admits, until a measurement replaces it.
  int version = kFootprintVersion;
  static constexpr int kFootprintVersion = 2;
  /// Every phase of the evaluation was seen (one that ended before its timed
  /// calls finished saw less than it would have held).
  bool complete = true;
  /// The last complete measurements of this rule, oldest first, at most
  /// kRecent of them, as {device_bytes, host_bytes}: the record's figures
  /// are their largest. One candidate that holds far more than the others
  /// (a greedy scratch buffer) raises the record for the next kRecent
  /// complete evaluations of the problem, not for ever.
  std::vector<std::pair<double, double>> recent;
  static constexpr size_t kRecent = 8;
  nlohmann::json to_json() const;
  static std::optional<Footprint> from_json(const nlohmann::json& j);
};

/// What one evaluation holds on its GPU at its peak, from one call's sizes
/// (what its processes hold at once in the phase that holds the most;
/// docs/EVAL.md, Device memory of one evaluation). Inputs above half of the
/// worker's timing pool (kPoolBytes) are timed in place: two copies of the
/// inputs (the reference's and the candidate's) and two outputs at once (the
/// reference's, and the candidate's or, during the profiled burst, the
/// profiling process's). Smaller inputs rotate through up to kPoolBytes of
/// input sets in each process.
struct DeviceEstimate {
  double inputs = 0;   ///< copies of one call's inputs, all processes together
  double outputs = 0;  ///< copies of one call's outputs
  double pool = 0;     ///< bytes of rotated input sets (small inputs only)
  double params = 0;   ///< copies of the model's parameters
  double fixed = 0;    ///< CUDA contexts and the L2 flush buffer
  double bytes = 0;    ///< the whole: inputs x in + outputs x out + pool + params x p + fixed
};
inline constexpr double kPoolBytes = 1024.0 * 1024 * 1024;    ///< timing.POOL_BYTES
inline constexpr double kContextBytes = 600.0 * 1024 * 1024;  ///< one CUDA context (evaluate.CUDA_CONTEXT_BYTES)
inline constexpr double kFlushBytes = 256.0 * 1024 * 1024;    ///< the L2 flush buffer (timing.l2_flush_buffer)
/// in_bytes/out_bytes: one call's inputs and outputs; timed: with the timed
/// calls and the profiling process.
DeviceEstimate estimate_device(double in_bytes, double out_bytes, double param_bytes, bool timed);
/// Whether one call's inputs are timed in place (timing.in_place).
bool timed_in_place(double in_bytes);

/// What admission may hand out on a GPU of total_bytes: 95% of it, less a
/// CUDA context per idle pre-started process and 2 GiB for everything else
/// (the pool passes no idle processes and keeps their contexts as the
/// admission's overhead instead: Admission::learn_device, add_device_overhead).
double gpu_capacity(double total_bytes, int idle_processes);

/// GPU memory an evaluation is admitted with, from its footprint: a
/// measurement sums the processes' allocator high-water marks over the phase
/// that held the most (high-water marks, not samples), so it gets 5% and
/// 0.5 GiB for what the allocator does not see; an estimate is taken as is.
double device_reservation(const Footprint& f);

/// Whether an evaluation admitted by this footprint runs alone: an estimate
/// (nothing measured yet) of more than an eighth of the GPU. An estimate
/// counts one call's data and knows nothing of what the reference holds
/// beside it; on an H200, KernelBench's 6.4 GB 23_Softmax was estimated at
/// 34 GB and measured at 77 GB, so several such first evaluations side by
/// side ran each other out of memory. Once one is measured, the measurement
/// admits the rest.
bool alone_until_measured(const Footprint& f, std::optional<double> device_capacity);

/// One JSON file per key under dir (key: problem sources + machine).
class FootprintCache {
 public:
  explicit FootprintCache(std::filesystem::path dir) : dir_(std::move(dir)) {}
  std::optional<Footprint> get(const std::string& key) const;
  /// Where the old and the new record were measured by the same rule
  /// (Footprint::version) and both saw every phase, keeps the largest of
  /// the last Footprint::kRecent complete measurements (Footprint::recent;
  /// the reference's seconds: the largest ever); where neither saw every
  /// phase, the larger of the two. A complete measurement replaces an
  /// incomplete one and one of another rule; an incomplete one never
  /// replaces or raises a complete one, nor replaces one of another rule,
  /// and over an estimate it keeps the larger figures. An estimate never
  /// replaces a measurement.
  void put(const std::string& key, const Footprint& f);

 private:
  std::filesystem::path dir_;
  mutable std::mutex mu_;
};

/// Host memory this process may use now: MemAvailable, or less where a
/// cgroup limit says so (bytes; 0 when unreadable).
double host_memory_available();

class Admission {
 public:
  struct Ticket {
    int gpu = -1;
    double host = 0, device = 0;
    bool alone = false;      ///< admitted although it does not fit: nothing else was running
    bool exclusive = false;  ///< asked to run alone (a retry after a memory failure)
    /// GPU memory counted in the overhead now that the evaluation takes as
    /// its own when admitted: its slot's idle spares, which its footprint
    /// counts as its processes. It fits where device - credit does, and the
    /// overhead drops by credit as it is admitted (never counted twice).
    double credit = 0;
    double waited_s = 0;
    nlohmann::json to_json() const;
  };
  explicit Admission(double host_capacity) : host_cap_(host_capacity) {}
  void set_device_capacity(int gpu, double bytes);
  double host_capacity() const { return host_cap_; }
  /// What evaluations may hold on the GPU now: its capacity less the
  /// overhead (the CUDA contexts of idle pre-started processes).
  std::optional<double> device_capacity(int gpu) const;
  /// GPU memory held outside any evaluation's reservation: the idle spares'
  /// CUDA contexts. An evaluation that takes a slot's spares and leaves them
  /// owed (counted in its own footprint from then on) takes their share off
  /// (add_device_overhead with a negative delta); a refill asks to put it
  /// back, and is let only where it fits beside those running
  /// (try_add_device_overhead); add_device_overhead: whatever is running.
  void add_device_overhead(int gpu, double delta);
  bool try_add_device_overhead(int gpu, double delta);
  /// Sets a GPU's capacity and overhead together, where its capacity is not
  /// known yet; whether it did (several slots may learn it at once: the
  /// first answer stands, and no waiter sees one without the other).
  bool learn_device(int gpu, double capacity, double overhead);
  /// Blocks until the reservation fits beside those running (exclusive: until
  /// nothing else runs), or stop() turns true (then nullopt). An evaluation
  /// that does not fit even on an idle machine is admitted alone.
  ///
  /// The order of waiters: first those that need the whole machine (asked to
  /// run alone, or too large for their GPU even idle), in the order they
  /// came, ahead of everyone on every GPU; then, on each GPU, those that have
  /// waited pass_bound_s, in the order they came (one waiting for host
  /// memory, which all GPUs share, so also ahead of those of other GPUs);
  /// then the largest reservation first (equal ones in the order they came). When memory
  /// frees up, the evaluation that needs the most of it, and likely takes
  /// longest, starts first, and smaller ones fill what is left. A waiter may
  /// start before one ahead of it that cannot start yet (backfill), until
  /// that one has waited pass_bound_s: then it waits behind it. So nothing
  /// waits for ever behind a stream of others, large or small, and a GPU
  /// with room is never held for another GPU's memory.
  std::optional<Ticket> acquire(int gpu, double host, double device, bool exclusive,
                                const std::function<bool()>& stop, double credit = 0);
  void release(const Ticket& t);
  void wake();  ///< re-checks waiters (after stop turned true)
  int running() const;
  void set_pass_bound_s(double s);  ///< 30 s unless set (tests)

 private:
  struct Waiter {
    unsigned long seq = 0;
    std::chrono::steady_clock::time_point since;
    Ticket ticket;
  };
  bool fits(const Ticket& t) const;
  /// Ticket::credit, at most what the overhead holds now (mu_ held).
  double credit_now(const Ticket& t) const;
  std::optional<double> usable(int gpu) const;  ///< device_capacity (mu_ held)
  bool could_start(const Ticket& t) const { return fits(t) || running_ == 0; }
  /// Asked to run alone, or too large for its GPU (or the host) even idle.
  bool needs_whole_machine(const Ticket& t) const;
  /// Whether w has waited pass_bound_s by `now`.
  bool waited_long(const Waiter& w, std::chrono::steady_clock::time_point now) const;
  /// Whether w goes before me (the order acquire() describes; mu_ held).
  bool ahead(const Waiter& w, const Waiter& me, std::chrono::steady_clock::time_point now) const;
  /// Whether no waiter ahead of `me` could start now or has waited
  /// pass_bound_s (mu_ held).
  bool first_in_line(const Waiter& me) const;
  double pass_bound_s_ = 30;
  unsigned long next_seq_ = 0;
  std::map<unsigned long, Waiter> waiting_;
  double host_cap_;
  std::map<int, double> dev_cap_;
  std::map<int, double> dev_overhead_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  double host_used_ = 0;
  std::map<int, double> dev_used_;
  int running_ = 0;
  int exclusive_running_ = 0;
};

}  // namespace mk::eval
