#include "eval/roofline.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "eval/evaluator.h"
#include "util/json_fields.h"

namespace mk::eval::roofline {

namespace {

struct Row {
  const char* match;      ///< substring of the reported name (first match wins)
  const char* also;       ///< a second substring that must be there too ("" for none)
  Peaks peaks;
};

// Dense figures (NVIDIA's datasheets list tensor-core peaks with 2:4 sparsity;
// these are half of those). DRAM in GB/s.
const Row kTable[] = {
    {"H200", "", {"H200 SXM", 4800, 67, 989, 1979, "NVIDIA H200 datasheet (SXM)"}},
    {"H100", "NVL", {"H100 NVL", 3900, 60, 835, 1671, "NVIDIA H100 datasheet (NVL)"}},
    {"H100", "PCIe", {"H100 PCIe", 2000, 51, 756, 1513, "NVIDIA H100 datasheet (PCIe)"}},
    {"H100", "", {"H100 SXM", 3350, 67, 989, 1979, "NVIDIA H100 datasheet (SXM)"}},
    {"A100", "40GB", {"A100 40GB", 1555, 19.5, 312, 0, "NVIDIA A100 datasheet (40GB)"}},
    {"A100", "PCIe", {"A100 80GB PCIe", 1935, 19.5, 312, 0, "NVIDIA A100 datasheet (80GB PCIe)"}},
    {"A100", "", {"A100 80GB SXM", 2039, 19.5, 312, 0, "NVIDIA A100 datasheet (80GB SXM)"}},
    {"L40S", "", {"L40S", 864, 91.6, 362, 733, "NVIDIA L40S datasheet"}},
    {"L4", "", {"L4", 300, 30.3, 121, 242, "NVIDIA L4 datasheet"}},
};

double num(const nlohmann::json& j, const char* k) { return fields::optnum(j, k).value_or(0); }


std::string bytes_text(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) b /= 1000, ++u;
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.3g} {}", b, units[u]);
}

std::string flops_text(double f) {
  if (f <= 0) return "0";
  const char* units[] = {"", "K", "M", "G", "T", "P"};
  int u = 0;
  while (f >= 1000 && u < 5) f /= 1000, ++u;
  return fmt::format("{:.3g} {}FLOP", f, units[u]);
}

std::string ms_text(double ms) { return ms >= 1 ? fmt::format("{:.3g} ms", ms) : fmt::format("{:.3g} us", ms * 1e3); }

}  // namespace

std::optional<Peaks> peaks_for(const std::string& gpu_name) {
  for (const auto& r : kTable)
    if (gpu_name.find(r.match) != std::string::npos && (!*r.also || gpu_name.find(r.also) != std::string::npos))
      return r.peaks;
  return std::nullopt;
}

std::optional<Work> work_from(const nlohmann::json& checks) {
  if (!checks.is_object()) return std::nullopt;
  auto it = checks.find("work");
  if (it == checks.end() || !it->is_object() || !it->contains("bytes")) return std::nullopt;
  const auto& j = *it;
  Work w;
  w.bytes = num(j, "bytes");
  w.inputs_bytes = num(j, "inputs_bytes");
  w.output_bytes = num(j, "output_bytes");
  w.params_bytes = num(j, "params_bytes");
  w.flops = fields::optnum(j, "flops");
  w.dtype = fields::str(j, "dtype");
  w.uncounted = fields::strings(j, "uncounted_ops");
  if (w.bytes <= 0) return std::nullopt;
  return w;
}

std::vector<KernelTime> kernels_from(const nlohmann::json& checks) {
  std::vector<KernelTime> out;
  if (!checks.is_object() || !checks.contains("runtime") || !checks["runtime"].is_object()) return out;
  const auto& rt = checks["runtime"];
  if (!rt.contains("kernels") || !rt["kernels"].is_array()) return out;
  for (const auto& k : rt["kernels"]) {
    if (!k.is_object() || fields::str(k, "name").empty()) continue;
    out.push_back({fields::str(k, "name"), num(k, "ms"), num(k, "share"), num(k, "launches")});
  }
  return out;
}

