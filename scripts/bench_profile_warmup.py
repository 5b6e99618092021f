"""A/B measurement for the worker's experimental `profile_warmup` option (GPU).

On an H200 the runtime profile of one forward costs 4.4-6.2 s per candidate
(docs/GPU-RESULTS.md), mostly the profiler's start in the fresh candidate child.
With `profile_warmup` the child starts and stops an empty profiler session while
the server computes the expected outputs and compares, so the real profile might
start warm. This script measures whether it does, and whether the runtime checks
still catch what they caught before:

    python3 scripts/bench_profile_warmup.py [--json-out FILE]

One `serve --test-mode` worker (torch imported once) evaluates each kernel below
with the option off and on (off first, then on, then off again, so drift shows).
The cheats run with the static check off (a test-mode-only option), so only the
runtime layers can catch them. Reported per eval: verdict, and the seconds from
the start of "profiling one forward" to the timing lock (the profile's cost), and
of the warm-up itself. Exit status 1 when a verdict differs between the modes or
differs from the expected one; nothing is asserted about time.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python", "fixtures"))

from worker_client import WorkerClient  # noqa: E402

P = os.path.join(ROOT, "examples", "problems")
K = os.path.join(ROOT, "examples", "kernels")
# (problem, kernel, expected status, expected kind or None, static check on?)
CASES = [
    ("03_linear_gelu", "03_linear_gelu__tiled", "correct", None, True),
    ("05_layernorm_residual", "05_layernorm_residual__rowwise", "correct", None, True),
    ("07_attention_block", "07_attention_block__flash", "correct", None, True),
    ("03_linear_gelu", "03_linear_gelu__torch_fallback", "cheating", "foreign_kernel", False),
    ("03_linear_gelu", "03_linear_gelu__side_stream", "cheating", "timing_mismatch", False),
]


def seconds_between(phases: list, start_prefix: str, end_names: tuple) -> float | None:
    t0 = next((t for name, t in phases if name.startswith(start_prefix)), None)
    if t0 is None:
        return None
    t1 = next((t for name, t in phases if t >= t0 and name in end_names), None)
    return None if t1 is None else round(t1 - t0, 3)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json-out")
    args = ap.parse_args()
    client = WorkerClient(["--test-mode"], cwd=tempfile.mkdtemp(prefix="mk-profwarm-"))
    if not client.hello.get("cuda"):
        print("bench_profile_warmup: no CUDA GPU visible to the worker", file=sys.stderr)
        return 2
    rows = []
    try:
        for rnd, warm in enumerate((False, True, False)):
            for prob, kern, status, kind, static in CASES:
                # A seed per round: each eval draws its inputs afresh, as a new candidate would.
                r = client.eval(os.path.join(P, prob + ".py"), os.path.join(K, kern + ".py"), timeout=600,
                                test_cpu=False, perf=True, profile_warmup=warm, static_check=static,
                                seed=1000 + rnd)
                ph = (r.get("checks") or {}).get("phases_s") or []
                row = {"round": rnd, "warmup": warm, "kernel": kern, "status": r.get("status"),
                       "kind": r.get("kind"),
                       "profile_s": seconds_between(ph, "profiling one forward", ("timing lock taken", "exited")),
                       "warmup_s": seconds_between(ph, "warming the profiler", ("waiting for the verdict",)),
                       "child_s": ph[-1][1] if ph else None,
                       "expected": status + (f"/{kind}" if kind else "")}
                row["ok"] = row["status"] == status and (kind is None or row["kind"] == kind)
                rows.append(row)
                print(f"round {rnd} warmup={str(warm):5} {kern:36} {row['status']}/{row['kind']:16} "
                      f"profile {row['profile_s']} s  warm-up {row['warmup_s']} s  child {row['child_s']} s"
                      f"{'' if row['ok'] else '  UNEXPECTED (wanted ' + row['expected'] + ')'}", flush=True)
    finally:
        client.close()
    bad = [r for r in rows if not r["ok"]]
    differ = sorted({r["kernel"] for r in rows
                     if len({(x["status"], x["kind"]) for x in rows if x["kernel"] == r["kernel"]}) > 1})

    def mean(xs):
        xs = [x for x in xs if x is not None]
        return sum(xs) / len(xs) if xs else float("nan")
    for warm in (False, True):
        sel = [r for r in rows if r["warmup"] == warm and r["status"] == "correct"]
        print(f"profile_warmup={warm}: mean profile {mean([r['profile_s'] for r in sel]):.2f} s, "
              f"mean child life {mean([r['child_s'] for r in sel]):.2f} s over {len(sel)} correct evals")
    if differ:
        print("verdicts differ between modes for: " + ", ".join(differ))
    if bad:
        print(f"{len(bad)} unexpected verdicts")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if bad or differ else 0


if __name__ == "__main__":
    sys.exit(main())
