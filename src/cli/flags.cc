#include "cli/flags.h"

#include <algorithm>
#include <map>
#include <set>

#include "cli/args.h"

namespace mk::cli {

namespace fs = std::filesystem;

namespace {

using Tweak = std::function<void(CLI::Option*)>;
using Cmds = std::vector<std::string>;

// Who takes what. One list per family, so that an option added to "the
// commands that evaluate" is one entry naming kEvaluate.
const Cmds kSearch = {"run", "bench"};                                 // the whole method
const Cmds kBeam = {"run", "bench", "evolve"};                         // beam search
const Cmds kCalls = {"run", "bench", "evolve", "decompose"};           // commands that call the LLM per agent
const Cmds kJudge = {"run", "bench", "evolve", "adapt"};               // commands with a cheat judge
const Cmds kLlm = {"run", "bench", "evolve", "adapt", "decompose"};    // commands that talk to an LLM
const Cmds kEvaluate = {"eval", "run", "bench", "evolve", "adapt", "swap"};  // commands that evaluate candidates
const Cmds kPool = {"eval", "run", "bench", "evolve", "adapt", "decompose"};  // commands that size a worker pool
const Cmds kGpu = {"eval", "run", "bench", "evolve", "adapt", "decompose", "calibrate", "swap"};  // start workers
const Cmds kPython = {"eval", "check", "run", "bench", "evolve", "adapt", "decompose", "calibrate", "swap"};

// The member of Flags an option sets, as a getter (nested members cannot be
// one member pointer).
#define MK_FIELD(member) [](Flags& f) -> auto& { return f.member; }

// One table entry; `is_flag`: a switch without a value (add_flag), else an
// option that takes one (add_option).
template <class Get>
FlagSpec entry(bool is_flag, std::string names, std::string group, std::string help, Cmds cmds, Get get,
               Tweak tweak, std::string env) {
  FlagSpec s;
  s.names = std::move(names);
  s.group = std::move(group);
  s.help = std::move(help);
  s.env = std::move(env);
  s.commands = std::move(cmds);
  s.add = [is_flag, get, tweak](CLI::App& app, Flags& f, const FlagSpec& self) {
    CLI::Option* o = is_flag ? app.add_flag(self.names, get(f), self.help) : app.add_option(self.names, get(f), self.help);
    o->group(self.group);
    if (tweak) tweak(o);
    return o;
  };
  s.copy = [get](const Flags& from, Flags& to) { get(to) = get(const_cast<Flags&>(from)); };
  return s;
}

template <class Get>
FlagSpec option(std::string names, std::string group, std::string help, Cmds cmds, Get get, Tweak tweak = {},
                std::string env = {}) {
  return entry(false, std::move(names), std::move(group), std::move(help), std::move(cmds), get, std::move(tweak),
               std::move(env));
}

template <class Get>
FlagSpec flag(std::string names, std::string group, std::string help, Cmds cmds, Get get) {
  return entry(true, std::move(names), std::move(group), std::move(help), std::move(cmds), get, {}, {});
}

Tweak defaulted() {
  return [](CLI::Option* o) { o->capture_default_str(); };
}
Tweak type(const char* name) {
  return [name](CLI::Option* o) { o->type_name(name); };
}
Tweak member_of(std::vector<std::string> choices, bool show_default = true) {
  return [choices, show_default](CLI::Option* o) {
    o->check(CLI::IsMember(choices));
    if (show_default) o->capture_default_str();
  };
}

std::string check_trials_dist(const std::string& v) {
  if (v == "none") return {};
  std::string bad;
  for (size_t a = 0; a <= v.size();) {
    size_t b = v.find(',', a);
    if (b == std::string::npos) b = v.size();
    std::string x = v.substr(a, b - a);
    if (x != "x1" && x != "x3" && x != "x0.01" && x != "neg") bad = x.empty() ? "(empty)" : x;
    a = b + 1;
  }
  return bad.empty() ? std::string() : "unknown scale '" + bad + "'; use x1, x3, x0.01, neg or none";
}

std::vector<FlagSpec> make_table() {
  std::vector<FlagSpec> t;
  // ---- Method: which algorithm, and its structure changes.
  t.push_back(option("--method", "Method", "mkevolve, parallel, beam or single-split", kSearch, MK_FIELD(search.method),
                     member_of({"mkevolve", "parallel", "beam", "single-split"})));
  t.push_back(flag("--fuse", "Method", "let LLMFuse merge subproblems when none fails (MKEvolve (Fuse))", kSearch,
                   MK_FIELD(search.fuse)));
  t.push_back(option("--allocate", "Method",
                     "budget weights once every subkernel passes: runtime (the paper's rule) or headroom (runtime x "
                     "headroom over the GPU's roofline)",
                     kSearch, MK_FIELD(search.allocate), member_of({"runtime", "headroom"})));
  t.push_back(option("--swap", "Method",
                     "off unless given (--swap alone: TAU = 0.9). After the search, replace subkernels slower than TAU "
                     "x their subproblem's torch.compile with the PyTorch reference (or, in run, the --swap-with "
                     "kernel); the solution is then marked as containing PyTorch",
                     kSearch, MK_FIELD(search.swap_tau),
                     [](CLI::Option* o) { o->expected(0, 1)->type_name("[TAU]")->default_str("0.9"); }));
  t.push_back(option("--postfuse", "Method", "LLM calls for fusing the final modular solution into one kernel", kSearch,
                     MK_FIELD(search.postfuse), defaulted()));
  t.push_back(option("--swap-with", "Method", "NAME=FILE: Swap's alternative kernel for subproblem NAME (repeatable)",
                     {"run"}, MK_FIELD(swap_with), type("NAME=FILE")));
  // ---- Budget: T, L, calls, beam shape, attempts.
  t.push_back(option("--iterations", "Budget", "outer iterations T", kSearch, MK_FIELD(search.iterations), defaulted()));
  t.push_back(option("--refine-every", "Budget", "split/fuse every L iterations (when t mod L == 0)", kSearch,
                     MK_FIELD(search.refine_every), defaulted()));
  t.push_back(option("--calls-per-iter", "Budget", "kernel-writing LLM calls per iteration", kSearch,
                     MK_FIELD(search.calls_per_iter), defaulted()));
  t.push_back(option("--beam-width", "Budget", "beam width", kBeam, MK_FIELD(search.beam_width), defaulted()));
  t.push_back(option("--expansion", "Budget", "children per beam member per round", kBeam, MK_FIELD(search.expansion),
                     defaulted()));
  t.push_back(option("--decompose-workers", "Budget", "parallel decomposition workers K", kSearch,
                     MK_FIELD(search.decompose_workers), defaulted()));
  t.push_back(option("--decompose-attempts", "Budget", "tries per decomposition worker", kSearch,
                     MK_FIELD(search.decompose_attempts), defaulted()));
  t.push_back(option("--refine-attempts", "Budget", "tries per split or fuse", kSearch, MK_FIELD(search.refine_attempts),
                     defaulted()));
  // ---- LLM: how each call is made, and where the LLM is.
  t.push_back(option("--max-tokens", "LLM", "reply token limit per LLM call", kCalls, MK_FIELD(search.max_tokens),
                     defaulted()));
  t.push_back(option("--reasoning-effort", "LLM",
                     "low, medium or high, for every call but a --judge's: reasoning_effort for OpenAI-compatible "
                     "servers, an extended-thinking budget (2048/8192/24576 tokens, on top of --max-tokens) for "
                     "Claude on Anthropic and Bedrock",
                     kCalls, MK_FIELD(search.reasoning_effort), member_of({"low", "medium", "high"}, false)));
  t.push_back(option("--judge-failure", "LLM",
                     "when a --judge call still fails after 3 tries: hold (the candidate gets no verdict: no reward, "
                     "kept out of the beam, its call given back to the budget) or pass (it counts as passed)",
                     kBeam, MK_FIELD(search.judge_failure), member_of({"hold", "pass"})));
  t.push_back(option("--llm", "LLM",
                     "LLM provider spec: openai:MODEL, anthropic:MODEL, bedrock:MODEL, exec:COMMAND, replay:FILE, or "
                     "a [llm.providers.NAME] alias (default: $MKEVOLVE_LLM, llm.provider in the config, then "
                     "ANTHROPIC_API_KEY or OPENAI_API_KEY with a default model)",
                     kLlm, MK_FIELD(env.llm), type("SPEC"), "MKEVOLVE_LLM"));
  t.push_back(option("--judge", "LLM",
                     "LLM cheat judge (a provider spec): reviews candidates that passed every programmatic check "
                     "before they may enter a beam; its tokens are counted",
                     kJudge, MK_FIELD(env.judge), type("SPEC")));
  t.push_back(option("--base-url", "LLM", "endpoint override for HTTP providers (recorded in the run: a resume uses it)",
                     kLlm, MK_FIELD(env.base_url), type("URL")));
  t.push_back(flag("--allow-llm-change", "LLM",
                   "with --resume: allow another --llm, --judge, --base-url or --config than the run started with",
                   kLlm, MK_FIELD(env.allow_llm_change)));
  t.push_back(option("--llm-concurrency", "LLM", "LLM requests in flight per provider (default: config, else 8)", kLlm,
                     MK_FIELD(env.llm_concurrency)));
  t.push_back(option("--record", "LLM", "also append every LLM call to FILE in the replay format", kLlm,
                     MK_FIELD(env.record), type("FILE")));
  // ---- Machine: the worker's Python, the GPUs, the configuration file.
  t.push_back(option("--python", "Machine",
                     "the worker's Python (default: $MKEVOLVE_PYTHON, else config 'python', else the first of "
                     "python3, /usr/bin/python3, /usr/local/bin/python3 that has torch)", kPython, MK_FIELD(env.python), type("PATH"),
                     "MKEVOLVE_PYTHON"));
  t.push_back(option("--gpu", "Machine", "use only this visible GPU (index); default: all visible GPUs", kGpu,
                     MK_FIELD(env.gpu)));
  t.push_back(option("--slots-per-gpu", "Machine",
                     "candidates evaluated at once per GPU at most, or auto: three quarters of the cores per GPU, at "
                     "most 12 (the default); memory admission decides how many really run at once; eval starts no more than "
                     "its pairs need",
                     kPool, MK_FIELD(env.slots_per_gpu), [](CLI::Option* o) {
                       o->transform(CLI::Transformer(std::map<std::string, std::string>{{"auto", "0"}}).description(""))
                           ->type_name("N|auto");
                     }));
  t.push_back(flag("--no-prestart", "Machine",
                   "fork each candidate's processes when it arrives instead of keeping them warm beforehand (saves "
                   "one CUDA context per idle process on the GPU; each candidate then pays CUDA and profiler "
                   "start-up)",
                   kPool, MK_FIELD(env.no_prestart)));
  t.push_back(option("--config", "Machine",
                     "configuration file: LLM providers, prices, the worker's Python (default: ./mkevolve.toml, "
                     "~/.config/mkevolve/config.toml)",
                     kPython, MK_FIELD(env.config_path), type("FILE")));
  // CI only: the worker's CPU test mode (torch-only candidates, no timing
  // that means anything). Hidden from help on purpose.
  t.push_back(flag("--test-cpu-unsafe", "", "the worker's CPU test mode (CI only)", kGpu, MK_FIELD(env.test_cpu)));
  // ---- Evaluation: the evaluator's settings.
  t.push_back(option("--trials", "Evaluation", "correctness trials per candidate, each with fresh random inputs",
                     kEvaluate, MK_FIELD(search.eval.trials), defaulted()));
  t.push_back(option("--perf-trials", "Evaluation", "timed calls per candidate", kEvaluate,
                     MK_FIELD(search.eval.perf_trials), defaulted()));
  t.push_back(option("--warmup", "Evaluation", "warm-up calls before timing", kEvaluate, MK_FIELD(search.eval.warmup),
                     defaulted()));
  t.push_back(option("--timeout", "Evaluation", "hard deadline per candidate, seconds", kEvaluate,
                     MK_FIELD(search.eval.timeout_s), defaulted()));
  t.push_back(option("--compile-timeout", "Evaluation",
                     "deadline for the torch.compile baseline's compile step, seconds; past it the baseline has eager "
                     "only (default: 2 x max(--timeout, 60))",
                     kEvaluate, MK_FIELD(search.eval.compile_timeout_s),
                     [](CLI::Option* o) { o->check(CLI::PositiveNumber); }));
  t.push_back(option("--atol", "Evaluation",
                     "absolute tolerance for every output (default: by the output's dtype: 1e-4 for fp32, 1e-2 for "
                     "fp16/bf16, 0.1 for fp8; or the problem's MKEVOLVE_TOLERANCE)",
                     kEvaluate, MK_FIELD(search.eval.atol), [](CLI::Option* o) { o->check(CLI::NonNegativeNumber); }));
  t.push_back(option("--rtol", "Evaluation", "relative tolerance for every output (default: by dtype as --atol; fp8 0.2)",
                     kEvaluate, MK_FIELD(search.eval.rtol), [](CLI::Option* o) { o->check(CLI::NonNegativeNumber); }));
  t.push_back(option("--pass-rate", "Evaluation",
                     "fraction of each output's elements that must be within tolerance, in (0, 1] (default 1; fp8 "
                     "0.85); a NaN or inf where the reference is finite always fails",
                     kEvaluate, MK_FIELD(search.eval.pass_rate),
                     [](CLI::Option* o) { o->check(CLI::Range(1e-9, 1.0)); }));
  t.push_back(option("--trials-dist", "Evaluation",
                     "extra correctness trials at other input scales (KernelBench-Verified's): a comma list of x1 "
                     "(the regular trials), x3, x0.01 and neg (negated), or none",
                     kEvaluate, MK_FIELD(search.eval.trials_dist),
                     [](CLI::Option* o) { o->check(check_trials_dist)->capture_default_str(); }));
  t.push_back(option("--shapes", "Evaluation",
                     "benchmark: verify only at the problem's own input shapes; check: also run a correct kernel "
                     "(for run, bench and adapt: the returned solution) at shape variants derived from the problem's "
                     "size constants (batch_size, seq_len, ...) and report where it holds; search: every candidate "
                     "must hold at the variants. Timing stays at the benchmark's shape. Default: check; swap: "
                     "benchmark; adapt: the earlier run's (check for a run recorded before --shapes existed)",
                     kEvaluate, MK_FIELD(search.eval.shapes), member_of({"benchmark", "check", "search"}, false)));
  t.push_back(option("--tolerance", "Evaluation",
                     "default: tolerances by dtype, the problem's MKEVOLVE_TOLERANCE or --atol/--rtol; calibrated or "
                     "FILE: each output at its own calibrated atol with rtol 0 (mkevolve calibrate; a problem the "
                     "file lacks is calibrated first): a run directory's calibration.json, or outside a run (eval) "
                     "the cache's",
                     kEvaluate, MK_FIELD(search.eval.tolerance), [](CLI::Option* o) {
                       o->transform(CLI::Validator(
                                        [](std::string& v) -> std::string {
                                          if (v == "default" || v == "calibrated") return {};
                                          std::error_code ec;
                                          if (fs::is_directory(v, ec))
                                            return v + " is a directory; --tolerance takes default, calibrated or a file";
                                          v = fs::absolute(v).lexically_normal().string();  // a resume from elsewhere finds it
                                          return {};
                                        },
                                        "default|calibrated|FILE"))
                           ->capture_default_str();
                     }));
  t.push_back(flag("--baseline-tf32", "Evaluation",
                   "also time torch.compile with TF32 on (KernelBench-Verified's baselines), reported beside the "
                   "TF32-off baseline, which stays the reward",
                   kEvaluate, MK_FIELD(search.eval.baseline_tf32)));
  t.push_back(option("--calibration-runs", "Evaluation",
                     "with --tolerance calibrated|FILE: input seeds to calibrate a problem the file lacks", kEvaluate,
                     MK_FIELD(search.eval.calibration_runs),
                     [](CLI::Option* o) { o->check(CLI::Range(2, 1000))->capture_default_str(); }));
  t.push_back(option("--seed", "Evaluation", "seed for inputs and weights", kEvaluate, MK_FIELD(search.eval.seed),
                     defaulted()));
  t.push_back(option("--timing", "Evaluation",
                     "device: GPU time, the host's launch latency hidden (repeatable); synced: each call launched "
                     "onto an idle GPU, host latency included (KernelBench's way)",
                     kEvaluate, MK_FIELD(search.eval.timing), member_of({"device", "synced"})));
  t.push_back(option("--profile", "Evaluation",
                     "where the roofline's per-kernel figures come from: cupti (GPU time per kernel, every "
                     "evaluation) or ncu (also Nsight Compute's counters for each correct candidate: measured DRAM "
                     "bytes, throughput and achieved occupancy; needs ncu on the GPU machine, adds seconds per "
                     "candidate)",
                     kEvaluate, MK_FIELD(search.eval.profile), member_of({"cupti", "ncu"})));
  t.push_back(flag("--allow-pytorch", "Evaluation",
                   "Swap's policy: PyTorch compute may pass the checks (the kernel is marked as containing PyTorch)",
                   {"eval", "check"}, MK_FIELD(search.eval.allow_pytorch)));
  return t;
}

#undef MK_FIELD

}  // namespace

std::string FlagSpec::long_name() const {
  for (size_t a = 0; a < names.size();) {
    size_t b = names.find(',', a);
    if (b == std::string::npos) b = names.size();
    std::string n = names.substr(a, b - a);
    if (n.rfind("--", 0) == 0) return n;
    a = b + 1;
  }
  return names;
}

bool FlagSpec::serves(const std::string& cmd) const {
  return std::find(commands.begin(), commands.end(), cmd) != commands.end();
}

const std::vector<FlagSpec>& flag_table() {
  static const std::vector<FlagSpec> table = make_table();
  return table;
}

const FlagSpec* find_flag(const std::string& long_name) {
  for (const auto& s : flag_table())
    if (s.long_name() == long_name) return &s;
  return nullptr;
}

void add_flags(CLI::App& app, const std::string& cmd, Flags& flags) {
  for (const auto& s : flag_table())
    if (s.serves(cmd)) s.add(app, flags, s);
}

void take_given(const CLI::App& app, const std::string& cmd, const std::string& group, const Flags& given,
                Flags* into) {
  for (const auto& s : flag_table()) {
    if (!s.serves(cmd) || s.group != group) continue;
    const CLI::Option* o = app.get_option_no_throw(s.long_name());
    if (o && o->count() > 0) s.copy(given, *into);
  }
}

eval::PoolOptions pool_options(const EnvFlags& flags, const std::string& python) {
  eval::PoolOptions po;
  po.python = python;
  po.slots_per_gpu = std::max(0, flags.slots_per_gpu);
  po.prestart = !flags.no_prestart;
  po.only_gpu = flags.gpu;
  po.test_mode = flags.test_cpu;
  if (flags.test_cpu) {
    po.gpus = std::vector<eval::Gpu>{};  // the CPU slot, even on a GPU machine
    po.only_gpu = -1;
  }
  return po;
}

}  // namespace mk::cli
