"""scripts/bench_eval_throughput.py, stopped by a stage's limit, keeps the ways
that finished (issue 38).

On an H100 (2026-12-05) gpu-suite's kbthroughput stage ran out of time in the
fresh way after the pool had given all 10 verdicts; the bench then wrote no
JSON at all and the stage's summary said "0 candidates". Here the two ways run
against stand-ins written in tmp_path: a `mkevolve` that answers every pair of
its batch at once, and a `python` whose every evaluation takes 30 s, so the
stage's SIGTERM lands in the fresh way. The bench must write the pool's figure
and say where it was stopped, and must not leave the evaluation it waited on running
(a fresh process, or a streaming pool).
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


def _gone(pid: int) -> bool:
    """Whether process pid has ended (a zombie counts as ended), within 5 s."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if pathlib.Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


def _stopped_once_started(cmd, env, pids, what: str, settle_s: float = 0.0):
    """Runs the bench, and sends it SIGTERM once a stand-in wrote its pid to
    `pids` (and settle_s more): (exit status, stdout, stderr)."""
    p = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pids.exists(), f"{what} never started"
        time.sleep(settle_s)
        p.send_signal(signal.SIGTERM)
        stdout, stderr = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    return p.returncode, stdout, stderr


def test_a_bench_stopped_in_the_fresh_way_keeps_the_pools_figure(tmp_path):
    mk = _script(tmp_path / "mkevolve", FAKE_MKEVOLVE)
    py = _script(tmp_path / "python", FAKE_PYTHON)
    out = tmp_path / "bench.json"
    pids = tmp_path / "pids"
    env = dict(os.environ, FAKE_PIDS=str(pids))
    cache = tmp_path / "cache"
    cache.mkdir()
    rc, stdout, stderr = _stopped_once_started(
        [sys.executable, str(BENCH), "--mkevolve", mk, "--python", py, "--slots", "auto",
         "--cache-home", str(cache), "--json-out", str(out)], env, pids, "the fresh way")
    assert rc == 128 + signal.SIGTERM, (rc, stderr)
    rec = json.loads(out.read_text())
    n = rec["candidates"]
    assert n == 17
    [pool] = rec["runs"]
    assert pool["way"] == "pool, auto slots" and len(pool["verdicts"]) == n and pool["evals_per_minute"] > 0, pool
    assert rec["incomplete"] == []
    assert rec["stopped"]["way"] == "the fresh way" and rec["stopped"]["verdicts"] == 0 and rec["stopped"]["of"] == n
    assert "stopped in the fresh way after 0 of 17" in stdout
    # The fresh evaluation it was waiting on went with it.
    assert _gone(int(pids.read_text().split()[0])), "the fresh evaluation outlived the bench"


SLOW_MKEVOLVE = """#!/usr/bin/env python3
import json, os, sys, time
args = sys.argv[1:]
batch = args[args.index("--batch") + 1]
pairs = [l.split()[:2] for l in open(batch) if l.strip() and not l.startswith("#")]
problem, kernel = pairs[0]
print(json.dumps({"problem": problem, "kernel": kernel, "status": "correct", "kind": "ok"}), flush=True)
open(os.environ["FAKE_PIDS"], "a").write(f"{os.getpid()}\\n")
time.sleep(30)
"""


def test_a_bench_stopped_in_a_streaming_pool_says_how_far_it_got_and_stops_the_pool(tmp_path):
    mk = _script(tmp_path / "mkevolve", SLOW_MKEVOLVE)
    out = tmp_path / "bench.json"
    pids = tmp_path / "pids"
    cache = tmp_path / "cache"
    cache.mkdir()
    rc, _, stderr = _stopped_once_started(
        [sys.executable, str(BENCH), "--mkevolve", mk, "--slots", "auto", "--ways", "pool",
         "--cache-home", str(cache), "--json-out", str(out), "--stream", str(tmp_path / "s.jsonl")],
        dict(os.environ, FAKE_PIDS=str(pids)), pids, "the pool", settle_s=0.3)
    assert rc == 128 + signal.SIGTERM, (rc, stderr)
    rec = json.loads(out.read_text())
    assert rec["runs"] == [] and rec["stopped"]["way"] == "the pool at auto slots", rec
    assert rec["stopped"]["verdicts"] == 1 and rec["stopped"]["of"] == 17, rec
    assert _gone(int(pids.read_text().split()[0])), "the pool outlived the bench"


def test_the_pools_timeline_says_where_its_seconds_went():
    """A streamed pool run's records give when the candidates were handed
    over (arrival less eval_s and queued_s), the first and last verdicts and
    the exit after the last, and how many evaluations waited for their
    slot's server to start; a run that streamed nothing has none."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_eval_throughput", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    phases = {"a": {"arrived_s": 20.0, "queued_s": 0.0, "eval_s": 8.5, "server_start_s": 6.25},
              "b": {"arrived_s": 55.0, "queued_s": 1.0, "eval_s": 42.0, "server_start_s": 0.0},
              "c": {"arrived_s": None}}
    assert bench.pool_timeline(phases, 60.5) == {"submitted_s": 11.5, "first_verdict_s": 20.0,
                                                 "last_verdict_s": 55.0, "exit_after_last_s": 5.5,
                                                 "server_starts": 1, "server_start_max_s": 6.25}
    assert bench.pool_timeline({"x": {"phases_s": []}}, 3.0) is None
