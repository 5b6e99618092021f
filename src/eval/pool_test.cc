// The pool against tests/fakes/fake_worker.py: deadlines, restarts, statuses,
// caches, concurrency, environment scrubbing and process cleanup.
#include "eval/pool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <chrono>
#include <thread>

#include "eval/proc.h"
#include "support/testing.h"
#include "util/fs.h"

namespace mk::eval {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Processes (not zombies) whose environment holds MKEVOLVE_FAKE_GRANDCHILD=marker.
std::vector<pid_t> with_marker(const std::string& marker) {
  std::vector<pid_t> out;
  std::string needle = "MKEVOLVE_FAKE_GRANDCHILD=" + marker;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "environ", std::ios::binary);
    std::string entry;
    while (std::getline(in, entry, '\0'))
      if (entry == needle && process_alive(std::stoi(name))) out.push_back(std::stoi(name));
  }
  return out;
}

class PoolTest : public ::testing::Test {
 protected:
  TempDir dir{"mk-pool-test"};

  PoolOptions options(int ngpus = 1) {
    PoolOptions o;
    o.python = mk::testing::test_python();
    o.worker_command = {mk::testing::test_python(), (mk::testing::repo_root() / "tests/fakes/fake_worker.py").string()};
    std::vector<Gpu> gpus;
    for (int i = 0; i < ngpus; ++i) gpus.push_back(Gpu{i, std::to_string(i), "Fake GPU", ""});
    o.gpus = gpus;
    o.work_dir = dir.path() / "pool";
    o.cache_dir = dir.path() / "cache";
    o.baseline_dir = dir.path() / "baselines";
    o.grace_s = 1;
    o.start_timeout_s = 20;
    o.baseline_timeout_s = 5;
    o.extra_env["MKEVOLVE_WORKER_FAKE_LOG"] = log_path().string();
    return o;
  }
  std::unique_ptr<WorkerPool> make(PoolOptions o) {
    auto p = WorkerPool::create(std::move(o));
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error());
    return p.ok() ? std::move(*p) : nullptr;
  }
  fs::path log_path() const { return dir.path() / "fake.log"; }
  /// The fake worker's log lines "OP WHAT", in order, OP in ops.
  std::vector<std::string> log_lines(const std::set<std::string>& ops) const {
    std::ifstream in(log_path());
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);)
      if (ops.count(line.substr(0, line.find(' ')))) out.push_back(line);
    return out;
  }
  /// The stem of the file a log line names last ("eval /x/kernels/a.py" -> "a").
  static std::string stem_of(const std::string& line) {
    return fs::path(line.substr(line.rfind(' ') + 1)).stem().string();
  }
  /// Waits up to `seconds` until the fake worker has logged op at least n times.
  void wait_logged(const std::string& op, int n, double seconds) const {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (logged(op) < n && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  /// The pool's one slot made busy for 0.5 s (its evaluation already started).
  std::future<Verdict> occupy(WorkerPool& pool) {
    auto busy = pool.submit(request(kernel("busy", "# FAKE: slow 0.5\n# FAKE: correct\n")));
    wait_logged("eval", 1, 2);
    return busy;
  }
  int logged(const std::string& op) const {
    std::ifstream in(log_path());
    std::string line;
    int n = 0;
    while (std::getline(in, line))
      if (line.rfind(op + " ", 0) == 0) ++n;
    return n;
  }
  fs::path problem() {
    auto p = dir.path() / "problem.py";
    if (!fs::exists(p)) {
      EXPECT_TRUE(write_file_atomic(p, "class Model: pass\ndef get_inputs(): return []\n").ok());
    }
    return p;
  }
  fs::path kernel(const std::string& name, const std::string& directives) {
    auto p = dir.path() / "kernels" / (name + ".py");
    EXPECT_TRUE(write_file_atomic(p, "class ModelNew: pass\n" + directives).ok());
    return p;
  }
  /// Two slots on a fake 100 GB GPU, problems estimated small: an
  /// evaluation's GPU limit is then half of what the GPU has usable (less the
  /// idle spares' contexts), so its admission record shows the overhead.
  /// A 100 GiB GPU whose problem's estimate is `estimate` (host,device GiB;
  /// "4,4" is too large to trust: the first evaluation measures, alone).
  PoolOptions overhead_options(double spares_idle_refill_s, int slots = 2, const std::string& estimate = "0.1,0.1") {
    auto o = options();
    o.slots_per_gpu = slots;
    o.cache_dir.clear();
    o.host_capacity_bytes = 1000.0 * (1 << 30);
    o.spares_idle_refill_s = spares_idle_refill_s;
    o.extra_env["MKEVOLVE_WORKER_FAKE_GPU_MEMORY_GB"] = "100";
    o.extra_env["MKEVOLVE_WORKER_FAKE_FOOTPRINT"] = estimate;
    return o;
  }
  /// The most evaluations a `# FAKE: concurrency COUNT` kernel saw at once.
  static int most_at_once(const fs::path& count) {
    std::ifstream in(count.string() + ".max");
    int most = 0;
    in >> most;
    return most;
  }
  static double device_limit(const Verdict& v) {
    return v.raw["checks"]["admission"]["device_limit_bytes"].get<double>();
  }
  EvalRequest untimed(const fs::path& k, double timeout_s) {
    auto r = request(k, timeout_s);
    r.options.measure_perf = false;
    return r;
  }
  EvalRequest request(const fs::path& k, double timeout_s = 5) {
    EvalRequest r;
    r.problem = problem();
    r.kernel = k;
    r.options.timeout_s = timeout_s;
    return r;
  }
};

TEST(ResolvePython, FlagThenEnvironmentThenConfigThenDefault) {
  ::unsetenv("MKEVOLVE_PYTHON");
  // Nothing chosen: the first default interpreter with torch (python3 when none has it).
  const std::string chosen = resolve_python("", "");
  EXPECT_EQ(chosen, first_python_with_torch(default_pythons()));
  EXPECT_EQ(resolve_python("", "/opt/py"), "/opt/py");
  ::setenv("MKEVOLVE_PYTHON", "/env/py", 1);
  EXPECT_EQ(resolve_python("", "/opt/py"), "/env/py");
  EXPECT_EQ(resolve_python("/flag/py", "/opt/py"), "/flag/py");
  ::unsetenv("MKEVOLVE_PYTHON");
}

// A python3 first on PATH without torch (pyenv's, a venv's) is passed over for
// one that has it, as scripts/demo.sh does; an interpreter that does not exist
// is skipped; none with torch gives the first.
TEST(ResolvePython, TheFirstInterpreterWithTorch) {
  TempDir dir;
  auto script = [&](const std::string& name, bool has_torch) {
    fs::path p = dir.path() / name;
    EXPECT_TRUE(write_file_atomic(p, has_torch ? "#!/bin/sh\nexit 0\n" : "#!/bin/sh\nexit 1\n").ok());
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  };
  const std::string without = script("py-without", false), with = script("py-with", true);
  EXPECT_EQ(first_python_with_torch({without, (dir.path() / "missing").string(), with}), with);
  EXPECT_EQ(first_python_with_torch({without}), without);
}

TEST_F(PoolTest, CorrectAndIncorrectWithSpeedups) {
  auto pool = make(options());
  Verdict ok = pool->evaluate(request(kernel("ok", "# FAKE: correct 1.0\n")));
  EXPECT_EQ(ok.status, VerdictStatus::kCorrect) << ok.feedback;
  EXPECT_DOUBLE_EQ(ok.runtime.median_ms, 1.0);
  EXPECT_DOUBLE_EQ(ok.eager.median_ms, 4.0);
  EXPECT_DOUBLE_EQ(ok.compiled.median_ms, 2.0);
  EXPECT_DOUBLE_EQ(ok.speedup_eager, 4.0);
  EXPECT_DOUBLE_EQ(ok.speedup_compile, 2.0);
  EXPECT_EQ(ok.gpu, 0);
  EXPECT_FALSE(ok.cached);
  Verdict bad = pool->evaluate(request(kernel("bad", "# FAKE: incorrect\n")));
  EXPECT_EQ(bad.status, VerdictStatus::kIncorrect);
  EXPECT_EQ(bad.kind, "mismatch");
  EXPECT_NE(bad.feedback.find("mismatch at [0, 3]"), std::string::npos);
  EXPECT_DOUBLE_EQ(bad.speedup_compile, 0);  // 0 unless correct
  EXPECT_DOUBLE_EQ(bad.eager.median_ms, 4.0);  // baselines still reported
  EXPECT_EQ(pool->stats().restarts, 0);
  EXPECT_EQ(pool->stats().starts, 1);
}

TEST_F(PoolTest, HangIsATimeoutWithinTheDeadlineAndTheServerIsReplaced) {
  auto pool = make(options());
  auto t0 = std::chrono::steady_clock::now();
  Verdict r = pool->evaluate(request(kernel("hang", "# FAKE: hang\n"), 0.5));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.status, VerdictStatus::kTimeout);
  EXPECT_EQ(r.kind, "hang");
  EXPECT_NE(r.feedback.find("within 3 s"), std::string::npos) << r.feedback;
  EXPECT_GE(took, 3.0);  // the pool waited for its full deadline (4 x timeout + grace), no less
  EXPECT_EQ(pool->stats().restarts, 1);
  Verdict next = pool->evaluate(request(kernel("ok", "# FAKE: correct\n")));
  EXPECT_EQ(next.status, VerdictStatus::kCorrect) << next.feedback;
  EXPECT_EQ(pool->stats().starts, 2);
}

