#include "eval/gpus.h"

#include <cstdlib>
#include <regex>
#include <sstream>

#include "util/subprocess.h"

namespace mk::eval {

std::vector<Gpu> parse_nvidia_smi_list(const std::string& text) {
  static const std::regex line_re(R"(^GPU\s+(\d+):\s*(.*?)\s*\(UUID:\s*([^)\s]+)\)\s*$)");
  std::vector<Gpu> out;
  std::istringstream in(text);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!std::regex_match(line, m, line_re)) continue;
    Gpu g;
    g.index = std::stoi(m[1]);
    g.device = m[1];
    g.name = m[2];
    g.uuid = m[3];
    out.push_back(g);
  }
  return out;
}

std::vector<Gpu> visible_gpus(const std::vector<Gpu>& physical, const char* cvd, bool smi_ok) {
  if (cvd == nullptr) {
    std::vector<Gpu> out = physical;
    for (size_t i = 0; i < out.size(); ++i) out[i].index = static_cast<int>(i);
    return out;
  }
  std::vector<Gpu> out;
  std::istringstream in(cvd);
  std::string entry;
  while (std::getline(in, entry, ',')) {
    while (!entry.empty() && entry.front() == ' ') entry.erase(entry.begin());
    while (!entry.empty() && entry.back() == ' ') entry.pop_back();
    if (entry.empty()) break;
    Gpu g;
    g.device = entry;
    g.name = "unknown GPU";
    bool numeric = entry.find_first_not_of("0123456789") == std::string::npos;
    bool found = false;
    if (numeric) {
      int idx = std::stoi(entry);
      for (const auto& p : physical)
        if (p.index == idx) g.name = p.name, g.uuid = p.uuid, found = true;
    } else if (entry.rfind("GPU-", 0) == 0 || entry.rfind("MIG-", 0) == 0) {
      for (const auto& p : physical)
        if (!p.uuid.empty() && p.uuid.rfind(entry, 0) == 0) g.name = p.name, g.uuid = p.uuid, found = true;
      if (entry.rfind("MIG-", 0) == 0) found = true;  // MIG instances are not in `nvidia-smi -L`'s GPU lines
    } else {
      break;  // CUDA stops at the first invalid entry ("-1" hides everything)
    }
    // With a working nvidia-smi, an entry that names no GPU is invalid (CUDA stops there).
    if (smi_ok && !found) break;
    g.index = static_cast<int>(out.size());
    out.push_back(g);
  }
  return out;
}

std::vector<Gpu> discover_gpus() {
  SubprocessOptions o;
  o.argv = {"nvidia-smi", "-L"};
  auto r = run_subprocess(o, {}, std::chrono::seconds(20));
  std::vector<Gpu> physical;
  if (r.ok()) physical = parse_nvidia_smi_list(r.out);
  return visible_gpus(physical, std::getenv("CUDA_VISIBLE_DEVICES"), r.ok());
}

}  // namespace mk::eval
