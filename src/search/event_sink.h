// How the search reports what it does. The CLI connects an EventSink to the
// run directory (RunDir::log_event, store_candidate) and the status line;
// tests use MemorySink. Durable events arrive in a deterministic order
// (parallel work is buffered and flushed in index order), so two runs with the
// same LLM replies and eval results write identical logs (apart from the
// timestamps the run directory adds).
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "problem/problem.h"
#include "records/events.h"

namespace mk::search {

/// One candidate as stored in the run directory (every candidate, failures included).
struct CandidateRecord {
  std::string id;          ///< unique in the run, stable across a resume: "<task>-s<sample>"
  std::string task;        ///< problem or subproblem name
  std::string agent;       ///< generate, debug, optimize, postfuse
  int iteration = 0;
  int sample = 0;
  std::map<std::string, std::string> files;  ///< kernel.py (and reply.md when unparseable)
  nlohmann::json result;   ///< eval result (status, speedups, ...) or the parse error
};

class EventSink {
 public:
  virtual ~EventSink() = default;
  /// A durable event, in deterministic order.
  virtual void emit(const records::Event& event) = 0;
  /// Live progress for the status line (llm_start, llm_done, eval_start,
  /// eval_done); any thread, any order, not logged.
  virtual void progress(const records::Event& event) {}
  /// Stores a candidate's files and result; any thread.
  virtual void store_candidate(const CandidateRecord& c) {}
  /// Stores the topology of an iteration (0 = the initial decomposition).
  virtual void snapshot_topology(int iteration, const problem::Topology& t) {}
  /// Stores an end-to-end evaluation's verdict with its timings (name: its
  /// workspace's, e.g. "t3", "final", "final-early-0", "swap"); any thread.
  virtual void store_e2e(const std::string& name, const nlohmann::json& result) {}
};

/// Holds durable events of one parallel branch until flush(); passes the rest through.
class BufferedSink : public EventSink {
 public:
  explicit BufferedSink(EventSink* parent) : parent_(parent) {}
  void emit(const records::Event& e) override { buf_.push_back(e); }
  void progress(const records::Event& e) override { if (parent_) parent_->progress(e); }
  void store_candidate(const CandidateRecord& c) override { if (parent_) parent_->store_candidate(c); }
  void snapshot_topology(int it, const problem::Topology& t) override { if (parent_) parent_->snapshot_topology(it, t); }
  void store_e2e(const std::string& n, const nlohmann::json& r) override { if (parent_) parent_->store_e2e(n, r); }
  void flush() {
    if (parent_)
      for (const auto& e : buf_) parent_->emit(e);
    buf_.clear();
  }

 private:
  EventSink* parent_;
  std::vector<records::Event> buf_;
};

/// Records everything (tests, `mkevolve evolve` summaries). Thread-safe.
/// Events are kept as the log would hold them (records::to_json).
class MemorySink : public EventSink {
 public:
  void emit(const records::Event& e) override {
    std::lock_guard<std::mutex> lk(mu_);
    events.push_back(records::to_json(e));
  }
  void store_candidate(const CandidateRecord& c) override {
    std::lock_guard<std::mutex> lk(mu_);
    candidates.push_back(c);
  }
  void snapshot_topology(int it, const problem::Topology& t) override {
    std::lock_guard<std::mutex> lk(mu_);
    topologies.emplace_back(it, t);
  }
  void store_e2e(const std::string& n, const nlohmann::json& r) override {
    std::lock_guard<std::mutex> lk(mu_);
    e2e.emplace_back(n, r);
  }
  std::vector<nlohmann::json> of_type(const std::string& type) const {
    std::vector<nlohmann::json> out;
    for (const auto& e : events)
      if (e.value("type", "") == type) out.push_back(e);
    return out;
  }
  std::vector<nlohmann::json> events;
  std::vector<CandidateRecord> candidates;
  std::vector<std::pair<int, problem::Topology>> topologies;
  std::vector<std::pair<std::string, nlohmann::json>> e2e;

 private:
  std::mutex mu_;
};

}  // namespace mk::search
