// The roofline arithmetic and the optimize prompt's profile block, from
// verdict records shaped as the worker writes them (checks.work,
// checks.runtime.kernels). The 19_ReLU figures are KernelBench level1/19_ReLU's
// shapes (4096 x 393216 fp32) and the time an honest Triton kernel took on an
// H200 on 2026-12-01 (docs/GPU-RESULTS.md, ninth session).
#include "eval/roofline.h"

#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

#include "eval/evaluator.h"

namespace mk::eval::roofline {
namespace {

eval::Verdict verdict(double ms, const nlohmann::json& work, const nlohmann::json& kernels = nlohmann::json::array()) {
  eval::Verdict r;
  r.status = VerdictStatus::kCorrect;
  r.runtime = {ms, ms, true};
  r.raw = {{"checks", {{"work", work}, {"runtime", {{"kernels", kernels}}}}}};
  return r;
}

nlohmann::json relu_work() {
  const double n = 4096.0 * 393216.0 * 4;
  return {{"inputs_bytes", n}, {"output_bytes", n}, {"params_bytes", 0}, {"bytes", 2 * n},
          {"flops", 0},        {"flops_by_op", nlohmann::json::object()},  {"uncounted_ops", nlohmann::json::array()},
          {"dtype", "float32"}};
}

TEST(Roofline, PeaksByTheNameTheGpuReports) {
  EXPECT_EQ(peaks_for("NVIDIA H200")->dram_gb_s, 4800);
  EXPECT_EQ(peaks_for("NVIDIA H100 80GB HBM3")->gpu, "H100 SXM");
  EXPECT_EQ(peaks_for("NVIDIA H100 PCIe")->gpu, "H100 PCIe");
  EXPECT_EQ(peaks_for("NVIDIA A100-SXM4-40GB")->dram_gb_s, 1555);
  EXPECT_EQ(peaks_for("NVIDIA A100-SXM4-80GB")->dram_gb_s, 2039);
  EXPECT_EQ(peaks_for("NVIDIA L40S")->gpu, "L40S");  // not the L4
  EXPECT_EQ(peaks_for("NVIDIA L4")->gpu, "L4");
  EXPECT_FALSE(peaks_for("NVIDIA GeForce GTX 1080"));
  EXPECT_FALSE(peaks_for(""));
}

TEST(Roofline, AMemoryBoundKernelNearItsRoof) {
  auto w = work_from({{"work", relu_work()}});
  ASSERT_TRUE(w);
  auto v = analyze(*w, *peaks_for("NVIDIA H200"), 3.0209);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->bound, "memory");
  EXPECT_NEAR(v->t_memory_ms, 12.884901888e9 / 4800e9 * 1e3, 1e-9);  // 2.684 ms
  EXPECT_EQ(v->t_compute_ms, 0);
  EXPECT_NEAR(v->fraction, 2.684354 / 3.0209, 1e-5);
  EXPECT_NEAR(v->headroom, 3.0209 / 2.684354, 1e-5);
  EXPECT_NEAR(v->achieved_gb_s, 12.884901888e9 / 3.0209e-3 / 1e9, 1e-6);
  EXPECT_FALSE(v->model_does_not_fit);
  EXPECT_EQ(v->peak_name, "FP32 CUDA cores (TF32 off)");
}

TEST(Roofline, AComputeBoundGemmAndTheDtypesPeak) {
  const double n = 4096;
  nlohmann::json work = {{"inputs_bytes", 2 * n * n * 4}, {"output_bytes", n * n * 4}, {"params_bytes", 0},
                         {"bytes", 3 * n * n * 4},        {"flops", 2 * n * n * n},   {"dtype", "float32"}};
  auto v = analyze(*work_from({{"work", work}}), *peaks_for("NVIDIA H100 80GB HBM3"), 4.0);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->bound, "compute");
  EXPECT_NEAR(v->t_compute_ms, 2 * n * n * n / 67e12 * 1e3, 1e-9);  // 2.05 ms at 67 TFLOP/s
  EXPECT_NEAR(v->headroom, 4.0 / v->t_compute_ms, 1e-9);
  work["dtype"] = "bfloat16";
  auto h = analyze(*work_from({{"work", work}}), *peaks_for("NVIDIA H100 80GB HBM3"), 4.0);
  EXPECT_EQ(h->peak_tflops_used, 989);
  EXPECT_EQ(h->peak_name, "FP16/BF16 tensor cores");
}

TEST(Roofline, AKernelFasterThanItsRoofMeansTheModelDoesNotFit) {
  // Half the roofline time: impossible for the model, so it is said so, and
  // no headroom is reported.
  auto v = analyze(*work_from({{"work", relu_work()}}), *peaks_for("NVIDIA H200"), 1.3);
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->model_does_not_fit);
  EXPECT_EQ(v->headroom, 0);
  std::string block = prompt_block(verdict(1.3, relu_work()), "NVIDIA H200");
  EXPECT_NE(block.find("does not describe this kernel"), std::string::npos) << block;
  EXPECT_EQ(block.find("headroom 0"), std::string::npos) << block;
  auto s = summary_json(verdict(1.3, relu_work()), "NVIDIA H200");
  EXPECT_TRUE(s["headroom"].is_null());
  EXPECT_TRUE(s["model_does_not_fit"].get<bool>());
}