TEST_F(PoolTest, SlowAnswerWithinTheDeadlineIsKept) {
  auto pool = make(options());
  Verdict r = pool->evaluate(request(kernel("slow", "# FAKE: progress\n# FAKE: slow 0.3\n# FAKE: correct\n"), 5));
  EXPECT_EQ(r.status, VerdictStatus::kCorrect) << r.feedback;
  EXPECT_EQ(pool->stats().restarts, 0);
  // The pool says where the time went: the worker slept 0.3 s inside the evaluation.
  EXPECT_GE(r.eval_s, 0.3);
  EXPECT_GE(r.queued_s, 0.0);
}

// The first evaluation on a slot without a server waits for its start: the
// verdict says how long (server_start_s, within eval_s) and what the server
// said of it; the next one on the same server waited for none.
TEST_F(PoolTest, AnEvaluationSaysHowLongItWaitedForItsServerToStart) {
  auto o = options();
  o.extra_env["MKEVOLVE_WORKER_FAKE_HELLO"] = "slow 0.4";
  auto pool = make(o);
  Verdict first = pool->evaluate(request(kernel("a", "# FAKE: correct\n")));
  ASSERT_EQ(first.status, VerdictStatus::kCorrect) << first.feedback;
  EXPECT_GE(first.server_start_s, 0.4);
  EXPECT_LE(first.server_start_s, first.eval_s);
  ASSERT_TRUE(first.checks().contains("server_startup_s"));
  EXPECT_DOUBLE_EQ(first.checks()["server_startup_s"]["total"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(first.to_json()["server_start_s"].get<double>(), first.server_start_s);
  Verdict second = pool->evaluate(request(kernel("b", "# FAKE: correct\n")));
  ASSERT_EQ(second.status, VerdictStatus::kCorrect) << second.feedback;
  EXPECT_DOUBLE_EQ(second.server_start_s, 0);
  EXPECT_FALSE(second.checks().contains("server_startup_s"));
  // A copy of the verdict (a cache entry, a record) carries none of the pool's clocks.
  EXPECT_FALSE(summary_json(first).contains("server_start_s"));
  Verdict copy = first;
  copy.clear_pool_clocks();
  EXPECT_FALSE(copy.checks().contains("server_startup_s"));
}

// Found by review: a verdict from the cache, found after its slot's server
// had started for it, said it had waited for that start.
TEST_F(PoolTest, ACacheHitSaysNoServerStart) {
  auto k = kernel("hit", "# FAKE: correct\n");
  {
    auto pool = make(options());
    ASSERT_EQ(pool->evaluate(request(k)).status, VerdictStatus::kCorrect);
  }
  auto o = options();
  o.extra_env["MKEVOLVE_WORKER_FAKE_HELLO"] = "slow 0.4";
  auto pool = make(o);
  Verdict hit = pool->evaluate(request(k));
  ASSERT_TRUE(hit.cached);
  EXPECT_EQ(logged("eval"), 1);
  EXPECT_DOUBLE_EQ(hit.server_start_s, 0);
  EXPECT_FALSE(hit.checks().contains("server_startup_s"));
}

TEST_F(PoolTest, ServerThatExitsOrIsKilledIsCrashedAndReplaced) {
  // Process-group mode: inside a PID namespace the server is its namespace's
  // init, which cannot SIGKILL itself (the namespace protects it).
  auto o = options();
  o.isolation = PoolOptions::Isolation::kProcessGroup;
  auto pool = make(o);
  Verdict e = pool->evaluate(request(kernel("exit", "# FAKE: exit\n")));
  EXPECT_EQ(e.status, VerdictStatus::kCrashed);
  EXPECT_EQ(e.kind, "server_died");
  EXPECT_NE(e.feedback.find("exit status 3"), std::string::npos) << e.feedback;
  Verdict k = pool->evaluate(request(kernel("kill", "# FAKE: kill\n")));
  EXPECT_EQ(k.status, VerdictStatus::kCrashed);
  EXPECT_NE(k.feedback.find("signal 9"), std::string::npos) << k.feedback;
  Verdict next = pool->evaluate(request(kernel("ok", "# FAKE: correct\n")));
  EXPECT_EQ(next.status, VerdictStatus::kCorrect) << next.feedback;
  // Each death is tried once more, alone, before it is the candidate's.
  EXPECT_EQ(pool->stats().restarts, 4);
  EXPECT_EQ(pool->stats().retries, 2);
}

TEST_F(PoolTest, ANoVerdictIsRetriedAndNeverCached) {
  auto pool = make(options());
  auto k = kernel("ref_dies", "# FAKE: no_verdict\n");
  Verdict r = pool->evaluate(request(k));
  EXPECT_EQ(r.status, VerdictStatus::kNoVerdict);
  EXPECT_EQ(r.kind, "reference_failed");
  EXPECT_EQ(pool->stats().retries, 2);
  EXPECT_EQ(pool->stats().no_verdicts, 1);
  EXPECT_EQ(logged("eval"), 3);
  EXPECT_EQ(r.raw.value("harness_retries", 0), 2);
  // Asked again: not answered from the verdict cache.
  Verdict again = pool->evaluate(request(k));
  EXPECT_EQ(again.status, VerdictStatus::kNoVerdict);
  EXPECT_EQ(logged("eval"), 6);
}

TEST_F(PoolTest, EvaluationsRunTogetherOnlyAsFarAsTheirFootprintsFit) {
  auto o = options();
  o.slots_per_gpu = 4;
  o.cache_dir.clear();
  o.host_capacity_bytes = 10.0 * (1 << 30);  // admission may hand out 10 GiB
  auto pool = make(o);
  auto count = dir.path() / "running";
  // The first evaluation has no footprint yet (the fake's probe says unknown):
  // it runs alone and measures 4 GiB; from then on 4 GiB x 1.15 fits twice in 10.
  auto k = kernel("big", "# FAKE: footprint 4\n# FAKE: concurrency " + count.string() + "\n# FAKE: correct\n");
  std::vector<std::future<Verdict>> futs;
  for (int i = 0; i < 8; ++i) futs.push_back(pool->submit(request(k)));
  int measured = 0, alone = 0;
  for (auto& f : futs) {
    Verdict r = f.get();
    EXPECT_EQ(r.status, VerdictStatus::kCorrect) << r.feedback;
    const json& adm = r.raw["checks"]["admission"];
    measured += adm.value("footprint", "") == "measured";
    alone += adm.value("exclusive", false);
  }
  std::ifstream in(count.string() + ".max");
  int most = 0;
  in >> most;
  EXPECT_EQ(most, 2) << "at most two 4.6 GiB evaluations fit in 10 GiB, and four slots would allow four";
  EXPECT_GE(alone, 1);
  EXPECT_GE(measured, 1);
  EXPECT_EQ(measured + alone, 8);
}

TEST_F(PoolTest, AnEstimateOfMoreThanAnEighthOfTheGpuRunsAloneUntilMeasured) {
  // A 100 GiB GPU (85.8 GiB to hand out beside four slots' idle processes)
  // and host memory to spare: only the GPU's share decides.
  auto count_of = [&](const std::string& estimate, const std::string& name) {
    auto o = options();
    o.slots_per_gpu = 4;
    o.cache_dir.clear();
    o.host_capacity_bytes = 1000.0 * (1 << 30);
    o.extra_env["MKEVOLVE_WORKER_FAKE_GPU_MEMORY_GB"] = "100";
    o.extra_env["MKEVOLVE_WORKER_FAKE_FOOTPRINT"] = estimate;
    o.baseline_dir = dir.path() / ("baselines-" + name);  // footprints are kept there: each its own
    auto pool = make(o);
    auto count = dir.path() / name;
    // The fake measures nothing: every evaluation stays on the estimate.
    auto k = kernel(name, "# FAKE: concurrency " + count.string() + "\n# FAKE: correct\n");
    std::vector<std::future<Verdict>> futs;
    for (int i = 0; i < 4; ++i) futs.push_back(pool->submit(request(k)));
    int alone = 0;
    for (auto& f : futs) {
      Verdict r = f.get();
      EXPECT_EQ(r.status, VerdictStatus::kCorrect) << r.feedback;
      alone += r.raw["checks"]["admission"].value("exclusive", false);
    }
    std::ifstream in(count.string() + ".max");
    int most = 0;
    in >> most;
    return std::pair{most, alone};
  };
  // One call of 4 GiB in and 4 GiB out: an estimate well over 10.7 GiB.
  auto [most_large, alone_large] = count_of("4,4", "large");
  EXPECT_EQ(most_large, 1) << "unmeasured, each could hold twice its estimate: one at a time";
  EXPECT_EQ(alone_large, 4);
  // A small one (about 2 GiB with the processes' contexts) is admitted beside others.
  auto [most_small, alone_small] = count_of("0.01,0.01", "small");
  EXPECT_GT(most_small, 1);
  EXPECT_EQ(alone_small, 0);
}

TEST_F(PoolTest, EvaluationsThatWaitedForTheFirstToMeasureRunBesideOneAnother) {
  // Four candidates of one large problem at once, on a 100 GiB GPU: the
  // estimate (4 GiB in, 4 GiB out) is too large to trust beside others, so
  // one runs alone and measures the evaluation (8 GiB of GPU memory); the
  // other three wait for that measurement and then run beside one another,
  // not each alone on its estimate, as they did when each took the
  // estimate before the first was measured (KernelBench's 6.4 GB problems
  // on an H200 ran one at a time, 2026-12-05).
  auto o = options();
  o.slots_per_gpu = 4;
  o.cache_dir.clear();
  o.host_capacity_bytes = 1000.0 * (1 << 30);
  o.extra_env["MKEVOLVE_WORKER_FAKE_GPU_MEMORY_GB"] = "100";
  o.extra_env["MKEVOLVE_WORKER_FAKE_FOOTPRINT"] = "4,4";
  auto pool = make(o);
  auto count = dir.path() / "waited";
  auto k = kernel("measured", "# FAKE: concurrency " + count.string() + "\n# FAKE: footprint 1 8\n# FAKE: correct\n");
  std::vector<std::future<Verdict>> futs;
  for (int i = 0; i < 4; ++i) futs.push_back(pool->submit(request(k)));
  int alone = 0, measured = 0;
  for (auto& f : futs) {
    Verdict r = f.get();
    EXPECT_EQ(r.status, VerdictStatus::kCorrect) << r.feedback;
    const json& adm = r.raw["checks"]["admission"];
    alone += adm.value("exclusive", false);
    measured += adm.value("footprint", "") == "measured";
  }
  std::ifstream in(count.string() + ".max");
  int most = 0;
  in >> most;
  EXPECT_EQ(alone, 1) << "only the one that measured runs alone";
  EXPECT_EQ(measured, 3);
  EXPECT_GT(most, 1) << "the three that waited ran beside one another";
}

TEST_F(PoolTest, EvaluationsThatTookTheirSlotsSparesFreeTheirShareOfTheGpu) {
  // A 100 GiB GPU: 93 GiB to hand out, less three CUDA contexts (1.76 GiB)
  // for each slot whose idle spares hold them. Three evaluations measured at
  // 27.5 GiB (29.4 GiB reserved) need 88.3 GiB: beside all four slots' idle
  // spares (85.97 GiB left) only two fit. An evaluation takes its slot's
  // spares (their contexts count in its own footprint) and leaves them owed
  // till the GPU is quiet, so its slot's share goes, and the third fits.
  auto pool = make(overhead_options(60, 4, "4,4"));
  auto count = dir.path() / "beside";
  auto k = kernel("measured", "# FAKE: concurrency " + count.string() + "\n# FAKE: footprint 1 27.5\n# FAKE: correct\n");
  std::vector<std::future<Verdict>> futs;
  for (int i = 0; i < 4; ++i) futs.push_back(pool->submit(request(k)));
  for (auto& f : futs) EXPECT_EQ(f.get().status, VerdictStatus::kCorrect);
  EXPECT_EQ(most_at_once(count), 3) << "the running evaluations' slots still counted their spares' contexts";
  wait_logged("refill", 4, 10);  // the GPU went quiet: every slot got its spares back
  EXPECT_EQ(logged("refill"), 4);
}

// Seen on an H100 (2026-12-06): an evaluation waiting for memory was charged
// its own slot's idle spares twice, once in the GPU's overhead and once in
// its footprint, which counts the same three processes once it takes them.
TEST_F(PoolTest, AWaiterIsNotChargedItsOwnSlotsSparesTwice) {
  // A 100 GiB GPU: 93 GiB to hand out, less 1.76 GiB per slot whose idle
  // spares hold their contexts. Measured at 43.4 GiB, an evaluation reserves
  // 46.07 GiB: beside a running one (whose slot's share went with its
  // spares) the second needs 92.14 GiB where 91.24 GiB are left to hand
  // out, but 1.76 GiB of that is its own slot's spares, which it takes.
  auto pool = make(overhead_options(60, 2, "4,4"));
  auto count = dir.path() / "beside";
  // Each holds its place 2 s: a loaded machine still starts both inside it.
  auto k = kernel("big", "# FAKE: concurrency " + count.string() + " 2\n# FAKE: footprint 1 43.4\n# FAKE: correct\n");
  ASSERT_EQ(pool->submit(request(k)).get().status, VerdictStatus::kCorrect);  // measures, alone
  wait_logged("refill", 1, 10);  // quiet again: both slots' spares count
  std::vector<std::future<Verdict>> futs;
  for (int i = 0; i < 2; ++i) futs.push_back(pool->submit(request(k)));
  for (auto& f : futs) {
    Verdict v = f.get();
    EXPECT_EQ(v.status, VerdictStatus::kCorrect);
    EXPECT_TRUE(v.raw["checks"]["admission"].contains("device_taken_from_overhead_bytes")) << v.raw.dump();
  }
  EXPECT_EQ(most_at_once(count), 2) << "the second waited: its own slot's spares were counted beside it";
}

// Found by review: a slot whose server died (a hang) while it owed its
// spares had its share cleared at the refill, which found no server, and the
// next server's spares were counted nowhere: the GPU looked 1.76 GiB larger
// after every such hang.
TEST_F(PoolTest, ASlotWhoseServerDiedWhileOwingItsSparesCountsThemAgain) {
  auto pool = make(overhead_options(0.3));
  const double gib = 1024.0 * 1024 * 1024;
  const double usable = 100 * gib * 0.95 - 2 * gib - 2 * 3 * 600.0 * 1024 * 1024;  // both slots' spares counted
  Verdict a = pool->evaluate(untimed(kernel("a", "# FAKE: correct\n"), 5));
  ASSERT_EQ(a.status, VerdictStatus::kCorrect) << a.feedback;
  EXPECT_NEAR(device_limit(a), usable / 2, 1 << 20);
  wait_logged("refill", 1, 10);
  EXPECT_EQ(pool->evaluate(untimed(kernel("h", "# FAKE: hang\n"), 0.5)).status, VerdictStatus::kTimeout);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the slot's refill, with no server to send it to
  Verdict b = pool->evaluate(untimed(kernel("b", "# FAKE: correct\n"), 5));
  ASSERT_EQ(b.status, VerdictStatus::kCorrect) << b.feedback;
  EXPECT_NEAR(device_limit(b), usable / 2, 1 << 20) << "the restarted server's spares are counted nowhere";
}

// Found by review: an evaluation that takes none of its slot's spares (one
// that failed before it started its processes) or only some (the profiling
// spare of one not timed) left them idle, holding their contexts, while the
// slot owed them and the GPU's overhead counted none of them.
TEST_F(PoolTest, SparesAnEvaluationLeftIdleCountAgainWhenItEnds) {
  auto pool = make(overhead_options(60));
  const double gib = 1024.0 * 1024 * 1024, ctx = 600.0 * 1024 * 1024, cap = 100 * gib * 0.95 - 2 * gib;
  // The other slot stays busy (its spares taken, owed): the GPU is never quiet, nothing is refilled.
  auto busy = pool->submit(untimed(kernel("busy", "# FAKE: slow 2\n# FAKE: correct\n"), 10));
  wait_logged("eval", 1, 5);
  Verdict early = pool->evaluate(untimed(kernel("early", "# FAKE: spares_idle 3\n# FAKE: incorrect\n"), 10));
  EXPECT_FALSE(early.raw.contains("spares_idle"));  // the pool's business, not the verdict's
  Verdict next = pool->evaluate(untimed(kernel("next", "# FAKE: correct\n"), 10));
  ASSERT_EQ(next.status, VerdictStatus::kCorrect) << next.feedback;
  // Counted: this slot's three, which `early` left idle, and the other's
  // profiling spare, which `busy` (untimed) never takes.
  EXPECT_NEAR(device_limit(next), (cap - 4 * ctx) / 2, 1 << 20) << "the idle spares' contexts were counted nowhere";
  EXPECT_EQ(busy.get().status, VerdictStatus::kCorrect);
}

// Found by review: a candidate wrong at its first trial reports the
// reference's share of the GPU alone (incomplete). That record replaced the
// estimate and counted as measured, so the next candidates were admitted
// beside one another at a fraction of what a whole evaluation holds.
TEST_F(PoolTest, AnEvaluationThatEndedEarlyNeverLowersTheProblemsReservation) {
  auto o = options();
  o.cache_dir.clear();
  o.host_capacity_bytes = 1000.0 * (1 << 30);
  o.extra_env["MKEVOLVE_WORKER_FAKE_GPU_MEMORY_GB"] = "100";
  o.extra_env["MKEVOLVE_WORKER_FAKE_FOOTPRINT"] = "4,4";
  auto pool = make(o);
  const double gib = 1024.0 * 1024 * 1024;
  const double estimate = estimate_device(4 * gib, 4 * gib, 0, true).bytes;
  auto reserved = [](const Verdict& v) { return v.raw["checks"]["admission"]["device_reserved_bytes"].get<double>(); };
  Verdict wrong = pool->evaluate(request(kernel("wrong", "# FAKE: footprint 1 5 partial\n# FAKE: incorrect\n")));
  ASSERT_EQ(wrong.status, VerdictStatus::kIncorrect) << wrong.feedback;
  EXPECT_DOUBLE_EQ(reserved(wrong), estimate);
  Verdict next = pool->evaluate(request(kernel("next", "# FAKE: correct\n")));
  ASSERT_EQ(next.status, VerdictStatus::kCorrect) << next.feedback;
  EXPECT_GE(reserved(next), estimate) << "admitted on the reference's share alone";
  // A whole evaluation's measurement then admits the rest.
  ASSERT_EQ(pool->evaluate(request(kernel("whole", "# FAKE: footprint 1 6\n# FAKE: correct\n"))).status,
            VerdictStatus::kCorrect);
  Verdict after = pool->evaluate(request(kernel("after", "# FAKE: correct\n")));
  EXPECT_DOUBLE_EQ(reserved(after), 6 * gib * 1.05 + 0.5 * gib);
}

TEST_F(PoolTest, ACalibrationIsAdmittedByMemoryLikeAnEvaluation) {
  auto o = options();
  o.slots_per_gpu = 4;
  o.cache_dir.clear();
  o.host_capacity_bytes = 10.0 * (1 << 30);
  // Estimate: 0.5 GiB in and out, so 4 x 1 + 3 = 7 GiB per evaluation and per
  // calibration: one at a time in 10 GiB, though four slots are free.
  o.extra_env["MKEVOLVE_WORKER_FAKE_FOOTPRINT"] = "0.5,0.5";
  auto count = dir.path() / "running";
  o.extra_env["MKEVOLVE_WORKER_FAKE_CALIBRATE_COUNT"] = count.string();
  auto pool = make(o);
  auto k = kernel("counted", "# FAKE: concurrency " + count.string() + "\n# FAKE: correct\n");
  std::vector<std::future<Verdict>> evals;
  std::vector<std::future<Result<json>>> cals;
  for (int i = 0; i < 2; ++i) {
    evals.push_back(pool->submit(request(k)));
    cals.push_back(std::async(std::launch::async, [&] { return pool->calibrate(problem(), 5, false, 42); }));
  }
  for (auto& f : evals) EXPECT_EQ(f.get().status, VerdictStatus::kCorrect);
  for (auto& f : cals) {
    auto r = f.get();
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_DOUBLE_EQ((*r)["outputs"][""]["by_kind"]["x1"]["atol"].get<double>(), 1e-3);
  }
  EXPECT_EQ(logged("calibrate"), 2);
  std::ifstream in(count.string() + ".max");
  int most = 0;
  in >> most;
  EXPECT_EQ(most, 1) << "a 7 GiB calibration and a 7 GiB evaluation do not fit together in 10 GiB";
}

TEST_F(PoolTest, AnOutOfMemoryVerdictUnderAFootprintLimitIsRetriedAloneWithTheMachinesFreeMemory) {
  auto o = options();
  o.cache_dir.clear();
  o.host_capacity_bytes = 100.0 * (1 << 30);
  o.extra_env["MKEVOLVE_WORKER_FAKE_FOOTPRINT"] = "1,1";  // estimate: 4 x 2 + 3 = 11 GiB, so an 11 GiB limit
  auto pool = make(o);
  // Needs 20 GiB (its parameters, say): over the estimate's limit, within the machine.
  Verdict r = pool->evaluate(request(kernel("wide", "# FAKE: oom_over 20\n# FAKE: correct\n")));
  EXPECT_EQ(r.status, VerdictStatus::kCorrect) << r.feedback;
  EXPECT_EQ(r.raw.value("harness_retries", 0), 1);
  EXPECT_EQ(logged("eval"), 2);
  // More than the whole machine: out of memory alone too, so it is the kernel's.
  Verdict big = pool->evaluate(request(kernel("runaway", "# FAKE: oom_over 1000\n# FAKE: correct\n")));
  EXPECT_EQ(big.status, VerdictStatus::kRuntimeError) << big.feedback;
  EXPECT_EQ(big.kind, "oom");
  EXPECT_EQ(big.raw.value("harness_retries", 0), 1);
  EXPECT_EQ(logged("eval"), 4);
  // Alone, never unlimited: the machine's free memory less a reserve (10 GiB
  // of 100, and half the 11 GiB footprint for the reference and the server).
  const auto& adm = big.raw["checks"]["admission"];
  ASSERT_TRUE(adm.contains("host_limit_bytes")) << big.raw.dump();
  const double limit = adm["host_limit_bytes"].get<double>();
  EXPECT_GT(limit, 20.0 * (1 << 30));
  EXPECT_LT(limit, 100.0 * (1 << 30));
  EXPECT_NEAR(limit, (100.0 - 10.0 - 5.5) * (1 << 30), 1 << 20);
}

TEST_F(PoolTest, AProblemTooLargeForTheMachineFailsBeforeAnyEvaluation) {
  auto o = options();
  o.host_capacity_bytes = 10.0 * (1 << 30);
  o.extra_env["MKEVOLVE_WORKER_FAKE_FOOTPRINT"] = "12,4";  // one call: 12 GiB in, 4 GiB out
  auto pool = make(o);
  Verdict r = pool->evaluate(request(kernel("ok", "# FAKE: correct\n")));
  EXPECT_EQ(r.status, VerdictStatus::kNoVerdict);
  EXPECT_EQ(r.kind, "too_large");
  EXPECT_NE(r.feedback.find("16.0 GiB of host memory"), std::string::npos) << r.feedback;
  EXPECT_NE(r.feedback.find("problem.py"), std::string::npos) << r.feedback;
  EXPECT_EQ(logged("eval"), 0);
}

TEST_F(PoolTest, ThePreflightCheckRefusesAProblemTooLargeBeforeRunningIt) {
  auto o = options();
  o.host_capacity_bytes = 10.0 * (1 << 30);
  o.extra_env["MKEVOLVE_WORKER_FAKE_FOOTPRINT"] = "12,4";  // one call: 12 GiB in, 4 GiB out
  auto pool = make(o);
  mk::Status st = pool->check_problem(problem(), true);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("problem.py: one evaluation of this problem needs 16.0 GiB of host memory"),
            std::string::npos)
      << st.error();
  EXPECT_EQ(logged("problem_check"), 0);
}

TEST_F(PoolTest, ThePreflightCheckAsksTheWorkerWhenTheProblemFits) {
  auto pool = make(options());
  mk::Status st = pool->check_problem(problem(), true);
  EXPECT_TRUE(st.ok()) << st.error();
  EXPECT_EQ(logged("problem_check"), 1);
}

TEST_F(PoolTest, ProtocolViolationsAreCrashedNeverFatal) {
  auto pool = make(options());
  Verdict g = pool->evaluate(request(kernel("garbage", "# FAKE: garbage\n")));
  EXPECT_EQ(g.status, VerdictStatus::kCrashed);
  EXPECT_EQ(g.kind, "protocol_error");
  EXPECT_NE(g.feedback.find("this is not json"), std::string::npos) << g.feedback;
  Verdict w = pool->evaluate(request(kernel("wrong_id", "# FAKE: wrong_id\n")));
  EXPECT_EQ(w.kind, "protocol_error");
  EXPECT_EQ(pool->stats().restarts, 2);
  Verdict u = pool->evaluate(request(kernel("unknown", "# FAKE: unknown_status\n")));
  EXPECT_EQ(u.status, VerdictStatus::kCrashed);
  EXPECT_NE(u.feedback.find("splendid"), std::string::npos);
  Verdict n = pool->evaluate(request(kernel("nostatus", "# FAKE: no_status\n")));
  EXPECT_EQ(n.status, VerdictStatus::kCrashed);
  Verdict er = pool->evaluate(request(kernel("error", "# FAKE: error\n")));
  EXPECT_EQ(er.kind, "worker_error");
  EXPECT_NE(er.feedback.find("fake failure"), std::string::npos);
  EXPECT_EQ(pool->stats().restarts, 2);  // a well-formed but odd answer keeps the server
  EXPECT_EQ(pool->evaluate(request(kernel("ok", "# FAKE: correct\n"))).status, VerdictStatus::kCorrect);
  // None of the broken answers was cached.
  EXPECT_FALSE(pool->evaluate(request(kernel("garbage", "# FAKE: garbage\n"))).cached);
}

TEST_F(PoolTest, GrandchildThatLeftTheSessionDiesWhenTheServerIsRestarted) {
  auto pool = make(options());
  std::string marker = random_token();
  Verdict r = pool->evaluate(request(kernel("gc", "# FAKE: grandchild " + marker + "\n# FAKE: hang\n"), 0.5));
  EXPECT_EQ(r.status, VerdictStatus::kTimeout);
  EXPECT_TRUE(with_marker(marker).empty());
}

TEST_F(PoolTest, GrandchildDiesWithThePool) {
  std::string marker = random_token();
  {
    auto pool = make(options());
    Verdict r = pool->evaluate(request(kernel("gc", "# FAKE: grandchild " + marker + "\n# FAKE: correct\n")));
    EXPECT_EQ(r.status, VerdictStatus::kCorrect);
    std::vector<pid_t> alive;
    for (int i = 0; i < 300 && alive.empty(); ++i) {
      alive = with_marker(marker);
      if (alive.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(alive.size(), 1u);  // the test is meaningful: it was running
  }
  EXPECT_TRUE(with_marker(marker).empty());
  EXPECT_TRUE(descendants_of(::getpid()).empty());
}

TEST_F(PoolTest, PidNamespaceCatchesAGrandchildThatDroppedTheToken) {
  if (::geteuid() != 0 || !pid_namespace_available()) GTEST_SKIP() << "no PID namespaces here";
  std::string marker = random_token();
  {
    auto o = options();
    o.isolation = PoolOptions::Isolation::kPidNamespace;
    auto pool = make(o);
    EXPECT_EQ(pool->isolation(), "pid-namespace");
    Verdict r = pool->evaluate(request(kernel("gc", "# FAKE: grandchild " + marker + " clean\n# FAKE: hang\n"), 0.5));
    EXPECT_EQ(r.status, VerdictStatus::kTimeout);
    EXPECT_TRUE(with_marker(marker).empty());
    EXPECT_EQ(pool->evaluate(request(kernel("ok", "# FAKE: correct\n"))).status, VerdictStatus::kCorrect);
  }
  EXPECT_TRUE(descendants_of(::getpid()).empty());
}

TEST_F(PoolTest, ProcessGroupModeStillKillsTaggedGrandchildren) {
  std::string marker = random_token();
  auto o = options();
  o.isolation = PoolOptions::Isolation::kProcessGroup;
  auto pool = make(o);
  EXPECT_EQ(pool->isolation(), "process-group");
  Verdict r = pool->evaluate(request(kernel("gc", "# FAKE: grandchild " + marker + "\n# FAKE: exit\n")));
  EXPECT_EQ(r.kind, "server_died");
  EXPECT_TRUE(with_marker(marker).empty());
}

TEST_F(PoolTest, HelloProblemsAreEnvironmentErrors) {
  struct Case {
    const char* mode;
    const char* expect;
  } cases[] = {{"bad_version", "protocol 99"},
               {"no_torch", "no torch in"},
               {"no_triton", "no Triton in"},
               {"no_cuda", "sees no CUDA GPU"},
               {"garbage", "did not say hello"},
               {"exit", "exiting at start as asked"}};
  for (const auto& c : cases) {
    auto o = options();
    o.extra_env["MKEVOLVE_WORKER_FAKE_HELLO"] = c.mode;
    auto pool = make(o);
    auto st = pool->probe();
    ASSERT_FALSE(st.ok()) << c.mode;
    EXPECT_NE(st.error().find(c.expect), std::string::npos) << c.mode << ": " << st.error();
    Verdict r = pool->evaluate(request(kernel("ok", "# FAKE: correct\n")));
    EXPECT_EQ(r.status, VerdictStatus::kCrashed) << c.mode;
    EXPECT_EQ(r.kind, "environment") << c.mode;
  }
  auto o = options();
  o.extra_env["MKEVOLVE_WORKER_FAKE_HELLO"] = "silent";
  o.start_timeout_s = 0.5;
  auto pool = make(o);
  auto st = pool->probe();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("did not say hello within"), std::string::npos) << st.error();
}

TEST_F(PoolTest, IsolationCanBeForcedFromTheEnvironment) {
  ::setenv("MKEVOLVE_ISOLATION", "process-group", 1);
  auto pool = make(options());
  EXPECT_EQ(pool->isolation(), "process-group");
  ::setenv("MKEVOLVE_ISOLATION", "sandbox", 1);
  auto bad = WorkerPool::create(options());
  ::unsetenv("MKEVOLVE_ISOLATION");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("MKEVOLVE_ISOLATION=sandbox"), std::string::npos);
  EXPECT_EQ(bad.error_kind(), ErrorKind::kBadInput);  // a misspelt setting, not something missing
}

TEST_F(PoolTest, TestModeAcceptsAWorkerWithoutTriton) {
  auto o = options();
  o.test_mode = true;
  o.extra_env["MKEVOLVE_WORKER_FAKE_HELLO"] = "no_triton";
  auto pool = make(o);
  EXPECT_TRUE(pool->probe().ok());
}

TEST_F(PoolTest, MissingInterpreterIsNamed) {
  auto o = options();
  o.worker_command = {"/nonexistent/python9"};
  o.python = "/nonexistent/python9";
  o.isolation = PoolOptions::Isolation::kProcessGroup;
  auto pool = make(o);
  auto st = pool->probe();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("/nonexistent/python9"), std::string::npos) << st.error();
}

