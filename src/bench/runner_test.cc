// The bench engine with a scripted LLM and the fake evaluator: concurrency,
// skip on re-run (no new LLM calls or evaluations), sharding, a failing problem
// not stopping the suite, and merging shards into hand-computable metrics.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <set>

#include <fmt/format.h>

#include "agents/agents.h"
#include "bench/bench_report.h"
#include "run/problem_run.h"
#include "bench/runner.h"
#include "run/summary_json.h"
#include "support/fake_evaluator.h"
#include "support/scripted_llm.h"
#include "support/testing.h"
#include "util/fs.h"

namespace mk::bench {
namespace {

using mk::testing::FakeEvaluator;
using mk::testing::kernel_reply;
using mk::testing::ScriptedLlm;

std::string problem_source(int n) {
  return fmt::format(
      "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self):\n"
      "        super().__init__()\n\n    def forward(self, x):\n        return torch.relu(x) * {}\n\n\n"
      "def get_inputs():\n    return [torch.randn(4, 8)]\n\n\ndef get_init_inputs():\n    return []\n",
      n);
}

struct Suite {
  mk::TempDir dir;
  ScriptedLlm llm;
  FakeEvaluator ev;
  agents::Prompts prompts;
  std::vector<SuiteProblem> problems;

  // Problems with an LLM call in flight right now, and the most seen at once.
  std::mutex fmu;
  std::condition_variable fcv;
  std::map<std::string, int> in_flight;
  size_t most_at_once = 0;

