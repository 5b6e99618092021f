"""Correctness logic end to end through the server (test mode, CPU, torch-only candidates)."""

from __future__ import annotations

import os
import time

import pytest

from conftest import cand, problem


def test_correct_candidate_passes(worker_server):
    r = worker_server.eval(problem("add"), cand("add_ok"))
    assert r["status"] == "correct", r
    assert r["kind"] == "ok"
    assert r["max_abs_err"] == 0.0
    c = r["checks"]["correctness"]
    # 5 trials + 1 alternate-distribution trial + inputs x3, x0.01 and negated
    assert c["trials_run"] == 9
    assert c["dist_trials"] == ["c0x3", "c0x0.01", "c0neg"] and c["trials_dist"] == "x1,x3,x0.01,neg"
    assert c["tf32"] is False
    assert r["checks"]["static"]["enforced"] is False


def test_seeded_construction_gives_the_same_weights(worker_server):
    r = worker_server.eval(problem("linear_relu"), cand("linear_relu_ok"))
    assert r["status"] == "correct", r


def test_the_verdict_carries_the_work_one_call_must_do(worker_server):
    # For the roofline (issue 15): bytes in, out and of the parameters, and the
    # matmul FLOPs, counted from the reference's own forward.
    r = worker_server.eval(problem("linear_relu"), cand("linear_relu_ok"))
    assert r["status"] == "correct", r
    w = r["checks"]["work"]
    assert w["inputs_bytes"] == 8 * 64 * 4 and w["output_bytes"] == 8 * 48 * 4
    assert w["params_bytes"] == (64 * 48 + 48) * 4
    assert w["bytes"] == w["inputs_bytes"] + w["output_bytes"] + w["params_bytes"]
    assert w["flops"] == 2 * 8 * 64 * 48 and w["flops_by_op"] == {"addmm": 2 * 8 * 64 * 48}
    assert w["dtype"] == "float32" and w["uncounted_ops"] == []


def test_package_candidate_with_relative_imports(worker_server):
    r = worker_server.eval(problem("add"), cand("pkg/decomposed_solution"))
    assert r["status"] == "correct", r


def test_wrong_values_report_first_mismatch(worker_server):
    r = worker_server.eval(problem("add"), cand("add_wrong"))
    assert r["status"] == "incorrect" and r["kind"] == "mismatch", r
    assert "index (3, 5)" in r["message"]
    assert "got" in r["message"] and "expected" in r["message"]
    assert r["max_abs_err"] == pytest.approx(0.5, rel=1e-5)
    assert r["reasons"] and r["reasons"][0].startswith("mismatch")


def test_broadcast_only_shape_fails(worker_server):
    r = worker_server.eval(problem("add"), cand("add_broadcast_shape"))
    assert r["kind"] == "wrong_shape", r
    assert "[1, 16, 32]" in r["message"] and "[16, 32]" in r["message"]


def test_castable_dtype_fails(worker_server):
    r = worker_server.eval(problem("add"), cand("add_wrong_dtype"))
    assert r["kind"] == "wrong_dtype", r
    assert "float64" in r["message"] and "float32" in r["message"]


def test_nan_never_passes(worker_server):
    r = worker_server.eval(problem("add"), cand("add_nan"))
    assert r["kind"] == "nan", r
    assert "(2, 7)" in r["message"]


@pytest.mark.parametrize("name", ["softmax_zeros", "softmax_uniform"])
def test_tiny_outputs_zeros_or_constants_fail(worker_server, name):
    r = worker_server.eval(problem("softmax_wide"), cand(name))
    assert r["status"] == "incorrect", r
    assert r["kind"] in ("mismatch", "constant_output"), r


def test_tiny_outputs_honest_candidate_passes(worker_server):
    r = worker_server.eval(problem("softmax_wide"), cand("softmax_ok"))
    assert r["status"] == "correct", r


def test_identity_gaming_on_nonnegative_inputs_fails(worker_server):
    r = worker_server.eval(problem("relu_rand"), cand("relu_identity"))
    assert r["status"] == "incorrect", r
    assert "c0a0" in r["message"] and "signed-normal" in r["message"], r
    # Without the alternate-distribution trial and the scaled ones this
    # candidate would pass: the gap is real.
    r2 = worker_server.eval(problem("relu_rand"), cand("relu_identity"), alt_dist_trials=0, trials_dist="none")
    assert r2["status"] == "correct", r2
    # The negated-inputs trial alone catches it too (issue 16: KernelBench-Verified's scales).
    r3 = worker_server.eval(problem("relu_rand"), cand("relu_identity"), alt_dist_trials=0)
    assert r3["status"] == "incorrect" and "c0neg" in r3["message"] and "negated" in r3["message"], r3


def test_relu_honest_candidate_passes(worker_server):
    assert worker_server.eval(problem("relu_rand"), cand("relu_ok"))["status"] == "correct"


