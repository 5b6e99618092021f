#include "support/fake_evaluator.h"

#include <chrono>
#include <regex>
#include <thread>

#include "util/fs.h"

namespace mk::testing {

namespace {

double number_after(const std::string& line, const std::string& key, double dflt) {
  std::regex re(key + R"(=([0-9.eE+-]+))");
  std::smatch m;
  if (std::regex_search(line, m, re)) return std::stod(m[1]);
  return dflt;
}

template <class T>
std::future<T> ready(T v) {
  std::promise<T> p;
  p.set_value(std::move(v));
  return p.get_future();
}

eval::Verdict make_correct(double base_ms, double kernel_ms) {
  eval::Verdict r;
  r.status = eval::VerdictStatus::kCorrect;
  r.runtime = {kernel_ms, kernel_ms, true};
  r.compiled = {base_ms, base_ms, true};
  r.eager = {base_ms * 1.25, base_ms * 1.25, true};
  r.speedup_compile = base_ms / kernel_ms;
  r.speedup_eager = base_ms * 1.25 / kernel_ms;
  return r;
}

}  // namespace

eval::Verdict FakeEvaluator::judge_source(const std::string& src, bool allow_pytorch) {
  static const std::regex marker(R"(#\s*FAKE:\s*([a-z_]+)([^\n]*))");
  std::smatch m;
  eval::Verdict r;
  if (!std::regex_search(src, m, marker)) {
    if (src.find("class ModelNew(Model)") != std::string::npos) {
      if (!allow_pytorch) {
        r.status = eval::VerdictStatus::kCheating;
        r.kind = "pytorch_compute";
        r.reasons = {"the subkernel is the PyTorch reference"};
        return r;
      }
      r = make_correct(number_after(src, "base", 1.0), number_after(src, "base", 1.0));
      r.uses_pytorch = true;
      return r;
    }
    r.status = eval::VerdictStatus::kCompileError;
    r.kind = "syntax_error";
    r.feedback = "fake evaluator: no FAKE marker in the source";
    return r;
  }
  std::string status = m[1];
  std::string rest = m[2];
  if (status == "correct") {
    double base = number_after(rest, "base", 1.0);
    double speedup = number_after(rest, "speedup", 1.0);
    r = make_correct(base, base / speedup);
    // "bytes=N": a work record as the worker writes one (checks.work), for the roofline.
    if (double bytes = number_after(rest, "bytes", 0); bytes > 0) {
      nlohmann::json work = {{"inputs_bytes", bytes / 2}, {"output_bytes", bytes / 2}, {"params_bytes", 0},
                             {"bytes", bytes},          {"flops", 0},                {"dtype", "float32"}};
      r.raw = {{"checks", {{"work", work}}}};
    }
    return r;
  }
  auto st = eval::status_from_string(status);
  r.status = st ? *st : eval::VerdictStatus::kCrashed;
  r.kind = status == "incorrect" ? "mismatch" : status;
  r.feedback = "fake evaluator: " + status + rest;
  if (r.status == eval::VerdictStatus::kIncorrect) r.max_abs_err = 0.5;
  return r;
}

FakeEvaluator::~FakeEvaluator() {
  for (auto& f : prefetch_) f.wait();
}

void FakeEvaluator::take_slot(int priority, bool background) {
  std::unique_lock<std::mutex> lk(mu_);
  auto me = std::make_tuple(background, -priority, arrivals_++);
  waiting_.insert(me);
  slot_cv_.wait(lk, [&] { return slots <= 0 || (busy_ < slots && *waiting_.begin() == me); });
  waiting_.erase(me);
  ++busy_;
  slot_cv_.notify_all();  // the next in line may fit too
}

void FakeEvaluator::give_slot() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    --busy_;
  }
  slot_cv_.notify_all();
}

namespace {
/// As the pool keys baselines: by the problem's content (its path where it cannot be read).
std::string baseline_key(const std::string& problem) {
  auto text = read_file(problem);
  return text ? "content:" + *text : "path:" + problem;
}
}  // namespace

