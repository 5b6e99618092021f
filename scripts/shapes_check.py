#!/usr/bin/env python3
"""Issue #35 on the GPU: kernels that hold at the shapes users run.

    python3 scripts/shapes_check.py --kb KB_ROOT --out DIR [--bin build/mkevolve] [--python PY]
        [--tag shapes] [--perf] [--problems level1/40_LayerNorm.py,...] [--eval-args "..."]

For three KernelBench problems at their real sizes (default: level1/40_LayerNorm,
level2/99_Matmul_GELU_Softmax, level3/43_MinGPTCausalAttention) it writes two
candidates each:

- honest: the problem's own reference as ModelNew (`class ModelNew(Model): pass`,
  evaluated under --allow-pytorch, as scripts/kernelbench_sweep.py does);
- hardcoded: the same, but its forward insists on the benchmark's batch size
  (captured from the file's own constants when it is imported), as a kernel
  whose grid or reshape hard-codes the shape would.

Then one `mkevolve eval --batch --json --allow-pytorch` per mode, `--shapes
search` and `--shapes check` (--no-perf unless --perf), and checks:

- honest: correct in both modes, holding at every variant the reference runs;
- hardcoded: rejected under search, its message naming the shape variant it
  failed at; correct under check (the benchmark's verdict), with every variant
  listed as failed.

Streams DIR/TAG-search.jsonl and DIR/TAG-check.jsonl as verdicts come, then
prints a table and writes DIR/TAG.summary.json. Exit 0 when every expectation
holds. KB_ROOT holds KernelBench/level{1,2,3} (fetched, never committed). Only
the Python standard library is used.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

DEFAULT = "level1/40_LayerNorm.py,level2/99_Matmul_GELU_Softmax.py,level3/43_MinGPTCausalAttention.py"

HARDCODED = '''

# Shape-hard-coded stand-in (scripts/shapes_check.py): holds only at the
# benchmark's batch size, captured from this file's own constant at import.
_HARD_BATCH = {batch}


class ModelNew(Model):
    def forward(self, *args, **kwargs):
        if args[0].shape[0] != _HARD_BATCH:
            raise RuntimeError(f"hard-coded for batch {{_HARD_BATCH}}, got {{args[0].shape[0]}}")
        return super().forward(*args, **kwargs)
'''

HONEST = "\n\n# The reference as its own candidate (scripts/shapes_check.py).\nclass ModelNew(Model):\n    pass\n"


def batch_constant(src: str) -> str | None:
    for name in ("batch_size", "batch", "B", "N", "M"):
        if re.search(rf"^{name}\s*=", src, re.M):
            return name
    return None


def write_candidates(kb: str, problems: list[str], work: str) -> tuple[str, list[dict]]:
    rows = []
    pairs = os.path.join(work, "pairs.txt")
    with open(pairs, "w") as f:
        for rel in problems:
            path = os.path.join(kb, "KernelBench", rel)
            src = open(path).read().rstrip() + "\n"
            b = batch_constant(src)
            if b is None:
                raise SystemExit(f"{rel}: no batch constant to hard-code")
            stem = rel.replace("/", "_")[:-3]
            for kind, tail in (("honest", HONEST), ("hardcoded", HARDCODED.format(batch=b))):
                cand = os.path.join(work, f"{stem}__{kind}.py")
                with open(cand, "w") as c:
                    c.write(src + tail)
                f.write(f"{os.path.abspath(path)} {cand}\n")
                rows.append({"problem": rel, "kind": kind, "kernel": cand})
    return pairs, rows


def run_mode(args, pairs: str, mode: str, out_path: str) -> tuple[int, float]:
    cmd = [args.bin, "eval", "--batch", pairs, "--json", "--stream", "--no-cache", "--allow-pytorch",
           "--shapes", mode, "--python", args.python]
    if not args.perf:
        cmd.append("--no-perf")
    cmd += args.eval_args.split()
    print("==", " ".join(cmd), flush=True)
    t0 = time.monotonic()
    with open(out_path, "w") as out, open(out_path[:-6] + ".err", "w") as err:
        rc = subprocess.call(cmd, stdout=out, stderr=err)
    return rc, time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kb", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bin", default="build/mkevolve")
    ap.add_argument("--python", default=os.environ.get("MKEVOLVE_PYTHON", "python3"))
    ap.add_argument("--tag", default="shapes")
    ap.add_argument("--perf", action="store_true", help="time them too (at the benchmark's shape)")
    ap.add_argument("--problems", default=DEFAULT)
    ap.add_argument("--eval-args", default="", help="more `mkevolve eval` arguments (e.g. --test-cpu-unsafe with "
                                                   "small copies of the problems, to run the plumbing on a CPU)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="shapes-check.")
    pairs, rows = write_candidates(args.kb, args.problems.split(","), work)
    verdicts: dict = {}
    seconds: dict = {}
    for mode in ("search", "check"):
        path = os.path.join(args.out, f"{args.tag}-{mode}.jsonl")
        rc, secs = run_mode(args, pairs, mode, path)
        seconds[mode] = round(secs, 1)
        for line in open(path):
            if line.strip():
                v = json.loads(line)
                verdicts[(mode, v["index"])] = v
        print(f"   --shapes {mode}: exit {rc}, {secs:.0f} s", flush=True)
    problems_found = []
    ok = True
    print(f"\n{'problem':<42} {'kernel':<10} {'mode':<7} {'status':<10} holds at")
    for mode in ("search", "check"):
        for i, r in enumerate(rows):
            v = verdicts.get((mode, i))
            if v is None:
                problems_found.append(f"{r['problem']} {r['kind']} {mode}: no verdict")
                ok = False
                continue
            sh = (v.get("checks") or {}).get("shapes") or {}
            held, failed, skipped = sh.get("held") or [], sh.get("failed") or [], sh.get("skipped") or []
            variants = len(held) + len(failed)
            print(f"{r['problem']:<42} {r['kind']:<10} {mode:<7} {v['status']:<10} "
                  f"{len(held)}/{variants} variants (benchmark {sh.get('benchmark')}); "
                  f"failed {[f['shape'] for f in failed]}; skipped {[s['shape'] for s in skipped]}")
            want_correct = r["kind"] == "honest" or mode == "check"
            why = []
            if (v["status"] == "correct") != want_correct:
                why.append(f"status {v['status']}: {str(v.get('message', ''))[:300]}")
            if r["kind"] == "honest" and (failed or not held):
                why.append(f"honest kernel failed at {failed} (held {held})")
            if r["kind"] == "hardcoded":
                if mode == "search" and "failed at shape variant" not in str(v.get("message", "")):
                    why.append("the search-mode message names no shape variant: " + str(v.get("message", ""))[:300])
                if mode == "check" and (held or not failed):
                    why.append(f"check mode: held {held}, failed {failed}")
            if why:
                ok = False
                problems_found.append(f"{r['problem']} {r['kind']} {mode}: " + "; ".join(why))
    summary = {"ok": ok, "seconds": seconds, "problems": problems_found,
               "verdicts": [{"mode": m, **rows[i], "status": v["status"], "kind": v.get("kind"),
                             "message": str(v.get("message", ""))[:500],
                             "shapes": (v.get("checks") or {}).get("shapes")} for (m, i), v in sorted(verdicts.items())]}
    with open(os.path.join(args.out, f"{args.tag}.summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    for p in problems_found:
        print("FAIL", p)
    print(f"shapes: {'every expectation held' if ok else f'{len(problems_found)} expectation(s) failed'} "
          f"(search {seconds.get('search')} s, check {seconds.get('check')} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
