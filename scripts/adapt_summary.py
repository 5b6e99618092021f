#!/usr/bin/env python3
"""What the gpu-suite stage `adapt` shows and checks (issue 17): a base run of
examples/sessions/conv_pool.py and its adaptations to the MaxPool and LPPool
variants, all driven by the HAND-WRITTEN FIXTURE LLM
examples/sessions/conv_pool_fixture.py (not a real LLM: its speedups say
nothing about what an LLM would reach).

  scripts/adapt_summary.py --budget 4 BASE_RUN ADAPT_RUN [ADAPT_RUN ...]

For the base run: its correctness, speedups and kernel LLM calls per
subproblem. For each adaptation: which subkernels were reused (re-verified,
0 LLM calls) and from where, which were evolved and with how many calls, the
LLM calls spent, the calls saved, correctness (the final check) and the
speedups vs torch.compile and eager. Reads only the run directories
(events.jsonl, solution/manifest.json).

Exit 0 when every run is as the stage expects: the base run correct; in each
adaptation conv_relu and pointwise_conv reused by `same source`, correct, with
no kernel call and reused_from in the manifest; the new pooling subproblem
evolved with exactly --budget kernel calls; the final check passed.
"""
from __future__ import annotations

import argparse
import collections
import json
import pathlib
import sys

KERNEL_AGENTS = {"generate", "debug", "optimize", "postfuse"}  # run::events::is_kernel_agent
SHARED = ("conv_relu", "pointwise_conv")  # the subproblems every variant keeps unchanged


def events(run: pathlib.Path) -> list[dict]:
    out = []
    path = run / "events.jsonl"
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass  # a torn last line of a run stopped at its limit
    return out


