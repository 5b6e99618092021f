#!/usr/bin/env python3
"""How long N worker servers take to start together on a GPU, with the
sandbox self-test run by every server or taken from a kept verdict
(worker/mkevolve_worker/selftest_cache.py). A diagnostic for issue 38's
server start, not a test.

    scripts/probe_server_start.py OUT.jsonl [--servers 10] [--rounds 2]

Each round starts N servers at once (`python -m mkevolve_worker serve`, as the
pool does, with CUDA_VISIBLE_DEVICES=0), waits for every hello, and shuts
them down. Three ways, interleaved round by round so that the machine's
drift falls on all of them alike:
  retest  MKEVOLVE_SANDBOX_VERDICTS empty: every server tests its plan (the old way)
  cold    an empty verdict folder: one server tests and keeps, the rest wait and take it
  kept    the folder `cold` filled: every server takes the kept verdict
One JSON line per server and one per round go to OUT as they come: each
server's hello time from the round's start, its startup_s (preimport,
gpu_probe, sandbox_selftest, sandbox_selftest_kept, total) and the plan chosen.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python", "fixtures"))

from worker_client import WorkerClient  # noqa: E402


def one_round(way: str, n: int, folder: str, out, rnd: int) -> dict:
    env = {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "0"),
           "MKEVOLVE_SANDBOX_VERDICTS": "" if way == "retest" else folder}
    clients: list = [None] * n
    rows: list = [None] * n
    t0 = time.monotonic()

    def start(i: int) -> None:
        try:
            c = WorkerClient(extra_env=env)
            clients[i] = c
            h = c.hello
            st = h.get("sandbox_selftest") or {}
            rows[i] = {"way": way, "round": rnd, "server": i, "hello_s": round(time.monotonic() - t0, 3),
                       "startup_s": h.get("startup_s"), "chosen": st.get("chosen"),
                       "cached": bool(st.get("cached")), "kept": st.get("kept"),
                       "seed": (st.get("cached") or {}).get("seed"), "waited_s": (st.get("cached") or {}).get("waited_s"),
                       "cuda_ipc": (h.get("sandbox") or {}).get("cuda_ipc")}
        except BaseException as e:  # noqa: BLE001
            rows[i] = {"way": way, "round": rnd, "server": i, "error": f"{type(e).__name__}: {e}"[:500]}

    threads = [threading.Thread(target=start, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    all_s = round(time.monotonic() - t0, 3)
    for r in rows:
        out.write(json.dumps(r) + "\n")
    closers = [threading.Thread(target=c.close) for c in clients if c is not None]
    for t in closers:
        t.start()
    for t in closers:
        t.join()
    ok = [r for r in rows if "error" not in r]
    summary = {"way": way, "round": rnd, "servers": n, "all_hellos_s": all_s,
               "selftest_s": sorted((r["startup_s"] or {}).get("sandbox_selftest", 0) for r in ok),
               "kept_taken": sum(r["cached"] for r in ok), "errors": n - len(ok)}
    out.write(json.dumps({"summary": summary}) + "\n")
    out.flush()
    print(json.dumps(summary), flush=True)
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--servers", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    with open(args.out, "a", encoding="utf-8") as out, tempfile.TemporaryDirectory(prefix="verdicts-") as tmp:
        for rnd in range(args.rounds):
            folder = os.path.join(tmp, f"round{rnd}")
            for way in ("retest", "cold", "kept"):
                one_round(way, args.servers, folder, out, rnd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
