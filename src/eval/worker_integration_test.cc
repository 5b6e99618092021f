// The pool with the REAL worker (worker/mkevolve_worker) in test mode on the
// CPU: torch-only candidates through correctness, deadlines and crashes.
// Skipped when the test Python has no torch or the worker is not there.
#include <gtest/gtest.h>

#include "eval/pool.h"
#include "eval/proc.h"
#include "support/testing.h"
#include "util/fs.h"

namespace mk::eval {
namespace {

namespace fs = std::filesystem;

const char* kProblem = R"PY(
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        return torch.relu(x) * self.scale + y

def get_inputs():
    return [torch.randn(32, 64), torch.randn(32, 64)]

def get_init_inputs():
    return [2.0]
)PY";

std::string candidate(const std::string& forward_body, const std::string& prelude = "") {
  return "import os\nimport torch\nimport torch.nn as nn\n" + prelude +
         "\nclass ModelNew(nn.Module):\n    def __init__(self, scale):\n        super().__init__()\n"
         "        self.scale = scale\n\n    def forward(self, x, y):\n" +
         forward_body + "\n";
}

class RealWorkerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(mk::testing::repo_root() / "worker/mkevolve_worker/serve.py") || !mk::testing::test_python_has_torch())
      return;
    dir_ = new TempDir("mk-real-worker");
    ASSERT_TRUE(write_file_atomic(dir_->path() / "problem.py", kProblem).ok());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!dir_) GTEST_SKIP() << "needs " << mk::testing::test_python() << " with torch and worker/mkevolve_worker";
  }
  std::unique_ptr<WorkerPool> make(PoolOptions::Isolation iso = PoolOptions::Isolation::kAuto,
                                   const std::string& sandbox = "") {
    PoolOptions o;
    if (!sandbox.empty()) o.extra_env["MKEVOLVE_SANDBOX"] = sandbox;
    o.python = mk::testing::test_python();
    o.test_mode = true;
    o.gpus = std::vector<Gpu>{};
    o.work_dir = dir_->path() / ("pool" + std::to_string(counter_++));
    o.cache_dir.clear();
    o.cache_baselines = false;
    o.grace_s = 60;
    o.isolation = iso;
    auto p = WorkerPool::create(o);
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error());
    return std::move(*p);
  }
  Verdict eval(WorkerPool& pool, const std::string& name, const std::string& text, double timeout_s = 60) {
    auto k = dir_->path() / (name + ".py");
    EXPECT_TRUE(write_file_atomic(k, text).ok());
    EvalRequest r;
    r.problem = dir_->path() / "problem.py";
    r.kernel = k;
    r.options.test_cpu = true;
    r.options.measure_perf = false;
    r.options.timeout_s = timeout_s;
    return pool.evaluate(r);
  }
  static TempDir* dir_;
  static int counter_;
};
TempDir* RealWorkerTest::dir_ = nullptr;
int RealWorkerTest::counter_ = 0;

