#!/usr/bin/env python3
"""Every KernelBench problem's own reference as its candidate, through one
`mkevolve eval --batch` (issue: evaluation at KernelBench's real sizes).

    python3 scripts/kernelbench_sweep.py --kb KB_ROOT --out DIR [--tag NAME] [--levels 1,2,3]
        [--every N] [--perf] [--trials N] [--slots auto] [--timeout S] [--compile-timeout S] [--bin build/mkevolve]
        [--skip-done FILE.jsonl]

KB_ROOT holds KernelBench/level{1,2,3}/*.py (bring it with the search tool's
fetch and `git archive`; never commit it). For each problem the script writes
a candidate that is the problem's source plus `class ModelNew(Model): pass`
(evaluated under --allow-pytorch), a batch file of the pairs, and runs them
through one worker pool at the automatic concurrency. --every N takes every
Nth problem only (the timing sample); --perf times them with baselines.

Everything streams into DIR as it comes, so a run stopped at its limit still
leaves what it measured: NAME.jsonl (one verdict a line, as mkevolve prints
it), NAME.err, NAME.mem.csv (host and GPU memory in use each second) and, at
the end, NAME.summary.json (NAME: --tag, default "sweep"). The candidates and
the batch file go to a temporary folder. --skip-done leaves out the problems
that already have a verdict in an earlier run's NAME.jsonl (to go on where a
stopped run ended). The last lines printed are a short table.
Only the Python standard library is used.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time


def problems(kb: str, levels: list[int]) -> list[tuple[int, str]]:
    out = []
    for lv in levels:
        d = os.path.join(kb, "KernelBench", f"level{lv}")
        names = [n for n in os.listdir(d) if n.endswith(".py")]
        names.sort(key=lambda n: (int(re.match(r"(\d+)", n).group(1)) if re.match(r"\d+", n) else 1 << 30, n))
        out += [(lv, os.path.join(d, n)) for n in names]
    return out


def write_candidates(items, out_dir: str) -> str:
    """One candidate per problem: its own reference, as ModelNew."""
    cdir = os.path.join(out_dir, "candidates")
    os.makedirs(cdir, exist_ok=True)
    pairs = os.path.join(out_dir, "pairs.txt")
    with open(pairs, "w") as f:
        for lv, path in items:
            src = open(path).read()
            name = f"l{lv}_{os.path.basename(path)}"
            cand = os.path.join(cdir, name)
            with open(cand, "w") as c:
                c.write(src.rstrip() + "\n\n\n# The reference as its own candidate (kernelbench_sweep.py).\n"
                        "class ModelNew(Model):\n    pass\n")
            f.write(f"{os.path.abspath(path)} {os.path.abspath(cand)}\n")
    return pairs


def meminfo() -> tuple[float, float]:
    vals = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            vals[k] = float(v.split()[0]) * 1024
    return vals["MemTotal"], vals.get("MemAvailable", 0.0)


def gpu_used() -> float | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
        return sum(float(x) for x in out.split()) * 1024 * 1024
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def oom_kills() -> int:
    try:
        out = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return -1
    return sum(1 for line in out.splitlines() if "Out of memory: Killed process" in line)


class Monitor(threading.Thread):
    def __init__(self, path: str):
        super().__init__(daemon=True)
        self.path = path
        self.stop = threading.Event()
        self.peak_host = 0.0
        self.peak_gpu = 0.0
        total, avail = meminfo()
        self.base_host = total - avail
        self.base_gpu = gpu_used() or 0.0

    def run(self) -> None:
        t0 = time.time()
        with open(self.path, "w", buffering=1) as f:
            f.write("t_s,host_used_bytes,gpu_used_bytes\n")
            while not self.stop.wait(1.0):
                total, avail = meminfo()
                g = gpu_used()
                self.peak_host = max(self.peak_host, total - avail)
                if g is not None:
                    self.peak_gpu = max(self.peak_gpu, g)
                f.write(f"{time.time() - t0:.1f},{total - avail:.0f},{'' if g is None else f'{g:.0f}'}\n")


def _clock(rec) -> str:
    if not isinstance(rec, dict) or not rec.get("available"):
        return "clock ?"
    why = ",".join(rec.get("reasons") or []) or "-"
    return (f"{rec.get('sm_mhz_median')} MHz (min {rec.get('sm_mhz_min')}, {rec.get('temp_c_max')} C, "
            f"{rec.get('power_w_max')} W, {why})")


def timing_line(r: dict) -> str:
    """One timed verdict: the speedup vs eager beside the GPU's clock while the
    candidate and while its baseline were timed (gpuclock.py), so an outlier
    can be told from a GPU that ran slower at one of the two moments."""
    checks = r.get("checks") or {}
    t = checks.get("timing") or {}
    eager = (r.get("speedup") or {}).get("eager") or 0
    base = (r.get("baseline_ms") or {}).get("eager")
    rt = (r.get("runtime_ms") or {})
    med = rt.get("median") if isinstance(rt, dict) else rt
    flag = " OUTLIER" if eager and abs(eager - 1) > 0.1 else ""
    if t.get("launch_bound"):
        # The host's launches took longer than the GPU's work (worker timing.py):
        # such times follow the host's load, not the GPU.
        flag += f" (launch-bound: host launch {t.get('host_launch_ms', 0):.1f} ms > spin {t.get('spin_ms')} ms)"
    return (f"{os.path.basename(r.get('problem', ''))}: vs eager {eager:.3f}{flag}; candidate {med} ms "
            f"(min {t.get('min_ms')}, p90 {t.get('p90_ms')}) at {_clock(checks.get('gpu_clock'))}; "
            f"eager {base} ms at {_clock(checks.get('baseline_gpu_clock'))}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kb", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tag", default="sweep")
    ap.add_argument("--skip-done", default="")
    ap.add_argument("--levels", default="1,2,3")
    ap.add_argument("--every", type=int, default=1, help="take every Nth problem (the timing sample: 5)")
    ap.add_argument("--only", default="", help="a regular expression: only the problems whose file name matches")
    ap.add_argument("--perf", action="store_true", help="time candidates and baselines (default: --no-perf)")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--shapes", default="benchmark", choices=["benchmark", "check", "search"],
                    help="mkevolve eval --shapes (default benchmark: KernelBench's own shapes only)")
    ap.add_argument("--slots", default="auto")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--compile-timeout", type=float,
                    help="mkevolve's --compile-timeout: the torch.compile baseline's compile step (--perf)")
    ap.add_argument("--bin", default="build/mkevolve")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--no-cache", action="store_true", help="evaluate again what an earlier sweep here cached")
    ap.add_argument("--test-cpu", action="store_true", help="the worker's CPU test mode (checks the script only)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    items = problems(a.kb, [int(x) for x in a.levels.split(",")])[::a.every]
    if a.only:
        import re
        items = [it for it in items if re.search(a.only, os.path.basename(it[1]))]
    if a.skip_done and os.path.exists(a.skip_done):
        done = set()
        for line in open(a.skip_done):
            try:
                done.add(os.path.abspath(json.loads(line)["problem"]))
            except (ValueError, KeyError):
                pass
        items = [it for it in items if os.path.abspath(it[1]) not in done]
    import tempfile
    pairs = write_candidates(items, tempfile.mkdtemp(prefix="kb-sweep-"))
    name = lambda ext: os.path.join(a.out, a.tag + ext)  # noqa: E731
    cmd = [a.bin, "eval", "--batch", pairs, "--json", "--stream", "--allow-pytorch", "--slots-per-gpu", a.slots,
           "--trials", str(a.trials), "--timeout", str(a.timeout), "--python", a.python, "--shapes", a.shapes]
    if a.compile_timeout:
        cmd += ["--compile-timeout", str(a.compile_timeout)]
    if not a.perf:
        cmd.append("--no-perf")
    if a.no_cache:
        cmd.append("--no-cache")
    if a.test_cpu:
        cmd.append("--test-cpu-unsafe")
    ooms_before = oom_kills()
    mon = Monitor(name(".mem.csv"))
    mon.start()
    t0 = time.time()
    print(f"{len(items)} problems; {' '.join(cmd)}", flush=True)
    counts: dict = {}
    rows = []
    with open(name(".jsonl"), "w", buffering=1) as vf, open(name(".err"), "w") as ef:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=ef, text=True)
        # Stopped (gpu-suite's stage limit, `timeout`): stop mkevolve too, so
        # no evaluation goes on beside the next stage, and still write the
        # summary of what came back.
        stopped = []

        def stop(signum, _frame):
            stopped.append(signum)
            p.terminate()
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        for line in p.stdout:
            vf.write(line)
            try:
                r = json.loads(line)
            except ValueError:
                continue
            rows.append(r)
            key = f"{r.get('status')}/{r.get('kind') or 'ok'}"
            counts[key] = counts.get(key, 0) + 1
            if r.get("status") != "correct":
                print(f"  {os.path.basename(r.get('problem', ''))}: {key}: {str(r.get('message', ''))[:300]}",
                      flush=True)
            elif a.perf:
                print("  " + timing_line(r), flush=True)
        code = p.wait()
    wall = time.time() - t0
    mon.stop.set()
    mon.join()
    ooms = oom_kills() - ooms_before if ooms_before >= 0 else None
    speed = [(r.get("speedup") or {}).get("eager") for r in rows]
    speed = [x for x in speed if isinstance(x, (int, float)) and x > 0]
    summary = {
        "problems": len(items), "verdicts": len(rows), "exit": code, "wall_s": round(wall, 1), "counts": counts,
        "harness_failures": sum(v for k, v in counts.items() if k.startswith("no_verdict") or "server_died" in k
                                or "worker_error" in k),
        "oom_kills": ooms, "peak_host_used_bytes": mon.peak_host, "host_used_at_start_bytes": mon.base_host,
        "peak_gpu_used_bytes": mon.peak_gpu, "gpu_used_at_start_bytes": mon.base_gpu,
        "trials": a.trials, "perf": a.perf, "slots": a.slots, "every": a.every,
        "speedup_eager": sorted(speed),
        "retried": sum(1 for r in rows if r.get("harness_retries")),
        "stopped_by_signal": stopped[0] if stopped else None,
    }
    with open(name(".summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({k: v for k, v in summary.items() if k != "speedup_eager"}))
    if speed:
        s = sorted(speed)
        print(f"reference-as-candidate speedup vs eager: n={len(s)} median {s[len(s) // 2]:.3f} "
              f"min {s[0]:.3f} max {s[-1]:.3f}; outside +-10%: {sum(1 for x in s if abs(x - 1) > 0.1)}")
    if stopped:
        return 128 + stopped[0]
    return 0 if code in (0, 1) else code


if __name__ == "__main__":
    sys.exit(main())
