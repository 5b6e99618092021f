#include "records/events.h"

#include <cstdio>
#include <unordered_map>

#include "util/json_fields.h"

namespace mk::records {

namespace {
nlohmann::json opt(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

using fields::str;
/// A speedup for people: "1.23x".
std::string fmt_x(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", v);
  return buf;
}
}  // namespace

std::optional<Envelope> Envelope::from_json(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  auto t = j.find("type");
  if (t == j.end() || !t->is_string()) return std::nullopt;
  Envelope e{t->get<std::string>()};
  if (auto it = j.find("seq"); it != j.end() && it->is_number_integer()) e.seq = it->get<int64_t>();
  e.ts = str(j, "ts");
  return e;
}

ReplayKey ReplayKey::of(const nlohmann::json& j) {
  ReplayKey k;
  if (!j.is_object()) return k;
  if (auto e = Envelope::from_json(j)) k.type = e->type;
  auto at = [&](const char* name) { return j.value(name, nlohmann::json()); };
  k.agent = at("agent");
  k.task = at("task");
  k.candidate = at("candidate");
  k.iteration = at("iteration");
  k.sample = at("sample");
  return k;
}

void LlmCall::finish_json(nlohmann::json& j) const {
  if (!ok) j["error"] = error;
}

void Iteration::finish_json(nlohmann::json& j) const { j["iteration"] = t; }

void Best::finish_json(nlohmann::json& j) const {
  if (!correct) j["speedup_compile"] = nullptr;
}

void Swap::finish_json(nlohmann::json& j) const {
  if (triggered) j["subkernel_speedup"] = opt(subkernel_speedup);  // the search's: null when unknown
  else j.erase("subkernel_speedup");
}

void RunStart::finish_json(nlohmann::json& j) const {
  if (!j.contains("settings")) j["settings"] = nlohmann::json::object();
}

nlohmann::json SwapRejected::finish_read(const nlohmann::json& j, SwapRejected& r) {
  if (j.contains("replaced") || str(j, "name").empty()) return nlohmann::json::object();
  r.replaced.push_back({str(j, "name"), str(j, "to"), std::nullopt});  // mkevolve swap before one shape
  return {{"name", nullptr}, {"to", nullptr}};
}

FinalCheckOutcome final_check_outcome(const Log& events) {
  FinalCheckOutcome o;
  bool finished = false;  // a run_end with status finished since the last final_check
  for (const auto& e : events) {
    std::visit(Visit{[&](const Resume&) { o = FinalCheckOutcome{}; },  // a resumed process checks again
                     [&](const RunEnd& end) { finished = end.status == "finished"; },
                     [&](const FinalCheck& f) {
                       finished = false;
                       if (o.result == "failed") ++o.failed_before;  // the one before failed: this one is its fallback
                       o.result = f.passed ? "passed" : f.status == "no_verdict" ? "no_verdict" : "failed";
                       o.iteration = f.iteration;
                       o.fallback = f.fallback;
                       o.seed = f.seed;
                       o.status = f.status;
                       o.kind = f.kind;
                       o.message = f.message;
                       o.speedup_compile = f.passed ? f.speedup_compile : std::nullopt;
                       o.speedup_eager = f.passed ? f.speedup_eager : std::nullopt;
                       o.runtime_ms = f.passed ? f.runtime_ms : std::nullopt;
                       o.search_speedup_compile = f.passed ? f.search_speedup_compile : std::nullopt;
                       o.shapes = f.shapes;
                     },
                     [](const auto&) {}},
               e);
  }
  // A failure decides only when the run went on to finish: until then the
  // next-best solution may still be checked.
  if (o.result == "failed" && !finished) o.result = "incomplete";
  return o;
}

std::string FinalCheckOutcome::text() const {
  const std::string how = "fresh seed " + std::to_string(seed) + ", every check on";
  const std::string before =
      failed_before == 1 ? "1 better solution failed it" : std::to_string(failed_before) + " better solutions failed it";
  if (result == "passed") {
    // The figure the run reports is this check's own timing; the search's is beside it.
    // Without a torch.compile baseline (a torch without it, or a compile past
    // its deadline) the figure is against eager: never a 0.00x.
    std::string figure;
    if (speedup_compile && *speedup_compile > 0) {
      figure = ": " + fmt_x(*speedup_compile) + " vs torch.compile";
      if (search_speedup_compile && *search_speedup_compile > 0)
        figure += " (the search measured " + fmt_x(*search_speedup_compile) + ")";
    } else if (speedup_eager && *speedup_eager > 0) {
      figure = ": " + fmt_x(*speedup_eager) + " vs eager (no torch.compile baseline)";
    }
    if (failed_before == 0) return "passed (" + how + ")" + figure;
    return "passed by the solution of iteration " + std::to_string(iteration) + " (" + how + "), after " + before +
           figure;
  }
  if (result == "no_verdict" && kind == "judge_failed") {
    return "no verdict from the cheat judge (" + message + "): the solution of iteration " +
           std::to_string(iteration) + " passed the fresh-seed evaluation (" + how +
           ") and is returned without the judge's second look" +
           (failed_before ? "; before it, " + before : std::string());
  }
  if (result == "no_verdict") {
    return "no verdict (" + (message.empty() ? std::string("the check could not be made") : message) +
           "): the solution of iteration " + std::to_string(iteration) +
           " is returned on its verdict from the search, not checked again" +
           (failed_before ? "; before it, " + before : std::string());
  }
  if (result == "incomplete") {
    const int n = failed_before + 1;
    return "not finished: " + (n == 1 ? std::string("the best solution") : std::to_string(n) + " solutions") +
           " failed it (last: " + status + (kind.empty() ? "" : ", " + kind) +
           ") and the run stopped before the next-best was checked; a resume checks again";
  }
  if (result == "failed") {
    const int n = failed_before + 1;
    return "failed by " + (n == 1 ? std::string("the solution") : "each of the " + std::to_string(n) + " solutions") +
           " checked (last: " + status + (kind.empty() ? "" : ", " + kind) + "): no correct kernel is returned";
  }
  return "";
}

nlohmann::json FinalCheckOutcome::to_json() const {
  if (result.empty()) return nullptr;
  nlohmann::json j = {{"result", result},  {"iteration", iteration},         {"fallback", fallback},
                      {"seed", seed},      {"failed_before", failed_before}, {"status", status},
                      {"kind", kind}};
  if (!message.empty()) j["message"] = message;
  if (speedup_compile) j["speedup_compile"] = *speedup_compile;
  if (speedup_eager) j["speedup_eager"] = *speedup_eager;
  if (runtime_ms) j["runtime_ms"] = *runtime_ms;
  if (search_speedup_compile) j["search_speedup_compile"] = *search_speedup_compile;
  if (!shapes.is_null()) j["shapes"] = shapes;
  return j;
}

namespace {

template <class R>
Event parse_as(const nlohmann::json& j) {
  if (auto r = R::from_json(j)) return std::move(*r);
  return UnknownRecord{R::kType, j};
}

template <class... R>
std::unordered_map<std::string, Event (*)(const nlohmann::json&)> parsers(std::variant<UnknownRecord, R...>*) {
  return {{R::kType, &parse_as<R>}...};
}

}  // namespace

Event parse_event(const nlohmann::json& j) {
  static const auto by_type = parsers(static_cast<Event*>(nullptr));
  auto env = Envelope::from_json(j);
  if (!env) return UnknownRecord{"", j};
  auto it = by_type.find(env->type);
  if (it == by_type.end()) return UnknownRecord{env->type, j};
  return it->second(j);
}

nlohmann::json to_json(const Event& e) {
  return std::visit(Visit{[](const UnknownRecord& u) { return u.json; }, [](const auto& r) { return r.to_json(); }},
                    e);
}

std::string type_of(const Event& e) {
  return std::visit(Visit{[](const UnknownRecord& u) { return u.type; },
                          [](const auto& r) { return std::string(std::decay_t<decltype(r)>::kType); }},
                    e);
}

const Meta* meta_of(const Event& e) {
  return std::visit(Visit{[](const UnknownRecord&) -> const Meta* { return nullptr; },
                          [](const auto& r) -> const Meta* { return &r.meta; }},
                    e);
}

std::optional<Envelope> envelope_of(const Event& e) {
  return std::visit(Visit{[](const UnknownRecord& u) { return Envelope::from_json(u.json); },
                          [](const auto& r) -> std::optional<Envelope> {
                            return Envelope{std::decay_t<decltype(r)>::kType, r.meta.seq, r.meta.ts};
                          }},
                    e);
}

Log parse_log(const std::vector<nlohmann::json>& lines) {
  Log log;
  log.reserve(lines.size());
  for (const auto& j : lines) log.push_back(parse_event(j));
  return log;
}

void stamp(Event& e, int64_t seq, const std::string& ts) {
  std::visit(Visit{[&](UnknownRecord& u) {
                     u.json["seq"] = seq;
                     u.json["ts"] = ts;
                   },
                   [&](auto& r) {
                     r.meta.seq = seq;
                     r.meta.ts = ts;
                   }},
             e);
}

}  // namespace mk::records