def test_in_place_mutation_of_inputs_is_caught(worker_server):
    r = worker_server.eval(problem("add"), cand("add_mutates_input"))
    assert r["kind"] == "input_mutation", r
    assert "input #0" in r["message"]


def test_scribbling_on_inputs_does_not_fool_the_reference(worker_server):
    r = worker_server.eval(problem("add"), cand("add_scribble_inputs"))
    assert r["status"] == "incorrect", r


def test_every_input_config_is_checked(worker_server):
    ok = worker_server.eval(problem("configs"), cand("configs_ok"))
    assert ok["status"] == "correct", ok
    assert ok["checks"]["correctness"]["configs"] == 2
    assert ok["checks"]["correctness"]["trials_run"] == 18
    bad = worker_server.eval(problem("configs"), cand("configs_first_only"))
    assert bad["kind"] == "mismatch", bad
    assert "config 1" in bad["message"]


def test_expected_outputs_are_computed_after_the_candidate(worker_server, tmp_path, share_path):
    # The candidate looks for any expected output on disk or in its inherited
    # descriptors while it runs; there must be none to find.
    probe = share_path / "found.txt"
    k = tmp_path / "snoop.py"
    k.write_text(f"""
import os, glob
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, a, b):
        # Everything this server's children write lives beside our private cwd.
        found = glob.glob(os.path.join(os.path.dirname(os.getcwd()), "**", "expected*"), recursive=True)
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink("/proc/self/fd/" + fd)
            except OSError:
                continue  # the directory listing's own descriptor
            if "expected" in target:
                found.append(target)
        with open({str(probe)!r}, "a") as f:
            f.write(repr(found) + chr(10))
        return a + b
""")
    r = worker_server.eval(problem("add"), str(k))
    assert r["status"] == "correct", r
    assert "after the candidate" in r["checks"]["correctness"]["order"]
    assert all(line == "[]" for line in probe.read_text().splitlines()), probe.read_text()


@pytest.mark.parametrize("name", ["add_patch_allclose", "add_fake_result"])
def test_patching_or_forging_inside_the_candidate_cannot_pass(worker_server, name):
    r = worker_server.eval(problem("add"), cand(name))
    assert r["status"] != "correct", r


def test_patching_comparisons_still_reports_the_real_mismatch(worker_server):
    r = worker_server.eval(problem("add"), cand("add_patch_allclose"))
    assert r["kind"] == "mismatch", r


def test_forged_result_files_are_ignored(worker_server):
    r = worker_server.eval(problem("add"), cand("add_fake_result"))
    assert r["kind"] == "exit_without_result", r


def test_caching_results_between_timed_calls_is_caught(worker_server):
    # (Without the scaled-input trials, which catch it earlier as incorrect.)
    r = worker_server.eval(problem("add"), cand("add_caching"), perf=True, perf_trials=5, warmup=2, trials_dist="none")
    assert r["status"] == "cheating" and r["kind"] == "stale_output", r
    honest = worker_server.eval(problem("add"), cand("add_ok"), perf=True, perf_trials=5, warmup=2)
    assert honest["status"] == "correct", honest
    assert honest["runtime_ms"]["median"] > 0
    assert honest["checks"]["timed_output"] == {"checked": True, "ok": True}


def test_the_timed_outputs_are_compared_while_the_candidate_holds_them(worker_server):
    # The last timed call's output is handed over and compared before the
    # candidate goes on (on the GPU by CUDA IPC; here as bytes): its phase and
    # the server's mark stand in that order, and nothing is left in a file.
    r = worker_server.eval(problem("add"), cand("add_ok"), perf=True, perf_trials=5, warmup=2)
    assert r["status"] == "correct", r
    names = [p[0] for p in r["checks"]["phases_s"]]
    assert "handing over the last timed output" in names, names
    assert "timed_last compared" in names, names
    assert names.index("handing over the last timed output") < names.index("timed_last compared"), names


def test_a_timed_output_handed_over_out_of_turn_is_malformed(worker_server):
    # A candidate that reaches the harness's channel and announces an output
    # the server did not ask for: its own failure, not a verdict on its outputs.
    r = worker_server.eval(problem("add"), cand("add_forged_timed_output"), perf=True, perf_trials=5, warmup=2)
    assert r["status"] != "correct" and r["kind"] == "malformed_result", r
    assert "out of turn" in r["message"], r


def test_a_file_queued_beside_the_output_makes_the_output_malformed(worker_server):
    # Only the one file the harness hands over counts; a candidate that queues
    # another on the same channel cannot get either compared as its output.
    r = worker_server.eval(problem("add"), cand("add_extra_fd"))
    assert r["status"] != "correct" and r["kind"] == "malformed_result", r
    assert "more than one file" in r["message"], r


