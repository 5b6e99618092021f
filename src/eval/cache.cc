#include "eval/cache.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

#include "eval/protocol.h"
#include "util/fs.h"
#include "util/hash.h"

namespace mk::eval {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path default_cache_root() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "mkevolve";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "mkevolve";
  return fs::temp_directory_path() / "mkevolve-cache";
}

namespace {
std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
}  // namespace

std::string result_key(const std::string& problem_hash, const std::string& kernel_hash, const EvalOptions& o,
                       const EvalIdentity& id) {
  Hasher h;
  // v2: the entry holds the Verdict's JSON form (eval/verdict.h); a v1 entry
  // (the older cache form) is another key, so a miss, never an error.
  h.update("mkevolve-result-v2").update(std::to_string(kProtocolVersion)).update(std::to_string(kVerdictSchema));
  h.update(problem_hash).update(kernel_hash);
  h.update(std::to_string(o.trials)).update(std::to_string(o.warmup)).update(std::to_string(o.perf_trials));
  // Unset tolerances are the dtype's (or the problem's), hashed as such.
  for (const auto& t : {o.atol, o.rtol, o.pass_rate}) h.update(t ? num(*t) : std::string("by-dtype"));
  h.update(num(o.timeout_s)).update(o.measure_perf ? "perf" : "noperf").update("dist:" + o.trials_dist);
  h.update(std::to_string(o.seed)).update(o.allow_pytorch ? "allow_pytorch" : "triton_only");
  h.update(o.test_cpu ? "test_cpu" : "gpu").update(o.timing);
  if (o.profile != "cupti") h.update("profile=" + o.profile);  // a verdict with checks.ncu is another record
  if (o.baseline_tf32) h.update("baseline_tf32");  // the verdict carries a second baseline
  // Calibrated tolerances: the numbers decide, not the file they came from.
  if (o.calibrated.is_object() && o.calibrated.contains("outputs"))
    h.update("calibrated=" + o.calibrated["outputs"].dump());
  if (o.plain_env) h.update("plain_env");
  // Verified at the shape variants too: another verdict (benchmark keeps the older keys).
  if (o.shapes != "benchmark") h.update("shapes=" + o.shapes);  // another environment: another verdict
  // Trials in the composition's layouts are other trials.
  if (!o.input_layouts.is_null()) h.update("layouts=" + o.input_layouts.dump());
  h.update(id.gpu_model).update(id.torch).update(id.triton).update(id.worker);
  return h.hex();
}

std::string baseline_key(const std::string& problem_hash, const EvalIdentity& id, const EvalOptions& o) {
  Hasher h;
  h.update("mkevolve-baseline-v2").update(std::to_string(kProtocolVersion));
  h.update(problem_hash).update(id.gpu_model).update(id.torch);
  h.update(std::to_string(o.warmup)).update(std::to_string(o.perf_trials)).update(o.test_cpu ? "test_cpu" : "gpu");
  h.update(o.timing);
  // A deadline shorter than the compile needs gives a baseline without torch.compile.
  if (o.compile_timeout_s > 0) h.update("compile_timeout=" + std::to_string(o.compile_timeout_s));
  if (o.tf32) h.update("tf32-on");  // --baseline-tf32's second baseline
  return h.hex();
}

fs::path ResultCache::file(const std::string& key) const { return dir_ / key.substr(0, 2) / (key + ".json"); }

fs::path CacheSeal::default_path() {
  if (const char* f = std::getenv("MKEVOLVE_CACHE_KEY"); f && *f) return fs::path(f);
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) return fs::path(x) / "mkevolve" / "cache-key";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".config" / "mkevolve" / "cache-key";
  return fs::temp_directory_path() / ("mkevolve-cache-key-" + std::to_string(::geteuid()));
}

Result<std::shared_ptr<const CacheSeal>> CacheSeal::load() {
  static std::mutex mu;
  static std::shared_ptr<const CacheSeal> loaded;
  std::lock_guard lock(mu);
  if (loaded) return loaded;
  auto seal = open_or_make(default_path());
  if (seal) loaded = *seal;
  return seal;
}

