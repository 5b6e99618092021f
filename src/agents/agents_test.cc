#include <gtest/gtest.h>

#include "agents/agents.h"
#include "agents/prompts.h"
#include "agents/reply.h"
#include "support/testing.h"
#include "util/fs.h"

namespace mk::agents {
namespace {

Prompts repo_prompts() {
  auto p = Prompts::load(mk::testing::repo_root() / "src" / "prompts");
  EXPECT_TRUE(p.ok()) << p.error();
  return *p;
}

TEST(Prompts, EveryTemplateRendersWithItsVariables) {
  auto p = repo_prompts();
  for (const auto& [name, vars] : Prompts::required()) {
    Vars v;
    for (const auto& k : vars) v[k] = "<" + k + ">";
    auto r = p.render(name, v);
    ASSERT_TRUE(r.ok()) << name << ": " << r.error();
    for (const auto& k : vars) EXPECT_NE(r->user.find("<" + k + ">"), std::string::npos) << name << " drops " << k;
    EXPECT_EQ(r->user.find("{{"), std::string::npos) << name << " leaves a placeholder";
    EXPECT_EQ(r->user.find("=== "), std::string::npos) << name;
  }
  EXPECT_EQ(p.version().size(), 16u);
}

TEST(Prompts, KernelPromptsStatePrecisionAndHardware) {
  auto p = repo_prompts();
  KernelContext k{&p, hardware_text({{"gpus", {{{"name", "NVIDIA H200"}, {"sm_count", 132}, {"capability", {9, 0}}}}}})};
  auto c = generate_prompt(k, "class Model: pass");
  ASSERT_TRUE(c.ok()) << c.error();
  const std::string& u = c->messages[0].content;
  EXPECT_NE(u.find("NVIDIA H200"), std::string::npos);
  EXPECT_NE(u.find("132"), std::string::npos);
  EXPECT_NE(u.find("TF32"), std::string::npos);
  EXPECT_NE(u.find("float32"), std::string::npos);
  // The real precision: the reference's dtypes, never "float32" for every problem (issue 16).
  EXPECT_NE(u.find("the reference's own dtypes"), std::string::npos) << u;
  EXPECT_NE(u.find("bfloat16"), std::string::npos) << u;
  EXPECT_EQ(u.find("Precision: float32"), std::string::npos) << u;
  EXPECT_EQ(u.find("Inputs and outputs are float32"), std::string::npos) << u;
  EXPECT_NE(u.find("torch.ops.aten"), std::string::npos);
  EXPECT_FALSE(c->system.empty());
}

TEST(Prompts, TheOptimizePromptCarriesTheRooflineAndTheDebugPromptDoesNot) {
  auto p = repo_prompts();
  KernelContext k{&p, "- GPU: NVIDIA H200", "NVIDIA H200"};
  eval::Verdict r;
  r.status = eval::VerdictStatus::kCorrect;
  r.runtime = {3.0209, 3.0209, true};
  r.speedup_compile = r.speedup_eager = 1.0;
  const double n = 4096.0 * 393216.0 * 4;  // KernelBench level1/19_ReLU, fp32
  r.raw = {{"checks",
            {{"work", {{"inputs_bytes", n}, {"output_bytes", n}, {"params_bytes", 0}, {"bytes", 2 * n}, {"flops", 0},
                       {"dtype", "float32"}}},
             {"runtime", {{"kernels", {{{"name", "relu_kernel"}, {"ms", 3.01}, {"share", 1.0}, {"launches", 1}}}}}}}}};
  auto opt = optimize_prompt(k, "class Model: pass", "class ModelNew: pass", r);
  ASSERT_TRUE(opt.ok()) << opt.error();
  const std::string& u = opt->messages[0].content;
  EXPECT_NE(u.find("## Where its time goes"), std::string::npos) << u;
  EXPECT_NE(u.find("memory-bound"), std::string::npos) << u;
  EXPECT_NE(u.find("relu_kernel"), std::string::npos) << u;
  // The debug prompt of a failing kernel stays as it was.
  eval::Verdict bad = r;
  bad.status = eval::VerdictStatus::kIncorrect;
  auto dbg = debug_prompt(k, "class Model: pass", "class ModelNew: pass", bad);
  ASSERT_TRUE(dbg.ok()) << dbg.error();
  EXPECT_EQ(dbg->messages[0].content.find("Where its time goes"), std::string::npos);
  EXPECT_EQ(dbg->messages[0].content.find("roofline"), std::string::npos);
  // No GPU (CPU test mode): no block, no empty heading.
  KernelContext cpu{&p, "- GPU: none", ""};
  auto plain = optimize_prompt(cpu, "class Model: pass", "class ModelNew: pass", r);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->messages[0].content.find("Where its time goes"), std::string::npos);
}

TEST(Prompts, DecomposeConveysTheRules) {
  auto p = repo_prompts();
  auto c = decompose_prompt(p, problem::Problem::from_source("x", "class Model: pass"));
  ASSERT_TRUE(c.ok());
  const std::string& u = c->messages[0].content;
  for (const char* must : {"get_input_configs", "get_init_inputs", "exactly the order", "no math",
                           "from subkernel_problems.<name> import Model as <Alias>", "One file per operation pattern",
                           "class Model: pass"})
    EXPECT_NE(u.find(must), std::string::npos) << must;
}

TEST(Prompts, DecomposeShowsAnEarlierDecompositionOnlyWhenAdapting) {
  auto p = repo_prompts();
  auto prob = problem::Problem::from_source("x", "class Model: pass");
  auto plain = decompose_prompt(p, prob);
  auto adapting = decompose_prompt(p, prob, "### subkernel_problems/linear.py\n\nEARLIER-FILE\n");
  ASSERT_TRUE(plain.ok() && adapting.ok());
  std::string a = adapting->messages[0].content, b = plain->messages[0].content;
  EXPECT_NE(a.find("An earlier decomposition to start from"), std::string::npos);
  EXPECT_NE(a.find("EARLIER-FILE"), std::string::npos);
  EXPECT_LT(a.find("EARLIER-FILE"), a.find("## The module to decompose"));
  EXPECT_EQ(b.find("An earlier decomposition"), std::string::npos);
}

TEST(Prompts, UnknownVariableAndMissingDirAreErrors) {
  mk::TempDir tmp;
  ASSERT_TRUE(write_file_atomic(tmp.path() / "x.md", "hello {{who}}").ok());
  auto bad = Prompts::load(tmp.path());
  ASSERT_FALSE(bad.ok());  // required templates missing
  EXPECT_NE(bad.error().find("missing"), std::string::npos);
  auto none = Prompts::load(tmp.path() / "nope");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().find("nope"), std::string::npos);
}