def test_a_reference_that_draws_random_numbers_passes_as_its_own_candidate(worker_server):
    # KernelBench level2/66_Matmul_Dropout_Softmax leaves Dropout in training
    # mode: the last timed call is seeded as the reference seeded its expected
    # output (the H200 timing sample of 2026-12-01 got stale_output here).
    r = worker_server.eval(problem("dropout_train"), cand("dropout_train_ref"), perf=True, perf_trials=5, warmup=2)
    assert r["status"] == "correct", r
    assert r["checks"]["timed_output"]["checked"] is True and r["checks"]["timed_output"]["ok"] is True, r
    # Nothing wall-clock in test mode; the record says why where it applies.
    assert "wall_last" not in r["checks"]["timed_output"] or \
        r["checks"]["timed_output"]["wall_last"].startswith("not compared")
    cheat = worker_server.eval(problem("dropout_train"), cand("dropout_train_caching"), perf=True, perf_trials=5,
                               warmup=2, trials_dist="none")
    assert cheat["status"] == "cheating" and cheat["kind"] == "stale_output", cheat


def test_timed_phase_waits_for_the_gpu_timing_lock(worker_server):
    """Another slot timing on the same GPU holds the lock: the candidate's timed
    phase waits for it (and says so), and the wait is not a timeout."""
    import threading

    from mkevolve_worker import gpulock
    held = gpulock.TimingLock(worker_server.timing_lock)
    assert held.acquire(5)["held"]
    threading.Timer(1.5, held.release).start()
    r = worker_server.eval(problem("add"), cand("add_ok"), perf=True, perf_trials=3, warmup=1)
    assert r["status"] == "correct", r
    # Its correctness trials waited first (they take the lock shared, and run
    # only once the neighbour's timed phase is over); then the profiling
    # burst (shared) and the timing (exclusive), which find the lock free.
    trials, prof, rec = r["checks"]["trials_lock"], r["checks"]["profile_lock"], r["checks"]["timing_lock"]
    assert trials["held"] is True and prof["held"] is True and rec["held"] is True, r["checks"]
    assert trials["waited_s"] >= 1.0, (trials, prof, rec)
    # Free lock: no wait to speak of.
    r = worker_server.eval(problem("add"), cand("add_ok"), perf=True, perf_trials=3, warmup=1, seed=7)
    assert r["checks"]["timing_lock"]["held"] is True and r["checks"]["timing_lock"]["waited_s"] < 1.0, r
    assert r["checks"]["profile_lock"]["waited_s"] < 1.0, r


def test_profiled_calls_wait_for_a_timed_phase_but_not_for_each_other(tmp_path):
    from mkevolve_worker import gpulock
    path = str(tmp_path / "gpu.lock")
    a, b = gpulock.TimingLock(path, shared=True), gpulock.TimingLock(path, shared=True)
    assert a.acquire(1)["held"] and b.acquire(1)["held"]
    timed = gpulock.TimingLock(path).acquire(0.2)
    assert not timed["held"] and "busy" in timed["error"]
    a.release()
    b.release()
    ex = gpulock.TimingLock(path)
    assert ex.acquire(1)["held"]
    assert not gpulock.TimingLock(path, shared=True).acquire(0.2)["held"]
    ex.release()


def test_a_waiting_timed_phase_stops_new_shared_work_from_starting(tmp_path):
    """The gate: while a timed phase waits for the shared holders to finish,
    no new shared holder gets in ahead of it (else a stream of correctness
    trials could hold it off for ever); once it has run, they go on."""
    import threading

    from mkevolve_worker import gpulock
    path = str(tmp_path / "gpu.lock")
    running = gpulock.TimingLock(path, shared=True)
    assert running.acquire(1)["held"]
    timed = gpulock.TimingLock(path)
    got: dict = {}
    waiter = threading.Thread(target=lambda: got.update(timed.acquire(10)))
    waiter.start()
    time.sleep(0.3)  # the timed phase is waiting now, at the gate's far side
    late = gpulock.TimingLock(path, shared=True).acquire(0.5)
    assert late["held"] is False and "busy" in late["error"], late
    running.release()
    waiter.join(10)
    assert got.get("held") is True, got
    assert not gpulock.TimingLock(path, shared=True).acquire(0.2)["held"]  # during the timed phase
    timed.release()
    again = gpulock.TimingLock(path, shared=True)
    assert again.acquire(1)["held"]
    again.release()


def test_an_edited_problem_is_evaluated_afresh(worker_server, tmp_path):
    """Each eval's reference draws its inputs and expected outputs from the
    problem as it is now: editing the problem changes the verdict at once."""
    prob = tmp_path / "add.py"
    prob.write_text(open(problem("add")).read())
    first = worker_server.eval(str(prob), cand("add_ok"), seed=11)
    assert first["status"] == "correct", first
    fp = first["checks"]["footprint"]
    assert fp["input_bytes"] > 0 and fp["output_bytes"] > 0 and fp["host_peak_bytes"] > 0, fp
    prob.write_text(open(problem("add")).read().replace("return a + b", "return a + b + 1"))
    after_edit = worker_server.eval(str(prob), cand("add_ok"), seed=11)
    assert after_edit["status"] == "incorrect", after_edit