Result<std::shared_ptr<const CacheSeal>> CacheSeal::open_or_make(const fs::path& path) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  // Made once, by whoever comes first, and never seen half written: the key
  // is written whole to a file of this process's own, then linked into place
  // (link fails where another process's key is there already). Two jobs that
  // started at once used to read a key file created but not yet written.
  if (!fs::exists(path, ec)) {
    unsigned char raw[32];
    if (RAND_bytes(raw, sizeof raw) != 1)
      return Error{"cannot draw a random cache key (OpenSSL RAND_bytes failed)", ErrorKind::kMissing};
    std::string hex;
    for (unsigned char c : raw) hex += fmt::format("{:02x}", c);
    hex += "\n";
    const fs::path tmp = path.string() + fmt::format(".new-{}-{}", ::getpid(), hex.substr(0, 8));
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return Error{tmp.string() + ": cannot write the cache key", ErrorKind::kMissing};
    bool ok = ::write(fd, hex.data(), hex.size()) == static_cast<ssize_t>(hex.size()) && ::fsync(fd) == 0;
    ::close(fd);
    if (ok && ::link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST) ok = false;
    ::unlink(tmp.c_str());
    if (!ok) return Error{path.string() + ": cannot write the cache key", ErrorKind::kMissing};
  }
  auto text = read_file(path);
  if (!text) return Error{path.string() + ": cannot read the cache key: " + text.error(), ErrorKind::kMissing};
  std::string secret = *text;
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == ' ')) secret.pop_back();
  if (secret.size() < 32)
    return Error{path.string() + ": the cache key is too short (delete the file: a new one is made)",
                 ErrorKind::kBadInput};
  return std::make_shared<const CacheSeal>(std::move(secret));
}

std::string CacheSeal::mac(const std::string& key, const json& content) const {
  return hmac_sha256_hex(secret_, key + "\n" + content.dump());
}

bool CacheSeal::verify(const std::string& key, const json& content, const json& mac_field) const {
  if (!mac_field.is_string()) return false;
  const std::string want = mac(key, content), got = mac_field.get<std::string>();
  // Constant time: a candidate must not learn the MAC byte by byte.
  return want.size() == got.size() && CRYPTO_memcmp(want.data(), got.data(), want.size()) == 0;
}

std::optional<Verdict> ResultCache::get(const std::string& key) const {
  auto text = read_file(file(key));
  if (!text) return std::nullopt;
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("result")) return std::nullopt;
  if (seal_ && !seal_->verify(key, j["result"], j.value("mac", json()))) {
    ++discarded_;  // not written by this user's mkevolve: never trusted
    return std::nullopt;
  }
  auto r = Verdict::from_json(j["result"]);
  if (!r) return std::nullopt;  // unreadable: evaluated again, and the entry rewritten
  r->cached = true;
  return std::move(*r);
}

mk::Status ResultCache::put(const std::string& key, const Verdict& r, const json& about) const {
  // The pool's timings belong to the evaluation that made the entry, not to a later hit.
  Verdict stored = r;
  stored.cached = false;
  stored.clear_pool_clocks();
  json j{{"key", key}, {"about", about}, {"result", stored.to_json()}};
  if (seal_) j["mac"] = seal_->mac(key, j["result"]);
  return write_file_atomic(file(key), j.dump(1, ' ', false, json::error_handler_t::replace) + "\n");
}

Result<Baseline> parse_baseline(const json& msg) {
  if (!msg.is_object()) return Error{"the worker's baseline answer is not an object"};
  if (auto t = msg.find("type"); t != msg.end() && *t == "error") {
    auto it = msg.find("message");
    return Error{"baseline failed: " + (it != msg.end() && it->is_string() ? it->get<std::string>() : std::string("no message"))};
  }
  const json& body = (msg.contains("result") && msg["result"].is_object()) ? msg["result"] : msg;
  Baseline b;
  if (auto it = body.find("eager"); it != body.end()) b.eager = parse_timing(*it);
  if (auto it = body.find("compile"); it != body.end()) b.compiled = parse_timing(*it);
  if (!b.eager.valid) return Error{"the worker's baseline answer has no eager timing"};
  b.raw = body;
  b.raw.erase("id");
  b.raw.erase("type");
  return b;
}

std::optional<Baseline> BaselineCache::get(const std::string& key) const {
  auto text = read_file(dir_ / (key + ".json"));
  if (!text) return std::nullopt;
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("baseline")) return std::nullopt;
  if (seal_ && !seal_->verify(key, j["baseline"], j.value("mac", json()))) return std::nullopt;
  auto b = parse_baseline(j["baseline"]);
  if (!b) return std::nullopt;
  return *b;
}

mk::Status BaselineCache::put(const std::string& key, const Baseline& b, const json& about) const {
  json j{{"key", key}, {"about", about}, {"baseline", b.raw}};
  if (seal_) j["mac"] = seal_->mac(key, j["baseline"]);
  return write_file_atomic(dir_ / (key + ".json"), j.dump(1, ' ', false, json::error_handler_t::replace) + "\n");
}

}  // namespace mk::eval
