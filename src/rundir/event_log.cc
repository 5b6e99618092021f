#include "rundir/event_log.h"

#include "util/fs.h"

namespace mk::rundir {

namespace {

// Parses one line; on failure fills *why.
bool parse_event(std::string_view line, nlohmann::json* out, std::string* why) {
  nlohmann::json j = nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    *why = "not valid JSON";
    return false;
  }
  if (!j.is_object()) {
    *why = "not a JSON object";
    return false;
  }
  if (!j.contains("type") || !j["type"].is_string()) {
    *why = "has no string \"type\"";
    return false;
  }
  *out = std::move(j);
  return true;
}

bool blank(std::string_view s) { return s.find_first_not_of(" \t\r") == std::string_view::npos; }

}  // namespace

EventLogScan scan_event_log(std::string_view content) {
  EventLogScan scan;
  size_t pos = 0, line_no = 0;
  while (pos < content.size()) {
    size_t nl = content.find('\n', pos);
    bool terminated = nl != std::string_view::npos;
    size_t end = terminated ? nl : content.size();
    std::string_view line = content.substr(pos, end - pos);
    ++line_no;
    size_t next = terminated ? nl + 1 : content.size();
    bool last = next >= content.size();
    if (blank(line)) {
      if (terminated) scan.good_bytes = next;
      pos = next;
      continue;
    }
    nlohmann::json ev;
    std::string why;
    if (parse_event(line, &ev, &why)) {
      scan.events.push_back(std::move(ev));
      if (terminated) {
        scan.good_bytes = next;
      } else {
        scan.missing_newline = true;
      }
    } else if (last) {
      scan.torn_tail = true;
      scan.tail = std::string(line);
      scan.tail_line = line_no;
    } else {
      // Trailing NUL blocks (left by some file systems after a crash) or blank
      // lines after the bad line would still make it the effective last line.
      std::string_view rest = content.substr(next);
      bool only_junk_after = rest.find_first_not_of(std::string_view(" \t\r\n\0", 5)) == std::string_view::npos;
      if (only_junk_after) {
        scan.torn_tail = true;
        scan.tail = std::string(content.substr(pos));
        scan.tail_line = line_no;
        break;
      }
      scan.bad_line = line_no;
      scan.bad_reason = why;
      break;
    }
    pos = next;
  }
  return scan;
}

Result<std::vector<nlohmann::json>> read_event_log(const std::filesystem::path& path,
                                                   std::vector<std::string>* warnings) {
  auto content = read_file(path);
  if (!content) return Error{content.error()};
  EventLogScan scan = scan_event_log(*content);
  if (scan.bad_line) {
    return Error{path.string() + ": line " + std::to_string(scan.bad_line) + " is " + scan.bad_reason +
                 " (a damaged line in the middle of the log; a crash cannot cause this)"};
  }
  if (scan.torn_tail && warnings) {
    warnings->push_back(path.string() + ": ignored an incomplete last line (line " + std::to_string(scan.tail_line) +
                        "; the run may be writing it now, or crashed while writing it)");
  }
  return std::move(scan.events);
}

}  // namespace mk::rundir
