#include "eval/admission.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include "util/fs.h"

namespace mk::eval {

namespace fs = std::filesystem;
using nlohmann::json;

json Footprint::to_json() const {
  return json{{"host_bytes", host_bytes},     {"device_bytes", device_bytes}, {"input_bytes", input_bytes},
              {"output_bytes", output_bytes}, {"reference_s", reference_s},   {"measured", measured},
              {"version", version},           {"complete", complete},         {"recent", recent}};
}

std::optional<Footprint> Footprint::from_json(const json& j) {
  if (!j.is_object()) return std::nullopt;
  Footprint f;
  auto num = [&](const char* k) { return j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0; };
  f.host_bytes = num("host_bytes");
  f.device_bytes = num("device_bytes");
  f.input_bytes = num("input_bytes");
  f.output_bytes = num("output_bytes");
  f.reference_s = num("reference_s");
  f.measured = j.value("measured", false);
  f.version = j.contains("version") && j["version"].is_number_integer() ? j["version"].get<int>() : 1;
  f.complete = j.value("complete", true);
  if (j.contains("recent") && j["recent"].is_array())
    for (const auto& r : j["recent"])
      if (r.is_array() && r.size() == 2 && r[0].is_number() && r[1].is_number())
        f.recent.emplace_back(r[0].get<double>(), r[1].get<double>());
  if (f.host_bytes <= 0) return std::nullopt;
  return f;
}

bool timed_in_place(double in_bytes) { return in_bytes > kPoolBytes / 2; }

DeviceEstimate estimate_device(double in, double out, double params, bool timed) {
  DeviceEstimate e;
  const bool large = timed_in_place(in);
  if (large) {
    // Two copies of the inputs and two outputs at once: the reference
    // computes on the copy it hands over (and keeps the last call's with its
    // expected output), the candidate on its own copy (its timed calls read
    // one set of buffers in place, the first set waiting on the host). The
    // profiling process reads the reference's copy of the last call's inputs
    // where it is, and its output takes the place of the candidate's, which
    // waits through the burst with its buffers only and is timed once the
    // profiling process is gone (footprint.device_phases in the worker).
    e.inputs = 2;
    e.outputs = 2;
  } else {
    // The reference computes on a private clone of the copy it hands over;
    // timed, each of the three processes also holds the rotated sets, the
    // last call's inputs and its buffers; the candidate's output is given
    // back while the profiling process runs (as above).
    e.inputs = timed ? 2 + 2 + 2 : 3;
    e.outputs = 2;
    // Up to the regular trials' sets (5 by default), as many as fit in the pool.
    if (timed) e.pool = 3 * std::min(5 * in, std::floor(kPoolBytes / std::max(in, 1.0)) * in);
  }
  e.params = timed ? 3 : 2;
  e.fixed = (timed ? 3 : 2) * kContextBytes + (timed ? kFlushBytes : 0);
  e.bytes = e.inputs * in + e.outputs * out + e.pool + e.params * params + e.fixed;
  return e;
}

double gpu_capacity(double total, int idle) {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  return std::max(total * 0.95 - idle * kContextBytes - 2 * kGiB, kGiB);
}

double device_reservation(const Footprint& f) {
  if (f.device_bytes <= 0) return 0;
  return f.measured ? f.device_bytes * 1.05 + 0.5 * 1024 * 1024 * 1024 : f.device_bytes;
}

bool alone_until_measured(const Footprint& f, std::optional<double> device_capacity) {
  return !f.measured && device_capacity && *device_capacity > 0 && device_reservation(f) > *device_capacity / 8;
}

std::optional<Footprint> FootprintCache::get(const std::string& key) const {
  std::lock_guard lock(mu_);
  std::ifstream in(dir_ / (key + ".json"));
  if (!in) return std::nullopt;
  try {
    return Footprint::from_json(json::parse(in));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void FootprintCache::put(const std::string& key, const Footprint& f) {
  std::lock_guard lock(mu_);
  Footprint out = f;
  out.recent.clear();
  if (f.measured && f.complete) out.recent.emplace_back(f.device_bytes, f.host_bytes);
  {
    std::ifstream in(dir_ / (key + ".json"));
    if (in) {
      try {
        auto old = Footprint::from_json(json::parse(in));
        const auto keep_larger = [&] {
          out.host_bytes = std::max(out.host_bytes, old->host_bytes);
          out.device_bytes = std::max(out.device_bytes, old->device_bytes);
          out.reference_s = std::max(out.reference_s, old->reference_s);
        };
        if (old && old->measured && !f.measured) return;  // an estimate never replaces a measurement
        if (old && old->measured && f.measured) {
          if (old->version == f.version && f.complete && old->complete) {
            // The largest of the last kRecent complete measurements.
            auto recent = old->recent;
            if (recent.empty()) recent.emplace_back(old->device_bytes, old->host_bytes);  // a record from before
            recent.emplace_back(f.device_bytes, f.host_bytes);
            if (recent.size() > Footprint::kRecent)
              recent.erase(recent.begin(), recent.end() - static_cast<std::ptrdiff_t>(Footprint::kRecent));
            out.recent = recent;
            out.device_bytes = out.host_bytes = 0;
            for (const auto& [dev, host] : recent) {
              out.device_bytes = std::max(out.device_bytes, dev);
              out.host_bytes = std::max(out.host_bytes, host);
            }
            out.reference_s = std::max(out.reference_s, old->reference_s);
          } else if (old->version == f.version && !f.complete && !old->complete) {
            keep_larger();
          } else if (!f.complete)
            return;  // it saw less than the record did: the record stays
        } else if (old && f.measured && !f.complete) {
          keep_larger();  // part of an evaluation, over an estimate: it never lowers it
        }
      } catch (const std::exception&) {
      }
    }
  }
  std::error_code ec;
  fs::create_directories(dir_, ec);
  (void)write_file_atomic(dir_ / (key + ".json"), out.to_json().dump(2) + "\n");  // a full disk costs a re-measure
}

double host_memory_available() {
  double avail = 0;
  std::ifstream mi("/proc/meminfo");
  std::string line;
  while (std::getline(mi, line)) {
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream ss(line.substr(13));
      double kb = 0;
      ss >> kb;
      avail = kb * 1024;
    }
  }
  // A cgroup v2 limit (containers, Slurm jobs) may be lower than what the host has free.
  std::ifstream lim("/sys/fs/cgroup/memory.max"), cur("/sys/fs/cgroup/memory.current");
  std::string l, c;
  if (lim >> l && cur >> c && l != "max") {
    try {
      double room = std::stod(l) - std::stod(c);
      if (room > 0 && (avail <= 0 || room < avail)) avail = room;
    } catch (const std::exception&) {
    }
  }
  return avail;
}

json Admission::Ticket::to_json() const {
  json j{{"host_reserved_bytes", host}, {"device_reserved_bytes", device}, {"ran_alone", alone},
         {"exclusive", exclusive},      {"waited_s", waited_s}};
  if (credit > 0) j["device_taken_from_overhead_bytes"] = credit;  // its slot's idle spares
  return j;
}

void Admission::set_device_capacity(int gpu, double bytes) {
  std::lock_guard lock(mu_);
  dev_cap_[gpu] = bytes;
}

std::optional<double> Admission::device_capacity(int gpu) const {
  std::lock_guard lock(mu_);
  return usable(gpu);
}

std::optional<double> Admission::usable(int gpu) const {
  auto it = dev_cap_.find(gpu);
  if (it == dev_cap_.end()) return std::nullopt;
  auto ov = dev_overhead_.find(gpu);
  return std::max(it->second - (ov == dev_overhead_.end() ? 0.0 : ov->second), 0.0);
}

bool Admission::learn_device(int gpu, double capacity, double overhead) {
  {
    std::lock_guard lock(mu_);
    if (dev_cap_.count(gpu)) return false;
    dev_cap_[gpu] = capacity;
    dev_overhead_[gpu] = std::max(overhead, 0.0);
  }
  cv_.notify_all();
  return true;
}

void Admission::add_device_overhead(int gpu, double delta) {
  {
    std::lock_guard lock(mu_);
    dev_overhead_[gpu] = std::max(dev_overhead_[gpu] + delta, 0.0);
  }
  if (delta < 0) cv_.notify_all();  // room for a waiter
}

bool Admission::try_add_device_overhead(int gpu, double delta) {
  std::lock_guard lock(mu_);
  if (delta > 0) {
    auto cap = usable(gpu);
    auto used = dev_used_.find(gpu);
    if (cap && (used == dev_used_.end() ? 0.0 : used->second) + delta > *cap) return false;
  }
  dev_overhead_[gpu] = std::max(dev_overhead_[gpu] + delta, 0.0);
  return true;
}

bool Admission::fits(const Ticket& t) const {
  if (exclusive_running_ > 0) return false;
  if (t.exclusive) return running_ == 0;
  if (host_used_ + t.host > host_cap_) return false;
  if (t.gpu >= 0) {
    auto cap = usable(t.gpu);
    auto used = dev_used_.find(t.gpu);
    double u = used == dev_used_.end() ? 0 : used->second;
    if (cap && u + t.device - credit_now(t) > *cap) return false;
  }
  return true;
}

double Admission::credit_now(const Ticket& t) const {
  if (t.gpu < 0 || t.credit <= 0) return 0;
  auto ov = dev_overhead_.find(t.gpu);
  return ov == dev_overhead_.end() ? 0.0 : std::min(t.credit, ov->second);
}

bool Admission::needs_whole_machine(const Ticket& t) const {
  if (t.exclusive || t.host > host_cap_) return true;
  if (t.gpu < 0) return false;
  auto cap = usable(t.gpu);
  return cap && t.device - credit_now(t) > *cap;
}

bool Admission::waited_long(const Waiter& w, std::chrono::steady_clock::time_point now) const {
  return std::chrono::duration<double>(now - w.since).count() >= pass_bound_s_;
}

bool Admission::ahead(const Waiter& w, const Waiter& me, std::chrono::steady_clock::time_point now) const {
  const bool w_whole = needs_whole_machine(w.ticket), me_whole = needs_whole_machine(me.ticket);
  if (w_whole || me_whole) return w_whole && (!me_whole || w.seq < me.seq);
  const bool w_long = waited_long(w, now), me_long = waited_long(me, now);
  const bool w_first = w_long && (!me_long || w.seq < me.seq);
  // Another GPU's waiter holds this one back only where what keeps it waiting
  // is host memory, which every GPU shares: its own GPU's memory is no
  // business of this GPU's.
  if (w.ticket.gpu != me.ticket.gpu) return w_first && host_used_ + w.ticket.host > host_cap_;
  if (w_long || me_long) return w_first;
  // What it reserves on its GPU (host memory without one): the larger first.
  const auto rank = [](const Ticket& t) { return t.gpu >= 0 ? t.device : t.host; };
  const double wr = rank(w.ticket), mr = rank(me.ticket);
  return wr > mr || (wr == mr && w.seq < me.seq);
}

bool Admission::first_in_line(const Waiter& me) const {
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [seq, w] : waiting_) {
    if (seq == me.seq || !ahead(w, me, now)) continue;
    if (could_start(w.ticket)) return false;  // it goes first
    if (waited_long(w, now)) return false;    // held for it
  }
  return true;
}

void Admission::set_pass_bound_s(double s) {
  std::lock_guard lock(mu_);
  pass_bound_s_ = s;
}

std::optional<Admission::Ticket> Admission::acquire(int gpu, double host, double device, bool exclusive,
                                                    const std::function<bool()>& stop, double credit) {
  Ticket t;
  t.gpu = gpu;
  t.host = host;
  t.device = device;
  t.credit = gpu >= 0 ? std::max(credit, 0.0) : 0.0;
  t.exclusive = exclusive;
  auto t0 = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  Waiter me;
  me.seq = next_seq_++;
  me.since = t0;
  me.ticket = t;
  waiting_.emplace(me.seq, me);
  for (;;) {
    bool stopped = false;
    try {
      stopped = stop && stop();
    } catch (...) {
      waiting_.erase(me.seq);  // no one is held for a waiter that is gone
      throw;
    }
    if (stopped) {
      waiting_.erase(me.seq);
      lock.unlock();
      cv_.notify_all();  // the line changed
      return std::nullopt;
    }
    if (first_in_line(me)) {
      if (fits(t)) break;
      if (running_ == 0) {  // too large even for an idle machine: it runs alone
        t.alone = true;
        break;
      }
    }
    cv_.wait_for(lock, std::chrono::milliseconds(500));
  }
  waiting_.erase(me.seq);
  host_used_ += t.host;
  if (gpu >= 0) {
    dev_used_[gpu] += t.device;
    // What it takes over from the overhead (its slot's idle spares) is its own now.
    const double c = credit_now(t);
    t.credit = c;
    if (c > 0) dev_overhead_[gpu] -= c;
  }
  ++running_;
  if (t.exclusive || t.alone) ++exclusive_running_;
  t.waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  lock.unlock();
  cv_.notify_all();  // the next in line may fit beside it
  return t;
}

void Admission::release(const Ticket& t) {
  {
    std::lock_guard lock(mu_);
    host_used_ -= t.host;
    if (t.gpu >= 0) dev_used_[t.gpu] -= t.device;
    --running_;
    if (t.exclusive || t.alone) --exclusive_running_;
  }
  cv_.notify_all();
}

void Admission::wake() { cv_.notify_all(); }

int Admission::running() const {
  std::lock_guard lock(mu_);
  return running_;
}

}  // namespace mk::eval
