"""Large inputs timed in place (timing.in_place): the footprint arithmetic,
the refill rule, and end to end in CPU test mode, where the test-only option
test_pool_bytes makes small inputs take the large-input path."""

from __future__ import annotations

import json

import pytest

from conftest import cand, problem

GB = 1e9


def test_inputs_past_half_the_pool_are_timed_in_place():
    from mkevolve_worker import timing
    assert not timing.in_place(timing.POOL_BYTES // 2)
    assert timing.in_place(timing.POOL_BYTES // 2 + 1)
    assert timing.in_place(int(6.4 * GB))
    assert timing.pool_size(5, int(6.4 * GB)) == 1
    # The test-only pool size counts in test mode only.
    assert timing.pool_bytes_of({"test_pool_bytes": 8}, test_mode=True) == 8
    assert timing.pool_bytes_of({"test_pool_bytes": 8}, test_mode=False) == timing.POOL_BYTES
    assert timing.in_place(5, timing.pool_bytes_of({"test_pool_bytes": 8}, test_mode=True))


def test_in_place_refill_copies_only_the_last_calls_inputs():
    import torch
    from mkevolve_worker import timing
    first, last = [torch.zeros(4)], [torch.ones(4)]
    bufs = [first[0].clone()]
    copies = []
    orig = torch.Tensor.copy_

    refill = timing.make_refill(bufs, [first], last, in_place=True)
    try:
        torch.Tensor.copy_ = lambda self, src, *a, **k: (copies.append(float(src.sum())), orig(self, src, *a, **k))[1]
        for i in range(5):
            refill(i, i == 4)
        assert copies == [4.0], copies  # only the last call's inputs were copied in
        assert torch.equal(bufs[0], last[0])
        # A second series (the synced calls) starts again from the first set, once.
        for i in range(3):
            refill(i, i == 2)
        assert copies == [4.0, 0.0, 4.0], copies
    finally:
        torch.Tensor.copy_ = orig
    assert torch.equal(bufs[0], last[0])


def test_a_rotating_refill_copies_before_every_call():
    import torch
    from mkevolve_worker import timing
    pool = [[torch.full((2,), float(k))] for k in range(3)]
    bufs = [torch.zeros(2)]
    refill = timing.make_refill(bufs, pool, [torch.full((2,), 9.0)])
    seen = []
    for i in range(4):
        refill(i, i == 3)
        seen.append(float(bufs[0][0]))
    assert seen == [0.0, 1.0, 2.0, 9.0]


def test_the_timed_calls_hold_one_output_at_a_time(monkeypatch):
    """time_cuda frees each call's output before the next call (the GPU held
    two, and a third while the synced calls ran); faked CUDA, counted outputs."""
    import torch
    from mkevolve_worker import timing

    class Ev:
        def __init__(self, **_):
            pass

        def record(self):
            pass

        def elapsed_time(self, other):
            return 1.0

        def synchronize(self):
            pass
    monkeypatch.setattr(torch.cuda, "Event", Ev)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda *a: None, raising=False)
    live = {"n": 0, "most": 0}

    class Out:
        def __init__(self):
            live["n"] += 1
            live["most"] = max(live["most"], live["n"])

        def __del__(self):
            live["n"] -= 1
    taken = []
    times, out, info, synced = timing.time_cuda_with_synced(
        Out, lambda i, last: None, 2, 6, torch.zeros(1), "synced", take_out=lambda o: taken.append(o) or "host")
    assert live["most"] == 1, live  # the previous call's output is gone before the next call
    assert out == "host" and len(times) == 6
    taken.clear()
    live.update(n=0, most=0)
    monkeypatch.setattr(timing, "spin_cycles_per_ms", lambda: 1.0)
    timing.time_cuda_with_synced(Out, lambda i, last: None, 2, 6, torch.zeros(1), "device",
                                 take_out=lambda o: None)
    assert live["most"] == 1, live  # the last timed output left before the synced calls


def test_device_accounting_of_a_large_timed_evaluation():
    """The accounting docs/EVAL.md gives (and the pool's estimate_device):
    6.4 GB in and out fit three times on an H200; the old 9 + 5 did not."""
    from mkevolve_worker import footprint
    i = o = 6.4 * GB
    acc = footprint.device_accounting(i, o, timed=True)
    assert acc["copies"] == {"reference": (1, 1), "candidate": (1, 1), "profiling": (0, 1)}
    # Each process at its own peak holds 2 I + 3 O in all, but never all at
    # once: the candidate gives its output back before the profiled burst,
    # and the profiling process is gone before the timed calls.
    assert acc["phases"] == {"trials": (2, 2), "profiling": (2, 2), "timed": (2, 2)}
    assert acc["data_bytes"] == pytest.approx(2 * i + 2 * o)
    assert acc["bytes"] <= 3 * (i + o) + 2.2 * GB
    assert 3 * acc["bytes"] < 139 * 2**30
    assert 3 * (9 * i + 5 * o) > 139 * 2**30  # before
    untimed = footprint.device_accounting(i, o, timed=False)
    assert untimed["copies"] == {"reference": (1, 1), "candidate": (1, 1)}
    small = footprint.device_accounting(64e6, 64e6, timed=True)
    assert small["copies"]["reference"][0] == 2 and small["pool_bytes"] == 3 * 5 * 64e6
    assert small["phases"]["profiling"] == (6, 2) and small["data_bytes"] == pytest.approx(6 * 64e6 + 2 * 64e6)


def test_device_phases_sum_what_the_processes_hold_at_once():
    """The measured footprint: the processes' high-water marks summed over the
    phase that held the most, not every process's peak summed; what the
    candidate did not report is counted as before, and says so."""
    from mkevolve_worker import footprint
    peaks = {"ref": 13, "cand": 13, "prof": 6}
    assert footprint.device_phases(peaks, cand_held=6, cand_timed=13, timed=True) == (
        {"trials": 26, "profiling": 25, "timed": 26}, True)
    # It ended during its timed calls: its wait is known, its timed peak is not.
    assert footprint.device_phases(peaks, cand_held=6, timed=True) == ({"trials": 26, "profiling": 25}, False)
    # Nothing reported: all three at their peaks, as before.
    assert footprint.device_phases(peaks, timed=True) == ({"trials": 26, "profiling": 32}, False)
    # A candidate that held more through its timed calls than in its trials counts so.
    assert max(footprint.device_phases(peaks, 6, 20, timed=True)[0].values()) == 33
    # Untimed: the reference and the candidate.
    assert footprint.device_phases({"ref": 13, "cand": 13}) == ({"trials": 26}, True)
    assert footprint.device_phases({"ref": 13}) == ({"trials": 13}, False)


G = 10**9  # whole bytes: the worker takes only integer peaks


class _Child:
    """What _record_footprint reads of a child: its events and its files."""

    def __init__(self, tmp_path, name, events=(), files=None):
        self.dir = tmp_path / name
        self.dir.mkdir()
        self.events = list(events)
        for f, obj in (files or {}).items():
            (self.dir / f).write_text(json.dumps(obj))

    def path(self, name):
        return str(self.dir / name)


def _record(tmp_path, state_more, cand_files, prof=True, timed=None):
    tmp_path = tmp_path / f"eval{len(list(tmp_path.iterdir()))}"
    tmp_path.mkdir()
    from types import SimpleNamespace
    from mkevolve_worker import evaluate
    state = {"device_peaks": {"cand": 13 * G}, "input_bytes": 6 * G, "output_bytes": 6 * G, "ref_s": 0.1,
             **state_more}
    ref2 = _Child(tmp_path, "ref", [{"ev": "mem", "device_peak": 13 * G}])
    pr = _Child(tmp_path, "prof", files={"runtime.json": {"device_peak": 6 * G}}) if prof else None
    cand = _Child(tmp_path, "cand", files=cand_files)
    res = SimpleNamespace(checks={})
    evaluate.Evaluator._record_footprint(None, res, state, ref2, pr, cand, perf=timed)
    return res.checks["footprint"]


def test_the_footprint_takes_the_candidates_wait_and_timed_peak_from_its_events_and_timing_record(tmp_path):
    """The wiring: the candidate's device_held (timing_ready, kept as
    state["cand_held"]) and its timing.json's device_peak make the phases;
    device_peak_bytes is the largest plus a CUDA context per process."""
    from mkevolve_worker import footprint
    ctx = footprint.CUDA_CONTEXT_BYTES
    fp = _record(tmp_path, {"cand_held": 6 * G}, {"timing.json": {"times_ms": [1.0], "device_peak": 13 * G}})
    assert fp["device_phases"] == {"trials": 26 * G, "profiling": 25 * G, "timed": 26 * G}
    assert fp["device_peak_bytes"] == 26 * G + 3 * ctx
    assert fp["device_complete"] is True and fp["device_rule_version"] == footprint.DEVICE_RULE_VERSION
    assert fp["device_rule"]["phases"]["profiling"] == {"inputs": 2, "outputs": 2}


def test_a_candidate_that_ended_before_its_timed_record_leaves_an_incomplete_footprint(tmp_path):
    fp = _record(tmp_path, {"cand_held": 6 * G}, {})
    assert set(fp["device_phases"]) == {"trials", "profiling"} and fp["device_complete"] is False
    # Nothing of its wait either: the plain sum of the three peaks, as before the phases.
    fp = _record(tmp_path, {}, {})
    assert fp["device_phases"]["profiling"] == 32 * G and fp["device_complete"] is False


def _large(**kw):
    return dict(perf=True, perf_trials=5, warmup=2, test_pool_bytes=8, **kw)


def test_an_honest_candidate_is_timed_in_place(worker_server):
    r = worker_server.eval(problem("add"), cand("add_ok"), **_large())
    assert r["status"] == "correct", r
    t = r["checks"]["timing"]
    assert t["in_place"] is True and "in place" in t["inputs"], t
    assert r["checks"]["timed_output"] == {"checked": True, "ok": True}
    small = worker_server.eval(problem("add"), cand("add_ok"), perf=True, perf_trials=5, warmup=2)
    assert small["checks"]["timing"]["in_place"] is False


def test_caching_results_between_timed_calls_is_caught_in_place(worker_server):
    r = worker_server.eval(problem("add"), cand("add_caching"), trials_dist="none", **_large())
    assert r["status"] == "cheating" and r["kind"] == "stale_output", r
    assert r["checks"]["timing"]["in_place"] is True
    rule = r["checks"]["footprint"]["device_rule"]["copies"]
    assert rule["profiling"] == {"inputs": 0, "outputs": 1}, rule


def test_a_reference_that_draws_random_numbers_passes_in_place(worker_server):
    r = worker_server.eval(problem("dropout_train"), cand("dropout_train_ref"), **_large())
    assert r["status"] == "correct", r
    cheat = worker_server.eval(problem("dropout_train"), cand("dropout_train_caching"), trials_dist="none",
                               **_large())
    assert cheat["status"] == "cheating" and cheat["kind"] == "stale_output", cheat
    assert cheat["checks"]["timing"]["in_place"] is True


def test_a_forward_that_changes_its_inputs_as_its_reference_does_is_refilled(worker_server, tmp_path):
    """Timed in place, the calls would read what the previous call left; a
    candidate that writes to its inputs (allowed: the reference does too) gets
    them refilled before every call, and its last call is checked."""
    p = tmp_path / "doubles.py"
    p.write_text("""
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        x.mul_(2.0)
        return x + 1.0

def get_inputs():
    return [torch.randn(64, 32)]

def get_init_inputs():
    return []
""")
    k = tmp_path / "doubles_new.py"
    k.write_text(p.read_text().replace("class Model(", "class ModelNew("))
    r = worker_server.eval(str(p), str(k), **_large())
    assert r["status"] == "correct", r
    assert r["checks"]["timed_output"] == {"checked": True, "ok": True}, r["checks"]["timed_output"]
    mutate = tmp_path / "mutate_cache.py"
    mutate.write_text("""
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.cache = None

    def forward(self, x):
        self.calls += 1
        x.mul_(2.0)
        if self.calls <= 6:
            return x + 1.0
        if self.cache is None:
            self.cache = x + 1.0
        return self.cache
""")
    cheat = worker_server.eval(str(p), str(mutate), trials_dist="none", **_large())
    assert cheat["status"] == "cheating" and cheat["kind"] == "stale_output", cheat
    assert cheat["checks"]["timing"]["in_place"] is True


# -- the transformed trials' inputs: one copy of a large input, not two ---------

_PEAK_PROBE = r"""
import json, sys
sys.path.insert(0, {worker!r})
import torch
from mkevolve_worker import correctness as C
N = {n}
KEEP = {keep}
g = torch.rand(N) if KEEP else None
cfg = {{"get_inputs": (lambda: [g]) if KEEP else (lambda: [torch.rand(N)])}}
C.generate_inputs({{"get_inputs": lambda: [torch.rand(16)]}}, {{"seed": 1, "alt": True}})  # libraries warmed
def status(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(key + ":"))
try:  # the high-water mark starts again from here (Linux 4.0 and later)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
except OSError:
    pass
before = status("VmRSS")
peak0 = status("VmHWM")
xs = C.generate_inputs(cfg, {trial})
peak = status("VmHWM")
print(json.dumps({{"before": before, "peak0": peak0, "peak": peak, "held": status("VmRSS") - before,
                   "uses": hasattr(torch._C, "_storage_Use_Count")}}))
"""


def _generation_peak(trial: dict, n: int, keep: bool = False) -> dict:
    """One trial's inputs drawn in a process of their own: how far above
    the memory it held before the draw its high-water mark went (VmHWM, the
    process's own; getrusage's would carry the forking pytest's across exec)."""
    import json
    import subprocess
    import sys
    from conftest import WORKER_DIR
    code = _PEAK_PROBE.format(worker=WORKER_DIR, n=n, keep=keep, trial=repr(trial))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["peak0"] < r["before"] + (64 << 20), r  # the high-water mark was not already above the draw's
    r["rise"] = r["peak"] - r["before"]
    return r


N_LARGE = 96 << 20  # float32 elements: 384 MiB, far above any library's own allocations


def test_an_alternate_trials_drawn_inputs_are_gone_before_their_replacement_is_drawn():
    """The signed-normal trial draws get_inputs() for its scale, then draws
    the replacement: the first is let go before the second exists. On the
    GPU the shared pool keeps what it once held, so before, one such trial
    left two copies of a large input in it for the rest of the evaluation.
    Measured here by the process's high-water mark on the CPU."""
    s = N_LARGE * 4
    r = _generation_peak({"seed": 3, "alt": True}, N_LARGE)
    assert r["rise"] < 1.3 * s, (r, s)  # before: 2 x s
    assert abs(r["held"] - s) < 0.2 * s, (r, s)


def test_an_input_the_problem_keeps_is_never_written_by_a_transformed_trial():
    """A problem that hands out the same tensor every call keeps it as it
    was, whatever trial drew it: both the scaled and the signed-normal ones
    make new tensors then; the values are the same either way. Under a
    torch that cannot count a storage's users (Debian's 1.13) every scaled
    input is a new tensor, so this holds the values only; the GPU suite's
    copy (tests/gpu, torch 2.x) holds the in-place rule too."""
    import torch
    from mkevolve_worker import correctness as C
    g = torch.rand(1000)
    keep = g.clone()
    view_of = torch.rand(2000)
    view_keep = view_of.clone()
    cfg = {"get_inputs": lambda: [g, view_of[:1000], g.detach(), torch.arange(4)]}
    for name, f in C.TRIAL_DISTS.items():
        if name == "x1":
            continue
        xs = C.generate_inputs(cfg, {"seed": 5, "alt": True, "dist": name})
        assert torch.equal(g, keep) and torch.equal(view_of, view_keep), name
        assert torch.equal(xs[0], keep * f) and torch.equal(xs[1], view_keep[:1000] * f), name
        assert torch.equal(xs[2], keep * f) and torch.equal(xs[3], torch.arange(4)), name
    ys = C.generate_inputs(cfg, {"seed": 5, "alt": True})
    assert torch.equal(g, keep) and float(ys[0].min()) < 0


def test_one_tensor_twice_in_the_inputs_is_scaled_once_in_each_place():
    import torch
    from mkevolve_worker import correctness as C
    cfg = {"get_inputs": lambda: [torch.full((8,), 2.0)] * 2}
    xs = C.generate_inputs(cfg, {"seed": 1, "alt": True, "dist": "x3"})
    assert torch.equal(xs[0], torch.full((8,), 6.0)) and torch.equal(xs[1], torch.full((8,), 6.0))


def test_a_scaled_trials_fresh_inputs_are_scaled_where_they_lie():
    """x3, x0.01 and neg on a freshly drawn input write it in place, where
    this torch can tell that nothing else holds it (torch._C.
    _storage_Use_Count, torch 2.x: the GPU machine's); an older torch makes
    a new tensor, as before (the values are the same)."""
    s = N_LARGE * 4
    r = _generation_peak({"seed": 3, "alt": True, "dist": "neg"}, N_LARGE)
    if not r["uses"]:
        assert r["rise"] > 1.7 * s, (r, s)  # a new tensor beside the drawn one: what _only_ours guards
        pytest.skip("this torch cannot count a storage's users: scaled inputs are new tensors here")
    assert r["rise"] < 1.3 * s, (r, s)
    kept = _generation_peak({"seed": 3, "alt": True, "dist": "x3"}, N_LARGE, keep=True)
    assert kept["rise"] > 0.7 * s, (kept, s)  # the problem's own tensor was left alone: a second one was made


def test_a_timed_evaluation_without_a_profile_is_complete_only_with_its_timed_calls(tmp_path):
    """Found by review: timed with profiling off (no profiling process), a run
    that ended before its timed calls counted as complete, and its trials'
    figure could then replace a whole measurement."""
    fp = _record(tmp_path, {}, {}, prof=False, timed=True)
    assert fp["device_phases"] == {"trials": 26 * G} and fp["device_complete"] is False
    fp = _record(tmp_path, {}, {"timing.json": {"times_ms": [1.0], "device_peak": 14 * G}}, prof=False, timed=True)
    assert fp["device_phases"] == {"trials": 26 * G, "timed": 27 * G} and fp["device_complete"] is True
    # Untimed: the trials are the whole of it.
    assert _record(tmp_path, {}, {}, prof=False, timed=False)["device_complete"] is True
    from mkevolve_worker import footprint
    assert footprint.device_phases({"ref": 1, "cand": 1}, cand_timed=2, timed=True, profiled=False) == (
        {"trials": 2, "timed": 3}, True)
