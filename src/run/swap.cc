// `mkevolve swap DIR --subkernel NAME --with FILE|pytorch` (its command line
// is cli/swap.cc's): replaces one subkernel of a finished run's solution
// package, verifies the replacement against its subproblem and the composed
// module against the original, and only then installs it (DIR/solution is
// untouched when anything fails). The new speedups go into
// solution/manifest.json and a `swap` event.
#include "run/swap.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "eval/calibration.h"
#include "eval/calibration_file.h"
#include "problem/compose.h"
#include "records/events.h"
#include "records/manifest.h"
#include "rundir/run_dir.h"
#include "util/exit_code.h"
#include "util/fs.h"
#include "util/hash.h"

namespace mk::run {
namespace {

using nlohmann::json;

// A manifest flag that may be null (unknown, in test mode): true only when it says true.
std::optional<std::string> slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

int swap_in_directory(SwapRequest req, const EnvSetup& setup) {
  const std::string& name = req.subkernel;
  const std::string& with = req.with;
  EnvFlags& env_flags = req.env;
  eval::EvalOptions& eopts = req.options;
  auto say = [](const std::string& m) { std::fprintf(stderr, "mkevolve swap: %s\n", m.c_str()); };
  const fs::path dir = req.dir;
  const fs::path sol = dir / "solution";
  const fs::path man_path = sol / "manifest.json";
  if (!fs::is_regular_file(dir / "config.json")) {
    say(fmt::format("{} is not a run directory (no config.json)", dir.string()));
    return kExitUsage;
  }
  auto man_text = slurp(man_path);
  auto man = records::SolutionManifest::from_json(man_text ? json::parse(*man_text, nullptr, false) : json());
  if (!man) {
    say(fmt::format("{}: missing or not a solution manifest (did the run finish with a solution?)", man_path.string()));
    return kExitUsage;
  }
  records::ManifestSubkernel* entry = man->find(name);
  std::vector<std::string> names;
  for (const auto& s : man->subkernels) names.push_back(s.name);
  if (!entry) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    say(fmt::format("{} has no subkernel '{}' (it has: {})", sol.string(), name, list));
    return kExitUsage;
  }
  const fs::path sub_problem = sol / "subkernel_problems" / (name + ".py");
  auto sub_src = slurp(sub_problem);
  if (!sub_src) {
    say(fmt::format("{}: missing", sub_problem.string()));
    return kExitUsage;
  }
  const bool to_pytorch = with == "pytorch";
  std::string new_src;
  if (to_pytorch) {
    new_src = problem::pytorch_implementation(problem::Subproblem::make(name, *sub_src));
  } else {
    auto s = slurp(with);
    if (!s) {
      say(fmt::format("{}: cannot read the replacement kernel", with));
      return kExitUsage;
    }
    new_src = *s;
  }
  const fs::path problem_file = dir / "problem.py";
  if (!fs::is_regular_file(problem_file)) {
    say(fmt::format("{}: missing (the run's copy of the problem)", problem_file.string()));
    return kExitUsage;
  }

  if (std::string e = eval::tolerance_error(eopts); !e.empty()) {
    say(e);
    return kExitUsage;
  }
  // Hold the run's lock while changing it; a running search refuses us here.
  auto rd = rundir::RunDir::open(dir);
  if (!rd) {
    say(rd.error());
    return kExitUsage;
  }
  for (const auto& n : (*rd)->notices()) say(n);

  Env env;
  std::vector<std::string> missing;
  fs::path work = dir / fmt::format(".swap-work-{}", ::getpid());
  if (int rc = setup.pool("swap", env_flags, (*rd)->eval_cache_dir(), work, true, &env, &missing); rc)
    return rc;
  if (int rc = report_missing("swap", missing); rc) return rc;

  // Stage a copy of the package with the replacement in it.
  fs::path staged = dir / fmt::format(".solution.swap-{}", ::getpid());
  std::error_code ec;
  fs::remove_all(staged, ec);
  fs::copy(sol, staged, fs::copy_options::recursive, ec);
  auto cleanup = [&] {
    env.pool.reset();  // stop the worker servers before their working directory goes
    std::error_code e2;
    fs::remove_all(staged, e2);
    fs::remove_all(work, e2);
  };
  if (ec) {
    say(fmt::format("cannot copy {} to {}: {}", sol.string(), staged.string(), ec.message()));
    cleanup();
    return kExitFailure;
  }
  const fs::path staged_kernel = staged / "subkernel_implementations" / (name + ".py");
  if (auto st = write_file_atomic(staged_kernel, new_src); !st) {
    say(st.error());
    cleanup();
    return kExitFailure;
  }
  bool any_pytorch = to_pytorch;
  for (const auto& s : man->subkernels)
    if (s.name != name && s.pytorch.value_or(false)) any_pytorch = true;