void FakeEvaluator::baselines(const std::string& problem) {
  std::shared_future<void> fut;
  std::shared_ptr<std::promise<void>> mine;
  const std::string key = baseline_key(problem);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (auto it = baselines_.find(key); it != baselines_.end()) {
      fut = it->second;
    } else {
      mine = std::make_shared<std::promise<void>>();
      fut = mine->get_future().share();
      baselines_[key] = fut;
      measured_.push_back(problem);
      ++in_evals_;
    }
  }
  if (mine) {  // measured here, in the caller's slot
    std::this_thread::sleep_for(std::chrono::duration<double>(baseline_delay_s));
    mine->set_value();
  }
  fut.wait();
}

void FakeEvaluator::prefetch_baselines(const std::filesystem::path& problem, const eval::EvalOptions& options) {
  if (baseline_delay_s <= 0 || !options.measure_perf) return;
  auto mine = std::make_shared<std::promise<void>>();
  {
    // Registered before this returns, so that no evaluation submitted later measures them again.
    std::lock_guard<std::mutex> lk(mu_);
    const std::string key = baseline_key(problem.string());
    if (baselines_.count(key)) return;
    baselines_[key] = mine->get_future().share();
    measured_.push_back(problem.string());
  }
  auto f = std::async(std::launch::async, [this, mine] {
    take_slot(0, /*background=*/true);
    std::this_thread::sleep_for(std::chrono::duration<double>(baseline_delay_s));
    give_slot();
    mine->set_value();
  });
  std::lock_guard<std::mutex> lk(mu_);
  prefetch_.push_back(std::move(f));
}

int FakeEvaluator::baselines_in_evals() const {
  std::lock_guard<std::mutex> lk(mu_);
  return in_evals_;
}

std::vector<std::string> FakeEvaluator::baselines_measured() const {
  std::lock_guard<std::mutex> lk(mu_);
  return measured_;
}

