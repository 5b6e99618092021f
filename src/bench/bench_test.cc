#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "bench/bench_report.h"
#include "bench/metrics.h"
#include "run/summary_json.h"
#include "bench/suite.h"
#include "support/outcome.h"
#include "util/fs.h"

namespace mk::bench {
namespace {

void write_problem(const fs::path& p, const std::string& body) {
  ASSERT_TRUE(write_file_atomic(p, "import torch\nclass Model(torch.nn.Module):\n    pass\n\ndef get_inputs():\n    "
                                  "return []\n\ndef get_init_inputs():\n    return []\n# " + body + "\n")
                  .ok());
}

TEST(Suite, DiscoversLevelFolderSortedByNumber) {
  TempDir d;
  auto lvl = d.path() / "level2";
  write_problem(lvl / "10_B.py", "b");
  write_problem(lvl / "2_A.py", "a");
  write_problem(lvl / "1_C.py", "c");
  ASSERT_TRUE(write_file_atomic(lvl / "__init__.py", "").ok());
  ASSERT_TRUE(write_file_atomic(lvl / "helper.py", "x = 1\n").ok());  // no Model: skipped
  ASSERT_TRUE(write_file_atomic(lvl / "3_D.py", "import torch\nclass Model(torch.nn.Module):\n    pass\n").ok());
  std::vector<std::string> skipped;
  auto s = discover_problems({lvl}, &skipped);
  ASSERT_TRUE(s.ok()) << s.error();
  ASSERT_EQ(s->size(), 3u);
  // Each file left out is named, with why (not counted as a problem).
  ASSERT_EQ(skipped.size(), 2u) << ::testing::PrintToString(skipped);
  std::sort(skipped.begin(), skipped.end());
  EXPECT_NE(skipped[0].find("3_D.py: not a KernelBench problem: it must define get_inputs()"), std::string::npos)
      << skipped[0];
  EXPECT_NE(skipped[1].find("helper.py: not a KernelBench problem: no `class Model"), std::string::npos) << skipped[1];
  EXPECT_EQ((*s)[0].name, "1_C");
  EXPECT_EQ((*s)[1].name, "2_A");
  EXPECT_EQ((*s)[2].name, "10_B");
  EXPECT_EQ((*s)[0].level, "level2");
  EXPECT_EQ((*s)[0].id().rfind("level2-1_C-", 0), 0u);
}

TEST(Suite, IdChangesWithContent) {
  TempDir d;
  write_problem(d.path() / "p.py", "one");
  auto a = discover_problems({d.path() / "p.py"});
  write_problem(d.path() / "p.py", "two");
  auto b = discover_problems({d.path() / "p.py"});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)[0].id(), (*b)[0].id());
}

TEST(Suite, DuplicateContentListedOnce) {
  TempDir d;
  write_problem(d.path() / "a.py", "same");
  write_problem(d.path() / "b.py", "same");
  auto s = discover_problems({d.path() / "a.py", d.path() / "b.py"});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->size(), 1u);
}

TEST(Suite, BadInputsNameThePath) {
  TempDir d;
  auto missing = discover_problems({d.path() / "nope.py"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("nope.py"), std::string::npos);
  ASSERT_TRUE(write_file_atomic(d.path() / "x.py", "print(1)\n").ok());
  auto nomodel = discover_problems({d.path() / "x.py"});
  ASSERT_FALSE(nomodel.ok());
  EXPECT_NE(nomodel.error().find("class Model"), std::string::npos);
  auto empty_dir = discover_problems({d.path() / "empty"});
  EXPECT_FALSE(empty_dir.ok());
}

TEST(Shard, ParseAndErrors) {
  auto s = parse_shard("1/4");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->index, 1);
  EXPECT_EQ(s->count, 4);
  for (const char* bad : {"4/4", "-1/2", "1", "a/b", "1/0", "1/2x"}) EXPECT_FALSE(parse_shard(bad).ok()) << bad;
}

TEST(Shard, UnionIsTheSuiteAndShardsDoNotOverlap) {
  TempDir d;
  for (int i = 0; i < 23; ++i) write_problem(d.path() / (std::to_string(i) + "_P.py"), std::to_string(i));
  auto suite = discover_problems({d.path()});
  ASSERT_TRUE(suite.ok());
  for (int n : {1, 2, 3, 5, 23, 30}) {
    std::multiset<std::string> all;
    for (int i = 0; i < n; ++i)
      for (const auto& p : select_shard(*suite, {i, n})) all.insert(p.id());
    EXPECT_EQ(all.size(), suite->size()) << n;
    for (const auto& p : *suite) EXPECT_EQ(all.count(p.id()), 1u) << n;
  }
}

