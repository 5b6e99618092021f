#!/usr/bin/env python3
"""Where a run's evaluations spent their time: a benchmark aid, not a test.

Reads every candidate's result.json under RUN_DIR/candidates/ (the pool's
`queued_s` and `eval_s`, and the worker's `phases_s`: [milestone, seconds since
the candidate's process was handed its job]) and prints, over the candidates that
reached each milestone, the median and the 90th percentile of when they reached
it, so a reader sees which step of an evaluation dominates:

    python3 scripts/eval_phases.py runs/attn            # a table
    python3 scripts/eval_phases.py runs/attn --json     # the same, as JSON

Trial numbers are folded out of the milestone names ("running forward (trial
3)" counts as "running forward (trial N)"); a milestone's first occurrence per
candidate is the one taken.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import sys


def pct(xs: list, q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def fold(name: str) -> str:
    return re.sub(r"\d+", "N", name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    files = glob.glob(os.path.join(a.run_dir, "candidates", "*", "*", "result.json"))
    if not files:
        print(f"{a.run_dir}: no candidates/*/*/result.json", file=sys.stderr)
        return 2
    by_status: dict = {}
    marks: dict = {}   # milestone -> [seconds]
    order: dict = {}   # milestone -> median position, for printing in order
    queued, evals = [], []
    for f in files:
        try:
            r = json.load(open(f))
        except (OSError, ValueError):
            continue
        st = r.get("status", "?")
        by_status[st] = by_status.get(st, 0) + 1
        if not r.get("eval_s"):
            continue  # cached, or never evaluated (a reply that did not parse)
        evals.append(float(r["eval_s"]))
        queued.append(float(r.get("queued_s") or 0.0))
        seen = set()
        for pos, item in enumerate(r.get("phases_s") or []):
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], (int, float))):
                continue
            name = fold(str(item[0]))
            if name in seen:
                continue
            seen.add(name)
            marks.setdefault(name, []).append(float(item[1]))
            order.setdefault(name, []).append(pos)
    rows = [{"milestone": k, "n": len(v), "median_s": round(statistics.median(v), 3),
             "p90_s": round(pct(v, 0.9), 3)} for k, v in marks.items()]
    rows.sort(key=lambda x: x["median_s"])
    out = {"candidates": len(files), "evaluated": len(evals), "by_status": by_status,
           "eval_s": {"median": round(statistics.median(evals), 3), "p90": round(pct(evals, 0.9), 3),
                      "sum": round(sum(evals), 1)} if evals else None,
           "queued_s": {"median": round(statistics.median(queued), 3), "p90": round(pct(queued, 0.9), 3),
                        "max": round(max(queued), 3)} if queued else None,
           "milestones": rows}
    if a.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"{out['candidates']} candidates, {out['evaluated']} evaluated; by status {by_status}")
    if evals:
        print(f"evaluation: median {out['eval_s']['median']:.2f} s, p90 {out['eval_s']['p90']:.2f} s; "
              f"queue wait: median {out['queued_s']['median']:.2f} s, p90 {out['queued_s']['p90']:.2f} s")
    print(f"{'milestone (s since the candidate got its job)':<58} {'n':>4} {'median':>8} {'p90':>8}")
    for r in rows:
        print(f"{r['milestone'][:58]:<58} {r['n']:>4} {r['median_s']:>8.2f} {r['p90_s']:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