TEST(Prompts, ValuesAreNotReexpanded) {
  auto p = repo_prompts();
  auto r = p.render("judge", {{"problem_source", "x = f'{{y}}'"}, {"kernel", "{{> kernel_rules}}"}});
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_NE(r->user.find("x = f'{{y}}'"), std::string::npos);
  EXPECT_NE(r->user.find("{{> kernel_rules}}"), std::string::npos);
}

TEST(Reply, KernelWithFileTag) {
  auto k = parse_kernel_reply("Here:\n```python file=kernel.py\nimport triton\nclass ModelNew(nn.Module):\n  pass\n```\n");
  ASSERT_TRUE(k.ok()) << k.error();
  EXPECT_EQ(*k, "import triton\nclass ModelNew(nn.Module):\n  pass\n");
}

TEST(Reply, KernelVariations) {
  EXPECT_TRUE(parse_kernel_reply("```\nclass ModelNew(nn.Module):\n  pass\n```").ok());
  EXPECT_TRUE(parse_kernel_reply("~~~py\nclass ModelNew:\n  pass\n~~~").ok());
  // The last ModelNew block wins unless one is named kernel.py.
  auto k = parse_kernel_reply("```python\nclass ModelNew:\n  a=1\n```\ntext\n```python\nclass ModelNew:\n  b=2\n```");
  ASSERT_TRUE(k.ok());
  EXPECT_NE(k->find("b=2"), std::string::npos);
  auto n = parse_kernel_reply("```python file=kernel.py\nclass ModelNew:\n  a=1\n```\n```python\nclass ModelNew:\n  b=2\n```");
  ASSERT_TRUE(n.ok());
  EXPECT_NE(n->find("a=1"), std::string::npos);
}