std::future<eval::Verdict> FakeEvaluator::submit(eval::EvalRequest req) {
  if (on_submit) on_submit(req);
  {
    std::lock_guard<std::mutex> lk(mu_);
    requests_.push_back(req);
  }
  // Simulated time, as the pool's: a slot, the evaluation, then the baselines in the same slot.
  double queued_s = 0, eval_s = 0, baseline_s = 0;
  if (timed()) {
    auto q0 = std::chrono::steady_clock::now();
    take_slot(ignore_priority ? 0 : req.priority);
    auto t0 = std::chrono::steady_clock::now();
    queued_s = std::chrono::duration<double>(t0 - q0).count();
    std::this_thread::sleep_for(std::chrono::duration<double>(eval_delay_s));
    if (baseline_delay_s > 0 && req.options.measure_perf) {
      auto b0 = std::chrono::steady_clock::now();
      baselines(req.problem.string());
      baseline_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
    }
    give_slot();
    eval_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  eval::Verdict r = judge(req);
  if (timed()) {
    r.queued_s = queued_s;
    r.eval_s = eval_s;
    r.baseline_s = baseline_s;
  }
  return ready(std::move(r));
}

eval::Verdict FakeEvaluator::judge(const eval::EvalRequest& req) {
  eval::Verdict r;
  if (req.kernel.filename() == "decomposed_solution.py") {
    auto dir = req.kernel.parent_path() / "subkernel_implementations";
    std::vector<std::filesystem::path> files;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (e.path().extension() == ".py" && e.path().filename() != "__init__.py") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    double base = 0, kernel = 0, slowdown = 1;
    std::string crash_in, call_fails;
    bool ok = !files.empty(), e2e_fail = false, e2e_no_verdict = false, e2e_crash = false, pytorch = false;
    nlohmann::json per = nlohmann::json::object();
    std::string why;
    for (const auto& f : files) {
      auto src = read_file(f);
      std::string s = src ? *src : "";
      if (s.find("# FAKE-E2E: incorrect") != std::string::npos) e2e_fail = true;
      if (s.find("# FAKE-E2E: no_verdict") != std::string::npos) e2e_no_verdict = true;
      if (s.find("# FAKE-E2E: runtime_error") != std::string::npos) e2e_crash = true;
      // The composition raises inside this subkernel's own file (a stride
      // assertion that its contiguous local inputs never tripped).
      if (s.find("# FAKE-E2E: raises_here") != std::string::npos) crash_in = f.filename().string();
      // The composition fails where the top level calls this subkernel
      // (its ModelNew takes other arguments than the top level passes).
      if (s.find("# FAKE-E2E: raises_at_call") != std::string::npos) call_fails = f.stem().string();
      // Right on the search's inputs (seed 42), wrong on any other seed.
      if (s.find("# FAKE-E2E: seed42_only") != std::string::npos && req.options.seed != 42) e2e_fail = true;
      // The harness fails on any seed but the search's: the final check gets no verdict.
      if (s.find("# FAKE-E2E: harness_fails_after_seed42") != std::string::npos && req.options.seed != 42)
        e2e_no_verdict = true;
      // "# FAKE-E2E: slower_after_seed42=F": on any seed but the search's
      // (the final check's) the composed module runs F times slower.
      if (auto at = s.find("# FAKE-E2E: slower_after_seed42="); at != std::string::npos && req.options.seed != 42)
        slowdown *= std::stod(s.substr(at + std::string("# FAKE-E2E: slower_after_seed42=").size()));
      auto sub = judge_source(s, req.options.allow_pytorch);
      if (!sub.correct()) {
        ok = false;
        why += f.stem().string() + ": " + eval::to_string(sub.status) + "; ";
        continue;
      }
      pytorch = pytorch || sub.uses_pytorch;
      base += sub.compiled.median_ms;
      kernel += sub.runtime.median_ms;
      // "# FAKE-E2E: instances=N": the composed forward calls this subkernel N
      // times, so its share of the end-to-end run is N x its standalone time.
      double instances = 1;
      if (auto at = s.find("# FAKE-E2E: instances="); at != std::string::npos)
        instances = std::stod(s.substr(at + std::string("# FAKE-E2E: instances=").size()));
      kernel += (instances - 1) * sub.runtime.median_ms;
      base += (instances - 1) * sub.compiled.median_ms;
      per[f.stem().string()] = instances * sub.runtime.median_ms;
    }
    if (ok && e2e_no_verdict) {
      r.status = eval::VerdictStatus::kNoVerdict;
      r.kind = "reference_failed";
      r.feedback = "fake evaluator: the reference died";
    } else if (ok && !crash_in.empty()) {
      r.status = eval::VerdictStatus::kRuntimeError;
      r.kind = "runtime_error";
      r.feedback = "Traceback (most recent call last):\n  File \"" + req.kernel.parent_path().string() +
                   "/decomposed_solution.py\", line 12, in forward\n    y = self.a(x)\n  File \"" +
                   (dir / crash_in).string() +
                   "\", line 30, in forward\n    assert x.is_contiguous(), \"expects a contiguous input\"\n"
                   "AssertionError: expects a contiguous input";
    } else if (ok && !call_fails.empty()) {
      // As the worker words it: frames relative to the package, code lines below.
      r.status = eval::VerdictStatus::kRuntimeError;
      r.kind = "construct_error";
      r.feedback = "ModelNew(...) raised while constructing ModelNew: TypeError: ModelNew.__init__() got an "
                   "unexpected keyword argument 'n'\nTraceback (most recent call last, worker frames removed):\n"
                   "  decomposed_solution.py:9 in __init__\n    self." + call_fails + " = M_" + call_fails + "(n)";
    } else if (ok && e2e_crash) {
      r.status = eval::VerdictStatus::kRuntimeError;
      r.kind = "runtime_error";
      r.feedback = "fake evaluator: the composed module raised";
    } else if (ok && !e2e_fail) {
      r = make_correct(base, kernel * slowdown);
      r.uses_pytorch = pytorch;
      r.raw = {{"subkernel_runtime_ms", per}};
    } else {
      r.status = eval::VerdictStatus::kIncorrect;
      r.kind = "mismatch";
      r.max_abs_err = 0.25;
      r.feedback = e2e_fail && ok ? "fake evaluator: the composition disagrees with the reference" : why;
    }
  } else {
    auto src = read_file(req.kernel);
    int n;
    {
      std::lock_guard<std::mutex> lk(mu_);
      n = seen_[req.kernel.string()]++;
    }
    if (src && src->find("# FAKE: no_verdict_then_correct") != std::string::npos) {
      if (n == 0) {
        r.status = eval::VerdictStatus::kNoVerdict;
        r.kind = "reference_failed";
        r.feedback = "fake evaluator: the reference died";
      } else {
        r = make_correct(1.0, 1.0 / 1.1);
      }
    } else {
      r = judge_source(src ? *src : "", req.options.allow_pytorch);
    }
  }
  if (no_compile_baseline) {
    r.compiled = {};
    r.speedup_compile = 0;
  }
  return r;
}

std::future<eval::DecompositionResult> FakeEvaluator::verify_decomposition(eval::DecompositionRequest req) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    decomp_.push_back(req);
  }
  eval::DecompositionResult r;
  r.ok = true;
  std::vector<std::filesystem::path> files = {req.decomposed};
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(req.subproblems_dir, ec)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    auto src = read_file(f);
    if (src && src->find("# FAKE: invalid-decomposition") != std::string::npos) {
      r.ok = false;
      r.failures.push_back(f.filename().string() + ": fake verification failure (outputs differ)");
    }
    // The top level passes this subproblem a transposed view of a 4x8 input.
    if (src && src->find("# FAKE: strided-input") != std::string::npos)
      r.input_layouts[f.stem().string()] = nlohmann::json::array({nlohmann::json::array(
          {{{"shape", {4, 8}}, {"stride", {1, 4}}, {"offset", 0}, {"dtype", "float32"}, {"contiguous", false}}})});
  }
  // An honest re-expression: equal up to rounding, well inside the bound.
  r.max_abs_err = r.ok ? 1.5e-8 : 0.25;
  r.tolerance = {{"fraction", req.tol_fraction},
                 {"outputs", nlohmann::json::array({{{"output", "output"}, {"dtype", "float32"}, {"atol", 1e-5},
                                                     {"rtol", 1e-5}, {"max_abs_err", *r.max_abs_err}}})}};
  r.feedback = r.ok ? "" : "fake: the decomposed module's output differs from the original";
  return ready(std::move(r));
}

