// record_roundtrip < PATHS: each JSON file named on stdin (one path a line)
// read into its typed record and written back, one line per file on stdout,
// so that two builds can be compared byte for byte: a verdict (a candidate's
// result.json, an e2e check, a cache entry, mkevolve eval --json) through
// eval::Verdict, a summary.json through run::Outcome, a manifest.json's
// end-to-end verdict through eval::Verdict too. Anything else: "other".
// A test tool (scripts/proof_unchanged.sh's companion): it writes nothing.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "eval/verdict.h"
#include "run/summary_json.h"

namespace {

std::string verdict(const nlohmann::json& j) {
  auto v = mk::eval::Verdict::from_json(j);
  if (!v) return "verdict error: " + v.error();
  return "verdict " + v->to_json().dump() + " summary " + mk::eval::summary_json(*v).dump();
}

}  // namespace

int main() {
  std::string path;
  while (std::getline(std::cin, path)) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    std::string what;
    const std::string name = path.substr(path.find_last_of('/') + 1);
    if (j.is_discarded() || !j.is_object()) {
      what = "other";
    } else if (name == "summary.json") {
      auto o = mk::run::outcome_from_summary(j);
      what = o ? "summary " + mk::run::summary_to_json(*o).dump() : "summary error: " + o.error();
    } else if (name == "manifest.json") {
      what = j.contains("e2e") && j["e2e"].is_object() ? "manifest e2e " + verdict(j["e2e"]) : "manifest";
    } else if (j.contains("status")) {
      what = verdict(j);
    } else {
      what = "other";
    }
    std::cout << path << "\t" << what << "\n";
  }
  return 0;
}