TEST_F(PoolTest, ConcurrentSubmitsFromManyThreadsAllResolve) {
  auto o = options(2);
  o.slots_per_gpu = 2;
  o.cache_dir.clear();
  auto pool = make(o);
  ASSERT_EQ(pool->slot_count(), 4u);
  auto ok = kernel("ok", "# FAKE: slow 0.02\n# FAKE: correct\n");
  auto bad = kernel("bad", "# FAKE: incorrect\n");
  auto dies = kernel("dies", "# FAKE: exit\n");
  const int kThreads = 8, kPer = 6;
  std::vector<std::vector<std::pair<int, std::future<Verdict>>>> futs(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPer; ++i) {
        int which = (t + i) % 3;
        futs[t].emplace_back(which, pool->submit(request(which == 0 ? ok : which == 1 ? bad : dies)));
      }
    });
  for (auto& th : threads) th.join();
  int correct = 0, incorrect = 0, crashed = 0;
  for (auto& v : futs)
    for (auto& [which, f] : v) {
      Verdict r = f.get();
      VerdictStatus want = which == 0 ? VerdictStatus::kCorrect : which == 1 ? VerdictStatus::kIncorrect : VerdictStatus::kCrashed;
      EXPECT_EQ(r.status, want) << r.feedback;
      correct += r.status == VerdictStatus::kCorrect;
      incorrect += r.status == VerdictStatus::kIncorrect;
      crashed += r.status == VerdictStatus::kCrashed;
    }
  EXPECT_EQ(correct + incorrect + crashed, kThreads * kPer);
  // A server that dies is given one more try, alone, before the candidate is blamed.
  EXPECT_EQ(pool->stats().evals, kThreads * kPer + crashed);
  EXPECT_EQ(pool->stats().retries, crashed);
  EXPECT_EQ(pool->stats().restarts, 2 * crashed);
  EXPECT_EQ(logged("baseline"), 1);  // one measurement shared by every slot
}

