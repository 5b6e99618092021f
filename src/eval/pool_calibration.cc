// The worker pool's calibration (--tolerance calibrated|FILE, `mkevolve
// calibrate`): the worker's `calibrate` op on a slot, admitted by the
// problem's footprint, and the calibration files it reads and adds to.
#include "eval/pool.h"

#include <algorithm>
#include <future>

#include "eval/calibration.h"
#include "eval/pool_internal.h"
#include "eval/sources.h"

namespace mk::eval {

namespace fs = std::filesystem;
using nlohmann::json;

using detail::absolute_path;
using detail::clip_tail;
using detail::kGiB;

namespace {
/// What one calibration of a problem may hold, given its footprint: the
/// reference's data in its own dtype plus the same in float64 (four times a
/// 16-bit type's bytes), so 5 x (inputs + outputs), and never less than one
/// evaluation of the problem holds. On the GPU the data lives there; in test
/// mode on the host. {host, device} bytes.
std::pair<double, double> calibration_reservation(const Footprint& fp, bool test_cpu) {
  double data = 5 * (fp.input_bytes + fp.output_bytes);
  double host = std::max(fp.host_bytes, test_cpu ? data + 3 * kGiB : 0.0);
  double dev = test_cpu ? 0.0 : std::max(fp.device_bytes, data + 0.6 * kGiB);
  return {host, dev};
}
}  // namespace

Result<json> WorkerPool::calibrate_on(Slot& slot, const fs::path& problem, int runs, bool test_cpu, int seed) {
  if (slot.gpu < 0 && !test_cpu) return Error{"no CUDA GPU visible: calibration needs a GPU"};
  if (auto st = ensure_server(slot); !st) return Error{st.error()};
  // Memory admission as for an evaluation of the problem (a calibration runs
  // beside the evaluations of other problems): by its footprint, alone while
  // none is known.
  std::optional<Admission::Ticket> ticket;
  if (opts_.memory_admission) {
    std::optional<Footprint> fp;
    if (auto ph = hash_sources(problem)) fp = default_footprint(slot, problem, *ph, test_cpu);
    if (std::string what = too_large(slot, fp); !what.empty())
      return Error{problem.string() + ": one evaluation of this problem needs " + what};
    auto [host, dev] = fp ? calibration_reservation(*fp, test_cpu) : std::pair<double, double>{0, 0};
    ticket = admission_->acquire(slot.gpu, host, dev, !fp, [this] { return stopping(); });
    if (!ticket) return Error{"the evaluator shut down before calibrating " + problem.string()};
  }
  json msg{{"op", "calibrate"},
           {"problem", problem.string()},
           {"runs", runs},
           {"options", {{"test_cpu", test_cpu}, {"seed", seed}}}};
  // Each run draws five kinds of inputs and runs the reference twice on each.
  auto rep = call(slot, std::move(msg), opts_.deadline_factor * 600 * std::max(1.0, runs / 10.0) + opts_.grace_s);
  if (ticket) admission_->release(*ticket);
  if (rep.outcome != Server::Outcome::kAnswered)
    return Error{"the evaluation server failed while calibrating " + problem.string() + ": " +
                 clip_tail(rep.detail, 500)};
  const json& m = rep.message;
  if (m.value("type", "") == "error")
    return Error{m.contains("message") && m["message"].is_string() ? m["message"].get<std::string>()
                                                                   : problem.string() + ": calibration failed"};
  json out = m;
  out.erase("id");
  out.erase("type");
  if (auto st = check_calibration_answer(out); !st)
    return Error{"the worker's calibration of " + problem.string() + ": " + st.error()};
  return out;
}

Result<json> WorkerPool::calibrate(const fs::path& problem, int runs, bool test_cpu, int seed) {
  auto promise = std::make_shared<std::promise<Result<json>>>();
  auto fut = promise->get_future();
  fs::path p = absolute_path(problem);
  Job job;
  job.run = [this, promise, p, runs, test_cpu, seed](Slot& slot) {
    promise->set_value(calibrate_on(slot, p, runs, test_cpu, seed));
  };
  job.cancel = [promise](const std::string& why) { promise->set_value(Error{why}); };
  enqueue(std::move(job));
  return fut.get();
}

Result<json> WorkerPool::calibrated_for(Slot& slot, const EvalRequest& req, const std::string& problem_hash) {
  const fs::path file = absolute_path(req.options.calibration);
  const std::string flight = file.string() + "\n" + problem_hash;
  std::shared_ptr<CalibrationFile> cf;
  std::shared_ptr<std::promise<Result<json>>> mine;
  std::shared_future<Result<json>> theirs;
  {
    std::lock_guard lock(calib_mu_);
    auto& slot_file = calib_files_[file.string()];
    if (!slot_file) {
      auto loaded = CalibrationFile::load(file);
      if (!loaded) {
        calib_files_.erase(file.string());
        return Error{loaded.error()};
      }
      slot_file = std::make_shared<CalibrationFile>(*loaded);
    }
    cf = slot_file;
    if (auto e = cf->entry(problem_hash)) return calibrated_option(*e, file.string());
    if (auto it = calib_inflight_.find(flight); it != calib_inflight_.end()) {
      theirs = it->second;
    } else {
      mine = std::make_shared<std::promise<Result<json>>>();
      calib_inflight_[flight] = mine->get_future().share();
    }
  }
  if (theirs.valid()) {
    auto r = theirs.get();
    if (!r) return Error{r.error()};
    return calibrated_option(*r, file.string());
  }
  // Not in the file: measured here, on this slot, with the evaluation's seed.
  Result<json> r = calibrate_on(slot, absolute_path(req.problem), req.options.calibration_runs, req.options.test_cpu,
                                req.options.seed);
  if (r) {
    if (auto st = cf->put(problem_hash, absolute_path(req.problem), *r); !st) r = Error{st.error()};
  }
  mine->set_value(r);
  {
    std::lock_guard lock(calib_mu_);
    calib_inflight_.erase(flight);
  }
  if (!r) return Error{r.error()};
  return calibrated_option(*r, file.string());
}

}  // namespace mk::eval
