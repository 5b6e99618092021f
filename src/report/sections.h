// What a run's report says: the one document (document.h) that report.md and
// report.html are both drawn from, its top (preface.cc) and its sections
// (sections.cc).
#pragma once

#include <optional>
#include <vector>

#include "eval/shapes.h"
#include "report/document.h"
#include "report/report_data.h"

namespace mk::report {

/// The report of a run, built from its summary (sections.cc).
doc::Document build_document(const ReportData& s);

/// What comes before the first section: report.md's list of facts, the
/// banners, report.html's key-figure tiles (preface.cc). shapes: the returned
/// solution's, from its final check.
std::vector<doc::Block> preface(const ReportData& s, const std::optional<eval::ShapesRecord>& shapes);
/// report.html's line under the title; report.md has these facts in its list (preface.cc).
doc::Text subtitle(const ReportData& s);

}  // namespace mk::report
