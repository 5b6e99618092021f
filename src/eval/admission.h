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

#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace mk::eval {

struct Footprint {
  double host_bytes = 0;     ///< peak host memory of one evaluation
  double device_bytes = 0;   ///< peak device memory of one evaluation (0: unknown)
  double input_bytes = 0;    ///< one call's inputs
  double output_bytes = 0;   ///< one call's outputs
  double reference_s = 0;    ///< the reference's slowest trial, seconds
  bool measured = false;     ///< false: an estimate from the meta-device probe
  nlohmann::json to_json() const;
  static std::optional<Footprint> from_json(const nlohmann::json& j);
};

/// One JSON file per key under dir (key: problem sources + machine).
class FootprintCache {
 public:
  explicit FootprintCache(std::filesystem::path dir) : dir_(std::move(dir)) {}
  std::optional<Footprint> get(const std::string& key) const;
  /// Keeps the larger measured figures of the old and the new record.
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
    double waited_s = 0;
    nlohmann::json to_json() const;
  };
  explicit Admission(double host_capacity) : host_cap_(host_capacity) {}
  void set_device_capacity(int gpu, double bytes);
  double host_capacity() const { return host_cap_; }
  std::optional<double> device_capacity(int gpu) const;
  /// Blocks until the reservation fits beside those running (exclusive: until
  /// nothing else runs), or stop() turns true (then nullopt). An evaluation
  /// that does not fit even on an idle machine is admitted alone.
  std::optional<Ticket> acquire(int gpu, double host, double device, bool exclusive,
                                const std::function<bool()>& stop);
  void release(const Ticket& t);
  void wake();  ///< re-checks waiters (after stop turned true)
  int running() const;

 private:
  bool fits(const Ticket& t) const;
  double host_cap_;
  std::map<int, double> dev_cap_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  double host_used_ = 0;
  std::map<int, double> dev_used_;
  int running_ = 0;
  int exclusive_running_ = 0;
};

}  // namespace mk::eval
