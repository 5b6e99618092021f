"""Issue 38: the harness's own passes (the profiled calls, the timed calls) are
never charged to a candidate whose outputs were all correct: one that overruns
is no verdict (the pool retries it), never timeout/hang; and the profiling pass
is sized by how fast the candidate's calls ran in its correctness trials."""

from __future__ import annotations

import time

from mkevolve_worker import evaluate
from worker_client import cand, problem


def test_a_correct_candidate_whose_timed_pass_overruns_gets_no_verdict_not_a_hang(worker_server):
    t0 = time.monotonic()
    r = worker_server.eval(problem("add"), cand("add_slow_when_timed"), timeout_s=6, trials=2, alt_dist_trials=0,
                           trials_dist="none", perf=True, warmup=1, perf_trials=3)
    assert r["status"] == "no_verdict" and r["kind"] == "pass_overrun", r
    assert r.get("retryable") is True, r
    assert "every output was correct" in r["message"], r["message"]
    assert time.monotonic() - t0 < 120
    # The same candidate's failure in a trial is still its own (a plain hang in forward).
    h = worker_server.eval(problem("add"), cand("hang"), timeout_s=2)
    assert h["status"] == "timeout" and h["kind"] == "hang", h


def test_the_profiling_pass_is_cut_to_fit_where_calls_are_slow():
    opts = {"timeout_s": 300.0}
    # Fast calls: every call is profiled.
    fast = evaluate.pass_plan(150, 4, [0.002, 0.003], opts)
    assert fast["calls"] == 150 and "why" not in fast
    # 2 s a call (a multi-GB input on a loaded CPU): a fifth of the deadline, 60 s, holds 30 calls.
    slow = evaluate.pass_plan(150, 4, [1.5, 2.0], opts)
    assert slow["calls"] == 4 + 30 and slow["expected_s"] == 68.0, slow
    assert "34 of 150 calls profiled" in slow["why"], slow
    # Never fewer than the pool sets and MIN_PROFILED_CALLS.
    crawl = evaluate.pass_plan(150, 4, [100.0], opts)
    assert crawl["calls"] == 4 + evaluate.MIN_PROFILED_CALLS, crawl
    # Unknown speed: as before.
    assert evaluate.pass_plan(150, 4, None, opts)["calls"] == 150
