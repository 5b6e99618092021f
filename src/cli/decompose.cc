// `mkevolve decompose`: LLMDecompose alone. Writes the verified decomposition
// (decomposed_problem.py and subkernel_problems/) to --out.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli/method_common.h"
#include "cli/args.h"
#include "cli/flags.h"
#include "cli/registry.h"
#include "records/events.h"
#include "util/fs.h"

namespace mk::cli {
namespace {

fs::path default_llm_cache() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "mkevolve" / "llm-cache";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "mkevolve" / "llm-cache";
  return {};
}

/// Prints topology and verification events as plain lines.
class PrintSink : public search::EventSink {
 public:
  explicit PrintSink(bool quiet) : quiet_(quiet) {}
  void emit(const records::Event& e) override {
    if (quiet_) return;
    std::visit(records::Visit{
                   [](const records::VerifyDecomposition& v) {
                     std::printf("decompose: sample %d %s\n", v.sample,
                                 v.ok ? "passed verification" : "failed verification");
                     for (const auto& f : v.failures) std::printf("  - %s\n", f.c_str());
                   },
                   [](const records::ReplyError& r) { std::printf("decompose: unusable reply: %s\n", r.error.c_str()); },
                   [](const records::LlmCall& c) {
                     if (!c.ok) std::printf("decompose: LLM call failed: %s\n", c.error.c_str());
                   },
                   [](const auto&) {}},
               e);
    std::fflush(stdout);
  }

 private:
  bool quiet_;
};

int decompose_cmd(int argc, char** argv) {
  CLI::App app{"Decomposes a KernelBench-format problem into subproblems with an LLM: K workers in parallel, each "
               "retrying on its own verification feedback; the first verified decomposition is written to DIR. If "
               "none verifies, DIR gets the fallback (the original module as the only subproblem). Verification "
               "runs on the GPU when one is visible, else on the CPU.",
               argv[0]};
  app.footer(help_footer({
                     "mkevolve decompose model.py --llm anthropic:claude-opus-4-5 --out decomp/",
                     "mkevolve decompose model.py --llm SPEC --out decomp/ --workers 2 --attempts 5"},
                    {
                     {0, "a verified decomposition was written"},
                     {1, "none verified (the fallback was written), or the LLM failed"},
                     {2, "bad usage or input"},
                     {3, "something missing on this machine: no LLM, an unreachable endpoint, no torch"}}));
  std::string problem_file, out;
  Flags flags;
  method::EnvFlags& env_flags = flags.env;
  search::SearchOptions& o = flags.search;
  bool no_cache = false, quiet = false;
  app.add_option("problem", problem_file, "the problem file (Model, get_inputs, get_init_inputs)")
      ->required()
      ->type_name("FILE");
  app.add_option("--out", out, "where to write decomposed_problem.py and subkernel_problems/")
      ->required()
      ->type_name("DIR");
  app.add_option("--workers", o.decompose_workers, "parallel decomposition workers K")->capture_default_str();
  app.add_option("--attempts", o.decompose_attempts, "tries per worker")->capture_default_str();
  app.add_flag("--no-cache", no_cache, "do not use the LLM response cache (~/.cache/mkevolve/llm-cache)");
  app.add_flag("-q,--quiet", quiet, "print only the result");
  add_flags(app, "decompose", flags);
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  if (o.decompose_workers < 1 || o.decompose_attempts < 1) {
    std::fprintf(stderr, "mkevolve decompose: --workers and --attempts must be positive\n");
    return kExitUsage;
  }
  auto problem = problem::Problem::load(problem_file);
  if (!problem) {
    std::fprintf(stderr, "mkevolve decompose: %s\n", problem.error().c_str());
    return kExitUsage;
  }
  auto env = std::make_unique<method::Env>();
  if (int rc = method::setup("decompose", env_flags, no_cache ? fs::path() : default_llm_cache(), {}, false, env.get()); rc)
    return rc;

  mk::TempDir work("mkevolve-decompose");
  PrintSink sink(quiet);
  search::AgentAccounting acct;
  agents::Gate gate(16);
  std::atomic<bool> stop{false};
  search::SearchContext ctx;
  ctx.llm = env->llm.get();
  ctx.evaluator = env->pool.get();
  ctx.prompts = &env->prompts;
  ctx.hardware = env->hardware;
  ctx.sink = &sink;
  ctx.workspace = work.path();
  o.eval.test_cpu = env->pool->gpus().empty();
  ctx.opts = o;
  ctx.gate = &gate;
  ctx.stop = &stop;
  ctx.acct = &acct;
  auto p = *problem;
  p.path = work.path() / "problem.py";
  if (auto st = write_file_atomic(p.path, p.source); !st) {
    std::fprintf(stderr, "mkevolve decompose: %s\n", st.error().c_str());
    return kExitFailure;
  }
  auto topo = search::llm_decompose(ctx, p, &sink);
  if (!ctx.fatal_message().empty()) {
    std::fprintf(stderr, "mkevolve decompose: %s\n", ctx.fatal_message().c_str());
    return kExitEnvironment;
  }
  if (auto st = topo.write_to(out); !st) {
    std::fprintf(stderr, "mkevolve decompose: %s\n", st.error().c_str());
    return kExitFailure;
  }
  if (auto st = write_file_atomic(fs::path(out) / "topology.json", topo.to_json().dump(2) + "\n"); !st) {
    std::fprintf(stderr, "mkevolve decompose: %s\n", st.error().c_str());
    return kExitFailure;
  }
  if (topo.monolithic) {
    std::printf("no decomposition passed verification after %d LLM calls; wrote the fallback (the original module "
                "as the only subproblem) to %s\n",
                acct.calls(), out.c_str());
    return kExitFailure;
  }
  std::printf("decomposed %s into %zu subproblems (%d LLM calls, %lld tokens; verified %s):\n", problem->name.c_str(),
              topo.subproblems.size(), acct.calls(), static_cast<long long>(acct.tokens()),
              o.eval.test_cpu ? "on the CPU" : "on the GPU");
  for (const auto& sp : topo.subproblems)
    std::printf("  %s/subkernel_problems/%s.py%s\n", out.c_str(), sp.name.c_str(),
                sp.multi_config ? "  (several instances: get_input_configs)" : "");
  std::printf("top level: %s/decomposed_problem.py\n", out.c_str());
  return kExitOk;
}

static Register reg_decompose("decompose", "split a problem into verified subproblems with an LLM (LLMDecompose)",
                    &decompose_cmd);

}  // namespace
}  // namespace mk::cli
