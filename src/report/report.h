// `mkevolve report`: report.md and a self-contained report.html (inline CSS and
// SVG, no scripts, no network) built from a run directory's events.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "report/report_data.h"
#include "util/result.h"

namespace mk::report {

/// Reads DIR/events.jsonl (tolerating a torn last line: the run may be live),
/// DIR/versions.json and DIR/config.json. Warnings go to *warnings.
Result<ReportData> load_run(const std::filesystem::path& run_dir, std::vector<std::string>* warnings);

/// report.md and report.html: the one document of sections.h, drawn by
/// markdown.cc and html.cc.
std::string render_markdown(const ReportData& s);
std::string render_html(const ReportData& s);

/// The statement about TF32 and timing that every report carries.
std::string tf32_statement(const ReportData& s);

/// Writes report.md and report.html into out_dir (atomically); returns their paths.
Result<std::vector<std::filesystem::path>> write_report(const std::filesystem::path& run_dir,
                                                        const std::filesystem::path& out_dir,
                                                        std::vector<std::string>* warnings);

}  // namespace mk::report