run::Outcome oc(const std::string& pid, bool correct, double sc, double se, int64_t tokens, const std::string& status = "finished") {
  return mk::testing::outcome(pid, correct, sc, se, tokens, status);
}

TEST(Metrics, HandComputed) {
  // 5 problems: speedups vs compile 0.4, 1.0 (exactly), 1.5, 2.5 and one incorrect.
  std::vector<run::Outcome> v = {oc("a", true, 0.4, 0.8, 100), oc("b", true, 1.0, 1.2, 200), oc("c", true, 1.5, 3.0, 300),
                            oc("d", true, 2.5, 2.0, 400), oc("e", false, 9.0, 9.0, 500, "failed")};
  MethodMetrics m = compute_metrics("mkevolve", v);
  EXPECT_EQ(m.problems, 5);
  EXPECT_DOUBLE_EQ(m.correct, 0.8);
  EXPECT_DOUBLE_EQ(m.fast_compile["0.5"], 0.6);  // 1.0, 1.5, 2.5
  EXPECT_DOUBLE_EQ(m.fast_compile["1"], 0.4);    // strict: 1.0 is not > 1
  EXPECT_DOUBLE_EQ(m.fast_compile["2"], 0.2);
  EXPECT_DOUBLE_EQ(m.fast_eager["1"], 0.6);      // 1.2, 3.0, 2.0
  EXPECT_NEAR(m.geomean_compile.value_or(-1), std::pow(0.4 * 1.0 * 1.5 * 2.5, 0.25), 1e-12);
  EXPECT_EQ(m.total_tokens, 1500);
  EXPECT_DOUBLE_EQ(m.mean_tokens, 300);
  EXPECT_EQ(m.failed_runs, 1);
}

TEST(Metrics, WinRate) {
  std::map<std::string, std::vector<run::Outcome>> by;
  by["beam"] = {oc("a", true, 1.0, 1, 0), oc("b", true, 2.0, 1, 0), oc("c", false, 0, 0, 0)};
  by["mkevolve"] = {oc("a", true, 1.5, 1, 0), oc("b", true, 2.0, 1, 0), oc("c", true, 0.1, 0, 0), oc("z", true, 5, 5, 0)};
  WinRate w = compute_win_rate(by);
  ASSERT_EQ(w.methods, (std::vector<std::string>{"beam", "mkevolve"}));
  EXPECT_EQ(w.shared[1][0], 3);               // z was not run by beam
  EXPECT_DOUBLE_EQ(w.rate[1][0], 2.0 / 3.0);  // a and c; b is a tie
  EXPECT_DOUBLE_EQ(w.rate[0][1], 0.0);
}

TEST(Metrics, CurveFollowsBestSoFar) {
  run::Outcome a = oc("a", true, 1.5, 1, 300);
  a.timeline = {{16, 100, false, 0, 0}, {32, 200, true, 0.8, 1}, {48, 300, true, 1.5, 2}};
  run::Outcome b = oc("b", false, 0, 0, 250);
  b.timeline = {{16, 50, false, 0, 0}, {48, 250, false, 0, 0}};
  auto c = compute_curve({a, b}, 16);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].calls, 16);
  EXPECT_DOUBLE_EQ(c[0].correct, 0.0);
  EXPECT_DOUBLE_EQ(c[0].mean_tokens, 75);
  EXPECT_DOUBLE_EQ(c[1].correct, 0.5);
  EXPECT_DOUBLE_EQ(c[1].fast_0_5, 0.5);
  EXPECT_DOUBLE_EQ(c[1].fast_1, 0.0);
  EXPECT_DOUBLE_EQ(c[1].mean_tokens, 125);  // b still at its 16-call state
  EXPECT_DOUBLE_EQ(c[2].fast_1, 0.5);
  EXPECT_DOUBLE_EQ(c[2].mean_tokens, 275);
}

