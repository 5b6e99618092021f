#include "run/run_in_directory.h"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "rundir/critical_path.h"
#include "records/events.h"
#include "rundir/interrupt.h"
#include "util/env.h"
#include "util/exit_code.h"
#include "util/fs.h"

namespace mk::run {

namespace {
// Among a test-mode run's last lines (docs/RUN-DIRECTORY.md).
constexpr const char* kTestModeLine =
    "TEST MODE (--test-cpu-unsafe): the kernels may be PyTorch stand-ins run on the CPU; they are not GPU kernels "
    "and the speedups mean nothing";
}  // namespace

int run_in_directory(RunRequest req, const EnvSetup& setup) {
  const std::string& cmd = req.cmd;
  auto say = [&](const std::string& m) { std::fprintf(stderr, "mkevolve %s: %s\n", cmd.c_str(), m.c_str()); };
  std::unique_ptr<rundir::RunDir> rd;
  problem::Problem problem;
  std::string problem_id;
  nlohmann::json llm_changes = nlohmann::json::array();
  if (req.resume) {
    auto r = run::open_for_resume(req.out);
    if (!r) {
      say(r.error());
      return kExitUsage;
    }
    // A resume talks to the LLM the run started with: the same spec, endpoint
    // and config file, unless a flag says the change is meant.
    llm_changes = nlohmann::json::array();
    struct Same {
      const char* flag;
      std::string* now;
      std::string then;
    };
    for (Same s : {Same{"--llm", &req.env.llm, r->llm}, Same{"--judge", &req.env.judge, r->judge},
                   Same{"--base-url", &req.env.base_url, r->base_url},
                   Same{"--config", &req.env.config_path, r->config_path}}) {
      if (s.now->empty()) {
        // The run kept a credential of this flag by fingerprint alone: the
        // resume reads it again from the environment (the variable that holds
        // the same value, fingerprint for fingerprint) or asks for the flag.
        if (s.then.find("[REDACTED sha256:") != std::string::npos) {
          std::string found;
          for (const char* var : std::string(s.flag) == "--base-url"
                                     ? std::vector<const char*>{"OPENAI_BASE_URL", "ANTHROPIC_BASE_URL",
                                                                "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"}
                                     : std::vector<const char*>{"MKEVOLVE_LLM"})
            if (const char* v = std::getenv(var); v && *v && redact_credentials(v) == s.then) found = v;
          if (found.empty()) {
            say(fmt::format("{}: the run was started with a credential inside {} ('{}'), which a run directory "
                            "never keeps: pass {} again with the same credential, or put it in {}",
                            req.out.string(), s.flag, s.then, s.flag,
                            std::string(s.flag) == "--base-url" ? "OPENAI_BASE_URL (or ANTHROPIC_BASE_URL)"
                                                                : "$MKEVOLVE_LLM"));
            return kExitUsage;
          }
          *s.now = found;
          continue;
        }
        *s.now = s.then;
        continue;
      }
      // Compared as recorded: a credential by its fingerprint.
      std::string now = redact_credentials(*s.now);
      if (std::string(s.flag) == "--config") now = fs::absolute(now).string();
      if (now != s.then && !req.env.allow_llm_change) {
        say(fmt::format("{}: the run was started with {} {}; this resume asks for {} {}. Leave {} out to continue "
                        "with the same one, or pass --allow-llm-change if the change is meant",
                        req.out.string(), s.flag, s.then.empty() ? "(none)" : "'" + s.then + "'", s.flag,
                        "'" + *s.now + "'", s.flag));
        return kExitUsage;
      }
      // Meant: the resume event records it, and the report names it.
      if (now != s.then) llm_changes.push_back({{"flag", s.flag}, {"from", s.then}, {"to", now}});
    }
    if (auto end = run::finished_run_end(r->dir->events(), r->dir->root())) {
      // Re-running a finished search would only replay it from the caches and
      // write solution/ again, undoing any `mkevolve swap` made since.
      bool correct = end->value("correct", false);
      std::string sol = end->value("solution_dir", "");
      // Under --events-json stdout carries only events: the run's recorded
      // run_end there, the words for a person on stderr.
      const bool events_only = req.mode == report::StatusLine::Mode::kEventsJson;
      FILE* human = events_only ? stderr : stdout;
      if (events_only)
        std::printf("%s\n", end->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
      std::fprintf(human, "%s already finished (result: %s)%s; nothing to resume.\n", req.out.string().c_str(),
                   end->value("result", "").c_str(),
                   sol.empty() ? "" : fmt::format("; solution in {}", (req.out / sol).string()).c_str());
      if (!sol.empty())
        std::fprintf(human, "solution: %s  (from solution.decomposed_solution import ModelNew)\n",
                     (req.out / sol).string().c_str());
      std::fprintf(human, "report: %s\n", (req.out / "report.md").string().c_str());
      if (r->test_cpu) std::fprintf(human, "%s\n", kTestModeLine);
      std::fprintf(human, "Start a new run with --out, or replace a subkernel with `mkevolve swap %s`.\n",
                   req.out.string().c_str());
      return correct ? kExitOk : kExitFailure;
    }
    rd = std::move(r->dir);
    req.opts = r->opts;
    if (r->test_cpu) req.env.test_cpu = true;
    problem = std::move(r->problem);
    problem_id = r->problem_id;
  } else {
    auto p = problem::Problem::load(req.problem_file);
    if (!p) {
      say(p.error());
      return kExitUsage;
    }
    problem = std::move(*p);
    for (const auto& sw : req.swap_with) {
      size_t eq = sw.find('=');
      if (eq == std::string::npos || eq == 0) {
        say(fmt::format("--swap-with {}: expected NAME=FILE", sw));
        return kExitUsage;
      }
      auto src = read_file(sw.substr(eq + 1));
      if (!src) {
        say(src.error());
        return kExitUsage;
      }
      req.opts.swap_with[sw.substr(0, eq)] = *src;
    }
    std::error_code ec;
    if (fs::exists(req.out, ec) && fs::is_directory(req.out, ec) && !fs::is_empty(req.out, ec)) {
      if (run::holds_no_progress(req.out)) {
        // A start that failed before any LLM call (an endpoint that was down,
        // say): nothing in it is worth keeping, so the same command works again.
        for (const auto& e : fs::directory_iterator(req.out, ec)) fs::remove_all(e.path(), ec);
        say(fmt::format("{}: taking it over: it holds only a start that failed before any LLM call",
                        req.out.string()));
      } else if (fs::exists(req.out / "config.json", ec)) {
        say(fmt::format("{} holds a run: continue it with `mkevolve run --resume {}`, or choose a new --out",
                        req.out.string(), rundir::shell_quote(req.out.string())));
        return kExitUsage;
      } else {
        say(fmt::format("{} already exists and is not empty, and holds no run: choose a new --out", req.out.string()));
        return kExitUsage;
      }
    }
  }
  req.opts.eval.test_cpu = req.env.test_cpu;
  req.opts.eval.gpu = -1;

  // A fresh run whose start fails (nothing ran, nothing was paid for) leaves
  // no half-made run directory behind: the same command works again.
  bool made_here = false, out_existed = false;
  std::unique_ptr<Env> env;
  auto remove_made = [&] {
    if (!made_here) return;
    rd.reset();   // its lock
    env.reset();  // the workers, whose logs are in DIR/eval
    std::error_code ec;
    if (out_existed) {
      for (const auto& e : fs::directory_iterator(req.out, ec)) fs::remove_all(e.path(), ec);
    } else {
      fs::remove_all(req.out, ec);
    }
  };
  env = std::make_unique<Env>();
  std::vector<std::string> missing;
  if (int rc = setup.llm(cmd, req.env, req.out / "cache" / "llm", env.get(), &missing); rc) return rc;
  if (!rd && missing.empty()) {
    // Created before the pool so that the workers' logs go to DIR/eval/.
    const bool existed = fs::exists(req.out);
    run::NewRun n;
    n.cmd = cmd;
    n.problem_file = req.problem_file;
    // Credentials inside a flag are recorded by fingerprint, never by value:
    // a resume reads them again from the flag, the environment or the config.
    n.llm = redact_credentials(req.env.llm.empty() ? env->llm->spec() : req.env.llm);
    n.judge = redact_credentials(req.env.judge);
    n.base_url = redact_credentials(req.env.base_url);
    if (!env->config->path().empty()) n.config_path = fs::absolute(env->config->path()).string();
    n.test_cpu = req.env.test_cpu;
    rundir::Versions v;
    v.mkevolve = MKEVOLVE_VERSION;
    made_here = true;
    out_existed = existed;
    const bool creatable = rundir::RunDir::creatable(req.out).ok();
    auto created = run::create_run(req.out, n, problem, req.opts, v);
    if (!created) {
      say(created.error());
      if (!creatable) return kExitUsage;  // the directory given cannot hold a run
      // The advice and the exit status follow the cause: a read-only or
      // foreign --out is the user's to change (2); a full disk the machine's (3).
      WriteFailure why = diagnose_write_failure(req.out, "--out");
      remove_made();
      say("no LLM call was made; " + why.advice);
      return exit_code(why.kind);
    }
    rd = std::move(*created);
    int rc = setup.pool(cmd, req.env, req.out / "cache" / "eval", req.out / "eval", true, env.get(), &missing);
    if (rc || !missing.empty()) {
      remove_made();
      return rc ? rc : report_missing(cmd, missing);
    }
    // The versions are known once a worker answered.
    auto vj = rundir::to_json(env->versions);
    vj["recorded"] = rd->versions().value("recorded", "");
    (void)rd->write_json("versions.json", vj);
  } else {
    if (int rc = setup.pool(cmd, req.env, req.out / "cache" / "eval", req.out / "eval", true, env.get(), &missing);
        rc)
      return rc;
    if (int rc = report_missing(cmd, missing); rc) return rc;
  }

  rundir::Interrupt::install();
  run::ProblemRun pr;
  pr.dir = rd.get();
  pr.problem = problem;
  pr.opts = req.opts;
  pr.resumed = req.resume;
  pr.llm_changes = llm_changes;
  pr.problem_id = problem_id;
  pr.mode = req.mode;
  auto out = run::run_problem(shared_of(*env), std::move(pr));
  rundir::Interrupt::uninstall();

  const auto& res = out.res;
  const auto& best = res.best;
  if (!out.solution_error.empty()) say("could not write the solution: " + out.solution_error);
  if (!out.summary_error.empty()) say("could not write summary.json: " + out.summary_error);
  if (!out.sink_error.empty() || !out.solution_error.empty() || !out.summary_error.empty()) {
    // A full disk, say: nothing recorded so far is lost, and the LLM replies
    // are cached, so the resume pays for none of them again. Without its
    // solution or its summary.json the run is not finished: the resume
    // writes them.
    if (!out.sink_error.empty()) say("stopped: the run directory could not be written: " + out.sink_error);
    say("after freeing space, continue with: " + rd->resume_command());
    return kExitEnvironment;
  }
  if (res.status == "interrupted" || rundir::Interrupt::requested()) {
    std::printf("interrupted; continue with:\n  %s\n", rd->resume_command().c_str());
    return kExitInterrupted;
  }
  if (res.status == "problem_error") {
    // Found before any LLM call: nothing was paid for, and a fresh run leaves nothing behind.
    say(res.error);
    if (req.resume) {
      say(fmt::format("no LLM call was made; fix the problem file and start a new run ({} records the check)",
                      rd->root().string()));
    } else {
      remove_made();
      say("no LLM call was made; fix the problem file, then run the same command again");
    }
    return kExitUsage;
  }
  if (res.status == "endpoint_error") {
    // No reachable LLM: a machine's problem (exit 3), never a method's outcome.
    say(res.error);
    if (req.resume) {
      say(fmt::format("no LLM call was made and nothing was charged; once the endpoint answers, continue with: {}",
                      rd->resume_command()));
    } else {
      remove_made();
      say("no LLM call was made; fix the endpoint or the key, then run the same command again");
    }
    return kExitEnvironment;
  }
  if (res.status == "error") {
    say(res.error);
    std::printf("the run stopped early; after fixing the cause, continue with:\n  %s\n", rd->resume_command().c_str());
    return kExitEnvironment;
  }
  if (req.mode == report::StatusLine::Mode::kEventsJson) {
    // stdout carries only events; the run_end event holds the result.
    return out.wrote_solution ? kExitOk : kExitFailure;
  }
  // A test-mode run's figures are not GPU kernels' (docs/RUN-DIRECTORY.md):
  // said where the results are, not only in the report.
  if (req.opts.eval.test_cpu)
    std::printf("%s\n", kTestModeLine);
  if (out.wrote_solution) {
    // The figures summary.json holds; unknown is n/a with the reason, never 0x.
    const auto& oc = out.outcome;
    std::string eager = oc.speedup_eager ? fmt::format(", {:.2f}x vs eager", *oc.speedup_eager)
                                         : std::string(", n/a vs eager (no eager baseline)");
    std::string vs_compile = oc.speedup_compile
                                 ? fmt::format("{:.3f}x vs torch.compile", *oc.speedup_compile)
                                 : std::string("n/a vs torch.compile (no torch.compile baseline on this machine)");
    std::printf("best: %s%s; %zu subkernel%s%s\n", vs_compile.c_str(), eager.c_str(),
                best.topology.subproblems.size(), best.topology.subproblems.size() == 1 ? "" : "s",
                best.pytorch.empty() ? "" : " (contains PyTorch subkernels: not pure Triton)");
    std::printf("solution: %s  (from solution.decomposed_solution import ModelNew)\n",
                rd->solution_dir().string().c_str());
  } else {
    std::printf("no correct kernel was found; every candidate is under %s\n", rd->candidates_dir().string().c_str());
  }
  const records::Log& events = out.log;  // as summary.json folded it
  // The final check's outcome, above all when the solution stands on its search-time verdict.
  if (auto fc = records::final_check_outcome(events); !fc.result.empty())
    std::printf("final check: %s\n", fc.text().c_str());
  if (out.report_error.empty()) std::printf("report: %s\n", (rd->root() / "report.md").string().c_str());
  else say("report: " + out.report_error);
  // Wall time against the LLM critical path (rundir/critical_path.h; summary.json's "time").
  std::printf("%s\n", rundir::time_account(events).line().c_str());
  return out.wrote_solution ? kExitOk : kExitFailure;
}

}  // namespace mk::run
