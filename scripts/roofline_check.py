#!/usr/bin/env python3
"""Checks the roofline's inputs against independent counts (issue 15).

    scripts/roofline_check.py --bin build/mkevolve [--kb DIR] [--test-cpu] [--out F] [--overhead N]

Evaluates a few correct kernels with `mkevolve eval --json` and compares, for
each, the verdict's work record (checks.work, counted by the worker) with:

- bytes: the problem's inputs, output and parameters, counted here from the
  problem file on PyTorch's meta device (nothing allocated);
- FLOPs: torch.utils.flop_counter.FlopCounterMode over the same forward, where
  this torch has it (2.1 and later; not Debian's 1.13).

The derived DRAM bandwidth (bytes / measured time) is then within 10% of the
independent one exactly when the byte counts are; the same for FLOP rates.
Prints one line per kernel and exits 1 if any count is off by more than 10%.
With a GPU it also prints each kernel's compile metadata (registers, spills,
occupancy: checks.runtime.triton_kernels) and the roofline `mkevolve eval`
computed from the work record (the "roofline" member of its JSON).

--overhead N measures what profiling adds to one evaluation: for each kernel,
N evaluations with the profiling process and N without (the worker's
`profile: false`), alternated in one worker server (A B B A ...), each after
one discarded warm-up evaluation; the figure is the ratio of the medians of the
evaluations' own time (elapsed_s), less 1 (issue 15: at most 10%).
A measurement, run by gpu-suite.sh's `roofline` stage; --test-cpu checks the
script itself on a CPU (the worker's test mode).
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
P, K = ROOT / "examples" / "problems", ROOT / "examples" / "kernels"
PAIRS = [(P / "01_relu.py", K / "01_relu__triton.py"), (P / "03_linear_gelu.py", K / "03_linear_gelu__tiled.py"),
         (P / "02_softmax_wide.py", K / "02_softmax_wide__online.py"),
         (P / "05_layernorm_residual.py", K / "05_layernorm_residual__rowwise.py"),
         (P / "04_conv_relu_bias.py", K / "04_conv_relu_bias__implicit_gemm.py")]
KB_PAIRS = [("level1/19_ReLU.py", K / "01_relu__triton.py"), ("level1/23_Softmax.py", K / "02_softmax_wide__online.py"),
            ("level1/21_Sigmoid.py", K / "kernelbench" / "21_Sigmoid__triton.py")]


def independent(problem: Path) -> dict:
    """Bytes and (where torch can) FLOPs of one call, counted here."""
    import torch
    spec = importlib.util.spec_from_file_location("problem_under_check", problem)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def nbytes(obj):
        if isinstance(obj, torch.Tensor):
            return obj.numel() * obj.element_size()
        if isinstance(obj, (list, tuple)):
            return sum(nbytes(x) for x in obj)
        return 0
    with torch.device("meta") if hasattr(torch.device("meta"), "__enter__") else _NoCtx():
        torch.manual_seed(0)
        model = mod.Model(*mod.get_init_inputs()).to("meta")
        xs = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
    out = {"params": sum(p.numel() * p.element_size() for p in list(model.parameters()) + list(model.buffers()))}
    flops = None
    try:
        from torch.utils.flop_counter import FlopCounterMode
        with FlopCounterMode(display=False) as fc:
            with torch.no_grad():
                y = model(*xs)
        flops = fc.get_total_flops()
    except ImportError:
        with torch.no_grad():
            y = model(*xs)
    out.update(inputs=nbytes(xs), output=nbytes(y), flops=flops)
    out["bytes"] = out["inputs"] + out["output"] + out["params"]
    return out


class _NoCtx:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def profile_share(checks: dict):
    """What the profiling process took of one evaluation (issue 15: at most 10%):
    from the step before "profile collected" to it, less the wait for the profile
    lock, over the candidate's time until it exited, less its waits for the
    timing and profile locks. None without the phases (no profile, CPU mode)."""
    phases = checks.get("phases_s")
    if not isinstance(phases, list):
        return None
    t = [(str(p[0]), float(p[1])) for p in phases if isinstance(p, list) and len(p) == 2]
    names = [n for n, _ in t]
    if "profile collected" not in names or "exited" not in names:
        return None
    i = names.index("profile collected")
    waited = lambda k: float((checks.get(k) or {}).get("waited_s") or 0.0)
    prof = t[i][1] - (t[i - 1][1] if i else 0.0) - waited("profile_lock")
    own = t[names.index("exited")][1] - waited("timing_lock") - waited("profile_lock")
    return round(prof / own, 4) if own > 0 else None


def overhead(python: str, pairs: list, n: int, out_lines: list) -> list:
    """Profiling's share of one evaluation, measured side by side in one worker
    server: per kernel, n evaluations with the profiling process and n without."""
    import statistics
    import tempfile
    env = dict(os.environ, PYTHONPATH=str(ROOT / "worker"))
    cwd = tempfile.mkdtemp(prefix="roofline-overhead-")
    srv = subprocess.Popen([python, "-m", "mkevolve_worker", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True, env=env, cwd=cwd, bufsize=1)
    hello = json.loads(srv.stdout.readline())
    if hello.get("error"):
        print(f"overhead: the worker says: {hello['error']}", flush=True)
    ids = iter(range(1, 1 << 30))

    def ask(problem, kernel, profile):
        i = next(ids)
        srv.stdin.write(json.dumps({"id": i, "op": "eval", "problem": str(problem), "kernel": str(kernel),
                                    "options": {"profile": profile}}) + "\n")
        srv.stdin.flush()
        while True:
            m = json.loads(srv.stdout.readline())
            if m.get("id") == i and m.get("type") in ("result", "error"):
                return m
    rows = []
    try:
        for problem, kernel in pairs:
            ask(problem, kernel, True)  # warm-up: compiles, caches, spares
            on, off, bad = [], [], None
            for k in range(n):
                for prof in ((True, False) if k % 2 == 0 else (False, True)):
                    m = ask(problem, kernel, prof)
                    if m.get("type") != "result" or m.get("status") != "correct":
                        bad = f"{m.get('status') or m.get('type')}: {(m.get('message') or '')[:200]}"
                        continue
                    (on if prof else off).append(float(m["elapsed_s"]))
            if bad or not on or not off:
                line = f"overhead {problem.name} with {kernel.name}: no figure ({bad})"
                rows.append({"problem": problem.name, "kernel": kernel.name, "error": bad})
            else:
                mon, moff = statistics.median(on), statistics.median(off)
                line = (f"overhead {problem.name} with {kernel.name}: evaluation {mon:.2f} s with profiling, "
                        f"{moff:.2f} s without (medians of {len(on)} and {len(off)}): +{100 * (mon / moff - 1):.1f}%")
                rows.append({"problem": problem.name, "kernel": kernel.name, "with_s": on, "without_s": off,
                             "ratio": mon / moff})
            print(line, flush=True)
            out_lines.append(line)
    finally:
        try:
            srv.stdin.write(json.dumps({"id": 0, "op": "shutdown"}) + "\n")
            srv.stdin.flush()
            srv.wait(timeout=60)
        except Exception:
            srv.kill()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=str(ROOT / "build" / "mkevolve"))
    ap.add_argument("--python", default=os.environ.get("MKEVOLVE_PYTHON", sys.executable))
    ap.add_argument("--kb", help="a KernelBench checkout: also its 6.4 GB level-1 problems")
    ap.add_argument("--test-cpu", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--overhead", type=int, default=0, metavar="N",
                    help="also measure profiling's cost: N evaluations with and N without it per kernel")
    a = ap.parse_args()
    pairs = list(PAIRS)
    if a.kb:
        pairs += [(Path(a.kb) / "KernelBench" / rel, k) for rel, k in KB_PAIRS]
    bad, rows = 0, []
    if a.test_cpu:
        # No Triton here: each problem's own reference is its candidate (as
        # kernelbench_sweep.py does), which is enough to check the counts.
        import tempfile
        tmp = Path(tempfile.mkdtemp(prefix="roofline-check-"))
        swapped = []
        for problem, _ in pairs:
            k = tmp / f"ref_{problem.stem}.py"
            k.write_text(f"import importlib.util\nspec = importlib.util.spec_from_file_location('ref', {str(problem)!r})\n"
                         "m = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(m)\n\n\n"
                         "class ModelNew(m.Model):\n    pass\n")
            swapped.append((problem, k))
        pairs = swapped
    for problem, kernel in pairs:
        cmd = [a.bin, "eval", "--problem", str(problem), "--kernel", str(kernel), "--json", "--no-cache",
               "--python", a.python, "--shapes", "benchmark"]
        if a.test_cpu:
            cmd += ["--test-cpu-unsafe", "--allow-pytorch", "--no-perf", "--trials", "1"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        try:
            r = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            print(f"{problem.name}: no verdict (exit {p.returncode}): {p.stderr.strip()[-300:]}")
            bad += 1
            continue
        work = (r.get("checks") or {}).get("work")
        ind = independent(problem)
        ms = (r.get("runtime_ms") or {}).get("median") if isinstance(r.get("runtime_ms"), dict) else r.get("runtime_ms")
        row = {"problem": problem.name, "kernel": kernel.name, "status": r.get("status"), "runtime_ms": ms,
               "work": work, "independent": ind}
        row["profile_share"] = profile_share(r.get("checks") or {})
        rows.append(row)
        if not isinstance(work, dict) or "bytes" not in work:
            print(f"{problem.name}: {r.get('status')}: no work record")
            bad += 1
            continue
        b = work["bytes"] / ind["bytes"] if ind["bytes"] else float("nan")
        line = f"{problem.name} with {kernel.name}: {r.get('status')}; bytes {work['bytes']} vs {ind['bytes']} ({b:.3f})"
        ok = abs(b - 1) <= 0.10
        if ind["flops"] is not None:
            f = (work.get("flops") or 0) / ind["flops"] if ind["flops"] else (1.0 if not work.get("flops") else 0.0)
            line += f"; FLOPs {work.get('flops')} vs {ind['flops']} ({f:.3f})"
            ok = ok and abs(f - 1) <= 0.10
        else:
            line += "; FLOPs not checked (no FlopCounterMode in this torch)"
        if ms:
            line += f"; {work['bytes'] / (ms * 1e-3) / 1e9:.1f} GB/s derived at {ms:.4g} ms"
        if row["profile_share"] is not None:
            line += f"; profiling {100 * row['profile_share']:.0f}% of the evaluation"
        roof = r.get("roofline")
        row["roofline"] = roof
        if isinstance(roof, dict):
            line += (f"; roofline {roof.get('bound')}-bound, {100 * float(roof.get('fraction') or 0):.0f}% of it, "
                     f"{float(roof.get('achieved_gb_s') or 0):.0f} GB/s")
            if roof.get("achieved_tflops"):
                line += f", {float(roof['achieved_tflops']):.3g} TFLOP/s"
            if ms and abs(float(roof.get("achieved_gb_s") or 0) - work["bytes"] / (ms * 1e-3) / 1e9) > 1e-6 * (
                    work["bytes"] / (ms * 1e-3) / 1e9):
                line += " (DIFFERS from the bytes over the time)"
                ok = False
        tk = ((r.get("checks") or {}).get("runtime") or {}).get("triton_kernels")
        row["triton_kernels"] = tk
        print(("ok   " if ok else "FAIL ") + line, flush=True)
        if isinstance(tk, list):
            for k in tk[:4]:
                print(f"       {k.get('name')}: {k.get('n_regs')} regs, {k.get('n_spills')} spills, "
                      f"{k.get('shared_bytes')} B shared, {k.get('num_warps')} warps, {k.get('num_stages')} stages, "
                      f"occupancy {k.get('occupancy')} ({k.get('limited_by')})", flush=True)
        bad += 0 if ok else 1
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))
    if a.overhead > 0 and not a.test_cpu:
        lines = []
        ov = overhead(a.python, [(p, k) for p, k in pairs if p.parent == P], a.overhead, lines)
        if a.out:
            Path(a.out).with_suffix(".overhead.json").write_text(json.dumps(ov, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
