// On-disk caches of the evaluator: verdicts keyed by content (so a resumed run
// never repeats an evaluation) and baseline timings keyed by problem, GPU model
// and torch version. One JSON file per entry, written atomically.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "eval/evaluator.h"
#include "util/result.h"

namespace mk::eval {

/// $XDG_CACHE_HOME/mkevolve, else ~/.cache/mkevolve.
std::filesystem::path default_cache_root();

/// What decides a verdict besides the candidate: the machine and the verifier.
struct EvalIdentity {
  std::string gpu_model;     ///< "NVIDIA H200", or "cpu" for test-mode CPU slots
  std::string torch;         ///< from the worker's hello
  std::string triton;
  std::string worker;        ///< hash of the worker's sources (a changed verifier invalidates)
};

/// sha256 over (problem sources, kernel sources, options that change the
/// verdict or timings, identity, protocol version).
std::string result_key(const std::string& problem_hash, const std::string& kernel_hash, const EvalOptions& o,
                       const EvalIdentity& id);

/// sha256 over (problem sources, GPU model, torch version, timing settings).
std::string baseline_key(const std::string& problem_hash, const EvalIdentity& id, const EvalOptions& o);

class ResultCache {
 public:
  explicit ResultCache(std::filesystem::path dir) : dir_(std::move(dir)) {}
  std::optional<Verdict> get(const std::string& key) const;
  mk::Status put(const std::string& key, const Verdict& r, const nlohmann::json& about) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path file(const std::string& key) const;
  std::filesystem::path dir_;
};

struct Baseline {
  Timing eager, compiled;
  nlohmann::json raw;  ///< the worker's answer
};

class BaselineCache {
 public:
  explicit BaselineCache(std::filesystem::path dir) : dir_(std::move(dir)) {}
  std::optional<Baseline> get(const std::string& key) const;
  mk::Status put(const std::string& key, const Baseline& b, const nlohmann::json& about) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

/// Parses a worker's `baseline` answer; an error when it has no eager timing.
Result<Baseline> parse_baseline(const nlohmann::json& msg);

}  // namespace mk::eval