TEST(Reply, KernelErrorsSayWhatIsWrong) {
  auto none = parse_kernel_reply("I cannot do that.");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().find("no fenced code block"), std::string::npos);
  auto cut = parse_kernel_reply("```python\nclass ModelNew(nn.Module):\n  def forward(");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().find("cut off"), std::string::npos);
  auto nomodel = parse_kernel_reply("```python\nclass Foo:\n  pass\n```");
  ASSERT_FALSE(nomodel.ok());
  EXPECT_NE(nomodel.error().find("ModelNew"), std::string::npos);
}

TEST(Reply, FilesInManyForms) {
  std::string text =
      "```python file=decomposed_problem.py\nclass ModelNew: pass\n```\n"
      "```python path=\"subkernel_problems/a.py\"\nA\n```\n"
      "```python:subkernel_problems/b.py\nB\n```\n"
      "```python\n# file: subkernel_problems/c.py\nC\n```\n"
      "**subkernel_problems/d.py**\n```python\nD\n```\n";
  auto f = parse_files_reply(text);
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->size(), 5u);
  EXPECT_EQ(f->at("subkernel_problems/a.py"), "A\n");
  EXPECT_EQ(f->at("subkernel_problems/b.py"), "B\n");
  EXPECT_EQ(f->at("subkernel_problems/c.py"), "C\n");
  EXPECT_EQ(f->at("subkernel_problems/d.py"), "D\n");
}

TEST(Reply, FilesErrors) {
  auto unnamed = parse_files_reply("```python file=decomposed_problem.py\nx\n```\n```python\nimport torch\n```");
  ASSERT_FALSE(unnamed.ok());
  EXPECT_NE(unnamed.error().find("no file path"), std::string::npos);
  auto cut = parse_files_reply("```python file=subkernel_problems/a.py\nx\n");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().find("subkernel_problems/a.py"), std::string::npos);
  EXPECT_TRUE(is_no_change_reply("NO_CHANGE"));
  EXPECT_FALSE(is_no_change_reply("NO_CHANGE\n```python file=a.py\nx\n```"));
}

TEST(Reply, Verdicts) {
  auto pass = parse_verdict("VERDICT: PASS\nREASON: all math is in _k");
  ASSERT_TRUE(pass.ok());
  EXPECT_FALSE(pass->cheating);
  EXPECT_EQ(pass->reason, "all math is in _k");
  auto cheat = parse_verdict("**Verdict: cheat**\nReason: uses torch.mm");
  ASSERT_TRUE(cheat.ok());
  EXPECT_TRUE(cheat->cheating);
  EXPECT_FALSE(parse_verdict("looks fine").ok());
}

TEST(Feedback, ConciseAndTrimmed) {
  eval::Verdict r;
  r.status = eval::VerdictStatus::kRuntimeError;
  r.kind = "illegal_memory_access";
  std::string tb;
  for (int i = 0; i < 500; ++i) tb += "  File \"x.py\", line " + std::to_string(i) + "\n";
  r.feedback = tb;
  r.reasons = {"kernel.py:3: out of bounds"};
  auto f = eval_feedback(r);
  EXPECT_NE(f.find("runtime_error (illegal_memory_access)"), std::string::npos);
  EXPECT_NE(f.find("lines omitted"), std::string::npos);
  EXPECT_LT(f.size(), 5000u);
  eval::Verdict ok;
  ok.status = eval::VerdictStatus::kCorrect;
  ok.runtime = {1.0, 1.0, true};
  ok.compiled = {1.5, 1.5, true};
  ok.eager = {2.0, 2.0, true};
  ok.speedup_compile = 1.5;
  ok.speedup_eager = 2.0;
  auto g = eval_feedback(ok);
  EXPECT_NE(g.find("torch.compile 1.5 ms, speedup 1.500x"), std::string::npos) << g;
  EXPECT_NE(g.find("eager 2 ms, speedup 2.000x"), std::string::npos) << g;
}

TEST(Feedback, HardwareUnknown) {
  EXPECT_NE(hardware_text(nlohmann::json::object()).find("did not report"), std::string::npos);
}

}  // namespace
}  // namespace mk::agents