TEST_F(PoolTest, CacheHitsSkipTheWorkerAndContentChangesInvalidate) {
  auto k = kernel("cached", "import helper\n# FAKE: correct\n");
  ASSERT_TRUE(write_file_atomic(dir.path() / "kernels" / "helper.py", "A = 1\n").ok());
  {
    auto pool = make(options());
    Verdict a = pool->evaluate(request(k));
    EXPECT_FALSE(a.cached);
    Verdict b = pool->evaluate(request(k));
    EXPECT_TRUE(b.cached);
    EXPECT_EQ(b.status, VerdictStatus::kCorrect);
    EXPECT_DOUBLE_EQ(b.speedup_eager, a.speedup_eager);
    EXPECT_EQ(logged("eval"), 1);
    // Other options are another verdict.
    auto req = request(k);
    req.options.atol = 1e-2;
    EXPECT_FALSE(pool->evaluate(req).cached);
    EXPECT_EQ(logged("eval"), 2);
    // The kernel file changes.
    ASSERT_TRUE(write_file_atomic(k, "import helper\n# FAKE: correct\n# edited\n").ok());
    EXPECT_FALSE(pool->evaluate(request(k)).cached);
    EXPECT_EQ(logged("eval"), 3);
    // A sibling module it imports changes.
    ASSERT_TRUE(write_file_atomic(dir.path() / "kernels" / "helper.py", "A = 2\n").ok());
    EXPECT_FALSE(pool->evaluate(request(k)).cached);
    EXPECT_EQ(logged("eval"), 4);
    EXPECT_EQ(pool->stats().cache_hits, 1);
  }
  // A new pool on the same cache directory (a resumed run) repeats nothing.
  auto pool = make(options());
  Verdict c = pool->evaluate(request(k));
  EXPECT_TRUE(c.cached);
  EXPECT_EQ(logged("eval"), 4);
  EXPECT_EQ(pool->stats().evals, 0);
}