def test_timing_lock_gives_up_after_its_wait(tmp_path):
    from mkevolve_worker import gpulock
    a, b = gpulock.TimingLock(str(tmp_path / "l")), gpulock.TimingLock(str(tmp_path / "l"))
    assert a.acquire(1)["held"]
    rec = b.acquire(0.2)
    assert rec["held"] is False and "busy" in rec["error"] and rec["waited_s"] >= 0.2
    a.release()
    assert b.acquire(0.2)["held"] and b.held
    b.release()
    rec = gpulock.TimingLock(str(tmp_path / "no-such-dir" / "l")).acquire(0.1)
    assert rec["held"] is False and "cannot open" in rec["error"]


def test_eval_with_baselines(worker_server):
    r = worker_server.eval(problem("add"), cand("add_ok"), perf=True, perf_trials=3, warmup=1, baselines=True)
    assert r["status"] == "correct", r
    assert r["baseline_ms"]["eager"]["median"] > 0
    assert "compile" in r["baseline_ms"]  # None on torch 1.13 (no torch.compile)


def test_tolerances_are_settable(worker_server):
    r = worker_server.eval(problem("add"), cand("add_wrong"), atol=1.0, rtol=0.0, scale_tol=1.0, trials_dist="none")
    assert r["status"] == "correct", r


def test_timing_option_is_checked_and_recorded(worker_server):
    from mkevolve_worker import correctness as C
    assert C.normalize_options({})["timing"] == "device"
    assert C.normalize_options({"timing": "synced"})["timing"] == "synced"
    with pytest.raises(ValueError, match="timing must be one of device, synced"):
        C.normalize_options({"timing": "wall"})
    r = worker_server.eval(problem("add"), cand("add_ok"), perf=True, perf_trials=3, warmup=1, timing="synced")
    assert r["status"] == "correct", r
    assert 0 <= r["checks"]["timing"]["extra_warmup"] <= 15
    msg, _ = worker_server.request("eval", problem=problem("add"), kernel=cand("add_ok"),
                                   options={"test_cpu": True, "timing": 3})
    assert msg["type"] == "error" and "timing" in msg["message"], msg


def test_timing_lock_follows_a_replaced_lock_file(tmp_path):
    """c opened the lock file, then someone replaced it at the path and b locked
    the new one. When the old holder a lets go, c must not settle for the orphaned
    inode (b and c would both 'hold' the lock): it waits on the file at the path."""
    import os
    import threading
    import time
    from mkevolve_worker import gpulock
    path = str(tmp_path / "l")
    a = gpulock.TimingLock(path)
    assert a.acquire(1)["held"]
    c = gpulock.TimingLock(path)
    out = {}
    t = threading.Thread(target=lambda: out.update(c.acquire(1.5)))
    t.start()
    time.sleep(0.2)  # c has opened the old file and is waiting on it
    os.unlink(path)
    import fcntl
    b = os.open(path, os.O_RDWR | os.O_CREAT)  # another holder, of the new file at the path
    fcntl.flock(b, fcntl.LOCK_EX)              # (flock directly: c holds the gate while it waits)
    a.release()  # c's flock on the old inode now succeeds
    t.join()
    assert out["held"] is False and "busy" in out["error"], out
    os.close(b)


def test_candidates_do_not_see_the_lock_path(monkeypatch, tmp_path):
    import os
    from mkevolve_worker import isolation
    monkeypatch.setenv("MKEVOLVE_TIMING_LOCK", "/tmp/x.lock")
    saved = dict(os.environ)
    try:
        isolation.scrub_environment(str(tmp_path))
        assert "MKEVOLVE_TIMING_LOCK" not in os.environ
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_a_candidate_that_rewrites_the_problem_is_caught(worker_server, tmp_path, share_path):
    """Reference child #2 loads the problem from disk after the candidate ran; a
    candidate that rewrote it (to make the expected outputs its own) is cheating.
    The problem lies in the test's shared folder, which the sandbox lets the
    candidate write (test mode only): the check behind the sandbox still holds."""
    import os
    import shutil
    prob = share_path / "add.py"
    shutil.copy(problem("add"), prob)
    os.chmod(prob, 0o666)
    k = tmp_path / "rewrite.py"
    k.write_text(f"""
import torch.nn as nn

with open({str(prob)!r}, "a") as f:
    f.write("\\n# the candidate was here\\n")


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a - b
""")
    r = worker_server.eval(str(prob), str(k), seed=31)
    assert r["status"] == "cheating" and r["kind"] == "problem_tampered", r


