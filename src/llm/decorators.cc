#include "llm/decorators.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <random>
#include <thread>

#include "llm/wire.h"
#include "util/env.h"
#include "util/fs.h"
#include "util/hash.h"

namespace mk::llm {

using nlohmann::json;

namespace {

/// Calls inner->complete and turns any escaping exception into an error value.
Reply guarded(Provider& inner, const Request& req) {
  try {
    return inner.complete(req);
  } catch (const std::exception& e) {
    return error_reply(LlmError::Kind::kMalformed, inner.spec() + ": internal error: " + e.what());
  } catch (...) {
    return error_reply(LlmError::Kind::kMalformed, inner.spec() + ": internal error");
  }
}

class Retry : public Provider {
 public:
  Retry(std::shared_ptr<Provider> inner, RetryOptions o) : inner_(std::move(inner)), o_(std::move(o)) {
    if (!o_.sleep) {
      auto cancelled = o_.cancelled;
      o_.sleep = [cancelled](double s) {
        using clock = std::chrono::steady_clock;
        const auto until = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s));
        while (clock::now() < until) {
          if (cancelled && cancelled()) return;
          clock::duration left = until - clock::now();
          std::this_thread::sleep_for(std::min<clock::duration>(left, std::chrono::milliseconds(100)));
        }
      };
    }
  }
  std::string spec() const override { return inner_->spec(); }
  std::optional<LlmError> probe() override { return inner_->probe(); }

  Reply complete(const Request& req) override {
    Usage spent;  // billed by the failed attempts before this one
    for (int attempt = 0;; ++attempt) {
      Reply r = guarded(*inner_, req);
      if (!r.ok()) {
        Usage total = spent;
        total += r.error->billed;
        r.error->billed = total;
      }
      if (r.ok() || !r.error->retryable || attempt >= o_.max_retries) {
        if (!r.ok() && r.error->retryable && attempt > 0)
          r.error->message += " (gave up after " + std::to_string(attempt + 1) + " attempts)";
        if (r.ok() && spent.total() > 0) r.completion->usage += spent;
        return r;
      }
      spent = r.error->billed;
      double wait;
      if (r.error->retry_after_s >= 0) {
        wait = std::min(r.error->retry_after_s, o_.max_retry_after_s);
      } else {
        double base = std::min(o_.max_backoff_s, o_.initial_backoff_s * std::pow(2.0, attempt));
        wait = base * jitter();
      }
      if (o_.on_retry) o_.on_retry(*r.error, attempt + 1, o_.max_retries + 1, wait);
      if (wait > 0) o_.sleep(wait);
      if (o_.cancelled && o_.cancelled()) return r;
    }
  }

 private:
  double jitter() {
    std::lock_guard lock(mu_);
    return std::uniform_real_distribution<double>(0.5, 1.0)(rng_);
  }
  std::shared_ptr<Provider> inner_;
  RetryOptions o_;
  std::mutex mu_;
  std::mt19937_64 rng_{std::random_device{}()};
};

class Cap : public Provider {
 public:
  Cap(std::shared_ptr<Provider> inner, int limit) : inner_(std::move(inner)), limit_(std::max(1, limit)) {}
  std::string spec() const override { return inner_->spec(); }
  std::optional<LlmError> probe() override { return inner_->probe(); }
  Reply complete(const Request& req) override {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return in_flight_ < limit_; });
      ++in_flight_;
    }
    Reply r = guarded(*inner_, req);
    {
      std::lock_guard lock(mu_);
      --in_flight_;
    }
    cv_.notify_one();
    return r;
  }

 private:
  std::shared_ptr<Provider> inner_;
  const int limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;
};

class Cache : public Provider {
 public:
  Cache(std::shared_ptr<Provider> inner, std::filesystem::path dir, std::string endpoint)
      : inner_(std::move(inner)), dir_(std::move(dir)), endpoint_(std::move(endpoint)) {}
  std::string spec() const override { return inner_->spec(); }
  std::optional<LlmError> probe() override { return inner_->probe(); }
  Reply complete(const Request& req) override {
    const std::string key = cache_key(inner_->spec(), req, endpoint_);
    const auto path = dir_ / key.substr(0, 2) / (key + ".json");
    if (auto text = read_file(path); text.ok()) {
      json j = json::parse(*text, nullptr, false);
      if (!j.is_discarded() && j.is_object() && j.value("key", "") == key && j.contains("completion")) {
        auto c = completion_from_json(j["completion"]);
        if (c.ok()) {
          c->from_cache = true;
          return Reply::Ok(std::move(*c));
        }
      }
    }
    Reply r = guarded(*inner_, req);
    if (r.ok()) {
      json j = {{"v", 1}, {"key", key}, {"spec", inner_->spec()}, {"completion", completion_to_json(*r.completion)}};
      // A failed write only costs a future cache miss.
      (void)write_file_atomic(path, redact_secrets(j.dump()) + "\n");
    }
    return r;
  }

