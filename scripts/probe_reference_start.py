"""Diagnostics (GPU): what the reference's first trial costs, piece by piece.

    python3 scripts/probe_reference_start.py [--problems P.py,...] [--reps 2] [--json-out F]

In a run the reference child's first forward took 4-5 s (median) on problems
whose forward is a few hundred microseconds (docs/PERFORMANCE.md). The
parent here imports what the worker's server imports and never touches CUDA;
each measurement runs in a child forked from it, as the reference is. Modes:

  plain      CUDA context, Model built and moved, first forward, second forward
  counter    the same, the first forward under the work model's FLOP counter
             (workmodel.counter(), as the reference runs its first trial)
  warm       the reference spare's warm-up first (children.warm_reference),
             then as `counter`
  cpu_first  one counted forward on CPU tensors first (what the server does
             once before it forks, left out of this parent), then as `counter`

Prints seconds per step (median over --reps). Nothing is asserted: this
measures.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "worker"))

MODES = ["plain", "counter", "warm", "cpu_first"]


def load(path: str):
    spec = importlib.util.spec_from_file_location("probe_problem", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def child(mode: str, problem: str) -> dict:
    import torch
    from mkevolve_worker import children, workmodel
    rec: dict = {}

    def step(name, fn):
        t = time.monotonic()
        out = fn()
        rec[name] = round(time.monotonic() - t, 4)
        return out
    dev = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a smoke test of this script only
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    step("cuda_context", lambda: (torch.zeros(1, device=dev), sync()))
    if mode == "warm":
        step("spare_warm_up", lambda: children.warm_reference(None))
    mod = load(problem)
    if mode == "cpu_first":
        def cpu_pass():
            m = mod.Model(*mod.get_init_inputs())
            with torch.no_grad(), workmodel.counter():
                m(*mod.get_inputs())
        step("cpu_counted_forward", cpu_pass)
    model = step("model_built_and_moved", lambda: mod.Model(*mod.get_init_inputs()).to(dev))
    xs = step("inputs_to_device", lambda: [x.to(dev) if torch.is_tensor(x) else x for x in mod.get_inputs()])

    def fwd(counted: bool):
        with torch.no_grad():
            if counted:
                with workmodel.counter():
                    model(*xs)
            else:
                model(*xs)
        sync()
    step("first_forward", lambda: fwd(mode != "plain"))
    step("second_forward", lambda: fwd(False))
    step("counted_again", lambda: fwd(True))
    return rec


def run_forked(mode: str, problem: str) -> dict:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = {"ok": True, **child(mode, problem)}
        except BaseException as e:  # noqa: BLE001
            out = {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data or b'{"ok": false, "error": "no answer"}')


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", default="examples/problems/07_attention_block.py,examples/problems/03_linear_gelu.py")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--json-out")
    args = ap.parse_args()
    from mkevolve_worker import children, serve
    # What the server has imported before it forks (no CUDA), but not its
    # counted CPU forward: cpu_first measures what that saves.
    real_warm, children.warm_counter = children.warm_counter, lambda device: False
    serve.preimport()
    children.warm_counter = real_warm
    results = []
    for problem in args.problems.split(","):
        for mode in MODES:
            reps = [run_forked(mode, os.path.join(ROOT, problem)) for _ in range(args.reps)]
            ok = [r for r in reps if r.get("ok")]
            keys = [k for k in (ok[0] if ok else {}) if k != "ok"]
            med = {k: round(statistics.median(r[k] for r in ok), 3) for k in keys}
            line = {"problem": os.path.basename(problem), "mode": mode, "median_s": med,
                    "errors": [r["error"] for r in reps if not r.get("ok")]}
            results.append(line)
            print(json.dumps(line), flush=True)
            if args.json_out:
                with open(args.json_out, "a") as f:
                    f.write(json.dumps(line) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
