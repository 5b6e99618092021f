// The roofline of one evaluated kernel (issue 15): how far its measured time
// is from the least time the GPU's memory bandwidth and arithmetic peak allow
// for the bytes and FLOPs one call must do, and which of the two binds.
//
// Inputs come from the worker's verdict: checks.work (workmodel.py: bytes in,
// out and of the parameters, and the matmul/convolution/attention FLOPs of the
// reference's forward) and checks.runtime.kernels (the profile: GPU time per
// kernel and call). Peaks come from a table of datasheet figures keyed by the
// GPU name the worker reports. Everything here is arithmetic on those records;
// nothing is measured.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mk::eval {
struct Verdict;
}

namespace mk::eval::roofline {

/// One GPU's peaks (dense, no sparsity), with where the figures come from.
struct Peaks {
  std::string gpu;            ///< the table's name for it
  double dram_gb_s = 0;       ///< DRAM bandwidth, GB/s (10^9 bytes)
  double fp32_tflops = 0;     ///< FP32 on CUDA cores (TF32 off, as the evaluator runs)
  double half_tflops = 0;     ///< FP16/BF16 tensor cores, dense
  double fp8_tflops = 0;      ///< FP8 tensor cores, dense; 0 where the GPU has none
  std::string source;
};

/// The peaks of the GPU whose reported name is `gpu_name` ("NVIDIA H200",
/// "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", ...), or nullopt.
std::optional<Peaks> peaks_for(const std::string& gpu_name);

/// What one call must do (checks.work).
struct Work {
  double bytes = 0, inputs_bytes = 0, output_bytes = 0, params_bytes = 0;
  std::optional<double> flops;          ///< matmul/conv/attention only; nullopt when not counted
  std::string dtype;                    ///< the output's dtype
  std::vector<std::string> uncounted;   ///< heavy ops whose FLOPs the model does not know
};
std::optional<Work> work_from(const nlohmann::json& checks);

struct KernelTime {
  std::string name;
  double ms = 0;        ///< per call
  double share = 0;     ///< of the call's kernel time
  double launches = 0;  ///< per call
};
std::vector<KernelTime> kernels_from(const nlohmann::json& checks);

/// One compiled Triton kernel's metadata (checks.runtime.triton_kernels, the
/// worker's tritonmeta.py): what limits how many of its blocks an SM holds.
struct TritonKernelInfo {
  std::string name;
  std::optional<int> n_regs, n_spills, shared_bytes, num_warps, num_stages, blocks_per_sm;
  std::optional<double> occupancy;  ///< 0..1
  std::string limited_by;           ///< registers, shared memory, warps, blocks per SM
};
std::vector<TritonKernelInfo> triton_kernels_from(const nlohmann::json& checks);

/// Nsight Compute's counters for one call (checks.ncu, with `--profile ncu`):
/// what each kernel really did to the hardware.
struct NcuKernel {
  std::string name;
  std::optional<double> time_ms, dram_bytes, sm_pct, memory_pct, occupancy_pct;  ///< pct: of the peak, 0..100
  std::optional<int> registers;
};
struct NcuProfile {
  std::string source;            ///< "Nsight Compute <version> hardware counters: ..."
  std::vector<NcuKernel> kernels;
  int n_kernels = 0;
  std::optional<double> time_ms, dram_bytes;  ///< one call's totals
  std::string error;             ///< set when ncu was asked for and failed (no kernels then)
};
/// nullopt when the verdict has no checks.ncu (the profile was cupti).
std::optional<NcuProfile> ncu_from(const nlohmann::json& checks);

struct Fit {
  double t_memory_ms = 0, t_compute_ms = 0, t_roof_ms = 0, measured_ms = 0;
  std::string bound;            ///< memory or compute
  double fraction = 0;          ///< t_roof / measured: 1 is at the roofline
  double headroom = 0;          ///< measured / t_roof (>= 1; 0 when the model does not fit)
  bool model_does_not_fit = false;  ///< measured well below t_roof: the byte/FLOP model is wrong here
  double achieved_gb_s = 0, achieved_tflops = 0;
  double peak_tflops_used = 0;  ///< the arithmetic peak for the dtype
  std::string peak_name;        ///< "FP32 CUDA cores", "FP16/BF16 tensor cores", ...
};

/// The roofline of a call that took measured_ms, or nullopt without a time.
std::optional<Fit> analyze(const Work& w, const Peaks& p, double measured_ms);

/// A correct, timed verdict's roofline on gpu_name, with what it came from;
/// nullopt without a work record, a time or the GPU's peaks.
struct Analysis {
  Work work;
  Peaks peaks;
  Fit fit;
};
std::optional<Analysis> analyze(const eval::Verdict& r, const std::string& gpu_name);

/// The optimize prompt's profile block (at most ~25 lines) for a correct
/// verdict on gpu_name; empty when there is nothing true to say (no work
/// record, no time, a GPU the table lacks: then one line says so).
std::string prompt_block(const eval::Verdict& r, const std::string& gpu_name);

/// {fraction, headroom, bound, t_roof_ms, model_does_not_fit} for records and
/// reports; null when unavailable.
nlohmann::json summary_json(const eval::Verdict& r, const std::string& gpu_name);

/// Everything `mkevolve eval --json` reports of a verdict's roofline: the
/// summary's fields, the memory and compute times, the achieved bandwidth and
/// FLOP rate, the work it was computed from, and the peaks with their source;
/// null when unavailable (not correct, not timed, no work record, a GPU the
/// table lacks).
nlohmann::json analysis_json(const eval::Verdict& r, const std::string& gpu_name);

}  // namespace mk::eval::roofline