def test_reference_loads_the_problem_before_candidate_code_runs(worker_server, tmp_path, share_path):
    """Reference child #2 computes beside the candidate. A candidate that makes
    the problem compute what it computes, and puts the file back before handing
    over its outputs (so the files look untouched), must still be compared with
    the original problem: the reference loaded it before any candidate code ran.
    (In the shared folder, as above: the candidate may write it.)"""
    import os
    import shutil
    prob = share_path / "add.py"
    shutil.copy(problem("add"), prob)
    os.chmod(prob, 0o666)
    original = prob.read_text()
    assert "a + b" in original
    k = tmp_path / "swap_and_restore.py"
    k.write_text(f"""
import torch.nn as nn

PROBLEM = {str(prob)!r}
ORIGINAL = open(PROBLEM).read()
with open(PROBLEM, "w") as f:
    f.write(ORIGINAL.replace("a + b", "a - b"))


class ModelNew(nn.Module):
    def forward(self, a, b):
        with open(PROBLEM, "w") as f:
            f.write(ORIGINAL)
        return a - b
""")
    r = worker_server.eval(str(prob), str(k), seed=32)
    assert prob.read_text() == original
    assert r["status"] == "incorrect" and r["kind"] == "mismatch", r


def test_baseline_times_only_under_the_gpu_timing_lock(worker_server):
    import threading
    from mkevolve_worker import gpulock
    held = gpulock.TimingLock(worker_server.timing_lock)
    assert held.acquire(5)["held"]
    threading.Timer(1.5, held.release).start()
    msg, _ = worker_server.request("baseline", problem=problem("add"),
                                   options={"test_cpu": True, "perf_trials": 3, "warmup": 1})
    assert msg["type"] == "result", msg
    assert msg["eager"]["median_ms"] > 0
    # Its compiling and warm-up calls waited (the lock taken shared), then
    # its timed calls took the lock, free by then.
    w, t = msg["warmup_lock"], msg["timing_lock"]
    assert w["held"] is True and t["held"] is True and w["waited_s"] >= 1.0, (w, t)


def test_a_compile_past_its_deadline_keeps_the_eager_baseline(worker_server):
    """An LSTM's torch.compile can take many minutes: the compile step has its
    own deadline, and the eager figure measured before it survives."""
    t0 = time.monotonic()
    msg, _ = worker_server.request("baseline", problem=problem("add"),
                                   options={"test_cpu": True, "perf_trials": 3, "warmup": 1,
                                            "test_slow_compile_s": 30, "compile_timeout_s": 1.0})
    assert msg["type"] == "result", msg
    assert msg["eager"]["median_ms"] > 0
    assert msg["compile"] is None and msg["compile_timed_out"] is True, msg
    assert "did not finish within 1 s" in msg["compile_error"], msg
    assert time.monotonic() - t0 < 25, "the compile step was not stopped at its deadline"


def test_a_long_compile_stops_holding_the_gpu_after_its_cap(worker_server):
    """The compile step holds the timing lock shared for at most
    compile_lock_s; a neighbour's timed phase (an exclusive taker) then goes
    ahead instead of waiting for the whole compile."""
    import threading
    from mkevolve_worker import gpulock
    got = {}

    def neighbour():
        time.sleep(1.0)  # by then the baseline child is compiling (eager takes a moment)
        lk = gpulock.TimingLock(worker_server.timing_lock)
        t = time.monotonic()
        got["rec"] = lk.acquire(60)
        got["waited"] = time.monotonic() - t
        got["at"] = time.monotonic()
        lk.release()
    th = threading.Thread(target=neighbour)
    t0 = time.monotonic()
    th.start()
    msg, _ = worker_server.request("baseline", problem=problem("add"),
                                   options={"test_cpu": True, "perf_trials": 3, "warmup": 1,
                                            "test_slow_compile_s": 8, "compile_lock_s": 0.5})
    th.join()
    assert msg["type"] == "result", msg
    cl = msg["compile_lock"]
    assert cl["released_early"] is True and cl["cap_s"] == 0.5 and cl["held_s"] < 3, cl
    assert got["rec"]["held"] is True
    # The neighbour got the GPU long before the 8 s compile ended.
    assert got["at"] - t0 < 6, got


def test_a_compile_step_gives_way_to_a_waiting_timed_phase(worker_server):
    """Within its cap the compile step holds the lock shared; a neighbour's
    timed phase that comes to wait stops it (the child is paused, the lock
    dropped), runs, and the compile goes on afterwards. The record counts the
    pauses; the paused time is not the compile step's."""
    import threading
    from mkevolve_worker import gpulock
    got = {}

    def neighbour():
        time.sleep(1.5)  # by then the baseline child is in its 6 s compile step
        lk = gpulock.TimingLock(worker_server.timing_lock)
        got["rec"] = lk.acquire(60)
        time.sleep(1.0)  # a timed phase
        lk.release()
    th = threading.Thread(target=neighbour)
    th.start()
    msg, _ = worker_server.request("baseline", problem=problem("add"),
                                   options={"test_cpu": True, "perf_trials": 3, "warmup": 1,
                                            "test_slow_compile_s": 6, "compile_lock_s": 60})
    th.join()
    assert msg["type"] == "result", msg
    cl = msg["compile_lock"]
    assert got["rec"]["held"] is True, got
    assert cl["gave_way"] >= 1 and cl["paused_s"] > 0 and cl["released_early"] is False, cl
    assert msg["compile"] is not None or "no torch.compile" in msg.get("compile_error", ""), msg


