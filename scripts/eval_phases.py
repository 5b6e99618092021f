#!/usr/bin/env python3
"""Where a run's evaluations spent their time: a benchmark aid, not a test.

Reads every candidate's result.json under RUN_DIR/candidates/ (the pool's
`queued_s` and `eval_s`, and the worker's `phases_s`: [milestone, seconds since
the candidate's process was handed its job]) and prints, over the candidates that
reached each milestone, the median and the 90th percentile of when they reached
it, so a reader sees which step of an evaluation dominates:

    python3 scripts/eval_phases.py runs/attn            # a table
    python3 scripts/eval_phases.py runs/attn --json     # the same, as JSON
    python3 scripts/eval_phases.py runs/attn --rounds   # per beam round (events.jsonl)

--rounds reads events.jsonl as well and prints, for every beam round of every
task (candidates joined to the llm_call that wrote them), its slowest LLM call
and its slowest evaluation, and for that candidate the steps between its
milestones; then the decomposition checks and each iteration's end-to-end
evaluations. That is where a round's time besides the LLM goes, one round at a
time. (A round's records are logged together when it ends, so their
timestamps do not tell when each reply or verdict came; the latencies and
evaluation times do.)

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


def ts_of(e: dict):
    import datetime
    t = e.get("ts")
    if not isinstance(t, str):
        return None
    try:
        return datetime.datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def rounds_report(run_dir: str, results: dict) -> int:
    """Per beam round: the slowest LLM call and evaluation, and that candidate's steps."""
    try:
        lines = open(os.path.join(run_dir, "events.jsonl"), encoding="utf-8").read().splitlines()
    except OSError as e:
        print(f"{run_dir}: {e.strerror}", file=sys.stderr)
        return 2
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    t0 = next((t for t in map(ts_of, events) if t is not None), 0.0)
    where: dict = {}      # candidate -> (iteration, task, round)
    latencies: dict = {}  # (iteration, task, round) -> [LLM seconds]
    verdicts: dict = {}   # (iteration, task, round) -> [eval record]
    e2e: list = []
    for e in events:
        if e.get("type") == "llm_call" and e.get("candidate") and e.get("round") is not None:
            k = (e.get("iteration", 0), e.get("task", "?"), e["round"])
            where[e["candidate"]] = k
            latencies.setdefault(k, []).append((e.get("latency_ms") or 0) / 1000.0)
        elif e.get("type") == "eval" and not e.get("e2e"):
            k = where.get(e.get("candidate"))
            if k is not None:
                verdicts.setdefault(k, []).append(e)
        elif e.get("type") == "eval" and e.get("e2e"):
            e2e.append(((ts_of(e) or t0) - t0, e))
        elif e.get("type") == "verify_decomposition":
            print(f"verify_decomposition ({e.get('agent')}, sample {e.get('sample')}): took {e.get('seconds') or 0:.2f} s, "
                  f"{'ok' if e.get('ok') else 'failed'}")
    print(f"{'iter':>4} {'task':<22} {'rnd':>3} {'n':>3} {'llm max':>8} {'eval max':>8}  slowest evaluation: steps (s)")
    def took(v: dict) -> float:
        return (v.get("queued_s") or 0) + (v.get("eval_s") or 0)
    for k in sorted(latencies):
        vs = verdicts.get(k, [])
        line = f"{k[0]:>4} {k[1][:22]:<22} {k[2]:>3} {len(latencies[k]):>3} {max(latencies[k]):>8.1f}"
        if not vs:
            print(line)
            continue
        last = max(vs, key=took)
        line += f" {took(last):>8.1f}"
        r = results.get(last.get("candidate"), {})
        steps, prev = [], 0.0
        for name, sec in (r.get("phases_s") or []):
            if name in ("compared", "profile burst let go", "profiler: profiled calls done",
                        "profiler: trace written", "profiler: profiled", "profile collected",
                        "next candidate's spares warm", "timing lock taken",
                        "exited", "server: verdict ready") or name.startswith("forward returned (trial c0t0"):
                steps.append(f"{name.split(' (')[0][:24]} +{sec - prev:.2f}")
                prev = sec
        q = last.get("queued_s") or 0.0
        b = last.get("baseline_s") or 0.0
        # Its wait for live evaluations of higher priority, before the candidate started (gpulock.py).
        d = next((-sec for name, sec in (r.get("phases_s") or [])
                  if name == "deferred to higher-priority evaluations"), 0.0)
        print(f"{line}  queued {q:.2f}, baselines {b:.2f}, deferred {d:.2f}; " + ", ".join(steps))
    for t, e in e2e:
        line = (f"e2e iteration {e.get('iteration')}: {e.get('status')} ended {t:.1f} s, "
                f"queued {e.get('queued_s') or 0:.2f} s, evaluating {e.get('eval_s') or 0:.2f} s"
                + (f", waited {e['waited_s']:.2f} s" if e.get("waited_s") is not None else ""))
        # Its milestones, from e2e/<candidate>.json (written since the sixteenth session).
        try:
            r = json.load(open(os.path.join(run_dir, "e2e", f"{e.get('candidate')}.json")))
        except (OSError, ValueError):
            r = {}
        steps, prev = [], 0.0
        for name, sec in sorted(r.get("phases_s") or [], key=lambda p: p[1]):
            if sec - prev >= 0.2:
                steps.append(f"{name.split(' (')[0][:28]} +{sec - prev:.2f}")
            prev = max(prev, sec)
        print(line + ("; " + ", ".join(steps) if steps else ""))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--rounds", action="store_true", help="per beam round, from events.jsonl too")
    a = ap.parse_args()
    files = glob.glob(os.path.join(a.run_dir, "candidates", "*", "*", "result.json"))
    if not files:
        print(f"{a.run_dir}: no candidates/*/*/result.json", file=sys.stderr)
        return 2
    by_status: dict = {}
    if a.rounds:
        results = {}
        for f in files:
            try:
                results[os.path.basename(os.path.dirname(f))] = json.load(open(f))
            except (OSError, ValueError):
                pass
        return rounds_report(a.run_dir, results)
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