std::vector<TritonKernelInfo> triton_kernels_from(const nlohmann::json& checks) {
  std::vector<TritonKernelInfo> out;
  if (!checks.is_object() || !checks.contains("runtime") || !checks["runtime"].is_object()) return out;
  const auto& rt = checks["runtime"];
  if (!rt.contains("triton_kernels") || !rt["triton_kernels"].is_array()) return out;
  auto opt_int = [](const nlohmann::json& k, const char* key) -> std::optional<int> {
    auto v = fields::optnum(k, key);
    return v ? std::optional<int>(static_cast<int>(*v)) : std::nullopt;
  };
  for (const auto& k : rt["triton_kernels"]) {
    if (!k.is_object() || fields::str(k, "name").empty()) continue;
    out.push_back({fields::str(k, "name"), opt_int(k, "n_regs"), opt_int(k, "n_spills"), opt_int(k, "shared_bytes"),
                   opt_int(k, "num_warps"), opt_int(k, "num_stages"), opt_int(k, "blocks_per_sm"),
                   fields::optnum(k, "occupancy"), fields::str(k, "limited_by")});
  }
  return out;
}

std::optional<NcuProfile> ncu_from(const nlohmann::json& checks) {
  if (!checks.is_object() || !checks.contains("ncu") || !checks["ncu"].is_object()) return std::nullopt;
  const auto& n = checks["ncu"];
  NcuProfile p;
  p.error = fields::str(n, "error");
  p.source = fields::str(n, "source");
  p.time_ms = fields::optnum(n, "time_ms");
  p.dram_bytes = fields::optnum(n, "dram_bytes");
  p.n_kernels = static_cast<int>(num(n, "n_kernels"));
  if (n.contains("kernels") && n["kernels"].is_array())
    for (const auto& k : n["kernels"]) {
      if (!k.is_object()) continue;
      auto regs = fields::optnum(k, "registers");
      p.kernels.push_back({fields::str(k, "name"), fields::optnum(k, "time_ms"), fields::optnum(k, "dram_bytes"),
                           fields::optnum(k, "sm_pct"), fields::optnum(k, "memory_pct"),
                           fields::optnum(k, "achieved_occupancy_pct"),
                           regs ? std::optional<int>(static_cast<int>(*regs)) : std::nullopt});
    }
  if (p.error.empty() && p.kernels.empty()) p.error = "no kernel was profiled";
  return p;
}

std::optional<Fit> analyze(const Work& w, const Peaks& p, double measured_ms) {
  if (!(measured_ms > 0) || !(p.dram_gb_s > 0)) return std::nullopt;
  Fit v;
  v.measured_ms = measured_ms;
  const bool half = w.dtype == "float16" || w.dtype == "bfloat16";
  const bool fp8 = w.dtype.rfind("float8", 0) == 0;
  if (fp8 && p.fp8_tflops > 0) {
    v.peak_tflops_used = p.fp8_tflops;
    v.peak_name = "FP8 tensor cores";
  } else if (half || fp8) {
    v.peak_tflops_used = p.half_tflops;
    v.peak_name = "FP16/BF16 tensor cores";
  } else {
    v.peak_tflops_used = p.fp32_tflops;
    v.peak_name = "FP32 CUDA cores (TF32 off)";
  }
  const double flops = w.flops.value_or(0);
  v.t_memory_ms = w.bytes / (p.dram_gb_s * 1e9) * 1e3;
  v.t_compute_ms = v.peak_tflops_used > 0 ? flops / (v.peak_tflops_used * 1e12) * 1e3 : 0;
  v.t_roof_ms = std::max(v.t_memory_ms, v.t_compute_ms);
  v.bound = v.t_compute_ms > v.t_memory_ms ? "compute" : "memory";
  v.achieved_gb_s = w.bytes / (measured_ms * 1e-3) / 1e9;
  v.achieved_tflops = flops / (measured_ms * 1e-3) / 1e12;
  v.fraction = v.t_roof_ms / measured_ms;
  // Faster than the model allows (beyond timing noise): the model does not
  // describe this call (bytes it need not read, reuse from L2, FLOPs it skips).
  v.model_does_not_fit = measured_ms < 0.9 * v.t_roof_ms;
  v.headroom = v.model_does_not_fit || v.t_roof_ms <= 0 ? 0 : measured_ms / v.t_roof_ms;
  return v;
}

