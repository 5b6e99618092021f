// Which GPUs this process may use: CUDA_VISIBLE_DEVICES, else `nvidia-smi -L`.
#pragma once

#include <string>
#include <vector>

namespace mk::eval {

struct Gpu {
  int index = 0;        ///< position among the visible GPUs (what --gpu N names)
  std::string device;   ///< the value for a server's CUDA_VISIBLE_DEVICES ("3", "GPU-…", "MIG-…")
  std::string name;     ///< model name, e.g. "NVIDIA H200" ("unknown GPU" when not queryable)
  std::string uuid;
};

/// Parses `nvidia-smi -L` output ("GPU 0: NVIDIA H200 (UUID: GPU-…)").
std::vector<Gpu> parse_nvidia_smi_list(const std::string& text);

/// Applies CUDA_VISIBLE_DEVICES semantics (comma list of indices or UUID
/// prefixes; stops at the first invalid entry; "" or "-1" hides every GPU) to
/// the physical list. A null cvd means the variable is unset.
std::vector<Gpu> visible_gpus(const std::vector<Gpu>& physical, const char* cvd, bool smi_ok);

/// The GPUs visible to this process (runs nvidia-smi once, 20 s deadline).
std::vector<Gpu> discover_gpus();

}  // namespace mk::eval
