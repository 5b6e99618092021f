"""scripts/bench_eval_throughput.py, stopped by a stage's limit, keeps the ways
that finished (issue 38).

On an H100 (2026-12-05) gpu-suite's kbthroughput stage ran out of time in the
fresh way after the pool had given all 10 verdicts; the bench then wrote no
JSON at all and the stage's summary said "0 candidates". Here the two ways run
against stand-ins written in tmp_path: a `mkevolve` that answers every pair of
its batch at once, and a `python` whose every evaluation takes 30 s, so the
stage's SIGTERM lands in the fresh way. The bench must write the pool's figure
and say where it was stopped, and must not leave the fresh evaluation running.
"""
from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
BENCH = REPO / "scripts" / "bench_eval_throughput.py"

FAKE_MKEVOLVE = """#!/usr/bin/env python3
import json, sys
args = sys.argv[1:]
batch = args[args.index("--batch") + 1]
for line in open(batch):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    problem, kernel = line.split()[:2]
    print(json.dumps({"problem": problem, "kernel": kernel, "status": "correct", "kind": "ok"}), flush=True)
"""

FAKE_PYTHON = """#!/usr/bin/env python3
import os, sys, time
open(os.environ["FAKE_PIDS"], "a").write(f"{os.getpid()}\\n")
time.sleep(30)
print('{"status": "correct", "kind": "ok"}')
"""


def _script(path: pathlib.Path, text: str) -> str:
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


def test_a_bench_stopped_in_the_fresh_way_keeps_the_pools_figure(tmp_path):
    mk = _script(tmp_path / "mkevolve", FAKE_MKEVOLVE)
    py = _script(tmp_path / "python", FAKE_PYTHON)
    out = tmp_path / "bench.json"
    pids = tmp_path / "pids"
    env = dict(os.environ, FAKE_PIDS=str(pids))
    cache = tmp_path / "cache"
    cache.mkdir()
    p = subprocess.Popen([sys.executable, str(BENCH), "--mkevolve", mk, "--python", py, "--slots", "auto",
                          "--cache-home", str(cache), "--json-out", str(out)],
                         cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)  # until the fresh way's first evaluation runs
        assert pids.exists(), "the fresh way never started"
        p.send_signal(signal.SIGTERM)
        stdout, stderr = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + signal.SIGTERM, (p.returncode, stderr)
    rec = json.loads(out.read_text())
    n = rec["candidates"]
    assert n == 17
    [pool] = rec["runs"]
    assert pool["way"] == "pool, auto slots" and len(pool["verdicts"]) == n and pool["evals_per_minute"] > 0, pool
    assert rec["incomplete"] == []
    assert rec["stopped"]["way"] == "the fresh way" and rec["stopped"]["verdicts"] == 0 and rec["stopped"]["of"] == n
    assert "stopped in the fresh way after 0 of 17" in stdout
    # The fresh evaluation it was waiting on went with it.
    pid = int(pids.read_text().split()[0])
    time.sleep(0.2)
    try:
        os.kill(pid, 0)
        alive = pathlib.Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except ProcessLookupError:
        alive = False
    assert not alive, "the fresh evaluation outlived the bench"
