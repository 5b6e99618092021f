#include "run/problem_run.h"

#include "records/manifest.h"
#include "records/run_config.h"

#include <chrono>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "run/summary_json.h"
#include "eval/calibration.h"
#include "eval/shapes.h"
#include "eval/calibration_file.h"
#include "problem/compose.h"
#include "report/report.h"
#include "rundir/event_log.h"
#include "records/events.h"
#include "rundir/interrupt.h"
#include "util/fs.h"
#include "util/json_fields.h"

namespace mk::run {

// ---- RunSink -------------------------------------------------------------------

RunSink::RunSink(rundir::RunDir* dir, report::StatusLine* status, std::vector<nlohmann::json> already_logged)
    : dir_(dir), status_(status) {
  for (auto& e : already_logged) {
    auto env = records::Envelope::from_json(e);
    const std::string t = env ? env->type : "";
    if (t == records::Resume::kType || t == records::RunEnd::kType ||
        t == records::Preflight::kType)
      continue;  // not the search's own
    replay_.push_back(std::move(e));
  }
  replaying_ = !replay_.empty();
}

void RunSink::emit(const records::Event& event) {
  std::lock_guard<std::mutex> lk(mu_);
  if (replaying_ && next_ < replay_.size()) {
    // A resumed run re-executes from the start with cached LLM replies and
    // evaluations; the events the log already holds are not written twice.
    const auto& old = replay_[next_];
    if (records::ReplayKey::of(old) == records::ReplayKey::of(records::to_json(event))) {
      ++skipped_;
      // The logged record, not this process's copy: it holds what the call
      // was billed for then (a resumed call is served from the cache).
      if (status_) status_->on_event(records::parse_event(replay_[next_]), /*replayed=*/true);
      ++next_;
      return;
    }
    replaying_ = false;
    if (status_)
      status_->message(fmt::format("resume: the run diverged from its log after {} events (different LLM replies "
                                   "or evaluations); logging from here",
                                   next_));
  }
  replaying_ = false;
  // After a failed write (a full disk) nothing more is logged, even what would
  // fit: the log must stay a prefix of the run's events, or its resume diverges.
  if (!error_.empty()) return;
  if (auto st = dir_->log_event(event); !st) error_ = st.error();
}

void RunSink::progress(const records::Event& e) {
  if (status_) status_->on_event(e);
}

void RunSink::store_candidate(const search::CandidateRecord& c) {
  auto r = dir_->store_candidate(c.task, c.id, c.files, c.result);
  if (!r) {
    std::lock_guard<std::mutex> lk(mu_);
    if (error_.empty()) error_ = r.error();
  }
}

void RunSink::snapshot_topology(int iteration, const problem::Topology& t) {
  auto st = dir_->write_json(rundir::RunDir::topology_rel(iteration), t.to_json());
  if (!st) {
    std::lock_guard<std::mutex> lk(mu_);
    if (error_.empty()) error_ = st.error();
  }
}

void RunSink::store_e2e(const std::string& name, const nlohmann::json& result) {
  // A diagnostic (docs/RUN-DIRECTORY.md): a write that fails is left to the
  // writes that matter (events, candidates) to report.
  (void)dir_->write_json(std::filesystem::path("e2e") / (name + ".json"), result);
}

std::string RunSink::error() const {
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

StopWatcher::StopWatcher(std::atomic<bool>* stop, const RunSink* sink, const std::atomic<bool>* also)
    : stop_(stop), sink_(sink), also_(also) {
  th_ = std::thread([this] {
    while (!done_) {
      if (rundir::Interrupt::requested() || (also_ && also_->load()) || (sink_ && !sink_->error().empty()))
        stop_->store(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

StopWatcher::~StopWatcher() {
  done_ = true;
  th_.join();
}

// ---- directories -------------------------------------------------------------------

Result<search::EarlierRun> load_reuse(const fs::path& dir) {
  auto bad = [](std::string m) { return Error{std::move(m), ErrorKind::kBadInput}; };
  std::error_code ec;
  if (!fs::is_regular_file(dir / "config.json", ec))
    return bad(dir.string() + " is not a run directory (no config.json)");
  if (auto v = read_json_file(dir / "versions.json"); v && v->is_object() && v->value("run_format", 0) > rundir::kRunFormat)
    return bad(fmt::format("{}: written by a newer mkevolve (run format {}); this one reads up to {}", dir.string(),
                           v->value("run_format", 0), rundir::kRunFormat));
  const fs::path man_path = dir / "solution" / "manifest.json";
  auto man_json = read_json_file(man_path);
  auto man = records::SolutionManifest::from_json(man_json ? *man_json : nlohmann::json());
  if (!man) return bad(man_path.string() + ": missing or not a solution manifest (did the run finish with a solution?)");
  if (!man->correct.value_or(false))
    return bad(man_path.string() + ": the run's solution is not a verified one; there is nothing to reuse");
  const int it = man->iteration.value_or(0);
  fs::path topo_path = dir / rundir::RunDir::topology_rel(it);
  Result<problem::Topology> topo = Error{"missing or not JSON"};
  if (man->monolithic) {
    // The whole problem as one subkernel (PostFuse's result, a baseline's, or
    // the decomposition's fallback): no snapshot needs to exist for it.
    topo_path = dir / "problem.py";
    auto p = problem::Problem::load(topo_path);
    if (p) topo = problem::Topology::wrap_original(*p);
    else topo = Error{p.error()};
  } else if (auto tj = read_json_file(topo_path)) {
    topo = problem::Topology::from_json(*tj);
  }
  if (!topo) return bad(topo_path.string() + ": " + topo.error() + " (the solution's decomposition)");
  search::EarlierRun r;
  r.from = fs::absolute(dir, ec).lexically_normal().string();  // the manifest names it from anywhere
  if (r.from.empty()) r.from = dir.string();
  r.top_level = topo->top_level;
  for (const auto& s : man->subkernels) {
    const std::string& name = s.name;
    // Every subkernel of a written package has a kernel; Swap's PyTorch stand-ins are not reused.
    if (name.empty() || s.pytorch.value_or(false)) continue;
    const problem::Subproblem* sp = topo->find(name);
    const fs::path kfile = dir / "solution" / "subkernel_implementations" / (name + ".py");
    auto k = read_file(kfile);
    if (!sp) return bad(fmt::format("{}: has no subproblem {}, which the manifest lists", topo_path.string(), name));
    if (!k) return bad(kfile.string() + ": " + k.error());
    r.problems[name] = sp->source;
    r.kernels[name] = *k;
    r.calls[name] = 0;
  }
  if (r.kernels.empty())
    return bad(man_path.string() + ": the solution has no Triton subkernel to reuse (only PyTorch stand-ins)");
  if (auto cfg = read_json_file(dir / "config.json"); cfg)
    if (auto c = records::RunConfig::from_json(*cfg)) r.judged = !c->judge.empty();
  // The kernel calls the run spent on each (and, for an adaptation, the ones it saved).
  if (auto events = rundir::read_event_log(dir / "events.jsonl")) {
    for (const auto& e : *events) {
      if (auto c = records::LlmCall::from_json(e); c && r.calls.count(c->task) &&
                                                        records::is_kernel_agent(c->agent))
        r.calls[c->task] += 1;
      else if (auto u = records::ReuseMatch::from_json(e); u && u->correct && r.calls.count(u->task))
        r.calls[u->task] += u->calls_saved;
    }
  }
  return r;
}

Result<Resumed> open_for_resume(const fs::path& dir) {
  auto opened = rundir::RunDir::open(dir);
  if (!opened) return Error{opened.error()};
  Resumed r;
  r.dir = std::move(*opened);
  auto cfg = records::RunConfig::from_json(r.dir->config());
  if (!cfg) return Error{fmt::format("{}/config.json: not a JSON object", dir.string())};
  auto opts = search::options_from_json(cfg->options);
  if (!opts) return Error{fmt::format("{}/config.json: {}", dir.string(), opts.error())};
  r.opts = *opts;
  r.llm = cfg->llm;
  r.judge = cfg->judge;
  r.base_url = cfg->base_url;
  r.config_path = cfg->config;
  r.test_cpu = cfg->test_cpu;
  r.problem_id = cfg->problem_id;
  auto p = problem::Problem::load(r.dir->root() / "problem.py");
  if (!p) return Error{p.error()};
  r.problem = std::move(*p);
  if (r.dir->config().contains("problem")) r.problem.name = cfg->problem;
  return r;
}

bool holds_no_progress(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  // Only what RunDir::create and a pre-flight make: no candidate, no solution,
  // no file of the user's.
  static const std::set<std::string> made = {"cache",  "candidates", "topology",   "versions.json", "events.jsonl",
                                             "lock",   "eval",       "work",       "config.json",   "problem.py",
                                             "report.md", "report.html", "summary.json", "charts"};
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!made.count(e.path().filename().string())) return false;
    if (e.path().filename() == "candidates" && !fs::is_empty(e.path(), ec)) return false;
  }
  if (ec) return false;
  // Without config.json (a start that died while creating the directory) it
  // must still be one mkevolve began: its lock or versions.json, never only
  // folders that merely share a name with a run directory's.
  if (!fs::exists(dir / "config.json", ec) && !fs::exists(dir / "versions.json", ec) && !fs::exists(dir / "lock", ec))
    return false;
  if (!fs::exists(dir / "events.jsonl", ec)) return !fs::exists(dir / "config.json", ec);
  auto events = rundir::read_event_log(dir / "events.jsonl");
  if (!events) return false;
  for (const auto& e : *events)
    if (!records::Preflight::from_json(e)) return false;  // a call, an evaluation, a resume: progress
  return true;
}

bool search_completed_in_log(const std::vector<nlohmann::json>& events) {
  bool completed = false;
  for (const auto& e : events) {
    if (auto r = records::RunEnd::from_json(e)) completed = r->result == "ok" || r->result == "no_correct";
    else if (records::Resume::from_json(e)) continue;  // a resume that then completed logs its own run_end
    else if (records::LlmCall::from_json(e)) completed = false;
  }
  return completed;
}

std::optional<nlohmann::json> finished_run_end(const std::vector<nlohmann::json>& events, const fs::path& run_root) {
  std::optional<nlohmann::json> end;
  std::string result;
  for (const auto& e : events) {
    if (auto r = records::RunEnd::from_json(e)) {
      end = e;
      result = r->result;
    } else if (records::Resume::from_json(e)) {
      end.reset();
    }
  }
  if (!end) return std::nullopt;
  if (result != "ok" && result != "no_correct") return std::nullopt;
  if (!summary_says_finished(run_root)) return std::nullopt;
  return end;
}

Result<std::unique_ptr<rundir::RunDir>> create_run(const fs::path& out, const NewRun& n, const problem::Problem& problem,
                                                const search::SearchOptions& opts, const rundir::Versions& versions) {
  records::RunConfig config;
  config.command = n.cmd;
  config.problem = problem.name;
  config.problem_file = fs::absolute(n.problem_file).string();
  config.problem_hash = problem.hash;
  config.llm = n.llm;
  config.judge = n.judge;
  config.base_url = n.base_url;
  config.config = n.config_path;
  config.test_cpu = n.test_cpu;
  config.options = search::to_json(opts);
  config.problem_id = n.problem_id;
  auto created = rundir::RunDir::create(out, config.to_json(), versions);
  if (!created) return Error{created.error()};
  auto rd = std::move(*created);
  if (auto st = rd->write_text("problem.py", problem.source); !st) return Error{st.error()};
  return rd;
}

Status write_summary(const fs::path& dir, const run::Outcome& o) {
  return write_file_atomic(dir / "summary.json", run::summary_to_json(o).dump(2) + "\n");
}

// ---- the run -------------------------------------------------------------------------

ProblemRunResult run_problem(const Shared& shared, ProblemRun pr) {
  ProblemRunResult out;
  rundir::RunDir* rd = pr.dir;
  auto& opts = pr.opts;
  std::vector<nlohmann::json> prior = pr.resumed ? rd->events() : std::vector<nlohmann::json>{};

  report::StatusLine::Options so;
  so.mode = pr.mode;
  so.iterations = opts.iterations;
  so.max_calls = opts.total_budget() + opts.postfuse;
  report::StatusLine status(pr.status_out, so);
  for (const auto& n : rd->notices()) status.message(n);
  rd->add_listener([&status](const records::Event& e) { status.on_event(e); });
  if (pr.resumed) {
    records::Resume resumed{.events_before = static_cast<int64_t>(prior.size()), .notices = rd->notices()};
    records::codec::decode(pr.llm_changes, resumed.llm_changes);
    if (auto st = rd->log_event(resumed); !st) out.sink_error = st.error();
  }
  status.message(fmt::format("{} {} on {} with {}; run directory {}", pr.resumed ? "resuming" : "starting",
                             opts.method, pr.problem.name, shared.llm->spec(), rd->root().string()));

  // Pre-flight, before any LLM call is paid for: the problem loads and its
  // reference runs once where it will be evaluated.
  std::string preflight_error;
  if (shared.evaluator && !pr.problem.path.empty() && out.sink_error.empty()) {
    status.message("checking the problem: loading it and running its reference once");
    auto t0 = std::chrono::steady_clock::now();
    nlohmann::json shapes;
    mk::Status st = shared.evaluator->check_problem(pr.problem.path, opts.eval.test_cpu,
                                                    eval::final_shapes(opts.eval.shapes), &shapes);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!st) preflight_error = st.error();
    // --shapes: the variants the solution will be checked at, and those the
    // reference cannot run (skipped, never charged to a candidate), said now.
    if (st && shapes.is_object()) {
      std::vector<std::string> vs;
      for (const auto& v : shapes.value("variants", nlohmann::json::array()))
        if (v.is_string()) vs.push_back(v.get<std::string>());
      if (!vs.empty())
        status.message(fmt::format("shape variants ({}): {} (benchmark: {})", opts.eval.shapes == "search"
                                       ? "every candidate is verified at them" : "the returned solution is checked at them",
                                   fmt::join(vs, "; "), shapes.value("benchmark", std::string())));
      for (const auto& k : shapes.value("skipped", nlohmann::json::array()))
        if (k.is_object())
          status.message(fmt::format("warning: shape variant {} skipped: {}", k.value("shape", std::string("?")),
                                     k.value("error", std::string())));
      if (vs.empty() && shapes.contains("error") && shapes["error"].is_string())
        status.message("no shape variants: " + shapes["error"].get<std::string>() +
                       "; only the benchmark's shapes are verified");
    }
    if (auto w = rd->log_event(records::Preflight{"problem", st.ok(), std::round(secs * 1000) / 1000, st.ok() ? "" : preflight_error});
        !w)
      out.sink_error = w.error();
  }

  // Then the LLM endpoints: one free request each (the models list), so that a
  // dead endpoint or a refused key stops the run here, not after minutes of
  // failed calls. A resume probes too, unless its log shows that every call
  // it will make again is cached (search_completed_in_log): whether the
  // replies still to come are cached cannot be known before they are asked.
  const bool all_calls_logged = pr.resumed && search_completed_in_log(prior);
  std::string endpoint_error;
  if (preflight_error.empty() && out.sink_error.empty()) {
    for (const auto* p : {&shared.llm, &shared.judge}) {
      if (!*p || !endpoint_error.empty()) continue;
      auto t0 = std::chrono::steady_clock::now();
      std::optional<llm::LlmError> e = (*p)->probe();
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!e) continue;
      std::string msg = (*p)->spec() + ": " + e->message;
      (void)rd->log_event(records::Preflight{"endpoint", false, std::round(secs * 1000) / 1000, msg});
      if (all_calls_logged)
        status.message("warning: " + msg + " (resuming anyway: the search had finished, so every reply it needs "
                                           "is cached)");
      else endpoint_error = msg;
    }
  }

  RunSink sink(rd, &status, prior);
  std::atomic<bool> stop{false};
  search::AgentAccounting acct;
  agents::Gate gate(64);
  if (!preflight_error.empty()) {
    out.res.status = "problem_error";
    out.res.error = preflight_error;
  } else if (!endpoint_error.empty()) {
    out.res.status = "endpoint_error";
    out.res.error = endpoint_error;
  } else if (out.sink_error.empty()) {
    StopWatcher watcher(&stop, &sink, pr.cancel);
    search::SearchContext ctx;
    ctx.llm = shared.llm;
    ctx.judge = shared.judge;
    ctx.evaluator = shared.evaluator;
    ctx.prompts = shared.prompts;
    ctx.hardware = shared.hardware;
    // The roofline's peaks are keyed by the GPU's name; none in CPU test mode.
    if (shared.versions.gpu.rfind("none", 0) != 0) ctx.gpu_name = shared.versions.gpu;
    ctx.sink = &sink;
    ctx.workspace = rd->root() / "work";
    ctx.opts = opts;
    // --tolerance calibrated: the run directory's calibration.json (mkevolve
    // calibrate DIR writes it; the pool adds each subproblem it lacks).
    ctx.opts.eval.calibration = eval::calibration_path(opts.eval.tolerance, eval::calibration_file(rd->root()));
    ctx.gate = &gate;
    ctx.stop = &stop;
    ctx.acct = &acct;
    out.res = search::run_method(ctx, pr.problem);
  } else {
    out.res.status = "error";
    out.res.error = out.sink_error;
  }
  status.finish();
  if (out.sink_error.empty()) out.sink_error = sink.error();

  const auto& best = out.res.best;
  if (best.correct && best.kernels.size() == best.topology.subproblems.size()) {
    problem::PackageContents man;
    man.pytorch_subkernels = best.pytorch;
    man.reused_from = best.reused;
    man.record = best.manifest();
    man.record.problem = pr.problem.name;
    man.record.problem_hash = pr.problem.hash;
    man.record.llm = shared.llm->spec();
    if (opts.eval.test_cpu) {
      man.record.test_mode = true;
      // Unknown, not false: test mode lets PyTorch stand-ins pass as kernels.
      man.pytorch_unknown = true;
      man.record.uses_pytorch = nlohmann::json(nullptr);
      man.record.test_mode_note = run::kTestModeNote;
    }
    auto st = problem::write_solution_package(rd->solution_dir(), best.topology, best.kernels, man);
    if (!st) out.solution_error = st.error();
    out.wrote_solution = st.ok();
  }
  std::vector<std::string> warnings;
  auto report = report::write_report(rd->root(), rd->root(), &warnings);
  if (!report) out.report_error = report.error();

  run::SummaryInfo info;
  info.problem_id = pr.problem_id.empty() ? pr.problem.name : pr.problem_id;
  info.problem_name = pr.problem.name;
  info.method = opts.method;
  info.test_mode = opts.eval.test_cpu;
  if (!out.sink_error.empty()) {
    info.status = "failed";
    info.error = "the run directory could not be written: " + out.sink_error;
  } else if (out.res.status == "interrupted" || stop.load()) {
    info.status = "interrupted";
  } else if (out.res.status == "endpoint_error" && pr.resumed) {
    // Nothing ran: the run stays as it was, unfinished and resumable.
    info.status = "interrupted";
    info.error = out.res.error;
  } else if (out.res.status == "error" || out.res.status == "problem_error" || out.res.status == "endpoint_error") {
    info.status = "failed";
    info.error = out.res.error;
  } else if (!out.solution_error.empty()) {
    info.status = "failed";
    info.error = "the solution could not be written: " + out.solution_error;
  }
  out.log = records::parse_log(rd->events());
  out.outcome = run::outcome_from_events(out.log, info);
  if (auto st = write_summary(rd->root(), out.outcome); !st) out.summary_error = st.error();
  return out;
}

}  // namespace mk::run