  // 1_A: 2.0x, 2_B: 0.8x, 3_C: incorrect, 4_Broken: no get_inputs (fails to load),
  // 5_Refused: the LLM fails with a fatal error (the run ends in an error).
  // overlap: until two problems were seen at once, an LLM call waits (up to 10 s)
  // for another problem's call, so problems that run concurrently are seen doing so.
  explicit Suite(bool overlap = false) {
    if (overlap)
      llm.when([this](const llm::Request& req) -> std::optional<std::string> {
        std::unique_lock<std::mutex> lk(fmu);
        ++in_flight[req.task];
        auto busy = [&] {
          size_t n = 0;
          for (const auto& [t, c] : in_flight) n += c > 0;
          return n;
        };
        most_at_once = std::max(most_at_once, busy());
        fcv.notify_all();
        fcv.wait_for(lk, std::chrono::seconds(10), [&] { return busy() >= 2 || most_at_once >= 2; });
        most_at_once = std::max(most_at_once, busy());
        --in_flight[req.task];
        return std::nullopt;  // the reply comes from the rules below
      });
    auto p = agents::Prompts::load(mk::testing::repo_root() / "src" / "prompts");
    EXPECT_TRUE(p.ok()) << p.error();
    prompts = *p;
    fs::path lvl = dir.path() / "problems" / "level1";
    EXPECT_TRUE(write_file_atomic(lvl / "1_A.py", problem_source(1)).ok());
    EXPECT_TRUE(write_file_atomic(lvl / "2_B.py", problem_source(2)).ok());
    EXPECT_TRUE(write_file_atomic(lvl / "3_C.py", problem_source(3)).ok());
    EXPECT_TRUE(write_file_atomic(lvl / "4_Broken.py", "class Model(object):\n    pass\n").ok());
    EXPECT_TRUE(write_file_atomic(lvl / "5_Refused.py", problem_source(5)).ok());  // no rule: a fatal LLM error
    llm.on("*", "1_A", kernel_reply("correct speedup=2.0"));
    llm.on("*", "2_B", kernel_reply("correct speedup=0.8"));
    llm.on("*", "3_C", kernel_reply("incorrect"));
    // The folder leaves 4_Broken out (no get_inputs: not a problem); named
    // on its own, it is one, and fails in its run.
    auto d = discover_problems({lvl, lvl / "4_Broken.py"});
    EXPECT_TRUE(d.ok()) << d.error();
    problems = *d;
  }
  run::Shared shared() {
    run::Shared s;
    s.llm = &llm;
    s.evaluator = &ev;
    s.prompts = &prompts;
    s.hardware = agents::hardware_text(ev.hardware_info());
    return s;
  }
  SuiteOptions options(int jobs) {
    SuiteOptions o;
    o.out = dir.path() / "out";
    o.opts.method = "parallel";
    o.opts.iterations = 1;
    o.opts.calls_per_iter = 2;
    o.jobs = jobs;
    o.test_cpu = true;
    return o;
  }
};

const run::Outcome* find(const SuiteRun& r, const std::string& name) {
  for (const auto& o : r.outcomes)
    if (o.problem_name == name) return &o;
  return nullptr;
}

TEST(BenchRunner, RunsEveryProblemConcurrentlyAndAFailureDoesNotStopTheSuite) {
  Suite s(/*overlap=*/true);
  ASSERT_EQ(s.problems.size(), 5u);
  std::vector<std::string> lines;
  std::mutex mu;
  auto o = s.options(2);
  o.log = [&](const std::string& l) {
    std::lock_guard<std::mutex> lk(mu);
    lines.push_back(l);
  };
  auto r = run_suite(s.shared(), s.problems, o);
  ASSERT_EQ(r.outcomes.size(), 5u);
  EXPECT_EQ(r.created, 5);
  EXPECT_EQ(r.failed, 2);
  const run::Outcome* a = find(r, "1_A");
  const run::Outcome* b = find(r, "2_B");
  const run::Outcome* c = find(r, "3_C");
  const run::Outcome* broken = find(r, "4_Broken");
  const run::Outcome* refused = find(r, "5_Refused");
  ASSERT_TRUE(a && b && c && broken && refused);
  EXPECT_EQ(refused->status, "failed");
  EXPECT_FALSE(refused->correct);
  EXPECT_NE(refused->error.find("no rule"), std::string::npos) << refused->error;
  EXPECT_EQ(a->status, "finished");
  EXPECT_TRUE(a->correct);
  EXPECT_NEAR(a->speedup_compile.value_or(-1), 2.0, 1e-9);
  EXPECT_EQ(a->calls, 2);
  EXPECT_FALSE(a->timeline.empty());
  EXPECT_TRUE(a->timeline.back().correct);
  EXPECT_TRUE(b->correct);
  EXPECT_NEAR(b->speedup_compile.value_or(-1), 0.8, 1e-9);
  EXPECT_EQ(c->status, "finished");
  EXPECT_FALSE(c->correct);
  EXPECT_EQ(broken->status, "failed");
  EXPECT_FALSE(broken->correct);
  EXPECT_NE(broken->error.find("get_inputs"), std::string::npos) << broken->error;
  // Every problem has its summary.json, readable by bench-report.
  for (const auto& p : s.problems) {
    auto text = read_file(problem_dir(o, p) / "summary.json");
    ASSERT_TRUE(text.ok()) << p.id();
    auto back = run::outcome_from_summary(nlohmann::json::parse(*text));
    ASSERT_TRUE(back.ok()) << back.error();
    EXPECT_EQ(back->problem_id, p.id());
  }
  // jobs=2: two problems were in flight at once, never more.
  EXPECT_EQ(s.most_at_once, 2u);
  // The log shows each problem started and finished once with a suite counter.
  int starts = 0, ends = 0;
  for (const auto& l : lines) {
    if (l.rfind("[start]", 0) == 0) ++starts;
    if (l.find("/5] ") != std::string::npos) ++ends;
  }
  EXPECT_EQ(starts, 5);
  EXPECT_EQ(ends, 5);
}

TEST(BenchRunner, RerunSkipsFinishedProblemsWithoutNewCallsOrEvaluations) {
  Suite s;
  auto o = s.options(2);
  // Calls for the finished problems (the failed ones are tried again).
  auto finished_calls = [&] {
    int n = 0;
    for (const auto& r : s.llm.requests()) n += r.task != "5_Refused";
    return n;
  };
  auto first = run_suite(s.shared(), s.problems, o);
  const int calls = finished_calls();
  const size_t evals = s.ev.requests().size();
  EXPECT_GT(calls, 0);
  auto second = run_suite(s.shared(), s.problems, o);
  EXPECT_EQ(second.skipped, 3);
  EXPECT_EQ(second.created, 1);  // the broken problem is tried again (and fails again)
  EXPECT_EQ(second.resumed, 1);  // the refused one is resumed (and fails again)
  EXPECT_EQ(finished_calls(), calls);
  EXPECT_EQ(s.ev.requests().size(), evals);  // the refused problem never reached an evaluation
  for (size_t i = 0; i < first.outcomes.size(); ++i) {
    EXPECT_EQ(first.outcomes[i].correct, second.outcomes[i].correct);
    EXPECT_EQ(first.outcomes[i].speedup_compile, second.outcomes[i].speedup_compile);
  }
}

TEST(BenchRunner, InterruptedRunIsResumedNotRecreated) {
  Suite s;
  auto o = s.options(1);
  std::vector<SuiteProblem> one{s.problems[0]};
  auto r = run_suite(s.shared(), one, o);
  ASSERT_TRUE(r.outcomes[0].correct);
  // Pretend the machine died: the summary says the run did not finish.
  fs::path dir = problem_dir(o, one[0]);
  run::Outcome half = r.outcomes[0];
  half.status = "interrupted";
  ASSERT_TRUE(run::write_summary(dir, half).ok());
  EXPECT_EQ(plan(dir), Action::kResume);
  auto again = run_suite(s.shared(), one, o);
  EXPECT_EQ(again.resumed, 1);
  EXPECT_EQ(again.outcomes[0].status, "finished");
  EXPECT_TRUE(again.outcomes[0].correct);
}

TEST(BenchRunner, ShardsPartitionTheSuiteAndMergeIntoHandComputedMetrics) {
  Suite s;
  auto o = s.options(1);
  std::set<std::string> seen;
  size_t total = 0;
  for (int i = 0; i < 3; ++i) {
    auto mine = select_shard(s.problems, Shard{i, 3});
    auto r = run_suite(s.shared(), mine, o);
    for (const auto& x : r.outcomes) {
      EXPECT_TRUE(seen.insert(x.problem_id).second) << x.problem_id << " in two shards";
      ++total;
    }
  }
  EXPECT_EQ(total, s.problems.size());
  std::set<std::string> all;
  for (const auto& p : s.problems) all.insert(p.id());
  EXPECT_EQ(seen, all);

  auto res = load_results({o.out});
  ASSERT_TRUE(res.ok()) << res.error();
  auto rep = build_report(*res, 1);
  ASSERT_EQ(rep.metrics.size(), 1u);
  const auto& m = rep.metrics[0];
  EXPECT_EQ(m.method, "parallel");
  EXPECT_EQ(m.problems, 5);
  EXPECT_DOUBLE_EQ(m.correct, 0.4);                 // A, B of 5
  EXPECT_DOUBLE_EQ(m.fast_compile.at("0.5"), 0.4);  // 2.0 and 0.8 > 0.5
  EXPECT_DOUBLE_EQ(m.fast_compile.at("1"), 0.2);    // only 2.0
  EXPECT_DOUBLE_EQ(m.fast_compile.at("2"), 0.0);    // strict: 2.0 is not > 2
  EXPECT_NEAR(m.geomean_compile.value_or(-1), std::sqrt(2.0 * 0.8), 1e-9);
  EXPECT_EQ(m.failed_runs, 2);
}

}  // namespace
}  // namespace mk::bench
