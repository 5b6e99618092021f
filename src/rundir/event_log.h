// Reading and checking events.jsonl, the run's append-only event log: one JSON
// object per line, each ending in '\n'. A crash can only tear the final line,
// so a bad final line is recoverable; a bad line in the middle is damage.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace mk::rundir {

/// What a scan of the log's bytes found.
struct EventLogScan {
  std::vector<nlohmann::json> events;  ///< every good event, in file order
  size_t good_bytes = 0;               ///< length of the prefix made of good, '\n'-terminated lines
  bool torn_tail = false;              ///< the final line is incomplete or not a JSON object (a crash mid-write)
  std::string tail;                    ///< the bytes of that final line
  size_t tail_line = 0;                ///< its 1-based line number
  bool missing_newline = false;        ///< the final line is a good object but lacks its '\n'
  size_t bad_line = 0;                 ///< 1-based number of a bad line that is NOT the last one (0: none)
  std::string bad_reason;              ///< why that line is bad
};

/// Splits and parses the log. Blank lines are ignored. Never fails: the caller
/// decides what a torn tail or a bad middle line means.
EventLogScan scan_event_log(std::string_view content);

/// Reads a log without changing it (for reports on a run that may be live):
/// a torn final line is skipped with a warning, a bad middle line is an error
/// naming the file and line. A missing file is an error.
Result<std::vector<nlohmann::json>> read_event_log(const std::filesystem::path& path,
                                                   std::vector<std::string>* warnings = nullptr);

}  // namespace mk::rundir
