"""Issue 38: the harness's own passes (the profiled calls, the timed calls) are
never charged to a candidate whose outputs were all correct: one that overruns
is no verdict (the pool retries it), never timeout/hang; and the profiling pass
is sized by how fast the candidate's calls ran in its correctness trials."""

from __future__ import annotations

import time

from mkevolve_worker import evaluate
from worker_client import cand, problem


_ADD = """
import time
import torch
import torch.nn as nn

class {cls}(nn.Module):
    def forward(self, a, b):
        time.sleep({sleep})
        return a + b

def get_inputs():
    return [torch.randn(8, 8), torch.randn(8, 8)]

def get_init_inputs():
    return []
"""


def _sleeping_add(tmp_path, ref_s: float, cand_s: float):
    """A problem whose forward adds two 8x8 tensors after sleeping ref_s, and
    a candidate that does the same after sleeping cand_s."""
    p = tmp_path / "add_sleeping.py"
    p.write_text(_ADD.format(cls="Model", sleep=ref_s))
    k = tmp_path / "add_sleeping_new.py"
    k.write_text(_ADD.format(cls="ModelNew", sleep=cand_s))
    return p, k


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


def test_the_passes_are_sized_by_the_reference_where_it_is_slower():
    opts = {"timeout_s": 300.0, "warmup": 10, "perf_trials": 100, "wall_check": True}
    # The candidate's calls were fast in its trials; the reference took 2 s on the same inputs.
    slow_ref = evaluate.pass_plan(150, 4, [0.002], opts, ref_s=2.0)
    assert slow_ref["calls"] == 4 + 30 and slow_ref["per_call_s"] == 2.0, slow_ref
    assert evaluate.pass_plan(150, 4, None, opts, ref_s=2.0)["calls"] == 34
    # The timed pass: three times its calls at the slower speed, plus 30 s, at most twice the deadline.
    assert evaluate.timed_pass_s(opts, 5, [0.001], 0.0, "cpu") == 3 * 115 * 0.001 + 30
    assert evaluate.timed_pass_s(dict(opts, timeout_s=20.0), 5, [0.001], 0.5, "cpu") == 40.0
    gpu = evaluate.timed_pass_s(opts, 5, [0.01], 0.002, "cuda")
    assert gpu == 3 * (115 + 30 + 240) * 0.01 + 30


def test_a_timed_pass_slower_than_the_deadline_at_the_references_speed_still_finishes(worker_server, tmp_path):
    """Reference and candidate take 1 s a call: the trials, the last call's
    reference and the timed calls overrun a 5 s deadline from the candidate's
    start, but the timed calls get the time they need from their go."""
    p, k = _sleeping_add(tmp_path, ref_s=1.0, cand_s=1.0)
    r = worker_server.eval(str(p), str(k), timeout_s=5, trials=1, alt_dist_trials=0, trials_dist="none", perf=True,
                           warmup=1, perf_trials=3, profile=False, timeout=120)
    assert r["status"] == "correct", r
    assert r["checks"]["timed_pass_s"] == 10.0, r["checks"]  # twice the deadline: 3 x 5+ calls x 1 s + 30 s is more


def test_the_profiling_pass_counts_the_first_calls_compile_once_not_per_call():
    """On an H100 (2026-12-05) a 6.4 GB ReLU's first call took 5 s (a compile
    and a first use), its later ones 4 ms: sized by the first, 12 of 142
    calls were profiled; sized by the later ones, all are, and the first's
    extra seconds are counted once in the time the pass should take."""
    opts = {"timeout_s": 120.0}
    plan = evaluate.pass_plan(142, 1, [5.0, 0.0043, 0.0045, 0.0044], opts)
    assert plan["calls"] == 142 and "why" not in plan, plan
    assert plan["per_call_s"] == 0.0045 and plan["first_call_extra_s"] == 4.9955, plan
    assert plan["expected_s"] == round(4.9955 + 142 * 0.0045, 3), plan
    # Slow later calls still cut the pass, and the first's extra shrinks the budget they share.
    slow = evaluate.pass_plan(150, 4, [12.0, 2.0, 1.5], opts)
    assert slow["calls"] == 4 + 12 and slow["expected_s"] == 10.0 + 16 * 2.0, slow
    # The slowest call after the first sets the speed, whichever trial it was.
    assert evaluate.pass_plan(150, 4, [0.1, 0.1, 3.0], opts)["per_call_s"] == 3.0


def test_the_passes_are_sized_by_the_candidates_own_calls_timed_on_the_servers_clock(worker_server, tmp_path):
    """The candidate's forward takes 0.3 s a call, the reference's nothing:
    the timed pass gets at least three times its calls at 0.3 s plus 30 s,
    which only the candidate's own calls, bracketed in its trials by the
    'fwd' events the server stamps, can have told it."""
    p, k = _sleeping_add(tmp_path, ref_s=0.0, cand_s=0.3)
    r = worker_server.eval(str(p), str(k), timeout_s=60, trials=2, alt_dist_trials=0, trials_dist="none", perf=True,
                           warmup=1, perf_trials=3, profile=False, timeout=120)
    assert r["status"] == "correct", r
    calls = 1 + (r["checks"]["timing"].get("extra_warmup") or 0) + 3  # warm-up, extra warm-up, timed
    # Each call took 0.3 s and a little more (a sleep); the reference's calls alone would give 30 s.
    # The server stamps the 'fwd' events as it reads them: on a loaded machine (CI runs 4 tests on
    # 2 cores) a start read late makes a call look shorter (0.293 s seen), so the lower bound is 0.2 s.
    assert 3 * calls * 0.2 + 30 <= r["checks"]["timed_pass_s"] <= 3 * calls * 0.6 + 30, (calls, r["checks"])
    # The timed phase's own milestones, for where its time goes.
    phases = [p[0] for p in r["checks"]["phases_s"]]
    assert phases.index("timing") < phases.index("handing over the last timed output") \
        < phases.index("timed_last compared"), phases
