// bench-report: merges the summaries of bench output directories (shards,
// methods) and renders the suite metrics as markdown, JSON, CSV and HTML.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/metrics.h"
#include "util/result.h"

namespace mk::bench {

struct SuiteResults {
  std::map<std::string, std::vector<run::Outcome>> by_method;  ///< method -> one outcome per problem
  std::vector<std::string> warnings;                      ///< unreadable or duplicate summaries
};

/// Finds every summary.json under the given directories (bench output dirs or
/// single run dirs). A problem that appears twice for one method (e.g. two
/// shards that overlapped) keeps the finished one, else the later file, with a warning.
Result<SuiteResults> load_results(const std::vector<std::filesystem::path>& dirs);

struct BenchReport {
  std::vector<MethodMetrics> metrics;
  WinRate win_rate;
  std::map<std::string, std::vector<CurvePoint>> curves;
  SuiteResults results;
};
BenchReport build_report(SuiteResults results, int64_t curve_step = 16);

std::string render_markdown(const BenchReport& r);
nlohmann::json render_json(const BenchReport& r);
/// One row per (method, problem).
std::string render_csv(const BenchReport& r);
/// Self-contained HTML (inline SVG and CSS, no scripts, no network).
std::string render_html(const BenchReport& r);

}  // namespace mk::bench
