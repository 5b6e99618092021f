"""Subproblems that define only get_input_configs() (no top-level
get_inputs/get_init_inputs) load, and every configuration is checked."""

from __future__ import annotations

import pytest

from conftest import cand, problem


def test_loader_accepts_a_configs_only_problem(tmp_path):
    from mkevolve_worker import loader
    mod = loader.load_problem(problem("configs_only"))
    cfgs = loader.problem_configs(mod)
    assert [c["get_init_inputs"]() for c in cfgs] == [[2.0], [3.0], [-1.5]]
    assert [tuple(c["get_inputs"]()[0].shape) for c in cfgs] == [(8, 8), (5, 7), (3, 4)]


def test_loader_names_what_is_missing(tmp_path):
    from mkevolve_worker import loader
    p = tmp_path / "p.py"
    p.write_text("class Model:\n    pass\n\ndef get_inputs():\n    return []\n")
    with pytest.raises(loader.LoadError, match="get_init_inputs.*or get_input_configs"):
        loader.load_problem(str(p))
    q = tmp_path / "q.py"
    q.write_text("class Model:\n    pass\n\ndef get_input_configs():\n    return [{'get_inputs': lambda: []}]\n")
    mod = loader.load_problem(str(q))
    with pytest.raises(loader.LoadError, match=r"\[0\] has no get_init_inputs"):
        loader.problem_configs(mod)


def test_every_config_of_a_configs_only_problem_is_checked(worker_server):
    ok = worker_server.eval(problem("configs_only"), cand("configs_ok"))
    assert ok["status"] == "correct", ok
    assert ok["checks"]["correctness"]["configs"] == 3
    assert ok["checks"]["correctness"]["trials_run"] == 27  # 9 per configuration
    first = worker_server.eval(problem("configs_only"), cand("configs_first_only"))
    assert first["kind"] == "mismatch", first
    assert "config 1" in first["message"]
    last = worker_server.eval(problem("configs_only"), cand("configs_last_wrong"))
    assert last["kind"] == "mismatch", last
    assert "config 2" in last["message"]


def test_baseline_of_a_configs_only_problem(worker_server):
    r, _ = worker_server.request("baseline", problem=problem("configs_only"),
                              options={"test_cpu": True, "warmup": 1, "perf_trials": 2})
    assert r["type"] == "result", r
    assert r["eager"]["median_ms"] > 0
