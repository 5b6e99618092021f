// The shared folds of a run's records into the facts a person is shown: the
// status line, report.md/report.html and summary.json all add each llm_call
// record to an LlmTally (the calls and tokens, per agent, per task, in all)
// and the best, swap and run_end records to a BestSoFar (the best solution
// and its figure), so two views of one run cannot disagree.
#pragma once

#include <cstdint>
#include <optional>

#include "records/events.h"

namespace mk::records {

struct LlmTally {
  int64_t calls = 0, cached = 0, failed = 0, truncated = 0;
  int64_t kernel_calls = 0;  ///< generate, debug, optimize, postfuse: what the kernel budget counts
  /// Tokens paid for in this run: a cached reply's are not (the call that
  /// filled the cache paid for them).
  int64_t input = 0, output = 0, cache_read = 0, cache_write = 0;
  bool estimated = false;  ///< some count is an estimate (the provider reported none)
  int64_t total() const { return input + output + cache_read + cache_write; }

  void add(const LlmCall& c) {
    ++calls;
    if (c.cached) ++cached;
    if (!c.ok) ++failed;
    if (c.truncated) ++truncated;
    if (is_kernel_agent(c.agent)) ++kernel_calls;
    if (!c.cached) {
      input += c.usage.input;
      output += c.usage.output;
      cache_read += c.usage.cache_read;
      cache_write += c.usage.cache_write;
    }
    if (c.usage.estimated) estimated = true;
  }
};

/// The run's best solution as its records tell it, record by record: the
/// last correct "best" (older logs' correct: false placeholders are skipped),
/// a swap's word on PyTorch subkernels, then run_end's word on all three.
struct BestSoFar {
  bool correct = false;
  /// vs torch.compile, of the best correct solution; nullopt: none, or its
  /// baseline is unknown.
  std::optional<double> speedup_compile;
  int t = -1;  ///< the iteration of the last correct "best" (-1: none)
  bool contains_pytorch = false;

  void add(const Best& b) {
    if (!b.correct) return;
    correct = true;
    speedup_compile = b.speedup_compile;
    t = b.t;
    contains_pytorch = b.contains_pytorch_subkernels;
  }
  void add(const Swap& s) {
    if (s.contains_pytorch_subkernels) contains_pytorch = *s.contains_pytorch_subkernels;
  }
  void add(const RunEnd& e) {
    if (e.correct) correct = *e.correct;
    if (e.best_speedup_compile) speedup_compile = e.best_speedup_compile;
    if (e.contains_pytorch_subkernels) contains_pytorch = *e.contains_pytorch_subkernels;
  }
};

}  // namespace mk::records
