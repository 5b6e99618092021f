"""scripts/appendix_d.py at CPU sizes, so that the GPU run is not its first."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO


def test_appendix_d_runs_on_the_cpu_and_reports_every_implementation(tmp_path):
    p = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "appendix_d.py"), "--cpu", "--runs", "3",
                        "--calib-runs", "4", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    assert p.returncode == 0, p.stderr[-3000:]
    recs = [json.loads(line) for line in (tmp_path / "appendix_d.jsonl").read_text().splitlines()]
    assert [r["what"] for r in recs][:4] == ["setup", "calibration", "calibration", "calibration"]
    impl = {r["bug"]: r for r in recs if r["what"] == "implementation"}
    assert set(impl) == {"correct", "correct_p_bf16", "mask_off_by_one", "unsafe_softmax", "acc_bf16_qk",
                         "tile_boundary_k", "softmax_dim", "v_bias_dropped", "k_bias_dropped"}
    for r in recs:
        if r["what"] == "calibration":
            assert all(v > 0 for v in r["atol"].values()), r  # never 0: at least one ulp
    # The gross bugs are caught both ways, in every run, and only in the attend stage.
    for bug in ("mask_off_by_one", "softmax_dim"):
        assert impl[bug]["decomposed_fail"] == 3 and impl[bug]["stage_fail"] == {"qkv": 0, "attend": 3, "out": 0}
        assert impl[bug]["e2e_fail"]["0.01"] == 3
    # A dropped K bias moves the qkv stage's K output; the softmax hides it end to end.
    assert impl["k_bias_dropped"]["stage_fail"]["qkv"] == 3
    assert impl["k_bias_dropped"]["e2e_fail"]["0.01"] == 0
    # Correct implementations are never rejected stage by stage at calibrated tolerances.
    assert impl["correct"]["decomposed_fail"] == 0 and impl["correct_p_bf16"]["decomposed_fail"] == 0
    # A correct implementation's outputs differ from bf16's reference beyond 1e-3.
    assert impl["correct"]["e2e_fail"]["0.001"] == 3
    summary = recs[-1]
    assert summary["what"] == "summary" and summary["bugs"] == 7 and summary["correct_runs"] == 6
    md = (tmp_path / "appendix_d.md").read_text()
    assert "| softmax_dim |" in md and "Best usable fixed E2E tolerance" in md
