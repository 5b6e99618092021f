#include "cli/method_common.h"

#include <cstdio>

#include <fmt/format.h>

#include "agents/agents.h"
#include "cli/args.h"
#include "cli/registry.h"
#include "eval/gpus.h"
#include "llm/factory.h"
#include "rundir/interrupt.h"

namespace mk::cli::method {

std::string search_options_error(const search::SearchOptions& o) {
  if (o.iterations < 1 || o.calls_per_iter < 1 || o.beam_width < 1 || o.expansion < 1 || o.refine_every < 1 ||
      o.decompose_workers < 1 || o.decompose_attempts < 1 || o.refine_attempts < 1 || o.postfuse < 0)
    return "--iterations, --calls-per-iter, --beam-width, --expansion, --refine-every and the attempt counts "
           "must be positive; --postfuse not negative";
  if (o.swap_tau && *o.swap_tau <= 0) return "--swap TAU must be positive";
  return tolerance_error(o.eval);
}

int setup_llm(const std::string& cmd, const EnvFlags& flags, const fs::path& llm_cache, Env* env,
              std::vector<std::string>* missing) {
  auto say = [&](const std::string& m) { std::fprintf(stderr, "mkevolve %s: %s\n", cmd.c_str(), m.c_str()); };
  auto cfg = discover_config(cmd, flags.config_path);
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

  // --llm (on a resume, the run's own), then $MKEVOLVE_LLM, then llm.provider,
  // then an API key's default model (said on stderr).
  auto resolved = llm::resolve_spec(flags.llm, nullptr, *env->config);
  if (!resolved) {
    say(resolved.error());
    return kExitUsage;
  }
  const std::string spec = resolved->spec;
  if (!resolved->chosen_because.empty())
    say(fmt::format("LLM: {} ({}; choose another with --llm)", spec, resolved->chosen_because));
  auto make = [&](const std::string& which, const std::string& s,
                  std::shared_ptr<llm::Provider>* out) -> int {
    if (s.empty()) {
      missing->push_back(llm::no_llm_message(which));
      return 0;
    }
    llm::ProviderOptions o;
    o.spec = s;
    o.base_url = flags.base_url;
    o.concurrency = flags.llm_concurrency;
    o.cache_dir = llm_cache;
    o.record_path = flags.record;
    o.accounting = &env->acc;
    // Ctrl-C / SIGTERM aborts HTTP requests in flight instead of waiting them out.
    o.cancelled = [] { return rundir::Interrupt::requested(); };
    auto p = llm::make_provider(o, &*env->config);
    if (!p) {
      if (p.error_kind() != ErrorKind::kMissing && p.error_kind() != ErrorKind::kOther) {
        say(p.error());  // a misspelt or incomplete spec: not "missing"
        return exit_code(p.error_kind());
      }
      missing->push_back(fmt::format("{} {}: {}", which, s, p.error()));
      return 0;
    }
    *out = std::move(*p);
    return 0;
  };
  if (int rc = make("--llm", spec, &env->llm); rc) return rc;
  if (!flags.judge.empty())
    if (int rc = make("--judge", flags.judge, &env->judge); rc) return rc;
  return 0;
}

int setup_pool(const std::string& cmd, const EnvFlags& flags, const fs::path& eval_cache, const fs::path& work_dir,
               bool need_gpu, Env* env, std::vector<std::string>* missing) {
  auto say = [&](const std::string& m) { std::fprintf(stderr, "mkevolve %s: %s\n", cmd.c_str(), m.c_str()); };
  if (!env->config) {
    auto cfg = discover_config(cmd, flags.config_path);
    if (!cfg) {
      say(cfg.error());
      return kExitUsage;
    }
    env->config = std::move(*cfg);
  }
  auto python = worker_python(flags.python, *env->config);
  if (!python) {
    say(python.error());
    return kExitUsage;
  }
  eval::PoolOptions po = pool_options(flags, *python);
  po.start_servers = true;  // a search fills every slot at its first round
  po.cache_dir = eval_cache;
  po.work_dir = work_dir;
  if (!flags.test_cpu) {
    auto gpus = eval::discover_gpus();
    if (gpus.empty()) {
      if (need_gpu) {
        missing->push_back(
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
  if (!missing->empty()) return 0;  // don't start workers when the run cannot go ahead anyway
  auto pool = eval::WorkerPool::create(po);
  if (!pool) {
    if (pool.error_kind() != ErrorKind::kMissing) {  // --gpu past the visible GPUs, a misspelt setting
      say(pool.error());
      return exit_code(pool.error_kind());
    }
    missing->push_back(pool.error());
    return 0;
  }
  if (auto st = (*pool)->probe(); !st) {
    missing->push_back(st.error());
    return 0;
  }
  env->pool = std::move(*pool);
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
  return 0;
}

int setup(const std::string& cmd, const EnvFlags& flags, const fs::path& llm_cache, const fs::path& eval_cache,
          bool need_gpu, Env* env, const fs::path& work_dir) {
  std::vector<std::string> missing;
  if (int rc = setup_llm(cmd, flags, llm_cache, env, &missing); rc) return rc;
  if (int rc = setup_pool(cmd, flags, eval_cache, work_dir, need_gpu, env, &missing); rc) return rc;
  return report_missing(cmd, missing);
}

run::EnvSetup env_setup() { return {setup_llm, setup_pool}; }

}  // namespace mk::cli::method