TEST_F(RealWorkerTest, VerdictsAndFaultsThroughOneServer) {
  auto pool = make();
  ASSERT_TRUE(pool->probe().ok());
  EXPECT_EQ(pool->hello()["protocol"], 1);

  Verdict ok = eval(*pool, "good", candidate("        return torch.clamp(x, min=0) * self.scale + y"));
  EXPECT_EQ(ok.status, VerdictStatus::kCorrect) << ok.feedback;

  Verdict wrong = eval(*pool, "wrong", candidate("        return torch.clamp(x, min=0) * self.scale - y"));
  EXPECT_EQ(wrong.status, VerdictStatus::kIncorrect) << wrong.feedback;
  EXPECT_EQ(wrong.kind, "mismatch");
  EXPECT_GT(wrong.max_abs_err.value_or(0), 0);
  EXPECT_FALSE(wrong.feedback.empty());

  Verdict shape = eval(*pool, "shape", candidate("        return (torch.clamp(x, min=0) * self.scale + y)[:, :10]"));
  EXPECT_EQ(shape.status, VerdictStatus::kIncorrect) << shape.feedback;
  EXPECT_EQ(shape.kind, "wrong_shape");

  Verdict hang = eval(*pool, "hang", candidate("        while True:\n            pass"), 3);
  EXPECT_EQ(hang.status, VerdictStatus::kTimeout) << hang.feedback;
  EXPECT_EQ(hang.kind, "hang");

  Verdict exits = eval(*pool, "exits", candidate("        os._exit(0)"));
  EXPECT_EQ(exits.status, VerdictStatus::kCrashed) << exits.feedback;
  EXPECT_EQ(exits.kind, "exit_without_result");

  Verdict segv = eval(*pool, "segv", candidate("        import ctypes\n        ctypes.string_at(0)"));
  EXPECT_EQ(segv.kind, "segfault") << segv.feedback;

  Verdict syntax = eval(*pool, "syntax", "class ModelNew(:\n");
  EXPECT_EQ(syntax.status, VerdictStatus::kCompileError) << syntax.feedback;
  EXPECT_EQ(syntax.kind, "syntax_error");

  Verdict raises = eval(*pool, "raises", candidate("        raise RuntimeError('boom')"));
  EXPECT_EQ(raises.status, VerdictStatus::kRuntimeError) << raises.feedback;
  EXPECT_NE(raises.feedback.find("boom"), std::string::npos);

  // The worker handled every fault itself: the server never had to be replaced.
  EXPECT_EQ(pool->stats().restarts, 0);
  EXPECT_EQ(pool->stats().starts, 1);
  Verdict again = eval(*pool, "good2", candidate("        return torch.relu(x) * self.scale + y"));
  EXPECT_EQ(again.status, VerdictStatus::kCorrect) << again.feedback;
}

TEST_F(RealWorkerTest, ACandidateThatKillsTheServerIsCrashedAndThePoolGoesOn) {
  // Process-group mode: in a PID namespace the server is the namespace's init
  // and the candidate's SIGKILL to it is ignored by the kernel. The sandbox
  // (a uid of its own) refuses the signal outright, so the pool's recovery is
  // tested without it; with it, the kill is the candidate's own error.
  auto pool = make(PoolOptions::Isolation::kProcessGroup, "off");
  Verdict r = eval(*pool, "killer", candidate("        os.kill(os.getppid(), 9)\n        return x"));
  EXPECT_EQ(r.status, VerdictStatus::kCrashed) << r.kind << ": " << r.feedback;
  Verdict ok = eval(*pool, "good3", candidate("        return torch.clamp(x, min=0) * self.scale + y"));
  EXPECT_EQ(ok.status, VerdictStatus::kCorrect) << ok.feedback;
  auto boxed = make(PoolOptions::Isolation::kProcessGroup, "best-effort");
  Verdict refused = eval(*boxed, "killer2", candidate("        os.kill(os.getppid(), 9)\n        return x"));
  EXPECT_EQ(refused.status, VerdictStatus::kRuntimeError) << refused.kind << ": " << refused.feedback;
  EXPECT_NE(refused.feedback.find("Operation not permitted"), std::string::npos) << refused.feedback;
}

