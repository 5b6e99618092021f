// report_snapshot RUN_DIR OUT_DIR: everything a person is shown of a run
// directory, written to OUT_DIR as files, so that two builds can be compared
// byte for byte (scripts/proof_unchanged.sh): report.md and report.html
// (mkevolve report), summary.json as a run computes it from the event log,
// the status line's plain line for every event, and every event read into
// its typed record and written back (roundtrip.jsonl), and the solution's
// manifest likewise (manifest.json).
// A test tool: it changes nothing in RUN_DIR.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#if __has_include("records/manifest.h")
#include "records/manifest.h"
#define MK_HAS_MANIFEST 1
#endif
#if __has_include("records/events.h")
#include "records/events.h"
#define MK_HAS_RECORDS 1
#else
#include "records/events.h"
#endif
#include "report/report.h"
#include "report/status_line.h"
#include "rundir/run_dir.h"
#include "run/summary_json.h"

namespace fs = std::filesystem;

namespace {

// Each event read into its typed record and written back (a record of a type
// the build does not know: as it was).
nlohmann::json roundtrip(const nlohmann::json& e) {
#ifdef MK_HAS_RECORDS
  return mk::records::to_json(mk::records::parse_event(e));
#else
  namespace ev = mk::rundir::events;
  if (auto r = ev::RunStart::from_json(e)) return r->to_json();
  if (auto r = ev::Resume::from_json(e)) return r->to_json();
  if (auto r = ev::Preflight::from_json(e)) return r->to_json();
  if (auto r = ev::LlmCall::from_json(e)) return r->to_json();
  if (auto r = ev::ReplyError::from_json(e)) return r->to_json();
  if (auto r = ev::VerifyDecomposition::from_json(e)) return r->to_json();
  if (auto r = ev::Topology::from_json(e)) return r->to_json();
  if (auto r = ev::Budget::from_json(e)) return r->to_json();
  if (auto r = ev::Eval::from_json(e)) return r->to_json();
  if (auto r = ev::Judge::from_json(e)) return r->to_json();
  if (auto r = ev::Reuse::from_json(e)) return r->to_json();
  if (auto r = ev::CompositionFailure::from_json(e)) return r->to_json();
  if (auto r = ev::Iteration::from_json(e)) return r->to_json();
  if (auto r = ev::Best::from_json(e)) return r->to_json();
  if (auto r = ev::Swap::from_json(e)) return r->to_json();
  if (auto r = ev::SwapSkipped::from_json(e)) return r->to_json();
  if (auto r = ev::SwapRejected::from_json(e)) return r->to_json();
  if (auto r = ev::Postfuse::from_json(e)) return r->to_json();
  if (auto r = ev::FinalCheck::from_json(e)) return r->to_json();
  if (auto r = ev::RunEnd::from_json(e)) return r->to_json();
  return e;
#endif
}

std::vector<nlohmann::json> read_events(const fs::path& dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(dir / "events.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream o(p, std::ios::binary);
  o << text;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: report_snapshot RUN_DIR OUT_DIR\n");
    return 2;
  }
  const fs::path dir = argv[1], out = argv[2];
  fs::create_directories(out);
  std::vector<std::string> warnings;
  auto written = mk::report::write_report(dir, out, &warnings);
  std::string notes;
  for (const auto& w : warnings) notes += "warning: " + w + "\n";
  if (!written) notes += "error: " + written.error() + "\n";

  auto events = read_events(dir);
  const mk::records::Log log = mk::records::parse_log(events);
  mk::run::SummaryInfo info;
  info.problem_id = dir.filename().string();
  for (const auto& e : events)
    if (e.value("type", "") == "run_start") {
      info.problem_name = e.value("problem", "");
      info.method = e.value("method", "");
    }
  write(out / "summary.json", mk::run::summary_to_json(mk::run::outcome_from_events(log, info)).dump(2) + "\n");

  mk::report::StatusLine::Options so;
  so.mode = mk::report::StatusLine::Mode::kQuiet;
  so.width = 100;
  mk::report::StatusLine line(stdout, so);
  std::string lines;
  for (const auto& e : log) {
    lines += line.describe(e) + "\n";
    line.on_event(e);
  }
  write(out / "status.txt", lines);
  std::string rt;
  for (const auto& e : events) rt += roundtrip(e).dump() + "\n";
  write(out / "roundtrip.jsonl", rt);
  // solution/manifest.json read into its record and written back (a build
  // without the record: as it is).
  if (std::ifstream m(dir / "solution" / "manifest.json"); m) {
    auto j = nlohmann::json::parse(m, nullptr, false);
#ifdef MK_HAS_MANIFEST
    if (auto rec = mk::records::SolutionManifest::from_json(j)) j = rec->to_json();
#endif
    write(out / "manifest.json", j.dump(2) + "\n");
  }
  write(out / "notes.txt", notes);
  return 0;
}