TEST(BenchReport, MergesShardsAndRenders) {
  TempDir d;
  auto put = [&](const std::string& rel, const run::Outcome& o) {
    ASSERT_TRUE(write_file_atomic(d.path() / rel / "summary.json", run::summary_to_json(o).dump()).ok());
  };
  run::Outcome a = oc("p1", true, 1.5, 2.0, 1000);
  a.method = "mkevolve";
  a.problem_name = "1_Conv";
  a.timeline = {{16, 500, true, 1.2, 1.5}, {32, 1000, true, 1.5, 2.0}};
  run::Outcome b = oc("p2", false, 0, 0, 3000, "failed");
  b.method = "mkevolve";
  b.error = "worker crashed";
  run::Outcome c = oc("p1", true, 0.9, 1.0, 2000);
  c.method = "beam";
  put("shard0/mkevolve/p1", a);
  put("shard1/mkevolve/p2", b);
  put("shard0/beam/p1", c);
  // The same problem again from an overlapping shard, unfinished: the finished one wins.
  run::Outcome a2 = a;
  a2.status = "interrupted";
  a2.correct = false;
  put("shard9/mkevolve/p1", a2);
  ASSERT_TRUE(write_file_atomic(d.path() / "junk" / "summary.json", "{not json").ok());

  auto res = load_results({d.path()});
  ASSERT_TRUE(res.ok()) << res.error();
  ASSERT_EQ(res->by_method.at("mkevolve").size(), 2u);
  EXPECT_TRUE(res->by_method.at("mkevolve")[0].correct);
  EXPECT_EQ(res->warnings.size(), 2u);  // the duplicate and the junk file
  BenchReport r = build_report(std::move(*res));
  std::string md = render_markdown(r);
  EXPECT_NE(md.find("| mkevolve | 2 | 0.50 | 0.50 | 0.50 | 0.00 | 1.50 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| beam | 1 | 1.00 | 1.00 | 0.00 |"), std::string::npos) << md;
  EXPECT_NE(md.find("worker crashed"), std::string::npos);
  std::string html = render_html(r);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  auto j = render_json(r);
  EXPECT_DOUBLE_EQ(j["win_rate"]["rate"][1][0].get<double>(), 1.0);  // mkevolve beats beam on p1
  std::string csv = render_csv(r);
  EXPECT_NE(csv.find("mkevolve,p2,p2,failed,0,"), std::string::npos) << csv;
  // Without --baseline-tf32 runs there is no TF32 column.
  EXPECT_EQ(md.find("TF32 on"), std::string::npos) << md;
}

TEST(BenchReport, ATf32BaselineIsShownBesideTheTf32OffOne) {
  TempDir d;
  run::Outcome a = oc("p1", true, 1.5, 2.0, 1000);
  a.method = "mkevolve";
  a.speedup_compile_tf32 = 0.8;
  auto back = run::outcome_from_summary(run::summary_to_json(a));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_DOUBLE_EQ(back->speedup_compile_tf32.value_or(-1), 0.8);
  ASSERT_TRUE(write_file_atomic(d.path() / "mkevolve" / "p1" / "summary.json", run::summary_to_json(a).dump()).ok());
  auto res = load_results({d.path()});
  ASSERT_TRUE(res.ok()) << res.error();
  BenchReport r = build_report(std::move(*res));
  std::string md = render_markdown(r);
  EXPECT_NE(md.find("| vs compile | vs compile (TF32 on) | vs eager |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1.50 | 0.80 | 2.00 |"), std::string::npos) << md;
  EXPECT_NE(render_html(r).find("<th>vs compile (TF32 on)</th>"), std::string::npos);
  // From a run's events: the passing final check's figure.
  std::vector<nlohmann::json> ev = {
      {{"type", "best"}, {"correct", true}, {"speedup_compile", 1.5}},
      {{"type", "final_check"}, {"passed", true}, {"speedup_compile", 1.5}, {"speedup_compile_tf32", 0.7}},
      {{"type", "run_end"}, {"status", "ok"}, {"correct", true}}};
  run::SummaryInfo info;
  info.problem_name = "p1";
  EXPECT_DOUBLE_EQ(run::outcome_from_events(records::parse_log(ev), info).speedup_compile_tf32.value_or(-1), 0.7);
}

// --shapes: the returned solution's final check at the shape variants is a
// "holds at" column, from the run's events through summary.json.
TEST(BenchReport, TheShapesTheSolutionHoldsAtAreAColumn) {
  TempDir d;
  std::vector<nlohmann::json> ev = {
      {{"type", "best"}, {"correct", true}, {"speedup_compile", 1.5}},
      {{"type", "final_check"}, {"passed", true}, {"status", "correct"}, {"speedup_compile", 1.5},
       {"shapes", {{"mode", "check"}, {"benchmark", "batch_size=16"}, {"held", {"batch_size=15"}},
                   {"failed", {{{"shape", "batch_size=7"}, {"error", "mismatch"}}}}, {"skipped", nlohmann::json::array()}}}},
      {{"type", "run_end"}, {"status", "ok"}, {"correct", true}}};
  run::SummaryInfo info;
  info.problem_id = info.problem_name = "p1";
  info.method = "mkevolve";
  run::Outcome a = run::outcome_from_events(records::parse_log(ev), info);
  ASSERT_TRUE(write_file_atomic(d.path() / "mkevolve" / "p1" / "summary.json", run::summary_to_json(a).dump()).ok());
  run::Outcome b = oc("p2", true, 1.1, 1.2, 1000);  // a run without --shapes: no figure, never a made-up one
  b.method = "mkevolve";
  ASSERT_TRUE(write_file_atomic(d.path() / "mkevolve" / "p2" / "summary.json", run::summary_to_json(b).dump()).ok());
  auto res = load_results({d.path()});
  ASSERT_TRUE(res.ok()) << res.error();
  std::string md = render_markdown(build_report(std::move(*res)));
  EXPECT_NE(md.find("| vs eager | holds at | Tokens |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1/2 variants (fails at batch_size=7) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| – |"), std::string::npos) << md;
}