TEST_F(PoolTest, IdenticalRequestsInFlightTogetherAreEvaluatedOnce) {
  auto o = options();
  o.slots_per_gpu = 3;
  auto pool = make(o);
  auto k = kernel("twice", "# FAKE: slow 1\n# FAKE: correct\n");
  auto other = kernel("other", "# FAKE: slow 1\n# FAKE: correct\n# another file\n");
  auto a = pool->submit(request(k));
  auto b = pool->submit(request(k));
  auto c = pool->submit(request(other));
  Verdict ra = a.get(), rb = b.get(), rc = c.get();
  EXPECT_EQ(logged("eval"), 2);  // `twice` once, `other` once
  EXPECT_EQ(ra.status, VerdictStatus::kCorrect);
  EXPECT_EQ(rb.status, VerdictStatus::kCorrect);
  EXPECT_EQ(rc.status, VerdictStatus::kCorrect);
  EXPECT_FALSE(ra.cached);
  EXPECT_TRUE(rb.cached);
  EXPECT_FALSE(rc.cached);
  EXPECT_DOUBLE_EQ(ra.runtime.median_ms, rb.runtime.median_ms);  // one timing for one piece of code
  EXPECT_EQ(pool->stats().joined, 1);
  // Once it is done, the next identical request is a cache hit, not a join.
  EXPECT_TRUE(pool->evaluate(request(k)).cached);
  EXPECT_EQ(pool->stats().joined, 1);
  EXPECT_EQ(logged("eval"), 2);
}

