// `mkevolve bench`: a method over a suite of problems, each a resumable run in
// OUT/<method>/<problem-id>/, up to --jobs at a time, sharing one worker pool
// (every evaluation bound to one GPU slot) and one LLM provider stack (its
// concurrency cap). --shard I/N runs a deterministic slice (Slurm job arrays).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <mutex>

#include <fmt/format.h>

#include "bench/runner.h"
#include "bench/suite.h"
#include "cli/method_common.h"
#include "cli/args.h"
#include "cli/flags.h"
#include "cli/registry.h"
#include "rundir/interrupt.h"
#include "util/fs.h"

namespace mk::cli {
namespace {

int bench_cmd(int argc, char** argv) {
  CLI::App app{"Runs a method over a suite of KernelBench-format problems (files, directories, or a KernelBench "
               "levelN folder). Each problem is a resumable run in OUT/<method>/<problem-id>/ (id: "
               "[level-]name-<hash>): re-running the same command skips finished problems and resumes the others. "
               "Up to --jobs problems run at once, sharing the GPUs and the LLM. --shard I/N runs problems "
               "I, I+N, I+2N, ... of the sorted suite, so N machines (a Slurm array) can share one --out. "
               "Summarize with 'mkevolve bench-report OUT'.",
               argv[0]};
  app.footer(help_footer({
                     "mkevolve bench KernelBench/level2 --llm anthropic:claude-opus-4-5 --out bench/ --jobs 4",
                     "mkevolve bench KernelBench/level2 --method beam --llm SPEC --out bench/ --shard 0/8",
                     "mkevolve bench-report bench/"},
                    {
                     {0, "the suite ran (some problems may be incorrect or failed: see their summary.json)"},
                     {2, "bad usage or input"},
                     {3, "something missing on this machine: no GPU, no torch, no LLM, an unreachable endpoint"},
                     {130, "interrupted (the same command again resumes it)"}}));
  std::vector<std::string> problems, swap_with;
  std::string out, shard_text = "0/1";
  int jobs = 1;
  bool quiet = false;
  Flags flags;
  method::EnvFlags& env_flags = flags.env;
  search::SearchOptions& o = flags.search;
  std::optional<OptionGroup> group;
  group.emplace(app, "Input and output");
  app.add_option("problems", problems, "problem files or directories (searched recursively for *.py with a Model)")
      ->required()
      ->type_name("PATH");
  app.add_option("--out", out, "the bench directory (shared by shards and methods)")->required()->type_name("DIR");
  app.add_option("--jobs,-j", jobs, "problems run at once")->capture_default_str();
  app.add_option("--shard", shard_text, "I/N: run only the problems at positions I, I+N, ... (0 <= I < N)")
      ->capture_default_str()
      ->type_name("I/N");
  app.add_flag("-q,--quiet", quiet, "print only the final table");
  group.reset();
  flags.search.eval.shapes = "check";  // the returned solution is also checked at shape variants
  add_flags(app, "bench", flags);
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  auto usage = [](const std::string& m) {
    std::fprintf(stderr, "mkevolve bench: %s\n", m.c_str());
    return kExitUsage;
  };
  if (jobs < 1) return usage("--jobs must be at least 1");
  if (std::string err = method::search_options_error(o); !err.empty()) return usage(err);
  auto shard = bench::parse_shard(shard_text);
  if (!shard) return usage(shard.error());
  std::vector<fs::path> args(problems.begin(), problems.end());
  std::vector<std::string> skipped;
  auto suite = bench::discover_problems(args, &skipped);
  for (const auto& sk : skipped) std::fprintf(stderr, "mkevolve bench: skipped %s\n", sk.c_str());
  if (!suite) return usage(suite.error());
  if (suite->empty()) return usage("no problems found (files with 'class Model') under the given paths");
  auto mine = bench::select_shard(*suite, *shard);
  o.eval.test_cpu = env_flags.test_cpu;
  o.eval.gpu = -1;

  const fs::path root = out;
  std::error_code ec;
  const bool root_existed = fs::exists(root, ec);
  fs::create_directories(root, ec);
  if (ec) {
    std::fprintf(stderr, "mkevolve bench: cannot create %s: %s\n", root.string().c_str(), ec.message().c_str());
    return kExitUsage;
  }
  auto announce = [&] {
    std::printf("bench: %s on %zu of %zu problems (shard %d/%d), %d at a time; results in %s\n", o.method.c_str(),
                mine.size(), suite->size(), shard->index, shard->count, jobs, root.string().c_str());
    std::fflush(stdout);
  };
  if (mine.empty()) {
    announce();
    std::printf("bench: this shard holds no problems; nothing to do\n");
    return kExitOk;
  }

  // One provider stack and one worker pool for every problem; caches shared by all
  // runs of the bench directory (content-addressed: a resume never pays twice).
  // Each shard's workers keep their logs in eval/shard-I-of-N (shards may share OUT).
  auto env = std::make_unique<method::Env>();
  const fs::path work = root / "eval" / fmt::format("shard-{}-of-{}", shard->index, shard->count);
  if (int rc = method::setup("bench", env_flags, root / "cache" / "llm", root / "cache" / "eval", true, env.get(),
                             work);
      rc) {
    // Nothing started: leave no output folder behind (only one this call made).
    env.reset();
    if (!root_existed) fs::remove_all(root, ec);
    return rc;
  }
  announce();

  rundir::Interrupt::install();
  std::mutex print_mu;
  bench::SuiteOptions so;
  so.out = root;
  so.opts = o;
  so.llm = env_flags.llm.empty() ? env->llm->spec() : env_flags.llm;
  so.judge = env_flags.judge;
  so.test_cpu = env_flags.test_cpu;
  so.jobs = jobs;
  so.mode = report::StatusLine::Mode::kQuiet;
  if (!quiet)
    so.log = [&](const std::string& line) {
      std::lock_guard<std::mutex> lk(print_mu);
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    };
  auto sr = bench::run_suite(method::shared_of(*env), mine, so);
  const bool interrupted = rundir::Interrupt::requested();
  rundir::Interrupt::uninstall();

  std::printf("\n%-40s %-11s %-8s %9s %7s %10s\n", "problem", "status", "correct", "speedup", "calls", "tokens");
  int correct = 0;
  for (const auto& x : sr.outcomes) {
    if (x.correct) ++correct;
    std::printf("%-40s %-11s %-8s %9s %7lld %10lld\n", x.problem_id.c_str(), x.status.c_str(), x.correct ? "yes" : "no",
                !x.correct ? "-" : x.speedup_compile ? fmt::format("{:.2f}x", *x.speedup_compile).c_str() : "n/a",
                static_cast<long long>(x.calls),
                static_cast<long long>(x.tokens));
  }
  std::printf("%d of %zu correct; %d skipped (already finished), %d resumed, %d new, %d failed\n", correct,
              sr.outcomes.size(), sr.skipped, sr.resumed, sr.created, sr.failed);
  std::printf("results: %s  (summarize: mkevolve bench-report %s)\n", (root / o.method).string().c_str(),
              root.string().c_str());
  if (interrupted) {
    std::printf("interrupted; run the same command again to continue\n");
    return kExitInterrupted;
  }
  return kExitOk;
}

static Register reg_bench("bench", "run a method over a suite of problems (resumable, concurrent, shardable)", &bench_cmd);

}  // namespace
}  // namespace mk::cli