  eopts.test_cpu = env_flags.test_cpu;
  // --tolerance calibrated: the run's own calibration.json, as in the run.
  eopts.calibration = eval::calibration_path(eopts.tolerance, eval::calibration_file(dir));
  // 1. Locally: the replacement against its own subproblem, on every configuration.
  eval::EvalRequest local;
  local.problem = sub_problem;
  local.kernel = staged_kernel;
  local.options = eopts;
  local.options.allow_pytorch = to_pytorch;
  local.task = name;
  eval::Verdict lr = env.pool->evaluate(local);
  std::printf("local   %-24s %-14s %s\n", name.c_str(), eval::to_string(lr.status),
              lr.correct() ? fmt::format("{:.3f}x vs torch.compile, {:.3f}x vs eager", lr.speedup_compile,
                                         lr.speedup_eager).c_str()
                           : lr.kind.c_str());
  auto refuse = [&](const std::string& what, const eval::Verdict& r) {
    say(fmt::format("not swapped: {} ({}: {}); {} is unchanged", what, eval::to_string(r.status), r.kind,
                    sol.string()));
    if (!r.feedback.empty()) std::fprintf(stderr, "%s\n", r.feedback.c_str());
    records::SwapRejected rej;
    rej.replaced.push_back({name, to_pytorch ? "pytorch" : with, std::nullopt});
    rej.reason = what;
    rej.result = eval::summary_json(r);
    if (auto st = (*rd)->log_event(rej); !st) say(st.error());
    cleanup();
    return kExitFailure;
  };
  if (!lr.correct()) return refuse("the replacement fails its subproblem's check", lr);

  // 2. End to end: the composed package against the original problem.
  eval::EvalRequest whole;
  whole.problem = problem_file;
  whole.kernel = staged / "decomposed_solution.py";
  whole.options = eopts;
  whole.options.allow_pytorch = any_pytorch;
  whole.task = man->problem.empty() ? problem_file.stem().string() : man->problem;
  eval::Verdict er = env.pool->evaluate(whole);
  std::printf("e2e     %-24s %-14s %s\n", whole.task.c_str(), eval::to_string(er.status),
              er.correct() ? fmt::format("{:.3f}x vs torch.compile, {:.3f}x vs eager", er.speedup_compile,
                                         er.speedup_eager).c_str()
                           : er.kind.c_str());
  if (!er.correct()) return refuse("the composed solution fails end to end", er);

  // 3. Record and install.
  const auto old_e2e = eval::Verdict::from_json(man->e2e.is_null() ? json::object() : man->e2e);
  const std::optional<double> before = man->correct.value_or(false) && old_e2e && old_e2e->speedup_compile > 0
                                           ? std::optional<double>(old_e2e->speedup_compile)
                                           : std::nullopt;
  const std::string from = entry->pytorch.value_or(false) ? "pytorch"
                           : entry->kernel_hash.empty()   ? std::string("kernel")
                                                          : entry->kernel_hash;
  const std::string to = to_pytorch ? "pytorch" : fs::absolute(with).string();
  entry->kernel_hash = sha256_hex(new_src);
  entry->pytorch = to_pytorch;
  const json local_summary = eval::summary_json(lr), e2e_summary = eval::summary_json(er);
  entry->local = local_summary;
  entry->reused_from.clear();  // no longer the subkernel an adaptation reused
  man->e2e = e2e_summary;
  man->correct = true;
  man->speedup = er.speedup_compile;
  man->contains_pytorch_subkernels = any_pytorch;
  man->swaps.push_back({name, from, to});
  if (auto st = write_file_atomic(staged / "manifest.json", man->to_json().dump(2) + "\n"); !st) {
    say(st.error());
    cleanup();
    return kExitFailure;
  }
  fs::path old = dir / fmt::format(".solution.old-{}", ::getpid());
  fs::rename(sol, old, ec);
  if (!ec) fs::rename(staged, sol, ec);
  if (ec) {
    std::error_code e2;
    if (!fs::exists(sol)) fs::rename(old, sol, e2);
    say(fmt::format("cannot install the new solution: {}; {} is unchanged", ec.message(), sol.string()));
    cleanup();
    return kExitFailure;
  }
  fs::remove_all(old, ec);
  records::Swap sw;
  sw.name = name;
  sw.from = from;
  sw.to = to;
  sw.speedup_before = before;
  sw.speedup_after = er.speedup_compile;
  sw.local = local_summary;
  sw.e2e = e2e_summary;
  sw.contains_pytorch_subkernels = any_pytorch;
  sw.by = "mkevolve swap";
  if (auto st = (*rd)->log_event(sw); !st) say(st.error());
  cleanup();
  std::printf("swapped %s -> %s in %s%s\n", name.c_str(), to_pytorch ? "pytorch" : with.c_str(), sol.string().c_str(),
              any_pytorch ? " (contains PyTorch subkernels: not pure Triton)" : "");
  return kExitOk;
}

}  // namespace mk::run