Result<eval::PinnedSources> FakeEvaluator::pin_precision(const std::map<std::string, std::string>& files) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++pins_;
  }
  eval::PinnedSources out;
  nlohmann::json pinned = nlohmann::json::array();
  for (const auto& [name, src] : files) {
    out.files[name] = src + "# PINNED by the fake pin_precision\n";
    pinned.push_back({{"file", name}, {"line", 1}, {"what", "dot"}});
  }
  out.report = {{"pinned", pinned}, {"left", nlohmann::json::array()}, {"precision", "ieee"}};
  return out;
}

int FakeEvaluator::pin_calls() const {
  std::lock_guard<std::mutex> lk(mu_);
  return pins_;
}

nlohmann::json FakeEvaluator::hardware_info() {
  return {{"gpus", {{{"name", "Fake GPU"}, {"capability", {9, 0}}, {"sm_count", 132}, {"memory_bytes", 1LL << 37}}}}};
}

std::vector<eval::EvalRequest> FakeEvaluator::requests() const {
  std::lock_guard<std::mutex> lk(mu_);
  return requests_;
}

std::vector<eval::DecompositionRequest> FakeEvaluator::decomposition_requests() const {
  std::lock_guard<std::mutex> lk(mu_);
  return decomp_;
}

int FakeEvaluator::e2e_count() const {
  std::lock_guard<std::mutex> lk(mu_);
  int n = 0;
  for (const auto& r : requests_) n += r.kernel.filename() == "decomposed_solution.py";
  return n;
}

}  // namespace mk::testing
