// The charts of report.html, drawn as SVG (svg.h) from a run's ReportData:
// the end-to-end speedup and the subkernels' speedups per iteration, the
// subproblem structure as a grid, and the tokens by agent. Markdown draws none.
#pragma once

#include <string>

#include "report/report_data.h"

namespace mk::report {

/// End-to-end speedup per iteration, vs torch.compile and vs eager; failed iterations marked.
std::string e2e_chart(const ReportData& s);
/// Each subkernel's speedup per iteration, with the end-to-end kernel's.
std::string subkernel_chart(const ReportData& s);
/// Which subproblems each iteration had, and whether their kernel was correct.
std::string structure_chart(const ReportData& s);
/// Tokens by agent, as stacked bars (input, output, cache read, cache write).
std::string agent_chart(const ReportData& s);

}  // namespace mk::report
