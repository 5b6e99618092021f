// mkevolve adapt's reuse of an earlier run's subkernels: the EarlierRun record,
// how a subproblem of the variant matches one of that run's, and the beams
// seeded with the matched subkernels, re-verified on the variant.
#include <future>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "records/events.h"
#include "search/internal.h"
#include "search/search.h"

namespace mk::search {

using problem::Subproblem;
using problem::Topology;

using detail::beam_key;
using detail::emit;
using detail::subproblem_file;
using detail::subproblem_task;

namespace {

/// A file with trailing spaces and trailing blank lines dropped: how a reply's
/// files come back may differ from the earlier run's in nothing else.
std::string normalized(const std::string& src) {
  std::istringstream in(src);
  std::string line, out;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.pop_back();
    out += line + "\n";
  }
  while (out.size() >= 2 && out[out.size() - 1] == '\n' && out[out.size() - 2] == '\n') out.pop_back();
  return out;
}

/// A subproblem file with its module-level numeric constants (its sizes) and
/// blank lines set aside: two files equal this way define the same module for
/// other shapes.
std::string without_sizes(const std::string& src) {
  static const std::regex sizes(R"(^[A-Za-z_][A-Za-z0-9_]*\s*=\s*[-+0-9.eE*/(), ]+(#.*)?$)");
  std::istringstream in(normalized(src));
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.empty() || std::regex_match(line, sizes)) continue;
    out += line + "\n";
  }
  return out;
}

}  // namespace

nlohmann::json EarlierRun::to_json() const {
  return {{"from", from},       {"top_level", top_level}, {"problems", problems},
          {"kernels", kernels}, {"calls", calls},         {"judged", judged}};
}

Result<EarlierRun> EarlierRun::from_json(const nlohmann::json& j) {
  if (!j.is_object()) return Error{"reuse: not an object"};
  try {
    EarlierRun r;
    r.from = j.value("from", std::string());
    r.top_level = j.value("top_level", std::string());
    if (j.contains("problems")) r.problems = j["problems"].get<std::map<std::string, std::string>>();
    if (j.contains("kernels")) r.kernels = j["kernels"].get<std::map<std::string, std::string>>();
    if (j.contains("calls")) r.calls = j["calls"].get<std::map<std::string, int>>();
    r.judged = j.value("judged", false);
    return r;
  } catch (const std::exception& e) {
    return Error{std::string("reuse: ") + e.what()};
  }
}

std::optional<EarlierSubproblem> match_reuse(const EarlierRun& r, const Subproblem& sp) {
  // Each kind of match tries the subproblem of the same name first.
  auto find = [&](auto same, const char* how) -> std::optional<EarlierSubproblem> {
    if (r.problems.count(sp.name) && r.kernels.count(sp.name) && same(r.problems.at(sp.name)))
      return EarlierSubproblem{sp.name, how};
    for (const auto& [name, src] : r.problems)
      if (r.kernels.count(name) && same(src)) return EarlierSubproblem{name, how};
    return std::nullopt;
  };
  const std::string same = normalized(sp.source);
  if (auto m = find([&](const std::string& s) { return normalized(s) == same; }, "same source")) return m;
  const std::string mine = without_sizes(sp.source);
  if (auto m = find([&](const std::string& s) { return without_sizes(s) == mine; }, "same module, other shapes"))
    return m;
  if (r.problems.count(sp.name) && r.kernels.count(sp.name)) return EarlierSubproblem{sp.name, "same name"};
  return std::nullopt;
}

namespace detail {

void seed_reused(SearchContext& ctx, const EarlierRun& r, const Topology& topo, std::map<std::string, BeamState>& beams) {
  // The re-verifications are independent of one another: they run at once,
  // and their outcomes are taken in subproblem order.
  struct Seed {
    const Subproblem* sp;
    EarlierSubproblem m;
    Candidate c;
    CandidateRecord rec;
    std::vector<records::Event> events;
  };
  std::vector<Seed> seeds;
  for (const auto& sp : topo.subproblems) {
    auto m = match_reuse(r, sp);
    if (!m || ctx.should_stop()) continue;
    if (auto st = problem::write_file_plain(subproblem_file(ctx, sp), sp.source); !st) {
      ctx.set_fatal(st.error());
      return;
    }
    Seed s{&sp, *m, {}, {}, {}};
    s.c.task = sp.name;
    s.c.agent = "reused";
    s.c.parent = m->name;
    s.c.id = fmt::format("{}-reused", detail::safe_name(sp.name));
    s.c.source = r.kernels.at(m->name);
    s.rec = CandidateRecord{s.c.id, s.c.task, s.c.agent, 0, 0, {}, nlohmann::json()};
    seeds.push_back(std::move(s));
  }
  std::vector<std::future<void>> futs;
  for (auto& s : seeds)
    futs.push_back(std::async(std::launch::async, [&ctx, &r, &s] {
      KernelTask task = subproblem_task(ctx, *s.sp);
      detail::evaluate_source(ctx, task, s.c, s.rec, s.events, 0, !r.judged, 0);
    }));
  for (auto& f : futs) f.get();
  std::set<std::string> counted;
  for (auto& s : seeds) {
    if (!ctx.fatal_message().empty() || ctx.should_stop()) return;
    Candidate& c = s.c;
    int saved = c.correct() && r.calls.count(s.m.name) && counted.insert(s.m.name).second ? r.calls.at(s.m.name) : 0;
    emit(ctx, records::ReuseMatch{s.sp->name, r.from, s.m.name, s.m.how, c.id, eval::to_string(c.result.status),
                                  c.correct(), saved});
    for (const auto& e : s.events) emit(ctx, e);
    if (c.no_verdict) continue;  // no evidence either way: evolved as a new subproblem
    BeamState b;
    b.members.push_back(std::move(c));
    beams[beam_key(*s.sp)] = std::move(b);
  }
}

}  // namespace detail

}  // namespace mk::search
