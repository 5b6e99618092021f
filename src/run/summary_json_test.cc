// A run's summary.json: built from its event log, written and read back, and
// whether it says the run finished (what bench's re-run and adapt go by).
#include "run/summary_json.h"

#include <gtest/gtest.h>

#include "support/testing.h"
#include "support/outcome.h"
#include "util/fs.h"

namespace mk::run {
namespace {

namespace fs = std::filesystem;

Outcome oc(const std::string& pid, bool correct, double sc, double se, int64_t tokens,
           const std::string& status = "finished") {
  return mk::testing::outcome(pid, correct, sc, se, tokens, status);
}

TEST(SummaryJson, RoundTripAndErrors) {
  Outcome a = oc("p1", true, 1.25, 2.0, 42);
  a.timeline = {{8, 10, true, 1.25, 2.0}};
  auto back = outcome_from_summary(summary_to_json(a));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->problem_id, "p1");
  EXPECT_DOUBLE_EQ(back->speedup_compile.value_or(-1), 1.25);
  EXPECT_EQ(back->tokens, 42);
  ASSERT_EQ(back->timeline.size(), 1u);
  auto bad = outcome_from_summary(nlohmann::json{{"problem_id", "x"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("method"), std::string::npos);
  // An incorrect result never carries a speedup, whatever the file says.
  auto j = summary_to_json(oc("q", false, 0, 0, 1));
  j["speedup"]["compile"] = 3.0;
  EXPECT_FALSE(outcome_from_summary(j)->speedup_compile.has_value());
}

// What makes a file a summary is its four keys, of their types; the rest is
// read as every record is (records/fields.h): a field that is missing or
// mistyped reads as unknown, and the file still counts.
TEST(SummaryJson, TheFourKeysMustBeThereTheRestIsReadTolerantly) {
  auto j = summary_to_json(oc("p", true, 1.5, 2.0, 9));
  for (const char* key : {"problem_id", "method", "status", "correct"}) {
    auto wrong = j;
    wrong[key] = 5;
    auto r = outcome_from_summary(wrong);
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_NE(r.error().find(key), std::string::npos) << r.error();
  }
  auto odd = j;
  odd["calls"] = "x";
  odd["error"] = 5;
  odd["tokens"] = nullptr;
  odd["timeline"] = {{{"calls", 3}, {"correct", "yes"}, {"speedup_compile", 2.0}}, "junk"};
  auto r = outcome_from_summary(odd);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->calls, 0);
  EXPECT_EQ(r->error, "");
  EXPECT_EQ(r->tokens, 0);
  ASSERT_EQ(r->timeline.size(), 1u);                       // the entry that is no object is skipped
  EXPECT_FALSE(r->timeline[0].correct);                    // "yes" is not true
  EXPECT_FALSE(r->timeline[0].speedup_compile.has_value());  // so it carries no speedup
  EXPECT_EQ(r->speedup_compile, 1.5);
  // An older file's tokens: a plain number.
  odd["tokens"] = 77;
  EXPECT_EQ(outcome_from_summary(odd)->tokens, 77);
}

// Unknown is null, never 0 (a torch without torch.compile measures no
// baseline): written as null, read back as unknown, and files from before
// that wrote 0 for unknown read as unknown too.
TEST(SummaryJson, AnUnknownSpeedupIsNullNotZero) {
  Outcome a = oc("p1", true, 0, 2.0, 42);  // correct, no torch.compile baseline
  a.timeline = {{8, 10, true, std::nullopt, 2.0}};
  nlohmann::json j = summary_to_json(a);
  EXPECT_TRUE(j["speedup"]["compile"].is_null()) << j.dump();
  EXPECT_DOUBLE_EQ(j["speedup"]["eager"].get<double>(), 2.0);
  EXPECT_TRUE(j["timeline"][0]["speedup_compile"].is_null()) << j.dump();
  auto back = outcome_from_summary(j);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_FALSE(back->speedup_compile.has_value());
  EXPECT_FALSE(back->timeline[0].speedup_compile.has_value());
  j["speedup"]["compile"] = 0.0;  // an older file
  j["timeline"][0]["speedup_compile"] = 0.0;
  back = outcome_from_summary(j);
  EXPECT_FALSE(back->speedup_compile.has_value());
  EXPECT_FALSE(back->timeline[0].speedup_compile.has_value());
  // From the events: a correct whole-problem evaluation with no compile baseline.
  std::vector<nlohmann::json> ev = {
      {{"type", "eval"}, {"e2e", true}, {"task", "p"}, {"status", "correct"}, {"speedup_eager", 3.0}},
      {{"type", "best"}, {"correct", true}, {"speedup_compile", 0.0}},
      {{"type", "run_end"}, {"status", "finished"}, {"correct", true}},
  };
  SummaryInfo info{"p", "p", "mkevolve", "", ""};
  auto o = outcome_from_events(records::parse_log(ev), info);
  EXPECT_TRUE(o.correct);
  EXPECT_FALSE(o.speedup_compile.has_value());
  EXPECT_TRUE(summary_to_json(o)["speedup"]["compile"].is_null());
}

// A test-mode run says so in its summary, and claims nothing about PyTorch.
TEST(SummaryJson, TestModeIsSaidAndPyTorchUseIsUnknown) {
  std::vector<nlohmann::json> ev = {{{"type", "run_end"}, {"status", "finished"}, {"correct", true}}};
  SummaryInfo info{"p", "p", "mkevolve", "", ""};
  info.test_mode = true;
  auto o = outcome_from_events(records::parse_log(ev), info);
  EXPECT_TRUE(o.test_mode);
  auto j = summary_to_json(o);
  EXPECT_EQ(j["test_mode"], true);
  EXPECT_TRUE(j["uses_pytorch"].is_null()) << j.dump();
  EXPECT_NE(j["test_mode_note"].get<std::string>().find("TEST MODE"), std::string::npos);
  auto back = outcome_from_summary(j);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_TRUE(back->test_mode);
  info.test_mode = false;
  EXPECT_EQ(summary_to_json(outcome_from_events(records::parse_log(ev), info))["test_mode"], false);
}

TEST(SummaryJson, TimelineFollowsBestSoFarAndStatusFromRunEnd) {
  std::vector<nlohmann::json> ev = {
      {{"type", "run_start"}},
      {{"type", "llm_call"}, {"usage", {{"input", 10}, {"output", 5}}}},
      {{"type", "eval"}, {"e2e", true}, {"task", "p"}, {"status", "correct"}, {"speedup_compile", 1.5},
       {"speedup_eager", 3.0}},
      {{"type", "best"}, {"correct", true}, {"speedup_compile", 1.5}},
      {{"type", "iteration"}},
      {{"type", "llm_call"}, {"usage", {{"input", 20}, {"output", 5}}}},
      {{"type", "iteration"}},
  };
  SummaryInfo info{"level1-p-abc", "p", "mkevolve", "", ""};
  auto o = outcome_from_events(records::parse_log(ev), info);
  EXPECT_EQ(o.status, "interrupted");  // no run_end: the process died
  EXPECT_FALSE(o.correct);
  EXPECT_EQ(o.calls, 2);
  EXPECT_EQ(o.tokens, 40);
  ASSERT_EQ(o.timeline.size(), 1u);
  EXPECT_EQ(o.timeline[0].calls, 1);
  EXPECT_EQ(o.timeline[0].tokens, 15);
  EXPECT_DOUBLE_EQ(o.timeline[0].speedup_eager.value_or(-1), 3.0);

  ev.push_back({{"type", "run_end"}, {"status", "finished"}, {"correct", true}, {"best_speedup_compile", 1.5}});
  o = outcome_from_events(records::parse_log(ev), info);
  EXPECT_EQ(o.status, "finished");
  EXPECT_TRUE(o.correct);
  EXPECT_DOUBLE_EQ(o.speedup_compile.value_or(-1), 1.5);
  EXPECT_DOUBLE_EQ(o.speedup_eager.value_or(-1), 3.0);

  ev.back() = {{"type", "run_end"}, {"status", "failed"}, {"message", "LLM refused"}, {"correct", false}};
  o = outcome_from_events(records::parse_log(ev), info);
  EXPECT_EQ(o.status, "failed");
  EXPECT_EQ(o.error, "LLM refused");
  EXPECT_FALSE(o.correct);
}

TEST(SummaryJson, SaysWhatTheReportAndStatusLineSayOfTheBestSolution) {
  // The best, swap and run_end records are folded once (records::BestSoFar)
  // for summary.json, the report and the status line alike. summary.json
  // used to fold them its own way: an older log's correct: false placeholder
  // after a correct best made the run not correct, and a `mkevolve swap` to
  // PyTorch after the run ended was in report.md but not in uses_pytorch.
  std::vector<nlohmann::json> ev = {
      {{"type", "run_start"}},
      {{"type", "best"}, {"t", 1}, {"correct", true}, {"speedup_compile", 1.4}, {"contains_pytorch_subkernels", false}},
      {{"type", "best"}, {"t", 2}, {"correct", false}, {"speedup_compile", nullptr}},
      {{"type", "iteration"}},
      {{"type", "run_end"}, {"status", "finished"}, {"best_speedup_compile", 1.4}},
  };
  SummaryInfo info{"level1-p-abc", "p", "mkevolve", "", ""};
  auto o = outcome_from_events(records::parse_log(ev), info);
  EXPECT_TRUE(o.correct);
  EXPECT_DOUBLE_EQ(o.speedup_compile.value_or(-1), 1.4);
  EXPECT_FALSE(o.uses_pytorch);
  ev.push_back({{"type", "swap"}, {"name", "linear"}, {"from", "c3"}, {"to", "pytorch"}, {"by", "mkevolve swap"},
                {"speedup_before", 1.4}, {"speedup_after", 0.9}, {"contains_pytorch_subkernels", true}});
  o = outcome_from_events(records::parse_log(ev), info);
  EXPECT_TRUE(o.uses_pytorch);
}

TEST(SummaryJson, TheSpeedupIsThePassingFinalChecksOwnAndSaysWhoMeasuredIt) {
  std::vector<nlohmann::json> ev = {
      {{"type", "run_start"}},
      {{"type", "eval"}, {"e2e", true}, {"task", "p"}, {"status", "correct"}, {"speedup_compile", 1.5},
       {"speedup_eager", 3.0}},
      {{"type", "best"}, {"correct", true}, {"speedup_compile", 1.5}},
      {{"type", "iteration"}},
      {{"type", "run_end"}, {"status", "finished"}, {"correct", true}, {"best_speedup_compile", 1.5}},
  };
  SummaryInfo info{"p", "p", "mkevolve", "", ""};
  auto o = outcome_from_events(records::parse_log(ev), info);
  EXPECT_EQ(o.speedup_measured_by, "search");
  EXPECT_DOUBLE_EQ(o.speedup_compile.value_or(-1), 1.5);
  ev.insert(ev.end() - 1, nlohmann::json{{"type", "final_check"}, {"passed", true}, {"seed", 43}, {"status", "correct"},
                                         {"speedup_compile", 1.2}, {"speedup_eager", 2.5},
                                         {"search_speedup_compile", 1.5}});
  o = outcome_from_events(records::parse_log(ev), info);
  EXPECT_EQ(o.speedup_measured_by, "final_check");
  EXPECT_DOUBLE_EQ(o.speedup_compile.value_or(-1), 1.2);
  EXPECT_DOUBLE_EQ(o.speedup_eager.value_or(-1), 2.5);
  auto j = summary_to_json(o);
  EXPECT_EQ(j["speedup"]["measured_by"], "final_check");
  EXPECT_DOUBLE_EQ(j["final_check"]["search_speedup_compile"].get<double>(), 1.5);
  EXPECT_EQ(outcome_from_summary(j)->speedup_measured_by, "final_check");
}

TEST(SummaryJson, SaysFinishedOnlyForAFinishedRunsSummary) {
  mk::TempDir tmp;
  const fs::path d = tmp.path();
  EXPECT_FALSE(summary_says_finished(d)) << "no summary.json";
  ASSERT_TRUE(write_file_atomic(d / "summary.json", "{not json").ok());
  EXPECT_FALSE(summary_says_finished(d));
  ASSERT_TRUE(write_file_atomic(d / "summary.json", R"({"status": "finished"})").ok());
  EXPECT_FALSE(summary_says_finished(d)) << "not a summary: it lacks problem_id, method and correct";
  ASSERT_TRUE(write_file_atomic(d / "summary.json", summary_to_json(oc("p", false, 0, 0, 1, "interrupted")).dump()).ok());
  EXPECT_FALSE(summary_says_finished(d));
  ASSERT_TRUE(write_file_atomic(d / "summary.json", summary_to_json(oc("p", true, 1.2, 2.0, 7)).dump()).ok());
  EXPECT_TRUE(summary_says_finished(d));
}

}  // namespace
}  // namespace mk::run
