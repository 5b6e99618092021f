#include "llm/accounting.h"

#include "llm/wire.h"
#include "util/config.h"
#include "util/env.h"

namespace mk::llm {

using nlohmann::json;

Result<std::map<std::string, Prices>> prices_from_config(const Config& cfg) {
  std::map<std::string, Prices> out;
  auto keys = cfg.table_keys("llm.prices");
  if (!keys.ok()) return Error{keys.error()};
  for (const auto& name : *keys) {
    std::string base = "llm.prices.\"" + name + "\"";
    auto sub = cfg.table_keys(base);
    if (!sub.ok()) return Error{sub.error()};
    for (const auto& k : *sub)
      if (k != "input" && k != "output" && k != "cache_read" && k != "cache_write")
        return cfg.error_at(base + "." + k, "unknown price; use input, output, cache_read, cache_write (USD per million tokens)");
    Prices p;
    auto in = cfg.get_number(base + ".input", 0);
    auto outp = cfg.get_number(base + ".output", 0);
    if (!in.ok()) return Error{in.error()};
    if (!outp.ok()) return Error{outp.error()};
    p.input = *in;
    p.output = *outp;
    auto cr = cfg.get_number(base + ".cache_read", p.input / 10);
    auto cw = cfg.get_number(base + ".cache_write", p.input * 1.25);
    if (!cr.ok()) return Error{cr.error()};
    if (!cw.ok()) return Error{cw.error()};
    p.cache_read = *cr;
    p.cache_write = *cw;
    for (double v : {p.input, p.output, p.cache_read, p.cache_write})
      if (v < 0) return cfg.error_at(base, "prices must not be negative");
    out[name] = p;
  }
  return out;
}

json CallEvent::to_json() const {
  json j = {{"spec", spec},   {"model", model}, {"agent", agent},         {"task", task},
            {"sample", sample}, {"usage", usage_to_json(usage)}, {"cached", cached}, {"ok", ok},
            {"truncated", truncated}, {"latency_s", latency_s}};
  if (!ok) j["error"] = redact_secrets(error);
  if (cost_usd) j["cost_usd"] = *cost_usd;
  return j;
}

void Tally::add(const CallEvent& e) {
  ++calls;
  if (e.cached) ++cached_calls;
  if (!e.ok) ++errors;
  if (e.truncated) ++truncated;
  usage += e.usage;
  if (e.cost_usd) {
    cost_usd += *e.cost_usd;
  } else if (e.ok && !e.cached && e.usage.total() > 0) {
    cost_complete = false;
  }
  latency_s += e.latency_s;
}

json Tally::to_json() const {
  return {{"calls", calls},       {"cached_calls", cached_calls}, {"errors", errors},
          {"truncated", truncated}, {"usage", usage_to_json(usage)}, {"cost_usd", cost_usd},
          {"cost_complete", cost_complete}, {"latency_s", latency_s}};
}

Tally Tally::from_json(const json& j) {
  Tally t;
  if (!j.is_object()) return t;
  t.calls = j.value("calls", int64_t{0});
  t.cached_calls = j.value("cached_calls", int64_t{0});
  t.errors = j.value("errors", int64_t{0});
  t.truncated = j.value("truncated", int64_t{0});
  if (j.contains("usage")) t.usage = usage_from_json(j["usage"]);
  t.cost_usd = j.value("cost_usd", 0.0);
  t.cost_complete = j.value("cost_complete", true);
  t.latency_s = j.value("latency_s", 0.0);
  return t;
}

namespace {
void merge_tally(Tally& into, const Tally& t) {
  into.calls += t.calls;
  into.cached_calls += t.cached_calls;
  into.errors += t.errors;
  into.truncated += t.truncated;
  into.usage += t.usage;
  into.cost_usd += t.cost_usd;
  into.cost_complete = into.cost_complete && t.cost_complete;
  into.latency_s += t.latency_s;
}
}  // namespace

void Accounting::set_prices(std::map<std::string, Prices> prices) {
  std::lock_guard lock(mu_);
  prices_ = std::move(prices);
}

bool Accounting::has_prices() const {
  std::lock_guard lock(mu_);
  return !prices_.empty();
}

void Accounting::set_listener(Listener fn) {
  std::lock_guard lock(mu_);
  listener_ = std::move(fn);
}

std::optional<Prices> Accounting::price_for(const std::string& spec, const std::string& model) const {
  if (auto it = prices_.find(spec); it != prices_.end()) return it->second;
  auto colon = spec.find(':');
  if (colon != std::string::npos)
    if (auto it = prices_.find(spec.substr(colon + 1)); it != prices_.end()) return it->second;
  if (!model.empty())
    if (auto it = prices_.find(model); it != prices_.end()) return it->second;
  return std::nullopt;
}

void Accounting::record(CallEvent e) {
  Listener fn;
  {
    std::lock_guard lock(mu_);
    if (e.cached) e.usage = Usage{};  // a cache hit costs nothing this time
    if (auto p = price_for(e.spec, e.model)) e.cost_usd = p->cost(e.usage);
    e.error = redact_secrets(e.error);
    total_.add(e);
    by_agent_[e.agent.empty() ? "-" : e.agent].add(e);
    by_task_[e.task.empty() ? "-" : e.task].add(e);
    calls_.push_back(e);
    fn = listener_;
  }
  if (fn) fn(e);
}

Tally Accounting::total() const {
  std::lock_guard lock(mu_);
  return total_;
}

std::map<std::string, Tally> Accounting::by_agent() const {
  std::lock_guard lock(mu_);
  return by_agent_;
}

std::map<std::string, Tally> Accounting::by_task() const {
  std::lock_guard lock(mu_);
  return by_task_;
}

std::vector<CallEvent> Accounting::calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

json Accounting::to_json(bool include_calls) const {
  std::lock_guard lock(mu_);
  json j = {{"total", total_.to_json()}, {"by_agent", json::object()}, {"by_task", json::object()}};
  for (const auto& [k, t] : by_agent_) j["by_agent"][k] = t.to_json();
  for (const auto& [k, t] : by_task_) j["by_task"][k] = t.to_json();
  if (include_calls) {
    j["calls"] = json::array();
    for (const auto& c : calls_) j["calls"].push_back(c.to_json());
  }
  return j;
}

Status Accounting::merge_json(const json& j) {
  if (!j.is_object() || !j.contains("total")) return Error{"accounting JSON lacks \"total\""};
  std::lock_guard lock(mu_);
  merge_tally(total_, Tally::from_json(j["total"]));
  for (const char* key : {"by_agent", "by_task"}) {
    if (!j.contains(key) || !j[key].is_object()) continue;
    auto& dst = std::string(key) == "by_agent" ? by_agent_ : by_task_;
    for (const auto& [k, v] : j[key].items()) merge_tally(dst[k], Tally::from_json(v));
  }
  if (j.contains("calls") && j["calls"].is_array()) {
    for (const auto& c : j["calls"]) {
      CallEvent e;
      e.spec = c.value("spec", "");
      e.model = c.value("model", "");
      e.agent = c.value("agent", "");
      e.task = c.value("task", "");
      e.sample = c.value("sample", 0);
      if (c.contains("usage")) e.usage = usage_from_json(c["usage"]);
      e.cached = c.value("cached", false);
      e.ok = c.value("ok", true);
      e.error = c.value("error", "");
      e.truncated = c.value("truncated", false);
      e.latency_s = c.value("latency_s", 0.0);
      if (c.contains("cost_usd") && c["cost_usd"].is_number()) e.cost_usd = c["cost_usd"].get<double>();
      calls_.push_back(std::move(e));
    }
  }
  return Status::Ok();
}

}  // namespace mk::llm