TEST(Roofline, ThePromptBlockGivesRegistersSpillsAndOccupancyFromTheCompileMetadata) {
  eval::Verdict r = verdict(3.0209, relu_work());
  r.raw["checks"]["runtime"]["triton_kernels"] = {
      {{"name", "relu_kernel"}, {"n_regs", 128}, {"n_spills", 0}, {"shared_bytes", 0}, {"num_warps", 4},
       {"num_stages", 3}, {"occupancy", 0.25}, {"blocks_per_sm", 4}, {"limited_by", "registers"}},
      {{"name", "tiled_kernel"}, {"n_regs", 255}, {"n_spills", 24}, {"shared_bytes", 98304}, {"num_warps", 8},
       {"num_stages", 2}, {"occupancy", 0.125}, {"limited_by", "registers"}},
      {{"name", "broken"}}};
  std::string block = prompt_block(r, "NVIDIA H200");
  EXPECT_NE(block.find("relu_kernel: 128 registers/thread, 0 spilled, 0 B shared, 4 warps, 3 stages; occupancy 25% "
                       "(limited by registers)\n"),
            std::string::npos)
      << block;
  EXPECT_NE(block.find("tiled_kernel: 255 registers/thread, 24 spilled"), std::string::npos) << block;
  EXPECT_NE(block.find("spills go to local memory"), std::string::npos) << block;
  EXPECT_NE(block.find("broken: ? registers/thread"), std::string::npos) << block;  // unknowns say so
  int lines = 0;
  for (char c : block) lines += c == '\n';
  EXPECT_LE(lines, 25);
  // Without the metadata the block has no such lines.
  EXPECT_EQ(prompt_block(verdict(3.0209, relu_work()), "NVIDIA H200").find("registers/thread"), std::string::npos);
}

TEST(Roofline, ThePromptBlockIsShortAndSaysWhatLimitsTheKernel) {
  nlohmann::json kernels = {{{"name", "relu_kernel"}, {"ms", 3.01}, {"share", 0.997}, {"launches", 1}},
                            {{"name", "fill_kernel"}, {"ms", 0.009}, {"share", 0.003}, {"launches", 1}}};
  std::string block = prompt_block(verdict(3.0209, relu_work(), kernels), "NVIDIA H200");
  ASSERT_FALSE(block.empty());
  if (std::getenv("MK_SHOW_BLOCK")) std::printf("%s", block.c_str());
  int lines = 0;
  for (char c : block) lines += c == '\n';
  EXPECT_LE(lines, 25);
  EXPECT_NE(block.find("memory-bound"), std::string::npos) << block;
  EXPECT_NE(block.find("= 89% of the roofline (headroom 1.13x)"), std::string::npos) << block;
  EXPECT_NE(block.find("relu_kernel: 3.01 ms (100%)"), std::string::npos) << block;
  EXPECT_NE(block.find("What limits it most: it is within 15% of the memory roofline"), std::string::npos) << block;
  EXPECT_NE(block.find("H200 SXM (NVIDIA H200 datasheet (SXM))"), std::string::npos) << block;
  // Three times slower: the advice is about the memory traffic, not fusion.
  std::string slow = prompt_block(verdict(9.0, relu_work(), kernels), "NVIDIA H200");
  EXPECT_NE(slow.find("memory traffic below the bandwidth peak"), std::string::npos) << slow;
}

TEST(Roofline, NothingUntrueWithoutTheRecordsOrThePeaks) {
  eval::Verdict wrong = verdict(3.0, relu_work());
  wrong.status = VerdictStatus::kIncorrect;
  EXPECT_EQ(prompt_block(wrong, "NVIDIA H200"), "");
  eval::Verdict untimed = verdict(3.0, relu_work());
  untimed.runtime.valid = false;
  EXPECT_EQ(prompt_block(untimed, "NVIDIA H200"), "");
  eval::Verdict nowork = verdict(3.0, relu_work());
  nowork.raw = {{"checks", nlohmann::json::object()}};
  EXPECT_EQ(prompt_block(nowork, "NVIDIA H200"), "");
  EXPECT_EQ(prompt_block(verdict(3.0, relu_work()), "NVIDIA GeForce GTX 1080"),
            "No roofline: there are no peak figures for the GPU \"NVIDIA GeForce GTX 1080\" here.\n");
  EXPECT_TRUE(summary_json(verdict(3.0, relu_work()), "NVIDIA GeForce GTX 1080").is_null());
  // An op whose FLOPs are not modelled is named, so the compute bound is read as a floor.
  nlohmann::json lstm = relu_work();
  lstm["uncounted_ops"] = {"_cudnn_rnn"};
  EXPECT_NE(prompt_block(verdict(3.0209, lstm), "NVIDIA H200").find("Not counted as FLOPs: _cudnn_rnn"),
            std::string::npos);
}

