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

namespace mk::run {
namespace {

// A fresh run may take over only a directory that holds a start that failed
// before any LLM call; never one with progress or with anyone else's files.
TEST(HoldsNoProgress, OnlyAFailedStart) {
  TempDir d;
  const fs::path run = d.path() / "run";
  auto put = [&](const std::string& rel, const std::string& text) {
    fs::create_directories((run / rel).parent_path());
    ASSERT_TRUE(write_file_atomic(run / rel, text).ok());
  };
  const std::string preflight = R"({"type":"preflight","what":"endpoint","ok":false,"seconds":0.1,"message":"x","seq":0})";
  put("config.json", "{}");
  put("versions.json", "{}");
  put("events.jsonl", preflight + "\n");
  fs::create_directories(run / "cache" / "llm");
  fs::create_directories(run / "candidates");
  EXPECT_TRUE(holds_no_progress(run));
  put("events.jsonl", preflight + "\n" + R"({"type":"llm_call","agent":"decompose","seq":1})" + "\n");
  EXPECT_FALSE(holds_no_progress(run)) << "an LLM call is progress";
  put("events.jsonl", preflight + "\n");
  put("candidates/x/k.py", "pass\n");
  EXPECT_FALSE(holds_no_progress(run)) << "a candidate is progress";
  fs::remove_all(run / "candidates" / "x");
  put("notes.txt", "mine\n");
  EXPECT_FALSE(holds_no_progress(run)) << "someone else's file";
  // Only folders named like a run directory's, made by nobody: not ours to clear.
  TempDir e;
  fs::create_directories(e.path() / "work");
  fs::create_directories(e.path() / "cache");
  EXPECT_FALSE(holds_no_progress(e.path()));
  EXPECT_FALSE(holds_no_progress(d.path() / "missing"));
}

// A resume needs no endpoint only when the log shows the search ran to its end.
TEST(SearchCompletedInLog, OnlyAfterAnOkOrNoCorrectEnd) {
  using nlohmann::json;
  std::vector<json> ev = {{{"type", "run_start"}}, {{"type", "llm_call"}, {"agent", "decompose"}}};
  EXPECT_FALSE(search_completed_in_log(ev)) << "died mid-run";
  ev.push_back({{"type", "run_end"}, {"status", "finished"}, {"result", "no_correct"}});
  EXPECT_TRUE(search_completed_in_log(ev));
  ev.push_back({{"type", "resume"}, {"events", 3}});
  EXPECT_TRUE(search_completed_in_log(ev)) << "a resume of a completed search replays cached calls";
  ev.push_back({{"type", "llm_call"}, {"agent", "generate"}});
  EXPECT_FALSE(search_completed_in_log(ev)) << "a call after the end: the log diverged";
  std::vector<json> failed = {{{"type", "run_end"}, {"status", "failed"}, {"result", "error"}}};
  EXPECT_FALSE(search_completed_in_log(failed));
  std::vector<json> interrupted = {{{"type", "run_end"}, {"status", "interrupted"}, {"result", "interrupted"}}};
  EXPECT_FALSE(search_completed_in_log(interrupted));
  EXPECT_FALSE(search_completed_in_log({}));
}

}  // namespace
}  // namespace mk::run
