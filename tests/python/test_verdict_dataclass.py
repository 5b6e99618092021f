"""The verdict is written from one dataclass (verdict.WorkerVerdict).

Every answer to op "eval" that the real server sends, for each kind of
outcome, holds only keys that worker_fields() names, and reads back into a
WorkerVerdict whose to_json() is the same body, key for key and in the same
order. A key added to an answer anywhere but the dataclass fails here.
"""

from __future__ import annotations

import time

import pytest

from conftest import REFERENCE_DIES_ON_SECOND_INPUTS, cand, problem, write_source

from mkevolve_worker import errors, evaluate
from mkevolve_worker.verdict import WorkerVerdict, worker_fields

ALWAYS = ["max_abs_err", "runtime_ms", "uses_pytorch", "device", "checks", "elapsed_s",
          "status", "kind", "message", "reasons"]
OPTIONAL = ["subkernel_runtime_ms", "stderr_tail", "retryable", "baseline_ms"]



def _body(msg: dict) -> dict:
    """The verdict in an answer: all but the protocol envelope (id, type) and
    the server's word beside it (an eval's spares_idle: the idle spares it
    left, which the pool counts and drops)."""
    assert msg["type"] == "result", msg
    assert isinstance(msg.get("spares_idle", 0), int), msg
    return {k: v for k, v in msg.items() if k not in ("id", "type", "spares_idle")}


def _assert_written_by_the_dataclass(body: dict) -> None:
    assert set(body) <= set(worker_fields()), sorted(set(body) - set(worker_fields()))
    assert set(ALWAYS) <= set(body), sorted(set(ALWAYS) - set(body))
    again = WorkerVerdict.from_json(body).to_json()
    assert again == body
    assert list(again) == list(body)


def test_worker_fields_are_the_declared_keys_sorted():
    assert worker_fields() == sorted(ALWAYS + OPTIONAL)


# -- the real server, one evaluation per kind of outcome ----------------------

def _reference_killed(tmp_path) -> str:
    return write_source(tmp_path / "dies.py", REFERENCE_DIES_ON_SECOND_INPUTS)


def _noisy_exit(tmp_path) -> str:
    return write_source(tmp_path / "noisy_exit.py", """
        import os, sys
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, a, b):
                print("about to leave", file=sys.stderr, flush=True)
                os._exit(3)
        """)


CASES = {
    # name: (problem, kernel, options, expected status, keys it must have beside ALWAYS)
    "correct, timed, with baselines": (lambda t: problem("add"), lambda t: cand("add_ok"),
                                       {"perf": True, "perf_trials": 3, "warmup": 1, "baselines": True},
                                       errors.CORRECT, {"baseline_ms"}),
    "incorrect": (lambda t: problem("add"), lambda t: cand("add_wrong"), {}, errors.INCORRECT, set()),
    "syntax error": (lambda t: problem("add"), lambda t: cand("syntax_error"), {}, errors.COMPILE_ERROR, set()),
    "crash with stderr": (lambda t: problem("add"), _noisy_exit, {}, errors.CRASHED, {"stderr_tail"}),
    "static violation judged by what ran": (lambda t: problem("add"), lambda t: cand("add_ok"),
                                            {"test_static": True}, errors.CHEATING, set()),
    "no verdict": (_reference_killed, lambda t: cand("add_ok"), {}, errors.NO_VERDICT, {"retryable"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_answer_of_the_real_server_is_written_by_the_dataclass(worker_server, tmp_path, case):
    prob, kern, opts, status, extra = CASES[case]
    body = _body(worker_server.eval(prob(tmp_path), kern(tmp_path), timeout=180, **opts))
    assert body["status"] == status, body
    assert extra <= set(body), body
    _assert_written_by_the_dataclass(body)


def test_a_composed_packages_answer_is_written_by_the_dataclass(worker_server, tmp_path):
    import composed_package
    prob, top = composed_package.write(tmp_path)
    body = _body(worker_server.eval(prob, top, perf=True, perf_trials=2, warmup=1))
    assert body["status"] == errors.CORRECT and "subkernel_runtime_ms" in body, body
    _assert_written_by_the_dataclass(body)


# -- the shapes, built as the evaluator builds them ---------------------------

def _result() -> evaluate._Result:
    res = evaluate._Result({}, "cpu")
    res.checks["correctness"] = {"trials_run": 3, "configs": 1}
    res.max_abs_err = 0.5
    res.runtime_ms = {"median": 1.0, "mean": 1.5}
    return res


def test_a_failure_has_no_runtime_and_stderr_only_when_given():
    t0 = time.monotonic()
    v = _result().fail("mismatch", "wrong output\nmore", t0).to_json()
    assert list(v) == ALWAYS
    assert v["status"] == errors.INCORRECT and v["runtime_ms"] is None and v["max_abs_err"] == 0.5
    assert v["reasons"] == ["mismatch: wrong output"]
    v = _result().fail("segfault", "died", t0, stderr="x" * 2000).to_json()
    assert list(v) == ALWAYS + ["stderr_tail"] and v["stderr_tail"] == "x" * 1500
    _assert_written_by_the_dataclass(v)


def test_no_verdict_is_retryable():
    v = _result().no_verdict("reference_failed", "the reference died", time.monotonic()).to_json()
    assert list(v) == ALWAYS + ["retryable"]
    assert (v["status"], v["retryable"], v["runtime_ms"]) == (errors.NO_VERDICT, True, None)
    _assert_written_by_the_dataclass(v)


def test_a_correct_verdict_keeps_its_runtime_and_subkernels_only_when_any():
    res = _result()
    v = res.ok(time.monotonic()).to_json()
    assert list(v) == ALWAYS and v["runtime_ms"] == {"median": 1.0, "mean": 1.5} and v["reasons"] == []
    assert v["message"] == "correct on 3 trials over 1 input configuration(s), max_abs_err 0.5; median 1 ms"
    res.subkernel_runtime_ms = {}
    assert "subkernel_runtime_ms" not in res.ok(time.monotonic()).to_json()
    res.subkernel_runtime_ms = {"a": 0.25}
    v = res.ok(time.monotonic()).to_json()
    assert list(v) == ALWAYS[:6] + ["subkernel_runtime_ms"] + ALWAYS[6:]
    _assert_written_by_the_dataclass(v)


def test_null_values_of_keys_always_written_stay_in_the_body():
    res = evaluate._Result({}, "cpu")
    res.uses_pytorch = None
    v = res.fail("hang", "no result", time.monotonic()).to_json()
    assert v["max_abs_err"] is None and v["uses_pytorch"] is None and v["runtime_ms"] is None
    _assert_written_by_the_dataclass(v)


def test_a_key_outside_the_table_is_refused():
    v = _result().ok(time.monotonic())
    with pytest.raises(AttributeError, match="no field 'speedup'"):
        v.speedup = 2.0
    with pytest.raises(ValueError, match="not a verdict field: speedup"):
        WorkerVerdict.from_json(dict(v.to_json(), speedup=2.0))
    body = v.to_json()
    del body["status"]
    with pytest.raises(ValueError, match="needs status"):
        WorkerVerdict.from_json(body)
