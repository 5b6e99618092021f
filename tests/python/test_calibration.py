"""Calibrated tolerances (worker/mkevolve_worker/calibration.py; the paper's Appendix D)."""

from __future__ import annotations

import math

import pytest
import torch

from conftest import cand, problem
from mkevolve_worker import calibration as K
from mkevolve_worker import correctness as C


def test_max_plus_three_sigma_on_a_recorded_set_of_errors():
    errs = [0.010, 0.012, 0.011, 0.013, 0.009]
    s = K.summarize(errs)
    # mean 0.011; population sigma sqrt((1+1+0+4+4)e-6 / 5) = sqrt(2e-6)
    assert s["runs"] == 5 and s["max"] == 0.013
    assert s["mean"] == pytest.approx(0.011)
    assert s["std"] == pytest.approx(math.sqrt(2e-6))
    assert s["atol"] == pytest.approx(0.013 + 3 * math.sqrt(2e-6))
    # Identical errors: sigma 0, the tolerance is their value; a floor above it wins.
    assert K.summarize([0.5] * 20)["atol"] == 0.5
    assert K.summarize([0.0] * 20, floor=0.0078125)["atol"] == 0.0078125
    for bad in ([], [0.1, float("nan")], [-1.0], [True]):
        with pytest.raises(ValueError):
            K.summarize(bad)


def test_ulp_floor_is_the_dtypes_spacing_at_the_largest_magnitude():
    assert K.ulp_at(torch.bfloat16, 1.0) == 2 ** -7
    assert K.ulp_at(torch.bfloat16, 5.3) == 2 ** -5      # [4, 8): spacing 2^(2-7)
    assert K.ulp_at(torch.float32, 1.5) == 2 ** -23
    assert K.ulp_at(torch.bfloat16, 0.0) == 0.0


def _calibrated(outputs: dict) -> dict:
    return C.normalize_options({"calibrated": {"outputs": outputs, "source": "cal.json"}})


def test_a_calibrated_output_is_judged_at_its_own_atol_with_rtol_0_per_kind_of_inputs():
    o = _calibrated({"[0]": {"x1": 0.02, "x3": 0.3}})
    t = C.tolerance_for(torch.bfloat16, o, "[0]")
    assert (t["atol"], t["rtol"], t["pass_rate"]) == (0.02, 0.0, 1.0)
    assert t["source"] == {"atol": "calibrated", "rtol": "calibrated", "pass_rate": "bfloat16 default"}
    assert t["calibration"] == {"file": "cal.json", "output": "[0]", "inputs": "x1"}
    assert t["scale_tol"] == pytest.approx(0.1)  # the scale check keeps bf16's rtol
    assert C.tolerance_for(torch.bfloat16, dict(o, trial_kind="x3"), "[0]")["atol"] == 0.3
    # Another output, or a kind of inputs not calibrated: the dtype's default.
    assert C.tolerance_for(torch.bfloat16, o, "[1]")["source"]["atol"] == "bfloat16 default"
    assert C.tolerance_for(torch.bfloat16, dict(o, trial_kind="neg"), "[0]")["source"]["atol"] == "bfloat16 default"
    # A flag still wins.
    t = C.tolerance_for(torch.bfloat16, dict(o, atol=0.5), "[0]")
    assert t["atol"] == 0.5 and t["source"]["atol"] == "flag" and t["rtol"] == 0.0
    for bad in ({"outputs": []}, {"outputs": {"": {"x1": -1}}}, {"outputs": {"": 3}}, "cal.json"):
        with pytest.raises(ValueError, match="calibrated"):
            C.normalize_options({"calibrated": bad})


def test_a_bug_inside_the_default_tolerance_fails_the_calibrated_check():
    """fp32 GELU*3 + x: a 1e-5 relative error on the GELU term passes fp32's
    default (1e-4 + 1e-4 * |expected|) and fails the tolerance calibration
    gives this output (the reference against float64, at least one ulp)."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 256, generator=g)
    expected = torch.nn.functional.gelu(x) * 3 + x
    y = x.double()
    honest = (torch.nn.functional.gelu(y) * 3 + y).float()
    off = (torch.nn.functional.gelu(y) * 3.00003 + y).float()
    assert C.compare_tree(expected, off, C.normalize_options({}))["ok"]
    err = float((expected.double() - (torch.nn.functional.gelu(y) * 3 + y)).abs().max())
    atol = K.summarize([err], K.ulp_at(torch.float32, float(expected.abs().max())))["atol"]
    o = _calibrated({"": {"x1": atol}})
    ok = C.compare_tree(expected, honest, o)
    assert ok["ok"], ok
    assert ok["tolerance"]["source"]["atol"] == "calibrated" and C.tolerance_key(ok["tolerance"]) == "float32 output x1"
    bad = C.compare_tree(expected, off, o)
    assert not bad["ok"] and "calibrated on x1 inputs" in bad["message"], bad


def test_calibrate_op_and_an_eval_at_the_calibrated_tolerance(worker_server):
    msg, _ = worker_server.request("calibrate", timeout=300, problem=problem("gelu3_bf16"),
                                   options={"test_cpu": True}, runs=4)
    assert msg["type"] == "result", msg
    assert msg["runs"] == 4 and msg["high_precision"] == ["float64"] and msg["device"] == "cpu"
    out = msg["outputs"][""]
    assert out["dtype"] == "bfloat16" and set(out["by_kind"]) == set(K.KINDS)
    for k, v in out["by_kind"].items():
        assert len(v["errors"]) == 4
        assert v["atol"] == pytest.approx(max(max(v["errors"]) + 3 * v["std"], v["floor"]))
    cal = {"outputs": {"": {k: v["atol"] for k, v in out["by_kind"].items()}}, "source": "test"}
    r = worker_server.eval(problem("gelu3_bf16"), cand("gelu3_bf16_fp32"), calibrated=cal)
    assert r["status"] == "correct", r
    tols = r["checks"]["correctness"]["tolerances"]
    assert {t["source"]["atol"] for t in tols.values()} == {"calibrated"} and len(tols) == len(K.KINDS)
    assert r["checks"]["correctness"]["rtol"] == 0.0
    wrong = worker_server.eval(problem("gelu3_bf16"), cand("gelu3_bf16_scale"), calibrated=cal)
    assert wrong["status"] == "incorrect" and "calibrated" in wrong["message"], wrong


def test_calibrate_names_the_file_when_the_problem_fails(worker_server):
    msg, _ = worker_server.request("calibrate", timeout=120, problem=problem("broken"),
                                   options={"test_cpu": True}, runs=2)
    assert msg["type"] == "error" and "broken.py" in msg["message"], msg
    msg, _ = worker_server.request("calibrate", timeout=120, problem=problem("gelu3_bf16"),
                                   options={"test_cpu": True}, runs=1)
    assert msg["type"] == "error" and "runs" in msg["message"], msg