def test_the_eager_baseline_is_timed_before_the_compile_step(worker_server):
    msg, _ = worker_server.request("baseline", problem=problem("add"),
                                   options={"test_cpu": True, "perf_trials": 3, "warmup": 1})
    assert msg["type"] == "result", msg
    assert msg["timing_lock"]["held"] is True
    # The compile step came after eager was timed: it holds the lock shared (recorded).
    assert msg["compile_lock"]["held"] is True and msg["compile_lock"]["released_early"] is False, msg


def test_a_failure_in_the_profiling_process_fails_the_candidate(worker_server, tmp_path):
    """The profiling process calls forward more often than the timed one (here
    on the CPU, where it runs the same calls without a profiler): a candidate
    that fails only there fails, and the message says where."""
    k = tmp_path / "fails_late.py"
    k.write_text("""
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, a, b):
        self.calls += 1
        if self.calls > 30:
            raise RuntimeError("call 31")
        return a + b
""")
    r = worker_server.eval(problem("add"), str(k), perf=True, perf_trials=3, warmup=1)
    assert r["status"] == "runtime_error", r
    assert "second, profiled process" in r["message"] and "call 31" in r["message"], r


def test_a_composed_package_reports_each_subkernels_time_in_test_mode(worker_server, tmp_path):
    """Issue 12: in CPU test mode the profiling process times each subkernel
    module's calls in the composed forward (wall clock), summed per file over
    its instances: one positive entry per subkernel."""
    import composed_package
    prob, top = composed_package.write(tmp_path)
    r = worker_server.eval(prob, top, perf=True, perf_trials=2, warmup=1)
    assert r["status"] == "correct", r
    per = r.get("subkernel_runtime_ms")
    assert isinstance(per, dict) and set(per) == {"linear", "relu"} and all(v > 0 for v in per.values()), r
    sr = r["checks"]["subkernel_runtime"]
    assert sr["source"] == "module calls in the composed forward (cpu wall clock)", sr
    assert sr["instances"] == {"linear": 2, "relu": 1} and sr["modules_ms"] == per and sr["forwards"] > 0
    # Without timing there is no profiling process, so nothing is reported.
    assert "subkernel_runtime_ms" not in worker_server.eval(prob, top)


def test_a_composed_package_whose_top_level_concatenates_is_evaluated_not_flagged(worker_server, tmp_path):
    """Issue 12, finding 4: one rule for the top level (toplevel.py). Packing
    subkernel outputs with torch.cat, which the decomposition verifier allows,
    is not PyTorch compute in the composed package's top level either."""
    import composed_package
    prob, top = composed_package.write_cat(tmp_path)
    r = worker_server.eval(prob, top)
    assert r["status"] == "correct", r
    # Test mode does not enforce the static layer, but it still runs it: the
    # top level's torch.cat is not PyTorch compute (the torch-only stand-ins in
    # subkernel_implementations/ are, and launch no Triton kernel, which is why
    # other rules fire here).
    vs = r["checks"]["static"]["violations"]
    assert any(v["rule"] == "torch-compute" for v in vs), vs  # the stand-ins' addmm: the layer did run
    flagged = [v for v in vs if v["file"].endswith("decomposed_solution.py") and v["rule"] == "torch-compute"]
    assert flagged == [], flagged


def test_the_tf32_baseline_says_so_and_an_eval_refuses_tf32(worker_server):
    """--baseline-tf32: a second baseline op with TF32 on, recorded as such;
    candidates and references never run with it."""
    msg, _ = worker_server.request("baseline", problem=problem("add"),
                                   options={"test_cpu": True, "perf_trials": 3, "warmup": 1, "tf32": True})
    assert msg["type"] == "result" and msg["tf32"] is True and msg["eager"]["median_ms"] > 0, msg
    off, _ = worker_server.request("baseline", problem=problem("add"),
                                   options={"test_cpu": True, "perf_trials": 3, "warmup": 1})
    assert off["type"] == "result" and off["tf32"] is False, off
    msg, _ = worker_server.request("eval", problem=problem("add"), kernel=cand("add_ok"),
                                   options={"test_cpu": True, "perf": False, "tf32": True})
    assert msg["type"] == "error" and "baseline op only" in msg["message"], msg