std::optional<Analysis> analyze(const eval::Verdict& r, const std::string& gpu_name) {
  if (!r.correct() || !r.runtime.valid) return std::nullopt;
  auto w = work_from(r.checks());
  auto p = peaks_for(gpu_name);
  if (!w || !p) return std::nullopt;
  auto v = analyze(*w, *p, r.runtime.median_ms);
  if (!v) return std::nullopt;
  return Analysis{std::move(*w), std::move(*p), *v};
}

std::string prompt_block(const eval::Verdict& r, const std::string& gpu_name) {
  auto a = analyze(r, gpu_name);
  if (!a) {
    // Say why only where the rest was there: a GPU missing from the table.
    const bool rest = r.correct() && r.runtime.valid && r.runtime.median_ms > 0 && work_from(r.checks());
    return rest && !peaks_for(gpu_name)
               ? fmt::format("No roofline: there are no peak figures for the GPU \"{}\" here.\n",
                             gpu_name.empty() ? "unknown" : gpu_name)
               : std::string();
  }
  const Work* w = &a->work;
  const Peaks* p = &a->peaks;
  const Fit* v = &a->fit;
  std::string out;
  out += fmt::format("GPU {} ({}): DRAM {:.0f} GB/s; {} {:.3g} TFLOP/s.\n", p->gpu, p->source, p->dram_gb_s,
                     v->peak_name, v->peak_tflops_used);
  out += fmt::format("- One call must move at least {} (inputs {}, output {}, parameters {})", bytes_text(w->bytes),
                     bytes_text(w->inputs_bytes), bytes_text(w->output_bytes), bytes_text(w->params_bytes));
  out += !w->flops        ? std::string(" (FLOPs not counted).\n")
         : *w->flops <= 0 ? std::string("; it does no matmul, convolution or attention.\n")
                          : fmt::format(" and do {} of matmul/convolution/attention.\n", flops_text(*w->flops));
  if (!w->uncounted.empty()) {
    std::string names;
    for (size_t i = 0; i < w->uncounted.size() && i < 4; ++i) names += (i ? ", " : "") + w->uncounted[i];
    out += fmt::format("- Not counted as FLOPs: {} (the compute bound below is too low).\n", names);
  }
  out += fmt::format("- Least time the roofline allows: {} (memory {}, compute {}): {}-bound.\n",
                     ms_text(v->t_roof_ms), ms_text(v->t_memory_ms), ms_text(v->t_compute_ms), v->bound);
  if (v->model_does_not_fit) {
    out += fmt::format("- Measured {}: faster than that model, so it does not describe this kernel (data reused "
                       "from cache, or bytes it need not read); no headroom is given.\n",
                       ms_text(v->measured_ms));
  } else {
    out += fmt::format("- Measured {} = {:.0f}% of the roofline (headroom {:.2f}x); achieved {:.0f} GB/s ({:.0f}% of "
                       "DRAM peak){}.\n",
                       ms_text(v->measured_ms), 100 * v->fraction, v->headroom, v->achieved_gb_s,
                       100 * v->achieved_gb_s / p->dram_gb_s,
                       w->flops && *w->flops > 0
                           ? fmt::format(", {:.3g} TFLOP/s ({:.0f}% of the arithmetic peak)", v->achieved_tflops,
                                         100 * v->achieved_tflops / v->peak_tflops_used)
                           : std::string());
  }
  auto kernels = kernels_from(r.checks());
  if (!kernels.empty()) {
    out += "- GPU time per call by kernel (profiled beside the timed calls):\n";
    for (size_t i = 0; i < kernels.size() && i < 6; ++i)
      out += fmt::format("  - {}: {} ({:.0f}%), {:.3g} launch(es)\n", kernels[i].name, ms_text(kernels[i].ms),
                         100 * kernels[i].share, kernels[i].launches);
  }
  // Registers, spills and occupancy from the compiled kernels' metadata
  // (an autotuned kernel lists each config it compiled).
  auto tk = triton_kernels_from(r.checks());
  if (!tk.empty()) {
    out += "- Compiled Triton kernels (compile metadata; occupancy estimated from it):\n";
    for (size_t i = 0; i < tk.size() && i < 4; ++i) {
      const auto& k = tk[i];
      auto n = [](const std::optional<int>& x) { return x ? std::to_string(*x) : std::string("?"); };
      out += fmt::format("  - {}: {} registers/thread, {} spilled, {} B shared, {} warps, {} stages", k.name,
                         n(k.n_regs), n(k.n_spills), n(k.shared_bytes), n(k.num_warps), n(k.num_stages));
      if (k.occupancy)
        out += fmt::format("; occupancy {:.0f}%{}", 100 * *k.occupancy,
                           k.limited_by.empty() ? "" : " (limited by " + k.limited_by + ")");
      out += k.n_spills && *k.n_spills > 0 ? ": spills go to local memory, cut registers or the tile size\n" : "\n";
    }
    if (tk.size() > 4) out += fmt::format("  - and {} more\n", tk.size() - 4);
  }
  // Nsight Compute's counters, where they were taken (--profile ncu).
  auto nc = ncu_from(r.checks());
  std::optional<double> excess;  // measured DRAM bytes over the bytes the call must move
  if (nc && !nc->error.empty()) {
    out += fmt::format("- Nsight Compute: no counters ({}).\n", nc->error.substr(0, 160));
  } else if (nc) {
    out += "- " + (nc->source.empty() ? std::string("Nsight Compute hardware counters") : nc->source) + ":\n";
    if (nc->dram_bytes && w->bytes > 0) {
      excess = *nc->dram_bytes / w->bytes;
      out += fmt::format("  - DRAM moved {} in {} kernel(s), {:.2f}x the {} the call must move{}{}\n",
                         bytes_text(*nc->dram_bytes), nc->n_kernels, *excess, bytes_text(w->bytes),
                         // Measured on an H200: relu's reads were exact, 36% of its
                         // writes were still in L2 at the end (docs/GPU-RESULTS.md).
                         *excess < 0.95 ? " (writes still in the L2 cache when the call ends are not counted)" : "",
                         nc->time_ms && *nc->time_ms > 0
                             ? fmt::format("; {:.0f} GB/s over its {} of kernel time",
                                           *nc->dram_bytes / (*nc->time_ms * 1e-3) / 1e9, ms_text(*nc->time_ms))
                             : std::string());
    }
    auto pct = [](const std::optional<double>& x) { return x ? fmt::format("{:.0f}%", *x) : std::string("?"); };
    for (size_t i = 0; i < nc->kernels.size() && i < 4; ++i) {
      const auto& k = nc->kernels[i];
      out += fmt::format("  - {}: {}, DRAM {}, SM busy {}, memory busy {}, achieved occupancy {}\n", k.name,
                         k.time_ms ? ms_text(*k.time_ms) : std::string("?"),
                         k.dram_bytes ? bytes_text(*k.dram_bytes) : std::string("?"), pct(k.sm_pct),
                         pct(k.memory_pct), pct(k.occupancy_pct));
    }
    if (nc->kernels.size() > 4) out += fmt::format("  - and {} more\n", nc->kernels.size() - 4);
  }
  // The one line on what limits it most.
  if (excess && *excess > 1.5) {
    out += fmt::format("- What limits it most: it moves {:.1f}x the DRAM bytes it must (re-reads, uncoalesced or "
                       "strided access, intermediates written and read back); cut the traffic before tuning the "
                       "arithmetic.\n",
                       *excess);
  } else if (v->model_does_not_fit) {
    out += "- What limits it most: unknown from this model; profile further before restructuring.\n";
  } else if (v->headroom < 1.15) {
    out += fmt::format("- What limits it most: it is within 15% of the {} roofline; only doing less work ({}) can "
                       "make it much faster.\n",
                       v->bound, v->bound == "memory" ? "fewer bytes: fuse, never write intermediates" : "fewer FLOPs");
  } else if (v->bound == "memory") {
    out += "- What limits it most: memory traffic below the bandwidth peak; look at coalescing, vector width, "
           "enough blocks in flight and re-reads of the same data.\n";
  } else {
    out += "- What limits it most: arithmetic below the peak; look at tile sizes, num_stages for the loads, and "
           "whether its products run on the tensor cores the dtype allows.\n";
  }
  return out;
}

