#!/usr/bin/env python3
"""Where one evaluation's device memory goes, trial by trial (a GPU probe).

Runs one timed evaluation through a worker server (`python -m
mkevolve_worker serve`, sandbox as configured) with the worker option
trace_memory on: the reference process reports its allocator's reserved,
allocated and peak bytes after each step of each trial (drawn, forward
returned, handed over, compared, released). Prints that trace against one
call's input size, and the footprint the evaluation recorded
(checks.footprint: each process's peak, the rule's copies), so a peak above
docs/EVAL.md's rule is traced to the trial and step that made it.

    python3 scripts/probe_reference_memory.py PROBLEM.py KERNEL.py [--json-out F]

Needs a CUDA GPU; writes nothing but --json-out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "python", "fixtures"))

from worker_client import WorkerClient  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("problem")
    ap.add_argument("kernel")
    ap.add_argument("--json-out")
    ap.add_argument("--no-perf", action="store_true", help="correctness trials only")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--max-split-mb", type=int, default=0,
                    help="the reference's allocator splits no cached block above this for smaller tensors "
                         "(worker option ref_max_split_mb; 0: torch's default)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mk-refmem-") as d:
        client = WorkerClient([], cwd=d)
        try:
            if not client.hello.get("cuda"):
                print("probe_reference_memory: no CUDA GPU visible to the worker", file=sys.stderr)
                return 2
            t0 = time.monotonic()
            msg, _ = client.request("eval", timeout=args.timeout * 3 + 120, problem=os.path.abspath(args.problem),
                                    kernel=os.path.abspath(args.kernel),
                                    options={"perf": not args.no_perf, "trace_memory": True,
                                             "timeout_s": args.timeout, "ref_max_split_mb": args.max_split_mb})
            wall = time.monotonic() - t0
        finally:
            client.close()
    if msg.get("type") != "result":
        print(f"probe_reference_memory: the worker answered {msg.get('type')}: {str(msg.get('message'))[:500]}",
              file=sys.stderr)
        return 1
    fp = (msg.get("checks") or {}).get("footprint") or {}
    unit = float(fp.get("input_bytes") or 0) or 1.0
    print(f"{os.path.basename(args.problem)} x {os.path.basename(args.kernel)}: {msg['status']} {msg.get('kind')} "
          f"in {wall:.1f} s; one call: in {fp.get('input_bytes', 0) / 1e9:.2f} GB, "
          f"out {fp.get('output_bytes', 0) / 1e9:.2f} GB; in place: {fp.get('in_place')}")
    print(f"peaks (GB): {json.dumps({k: round(v / 1e9, 2) for k, v in (fp.get('device_peaks') or {}).items()})}; "
          f"all {float(fp.get('device_peak_bytes') or 0) / 1e9:.1f} GB; rule {fp.get('device_rule')}")
    print(f"{'trial':<10} {'step':<17} {'reserved':>9} {'allocated':>9} {'peak':>9} {'shared':>7} {'default':>7} "
          f"{'split':>6} {'segs':>5}  largest [size, in use]   (in units of one call's inputs)")
    for row in fp.get("ref_trace") or []:
        tid, at, reserved, allocated, peak = row[:5]
        lay = (row[5] if len(row) > 5 else None) or {}
        pools = lay.get("pools") or {}
        big = " ".join(f"[{a / unit:.2f},{b / unit:.2f}]" for a, b in lay.get("largest") or [])
        print(f"{str(tid):<10} {str(at):<17} {reserved / unit:9.2f} {allocated / unit:9.2f} {peak / unit:9.2f} "
              f"{pools.get('shared', 0) / unit:7.2f} {pools.get('default', 0) / unit:7.2f} "
              f"{lay.get('split_free', 0) / unit:6.2f} {lay.get('segments', 0):5d}  {big}"
              f"{'  ' + lay['snapshot_error'] if lay.get('snapshot_error') else ''}")
    print(f"released: {json.dumps((msg.get('checks') or {}).get('handover'))}")
    if fp.get("ref_alloc"):
        print(f"reference allocator: {json.dumps(fp['ref_alloc'])}")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"problem": args.problem, "kernel": args.kernel, "wall_s": wall, "status": msg["status"],
                       "kind": msg.get("kind"), "footprint": fp,
                       "handover": (msg.get("checks") or {}).get("handover")}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