def _wait_for(cond, what: str, limit_s: float = 10.0) -> None:
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < limit_s, f"gave up waiting: {what}"
        time.sleep(0.01)


def test_waiting_timed_phases_go_highest_priority_first(tmp_path):
    """A neighbour is being timed; a timed phase of priority 0 waits (holding
    the gate), then one of priority 3 (the critical chain's candidate) starts
    waiting. When the neighbour is done, the priority-3 one is timed first,
    although the other was there first and held the gate."""
    import threading

    from mkevolve_worker import gpulock
    path = str(tmp_path / "gpu.lock")
    neighbour = gpulock.TimingLock(path)
    assert neighbour.acquire(1)["held"]
    order, recs = [], {}

    def take(name: str, prio: int) -> None:
        lk = gpulock.TimingLock(path, priority=prio)
        recs[name] = lk.acquire(20)
        order.append(name)
        lk.release()

    low = threading.Thread(target=take, args=("low", 0))
    low.start()
    _wait_for(lambda: gpulock.timed_phase_waiting(path), "the low-priority waiter at the gate")
    high = threading.Thread(target=take, args=("high", 3))
    high.start()
    _wait_for(lambda: any(n.startswith("3-") for n in os.listdir(path + ".waiting")), "the high one registered")
    neighbour.release()
    high.join(20)
    low.join(20)
    assert order == ["high", "low"], (order, recs)
    assert recs["high"]["held"] and recs["low"]["held"], recs
    assert recs["high"]["priority"] == 3 and recs["low"]["priority"] == 0, recs
    assert recs["low"]["deferred_s"] > 0 and recs["high"]["deferred_s"] == 0, recs
    assert os.listdir(path + ".waiting") == []  # every waiter took its entry away


def test_equal_priorities_keep_the_gate_order(tmp_path):
    """Priority only reorders across levels: of two waiters of the same
    priority, the one holding the gate goes first, as without priorities."""
    import threading

    from mkevolve_worker import gpulock
    path = str(tmp_path / "gpu.lock")
    neighbour = gpulock.TimingLock(path)
    assert neighbour.acquire(1)["held"]
    order = []

    def take(name: str) -> None:
        lk = gpulock.TimingLock(path, priority=2)
        assert lk.acquire(20)["held"]
        order.append(name)
        lk.release()

    first = threading.Thread(target=take, args=("first",))
    first.start()
    _wait_for(lambda: gpulock.timed_phase_waiting(path), "the first waiter at the gate")
    second = threading.Thread(target=take, args=("second",))
    second.start()
    _wait_for(lambda: len(os.listdir(path + ".waiting")) == 2, "both registered")
    neighbour.release()
    first.join(20)
    second.join(20)
    assert order == ["first", "second"], order