TEST_F(PoolTest, WithoutAVerdictCacheIdenticalRequestsEachRun) {
  auto o = options();
  o.slots_per_gpu = 2;
  o.cache_dir.clear();
  auto pool = make(o);
  auto k = kernel("again", "# FAKE: slow 0.5\n# FAKE: correct\n");
  auto a = pool->submit(request(k));
  auto b = pool->submit(request(k));
  EXPECT_FALSE(a.get().cached);
  EXPECT_FALSE(b.get().cached);
  EXPECT_EQ(logged("eval"), 2);
  EXPECT_EQ(pool->stats().joined, 0);
}

TEST_F(PoolTest, TimingsTakenWithoutTheGpuLockAreNotCached) {
  auto pool = make(options());
  auto k = kernel("unlocked", "# FAKE: correct\n# FAKE: unlocked\n");
  EXPECT_EQ(pool->evaluate(request(k)).status, VerdictStatus::kCorrect);
  Verdict again = pool->evaluate(request(k));
  EXPECT_FALSE(again.cached);
  EXPECT_EQ(logged("eval"), 2);
}

TEST_F(PoolTest, TimeoutsAreCachedButShutdownsAreNot) {
  auto pool = make(options());
  auto k = kernel("hang", "# FAKE: hang\n");
  EXPECT_EQ(pool->evaluate(request(k, 0.3)).status, VerdictStatus::kTimeout);
  Verdict again = pool->evaluate(request(k, 0.3));
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.status, VerdictStatus::kTimeout);
  EXPECT_EQ(logged("eval"), 1);
}

TEST_F(PoolTest, NoCacheDirMeansNoCaching) {
  auto o = options();
  o.cache_dir.clear();
  auto pool = make(o);
  auto k = kernel("ok", "# FAKE: correct\n");
  EXPECT_FALSE(pool->evaluate(request(k)).cached);
  EXPECT_FALSE(pool->evaluate(request(k)).cached);
  EXPECT_EQ(logged("eval"), 2);
}

TEST_F(PoolTest, BaselinesAreMeasuredOnceAndReusedAcrossPools) {
  {
    auto pool = make(options());
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(pool->evaluate(request(kernel("k" + std::to_string(i), "# FAKE: correct\n"))).status, VerdictStatus::kCorrect);
    EXPECT_EQ(logged("baseline"), 1);
    EXPECT_EQ(pool->stats().baseline_runs, 1);
  }
  auto pool = make(options());
  Verdict r = pool->evaluate(request(kernel("k9", "# FAKE: correct\n")));
  EXPECT_DOUBLE_EQ(r.eager.median_ms, 4.0);
  EXPECT_EQ(logged("baseline"), 1);
  // A changed problem is another baseline.
  ASSERT_TRUE(write_file_atomic(problem(), "class Model: pass\ndef get_inputs(): return [1]\n").ok());
  pool->evaluate(request(kernel("k10", "# FAKE: correct\n")));
  EXPECT_EQ(logged("baseline"), 2);
}

TEST_F(PoolTest, PrefetchedBaselinesAreMeasuredOnceAndServeTheFirstEvaluation) {
  auto pool = make(options());
  pool->prefetch_baselines(problem(), EvalOptions{});
  pool->prefetch_baselines(problem(), EvalOptions{});  // asked twice: measured once
  Verdict r = pool->evaluate(request(kernel("first", "# FAKE: correct\n")));
  EXPECT_DOUBLE_EQ(r.eager.median_ms, 4.0);
  EXPECT_DOUBLE_EQ(r.compiled.median_ms, 2.0);
  EXPECT_EQ(logged("baseline"), 1);
  EXPECT_EQ(pool->stats().baseline_runs, 1);
  // With --no-perf there are no baselines to fetch.
  EvalOptions np;
  np.measure_perf = false;
  auto other = dir.path() / "other.py";
  ASSERT_TRUE(write_file_atomic(other, "class Model: pass\ndef get_inputs(): return [2]\n").ok());
  pool->prefetch_baselines(other, np);
  EXPECT_EQ(pool->evaluate(request(kernel("second", "# FAKE: correct\n"))).status, VerdictStatus::kCorrect);
  EXPECT_EQ(logged("baseline"), 1);
}

TEST_F(PoolTest, TheFirstCandidateStartsItsBaselinesBesideItself) {
  // Two slots, one candidate that runs until the test lets it go: its
  // baselines start on the other slot while it runs, not after it on its own
  // slot (no clock involved: the candidate waits for a file).
  auto o = options();
  o.slots_per_gpu = 2;
  o.host_capacity_bytes = 100.0 * (1 << 30);
  o.extra_env["MKEVOLVE_WORKER_FAKE_FOOTPRINT"] = "0.01,0.01";  // an estimate: it need not run alone
  auto pool = make(o);
  const fs::path go = dir.path() / "go";
  auto first = pool->submit(request(kernel("first", "# FAKE: until " + go.string() + "\n# FAKE: correct\n")));
  wait_logged("baseline", 1, 30);
  EXPECT_EQ(logged("baseline"), 1);
  EXPECT_NE(first.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  ASSERT_TRUE(write_file_atomic(go, "go\n").ok());
  Verdict r = first.get();
  EXPECT_EQ(r.status, VerdictStatus::kCorrect) << r.feedback;
  EXPECT_DOUBLE_EQ(r.eager.median_ms, 4.0);
  // Measured once; the next candidate finds them cached and queues nothing.
  EXPECT_EQ(pool->evaluate(request(kernel("second", "# FAKE: correct\n"))).status, VerdictStatus::kCorrect);
  EXPECT_EQ(logged("baseline"), 1);
  EXPECT_EQ(pool->stats().baseline_runs, 1);
}

TEST_F(PoolTest, APrefetchWaitsForTheEvaluationsQueuedAfterIt) {
  // One slot, busy with a slow evaluation; then a prefetch for another problem
  // and an evaluation are queued, in that order: the evaluation goes first.
  auto pool = make(options());
  auto slow = pool->submit(request(kernel("slow", "# FAKE: slow 0.5\n# FAKE: correct\n")));
  auto other = dir.path() / "other.py";
  ASSERT_TRUE(write_file_atomic(other, "class Model: pass\ndef get_inputs(): return [2]\n").ok());
  pool->prefetch_baselines(other, EvalOptions{});
  auto next = pool->submit(request(kernel("next", "# FAKE: correct\n")));
  EXPECT_EQ(slow.get().status, VerdictStatus::kCorrect);
  EXPECT_EQ(next.get().status, VerdictStatus::kCorrect);
  wait_logged("baseline", 2, 5);
  std::ifstream in(log_path());
  std::vector<std::string> order;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("eval ", 0) == 0 || line.rfind("baseline ", 0) == 0) order.push_back(line.substr(0, line.find(' ')) + (line.find("other.py") != std::string::npos ? " other" : ""));
  EXPECT_EQ(order, (std::vector<std::string>{"eval", "baseline", "eval", "baseline other"}));
}

TEST_F(PoolTest, QueuedEvaluationsStartHighestPriorityFirstThenInArrivalOrder) {
  // One slot, busy; then four evaluations queue: priorities 1, 3, 1, 3, and
  // a decomposition check last. The check goes first (the search waits on
  // it), then 3, 3, 1, 1, each pair in the order it came.
  auto o = options();
  o.cache_dir.clear();
  auto pool = make(o);
  auto busy = occupy(*pool);
  std::vector<std::future<Verdict>> futs;
  const std::vector<std::pair<std::string, int>> queued = {{"low_a", 1}, {"high_a", 3}, {"low_b", 1}, {"high_b", 3}};
  for (const auto& [name, priority] : queued) {
    auto r = request(kernel(name, "# FAKE: correct\n"));
    r.priority = priority;
    futs.push_back(pool->submit(r));
  }
  DecompositionRequest d;
  d.problem = problem();
  d.decomposed = dir.path() / "decomposed_problem.py";
  d.subproblems_dir = dir.path() / "subkernel_problems";
  d.timeout_s = 5;
  auto check = pool->verify_decomposition(d);
  EXPECT_EQ(busy.get().status, VerdictStatus::kCorrect);
  for (auto& f : futs) EXPECT_EQ(f.get().status, VerdictStatus::kCorrect);
  EXPECT_TRUE(check.get().ok);
  std::vector<std::string> order;
  for (const auto& l : log_lines({"eval", "verify_decomposition"}))
    order.push_back(l.rfind("eval ", 0) == 0 ? stem_of(l) : "check");
  EXPECT_EQ(order, (std::vector<std::string>{"busy", "check", "high_a", "high_b", "low_a", "low_b"}));
}


