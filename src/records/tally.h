// The one fold of llm_call records into the counts a person is shown: the
// status line, report.md/report.html (per agent, per task, in all) and
// summary.json all add each llm_call record to an LlmTally, so two views of
// one run cannot disagree.
#pragma once

#include <cstdint>

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

}  // namespace mk::records