 private:
  std::shared_ptr<Provider> inner_;
  std::filesystem::path dir_;
  std::string endpoint_;
};

class Record : public Provider {
 public:
  Record(std::shared_ptr<Provider> inner, std::filesystem::path file) : inner_(std::move(inner)), file_(std::move(file)) {
    std::error_code ec;
    if (file_.has_parent_path()) std::filesystem::create_directories(file_.parent_path(), ec);
  }
  std::string spec() const override { return inner_->spec(); }
  std::optional<LlmError> probe() override { return inner_->probe(); }
  Reply complete(const Request& req) override {
    Reply r = guarded(*inner_, req);
    // A call cut short by Ctrl-C says nothing about the endpoint; recorded, it
    // would make a replay of this recording stop at the same place.
    if (!r.ok() && r.error->kind == LlmError::Kind::kCancelled) return r;
    json j = {{"v", 1},
              {"fingerprint", request_fingerprint(req)},
              {"spec", inner_->spec()},
              {"agent", req.agent},
              {"task", req.task},
              {"sample", req.sample},
              {"request", request_to_json(req)}};
    if (r.ok()) {
      j["response"] = completion_to_json(*r.completion);
      j["cached"] = r.completion->from_cache;
    } else {
      j["error"] = error_to_json(*r.error);
    }
    std::string line = redact_secrets(j.dump()) + "\n";
    std::lock_guard lock(mu_);
    Status st = append_durable(file_, line);
    if (!st.ok() && !warned_) {
      warned_ = true;
      std::fprintf(stderr, "mkevolve: warning: cannot write the LLM recording: %s\n", st.error().c_str());
    }
    return r;
  }

 private:
  std::shared_ptr<Provider> inner_;
  std::filesystem::path file_;
  std::mutex mu_;
  bool warned_ = false;
};

class Account : public Provider {
 public:
  Account(std::shared_ptr<Provider> inner, Accounting* acc) : inner_(std::move(inner)), acc_(acc) {}
  std::string spec() const override { return inner_->spec(); }
  std::optional<LlmError> probe() override { return inner_->probe(); }
  Reply complete(const Request& req) override {
    auto t0 = std::chrono::steady_clock::now();
    Reply r = guarded(*inner_, req);
    CallEvent e;
    e.spec = inner_->spec();
    e.agent = req.agent;
    e.task = req.task;
    e.sample = req.sample;
    e.latency_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r.ok()) {
      e.model = r.completion->model;
      e.usage = r.completion->usage;
      e.cached = r.completion->from_cache;
      e.truncated = r.completion->truncated;
    } else {
      e.ok = false;
      e.error = r.error->message;
      e.usage = r.error->billed;
    }
    if (acc_) acc_->record(std::move(e));
    return r;
  }

 private:
  std::shared_ptr<Provider> inner_;
  Accounting* acc_;
};

}  // namespace

std::string cache_key(const std::string& spec, const Request& req, const std::string& endpoint) {
  Hasher h;
  h.update("mkevolve-cache-v1").update(spec).update(request_fingerprint(req));
  if (!endpoint.empty()) h.update("endpoint").update(endpoint);
  return h.hex();
}

std::shared_ptr<Provider> with_retry(std::shared_ptr<Provider> inner, RetryOptions o) {
  return std::make_shared<Retry>(std::move(inner), std::move(o));
}
std::shared_ptr<Provider> with_concurrency_cap(std::shared_ptr<Provider> inner, int limit) {
  return std::make_shared<Cap>(std::move(inner), limit);
}
std::shared_ptr<Provider> with_cache(std::shared_ptr<Provider> inner, std::filesystem::path dir, std::string endpoint) {
  return std::make_shared<Cache>(std::move(inner), std::move(dir), std::move(endpoint));
}
std::shared_ptr<Provider> with_recording(std::shared_ptr<Provider> inner, std::filesystem::path file) {
  return std::make_shared<Record>(std::move(inner), std::move(file));
}
std::shared_ptr<Provider> with_accounting(std::shared_ptr<Provider> inner, Accounting* acc) {
  return std::make_shared<Account>(std::move(inner), acc);
}

}  // namespace mk::llm