TEST_F(PoolTest, ARoundsSparesAreRefilledOnceTheGpuIsQuiet) {
  // Three evaluations at once on three slots: none waits, so each leaves its
  // spares for later, and the three refills come only after the slowest
  // evaluation ended, though two ended before it.
  auto o = options();
  o.slots_per_gpu = 3;
  o.cache_dir.clear();
  o.spares_idle_refill_s = 60;
  o.memory_admission = false;  // else the others wait for the first one's footprint
  auto pool = make(o);
  // All three are in their workers before any ends (each waits for a file
  // the test writes: no clock, which a loaded machine can outlast while it
  // starts the servers), and the slow one ends only after both fast ones.
  const fs::path go_fast = dir.path() / "let-fast-go", go_slow = dir.path() / "let-slow-go";
  std::vector<std::future<Verdict>> futs;
  futs.push_back(pool->submit(request(kernel("slow", "# FAKE: until " + go_slow.string() + "\n# FAKE: correct\n"))));
  for (const char* name : {"fast_a", "fast_b"})
    futs.push_back(pool->submit(request(kernel(name, "# FAKE: until " + go_fast.string() + "\n# FAKE: correct\n"))));
  wait_logged("eval", 3, 60);
  ASSERT_EQ(logged("eval"), 3);
  ASSERT_TRUE(write_file_atomic(go_fast, "go\n").ok());
  EXPECT_EQ(futs[1].get().status, VerdictStatus::kCorrect);
  EXPECT_EQ(futs[2].get().status, VerdictStatus::kCorrect);
  ASSERT_TRUE(write_file_atomic(go_slow, "go\n").ok());
  EXPECT_EQ(futs[0].get().status, VerdictStatus::kCorrect);
  wait_logged("refill", 3, 5);
  auto lines = log_lines({"spares", "eval_end", "refill"});
  int later = 0, refills = 0;
  bool slow_ended = false;
  for (const auto& l : lines) {
    if (l.rfind("spares later ", 0) == 0) ++later;
    if (l.rfind("eval_end ", 0) == 0 && stem_of(l) == "slow") slow_ended = true;
    if (l == "refill ") {
      ++refills;
      EXPECT_TRUE(slow_ended) << "a refill ran beside an evaluation";
    }
  }
  EXPECT_EQ(later, 3);
  EXPECT_EQ(refills, 3);
  EXPECT_EQ(pool->stats().spares_later, 3);
  EXPECT_EQ(pool->stats().refills, 3);
}

TEST_F(PoolTest, StartServersStartsEverySlotsServerBeforeAnyJob) {
  // A search's pool: its slots' servers start as the pool does, so a first
  // round that fills every slot finds them warm. Without it, none starts
  // before a job comes.
  auto o = options();
  o.slots_per_gpu = 3;
  o.start_servers = true;
  auto pool = make(o);
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (pool->stats().starts < 3 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(pool->stats().starts, 3);
  EXPECT_EQ(pool->submit(request(kernel("after", "# FAKE: correct\n"))).get().status, VerdictStatus::kCorrect);
  EXPECT_EQ(pool->stats().starts, 3);  // the job used a started one

  auto lazy_o = options();
  lazy_o.slots_per_gpu = 3;
  auto lazy = make(lazy_o);
  EXPECT_EQ(lazy->submit(request(kernel("first", "# FAKE: correct\n"))).get().status, VerdictStatus::kCorrect);
  EXPECT_EQ(lazy->stats().starts, 1);
}

TEST_F(PoolTest, ABatchStartsTheServersItNeedsAtOnceBesideTheProbes) {
  // eval --batch: the probe's server started alone, then each other slot's
  // only when its first pair came, so those pairs waited for two starts one
  // after the other (9.3 s, then 11.4-14.6 s, on an H100). Now the servers a
  // batch needs start together as the pool does, and no more of them.
  auto o = options();
  o.slots_per_gpu = 6;
  o.expected_jobs = 3;
  o.start_servers = true;
  o.extra_env["MKEVOLVE_WORKER_FAKE_HELLO"] = "slow 0.5";
  auto pool = make(o);
  EXPECT_EQ(pool->slot_count(), 3u);  // capped at the batch's size
  ASSERT_TRUE(pool->probe());
  std::vector<std::future<Verdict>> futs;
  for (int i = 0; i < 3; ++i)
    futs.push_back(pool->submit(request(kernel("b" + std::to_string(i), "# FAKE: slow 0.3\n# FAKE: correct\n"))));
  for (auto& f : futs) {
    Verdict v = f.get();
    EXPECT_EQ(v.status, VerdictStatus::kCorrect);
    EXPECT_DOUBLE_EQ(v.server_start_s, 0.0);  // its slot's server was started before it came
  }
  EXPECT_EQ(pool->stats().starts, 3);
}

TEST_F(PoolTest, AnEvaluationsPriorityReachesTheWorker) {
  // The worker orders waiting timed phases by it (gpulock.py): the request
  // carries the search's priority as it was submitted.
  auto o = options();
  o.cache_dir.clear();
  auto pool = make(o);
  auto req = request(kernel("urgent", "# FAKE: correct\n"));
  req.priority = 7;
  EXPECT_EQ(pool->submit(req).get().status, VerdictStatus::kCorrect);
  EXPECT_EQ(pool->submit(request(kernel("plain", "# FAKE: correct\n"))).get().status, VerdictStatus::kCorrect);
  std::map<std::string, std::string> seen;
  for (const auto& l : log_lines({"priority"})) {  // "priority N /path/to/kernel.py"
    std::istringstream words(l);
    std::string op, n;
    words >> op >> n;
    seen[stem_of(l)] = n;
  }
  EXPECT_EQ(seen["urgent"], "7");
  EXPECT_EQ(seen["plain"], "0");
}

TEST_F(PoolTest, BackToBackEvaluationsRefillTheirSparesAtTheirStart) {
  // One slot, busy; three more queue behind it. Each of the first two has
  // another one waiting behind it, so its server refills at once ("now");
  // the last (and the busy one, which found no queue) leave it for later,
  // and the one refill comes after the last evaluation.
  auto o = options();
  o.cache_dir.clear();
  auto pool = make(o);
  auto busy = occupy(*pool);
  std::vector<std::future<Verdict>> futs;
  for (const char* name : {"a", "b", "c"}) futs.push_back(pool->submit(request(kernel(name, "# FAKE: correct\n"))));
  EXPECT_EQ(busy.get().status, VerdictStatus::kCorrect);
  for (auto& f : futs) EXPECT_EQ(f.get().status, VerdictStatus::kCorrect);
  wait_logged("refill", 1, 5);
  std::vector<std::string> seen;
  for (const auto& l : log_lines({"spares", "refill"}))
    seen.push_back(l == "refill " ? "refill" : l.substr(7, l.find(' ', 7) - 7) + ":" + stem_of(l));
  EXPECT_EQ(seen, (std::vector<std::string>{"later:busy", "now:a", "now:b", "later:c", "refill"}));
}

TEST_F(PoolTest, SparesOwedTooLongAreRefilledBesideARunningEvaluation) {
  // With a short idle limit, a slot whose evaluation ended refills before
  // its neighbour's long evaluation ends: a GPU that is never quiet (LLM
  // replies coming one by one) still gets its spares back.
  auto o = options();
  o.slots_per_gpu = 2;
  o.cache_dir.clear();
  o.spares_idle_refill_s = 0.3;
  o.memory_admission = false;  // else the others wait for the first one's footprint
  auto pool = make(o);
  auto slow = pool->submit(request(kernel("slow", "# FAKE: slow 3\n# FAKE: correct\n"), 10));
  auto fast = pool->submit(request(kernel("fast", "# FAKE: correct\n")));
  EXPECT_EQ(fast.get().status, VerdictStatus::kCorrect);
  EXPECT_EQ(slow.get().status, VerdictStatus::kCorrect);
  auto lines = log_lines({"eval_end", "refill"});
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front(), "eval_end " + (dir.path() / "kernels" / "fast.py").string());
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[1], "refill ") << "the fast slot's refill came after the slow evaluation";
}

TEST_F(PoolTest, SparesRefilledAtTheStartSendNoRefill) {
  auto o = options();
  o.slots_per_gpu = 2;
  o.cache_dir.clear();
  o.spares_refill = PoolOptions::SparesRefill::kAtStart;
  auto pool = make(o);
  auto a = pool->submit(request(kernel("a", "# FAKE: correct\n")));
  auto b = pool->submit(request(kernel("b", "# FAKE: correct\n")));
  EXPECT_EQ(a.get().status, VerdictStatus::kCorrect);
  EXPECT_EQ(b.get().status, VerdictStatus::kCorrect);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(logged("refill"), 0);
  for (const auto& l : log_lines({"spares"})) EXPECT_EQ(l.rfind("spares now ", 0), 0u) << l;
}

TEST_F(PoolTest, AnUnknownSparesRefillInTheEnvironmentIsRefused) {
  ::setenv("MKEVOLVE_SPARES_REFILL", "sometimes", 1);
  auto p = WorkerPool::create(options());
  ::unsetenv("MKEVOLVE_SPARES_REFILL");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().find("MKEVOLVE_SPARES_REFILL=sometimes"), std::string::npos) << p.error();
}

TEST_F(PoolTest, BaselinesTimedWithoutTheGpuLockAreUsedButNotKept) {
  auto o = options();
  o.extra_env["MKEVOLVE_WORKER_FAKE_BASELINE"] = "unlocked";
  {
    auto pool = make(o);
    Verdict r = pool->evaluate(request(kernel("k", "# FAKE: correct\n")));
    EXPECT_DOUBLE_EQ(r.eager.median_ms, 4.0);  // used for this verdict
  }
  auto pool = make(o);  // a new pool: nothing was kept on disk
  pool->evaluate(request(kernel("k2", "# FAKE: correct\n")));
  EXPECT_EQ(logged("baseline"), 2);
}