def test_a_dead_waiters_entry_and_a_never_served_one_do_not_block(tmp_path):
    """An entry nobody holds (its process died) is stale: removed, not
    deferred to. An entry that stays live without ever taking the lock is
    deferred to only for max_defer_s in all, so a low-priority timed phase
    is never starved."""
    import fcntl

    from mkevolve_worker import gpulock
    path = str(tmp_path / "gpu.lock")
    os.mkdir(path + ".waiting")
    stale = os.path.join(path + ".waiting", "9-999999-1")
    open(stale, "w").close()
    lk = gpulock.TimingLock(path)
    rec = lk.acquire(5)
    assert rec["held"] and rec["deferred_s"] == 0, rec
    assert not os.path.exists(stale)
    lk.release()

    live = os.path.join(path + ".waiting", "9-1-1")
    fd = os.open(live, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        lk = gpulock.TimingLock(path, max_defer_s=0.3)
        rec = lk.acquire(10)
        assert rec["held"] and rec["deferred_s"] >= 0.3, rec
        lk.release()
        # Within its wait, a live higher waiter alone never makes it give up.
        lk = gpulock.TimingLock(path, max_defer_s=0.0)
        assert lk.acquire(1)["held"]
        lk.release()
    finally:
        os.close(fd)


def test_shared_work_lets_a_live_higher_priority_evaluation_go_first(tmp_path):
    """Shared work given a priority waits while a live evaluation of higher
    priority is registered, and starts once it closes; shared work without a
    priority (a baseline, a decomposition check) and work of equal or higher
    priority never wait for it."""
    import threading

    from mkevolve_worker import gpulock
    path = str(tmp_path / "gpu.lock")
    live = gpulock.register_active(5, path)
    try:
        for kw in ({}, {"priority": 5}, {"priority": 9}):
            lk = gpulock.TimingLock(path, shared=True, **kw)
            rec = lk.acquire(1)
            assert rec["held"] and rec.get("deferred_s", 0) == 0, (kw, rec)
            lk.release()
        got: dict = {}
        low = gpulock.TimingLock(path, shared=True, priority=2)
        waiter = threading.Thread(target=lambda: got.update(low.acquire(10)))
        waiter.start()
        time.sleep(0.4)
        assert got == {}, got  # still deferring to the live priority-5 evaluation
    finally:
        live.close()
    waiter.join(10)
    assert got["held"] and got["deferred_s"] >= 0.3, got
    low.release()
    assert os.listdir(path + ".active") == []


def test_shared_work_defers_for_max_defer_s_at_most_and_not_to_the_dead(tmp_path):
    """An active entry nobody holds (its evaluation died) is removed, not
    deferred to; a live one that never ends is deferred to for max_defer_s in
    all; a wait that outlasts the acquire's own deadline is a busy lock."""
    from mkevolve_worker import gpulock
    path = str(tmp_path / "gpu.lock")
    os.mkdir(path + ".active")
    stale = os.path.join(path + ".active", "9-999999-1")
    open(stale, "w").close()
    # One left half-made (its process died before naming it) goes once it is old.
    abandoned = os.path.join(path + ".active", ".new-9-1-ab")
    fresh = os.path.join(path + ".active", ".new-9-1-cd")
    open(abandoned, "w").close()
    open(fresh, "w").close()
    os.utime(abandoned, (time.time() - 120, time.time() - 120))
    lk = gpulock.TimingLock(path, shared=True, priority=1)
    rec = lk.acquire(5)
    assert rec["held"] and rec["deferred_s"] == 0, rec
    assert not os.path.exists(stale) and not os.path.exists(abandoned) and os.path.exists(fresh)
    lk.release()
    forever = gpulock.register_active(9, path)
    try:
        lk = gpulock.TimingLock(path, shared=True, priority=1, max_defer_s=0.3)
        rec = lk.acquire(10)
        assert rec["held"] and 0.3 <= rec["deferred_s"] < 5, rec
        lk.release()
        lk = gpulock.TimingLock(path, shared=True, priority=1)
        rec = lk.acquire(0.2)
        assert not rec["held"] and "busy" in rec["error"], rec
        # The exclusive lock knows nothing of active evaluations: a timed phase never waits for one.
        ex = gpulock.TimingLock(path, priority=0)
        assert ex.acquire(1)["held"]
        ex.release()
    finally:
        forever.close()


def test_a_registration_is_never_taken_for_a_dead_ones_while_it_is_made(tmp_path):
    """A reader that finds an entry unlocked removes it as its dead owner's.
    An entry must therefore be locked before anyone can see it: with readers
    scanning all the time (as lower-priority work does while it defers), every
    registration is still there, under its name, until it is closed."""
    import multiprocessing

    from mkevolve_worker import gpulock
    path = str(tmp_path / "gpu.lock")
    os.mkdir(path + ".active")
    stop = multiprocessing.Event()

    def scan():
        while not stop.is_set():
            gpulock._higher_live(path + ".active", 0)
    ctx = multiprocessing.get_context("fork")
    readers = [ctx.Process(target=scan) for _ in range(3)]
    for r in readers:
        r.start()
    lost = 0
    try:
        for _ in range(3000):
            reg = gpulock.register_active(5, path)
            if reg.file is None or not os.path.exists(reg.file):
                lost += 1
            reg.close()
    finally:
        stop.set()
        for r in readers:
            r.join(10)
    assert lost == 0, f"{lost} of 3000 registrations removed while live"
    assert [n for n in os.listdir(path + ".active") if not n.startswith(".")] == []


def test_registrations_of_servers_with_the_same_pid_stay_apart(tmp_path, monkeypatch):
    """The pool starts every server in its own PID namespace, so two servers'
    evaluations see the same pid (and make their registrations in the same
    order). Each must still have its own entry: when one ends, the other is
    still deferred to."""
    import multiprocessing

    from mkevolve_worker import gpulock
    path = str(tmp_path / "gpu.lock")
    monkeypatch.setattr(os, "getpid", lambda: 1)
    ctx = multiprocessing.get_context("fork")
    go, done = ctx.Event(), [ctx.Event(), ctx.Event()]

    def server(i: int):  # each forked from the same state: same pid, same history
        reg = gpulock.register_active(5, path)
        done[i].set()
        go.wait(10)
        if i == 0:
            reg.close()
            return
        time.sleep(2)
        reg.close()
    procs = [ctx.Process(target=server, args=(i,)) for i in range(2)]
    for p in procs:
        p.start()
    try:
        for d in done:
            assert d.wait(10)
        names = [n for n in os.listdir(path + ".active") if not n.startswith(".")]
        assert len(names) == 2, names
        go.set()
        procs[0].join(10)
        time.sleep(0.2)
        assert gpulock._higher_live(path + ".active", 1), os.listdir(path + ".active")
    finally:
        go.set()
        for p in procs:
            p.join(10)
    assert not gpulock._higher_live(path + ".active", 1)
