#include "report/report.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "report/status_line.h"
#include "report/svg.h"
#include "rundir/event_log.h"
#include "records/events.h"
#include "rundir/run_dir.h"
#include "support/testing.h"
#include "util/fs.h"

namespace mk::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path fixture() { return mk::testing::repo_root() / "src" / "report" / "testdata" / "cvit"; }

std::vector<json> fixture_events() {
  auto evs = rundir::read_event_log(fixture() / "events.jsonl");
  EXPECT_TRUE(evs.ok()) << evs.error();
  return evs.ok() ? *evs : std::vector<json>{};
}

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

ReportData fixture_summary() {
  auto s = load_run(fixture(), nullptr);
  EXPECT_TRUE(s.ok()) << s.error();
  return s.ok() ? *s : ReportData{};
}

TEST(Summary, FigureOneRunFromTheFixture) {
  ReportData s = fixture_summary();
  EXPECT_EQ(s.method, "mkevolve");
  EXPECT_EQ(s.problem, "level3/32_ConvolutionalVisionTransformer");
  ASSERT_EQ(s.iterations.size(), 5u);
  EXPECT_EQ(s.iterations[0].e2e_status, "incorrect");
  EXPECT_DOUBLE_EQ(*s.iterations[1].speedup_compile, 0.53);
  ASSERT_TRUE(s.best_speedup_compile);
  EXPECT_DOUBLE_EQ(*s.best_speedup_compile, 1.34);
  EXPECT_EQ(s.best_t, 5);
  EXPECT_EQ(s.end_status, "finished");
  EXPECT_FALSE(s.final_e2e_failed);
  EXPECT_TRUE(s.pytorch_subkernels.empty());
  // Children come right after their parents; the fusion after what it fused.
  std::vector<std::string> want = {"1_conv_embed",     "2_flatten_linear", "3_cls_pos_embed",     "4_transformer_encoder",
                                   "4a_self_attention", "4b_feed_forward", "4c_transformer_block", "5_classifier_head"};
  EXPECT_EQ(s.subproblem_order, want);
  EXPECT_EQ(s.lineage["4a_self_attention"], "split of 4_transformer_encoder");
  EXPECT_EQ(s.lineage["4c_transformer_block"], "fusion of 4a_self_attention + 4b_feed_forward");
  ASSERT_EQ(s.grid.t, (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(s.grid.change[1], "split");
  EXPECT_EQ(s.grid.change[3], "fuse");
  EXPECT_EQ(s.grid.cells[3][0], StructureGrid::kFailed);  // 4 at t=1
  EXPECT_EQ(s.grid.cells[3][1], StructureGrid::kAbsent);  // 4 replaced at t=2
  EXPECT_EQ(s.grid.cells[4][1], StructureGrid::kOk);      // 4a at t=2
  EXPECT_EQ(s.grid.cells[6][3], StructureGrid::kOk);      // 4c at t=4
  EXPECT_EQ(s.grid.cells[6][2], StructureGrid::kAbsent);
  // The final table: the last iteration's five subkernels, with their tokens.
  ASSERT_EQ(s.final_subkernels.size(), 5u);
  EXPECT_EQ(s.final_subkernels[3].name, "4c_transformer_block");
  EXPECT_DOUBLE_EQ(*s.final_subkernels[3].share, 0.65);
  EXPECT_GT(s.final_subkernels[3].usage.total(), 0);
  EXPECT_EQ(s.final_subkernels[3].usage.calls, s.by_task["4c_transformer_block"].calls);
  // Token accounting: per agent sums to the total; the cached call costs nothing.
  int64_t sum = 0, calls = 0;
  for (const auto& [a, t] : s.agents) sum += t.total(), calls += t.calls;
  EXPECT_EQ(sum, s.llm_total.total());
  EXPECT_EQ(calls, 65);
  EXPECT_EQ(s.llm_total.total(), 738378);
  EXPECT_EQ(s.llm_total.cached, 1);
  EXPECT_EQ(s.llm_total.failed, 1);
  EXPECT_EQ(s.max_calls, 400);
  EXPECT_EQ(s.max_tokens, 6000000);
  EXPECT_EQ(s.iterations.back().tokens + 9100 + 7700, s.llm_total.total()) << "all but the post-fusion call";
}

TEST(Report, MarkdownHasTheKeyNumbers) {
  std::string md = render_markdown(fixture_summary());
  for (const char* needle : {"# MKEvolve report: level3/32_ConvolutionalVisionTransformer", "1.34\u00d7 (iteration 5; as the search measured it, no final check)",
                             "| 2 | \u2713 correct | 0.53\u00d7 | 0.57\u00d7 | 5.91 |", "4c_transformer_block (fusion of",
                             "t=2 (split)", "t=4 (fuse)", "| 4_transformer_encoder | \u2717 |", "65 calls (62 of 400 in the kernel budget",
                             "738.4K of 6M tokens", "| **all** | 65 | 1 | 1 | 1 | 384,528 |", "TF32 is off", "NVIDIA H200",
                             "2.11.0+cu130", "| 4c_transformer_block | \u2713 correct | 1.52 | 1.52\u00d7 | 65% |"})
    EXPECT_NE(md.find(needle), std::string::npos) << "missing: " << needle << "\n" << md;
  EXPECT_EQ(md.find("not pure Triton"), std::string::npos);
  EXPECT_EQ(md.find("final end-to-end evaluation failed"), std::string::npos);
}

TEST(Report, HtmlIsSelfContained) {
  std::string html = render_html(fixture_summary());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_GE(count(html, "<svg"), 4u);  // e2e, subkernels, structure, agents
  EXPECT_EQ(count(html, "<svg"), count(html, "</svg>"));
  EXPECT_EQ(count(html, "<section"), count(html, "</section>"));
  EXPECT_EQ(count(html, "<table"), count(html, "</table>"));
  EXPECT_EQ(count(html, "<tr"), count(html, "</tr>"));
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("4c_transformer_block"), std::string::npos);
  EXPECT_NE(html.find("TF32 is off"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  // Failed points are crosses in the failure strip (t=1 end-to-end and subkernel 4).
  EXPECT_NE(html.find("4_transformer_encoder, t=1: failed"), std::string::npos);
  EXPECT_NE(html.find("E2E, t=1: failed"), std::string::npos);
}

// A run that ends with a failing end-to-end kernel, one PyTorch subkernel and a
// name that needs escaping.
std::vector<json> failing_run() {
  using namespace records;
  std::vector<json> ev;
  ev.push_back(records::RunStart{.method = "mkevolve", .problem = "l2/<odd>&name", .settings = {{"T", 2}}}.to_json());
  ev.push_back(records::TopologyChange{.iteration = 1, .change = "initial", .subproblems = {{"a", "new"}, {"b", "new"}, {"c", "new"}}}.to_json());
  ev.push_back(records::LlmCall{.agent = "generate", .task = "b", .usage = {.input = 100, .output = 50, .estimated = true}}.to_json());
  ev.push_back(records::Iteration{.t = 1,
                          .e2e = {.status = "incorrect"},
                          .subkernels = {{.name = "a", .correct = true, .speedup_compile = 1.5, .uses_pytorch = true},
                                         {.name = "b", .correct = false},
                                         {.name = "c", .correct = true, .speedup_compile = 0.9}}}.to_json());
  ev.push_back(records::RunEnd{.status = "failed", .message = "no correct end-to-end kernel"}.to_json());
  return ev;
}

TEST(Report, FailureIsTracedToTheSubkernelAndPyTorchIsFlagged) {
  ReportData s = summarize(records::parse_log(failing_run()), json::object(), json::object());
  EXPECT_TRUE(s.final_e2e_failed);
  EXPECT_EQ(s.failing_locally, std::vector<std::string>{"b"});
  EXPECT_EQ(s.pytorch_subkernels, std::vector<std::string>{"a"});
  EXPECT_FALSE(s.best_speedup_compile);
  std::string md = render_markdown(s);
  EXPECT_NE(md.find("Contains PyTorch subkernels: not pure Triton"), std::string::npos) << md;
  EXPECT_NE(md.find("The final end-to-end evaluation failed (incorrect). Subkernel failing its own check: b."),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| 150 (est.) |"), std::string::npos) << md;
  std::string html = render_html(s);
  EXPECT_NE(html.find("Contains PyTorch subkernels: not pure Triton"), std::string::npos);
  EXPECT_NE(html.find("banner fail"), std::string::npos);
  EXPECT_NE(html.find("l2/&lt;odd&gt;&amp;name"), std::string::npos);
  EXPECT_EQ(html.find("<odd>"), std::string::npos);
}

TEST(Report, TestModeIsMarkedAndTheModelIsNamed) {
  // CPU test mode (config.json's test_cpu): both reports say so loudly; the
  // LLM the run used (spec, endpoint, judge) is named.
  json config = {{"test_cpu", true}, {"llm", "openai:qwen"}, {"base_url", "http://127.0.0.1:8000/v1"},
                 {"judge", "anthropic:claude"}};
  ReportData s = summarize(records::parse_log(fixture_events()), json{{"gpu", "none (CPU test mode)"}}, config);
  std::string md = render_markdown(s), html = render_html(s);
  EXPECT_NE(md.find("> **TEST MODE: evaluated on the CPU"), std::string::npos) << md.substr(0, 1200);
  EXPECT_NE(html.find("TEST MODE: evaluated on the CPU"), std::string::npos);
  EXPECT_NE(md.find("- Model: openai:qwen at http://127.0.0.1:8000/v1; cheat judge anthropic:claude"),
            std::string::npos)
      << md.substr(0, 1200);
  EXPECT_NE(html.find("model <b>openai:qwen at"), std::string::npos);
  ReportData gpu = summarize(records::parse_log(fixture_events()), json{{"gpu", "NVIDIA H200"}}, json{{"llm", "openai:qwen"}});
  EXPECT_EQ(render_markdown(gpu).find("TEST MODE"), std::string::npos);
}

TEST(Report, AnUnknownSpeedupIsNotDrawnAsZero) {
  // A correct iteration without a torch.compile baseline (speedup 0 = unknown):
  // no point at 0x on the chart (the tables show a dash), and no failure cross.
  using namespace records;
  std::vector<json> ev;
  ev.push_back(records::RunStart{.method = "mkevolve", .problem = "p", .settings = {{"T", 2}}}.to_json());
  ev.push_back(records::Iteration{.t = 1, .e2e = {.status = "correct", .speedup_compile = 0.0, .speedup_eager = 1.2}}.to_json());
  ev.push_back(records::Iteration{.t = 2, .e2e = {.status = "correct", .speedup_compile = 1.5, .speedup_eager = 1.8}}.to_json());
  ReportData s = summarize(records::parse_log(ev), json::object(), json::object());
  std::string html = render_html(s);
  EXPECT_EQ(html.find("vs torch.compile, t=1: 0\u00d7"), std::string::npos) << "an unknown drawn as 0x";
  EXPECT_EQ(html.find("vs torch.compile, t=1: failed"), std::string::npos);
  EXPECT_NE(html.find("vs torch.compile, t=2: 1.5\u00d7"), std::string::npos);
}

TEST(Report, TheFinalChecksOutcomeIsStatedAndANoVerdictIsNotCalledPassed) {
  using namespace records;
  std::vector<json> ev;
  ev.push_back(records::RunStart{.method = "mkevolve", .problem = "p", .settings = {{"T", 1}}}.to_json());
  ev.push_back(records::Iteration{.t = 1, .e2e = {.status = "correct", .speedup_compile = 1.5, .speedup_eager = 1.8}}.to_json());
  EXPECT_EQ(render_markdown(summarize(records::parse_log(ev), json::object(), json::object())).find("Final check:"), std::string::npos);
  FinalCheck fc;
  fc.seed = 43;
  fc.status = "no_verdict";
  fc.kind = "reference_failed";
  fc.iteration = 1;
  fc.message = "the reference died";
  ev.push_back(fc.to_json());
  ReportData s = summarize(records::parse_log(ev), json::object(), json::object());
  std::string md = render_markdown(s);
  EXPECT_NE(md.find("- Final check: no verdict (the reference died): the solution of iteration 1 is returned on its "
                    "verdict from the search, not checked again"),
            std::string::npos)
      << md;
  std::string html = render_html(s);
  EXPECT_NE(html.find("no verdict"), std::string::npos);
  EXPECT_EQ(html.find(">passed<"), std::string::npos);
}

TEST(Report, TheReturnedSolutionsShapesHaveAHoldsAtColumn) {
  using namespace records;
  std::vector<json> ev;
  ev.push_back(records::RunStart{.method = "mkevolve", .problem = "p", .settings = {{"T", 1}}}.to_json());
  ev.push_back(records::Iteration{.t = 1, .e2e = {.status = "correct", .speedup_compile = 1.5, .speedup_eager = 1.8}}.to_json());
  FinalCheck fc;
  fc.passed = true;
  fc.seed = 43;
  fc.status = "correct";
  fc.iteration = 1;
  fc.speedup_compile = 1.2;
  ev.push_back(fc.to_json());
  EXPECT_EQ(render_markdown(summarize(records::parse_log(ev), json::object(), json::object())).find("holds at"), std::string::npos);
  fc.shapes = json::parse(R"json({"mode":"check","benchmark":"batch_size=16","held":["batch_size=15"],
    "failed":[{"shape":"batch_size=7","error":"mismatch at index (3, 1)"}],
    "skipped":[{"shape":"batch_size=33","error":"the reference cannot run it: ValueError"}],"error":null})json");
  ev.back() = fc.to_json();
  ReportData s = summarize(records::parse_log(ev), json::object(), json::object());
  std::string md = render_markdown(s);
  EXPECT_NE(md.find("- Holds at: benchmark (batch_size=16) + 1 of 2 shape variants (batch_size=15); fails at "
                    "batch_size=7: mismatch at index (3, 1)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| shape | holds at | error |"), std::string::npos) << md;
  EXPECT_NE(md.find("| benchmark (batch_size=16) | \u2713 (timed) | |"), std::string::npos) << md;
  EXPECT_NE(md.find("| batch_size=15 | \u2713 | |"), std::string::npos) << md;
  EXPECT_NE(md.find("| batch_size=7 | \u2717 fails | mismatch at index (3, 1) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| batch_size=33 | skipped: the reference cannot run it | the reference cannot run it: ValueError |"),
            std::string::npos)
      << md;
  // report.html has no list of facts: its section is where it says where the
  // solution fails, and why.
  std::string html = render_html(s);
  EXPECT_NE(html.find("Shapes the returned solution holds at"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>batch_size=7</td><td>\u2717 fails</td><td>mismatch at index (3, 1)</td>"), std::string::npos)
      << html;
  EXPECT_NE(html.find("<td>batch_size=15</td><td>\u2713</td>"), std::string::npos) << html;
}

TEST(Report, TheBestFigureIsTheFinalChecksOwnAndSaysSo) {
  using namespace records;
  std::vector<json> ev;
  ev.push_back(records::RunStart{.method = "mkevolve", .problem = "p", .settings = {{"T", 1}}}.to_json());
  ev.push_back(records::Iteration{.t = 1, .e2e = {.status = "correct", .speedup_compile = 1.5, .speedup_eager = 1.8}}.to_json());
  ev.push_back(records::Best{.t = 1, .speedup_compile = 1.5}.to_json());
  std::string before = render_markdown(summarize(records::parse_log(ev), json::object(), json::object()));
  EXPECT_NE(before.find("1.50× (iteration 1; as the search measured it, no final check)"), std::string::npos)
      << before;
  FinalCheck fc;
  fc.passed = true;
  fc.seed = 43;
  fc.status = "correct";
  fc.iteration = 1;
  fc.speedup_compile = 1.2;
  fc.speedup_eager = 1.4;
  fc.runtime_ms = 2.0;
  fc.search_speedup_compile = 1.5;
  ev.push_back(fc.to_json());
  ReportData s = summarize(records::parse_log(ev), json::object(), json::object());
  ASSERT_TRUE(s.best_speedup_compile);
  EXPECT_DOUBLE_EQ(*s.best_speedup_compile, 1.2);
  std::string md = render_markdown(s);
  EXPECT_NE(md.find("- Best end-to-end speedup vs torch.compile: 1.20× (iteration 1; measured by the final "
                    "check, fresh seed 43; the search measured 1.50×)"),
            std::string::npos)
      << md;
  EXPECT_NE(render_html(s).find("measured by the final check"), std::string::npos);
}

TEST(Report, SaysPlainlyWhetherACheatJudgeRan) {
  using namespace records;
  std::vector<json> ev;
  ev.push_back(records::RunStart{.method = "mkevolve", .problem = "p", .settings = {{"T", 1}}}.to_json());
  std::string md = render_markdown(summarize(records::parse_log(ev), json::object(), json::object()));
  EXPECT_NE(md.find("- Cheat judge: none ran (no --judge)"), std::string::npos) << md;
  RunStart rs;
  rs.method = "mkevolve";
  rs.judge = "anthropic:claude-opus-4-5";
  ev[0] = rs.to_json();
  ev.push_back(records::Judge{"alpha", "alpha-s0", 1, "pass", "fine", ""}.to_json());
  ev.push_back(records::Judge{"alpha", "alpha-s1", 1, "cheat", "torch.mm", ""}.to_json());
  Judge after{"alpha", "alpha-s0", 1, "pass", "fine", ""};
  after.stage = "after_beam";
  ev.push_back(after.to_json());
  ev.push_back(records::Judge{"alpha", "final", 2, "pass", "fine", ""}.to_json());
  ReportData s = summarize(records::parse_log(ev), json::object(), json::object());
  md = render_markdown(s);
  EXPECT_NE(md.find("- Cheat judge: anthropic:claude-opus-4-5: 2 candidates on entry into a beam (1 called "
                    "cheating), 1 second looks after a beam search (0 called cheating), 1 kernels at the final check"),
            std::string::npos)
      << md;
  EXPECT_NE(render_html(s).find("Cheat judge"), std::string::npos);
}

TEST(Report, TheDecompositionChecksSayHowCloseTheyCameAndTheBound) {
  using namespace records;
  std::vector<json> ev;
  ev.push_back(records::RunStart{.method = "mkevolve", .problem = "p", .settings = {{"T", 1}}}.to_json());
  VerifyDecomposition bad{"p", "decompose", 0, 0, false, {"outputs differ"}, 0.5};
  bad.max_abs_err = 1.7e-4;
  VerifyDecomposition good{"p", "decompose", 0, 1, true, {}, 0.5};
  good.max_abs_err = 3.7e-8;
  good.tolerance = {{"fraction", 0.1},
                    {"outputs", json::array({{{"output", "output"}, {"dtype", "float32"}, {"atol", 1e-5},
                                              {"rtol", 1e-5}, {"max_abs_err", 3.7e-8}}})}};
  ev.push_back(bad.to_json());
  ev.push_back(good.to_json());
  ReportData s = summarize(records::parse_log(ev), json::object(), json::object());
  ASSERT_EQ(s.verifications.size(), 2u);
  EXPECT_DOUBLE_EQ(*s.verifications[1].max_abs_err, 3.7e-8);
  std::string md = render_markdown(s);
  EXPECT_NE(md.find("1 passed, 1 failed; the largest difference from the original among those that passed: 3.7e-08 "
                    "(allowed per element: atol 1e-05 + rtol 1e-05 \u00d7 the original's magnitude, float32"),
            std::string::npos)
      << md;
}

TEST(Report, ACompositionThatFailedInPlaceSaysWhereItWent) {
  using namespace records;
  std::vector<json> ev;
  ev.push_back(records::RunStart{.method = "mkevolve", .problem = "p", .settings = {{"T", 2}}}.to_json());
  ev.push_back(CompositionFailure{.iteration = 1, .task = "alpha", .candidate = "alpha-s3", .status = "runtime_error",
                                  .kind = "runtime_error", .message = "AssertionError", .action = "back_to_beam"}
                   .to_json());
  ev.push_back(CompositionFailure{.iteration = 2, .status = "incorrect", .kind = "mismatch", .action = "total_fuse"}
                   .to_json());
  ReportData s = summarize(records::parse_log(ev), json::object(), json::object());
  ASSERT_EQ(s.composition_failures.size(), 2u);
  std::string md = render_markdown(s);
  EXPECT_NE(md.find("- t=1: runtime_error (runtime_error) inside subkernel alpha (alpha-s3): sent back to its beam"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- t=2: incorrect (mismatch), pointing into no one subkernel: TotalFuse"), std::string::npos) << md;
  EXPECT_NE(render_html(s).find("sent back to its beam"), std::string::npos);
}

TEST(Report, TheTf32BaselineIsShownBesideTheTf32OffOne) {
  using namespace records;
  std::vector<json> ev;
  ev.push_back(records::RunStart{.method = "mkevolve", .problem = "p", .settings = {{"T", 1}}}.to_json());
  ev.push_back(records::Iteration{.t = 1, .e2e = {.status = "correct", .speedup_compile = 1.5, .speedup_eager = 1.8}}.to_json());
  ReportData without = summarize(records::parse_log(ev), json::object(), json::object());
  EXPECT_EQ(render_markdown(without).find("TF32 on"), std::string::npos);
  FinalCheck fc;
  fc.passed = true;
  fc.seed = 43;
  fc.status = "correct";
  fc.kind = "ok";
  fc.speedup_compile = 1.5;
  fc.speedup_compile_tf32 = 0.75;
  ev.push_back(fc.to_json());
  ReportData s = summarize(records::parse_log(ev), json::object(), json::object());
  ASSERT_TRUE(s.final_speedup_compile_tf32);
  EXPECT_DOUBLE_EQ(*s.final_speedup_compile_tf32, 0.75);
  std::string md = render_markdown(s);
  EXPECT_NE(md.find("- Final check vs torch.compile with TF32 on (--baseline-tf32): 0.75"), std::string::npos) << md;
  EXPECT_NE(md.find("- Final check: passed (fresh seed 43, every check on)"), std::string::npos) << md;
  EXPECT_NE(md.find("1.50× vs torch.compile"), std::string::npos) << md;  // the TF32-off figure stays
  EXPECT_NE(render_html(s).find("vs torch.compile with TF32 on"), std::string::npos);
}

TEST(Report, CompositionFailureIsNamedAsSuch) {
  auto ev = failing_run();
  ev[3]["subkernels"][1]["correct"] = true;
  ReportData s = summarize(records::parse_log(ev), json::object(), json::object());
  EXPECT_TRUE(s.failing_locally.empty());
  EXPECT_NE(render_markdown(s).find("from composing them"), std::string::npos);
}

TEST(Report, SwapToPyTorchIsFlagged) {
  auto ev = fixture_events();
  ev.insert(ev.end() - 1, records::Swap{.name = "5_classifier_head", .from = "t5-s0", .to = "pytorch",
                                             .speedup_before = 1.34, .speedup_after = 1.31}.to_json());
  ReportData s = summarize(records::parse_log(ev), json::object(), json::object());
  EXPECT_EQ(s.pytorch_subkernels, std::vector<std::string>{"5_classifier_head"});
  EXPECT_DOUBLE_EQ(*s.final_speedup_compile, 1.31);
  EXPECT_NE(render_markdown(s).find("| 5_classifier_head | t5-s0 | pytorch | 1.34\u00d7 | 1.31\u00d7 |"), std::string::npos);
}

TEST(Report, ASwapAnOlderBuildWroteForSeveralSubkernelsNamesThemAll) {
  // An older build's swap record named its subkernels in "names"; the typed
  // record keeps that field (meta.extra) and the report reads it from there.
  auto ev = fixture_events();
  json old = {{"type", "swap"}, {"names", {"5_classifier_head", "2_conv"}}, {"from", "search"}, {"to", "pytorch"},
              {"speedup_before", 1.34}, {"speedup_after", 1.2}};
  ev.insert(ev.end() - 1, old);
  ReportData s = summarize(records::parse_log(ev), json::object(), json::object());
  ASSERT_EQ(s.swaps.size(), 1u);
  EXPECT_EQ(swapped_names(s.swaps[0]), (std::vector<std::string>{"5_classifier_head", "2_conv"}));
  std::string md = render_markdown(s);
  EXPECT_NE(md.find("| 5_classifier_head, 2_conv | search | pytorch | 1.34\u00d7 | 1.20\u00d7 |"), std::string::npos) << md;
  EXPECT_NE(render_html(s).find("5_classifier_head, 2_conv"), std::string::npos);
}

// mkevolve adapt: a and b reuse the earlier run's subkernel a (its 5 calls
// saved once), c matched by name failed its re-check and was evolved; the
// earlier run's path needs escaping.
std::vector<json> adapted_run() {
  using namespace records;
  const std::string from = "/runs/<x>&1";
  std::vector<json> ev;
  ev.push_back(records::RunStart{.method = "adapt", .problem = "variant", .settings = {{"T", 1}}}.to_json());
  ev.push_back(records::TopologyChange{.iteration = 1, .change = "initial", .subproblems = {{"a", "new"}, {"b", "new"}, {"c", "new"}}}.to_json());
  ev.push_back(records::ReuseMatch{"a", from, "a", "same source", "a-reused", "correct", true, 5}.to_json());
  ev.push_back(records::ReuseMatch{"b", from, "a", "same module, other shapes", "b-reused", "correct", true, 0}.to_json());
  ev.push_back(records::ReuseMatch{"c", from, "c", "same name", "c-reused", "incorrect", false, 0}.to_json());
  for (int i = 0; i < 2; ++i)
    ev.push_back(records::LlmCall{.agent = "debug", .task = "c", .usage = {.input = 100, .output = 50}}.to_json());
  ev.push_back(records::Iteration{.t = 1,
                          .e2e = {.status = "correct", .speedup_compile = 1.2, .speedup_eager = 1.4},
                          .subkernels = {{.name = "a", .correct = true, .speedup_compile = 1.1},
                                         {.name = "b", .correct = true, .speedup_compile = 0.9},
                                         {.name = "c", .correct = true, .speedup_compile = 1.3}},
                          .calls_used = 2}.to_json());
  ev.push_back(records::RunEnd{.status = "finished", .best_speedup_compile = 1.2, .solution_dir = "solution"}.to_json());
  return ev;
}

TEST(Report, ReusedSubkernelsAndTheCallsSavedInBothReports) {
  ReportData s = summarize(records::parse_log(adapted_run()), json::object(), json::object());
  EXPECT_EQ(s.calls_saved(), 5);
  std::string md = render_markdown(s);
  for (const char* needle : {"## Reused subkernels", "LLM calls saved: 5 (", "| a (reused from /runs/<x>&1) |",
                             "| b (reused from /runs/<x>&1) |", "| a | /runs/<x>&1: a | same source | \u2713 correct | 5 |",
                             "| b | /runs/<x>&1: a | same module, other shapes | \u2713 correct | 0 |",
                             "| c | /runs/<x>&1: c | same name | \u2717 incorrect, evolved | 0 |"})
    EXPECT_NE(md.find(needle), std::string::npos) << "missing: " << needle << "\n" << md;
  EXPECT_EQ(md.find("| c (reused from"), std::string::npos) << "c was evolved here, not reused";

  std::string html = render_html(s);
  for (const char* needle :
       {"<h2>Reused subkernels</h2>", "LLM calls saved: <b>5</b>", "2 calls \u00b7 5 saved by reuse",
        "<td class=\"path\"><code>/runs/&lt;x&gt;&amp;1</code>: a</td><td>same source</td>",
        "<td>same module, other shapes</td>", "<span class=\"pill no\">\u2717 incorrect</span> evolved</td><td>0</td>",
        "<span class=\"pill reused\">reused</span><div class=\"note\">from /runs/&lt;x&gt;&amp;1</div>"})
    EXPECT_NE(html.find(needle), std::string::npos) << "missing: " << needle;
  EXPECT_EQ(count(html, "pill reused"), 2u) << "a and b are marked, c is not";
  EXPECT_EQ(html.find("<x>"), std::string::npos);
  EXPECT_EQ(count(html, "<section"), count(html, "</section>"));
  EXPECT_EQ(count(html, "<table"), count(html, "</table>"));
  EXPECT_EQ(count(html, "<tr"), count(html, "</tr>"));
  // A run that adapted nothing has no such section.
  EXPECT_EQ(render_html(fixture_summary()).find("Reused subkernels"), std::string::npos);
  EXPECT_EQ(render_html(fixture_summary()).find("saved by reuse"), std::string::npos);
}

TEST(Report, TheFinalSubkernelsShowTheirRooflineAndTheMostHeadroom) {
  auto ev = fixture_events();
  // The last iteration event, as a GPU run writes it: a roofline record per subkernel.
  for (auto it = ev.rbegin(); it != ev.rend(); ++it) {
    if ((*it)["type"] != "iteration") continue;
    auto& subs = (*it)["subkernels"];
    ASSERT_GE(subs.size(), 2u);
    subs[0]["roofline"] = {{"fraction", 0.89}, {"headroom", 1.12}, {"bound", "memory"}, {"t_roof_ms", 2.68},
                           {"model_does_not_fit", false}, {"gpu", "H200 SXM"}};
    subs[1]["roofline"] = {{"fraction", 0.31}, {"headroom", 3.2}, {"bound", "compute"}, {"t_roof_ms", 0.4},
                           {"model_does_not_fit", false}, {"gpu", "H200 SXM"}};
    break;
  }
  ReportData s = summarize(records::parse_log(ev), json::object(), json::object());
  std::string md = render_markdown(s);
  EXPECT_NE(md.find("| share of end-to-end time | of the roofline | LLM calls |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 89% (memory) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 31% (compute) |"), std::string::npos) << md;
  const std::string second = s.final_subkernels.at(1).name;
  EXPECT_NE(md.find("Most headroom: " + second + ", 3.20x its compute roofline time"), std::string::npos) << md;
  // report.html shows the same.
  std::string html = render_html(s);
  EXPECT_NE(html.find("<th>of the roofline</th>"), std::string::npos);
  EXPECT_NE(html.find("<td>89% (memory)</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("Most headroom: <b>" + second + "</b>, 3.20x its compute roofline time"), std::string::npos);
  // Without roofline records (the CPU, the fixture as it is): no column, no line.
  std::string plain = render_markdown(fixture_summary());
  EXPECT_EQ(plain.find("of the roofline"), std::string::npos);
  EXPECT_EQ(plain.find("Most headroom"), std::string::npos);
  std::string plain_html = render_html(fixture_summary());
  EXPECT_EQ(plain_html.find("of the roofline"), std::string::npos);
  EXPECT_EQ(plain_html.find("Most headroom"), std::string::npos);
}

// Events as the search writes them: the schema's fields plus the search's own
// extras (reason, diff, iteration, scope, legacy speedup/tokens names), which
// readers ignore.
TEST(Summary, ReadsTheSearchsEvents) {
  auto usage = [](int in, int out) {
    return json{{"input", in}, {"output", out}, {"cache_read", 0}, {"cache_write", 0}, {"estimated", false}};
  };
  std::vector<json> ev = {
      {{"type", "run_start"}, {"method", "mkevolve"}, {"problem", "p"}, {"settings", {{"T", 2}}},
       {"options", {{"iterations", 2}}}},
      {{"type", "llm_call"}, {"agent", "decompose"}, {"task", "p"}, {"ok", true}, {"cached", false},
       {"truncated", false}, {"usage", usage(10, 5)}, {"tokens", usage(10, 5)}, {"iteration", 0}},
      {{"type", "llm_call"}, {"agent", "generate"}, {"task", "b"}, {"ok", true}, {"cached", true},
       {"truncated", false}, {"usage", usage(99, 99)}, {"tokens", usage(99, 99)}, {"iteration", 1}},
      {{"type", "topology"}, {"iteration", 0}, {"change", "initial"}, {"reason", "decompose"},
       {"subproblems", {{{"name", "a"}, {"status", "new"}}, {{"name", "b"}, {"status", "new"}}}},
       {"detail", "decomposed into 2 subproblems"}},
      {{"type", "eval"}, {"scope", "local"}, {"e2e", false}, {"task", "b"}, {"candidate", "b-s0"}, {"status", "incorrect"},
       {"kind", "mismatch"}, {"speedup_compile", nullptr}, {"speedup_eager", nullptr}, {"runtime_ms", nullptr}},
      {{"type", "best"}, {"t", 1}, {"speedup_compile", nullptr}, {"correct", false}, {"speedup", 0.0}},
      {{"type", "iteration"}, {"t", 1}, {"iteration", 1}, {"e2e", {{"status", "skipped"}, {"missing", {"b"}}}},
       {"calls_used", 2}, {"tokens", 15},
       {"subkernels", {{{"name", "a"}, {"correct", true}, {"speedup_compile", 1.5}, {"runtime_ms", 0.2}, {"share", nullptr}},
                       {{"name", "b"}, {"correct", false}, {"speedup_compile", nullptr}, {"status", "incorrect"}}}}},
      {{"type", "topology"}, {"iteration", 2}, {"change", "split"}, {"reason", "split"},
       {"subproblems", {{{"name", "a"}, {"status", "correct"}}, {{"name", "b1"}, {"status", "new"}},
                        {{"name", "b2"}, {"status", "new"}}}},
       {"detail", "split b into b1, b2"}, {"from", {"b"}}, {"into", {"b1", "b2"}},
       {"diff", {{"added", {"b1", "b2"}}, {"removed", {"b"}}, {"kept", {"a"}}}}},
      {{"type", "iteration"}, {"t", 2}, {"iteration", 2}, {"calls_used", 6}, {"tokens", 15},
       {"e2e", {{"status", "correct"}, {"speedup_compile", 1.1}, {"speedup_eager", 2.0}, {"runtime_ms", 4.0}}},
       {"subkernels", {{{"name", "a"}, {"correct", true}, {"speedup_compile", 1.5}, {"share", 0.25}},
                       {{"name", "b1"}, {"correct", true}, {"speedup_compile", 0.9}, {"share", 0.5}},
                       {{"name", "b2"}, {"correct", true}, {"speedup_compile", 1.2}, {"share", 0.25}}}}},
      {{"type", "best"}, {"t", 2}, {"speedup_compile", 1.1}, {"correct", true}, {"speedup", 1.1}},
      {{"type", "swap_skipped"}, {"reason", "nothing below tau"}},
      {{"type", "swap"}, {"name", "b1"}, {"from", "b1-s3"}, {"to", "pytorch"}, {"speedup_before", 1.1},
       {"speedup_after", 1.15}, {"triggered", true}, {"correct", true}, {"contains_pytorch_subkernels", true}},
      {{"type", "postfuse"}, {"attempt", 4}, {"status", "not accepted"}, {"speedup_compile", nullptr}, {"accepted", false}},
      {{"type", "run_end"}, {"status", "finished"}, {"best_speedup_compile", 1.15}, {"solution_dir", ""}, {"message", ""},
       {"result", "ok"}, {"best_speedup", 1.15}, {"correct", true}, {"contains_pytorch_subkernels", true}}};
  ReportData s = summarize(records::parse_log(ev), json::object(), json::object());
  ASSERT_EQ(s.iterations.size(), 2u);
  EXPECT_EQ(s.iterations[0].e2e_status, "skipped");
  // Counted in the log (two llm_call records before it), never the event's own
  // tally (6), which a resumed process can get wrong (issue 13).
  EXPECT_EQ(s.iterations[1].calls_used, 2);
  EXPECT_EQ(s.iterations[1].tokens, 15) << "the cached call costs nothing";
  EXPECT_DOUBLE_EQ(*s.iterations[1].speedup_compile, 1.1);
  EXPECT_DOUBLE_EQ(*s.iterations[1].subkernels["b1"].share, 0.5);
  EXPECT_FALSE(s.iterations[0].subkernels["b"].speedup_compile) << "a failing subkernel has no speedup";
  EXPECT_EQ(s.grid.t, (std::vector<int>{1, 2}));
  EXPECT_EQ(s.grid.change, (std::vector<std::string>{"initial", "split"}));
  EXPECT_EQ(s.subproblem_order, (std::vector<std::string>{"a", "b", "b1", "b2"}));
  EXPECT_EQ(s.lineage["b2"], "split of b");
  EXPECT_EQ(s.grid.cells[1][0], StructureGrid::kFailed);
  EXPECT_EQ(s.grid.cells[2][1], StructureGrid::kOk);
  EXPECT_EQ(s.llm_total.total(), 15) << "the cached call costs nothing";
  EXPECT_EQ(s.llm_total.cached, 1);
  EXPECT_DOUBLE_EQ(*s.best_speedup_compile, 1.15);
  EXPECT_EQ(s.end_status, "finished");
  EXPECT_EQ(s.swaps.size(), 1u);
  EXPECT_EQ(s.pytorch_subkernels, std::vector<std::string>{"b1"});
  EXPECT_TRUE(s.contains_pytorch);
  EXPECT_EQ(s.evals_by_status["incorrect"], 1);
  ASSERT_EQ(s.postfuse.size(), 1u);
  std::string md = render_markdown(s);
  EXPECT_NE(md.find("not pure Triton"), std::string::npos);
  EXPECT_NE(md.find("| 4 | not accepted |"), std::string::npos) << md;
  // The status line reads the same events.
  StatusLine::Options o;
  o.mode = StatusLine::Mode::kPlain;
  FILE* f = std::tmpfile();
  {
    StatusLine plain(f, o);
    for (const auto& e : ev) plain.on_event(records::parse_event(e));
    plain.on_event(records::EvalStart{});
    EXPECT_NE(plain.current().find("best 1.15\u00d7"), std::string::npos) << plain.current();
    EXPECT_NE(plain.current().find("1 eval running"), std::string::npos) << plain.current();
    EXPECT_NE(plain.describe(records::parse_event(ev[8])).find("t=2/2 done: end-to-end correct 1.10\u00d7"), std::string::npos) << plain.describe(records::parse_event(ev[8]));
  }
  std::fclose(f);
}

TEST(Report, EmptyAndPartialRunsStillRender) {
  ReportData empty = summarize({}, json::object(), json::object());
  EXPECT_NE(render_markdown(empty).find("No iteration has finished yet."), std::string::npos);
  EXPECT_NE(render_html(empty).find("No LLM calls recorded."), std::string::npos);
  // Topology only, no iteration yet: the grid shows "new".
  std::vector<json> ev = {records::TopologyChange{.iteration = 1, .change = "initial", .subproblems = {{"x", "new"}}}.to_json()};
  ReportData s = summarize(records::parse_log(ev), json::object(), json::object());
  ASSERT_EQ(s.grid.cells.size(), 1u);
  EXPECT_EQ(s.grid.cells[0][0], StructureGrid::kNew);
  EXPECT_EQ(s.final_subkernels[0].status, "new");
}

TEST(Report, WriteReportFromARunDirectory) {
  TempDir tmp;
  fs::path dir = tmp.path() / "run";
  {
    auto rd = rundir::RunDir::create(dir, json{{"T", 2}}, rundir::Versions{"0.1.0", "2.11.0", "3.6.0", "NVIDIA H200", "3.12.3"});
    ASSERT_TRUE(rd.ok()) << rd.error();
    for (const auto& e : failing_run()) ASSERT_TRUE((*rd)->log_event(records::parse_event(e)).ok());
  }
  ASSERT_TRUE(append_durable(dir / "events.jsonl", "{\"type\":\"ev").ok());  // a live run's half-written line
  std::vector<std::string> warnings;
  auto written = write_report(dir, tmp.path() / "out", &warnings);
  ASSERT_TRUE(written.ok()) << written.error();
  ASSERT_EQ(written->size(), 2u);
  EXPECT_TRUE(fs::exists(tmp.path() / "out" / "report.md"));
  EXPECT_TRUE(fs::exists(tmp.path() / "out" / "report.html"));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("incomplete last line"), std::string::npos);
  auto md = read_file(tmp.path() / "out" / "report.md");
  EXPECT_NE(md->find("| 0.1.0 | 2.11.0 | 3.6.0 | NVIDIA H200 | 3.12.3 |"), std::string::npos) << *md;
  EXPECT_FALSE(write_report(tmp.path() / "missing", tmp.path() / "out", nullptr).ok());
}

TEST(Svg, Helpers) {
  EXPECT_EQ(svg::escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
  EXPECT_EQ(svg::num(1.50), "1.5");
  EXPECT_EQ(svg::num(2.0), "2");
  EXPECT_EQ(svg::num(0.123456, 3), "0.123");
  EXPECT_EQ(svg::nice_ticks(0, 1.4, 5), (std::vector<double>{0, 0.5, 1, 1.5}));
  EXPECT_EQ(svg::nice_ticks(0, 1000, 4), (std::vector<double>{0, 250, 500, 750, 1000}));
  svg::LineChart c;
  c.x_ticks = {"t=1", "t=2"};
  c.series.push_back({"a<b", "#000", {std::nullopt, 1.0}, {true, false}, 2, ""});
  std::string out = svg::line_chart(c);
  EXPECT_NE(out.find("a&lt;b, t=1: failed"), std::string::npos);
  EXPECT_EQ(out.find("a<b"), std::string::npos);
  EXPECT_EQ(count(out, "<svg"), 1u);
}

// ------------------------------------------------------------ status line

std::string run_status(StatusLine::Options o, const std::vector<json>& events, std::string* current = nullptr,
                       int in_flight = -1) {
  FILE* f = std::tmpfile();
  {
    StatusLine line(f, o);
    for (const auto& e : events) line.on_event(records::parse_event(e));
    if (in_flight >= 0) line.set_evals_in_flight(in_flight);
    line.message("a notice");
    if (current) *current = line.current();
  }
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

TEST(StatusLineTest, PlainLinesWhenNotATerminal) {
  std::string cur;
  StatusLine::Options o;  // kAuto: a temp file is not a terminal
  std::string out = run_status(o, fixture_events(), &cur, 3);
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << "no terminal escapes in plain mode";
  EXPECT_EQ(out.find('\r'), std::string::npos);
  for (const char* needle : {"start: mkevolve on level3/32_ConvolutionalVisionTransformer",
                             "t=2 structure split: 6 subproblems (4\u2713 0\u2717 2 new); split 4_transformer_encoder",
                             "t=1/5 done: end-to-end incorrect; subkernels 4\u2713 1\u2717",
                             "t=5/5 done: end-to-end correct 1.34\u00d7 vs torch.compile", "new best: 0.53\u00d7 vs torch.compile at t=2",
                             "LLM call failed (debug, 4_transformer_encoder): HTTP 529", "post-fusion attempt 1: incorrect",
                             "run finished: best 1.34\u00d7 vs torch.compile; solution in solution", "a notice"})
    EXPECT_NE(out.find(needle), std::string::npos) << "missing: " << needle << "\n" << out;
  // Routine LLM calls and evaluations are not lines of their own.
  EXPECT_LT(count(out, "\n"), 30u) << out;
  EXPECT_NE(cur.find("t 5/5"), std::string::npos) << cur;
  EXPECT_NE(cur.find("subproblems 5\u2713 0\u2717"), std::string::npos) << cur;
  EXPECT_NE(cur.find("best 1.34\u00d7"), std::string::npos) << cur;
  EXPECT_NE(cur.find("LLM 65 calls (kernel 62/400), 738.4K/6M tokens"), std::string::npos) << cur;
  EXPECT_NE(cur.find("3 evals running"), std::string::npos) << cur;
}

TEST(StatusLineTest, ZeroSpeedupWithoutABaselineShowsAsADash) {
  // A correct kernel on a torch without torch.compile has speedup 0: say "no
  // number", not "0.00x" (which would read as infinitely slow).
  std::string cur;
  StatusLine::Options o;
  std::vector<json> evs = {
      {{"type", "best"}, {"t", 2}, {"speedup_compile", 0.0}},
      {{"type", "run_end"}, {"status", "finished"}, {"best_speedup_compile", 0.0}, {"solution_dir", "solution"}}};
  std::string out = run_status(o, evs, &cur, 0);
  EXPECT_NE(out.find("new best at t=2: correct end to end; its speedup vs torch.compile is unknown"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("0.00\u00d7"), std::string::npos) << out;
}

TEST(StatusLineTest, TerminalModeRedrawsOneLine) {
  StatusLine::Options o;
  o.mode = StatusLine::Mode::kTerminal;
  o.width = 60;
  std::string out = run_status(o, fixture_events());
  EXPECT_NE(out.find("\r"), std::string::npos);
  EXPECT_NE(out.find("\x1b[K"), std::string::npos);
  EXPECT_NE(out.find("new best: 1.34"), std::string::npos);
  // Every redraw fits the terminal width (59 columns and an ellipsis at most).
  size_t pos = 0;
  while ((pos = out.find('\r', pos)) != std::string::npos) {
    size_t end = out.find_first_of("\r\n\x1b", pos + 1);
    std::string seg = out.substr(pos + 1, end - pos - 1);
    size_t cols = 0;
    for (unsigned char c : seg) cols += (c & 0xC0) != 0x80;
    EXPECT_LE(cols, 59u) << seg;
    ++pos;
  }
  EXPECT_EQ(out.substr(out.size() - 4), "\r\x1b[K") << "finish() leaves a clean line";
}

TEST(StatusLineTest, QuietAndEventsJson) {
  StatusLine::Options q;
  q.mode = StatusLine::Mode::kQuiet;
  EXPECT_EQ(run_status(q, fixture_events()), "");
  StatusLine::Options j;
  j.mode = StatusLine::Mode::kEventsJson;
  auto evs = fixture_events();
  std::string out = run_status(j, evs);
  std::istringstream in(out);
  std::string line;
  size_t i = 0;
  while (std::getline(in, line)) {
    ASSERT_LT(i, evs.size());
    // The event as this build writes its record (the fixture is of an older
    // schema: "v" and the defaulted fields are added, nothing is lost).
    const json written = records::to_json(records::parse_event(evs[i]));
    EXPECT_EQ(json::parse(line), written) << line;
    for (const auto& [k, v] : evs[i].items()) EXPECT_EQ(written.at(k), v) << k << " in " << line;
    ++i;
  }
  EXPECT_EQ(i, evs.size()) << "exactly one line per event and nothing else";
}

TEST(StatusLineTest, AnEventThisBuildWroteIsPrintedAsLogged) {
  // --events-json prints the record the status line was given; a record this
  // build wrote (what a live run's log holds) reads back and prints unchanged.
  for (const auto& e : fixture_events()) {
    const json once = records::to_json(records::parse_event(e));
    EXPECT_EQ(records::to_json(records::parse_event(once)), once) << once.dump();
  }
}

TEST(StatusLineTest, FedByRunDirListener) {
  TempDir tmp;
  auto rd = rundir::RunDir::create(tmp.path() / "run", json::object(), rundir::Versions{});
  ASSERT_TRUE(rd.ok());
  FILE* f = std::tmpfile();
  StatusLine::Options o;
  o.mode = StatusLine::Mode::kPlain;
  StatusLine line(f, o);
  (*rd)->add_listener([&](const records::Event& e) { line.on_event(e); });
  ASSERT_TRUE((*rd)->log_event(records::Best{.t = 2, .speedup_compile = 0.75}).ok());
  EXPECT_NE(line.current().find("best 0.75\u00d7"), std::string::npos);
  std::fclose(f);
}

}  // namespace
}  // namespace mk::report
