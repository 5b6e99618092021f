#include "util/env.h"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <vector>

extern char** environ;

namespace mk {

namespace {

std::string upper(std::string_view s) {
  std::string u(s);
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return std::toupper(c); });
  return u;
}

bool has_prefix(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

bool looks_secret(std::string_view name) {
  std::string u = upper(name);
  static const char* kWords[] = {"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "SESSION", "COOKIE"};
  for (const char* w : kWords)
    if (u.find(w) != std::string::npos) return true;
  return has_prefix(u, "AWS_") || has_prefix(u, "AZURE_") || has_prefix(u, "GOOGLE_APPLICATION");
}

Env current_environment() {
  Env env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

Env scrubbed_environment() {
  static const char* kExact[] = {"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "LD_LIBRARY_PATH", "HOME",
                                 "USER", "LOGNAME", "SHELL", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX",
                                 "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"};
  static const char* kPrefixes[] = {"LC_", "CUDA_", "NVIDIA_", "TRITON_", "TORCH", "PYTORCH_", "NCCL_", "MKEVOLVE_WORKER_"};
  Env out;
  for (const auto& [k, v] : current_environment()) {
    if (looks_secret(k)) continue;
    bool keep = std::any_of(std::begin(kExact), std::end(kExact), [&](const char* x) { return k == x; }) ||
                std::any_of(std::begin(kPrefixes), std::end(kPrefixes), [&](const char* p) { return has_prefix(k, p); });
    if (keep) out.emplace(k, v);
  }
  return out;
}

namespace {
struct SecretSet {
  std::mutex mu;
  std::vector<std::string> values;
  bool loaded = false;
};
SecretSet& secret_set() {
  static SecretSet s;
  return s;
}
}  // namespace

void register_secret(std::string value) {
  if (value.size() < 8) return;
  auto& s = secret_set();
  std::lock_guard lock(s.mu);
  if (std::find(s.values.begin(), s.values.end(), value) == s.values.end()) s.values.push_back(std::move(value));
}

std::string redact_secrets(std::string text) {
  auto& s = secret_set();
  std::vector<std::string> values;
  {
    std::lock_guard lock(s.mu);
    if (!s.loaded) {
      s.loaded = true;
      for (const auto& [k, v] : current_environment())
        if (looks_secret(k) && v.size() >= 8) s.values.push_back(v);
    }
    values = s.values;
  }
  for (const auto& v : values) {
    for (size_t pos = text.find(v); pos != std::string::npos; pos = text.find(v, pos))
      text.replace(pos, v.size(), "[REDACTED]");
  }
  return text;
}

}  // namespace mk