TEST_F(RealWorkerTest, DecompositionCheckThroughThePool) {
  fs::path fx = mk::testing::repo_root() / "tests/python/decomp_fixtures";
  if (!fs::exists(fx / "mlp_good")) GTEST_SKIP() << "no decomposition fixtures";
  auto pool = make();
  DecompositionRequest d;
  d.problem = fx / "problems/mlp.py";
  d.decomposed = fx / "mlp_good/decomposed_problem.py";
  d.subproblems_dir = fx / "mlp_good/subkernel_problems";
  d.test_cpu = true;
  d.timeout_s = 120;
  DecompositionResult good = pool->verify_decomposition(d).get();
  EXPECT_TRUE(good.ok) << good.feedback;
  d.decomposed = fx / "mlp_bad_mismatch/decomposed_problem.py";
  d.subproblems_dir = fx / "mlp_bad_mismatch/subkernel_problems";
  DecompositionResult bad = pool->verify_decomposition(d).get();
  EXPECT_FALSE(bad.ok);
  EXPECT_FALSE(bad.failures.empty());
  EXPECT_FALSE(bad.feedback.empty());
  for (const auto& f : bad.failures) EXPECT_EQ(f.find("{"), std::string::npos) << "not a readable line: " << f;

  // An honest re-expression (erf GELU, a written-out softmax) differs by ulps
  // and passes within a tenth of the fp32 tolerance; the result says by how much.
  d.problem = fx / "problems/gelu_softmax.py";
  d.decomposed = fx / "gsm_good/decomposed_problem.py";
  d.subproblems_dir = fx / "gsm_good/subkernel_problems";
  DecompositionResult close = pool->verify_decomposition(d).get();
  EXPECT_TRUE(close.ok) << close.feedback;
  ASSERT_TRUE(close.max_abs_err);
  EXPECT_GT(*close.max_abs_err, 0.0);
  EXPECT_DOUBLE_EQ(close.tolerance.value("fraction", 0.0), 0.1) << close.tolerance.dump();
  // An approximated GELU is a formula change: rejected, naming error and bound.
  d.decomposed = fx / "gsm_bad_sigmoid_gelu/decomposed_problem.py";
  d.subproblems_dir = fx / "gsm_bad_sigmoid_gelu/subkernel_problems";
  DecompositionResult approx = pool->verify_decomposition(d).get();
  EXPECT_FALSE(approx.ok);
  ASSERT_FALSE(approx.failures.empty());
  EXPECT_NE(approx.failures[0].find("exceeds the decomposition bound"), std::string::npos) << approx.failures[0];
  // The views the top level passes are the layouts each subproblem's trials use.
  d.problem = fx / "problems/views.py";
  d.decomposed = fx / "views_good/decomposed_problem.py";
  d.subproblems_dir = fx / "views_good/subkernel_problems";
  DecompositionResult views = pool->verify_decomposition(d).get();
  EXPECT_TRUE(views.ok) << views.feedback;
  ASSERT_TRUE(views.input_layouts.count("tanh")) << views.raw.dump();
  const auto& call = views.input_layouts.at("tanh").at(0).at(0);
  EXPECT_FALSE(call.value("contiguous", true)) << call.dump();
}

TEST_F(RealWorkerTest, PinningTheDotsPrecisionThroughThePool) {
  auto pool = make();
  const std::string k =
      "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(a, b):\n    return tl.dot(a, b)\n";
  auto pinned = pool->pin_precision({{"subkernel_implementations/mm.py", k}, {"decomposed_solution.py", "import torch\n"}});
  ASSERT_TRUE(pinned.ok()) << pinned.error();
  EXPECT_NE(pinned->files.at("subkernel_implementations/mm.py").find("tl.dot(a, b, input_precision=\"ieee\")"),
            std::string::npos);
  EXPECT_EQ(pinned->files.at("decomposed_solution.py"), "import torch\n");
  ASSERT_EQ(pinned->report["pinned"].size(), 1u);
  EXPECT_EQ(pinned->report["pinned"][0]["line"], 7);
}

// Live processes whose command line contains text.
std::vector<pid_t> with_cmdline(const std::string& text) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    auto cmd = read_file(e.path() / "cmdline");
    if (cmd && cmd->find(text) != std::string::npos && process_alive(std::stoi(name))) out.push_back(std::stoi(name));
  }
  return out;
}

TEST_F(RealWorkerTest, NoProcessOutlivesTheCandidateOrThePool) {
  const std::string secs = "1357.2468";  // a sleep nothing else runs
  {
    auto pool = make();
    Verdict r = eval(*pool, "sleeper",
                        candidate("        import subprocess\n        subprocess.Popen(['setsid', 'sleep', '" + secs +
                                  "'])\n        return torch.relu(x) * self.scale + y"));
    EXPECT_NE(r.kind, "environment") << r.feedback;
    EXPECT_TRUE(with_cmdline(secs).empty());  // gone as soon as the candidate finished
  }
  EXPECT_TRUE(with_cmdline(secs).empty());
  EXPECT_TRUE(descendants_of(::getpid()).empty());
}

}  // namespace
}  // namespace mk::eval