// A correct kernel measured without a torch.compile baseline: its speedup is
// unknown, "n/a" in the text (with the reason), empty in the CSV, null in the
// JSON, and out of the geomean; never 0.00.
TEST(BenchReport, AnUnknownSpeedupIsNaNotZeroAndTheReportSaysWhy) {
  TempDir d;
  run::Outcome a = oc("p1", true, 0, 2.0, 1000);  // no torch.compile baseline
  a.method = "mkevolve";
  ASSERT_TRUE(write_file_atomic(d.path() / "mkevolve" / "p1" / "summary.json", run::summary_to_json(a).dump()).ok());
  auto res = load_results({d.path()});
  ASSERT_TRUE(res.ok()) << res.error();
  BenchReport r = build_report(std::move(*res));
  ASSERT_EQ(r.metrics.size(), 1u);
  EXPECT_FALSE(r.metrics[0].geomean_compile.has_value());
  EXPECT_DOUBLE_EQ(r.metrics[0].geomean_eager.value_or(-1), 2.0);
  const std::string md = render_markdown(r);
  EXPECT_EQ(md.find("0.00x"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1.00 | 0.00 | 0.00 | 0.00 | n/a |"), std::string::npos) << md;  // correct, fast_p, geomean
  EXPECT_NE(md.find("| n/a | 2.00 |"), std::string::npos) << md;                       // the per-problem row
  EXPECT_NE(md.find("n/a: not known"), std::string::npos) << md;
  EXPECT_NE(md.find("no torch.compile baseline on the machine"), std::string::npos) << md;
  EXPECT_NE(render_html(r).find("no torch.compile baseline on the machine"), std::string::npos);
  EXPECT_NE(render_csv(r).find(",1,,2,1000,"), std::string::npos) << render_csv(r);
  auto j = render_json(r);
  EXPECT_TRUE(j["methods"]["mkevolve"]["geomean_compile"].is_null()) << j.dump();
  EXPECT_TRUE(j["problems"][0]["speedup"]["compile"].is_null()) << j.dump();
}

// Test-mode runs say so wherever their figures appear: no "on the same GPU".
TEST(BenchReport, TestModeRunsSaySo) {
  TempDir d;
  run::Outcome a = oc("p1", true, 1.5, 2.0, 1000);
  a.method = "mkevolve";
  a.test_mode = true;
  ASSERT_TRUE(write_file_atomic(d.path() / "mkevolve" / "p1" / "summary.json", run::summary_to_json(a).dump()).ok());
  auto res = load_results({d.path()});
  ASSERT_TRUE(res.ok()) << res.error();
  BenchReport r = build_report(std::move(*res));
  const std::string md = render_markdown(r), html = render_html(r), csv = render_csv(r);
  EXPECT_NE(md.find("**TEST MODE**"), std::string::npos) << md;
  EXPECT_NE(md.find("PyTorch stand-ins run on a CPU"), std::string::npos) << md;
  EXPECT_EQ(md.find("same GPU"), std::string::npos) << md;
  EXPECT_NE(md.find("finished (test mode)"), std::string::npos) << md;
  EXPECT_NE(html.find("<b>TEST MODE</b>"), std::string::npos);
  EXPECT_EQ(html.find("same GPU"), std::string::npos);
  EXPECT_NE(csv.find(",test_mode,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",1000,0,,1,"), std::string::npos) << csv;  // tokens, calls, uses_pytorch unknown, test_mode 1
  EXPECT_EQ(render_json(r)["test_mode_runs"], 1);
}

TEST(BenchReport, NothingToReadIsAnError) {
  TempDir d;
  auto res = load_results({d.path()});
  ASSERT_FALSE(res.ok());
  EXPECT_NE(res.error().find("summary.json"), std::string::npos);
  EXPECT_FALSE(load_results({d.path() / "missing"}).ok());
}

}  // namespace
}  // namespace mk::bench