def manifest(run: pathlib.Path) -> dict:
    try:
        return json.loads((run / "solution" / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}


def x(v) -> str:
    """A speedup, or a dash when unknown (0 or missing: no baseline, or not correct)."""
    return f"{v:.2f}x" if isinstance(v, (int, float)) and v > 0 else "\u2014"


def kernel_calls(evs: list[dict]) -> collections.Counter:
    return collections.Counter(e.get("task") for e in evs
                               if e.get("type") == "llm_call" and e.get("agent") in KERNEL_AGENTS)


def final_check(evs: list[dict]) -> dict | None:
    checks = [e for e in evs if e.get("type") == "final_check"]
    return checks[-1] if checks else None


def e2e_line(man: dict, fc: dict | None) -> str:
    e2e = man.get("e2e") or {}
    ms = e2e.get("runtime_ms")
    # The verdict's form (speedup {eager, compile}); a manifest of an older build has them flat.
    speedup = e2e.get("speedup") or {"compile": e2e.get("speedup_compile"), "eager": e2e.get("speedup_eager")}
    fc_text = "no final check" if fc is None else (
        f"final check passed ({x(fc.get('speedup_compile'))} vs torch.compile on fresh inputs)" if fc.get("passed")
        else f"final check FAILED ({fc.get('status')} {fc.get('kind') or ''})")
    return (f"correct: {bool(man.get('correct'))}; {fc_text}; end to end {x(speedup.get('compile'))} vs "
            f"torch.compile, {x(speedup.get('eager'))} vs eager"
            + (f", {ms:.4f} ms" if isinstance(ms, (int, float)) else ""))


def subkernel_line(man: dict, evs: list[dict]) -> str:
    """Each subkernel of the solution with its own speedup vs torch.compile, from
    the last iteration event (the manifest names the subkernels, not their speeds)."""
    its = [e for e in evs if e.get("type") == "iteration"]
    speed = {s.get("name"): s.get("speedup_compile") for s in (its[-1].get("subkernels") or [])} if its else {}
    parts = []
    for s in man.get("subkernels", []):
        parts.append(f"{s.get('name')} {x(speed.get(s.get('name')))}"
                     + (" (reused)" if s.get("reused_from") else ""))
    return "subkernels vs torch.compile: " + (", ".join(parts) if parts else "\u2014")


def base_report(run: pathlib.Path) -> list[str]:
    evs, man = events(run), manifest(run)
    bad = []
    calls = kernel_calls(evs)
    print(f"base run {run.name}: {sum(calls.values())} kernel LLM calls "
          f"({', '.join(f'{t} {n}' for t, n in sorted(calls.items())) or 'none'})")
    print("  " + e2e_line(man, final_check(evs)))
    print("  " + subkernel_line(man, evs))
    if not man.get("correct"):
        bad.append(f"{run.name}: no correct solution")
    return bad


def adapt_report(run: pathlib.Path, budget: int) -> list[str]:
    evs, man = events(run), manifest(run)
    bad = []
    name = run.name
    if not evs:
        print(f"adapt {name}: no events (did it start?)")
        return [f"{name}: no events"]
    calls = kernel_calls(evs)
    decompose = sum(1 for e in evs if e.get("type") == "llm_call" and e.get("agent") == "decompose")
    reuse = [e for e in evs if e.get("type") == "reuse"]
    by_name = {s.get("name"): s for s in man.get("subkernels", [])}
    topo = [e for e in evs if e.get("type") == "topology"]
    subs = [s.get("name") for s in (topo[-1].get("subproblems", []) if topo else [])]
    print(f"adapt {name}: subproblems {', '.join(subs) or '?'}")
    for e in reuse:
        print(f"  reuse {e.get('task')} <- {e.get('from_task')} of {e.get('from_run')}: {e.get('match')}, "
              f"re-verified {e.get('status')}, {calls.get(e.get('task'), 0)} LLM calls here, "
              f"{e.get('calls_saved') if e.get('correct') else 0} saved")
    evolved = [t for t in subs if t not in {e.get("task") for e in reuse if e.get("correct")}]
    for t in evolved:
        agents = collections.Counter(e.get("agent") for e in evs if e.get("type") == "llm_call"
                                     and e.get("task") == t and e.get("agent") in KERNEL_AGENTS)
        print(f"  evolved {t}: {calls.get(t, 0)} kernel LLM calls ({', '.join(f'{a} {n}' for a, n in agents.items())})")
    saved = sum(e.get("calls_saved", 0) for e in reuse if e.get("correct"))
    print(f"  LLM calls spent: {sum(calls.values()) + decompose} ({decompose} decompose, {sum(calls.values())} kernel); "
          f"LLM calls saved: {saved}")
    print("  " + e2e_line(man, final_check(evs)))
    print("  " + subkernel_line(man, evs))

    for t in SHARED:
        ev = [e for e in reuse if e.get("task") == t]
        if len(ev) != 1 or ev[0].get("match") != "same source" or not ev[0].get("correct"):
            bad.append(f"{name}: {t} not reused by same source and correct: {ev}")
        if calls.get(t, 0):
            bad.append(f"{name}: {calls[t]} kernel calls for the reused {t}")
        if not str((by_name.get(t) or {}).get("reused_from", "")):
            bad.append(f"{name}: the manifest does not mark {t} reused_from")
    new = [t for t in subs if t not in SHARED]
    if len(new) != 1:
        bad.append(f"{name}: expected one new subproblem, got {new}")
    elif calls.get(new[0], 0) != budget:
        bad.append(f"{name}: {calls.get(new[0], 0)} kernel calls for {new[0]}, expected the budget {budget}")
    if sum(calls.values()) != budget:
        bad.append(f"{name}: {sum(calls.values())} kernel calls in all, expected the budget {budget}")
    fc = final_check(evs)
    if not man.get("correct") or not fc or not fc.get("passed"):
        bad.append(f"{name}: not correct end to end (final check {fc})")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=int, default=4, help="the adapt runs' --budget")
    ap.add_argument("base", type=pathlib.Path)
    ap.add_argument("adapted", type=pathlib.Path, nargs="+")
    args = ap.parse_args()
    print("(LLM: examples/sessions/conv_pool_fixture.py, a HAND-WRITTEN FIXTURE, not a real LLM)")
    if manifest(args.base).get("test_mode"):
        print("(CPU TEST MODE: torch-only stand-ins evaluated on the CPU; no speedup here says anything about GPU "
              "kernels)")
    bad = base_report(args.base)
    for run in args.adapted:
        bad += adapt_report(run, args.budget)
    for b in bad:
        print("FAIL", b)
    print(f"adapt: {'PASS' if not bad else 'FAIL'} ({len(args.adapted)} adaptations, {len(bad)} problems)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
