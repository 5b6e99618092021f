#include "bench/runner.h"

#include <chrono>

#include <exception>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "run/summary_json.h"
#include "rundir/interrupt.h"
#include "util/fs.h"
#include "util/strings.h"

namespace mk::bench {

fs::path problem_dir(const SuiteOptions& o, const SuiteProblem& p) { return o.out / o.opts.method / p.id(); }

Action plan(const fs::path& dir) {
  std::error_code ec;
  if (run::summary_says_finished(dir)) return Action::kSkip;
  if (fs::exists(dir / "config.json", ec)) return Action::kResume;
  return Action::kCreate;
}

namespace {

// "1.23x", or "n/a" where no baseline was measured (never 0.00x).
std::string speedup_text(const std::optional<double>& x) { return x ? fmt::format("{:.2f}x", *x) : "n/a"; }

run::Outcome failed_outcome(const SuiteProblem& p, const std::string& method, const std::string& error) {
  run::Outcome o;
  o.problem_id = p.id();
  o.problem_name = p.name;
  o.method = method;
  o.status = "failed";
  o.error = error;
  return o;
}

// One problem, start to end; returns its outcome (also in DIR/summary.json).
run::Outcome run_one(const run::Shared& shared, const SuiteProblem& p, const SuiteOptions& o, Action action) {
  const fs::path dir = problem_dir(o, p);
  std::error_code ec;
  std::unique_ptr<rundir::RunDir> rd;
  run::ProblemRun pr;
  pr.problem_id = p.id();
  pr.mode = o.mode;
  pr.cancel = o.cancel;
  if (action == Action::kResume) {
    auto r = run::open_for_resume(dir);
    if (!r) return failed_outcome(p, o.opts.method, r.error());
    rd = std::move(r->dir);
    pr.problem = std::move(r->problem);
    pr.opts = r->opts;
    pr.resumed = true;
  } else {
    auto prob = problem::Problem::load(p.path);
    if (!prob) return failed_outcome(p, o.opts.method, prob.error());
    fs::remove(dir / "summary.json", ec);  // of an earlier failed attempt that never created the run
    run::NewRun n;
    n.cmd = o.cmd;
    n.problem_file = p.path;
    n.llm = o.llm.empty() ? shared.llm->spec() : o.llm;
    n.judge = o.judge;
    n.test_cpu = o.test_cpu;
    n.problem_id = p.id();
    auto created = run::create_run(dir, n, *prob, o.opts, shared.versions);
    if (!created) return failed_outcome(p, o.opts.method, created.error());
    rd = std::move(*created);
    pr.problem = std::move(*prob);
    pr.opts = o.opts;
  }
  pr.opts.eval.test_cpu = o.test_cpu;
  pr.opts.eval.gpu = -1;
  pr.dir = rd.get();
  auto res = run::run_problem(shared, std::move(pr));
  if (!res.summary_error.empty()) {
    auto out = res.outcome;
    out.status = "failed";
    out.error = "summary.json could not be written: " + res.summary_error;
    return out;
  }
  return res.outcome;
}

}  // namespace

SuiteRun run_suite(const run::Shared& shared, const std::vector<SuiteProblem>& problems, const SuiteOptions& o) {
  SuiteRun sr;
  sr.outcomes.resize(problems.size());
  std::mutex mu;
  std::atomic<size_t> next{0};
  int done = 0, ran = 0;
  const int total = static_cast<int>(problems.size());
  const auto started = std::chrono::steady_clock::now();
  // Elapsed wall time, and an ETA from the problems this call ran (skipped ones
  // take no time): wall time per finished run, times what is left.
  auto timing = [&] {
    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::string t = "elapsed " + human_duration(el);
    if (ran > 0 && done < total) t += ", ETA " + human_duration(el / ran * (total - done));
    return t;
  };
  auto log = [&](const std::string& line) {
    if (o.log) o.log(line);
  };
  auto stopped = [&] { return rundir::Interrupt::requested() || (o.cancel && o.cancel->load()); };

  auto worker = [&] {
    for (;;) {
      size_t i = next.fetch_add(1);
      if (i >= problems.size()) return;
      const auto& p = problems[i];
      if (stopped()) {
        run::Outcome m;
        m.problem_id = p.id();
        m.problem_name = p.name;
        m.method = o.opts.method;
        m.status = "missing";
        std::lock_guard<std::mutex> lk(mu);
        sr.outcomes[i] = m;
        ++sr.not_started;
        continue;
      }
      const fs::path dir = problem_dir(o, p);
      Action action = plan(dir);
      if (action == Action::kSkip) {
        run::Outcome out;
        auto text = read_file(dir / "summary.json");
        auto parsed = text ? run::outcome_from_summary(nlohmann::json::parse(*text, nullptr, false))
                           : Result<run::Outcome>(Error{text.error()});
        out = parsed ? *parsed : failed_outcome(p, o.opts.method, parsed.error());
        std::lock_guard<std::mutex> lk(mu);
        sr.outcomes[i] = out;
        ++sr.skipped;
        ++done;
        log(fmt::format("[{}/{}] {}: already finished ({}), skipped", done, total, p.id(),
                        out.correct ? "correct, " + speedup_text(out.speedup_compile) : "incorrect"));
        continue;
      }
      {
        std::lock_guard<std::mutex> lk(mu);
        log(fmt::format("[start] {} ({} {})", p.id(), action == Action::kResume ? "resuming" : "new",
                        dir.string()));
      }
      run::Outcome out;
      try {
        out = run_one(shared, p, o, action);
      } catch (const std::exception& e) {
        out = failed_outcome(p, o.opts.method, std::string("internal error: ") + e.what());
      } catch (...) {
        out = failed_outcome(p, o.opts.method, "internal error (unknown exception)");
      }
      if (out.status == "failed") {
        // A failure before the run existed (broken problem file, directory not
        // writable) still leaves its summary; a run's own summary is already there.
        std::error_code ec;
        fs::create_directories(dir, ec);
        (void)run::write_summary(dir, out);
      }
      std::lock_guard<std::mutex> lk(mu);
      sr.outcomes[i] = out;
      if (action == Action::kResume) ++sr.resumed;
      else ++sr.created;
      if (out.status == "failed") ++sr.failed;
      ++done;
      ++ran;
      std::string what = out.status != "finished"
                             ? out.status + (out.error.empty() ? "" : ": " + out.error)
                             : out.correct ? "correct, " + speedup_text(out.speedup_compile) + " vs torch.compile"
                                           : "no correct kernel";
      log(fmt::format("[{}/{}] {}: {} ({} LLM calls, {} tokens; {})", done, total, p.id(), what, out.calls,
                      out.tokens, timing()));
    }
  };
  const int jobs = std::max(1, std::min<int>(o.jobs, std::max<int>(1, total)));
  std::vector<std::thread> threads;
  for (int j = 1; j < jobs; ++j) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  return sr;
}

}  // namespace mk::bench
