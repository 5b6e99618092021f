#!/usr/bin/env python3
"""Checks what issue 33 asks of a messy session's `mkevolve run`, from its run
directory (events.jsonl, candidates/, summary.json, solution/manifest.json),
and prints one line per check and a summary line:

  1. the decomposition was accepted, within the bound recorded with it (a tenth
     of the problem's tolerance), and its measured error is stated;
  2. the layout task's kernel failed its own trials on the composition's layout
     (a candidate's verdict names "a non-contiguous view") and a later one of
     that task was correct;
  3. a composition failed, was blamed on the names task and sent back to its
     beam (no TotalFuse), and a later composition was correct;
  4. a correct candidate of each fallback task carries static warnings (PyTorch
     compute on lines that never ran), not a cheating verdict (skipped for a run
     in the worker's CPU test mode, whose static checks are off);
  5. the final check passed and the run's speedup is the final check's.

  scripts/messy_check.py runs/m43 --layout-task causal_attention --names-task out_proj \\
      --fallback-task causal_attention [--json-out FILE] [--test-mode]

Defaults for the three problems of examples/sessions/messy_gpu_fixture.py come
from the run's problem name. Exit status 0 when every check passed.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys

DEFAULTS = {
    "99_Matmul_GELU_Softmax": ("softmax_cols", "linear_gelu", ["softmax_cols"]),
    "43_MinGPTCausalAttention": ("causal_attention", "out_proj", ["causal_attention"]),
    "31_VisionAttention": ("self_attention", "add_layernorm", ["self_attention"]),
}


def load_events(run: str) -> list[dict]:
    out = []
    try:
        with open(os.path.join(run, "events.jsonl"), encoding="utf-8") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


def load_json(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def candidate_results(run: str, task: str) -> dict:
    """candidate id -> its result.json (the verdict)."""
    out = {}
    for p in glob.glob(os.path.join(run, "candidates", task, "*", "result.json")):
        r = load_json(p)
        if isinstance(r, dict):
            out[os.path.basename(os.path.dirname(p))] = r
    return out


def check(run: str, layout_task: str, names_task: str, fallback_tasks: list[str], test_mode: bool) -> dict:
    ev = load_events(run)
    of = lambda t: [e for e in ev if e.get("type") == t]  # noqa: E731
    checks, facts = [], {}

    def add(name: str, ok: bool, detail: str):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})

    # 1. The decomposition.
    vd = [e for e in of("verify_decomposition") if e.get("agent", "decompose") == "decompose"]
    acc = next((e for e in vd if e.get("ok")), None)
    if acc:
        outs = (acc.get("tolerance") or {}).get("outputs") or [{}]
        bound = outs[0]
        err = acc.get("max_abs_err")
        facts["decomposition"] = {"max_abs_err": err, "max_rel_err": bound.get("max_rel_err"),
                                  "atol": bound.get("atol"), "rtol": bound.get("rtol"),
                                  "fraction": (acc.get("tolerance") or {}).get("fraction"),
                                  "seconds": acc.get("seconds"), "attempts": len(vd)}
        ok = err is not None and (acc.get("tolerance") or {}).get("fraction") == 0.1
        add("decomposition accepted", ok, f"max_abs_err {err} within atol {bound.get('atol')} + rtol "
            f"{bound.get('rtol')}*|ref| (a tenth of the problem's tolerance), {len(vd)} attempt(s)")
    else:
        add("decomposition accepted", False, f"no accepted decomposition in {len(vd)} attempt(s): "
            + "; ".join(f for e in vd[:1] for f in (e.get("failures") or [])[:3]))

    # 2. The layout failure, named, then mended.
    evals = [e for e in of("eval") if e.get("task") == layout_task and not e.get("e2e")]
    results = candidate_results(run, layout_task)
    named = sorted(c for c, r in results.items() if "non-contiguous view" in json.dumps(r))
    first_bad = next((e for e in evals if e.get("status") != "correct"), None)
    later_ok = first_bad is not None and any(e.get("status") == "correct" and e.get("seq", 0) > first_bad.get("seq", 0)
                                             for e in evals)
    facts["layout"] = {"task": layout_task, "evals": [(e.get("candidate"), e.get("status"), e.get("kind"))
                                                      for e in evals], "named_in": named}
    add("layout failure named and mended", bool(first_bad) and bool(named) and later_ok,
        f"{layout_task}: first failing candidate {first_bad and first_bad.get('candidate')} "
        f"({first_bad and first_bad.get('status')}, {first_bad and first_bad.get('kind')}); verdicts naming a "
        f"non-contiguous view: {', '.join(named) or 'none'}; a later candidate correct: {later_ok}")

    # 3. The composition failure, blamed and repaired.
    cf = of("composition_failure")
    blamed = [e for e in cf if e.get("action") == "back_to_beam" and e.get("task") == names_task]
    e2e = [e for e in of("eval") if e.get("e2e") and e.get("scope") == "e2e"
           and str(e.get("candidate", "")).startswith("t")]
    after = blamed[0].get("iteration", 0) if blamed else None
    repaired = bool(blamed) and any(e.get("status") == "correct" and e.get("iteration", 0) > after for e in e2e)
    total_fuse = [e for e in of("topology") if e.get("reason") == "total_fuse"]
    facts["composition"] = {"failures": [{k: e.get(k) for k in ("iteration", "task", "action", "status", "kind")}
                                         for e in cf],
                            "e2e": [(e.get("candidate"), e.get("status"), e.get("kind")) for e in e2e],
                            "message": (blamed[0].get("message") or "")[:600] if blamed else None}
    add("crashing composition repaired", repaired and not total_fuse,
        f"composition failures {[(e.get('iteration'), e.get('task'), e.get('action'), e.get('kind')) for e in cf]}; "
        f"end-to-end {[(e.get('candidate'), e.get('status')) for e in e2e]}; TotalFuse {len(total_fuse)}")

    # 4. Fallbacks that never run: warnings, not cheating.
    if test_mode:
        add("fallbacks are warnings", True, "skipped: the worker's CPU test mode runs no static checks")
    else:
        # A stored verdict (candidates/*/result.json, the manifest's e2e) keeps
        # the reasons, not the worker's checks: a finding on a line that never
        # ran is a reason marked "(warning)".
        def warnings_in(r):
            return [x for x in (r.get("reasons") or []) if "torch-compute (warning)" in x]

        parts, ok = [], True
        for task in fallback_tasks:
            res = candidate_results(run, task)
            warned = sorted(c for c, r in res.items() if r.get("status") == "correct" and warnings_in(r))
            cheating = sorted(c for c, r in res.items() if r.get("status") == "cheating")
            ok &= bool(warned) and not cheating
            parts.append(f"{task}: correct with warnings {', '.join(warned) or 'none'}; cheating "
                         f"{', '.join(cheating) or 'none'}")
        manifest = load_json(os.path.join(run, "solution", "manifest.json")) or {}
        facts["solution_static_warnings"] = len(warnings_in(manifest.get("e2e") or {}))
        parts.append(f"the solution's end-to-end verdict: {(manifest.get('e2e') or {}).get('status')}, "
                     f"{facts['solution_static_warnings']} static warning(s)")
        add("fallbacks are warnings", ok, "; ".join(parts))

    # 5. The final check.
    fc = of("final_check")
    summary = load_json(os.path.join(run, "summary.json")) or {}
    speed = summary.get("speedup") or {}
    passed = bool(fc) and fc[-1].get("passed") and summary.get("correct") and speed.get("measured_by") == "final_check"
    facts["final_check"] = fc[-1] if fc else None
    facts["speedup"] = speed
    last = fc[-1] if fc else {}
    add("final check passed", passed,
        f"final check {last.get('status', 'none')}, precision {(last.get('precision') or {}).get('precision')}; "
        f"speedup vs torch.compile {speed.get('compile')}, vs eager {speed.get('eager')} (measured by "
        f"{speed.get('measured_by')}); runtime {last.get('runtime_ms')} ms")
    return {"run": run, "problem": summary.get("problem_name"), "ok": all(c["ok"] for c in checks),
            "checks": checks, "facts": facts, "llm_calls": len(of("llm_call")),
            "candidates": len([e for e in of("eval") if not e.get("e2e")])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="the run directory")
    ap.add_argument("--layout-task")
    ap.add_argument("--names-task")
    ap.add_argument("--fallback-task", action="append")
    ap.add_argument("--test-mode", action="store_true",
                    help="the run was in the worker's CPU test mode (also read from the run's manifest and versions)")
    ap.add_argument("--json-out", help="write the result as JSON here")
    args = ap.parse_args(argv)
    problem = (load_json(os.path.join(args.run, "summary.json")) or {}).get("problem_name")
    if problem is None:
        for e in load_events(args.run):
            if e.get("type") == "llm_call" and e.get("agent") == "decompose":
                problem = e.get("task")
                break
    d = DEFAULTS.get(problem or "", (None, None, []))
    layout, names = args.layout_task or d[0], args.names_task or d[1]
    fallbacks = args.fallback_task or d[2]
    if not layout or not names:
        ap.error(f"no defaults for problem {problem!r}: give --layout-task and --names-task")
    manifest = load_json(os.path.join(args.run, "solution", "manifest.json")) or {}
    test_mode = args.test_mode or manifest.get("test_mode") is True or "test mode" in str(
        (load_json(os.path.join(args.run, "versions.json")) or {}).get("gpu", ""))
    res = check(args.run, layout, names, fallbacks, test_mode)
    for c in res["checks"]:
        print(f"  {'ok  ' if c['ok'] else 'FAIL'} {c['check']}: {c['detail']}")
    dec = res["facts"].get("decomposition") or {}
    sp = res["facts"].get("speedup") or {}
    print(f"messy {res['problem'] or problem}: {'PASS' if res['ok'] else 'FAIL'} "
          f"({sum(c['ok'] for c in res['checks'])}/{len(res['checks'])} checks; decomposition max_abs_err "
          f"{dec.get('max_abs_err')}; {res['llm_calls']} LLM calls, {res['candidates']} candidates; speedup vs "
          f"compile {sp.get('compile')}, vs eager {sp.get('eager')})")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1, default=str)
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
