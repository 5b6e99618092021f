#include "report/report.h"

#include "report/sections.h"
#include "rundir/event_log.h"
#include "util/fs.h"

namespace mk::report {

namespace fs = std::filesystem;
using nlohmann::json;

Result<ReportData> load_run(const fs::path& run_dir, std::vector<std::string>* warnings) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) return Error{run_dir.string() + ": no such run directory"};
  const fs::path log = run_dir / "events.jsonl";
  if (!fs::exists(log, ec)) return Error{run_dir.string() + " is not a run directory (no events.jsonl)"};
  auto events = rundir::read_event_log(log, warnings);
  if (!events) return Error{events.error()};
  auto read_json = [&](const char* name) -> json {
    fs::path p = run_dir / name;
    if (!fs::exists(p, ec)) {
      if (warnings) warnings->push_back(p.string() + " is missing; the report leaves it out");
      return json::object();
    }
    auto text = read_file(p);
    json j = text ? json::parse(*text, nullptr, false) : json();
    if (j.is_discarded() || !j.is_object()) {
      if (warnings) warnings->push_back(p.string() + " is not a JSON object; the report leaves it out");
      return json::object();
    }
    return j;
  };
  return summarize(records::parse_log(*events), read_json("versions.json"), read_json("config.json"));
}

std::string render_markdown(const ReportData& s) { return doc::markdown(build_document(s)); }
std::string render_html(const ReportData& s) { return doc::html(build_document(s)); }

Result<std::vector<fs::path>> write_report(const fs::path& run_dir, const fs::path& out_dir,
                                           std::vector<std::string>* warnings) {
  auto summary = load_run(run_dir, warnings);
  if (!summary) return Error{summary.error()};
  const doc::Document d = build_document(*summary);
  std::vector<fs::path> written = {out_dir / "report.md", out_dir / "report.html"};
  if (Status st = write_file_atomic(written[0], doc::markdown(d)); !st.ok()) return Error{st.error()};
  if (Status st = write_file_atomic(written[1], doc::html(d)); !st.ok()) return Error{st.error()};
  return written;
}

}  // namespace mk::report
