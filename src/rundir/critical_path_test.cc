#include "rundir/critical_path.h"

#include <gtest/gtest.h>

#include "rundir/clock.h"
#include "records/events.h"

namespace mk::rundir {
namespace {

using nlohmann::json;

/// A run's log by hand: timestamps in seconds from the start.
struct Log {
  std::vector<json> events;
  std::chrono::system_clock::time_point t0 = std::chrono::system_clock::time_point{} + std::chrono::hours(24 * 20000);
  void at(double s, json e) {
    e["ts"] = iso8601_utc(t0 + std::chrono::milliseconds(static_cast<int64_t>(s * 1000 + 0.5)));
    events.push_back(std::move(e));
  }
  static json call(const std::string& agent, const std::string& task, int iteration, int round, int latency_ms,
                   int sample, const std::string& candidate = "") {
    records::LlmCall c;
    c.agent = agent;
    c.task = task;
    c.latency_ms = latency_ms;
    c.round = round;
    c.candidate = candidate;
    json j = c.to_json();
    j["iteration"] = iteration;
    j["sample"] = sample;
    return j;
  }
  static json verify(const std::string& agent, int iteration, int sample, double secs) {
    return records::VerifyDecomposition{"p", agent, iteration, sample, true, {}, secs}.to_json();
  }
  static json eval(const std::string& task, const std::string& cand, int iteration, double q, double s, double b,
                   bool e2e = false) {
    records::Eval e;
    e.task = task;
    e.candidate = cand;
    e.status = "correct";
    e.e2e = e2e;
    e.queued_s = q;
    e.eval_s = s;
    e.baseline_s = b;
    json j = e.to_json();
    j["iteration"] = iteration;
    return j;
  }
};

/// Two iterations: a decomposition of two rounds, two subproblems' beams (one
/// with a judged job), a split of two tries, a resume with 100 s of downtime,
/// and a final check.
Log sample_run() {
  Log l;
  l.at(0.0, records::Preflight{"problem", true, 0.4, ""}.to_json());
  l.at(0.01, records::RunStart{.method = "mkevolve", .problem = "p", .settings = {{"T", 2}}}.to_json());
  // Decomposition: round 0 is as long as worker 1 (3 s + 0.2 s of checking);
  // its LLM length is 3 s; round 1 is 1 s.
  l.at(3.2, Log::call("decompose", "p", 0, 0, 2000, 0));
  l.at(3.2, Log::verify("decompose", 0, 0, 0.5));
  l.at(3.2, Log::call("decompose", "p", 0, 0, 3000, 1));
  l.at(3.2, Log::verify("decompose", 0, 1, 0.2));
  l.at(4.3, Log::call("decompose", "p", 0, 1, 1000, 2));
  l.at(4.3, Log::verify("decompose", 0, 2, 0.1));
  l.at(4.4, records::TopologyChange{0, "initial", {}, "", {}, {}}.to_json());
  // Iteration 1: subproblem a has two rounds (LLM 6 + 5 s; the second's job is
  // judged), b one round of 10 s. a's rounds take longer (8 + 6 s).
  l.at(4.5, records::Budget{1, {{"a", 3}, {"b", 1}}, "even"}.to_json());
  l.at(18.5, Log::call("generate", "a", 1, 0, 5000, 0, "a-s0"));
  l.at(18.5, Log::eval("a", "a-s0", 1, 1.0, 2.0, 0.5));
  l.at(18.5, Log::call("generate", "a", 1, 0, 6000, 1, "a-s1"));
  l.at(18.5, Log::eval("a", "a-s1", 1, 0.0, 0.5, 0.0));
  l.at(18.5, Log::call("debug", "a", 1, 1, 4000, 2, "a-s2"));
  l.at(18.5, Log::call("judge", "a", 1, 1, 1000, 0, "a-s2"));
  l.at(18.5, Log::eval("a", "a-s2", 1, 0.0, 1.0, 0.0));
  l.at(18.5, Log::call("generate", "b", 1, 0, 10000, 0, "b-s0"));
  l.at(18.5, Log::eval("b", "b-s0", 1, 0.0, 0.1, 0.0));
  l.at(22.0, Log::eval("p", "t1", 1, 0.5, 3.0, 1.0, true));
  l.at(22.5, records::Iteration{1, {}, {}, 0, 0}.to_json());
  // Stopped here; resumed 100 s later.
  l.at(122.5, records::Resume{.events_before = 30, .notices = {}}.to_json());
  l.at(122.6, records::Preflight{"problem", true, 0.1, ""}.to_json());
  // Iteration 2: two split tries (2 s + 1 s of checking, 1 s + 0.5 s), then one round of 3 s.
  l.at(125.6, Log::call("split", "p", 2, 0, 2000, 0));
  l.at(125.6, Log::verify("split", 2, 0, 1.0));
  l.at(127.1, Log::call("split", "p", 2, 1, 1000, 1));
  l.at(127.1, Log::verify("split", 2, 1, 0.5));
  l.at(127.2, records::Budget{2, {{"a", 1}}, "even"}.to_json());
  l.at(131.2, Log::call("optimize", "a", 2, 0, 3000, 3, "a-s3"));
  l.at(131.2, Log::eval("a", "a-s3", 2, 0.0, 1.0, 0.0));
  l.at(132.3, Log::eval("p", "t2", 2, 0.0, 1.0, 0.0, true));
  l.at(132.5, records::Iteration{2, {}, {}, 0, 0}.to_json());
  // The final check's evaluation (its eval event says iteration 0) belongs after the search.
  l.at(134.6, Log::eval("p", "final", 0, 0.0, 2.0, 0.0, true));
  l.at(134.6, records::FinalCheck{.passed = true, .seed = 43, .status = "correct", .speedup_compile = 1.2}.to_json());
  l.at(135.0, records::RunEnd{"finished", 1.2, "solution", ""}.to_json());
  return l;
}

TEST(CriticalPath, RoundsAndSecondsPerPhase) {
  auto a = time_account(records::parse_log(sample_run().events));
  ASSERT_EQ(a.phases.size(), 4u);
  EXPECT_EQ(a.phases[0].label, "decomposition");
  EXPECT_EQ(a.phases[0].rounds, 2);
  EXPECT_NEAR(*a.phases[0].llm_s, 4.0, 1e-9);
  // Iteration 1: subproblem a's two rounds (6 s, then 4 + 1 s of judge) beat b's one of 10 s.
  EXPECT_EQ(a.phases[1].label, "iteration 1");
  EXPECT_EQ(a.phases[1].rounds, 2);
  EXPECT_NEAR(*a.phases[1].llm_s, 11.0, 1e-9);
  // Iteration 2: two split tries, then one beam round.
  EXPECT_EQ(a.phases[2].rounds, 3);
  EXPECT_NEAR(*a.phases[2].llm_s, 6.0, 1e-9);
  EXPECT_EQ(a.phases[3].label, "after the search");
  EXPECT_EQ(a.phases[3].rounds, 0);
  EXPECT_EQ(a.rounds, 7);
  EXPECT_NEAR(*a.llm_s, 21.0, 1e-9);
}

TEST(CriticalPath, WallTimeLeavesOutTheDowntimeBeforeAResume) {
  auto a = time_account(records::parse_log(sample_run().events));
  ASSERT_TRUE(a.wall_s);
  EXPECT_NEAR(*a.wall_s, 35.0, 1e-6);  // 135 s of log, 100 s of it stopped
  EXPECT_NEAR(*a.phases[0].wall_s, 4.4, 1e-6);
  EXPECT_NEAR(*a.phases[1].wall_s, 18.2, 1e-6);  // the resumed session's pre-flight check included
  EXPECT_NEAR(*a.phases[2].wall_s, 9.9, 1e-6);
  EXPECT_NEAR(*a.phases[3].wall_s, 2.5, 1e-6);
  EXPECT_NEAR(*a.ratio(), 35.0 / 21.0, 1e-6);
}

TEST(CriticalPath, ThePathSaysWhatTheWallTimeWaitedFor) {
  auto a = time_account(records::parse_log(sample_run().events));
  // Decomposition: worker 1 in round 0 (3 s + 0.2 s), worker 2 in round 1 (1 s + 0.1 s).
  EXPECT_NEAR(a.phases[0].path.llm_s, 4.0, 1e-9);
  EXPECT_NEAR(a.phases[0].path.verify_s, 0.3, 1e-9);
  // Iteration 1 follows subproblem a (14 s against b's 10.1 s): a-s0 (5 s of
  // LLM, 1 s queued, 2 s evaluating of which 0.5 s baselines), then a-s2
  // (4 + 1 s of LLM, 1 s evaluating); then the end-to-end evaluation.
  const auto& p1 = a.phases[1].path;
  EXPECT_NEAR(p1.llm_s, 10.0, 1e-9);
  EXPECT_NEAR(p1.queued_s, 1.0, 1e-9);
  EXPECT_NEAR(p1.baseline_s, 0.5, 1e-9);
  EXPECT_NEAR(p1.eval_s, 2.5, 1e-9);
  EXPECT_NEAR(p1.e2e_s, 3.5, 1e-9);
  const auto& p2 = a.phases[2].path;
  EXPECT_NEAR(p2.llm_s, 6.0, 1e-9);
  EXPECT_NEAR(p2.verify_s, 1.5, 1e-9);
  EXPECT_NEAR(p2.e2e_s, 1.0, 1e-9);
  EXPECT_NEAR(a.phases[3].path.e2e_s, 2.0, 1e-9);
  // What the path leaves unexplained.
  EXPECT_NEAR(*a.other_s(), 35.0 - a.path.sum(), 1e-6);
  auto j = a.to_json();
  EXPECT_EQ(j["critical_path"]["rounds"], 7);
  EXPECT_DOUBLE_EQ(j["critical_path"]["llm_s"].get<double>(), 21.0);
  EXPECT_DOUBLE_EQ(j["wall_s"].get<double>(), 35.0);
  EXPECT_EQ(j["phases"].size(), 4u);
  EXPECT_NE(a.line().find("LLM critical path 7 rounds, 21.0 s; wall / critical path 1.67"), std::string::npos)
      << a.line();
}

TEST(CriticalPath, UnknownsAreNullNotZero) {
  // A log without rounds (written before they existed) and without timestamps.
  std::vector<json> ev{records::RunStart{.method = "mkevolve", .problem = "p", .settings = {{"T", 1}}}.to_json()};
  json c = records::LlmCall{"generate", "a", {}, false, false, 5000, true, "", std::nullopt, "a-s0"}.to_json();
  c["iteration"] = 1;
  ev.push_back(c);
  auto a = time_account(records::parse_log(ev));
  EXPECT_FALSE(a.llm_s.has_value());
  EXPECT_FALSE(a.wall_s.has_value());
  EXPECT_FALSE(a.ratio().has_value());
  auto j = a.to_json();
  EXPECT_TRUE(j["critical_path"]["llm_s"].is_null());
  EXPECT_TRUE(j["wall_s"].is_null());
  EXPECT_TRUE(j["ratio"].is_null());
  EXPECT_TRUE(j["path"]["other_s"].is_null());
  EXPECT_NE(a.line().find("time: wall —; LLM critical path —"), std::string::npos) << a.line();
  // A call with its round but without its latency is as unknown (not 0 s).
  json no_latency = ev[1];
  no_latency["round"] = 0;
  no_latency.erase("latency_ms");
  EXPECT_FALSE(time_account(records::parse_log({ev[0], no_latency})).llm_s.has_value());
  // Every reply from a cache: a critical path of 0 s has no ratio.
  ev[1]["round"] = 0;
  ev[1]["latency_ms"] = 0;
  auto b = time_account(records::parse_log(ev));
  ASSERT_TRUE(b.llm_s.has_value());
  EXPECT_EQ(*b.llm_s, 0.0);
  EXPECT_EQ(b.rounds, 1);
  EXPECT_FALSE(b.ratio().has_value());
}

}  // namespace
}  // namespace mk::rundir