TEST(Roofline, NsightComputesCountersJoinTheBlockWhenTaken) {
  // A relu-like kernel that moves twice the bytes it must (a re-read), as
  // ncu.py's checks.ncu records it (--profile ncu).
  eval::Verdict r = verdict(6.0, relu_work());
  const double model = 2 * 4096.0 * 393216.0 * 4;
  r.raw["checks"]["ncu"] = {
      {"source", "Nsight Compute 2025.3.1.0 hardware counters: one call, caches flushed before each kernel"},
      {"n_kernels", 1},
      {"time_ms", 5.9},
      {"dram_bytes", 2 * model},
      {"kernels",
       {{{"name", "relu_kernel"}, {"time_ms", 5.9}, {"dram_bytes", 2 * model}, {"sm_pct", 11.0},
         {"memory_pct", 91.0}, {"achieved_occupancy_pct", 87.0}, {"registers", 18}}}}};
  std::string b = prompt_block(r, "NVIDIA H200");
  EXPECT_NE(b.find("Nsight Compute 2025.3.1.0 hardware counters"), std::string::npos) << b;
  EXPECT_NE(b.find("DRAM moved 25.8 GB in 1 kernel(s), 2.00x the 12.9 GB the call must move"), std::string::npos)
      << b;
  EXPECT_NE(b.find("relu_kernel: 5.9 ms, DRAM 25.8 GB, SM busy 11%, memory busy 91%, achieved occupancy 87%"),
            std::string::npos)
      << b;
  EXPECT_NE(b.find("What limits it most: it moves 2.0x the DRAM bytes it must"), std::string::npos) << b;
  int lines = 0;
  for (char c : b) lines += c == '\n';
  EXPECT_LE(lines, 25) << b;
  auto j = analysis_json(r, "NVIDIA H200");
  EXPECT_EQ(j["profile_source"], "ncu");
  EXPECT_DOUBLE_EQ(j["ncu"]["dram_bytes_over_model"].get<double>(), 2.0);
  // Fewer bytes than the model: the writes L2 still held are not DRAM traffic yet.
  eval::Verdict few = r;
  few.raw["checks"]["ncu"]["dram_bytes"] = 0.82 * model;
  EXPECT_NE(prompt_block(few, "NVIDIA H200").find("0.82x the 12.9 GB the call must move (writes still in the L2 cache"),
            std::string::npos);
  // ncu asked for and failed: one line says so, nothing else changes.
  eval::Verdict f = verdict(3.0209, relu_work());
  f.raw["checks"]["ncu"] = {{"error", "Nsight Compute (ncu) was not found"}};
  std::string fb = prompt_block(f, "NVIDIA H200");
  EXPECT_NE(fb.find("- Nsight Compute: no counters (Nsight Compute (ncu) was not found)."), std::string::npos) << fb;
  EXPECT_NE(fb.find("within 15% of the memory roofline"), std::string::npos) << fb;
  // The default profile: no ncu line at all.
  EXPECT_EQ(prompt_block(verdict(3.0209, relu_work()), "NVIDIA H200").find("Nsight"), std::string::npos);
  EXPECT_EQ(analysis_json(verdict(3.0209, relu_work()), "NVIDIA H200")["profile_source"], "cupti");
}

TEST(Roofline, TheEvalRecordCarriesTheAnalysisAndItsInputs) {
  // What `mkevolve eval --json` prints as "roofline": KernelBench 19_ReLU on the H200.
  auto j = analysis_json(verdict(3.0209, relu_work()), "NVIDIA H200");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["bound"], "memory");
  EXPECT_NEAR(j["t_memory_ms"].get<double>(), 12.884901888e9 / 4800e9 * 1e3, 1e-9);
  EXPECT_NEAR(j["achieved_gb_s"].get<double>(), 12.884901888e9 / 3.0209e-3 / 1e9, 1e-6);
  EXPECT_NEAR(j["headroom"].get<double>(), 3.0209 / 2.684354, 1e-5);
  EXPECT_EQ(j["measured_ms"], 3.0209);
  EXPECT_EQ(j["work"]["bytes"], 2 * 4096.0 * 393216.0 * 4);
  EXPECT_EQ(j["work"]["flops"], 0);
  EXPECT_EQ(j["peaks"]["gpu"], "H200 SXM");
  EXPECT_EQ(j["peaks"]["dram_gb_s"], 4800);
  EXPECT_FALSE(j["peaks"]["source"].get<std::string>().empty());
  // Nothing where the block would say nothing.
  eval::Verdict wrong = verdict(3.0, relu_work());
  wrong.status = VerdictStatus::kIncorrect;
  EXPECT_TRUE(analysis_json(wrong, "NVIDIA H200").is_null());
  EXPECT_TRUE(analysis_json(verdict(3.0, relu_work()), "NVIDIA GeForce GTX 1080").is_null());
}

}  // namespace
}  // namespace mk::eval::roofline