nlohmann::json summary_json(const eval::Verdict& r, const std::string& gpu_name) {
  auto a = analyze(r, gpu_name);
  if (!a) return nullptr;
  const Fit* v = &a->fit;
  return {{"fraction", v->fraction},
          {"headroom", v->model_does_not_fit ? nlohmann::json(nullptr) : nlohmann::json(v->headroom)},
          {"bound", v->bound},
          {"t_roof_ms", v->t_roof_ms},
          {"model_does_not_fit", v->model_does_not_fit},
          {"gpu", a->peaks.gpu}};
}

nlohmann::json analysis_json(const eval::Verdict& r, const std::string& gpu_name) {
  auto a = analyze(r, gpu_name);
  if (!a) return nullptr;
  const Fit& v = a->fit;
  nlohmann::json j = summary_json(r, gpu_name);
  j["t_memory_ms"] = v.t_memory_ms;
  j["t_compute_ms"] = v.t_compute_ms;
  j["measured_ms"] = v.measured_ms;
  j["achieved_gb_s"] = v.achieved_gb_s;
  j["achieved_tflops"] = v.achieved_tflops;
  j["work"] = {{"bytes", a->work.bytes},
               {"flops", a->work.flops ? nlohmann::json(*a->work.flops) : nlohmann::json(nullptr)},
               {"dtype", a->work.dtype},
               {"uncounted_ops", a->work.uncounted}};
  j["peaks"] = {{"gpu", a->peaks.gpu},
                {"dram_gb_s", a->peaks.dram_gb_s},
                {"tflops", v.peak_tflops_used},
                {"unit", v.peak_name},
                {"source", a->peaks.source}};
  // The source of the per-kernel figures, and Nsight Compute's totals where taken.
  if (auto nc = ncu_from(r.checks())) {
    j["profile_source"] = "ncu";
    j["ncu"] = {{"source", nc->source},
                {"error", nc->error.empty() ? nlohmann::json(nullptr) : nlohmann::json(nc->error)},
                {"dram_bytes", nc->dram_bytes ? nlohmann::json(*nc->dram_bytes) : nlohmann::json(nullptr)},
                {"time_ms", nc->time_ms ? nlohmann::json(*nc->time_ms) : nlohmann::json(nullptr)},
                {"dram_bytes_over_model", nc->dram_bytes && a->work.bytes > 0
                                              ? nlohmann::json(*nc->dram_bytes / a->work.bytes)
                                              : nlohmann::json(nullptr)}};
  } else {
    j["profile_source"] = "cupti";
  }
  return j;
}

}  // namespace mk::eval::roofline
