#!/usr/bin/env python3
"""Evaluation throughput: one worker pool versus a fresh Python process per candidate.

    scripts/bench_eval_throughput.py [--mkevolve build/mkevolve] [--python python3]
                                     [--slots 1,4] [--json-out F]

A fixed, mixed set of example candidates (correct, incorrect, erroring and
crashing ones, over five problems) is evaluated three ways, each timed by the
wall clock from the first process start to the last verdict:

  pool    `mkevolve eval --no-cache --batch F`, ONE invocation for all candidates
          of all problems (F lists every problem/kernel pair): one worker pool,
          started once, whose pre-imported server forks one isolated child per
          candidate (the MKEvolve design). Run once per --slots value
          (candidates evaluated at once on the GPU; 1 = one at a time).
  fresh   `python -m mkevolve_worker eval --problem P --kernel K --json`, one new
          process per candidate, one at a time, as KernelBench does: every
          candidate pays the torch + triton import. The evaluation code and its
          isolation (a forked child per candidate) are the same.

Both do the same work per candidate: correctness trials, cheat checks and, for
correct ones, timing of the candidate (10 warm-up + 100 timed calls). Neither
includes baseline measurements in its clock: before the pool runs, one untimed
batch call (one correct kernel per problem) fills the baseline cache, and the
fresh processes measure
no baselines (--cache-home names a cache whose baselines are already there).
Each way gets its own empty Triton cache, so every candidate
compiles cold, as a new LLM candidate does.

--set kb-large (or both) takes KernelBench level-1 problems with inputs of
6.4 GB instead (or as well): 19_ReLU, 21_Sigmoid and 23_Softmax from --kb DIR
(brought in at test time, never committed), with our kernels for them
(examples/kernels/ and examples/kernels/kernelbench/): correct, incorrect and
crashing ones. --slots takes integers and "auto". --own-references adds, for
--set kb-large, each of KB_OWN_REFERENCES' problems with its own reference as
the candidate (`class ModelNew(Model)`, as scripts/kernelbench_sweep.py writes
them; every way then runs under --allow-pytorch). --pairs-out writes the
candidates as 'PROBLEM KERNEL' lines for scripts/kb_harness.py --pairs (KernelBench's
own harness on the same candidates; gpu-suite's kbthroughput stage), --stream
appends each verdict as a JSON line as it comes.

Prints evaluations per minute for each way and the ratio; this is a benchmark,
not a test: nothing is asserted about the numbers. Exit status 0 when every way
ran and agreed on every verdict, 1 otherwise.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
P = "examples/problems/"
K = "examples/kernels/"

# problem -> candidates; a fixed mix: 5 correct, 6 incorrect, 6 that error or crash.
CANDIDATES = {
    P + "01_relu.py": [
        "01_relu__triton", "01_relu__identity", "01_relu__empty_like_stale", "01_relu__illegal_address",
        "01_relu__device_assert", "01_relu__bad_arange", "01_relu__segfault_numpy", "01_relu__syntax_error",
    ],
    P + "02_softmax_wide.py": ["02_softmax_wide__online", "02_softmax_wide__zeros", "02_softmax_wide__nan"],
    P + "03_linear_gelu.py": ["03_linear_gelu__tiled", "03_linear_gelu__missing_bias"],
    P + "05_layernorm_residual.py": ["05_layernorm_residual__rowwise", "05_layernorm_residual__broadcast_shape"],
    P + "07_attention_block.py": ["07_attention_block__flash", "07_attention_block__mask_off_by_one"],
}


# KernelBench level 1 problems with 6.4 GB inputs (4096 x 393216 fp32), paths
# under --kb; our kernels for them.
KB_LARGE = {
    "level1/19_ReLU.py": [K + "01_relu__triton.py", K + "01_relu__identity.py", K + "01_relu__illegal_address.py"],
    "level1/21_Sigmoid.py": [K + "kernelbench/21_Sigmoid__triton.py"],
    "level1/23_Softmax.py": [K + "02_softmax_wide__online.py", K + "02_softmax_wide__zeros.py"],
}


# KernelBench level-1 problems whose own reference (`class ModelNew(Model)`,
# evaluated under --allow-pytorch, as scripts/kernelbench_sweep.py does) joins
# --set kb-large as a candidate: the 6.4 GB elementwise and softmax problems
# first, then smaller ones (the last four: 134-268 MB of inputs, so that a set
# of 10 with large ones fits KernelBench's own harness into one device call);
# those missing from --kb are skipped (said so).
KB_OWN_REFERENCES = ["19_ReLU", "23_Softmax", "20_LeakyReLU", "22_Tanh", "24_LogSoftmax", "26_GELU_",
                     "1_Square_matrix_multiplication_", "36_RMSNorm_", "40_LayerNorm", "47_Sum_reduction_over_a_dimension",
                     "2_Standard_matrix_multiplication_", "88_MinGPTNewGelu", "13_Matmul_for_symmetric_matrices",
                     "10_3D_tensor_matrix_multiplication"]


def own_reference_pairs(kb: str, out_dir: Path, only=None) -> list[tuple[str, str]]:
    """(problem, candidate) for each of KB_OWN_REFERENCES under kb (those in
    `only`, when given): the problem's source plus `class ModelNew(Model):
    pass`, written to out_dir."""
    level1 = Path(kb) / "KernelBench" / "level1"
    out_dir.mkdir(parents=True, exist_ok=True)
    pairs = []
    for stem in KB_OWN_REFERENCES:
        if only is not None and stem not in only:
            continue
        prob = level1 / f"{stem}.py"
        if not prob.is_file():
            print(f"bench_eval_throughput: no KernelBench/level1/{stem}.py under {kb}: skipped", file=sys.stderr)
            continue
        cand = out_dir / f"{stem}__own_reference.py"
        cand.write_text(prob.read_text().rstrip() + "\n\n\n# The reference as its own candidate "
                        "(bench_eval_throughput.py).\nclass ModelNew(Model):\n    pass\n")
        pairs.append((str(prob), str(cand)))
    return pairs


def kernel_path(stem):
    return K + stem + ".py"


def candidate_pairs(which: str, kb: str | None) -> list[tuple[str, str]]:
    """(problem, kernel) pairs of the chosen set."""
    pairs = []
    if which in ("mixed", "both"):
        pairs += [(problem, kernel_path(s)) for problem, stems in CANDIDATES.items() for s in stems]
    if which in ("kb-large", "both"):
        root = Path(kb) / "KernelBench"
        pairs += [(str(root / rel), k) for rel, kernels in KB_LARGE.items() for k in kernels]
    return pairs


def key_of(problem, kernel) -> str:
    """A candidate's name in the tables: the same kernel may serve two problems."""
    return f"{Path(problem).stem}:{Path(kernel).stem}"


def parse_lines(text):
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


CACHE_KEY = None  # --cache-key: the file that seals the cache's entries (travels with a carried cache)


def base_env(cache_home, triton_cache):
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = str(cache_home)
    if CACHE_KEY:
        env["MKEVOLVE_CACHE_KEY"] = str(CACHE_KEY)
    env["TRITON_CACHE_DIR"] = str(triton_cache)
    env["MKEVOLVE_HOME"] = str(ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def batch_field(path):
    """A path as a batch-file field: absolute (relative ones would be read against the
    batch file's own directory), in double quotes when it holds blanks."""
    text = str(ROOT / path)
    if '"' in text:
        raise SystemExit(f"bench_eval_throughput: {text}: a batch file cannot name a path containing '\"'")
    return f'"{text}"' if any(c.isspace() for c in text) else text


def write_batch(path, pairs):
    """`mkevolve eval --batch` input: one 'PROBLEM KERNEL' line per pair."""
    lines = ["# written by scripts/bench_eval_throughput.py"]
    lines += [f"{batch_field(problem)} {batch_field(kernel)}" for problem, kernel in pairs]
    Path(path).write_text("\n".join(lines) + "\n")
    return path


def run_pool(binary, batch, cache_home, triton_cache, slots, timeout_s, extra=(), stream=None, progress=None):
    """One `mkevolve eval --batch` call: one pool for every candidate. stream:
    a file each verdict line is appended to as it comes; progress (a dict,
    when given, with stream) holds the verdicts so far and when it began."""
    env = base_env(cache_home, triton_cache)
    cmd = [binary, "eval", "--json", "--no-cache", "--batch", str(batch), "--timeout", str(timeout_s),
           "--slots-per-gpu", str(slots), "--shapes", "benchmark", *extra]  # one evaluation per candidate
    verdicts, t0 = {}, time.monotonic()
    arrived = []  # when each stdout line came (streamed only): where the pool's time went
    if progress is not None:
        progress.clear()
        progress.update(t0=t0)  # verdicts counted only where they stream
        if stream:
            progress["verdicts"] = []
    if stream:
        cmd.append("--stream")
        # stderr into a file: a pipe nobody reads while stdout streams could fill and stall the pool.
        with tempfile.TemporaryFile(mode="w+") as errf:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=errf, text=True,
                                    stdin=subprocess.DEVNULL)
            lines = []
            try:
                with open(stream, "a") as f:
                    for line in proc.stdout:
                        lines.append(line)
                        arrived.append(time.monotonic() - t0)
                        if line.strip().startswith("{"):
                            f.write(line)
                            f.flush()
                            if progress is not None:
                                progress["verdicts"].append(line)
                proc.wait()
            except BaseException:
                # Stopped from outside: the pool goes with us (as subprocess.run would see to).
                proc.kill()
                proc.wait()
                raise
            errf.seek(0)
            err = errf.read()
        proc = subprocess.CompletedProcess(cmd, proc.returncode, "".join(lines), err)
    else:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    secs = time.monotonic() - t0
    phases = {}  # where each candidate's time went (diagnostics, kept in --json-out)
    at = {}
    if arrived:
        for line, t in zip(lines, arrived):
            for obj in parse_lines(line):
                at[key_of(obj.get("problem", "?"), obj.get("kernel", "?"))] = round(t, 2)
    for obj in parse_lines(proc.stdout):
        stem = key_of(obj.get("problem", "?"), obj.get("kernel", "?"))
        verdicts[stem] = f"{obj.get('status')}/{obj.get('kind') or '-'}"
        checks = obj.get("checks") or {}
        phases[stem] = {"phases_s": checks.get("phases_s"), "isolation": checks.get("isolation"),
                        "footprint": checks.get("footprint"), "admission": checks.get("admission"),
                        "server_startup_s": checks.get("server_startup_s")}
        if stem in at:
            # The pool's clock: its verdict came at arrived_s after the pool was
            # started, having waited queued_s for a slot and evaluated for eval_s,
            # server_start_s of it starting the slot's server.
            phases[stem].update(arrived_s=at[stem], queued_s=obj.get("queued_s"), eval_s=obj.get("eval_s"),
                                server_start_s=obj.get("server_start_s") or 0.0)
    if proc.returncode not in (0, 1):
        print(f"pool: exit {proc.returncode}: {proc.stderr.strip()[-500:]}", file=sys.stderr)
    return secs, verdicts, phases


def pool_timeline(phases: dict, secs: float) -> dict | None:
    """Where a streamed pool run's seconds went, from its verdicts' arrivals
    (run_pool's arrived_s, queued_s, eval_s): when the candidates were handed
    to the pool (after its start-up: arrival less eval_s and queued_s), when
    the first and the last verdict came, how long the pool took to exit
    after the last, and how many evaluations waited for their slot's server
    to start and for how long at most (server_start_s, part of eval_s). None
    where nothing streamed."""
    rows = [(v["arrived_s"], v.get("queued_s") or 0.0, v["eval_s"]) for v in phases.values()
            if isinstance(v.get("arrived_s"), (int, float)) and isinstance(v.get("eval_s"), (int, float))]
    if not rows:
        return None
    last = max(a for a, _, _ in rows)
    starts = [v["server_start_s"] for v in phases.values() if (v.get("server_start_s") or 0) > 0]
    return {"submitted_s": round(min(a - q - e for a, q, e in rows), 2),
            "first_verdict_s": round(min(a for a, _, _ in rows), 2), "last_verdict_s": round(last, 2),
            "exit_after_last_s": round(secs - last, 2),
            "server_starts": len(starts), "server_start_max_s": round(max(starts, default=0.0), 2)}


def warm_baselines(binary, batch, cache_home, triton_cache, extra=()):
    """One untimed batch call, one correct kernel per problem: fills the baseline cache."""
    env = base_env(cache_home, triton_cache)
    proc = subprocess.run([binary, "eval", "--json", "--no-cache", "--batch", str(batch), "--shapes", "benchmark",
                           *extra], cwd=ROOT, env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode not in (0, 1):
        print(f"warm-up: exit {proc.returncode}: {proc.stderr.strip()[-500:]}", file=sys.stderr)
        return False
    return True


def run_fresh(python, pairs, cache_home, triton_cache, timeout_s, extra=(), stream=None, progress=None):
    """One new process per candidate, one after another. progress (a dict,
    when given) holds the verdicts so far and the seconds they took, for a
    run that is stopped before the last."""
    env = base_env(cache_home, triton_cache)
    env["PYTHONPATH"] = str(ROOT / "worker") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    verdicts, t0 = {}, time.monotonic()
    if progress is not None:
        progress.clear()
        progress.update(verdicts=verdicts, t0=t0)
    for problem, kernel in pairs:
        s = key_of(problem, kernel)
        cmd = [python, "-m", "mkevolve_worker", "eval", "--problem", problem, "--kernel", kernel,
               "--json", "--timeout", str(timeout_s), *extra]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL)
        objs = parse_lines(proc.stdout)
        if objs:
            verdicts[s] = f"{objs[-1].get('status')}/{objs[-1].get('kind') or '-'}"
            if stream:
                with open(stream, "a") as f:
                    f.write(json.dumps({"way": "fresh", "problem": problem, "kernel": kernel,
                                        "status": objs[-1].get("status"), "kind": objs[-1].get("kind"),
                                        "runtime_ms": objs[-1].get("runtime_ms")}) + "\n")
        else:
            print(f"fresh: {s}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}", file=sys.stderr)
        print(f"fresh  {s}: {verdicts.get(s, 'no verdict')} at {time.monotonic() - t0:.1f} s", flush=True)
    return time.monotonic() - t0, verdicts


def _stop(signum, _frame):
    """Stopped (`timeout`, gpu-suite's stage limit): raising here makes
    subprocess.run kill the child it waits on (mkevolve, whose worker servers
    then stop too), so no evaluation goes on beside whatever runs next."""
    print(f"bench_eval_throughput: stopped by signal {signum}", file=sys.stderr, flush=True)
    raise SystemExit(128 + signum)


def main(argv=None):
    signal.signal(signal.SIGTERM, _stop)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mkevolve", default=str(ROOT / "build" / "mkevolve"))
    ap.add_argument("--python", default=os.environ.get("MKEVOLVE_PYTHON", "python3"))
    ap.add_argument("--slots", default="1", help="comma-separated --slots-per-gpu values for the pool runs")
    ap.add_argument("--timeout", type=int, default=120, help="per-candidate deadline, seconds")
    ap.add_argument("--cache-home", help="XDG cache folder whose baselines are already measured "
                    "(skips the untimed warm-up calls); default: a fresh one, filled before timing")
    ap.add_argument("--json-out")
    ap.add_argument("--set", choices=["mixed", "kb-large", "both"], default="mixed",
                    help="the candidate set: the examples' mix, KernelBench's 6.4 GB level-1 problems, or both")
    ap.add_argument("--kb", help="KernelBench checkout (holds KernelBench/level1) for --set kb-large/both")
    ap.add_argument("--ways", default="pool,fresh", help="which ways to run: pool, fresh or both (default)")
    ap.add_argument("--own-references", action="store_true",
                    help="--set kb-large: add KB_OWN_REFERENCES, each problem's reference as its own candidate "
                         "(every way then runs under --allow-pytorch)")
    ap.add_argument("--pairs-out", help="write the candidates as 'PROBLEM KERNEL' lines here (scripts/kb_harness.py "
                    "--pairs reads them), then go on")
    ap.add_argument("--stream", help="append each verdict as a JSON line here as it comes (pool and fresh)")
    ap.add_argument("--only-pairs", action="store_true", help="with --pairs-out: write them and stop")
    ap.add_argument("--own-only", help="with --own-references: only these problems' own references "
                    "(comma-separated stems of KB_OWN_REFERENCES)")
    ap.add_argument("--warm-only", action="store_true",
                    help="run the untimed warm-up into --cache-home (made if missing) and stop: a cache one device "
                         "call fills and a later call carries in with --warmed (the warm-up of KernelBench's 6.4 GB "
                         "problems outlasts one call)")
    ap.add_argument("--warmed", action="store_true",
                    help="--cache-home holds every problem's baselines already (a --warm-only run's): no warm-up")
    ap.add_argument("--cache-key", help="the file that seals the cache's entries (MKEVOLVE_CACHE_KEY; made if "
                    "missing): keep it beside a cache that travels between machines, outside the cache itself")
    args = ap.parse_args(argv)
    global CACHE_KEY
    CACHE_KEY = args.cache_key
    if (args.warm_only or args.warmed) and not args.cache_home:
        ap.error("--warm-only and --warmed need --cache-home DIR")
    if args.warmed and not Path(args.cache_home).is_dir():
        ap.error(f"--warmed: {args.cache_home}: no such folder (a --warm-only run makes it)")
    slot_values = [s.strip() for s in args.slots.split(",") if s.strip()]
    if not slot_values or any(s != "auto" and not (s.isdigit() and int(s) >= 1) for s in slot_values):
        ap.error(f"--slots: {args.slots!r}: give comma-separated values, each an integer of 1 or more or auto")
    ways = {w.strip() for w in args.ways.split(",") if w.strip()}
    if not ways or ways - {"pool", "fresh"}:
        ap.error(f"--ways: {args.ways!r}: pool, fresh or both")
    if args.set != "mixed":
        if not args.kb:
            ap.error(f"--set {args.set} needs --kb DIR (a KernelBench checkout)")
        missing = [rel for rel in KB_LARGE if not (Path(args.kb) / "KernelBench" / rel).is_file()]
        if missing:
            ap.error(f"--kb {args.kb}: no KernelBench/{missing[0]} there")
    if args.timeout < 1:
        ap.error("--timeout must be 1 or more")
    if not Path(args.mkevolve).exists():
        print(f"bench_eval_throughput: {args.mkevolve}: no such binary (build it or pass --mkevolve)",
              file=sys.stderr)
        return 2
    pairs = candidate_pairs(args.set, args.kb)
    tmp = Path(tempfile.mkdtemp(prefix="mk_bench_"))
    extra = ()
    if args.own_references and args.set != "mixed":
        only = {x.strip() for x in (args.own_only or "").split(",") if x.strip()} or None
        if only and only - set(KB_OWN_REFERENCES):
            ap.error(f"--own-only: not in KB_OWN_REFERENCES: {sorted(only - set(KB_OWN_REFERENCES))}")
        pairs += own_reference_pairs(args.kb, tmp / "own-references", only)
        extra = ("--allow-pytorch",)
    n = len(pairs)
    if args.pairs_out:
        Path(args.pairs_out).write_text("".join(f"{ROOT / p} {ROOT / k}\n" for p, k in pairs))
        if args.only_pairs:
            return 0
    all_pairs = write_batch(tmp / "pool-batch.txt", pairs)
    firsts = {}
    for problem, kernel in pairs:
        firsts.setdefault(problem, kernel)
    if args.warm_only or args.warmed:
        cache_home = Path(args.cache_home)   # this benchmark's own cache, carried between device calls
        cache_home.mkdir(parents=True, exist_ok=True)
        if args.warmed:
            firsts = {}
    elif args.cache_home and Path(args.cache_home).is_dir():
        cache_home = Path(args.cache_home)   # the examples' baselines measured earlier (gpu-suite's manifest stage)
        firsts = {p: k for p, k in firsts.items() if not p.startswith(P)}   # KernelBench's are not there
    else:
        cache_home = tmp / "cache"   # shared: holds the baselines, which no clock includes
    if firsts:
        warm = write_batch(tmp / "warm-batch.txt", list(firsts.items()))
        t0 = time.monotonic()
        warmed = warm_baselines(args.mkevolve, warm, cache_home, tmp / "triton-warm", extra)
        print(f"untimed warm-up ({len(firsts)} problems) {'done' if warmed else 'FAILED'} in "
              f"{time.monotonic() - t0:.1f} s", flush=True)
        if args.warm_only:
            print(f"warm-up only: the cache is {cache_home}" if warmed else
                  "warm-up only: failed; the cache holds what finished", flush=True)
            return 0 if warmed else 1
    elif args.warm_only:
        print("warm-up only: no problem needs one", flush=True)
        return 0
    runs = []
    progress: dict = {}

    def finished(run: dict) -> None:
        run["evals_per_minute"] = 60.0 * n / run["seconds"] if run["seconds"] > 0 else 0.0
        runs.append(run)

    def incomplete_ways() -> list:
        return [r["way"] for r in runs if len(r["verdicts"]) < n]

    def write_record(**more) -> None:
        if args.json_out:
            Path(args.json_out).write_text(json.dumps({"candidates": n, "set": args.set, "runs": runs,
                                                       "incomplete": incomplete_ways(), **more}, indent=1))

    way = "the pool"
    try:
        for slots in slot_values if "pool" in ways else []:
            way = f"the pool at {slots} slots"
            secs, verdicts, phases = run_pool(args.mkevolve, all_pairs, cache_home, tmp / f"triton-pool-{slots}",
                                              slots, args.timeout, extra, args.stream, progress)
            plural = "" if slots == "1" else "s"
            timeline = pool_timeline(phases, secs)
            finished({"way": f"pool, {slots} slot{plural}", "seconds": secs,
                      "processes_started": 1, "verdicts": verdicts, "phases": phases,
                      **({"timeline": timeline} if timeline else {})})
            print(f"pool   {runs[-1]['way']}: {len(verdicts)} verdicts in {secs:.1f} s", flush=True)
            if timeline:
                print(f"pool   {runs[-1]['way']}: candidates handed over at {timeline['submitted_s']} s "
                      f"(the pool's start-up), verdicts from {timeline['first_verdict_s']} s to "
                      f"{timeline['last_verdict_s']} s, exit {timeline['exit_after_last_s']} s after the last; "
                      f"{timeline['server_starts']} evaluations waited for their slot's server to start "
                      f"(at most {timeline['server_start_max_s']} s)",
                      flush=True)
            progress.clear()  # a stop before the next way starts is in no way's count
            way = "between two ways"
        if "fresh" in ways:
            way = "the fresh way"
            secs, verdicts = run_fresh(args.python, pairs, cache_home, tmp / "triton-fresh", args.timeout, extra,
                                       args.stream, progress)
            finished({"way": "fresh process per candidate", "seconds": secs, "processes_started": n,
                      "verdicts": verdicts})
    except SystemExit:
        # Stopped (a stage's limit): the ways that finished are still a
        # measurement; the one cut short says how far it got, as no rate.
        got = progress.get("verdicts")
        write_record(stopped={"way": way, "verdicts": None if got is None else len(got), "of": n,
                              "seconds": round(time.monotonic() - progress["t0"], 1) if "t0" in progress else None},
                     disagreements=[])
        print(f"stopped in {way} after {'?' if got is None else len(got)} of {n} candidates; "
              f"the ways that finished are kept", flush=True)
        raise

    fresh = runs[-1] if "fresh" in ways else None
    names = [key_of(p, k) for p, k in pairs]
    disagreements = [s for s in names if len({r["verdicts"].get(s) for r in runs}) != 1]

    width = max(40, max(len(s) for s in names) + 1)
    print(f"{'candidate':{width}} " + " ".join(f"{r['way'][:26]:26}" for r in runs))
    for s in names:
        print(f"{s:{width}} " + " ".join(f"{str(r['verdicts'].get(s, 'missing'))[:26]:26}" for r in runs))
    print()
    pools = [r for r in runs if r is not fresh]
    for r in pools:
        print(f"pool   {r['way']:30} {n} candidates in {r['seconds']:7.1f} s = {r['evals_per_minute']:6.1f} evals/min")
    if fresh is not None:
        print(f"fresh  {fresh['way']:30} {n} candidates in {fresh['seconds']:7.1f} s = "
              f"{fresh['evals_per_minute']:6.1f} evals/min")
        for r in pools:
            print(f"ratio  {r['way']:30} {r['evals_per_minute'] / fresh['evals_per_minute']:.2f}x "
                  f"the fresh-process rate")
    if disagreements:
        print(f"verdicts differ between ways for: {', '.join(disagreements)}")
    incomplete = incomplete_ways()
    if incomplete:
        print(f"NOT A MEASUREMENT: some candidates got no verdict in: {', '.join(incomplete)}")
    write_record(disagreements=disagreements)
    return 1 if disagreements or incomplete else 0


if __name__ == "__main__":
    sys.exit(main())
