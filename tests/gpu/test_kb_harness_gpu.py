"""KernelBench's own harness (scripts/kb_harness.py: its eval_kernel_against_ref,
backend triton, fp32) on a GPU, on a hand-written example kernel, a wrong one and
the same kernel packaged as a solution package (decomposed_solution.py importing
its subkernel relatively), as `mkevolve run` ships them.

Needs CUDA, Triton and a KernelBench checkout ($MKEVOLVE_KB, default .kb/, with
src/kernelbench; brought in at test time, never committed); skipped otherwise.
The gpu-suite stage `messy` runs the same script on the three solutions its
runs return.

    PYTHONUNBUFFERED=1 python3 -m pytest -q tests/gpu/test_kb_harness_gpu.py
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KB = os.environ.get("MKEVOLVE_KB") or str(ROOT / ".kb")
torch = pytest.importorskip("torch")
pytest.importorskip("triton")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if not (Path(KB) / "src" / "kernelbench" / "eval.py").is_file():
    pytest.skip(f"no KernelBench checkout at {KB}", allow_module_level=True)

PROBLEM = ROOT / "examples" / "problems" / "03_linear_gelu.py"


def harness(tmp_path, *candidates):
    out = tmp_path / "kb.jsonl"
    args = [sys.executable, str(ROOT / "scripts" / "kb_harness.py"), "--kb", KB, "--problem", str(PROBLEM),
            "--out", str(out), "--perf-trials", "20", "--timeout", "300"]
    for c in candidates:
        args += ["--candidate", str(c)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=900)
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(lines) == len(candidates), r.stdout + r.stderr[-3000:]
    return r, lines


def package(tmp_path):
    sol = tmp_path / "run" / "solution"
    (sol / "subkernel_implementations").mkdir(parents=True)
    (sol / "__init__.py").write_text("")
    (sol / "subkernel_implementations" / "__init__.py").write_text("")
    (sol / "subkernel_implementations" / "linear_gelu.py").write_text(
        (ROOT / "examples" / "kernels" / "03_linear_gelu__tiled.py").read_text())
    (sol / "decomposed_solution.py").write_text(
        "import torch.nn as nn\n\nfrom .subkernel_implementations.linear_gelu import ModelNew as LinearGelu\n\n\n"
        "class ModelNew(nn.Module):\n    def __init__(self, *args):\n        super().__init__()\n"
        "        self.block = LinearGelu(*args)\n\n    def forward(self, x):\n        return self.block(x)\n")
    return sol


def test_kernelbench_judges_a_kernel_its_wrong_twin_and_a_solution_package(tmp_path):
    good = ROOT / "examples" / "kernels" / "03_linear_gelu__tiled.py"
    wrong = ROOT / "examples" / "kernels" / "03_linear_gelu__missing_bias.py"
    r, (g, w, p) = harness(tmp_path, good, wrong, package(tmp_path))
    assert g["compiled"] and g["correctness"], g
    assert g["runtime_ms"] > 0 and g["ref_runtime_ms"] > 0 and g["speedup"] > 0, g
    assert g["correctness_trials"] == "(5 / 5)" and g["harness"]["backend"] == "triton"
    assert w["compiled"] and w["correctness"] is False and "mismatch" in (w["error"] or ""), w
    assert p["kind"] == "package" and p["compiled"] and p["correctness"], p
    assert r.returncode == 1  # the wrong one
