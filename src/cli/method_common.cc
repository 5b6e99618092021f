#include "cli/method_common.h"

#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "agents/agents.h"
#include "cli/registry.h"
#include "eval/gpus.h"
#include "llm/factory.h"
#include "problem/compose.h"
#include "report/report.h"
#include "run/events.h"
#include "run/interrupt.h"
#include "util/fs.h"

namespace mk::cli::method {

void add_env_flags(CLI::App& app, EnvFlags& f, bool with_judge) {
  app.add_option("--llm", f.llm,
                 "LLM provider spec: openai:MODEL, anthropic:MODEL, bedrock:MODEL, exec:COMMAND, replay:FILE, or a "
                 "[llm.providers.NAME] alias (default: llm.provider in the config)");
  if (with_judge)
    app.add_option("--judge", f.judge,
                   "LLM cheat judge (a provider spec): reviews candidates that passed every programmatic check "
                   "before they may enter a beam; its tokens are counted");
  app.add_option("--base-url", f.base_url, "endpoint override for HTTP providers");
  app.add_option("--llm-concurrency", f.llm_concurrency, "LLM requests in flight per provider (default: config, else 8)");
  app.add_option("--record", f.record, "also append every LLM call to FILE in the replay format");
  app.add_option("--config", f.config_path, "configuration file (default: ./mkevolve.toml, ~/.config/mkevolve/config.toml)");
  app.add_option("--python", f.python, "the worker's Python (default: $MKEVOLVE_PYTHON, config 'python', python3)");
  app.add_option("--gpu", f.gpu, "use only this visible GPU (index); default: all visible GPUs");
  app.add_option("--slots-per-gpu", f.slots_per_gpu, "candidates evaluated at once per GPU")->capture_default_str();
  // CI only: the worker's CPU test mode (torch-only candidates, no timing that
  // means anything). Hidden from --help on purpose.
  app.add_flag("--test-cpu-unsafe", f.test_cpu)->group("");
}

void add_eval_flags(CLI::App& app, eval::EvalOptions& o) {
  app.add_option("--trials", o.trials, "correctness trials per candidate, each with fresh random inputs")
      ->capture_default_str();
  app.add_option("--perf-trials", o.perf_trials, "timed calls per candidate")->capture_default_str();
  app.add_option("--warmup", o.warmup, "warm-up calls before timing")->capture_default_str();
  app.add_option("--timeout", o.timeout_s, "hard deadline per candidate, seconds")->capture_default_str();
  app.add_option("--atol", o.atol, "absolute tolerance")->capture_default_str();
  app.add_option("--rtol", o.rtol, "relative tolerance")->capture_default_str();
  app.add_option("--seed", o.seed, "seed for inputs and weights")->capture_default_str();
}

int setup(const std::string& cmd, const EnvFlags& flags, const fs::path& llm_cache, const fs::path& eval_cache,
          bool need_gpu, Env* env) {
  auto say = [&](const std::string& m) { std::fprintf(stderr, "mkevolve %s: %s\n", cmd.c_str(), m.c_str()); };
  auto cfg = Config::discover(flags.config_path);
  if (!cfg) {
    say(cfg.error());
    return kExitUsage;
  }
  env->config = std::move(*cfg);
  auto prompts = agents::Prompts::load_default();
  if (!prompts) {
    say(prompts.error());
    return kExitEnvironment;
  }
  env->prompts = std::move(*prompts);

  std::vector<std::string> missing;
  // The LLM.
  std::string spec = flags.llm;
  if (spec.empty()) {
    auto s = env->config->get_string("llm.provider", "");
    if (!s) {
      say(s.error());
      return kExitUsage;
    }
    spec = *s;
  }
  auto make = [&](const std::string& which, const std::string& s,
                  std::shared_ptr<llm::Provider>* out) -> int {
    if (s.empty()) {
      missing.push_back(fmt::format("no LLM: pass {} SPEC (e.g. anthropic:claude-opus-4-5, openai:MODEL, replay:FILE) "
                                    "or set llm.provider in mkevolve.toml",
                                    which));
      return 0;
    }
    llm::ProviderOptions o;
    o.spec = s;
    o.base_url = flags.base_url;
    o.concurrency = flags.llm_concurrency;
    o.cache_dir = llm_cache;
    o.record_path = flags.record;
    o.accounting = &env->acc;
    auto p = llm::make_provider(o, &*env->config);
    if (!p) {
      if (p.error().find("unknown provider") != std::string::npos) {
        say(p.error());
        return kExitUsage;
      }
      missing.push_back(fmt::format("{} {}: {}", which, s, p.error()));
      return 0;
    }
    *out = std::move(*p);
    return 0;
  };
  if (int rc = make("--llm", spec, &env->llm); rc) return rc;
  if (!flags.judge.empty())
    if (int rc = make("--judge", flags.judge, &env->judge); rc) return rc;

  // The evaluator.
  auto cfg_python = env->config->get_string("python", "");
  if (!cfg_python) {
    say(cfg_python.error());
    return kExitUsage;
  }
  eval::PoolOptions po;
  po.python = eval::resolve_python(flags.python, *cfg_python);
  po.slots_per_gpu = std::max(1, flags.slots_per_gpu);
  po.only_gpu = flags.gpu;
  po.cache_dir = eval_cache;
  if (flags.test_cpu) {
    po.test_mode = true;
    po.gpus = std::vector<eval::Gpu>{};
    po.only_gpu = -1;
  } else {
    auto gpus = eval::discover_gpus();
    if (gpus.empty()) {
      if (need_gpu) {
        missing.push_back(
            "no CUDA GPU is visible (nvidia-smi lists none, or CUDA_VISIBLE_DEVICES hides them): candidate "
            "kernels are verified and timed on a GPU");
      } else {
        po.test_mode = true;  // decomposition checks run on the CPU
        po.gpus = std::vector<eval::Gpu>{};
        po.only_gpu = -1;
      }
    } else {
      po.gpus = gpus;
    }
  }
  if (missing.empty()) {
    auto pool = eval::WorkerPool::create(po);
    if (!pool) {
      if (pool.error().rfind("--gpu", 0) == 0) {
        say(pool.error());
        return kExitUsage;
      }
      missing.push_back(pool.error());
    } else if (auto st = (*pool)->probe(); !st) {
      missing.push_back(st.error());
    } else {
      env->pool = std::move(*pool);
    }
  }
  if (!missing.empty()) {
    for (const auto& m : missing) say("missing: " + m);
    return kExitEnvironment;
  }
  env->hardware = agents::hardware_text(env->pool->hardware_info());
  auto hello = env->pool->hello();
  auto str = [&](const char* k) {
    return hello.is_object() && hello.contains(k) && hello[k].is_string() ? hello[k].get<std::string>() : std::string();
  };
  env->versions.mkevolve = MKEVOLVE_VERSION;
  env->versions.python = str("python");
  env->versions.torch = str("torch");
  env->versions.triton = str("triton");
  env->versions.gpu = env->pool->gpus().empty() ? "none (CPU test mode)" : env->pool->gpus()[0].name;
  env->versions.tf32 = false;
  return kExitOk;
}

// ---- RunSink -------------------------------------------------------------------

RunSink::RunSink(run::RunDir* dir, report::StatusLine* status, std::vector<nlohmann::json> already_logged)
    : dir_(dir), status_(status) {
  for (auto& e : already_logged) {
    std::string t = e.value("type", "");
    if (t == "resume" || t == "run_end") continue;
    replay_.push_back(std::move(e));
  }
  replaying_ = !replay_.empty();
}

void RunSink::emit(const nlohmann::json& e) {
  std::lock_guard<std::mutex> lk(mu_);
  if (replaying_ && next_ < replay_.size()) {
    // A resumed run re-executes from the start with cached LLM replies and
    // evaluations; the events the log already holds are not written twice.
    const auto& old = replay_[next_];
    auto same = [&](const char* k) { return old.value(k, nlohmann::json()) == e.value(k, nlohmann::json()); };
    if (same("type") && same("agent") && same("task") && same("candidate") && same("iteration") && same("sample")) {
      ++next_;
      ++skipped_;
      if (status_) status_->on_event(e);
      return;
    }
    replaying_ = false;
    if (status_)
      status_->message(fmt::format("resume: the run diverged from its log after {} events (different LLM replies "
                                   "or evaluations); logging from here",
                                   next_));
  }
  replaying_ = false;
  if (auto st = dir_->log_event(e); !st && error_.empty()) error_ = st.error();
}

void RunSink::progress(const nlohmann::json& e) {
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
  auto st = dir_->write_json(run::RunDir::topology_rel(iteration), t.to_json());
  if (!st) {
    std::lock_guard<std::mutex> lk(mu_);
    if (error_.empty()) error_ = st.error();
  }
}

std::string RunSink::error() const {
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

StopWatcher::StopWatcher(std::atomic<bool>* stop, const RunSink* sink) : stop_(stop), sink_(sink) {
  th_ = std::thread([this] {
    while (!done_) {
      if (run::Interrupt::requested() || (sink_ && !sink_->error().empty())) stop_->store(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

StopWatcher::~StopWatcher() {
  done_ = true;
  th_.join();
}

// ---- run_in_directory ----------------------------------------------------------------

int run_in_directory(RunRequest req) {
  const std::string& cmd = req.cmd;
  auto say = [&](const std::string& m) { std::fprintf(stderr, "mkevolve %s: %s\n", cmd.c_str(), m.c_str()); };
  std::unique_ptr<run::RunDir> rd;
  problem::Problem problem;
  nlohmann::json prior_config;
  if (req.resume) {
    auto opened = run::RunDir::open(req.out);
    if (!opened) {
      say(opened.error());
      return kExitUsage;
    }
    rd = std::move(*opened);
    prior_config = rd->config();
    auto opts = search::options_from_json(prior_config.value("options", nlohmann::json::object()));
    if (!opts) {
      say(fmt::format("{}/config.json: {}", req.out.string(), opts.error()));
      return kExitUsage;
    }
    req.opts = *opts;
    if (req.env.llm.empty()) req.env.llm = prior_config.value("llm", "");
    if (req.env.judge.empty()) req.env.judge = prior_config.value("judge", "");
    if (prior_config.value("test_cpu", false)) req.env.test_cpu = true;
    auto p = problem::Problem::load(rd->root() / "problem.py");
    if (!p) {
      say(p.error());
      return kExitUsage;
    }
    problem = std::move(*p);
    problem.name = prior_config.value("problem", problem.name);
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
    if (fs::exists(req.out, ec) && !fs::is_empty(req.out, ec)) {
      say(fmt::format("{} already exists and is not empty: choose a new --out, or continue it with --resume {}",
                      req.out.string(), req.out.string()));
      return kExitUsage;
    }
  }
  req.opts.eval.test_cpu = req.env.test_cpu;
  req.opts.eval.gpu = -1;

  auto env = std::make_unique<Env>();
  if (int rc = setup(cmd, req.env, req.out / "cache" / "llm", req.out / "cache" / "eval", true, env.get()); rc)
    return rc;

  if (!rd) {
    nlohmann::json config = {{"command", cmd},
                             {"problem", problem.name},
                             {"problem_file", fs::absolute(req.problem_file).string()},
                             {"problem_hash", problem.hash},
                             {"llm", req.env.llm.empty() ? env->llm->spec() : req.env.llm},
                             {"judge", req.env.judge},
                             {"test_cpu", req.env.test_cpu},
                             {"options", search::to_json(req.opts)}};
    auto created = run::RunDir::create(req.out, config, env->versions);
    if (!created) {
      say(created.error());
      return kExitUsage;
    }
    rd = std::move(*created);
    if (auto st = rd->write_text("problem.py", problem.source); !st) {
      say(st.error());
      return kExitFailure;
    }
  }
  std::vector<nlohmann::json> prior = req.resume ? rd->events() : std::vector<nlohmann::json>{};

  report::StatusLine::Options so;
  so.mode = req.mode;
  so.iterations = req.opts.iterations;
  so.max_calls = req.opts.total_budget() + req.opts.postfuse;
  report::StatusLine status(stdout, so);
  for (const auto& n : rd->notices()) status.message(n);
  rd->add_listener([&status](const nlohmann::json& e) { status.on_event(e); });
  if (req.resume) {
    if (auto st = rd->log_event(run::events::resume(static_cast<int64_t>(prior.size()), rd->notices())); !st) {
      say(st.error());
      return kExitFailure;
    }
  }
  status.message(fmt::format("{} {} on {} with {}; run directory {}", req.resume ? "resuming" : "starting",
                             req.opts.method, problem.name, env->llm->spec(), rd->root().string()));

  RunSink sink(rd.get(), &status, prior);
  run::Interrupt::install();
  std::atomic<bool> stop{false};
  search::Accounting acct;
  agents::Gate gate(64);
  search::RunResult res;
  {
    StopWatcher watcher(&stop, &sink);
    search::SearchContext ctx;
    ctx.llm = env->llm.get();
    ctx.judge = env->judge.get();
    ctx.evaluator = env->pool.get();
    ctx.prompts = &env->prompts;
    ctx.hardware = env->hardware;
    ctx.sink = &sink;
    ctx.workspace = rd->root() / "work";
    ctx.opts = req.opts;
    ctx.gate = &gate;
    ctx.stop = &stop;
    ctx.acct = &acct;
    res = search::run_method(ctx, problem);
  }
  status.finish();
  run::Interrupt::uninstall();

  const auto& best = res.best;
  bool wrote_solution = false;
  if (best.correct && best.kernels.size() == best.topology.subproblems.size()) {
    problem::SolutionManifest man;
    man.pytorch_subkernels = best.pytorch;
    man.extra = best.to_json();
    man.extra["problem"] = problem.name;
    man.extra["problem_hash"] = problem.hash;
    man.extra["llm"] = env->llm->spec();
    auto st = problem::write_solution_package(rd->solution_dir(), best.topology, best.kernels, man);
    if (!st) say("could not write the solution: " + st.error());
    wrote_solution = st.ok();
  }
  std::vector<std::string> warnings;
  auto report = report::write_report(rd->root(), rd->root(), &warnings);

  if (!sink.error().empty()) say("stopped: the run directory could not be written: " + sink.error());
  if (res.status == "interrupted" || run::Interrupt::requested()) {
    std::printf("interrupted; continue with:\n  %s\n", rd->resume_command().c_str());
    return kExitInterrupted;
  }
  if (res.status == "error") {
    say(res.error);
    std::printf("the run stopped early; after fixing the cause, continue with:\n  %s\n", rd->resume_command().c_str());
    return kExitEnvironment;
  }
  if (req.mode == report::StatusLine::Mode::kEventsJson) {
    // stdout carries only events; the run_end event holds the result.
    if (!sink.error().empty()) return kExitFailure;
    return wrote_solution ? kExitOk : kExitFailure;
  }
  if (wrote_solution) {
    std::string eager = best.e2e.speedup_eager > 0 ? fmt::format(", {:.2f}x vs eager", best.e2e.speedup_eager) : "";
    std::printf("best: %.3fx vs torch.compile%s; %zu subkernel%s%s\n", best.speedup, eager.c_str(),
                best.topology.subproblems.size(), best.topology.subproblems.size() == 1 ? "" : "s",
                best.pytorch.empty() ? "" : " (contains PyTorch subkernels: not pure Triton)");
    std::printf("solution: %s  (from solution.decomposed_solution import ModelNew)\n",
                rd->solution_dir().string().c_str());
  } else {
    std::printf("no correct kernel was found; every candidate is under %s\n", rd->candidates_dir().string().c_str());
  }
  if (report) std::printf("report: %s\n", (rd->root() / "report.md").string().c_str());
  else say("report: " + report.error());
  if (!sink.error().empty()) return kExitFailure;
  return wrote_solution ? kExitOk : kExitFailure;
}

}  // namespace mk::cli::method
