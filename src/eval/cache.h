// On-disk caches of the evaluator: verdicts keyed by content (so a resumed run
// never repeats an evaluation) and baseline timings keyed by problem, GPU model
// and torch version. One JSON file per entry, written atomically.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
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

/// The secret that seals cache entries: an entry carries an HMAC-SHA256 of its
/// key and content under it, so an entry written by anyone without the secret
/// (a candidate that reached the cache folder) is discarded, never trusted.
/// Read from $MKEVOLVE_CACHE_KEY (a file), else $XDG_CONFIG_HOME/mkevolve/cache-key
/// (~/.config/...), made there (32 random bytes, mode 0600) when missing: outside
/// every cache and run directory, and outside the candidates' sandbox.
class CacheSeal {
 public:
  /// The seal of this user: default_path()'s, loaded (or made) once per process.
  static Result<std::shared_ptr<const CacheSeal>> load();
  /// The seal whose secret is in `path`, made there first when missing.
  static Result<std::shared_ptr<const CacheSeal>> open_or_make(const std::filesystem::path& path);
  /// A seal with a given secret (tests).
  explicit CacheSeal(std::string secret) : secret_(std::move(secret)) {}
  std::string mac(const std::string& key, const nlohmann::json& content) const;
  bool verify(const std::string& key, const nlohmann::json& content, const nlohmann::json& mac) const;
  static std::filesystem::path default_path();

 private:
  std::string secret_;
};

class ResultCache {
 public:
  /// seal null: entries are neither sealed nor checked (tests of the cache form only).
  explicit ResultCache(std::filesystem::path dir, std::shared_ptr<const CacheSeal> seal = nullptr)
      : dir_(std::move(dir)), seal_(std::move(seal)) {}
  /// nullopt when absent, unreadable, or not sealed by this user's secret
  /// (counted in discarded(): evaluated again, and the entry rewritten).
  std::optional<Verdict> get(const std::string& key) const;
  mk::Status put(const std::string& key, const Verdict& r, const nlohmann::json& about) const;
  const std::filesystem::path& dir() const { return dir_; }
  int discarded() const { return discarded_; }

 private:
  std::filesystem::path file(const std::string& key) const;
  std::filesystem::path dir_;
  std::shared_ptr<const CacheSeal> seal_;
  mutable std::atomic<int> discarded_{0};
};

struct Baseline {
  Timing eager, compiled;
  nlohmann::json raw;  ///< the worker's answer
};

class BaselineCache {
 public:
  /// Sealed as ResultCache: a forged baseline would forge every speedup against it.
  explicit BaselineCache(std::filesystem::path dir, std::shared_ptr<const CacheSeal> seal = nullptr)
      : dir_(std::move(dir)), seal_(std::move(seal)) {}
  std::optional<Baseline> get(const std::string& key) const;
  mk::Status put(const std::string& key, const Baseline& b, const nlohmann::json& about) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::shared_ptr<const CacheSeal> seal_;
};

/// Parses a worker's `baseline` answer; an error when it has no eager timing.
Result<Baseline> parse_baseline(const nlohmann::json& msg);

}  // namespace mk::eval
