// The worker pool's pieces shared by its .cc files (not part of the public
// interface): a slot, and the helpers more than one of them uses.
//   pool.cc              the queue and the slots: servers, evaluations, the other ops
//   pool_baselines.cc    a problem's eager and torch.compile baselines: measured, cached, waited for
//   pool_calibration.cc  --tolerance calibrated|FILE and `mkevolve calibrate`: the worker's calibrate op
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "eval/cache.h"
#include "eval/evaluator.h"
#include "eval/pool.h"
#include "eval/server.h"

namespace mk::eval {

namespace fs = std::filesystem;

struct WorkerPool::Slot {
  int index = 0;
  int gpu = -1;              ///< visible GPU index, -1 for the CPU slot
  std::string gpu_name;      ///< "cpu" for the CPU slot
  std::string device;        ///< CUDA_VISIBLE_DEVICES for its server
  /// Shared by every slot (and every pool on the host) on the same physical GPU:
  /// the worker holds it while a candidate or baseline is timed (gpulock.py).
  fs::path timing_lock;
  fs::path dir;
  std::unique_ptr<Server> server;  ///< used by the slot thread only, except under server_mu
  std::mutex server_mu;
  bool busy = false;               ///< under server_mu
  bool running = false;            ///< a job runs here (under the pool's mu_)
  /// An evaluation left its spares to a later refill (under mu_), since owed_since.
  bool spares_owed = false;
  /// Of its spares' CUDA contexts, how many the GPU's overhead does not count
  /// now (under mu_; 0 unless owed): those an evaluation took, counted in its
  /// footprint, and not yet forked again.
  int uncounted = 0;
  std::chrono::steady_clock::time_point owed_since;
  /// Seconds this slot's thread spent starting servers, all told: a job's
  /// share is the difference across it (Verdict::server_start_s).
  double start_s = 0;
  std::thread thread;
};

namespace detail {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

/// True when a worker answer says its timing ran without the GPU timing lock
/// (checks.timing_lock for an eval, timing_lock for a baseline; held: false).
bool timed_without_lock(const nlohmann::json& answer);
/// Seconds as printf's %g writes them.
std::string fmt_seconds(double s);
/// The last n characters of s, "..." before them when it was longer.
std::string clip_tail(const std::string& s, size_t n);
/// p made absolute and normal (p itself when that fails).
fs::path absolute_path(const fs::path& p);
/// A problem's footprint is kept per problem sources and machine (GPU model,
/// torch, worker sources, CPU test mode or not), and per whether the
/// evaluation is timed: a timed one also holds the timed calls' inputs in the
/// candidate and a third process, the profiling one.
std::string footprint_key(const std::string& problem_hash, const EvalIdentity& id, const EvalOptions& o);

}  // namespace detail

}  // namespace mk::eval
