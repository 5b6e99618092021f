// What a finished run offers to mkevolve adapt (load_reuse).
#include "run/problem_run.h"

#include <gtest/gtest.h>

#include "support/testing.h"
#include "util/fs.h"

namespace mk::run {
namespace {

namespace fs = std::filesystem;

// ---- mkevolve adapt: what a finished run offers (load_reuse) ----------------

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  ASSERT_TRUE(write_file_atomic(p, text).ok()) << p;
}

TEST(LoadReuse, AMonolithicSolutionNeedsNoSnapshotAndCallsAreCountedFromTheLog) {
  // PostFuse's or a baseline's solution: the whole problem as one kernel, with
  // an iteration no topology snapshot was written for.
  mk::TempDir tmp;
  fs::path d = tmp.path() / "run";
  const std::string problem = "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                              "        return x * 2\n\n\ndef get_inputs():\n    return [torch.randn(4)]\n\n\n"
                              "def get_init_inputs():\n    return []\n";
  write(d / "config.json", R"({"method": "beam", "judge": "openai:judge-model"})");
  write(d / "versions.json", R"({"run_format": 1})");
  write(d / "problem.py", problem);
  write(d / "solution" / "manifest.json",
        R"({"correct": true, "iteration": 6, "monolithic": true, "subkernels": [{"name": "whole_model", "pytorch": false}]})");
  write(d / "solution" / "subkernel_implementations" / "whole_model.py", "KERNEL");
  write(d / "events.jsonl",
        "{\"type\":\"llm_call\",\"agent\":\"generate\",\"task\":\"whole_model\"}\n"
        "{\"type\":\"llm_call\",\"agent\":\"optimize\",\"task\":\"whole_model\"}\n"
        "{\"type\":\"llm_call\",\"agent\":\"judge\",\"task\":\"whole_model\"}\n"
        "{\"type\":\"llm_call\",\"agent\":\"decompose\",\"task\":\"p\"}\n");
  auto r = load_reuse(d);
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->kernels.size(), 1u);
  EXPECT_EQ(r->kernels.at("whole_model"), "KERNEL");
  EXPECT_NE(r->problems.at("whole_model").find("return x * 2"), std::string::npos);
  EXPECT_EQ(r->calls.at("whole_model"), 2) << "kernel calls only: generate and optimize";
  EXPECT_TRUE(r->judged);
  EXPECT_TRUE(fs::path(r->from).is_absolute());
  // Swap's PyTorch stand-ins are not reused; with nothing else there is nothing to reuse.
  write(d / "solution" / "manifest.json",
        R"({"correct": true, "iteration": 6, "monolithic": true, "subkernels": [{"name": "whole_model", "pytorch": true}]})");
  auto none = load_reuse(d);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error_kind(), ErrorKind::kBadInput);
  EXPECT_NE(none.error().find("no Triton subkernel"), std::string::npos) << none.error();
  // A solution that did not verify offers nothing either.
  write(d / "solution" / "manifest.json", R"({"correct": false, "subkernels": []})");
  EXPECT_NE(load_reuse(d).error().find("not a verified one"), std::string::npos);
}

}  // namespace
}  // namespace mk::run