TEST_F(PoolTest, NoPerfMeansNoBaselines) {
  auto pool = make(options());
  auto req = request(kernel("ok", "# FAKE: correct\n"));
  req.options.measure_perf = false;
  Verdict r = pool->evaluate(req);
  EXPECT_EQ(r.status, VerdictStatus::kCorrect);
  EXPECT_FALSE(r.eager.valid);
  EXPECT_EQ(logged("baseline"), 0);
}

TEST_F(PoolTest, AFailedBaselineLeavesTheVerdictAndIsRetried) {
  auto o = options();
  o.extra_env["MKEVOLVE_WORKER_FAKE_BASELINE"] = "fail";
  auto pool = make(o);
  Verdict r = pool->evaluate(request(kernel("ok", "# FAKE: correct\n")));
  EXPECT_EQ(r.status, VerdictStatus::kCorrect);
  EXPECT_DOUBLE_EQ(r.speedup_compile, 0);
  EXPECT_NE(r.raw.value("baseline_error", std::string()).find("baseline exploded"), std::string::npos) << r.raw.dump();
  pool->evaluate(request(kernel("ok2", "# FAKE: correct 3.0\n")));
  EXPECT_EQ(logged("baseline"), 2);
}

TEST_F(PoolTest, AHangingBaselineIsCutOffAndTheServerReplaced) {
  auto o = options();
  o.extra_env["MKEVOLVE_WORKER_FAKE_BASELINE"] = "hang";
  o.baseline_timeout_s = 0.5;
  auto pool = make(o);
  Verdict r = pool->evaluate(request(kernel("ok", "# FAKE: correct\n")));
  EXPECT_EQ(r.status, VerdictStatus::kCorrect);
  EXPECT_FALSE(r.eager.valid);
  EXPECT_NE(r.raw.value("baseline_error", std::string()).find("no answer within 0.5 s"), std::string::npos) << r.raw.dump();
  EXPECT_EQ(pool->stats().restarts, 1);
  EXPECT_EQ(pool->evaluate(request(kernel("ok2", "# FAKE: incorrect\n"))).status, VerdictStatus::kIncorrect);
}

TEST_F(PoolTest, SecretsNeverReachTheWorker) {
  ::setenv("MKEVOLVE_TEST_API_KEY", "sk-test-very-secret-value-123", 1);
  ::setenv("OPENAI_API_KEY", "sk-openai-secret-value-456", 1);
  auto pool = make(options());
  Verdict r = pool->evaluate(request(kernel("env", "# FAKE: env\n")));
  ::unsetenv("MKEVOLVE_TEST_API_KEY");
  ::unsetenv("OPENAI_API_KEY");
  ASSERT_TRUE(r.raw.contains("env")) << r.raw.dump();
  const json& env = r.raw["env"];
  EXPECT_FALSE(env.contains("MKEVOLVE_TEST_API_KEY"));
  EXPECT_FALSE(env.contains("OPENAI_API_KEY"));
  for (const auto& [k, v] : env.items()) {
    EXPECT_EQ(v.get<std::string>().find("secret-value"), std::string::npos) << k;
  }
  EXPECT_EQ(env.value("CUDA_VISIBLE_DEVICES", std::string("unset")), "0");
  EXPECT_NE(env.value("PYTHONPATH", std::string()).find("worker"), std::string::npos);
  EXPECT_TRUE(env.contains(kTokenVar));
  // The sandbox self-test's kept verdicts: beside the footprints, in the baseline cache.
  EXPECT_EQ(env.value("MKEVOLVE_SANDBOX_VERDICTS", std::string()), (dir.path() / "baselines" / "sandbox-verdicts").string());
  // A private working directory inside the pool's directory.
  EXPECT_EQ(r.raw.value("cwd", std::string()).rfind((dir.path() / "pool").string(), 0), 0u) << r.raw.value("cwd", "");
}

TEST_F(PoolTest, AUserWhoSetsTheVerdictFolderEmptyHasEveryServerTestItsSandbox) {
  ::setenv("MKEVOLVE_SANDBOX_VERDICTS", "", 1);
  auto pool = make(options());
  Verdict r = pool->evaluate(request(kernel("env", "# FAKE: env\n")));
  ::unsetenv("MKEVOLVE_SANDBOX_VERDICTS");
  ASSERT_TRUE(r.raw.contains("env")) << r.raw.dump();
  ASSERT_TRUE(r.raw["env"].contains("MKEVOLVE_SANDBOX_VERDICTS")) << r.raw.dump();
  EXPECT_EQ(r.raw["env"]["MKEVOLVE_SANDBOX_VERDICTS"], "");
  // A relative folder is the user's cwd's, not the server's own fresh one.
  ::setenv("MKEVOLVE_SANDBOX_VERDICTS", "my-verdicts", 1);
  auto pool2 = make(options());
  Verdict r2 = pool2->evaluate(request(kernel("env2", "# FAKE: env\n# another kernel: not the cached verdict\n")));
  ::unsetenv("MKEVOLVE_SANDBOX_VERDICTS");
  ASSERT_TRUE(r2.raw.contains("env")) << r2.raw.dump();
  EXPECT_EQ(r2.raw["env"].value("MKEVOLVE_SANDBOX_VERDICTS", std::string()),
            (std::filesystem::current_path() / "my-verdicts").string());
}

TEST_F(PoolTest, WithoutAGpuOnlyTestModeCpuEvalsRun) {
  auto o = options(0);
  auto pool = make(o);
  EXPECT_EQ(pool->slot_count(), 1u);
  Verdict r = pool->evaluate(request(kernel("ok", "# FAKE: correct\n")));
  EXPECT_EQ(r.kind, "environment");
  EXPECT_NE(r.feedback.find("no CUDA GPU visible"), std::string::npos);
  auto req = request(kernel("ok", "# FAKE: correct\n"));
  req.options.test_cpu = true;
  EXPECT_NE(pool->evaluate(req).feedback.find("test mode"), std::string::npos);
  EXPECT_EQ(logged("eval"), 0);
  o.test_mode = true;
  auto cpu_pool = make(o);
  Verdict c = cpu_pool->evaluate(req);
  EXPECT_EQ(c.status, VerdictStatus::kCorrect) << c.feedback;
  EXPECT_EQ(c.gpu, -1);
  auto chk = cpu_pool->check(kernel("ok", "# FAKE: correct\n"));
  ASSERT_TRUE(chk.ok()) << chk.error();
  EXPECT_EQ((*chk)["clean"], true);
}

TEST_F(PoolTest, PinnedGpuAndBadInputs) {
  auto pool = make(options(2));
  auto req = request(kernel("ok", "# FAKE: correct\n"));
  req.options.gpu = 1;
  EXPECT_EQ(pool->evaluate(req).gpu, 1);
  req.options.gpu = 5;
  EXPECT_EQ(pool->evaluate(req).kind, "environment");
  auto missing = request(dir.path() / "nope.py");
  Verdict m = pool->evaluate(missing);
  EXPECT_EQ(m.kind, "bad_input");
  EXPECT_NE(m.feedback.find("nope.py"), std::string::npos);
  auto o = options(2);
  o.only_gpu = 3;
  EXPECT_FALSE(WorkerPool::create(o).ok());
}

TEST_F(PoolTest, SolutionPackageDirectoryIsAccepted) {
  auto pool = make(options());
  ASSERT_TRUE(write_file_atomic(dir.path() / "sol" / "decomposed_solution.py", "class ModelNew: pass\n# FAKE: correct\n").ok());
  auto req = request(dir.path() / "sol");
  Verdict r = pool->evaluate(req);
  EXPECT_EQ(r.status, VerdictStatus::kCorrect) << r.feedback;
}

TEST_F(PoolTest, DecompositionCheckAndHardwareInfo) {
  auto pool = make(options());
  DecompositionRequest d;
  d.problem = problem();
  d.decomposed = dir.path() / "decomposed_problem.py";
  d.subproblems_dir = dir.path() / "subkernel_problems";
  d.timeout_s = 5;
  EXPECT_TRUE(pool->verify_decomposition(d).get().ok);
  d.decomposed = dir.path() / "bad_decomposed_problem.py";
  DecompositionResult bad = pool->verify_decomposition(d).get();
  EXPECT_FALSE(bad.ok);
  ASSERT_EQ(bad.failures.size(), 1u);
  EXPECT_EQ(bad.failures[0], "decomposed_problem.py:3: mismatch: outputs differ");
  json hw = pool->hardware_info();
  EXPECT_EQ(hw["gpus"][0]["name"], "Fake GPU");
  EXPECT_EQ(hw["gpus"][0]["sm_count"], 132);
  pool->hardware_info();
  EXPECT_EQ(logged("gpu_info"), 1);
}

TEST_F(PoolTest, DestroyingThePoolResolvesQueuedAndRunningWork) {
  std::vector<std::future<Verdict>> futs;
  {
    auto pool = make(options());
    futs.push_back(pool->submit(request(kernel("hang", "# FAKE: hang\n"), 60)));
    for (int i = 0; i < 3; ++i) futs.push_back(pool->submit(request(kernel("ok" + std::to_string(i), "# FAKE: correct\n"))));
    wait_logged("eval", 1, 2);
  }
  for (auto& f : futs) {
    Verdict r = f.get();
    EXPECT_EQ(r.status, VerdictStatus::kCrashed);
    EXPECT_EQ(r.kind, "shutdown");
  }
  EXPECT_TRUE(descendants_of(::getpid()).empty());
}

}  // namespace
}  // namespace mk::eval
