"""scripts/kb_harness.py and scripts/peer_kernels.py on the CPU.

KernelBench's real eval_kernel_against_ref needs CUDA, so kb_harness.py is run
here against a stand-in KernelBench checkout written in tmp_path: an eval.py
whose eval_kernel_against_ref loads the candidate as KernelBench does (the
source written to a temporary file and imported) and compares it with the
problem on the CPU, importing pydantic and its utils' get_gpu_vendor as the
real one does. That checks what the script itself does: the package source it
hands KernelBench, one child process per candidate, JSON lines as they come,
crashes and timeouts reported. The GPU stage `messy` runs the real harness.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch")

REPO = pathlib.Path(__file__).resolve().parents[2]
HARNESS = REPO / "scripts" / "kb_harness.py"
PEER = REPO / "scripts" / "peer_kernels.py"

FAKE_EVAL = '''"""Stand-in for KernelBench's eval.py (CPU, for tests/python/test_kb_harness.py)."""
import importlib.util
import os
import tempfile

import torch
from pydantic import BaseModel


class KernelExecResult(BaseModel):
    compiled: bool = False
    correctness: bool = False
    metadata: dict = {}
    runtime: float = -1.0
    runtime_stats: dict = {}
    ref_runtime: float = -1.0
    ref_runtime_stats: dict = {}


def eval_kernel_against_ref(original_model_src, custom_model_src, seed_num=42, num_correct_trials=1,
                            num_perf_trials=10, measure_performance=False, timing_method="cuda_event",
                            verbose=False, build_dir=None, device=None, backend="cuda",
                            precision=torch.float32, **kwargs):
    from .utils import get_gpu_vendor
    print("[fake eval] vendor", get_gpu_vendor(device), "backend", backend)  # KernelBench prints to stdout
    ctx = {}
    exec(original_model_src, ctx)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(custom_model_src)
    spec = importlib.util.spec_from_file_location("temp_module", f.name)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
        ModelNew = mod.ModelNew
    except Exception as e:
        return KernelExecResult(compiled=False, metadata={"compilation_error": e})
    finally:
        os.remove(f.name)
    torch.manual_seed(seed_num)
    ref = ctx["Model"](*ctx["get_init_inputs"]())
    torch.manual_seed(seed_num)
    new = ModelNew(*ctx["get_init_inputs"]())
    passed = 0
    for t in range(num_correct_trials):
        torch.manual_seed(t)
        x = ctx["get_inputs"]()
        passed += torch.allclose(ref(*x), new(*x), atol=1e-4, rtol=1e-4)
    meta = {"correctness_trials": f"({passed} / {num_correct_trials})", "backend": backend}
    if passed < num_correct_trials:
        meta["correctness_issue"] = "Output mismatch"
    return KernelExecResult(compiled=True, correctness=passed == num_correct_trials, metadata=meta,
                            runtime=2.0, runtime_stats={"mean": 2.0}, ref_runtime=3.0,
                            ref_runtime_stats={"mean": 3.0, "num_trials": num_perf_trials})
'''

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8]
'''

KERNEL = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return (x @ self.fc.weight.t() + self.fc.bias).clamp_min(@LOW@)
'''


@pytest.fixture
def kb(tmp_path):
    root = tmp_path / "kb"
    pkg = root / "src" / "kernelbench"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('KernelBench's __init__ must not run here')\n")
    (pkg / "utils.py").write_text("import dotenv_is_missing_here  # noqa\n")  # as openai/litellm/dotenv are
    (pkg / "eval.py").write_text(FAKE_EVAL)
    return root


def harness(*args, timeout=120, cwd=None):
    return subprocess.run([sys.executable, str(HARNESS), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def test_a_file_a_package_a_wrong_one_and_a_crash(kb, tmp_path):
    (tmp_path / "p.py").write_text(PROBLEM)
    (tmp_path / "good.py").write_text(KERNEL.replace("@LOW@", "0"))
    (tmp_path / "wrong.py").write_text(KERNEL.replace("@LOW@", "0.5"))
    (tmp_path / "crash.py").write_text("import os\nos._exit(3)\n")
    run = tmp_path / "run" / "solution"
    (run / "subkernel_implementations").mkdir(parents=True)
    (run / "__init__.py").write_text("")
    (run / "subkernel_implementations" / "__init__.py").write_text("")
    (run / "subkernel_implementations" / "lin.py").write_text(KERNEL.replace("@LOW@", "0"))
    (run / "decomposed_solution.py").write_text(
        "import torch.nn as nn\n\nfrom .subkernel_implementations.lin import ModelNew as Lin\n\n\n"
        "class ModelNew(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
        "        self.lin = Lin(n)\n\n    def forward(self, x):\n        return self.lin(x)\n")
    (tmp_path / "pairs.txt").write_text("# a comment\np.py run/solution\n\np.py wrong.py\n")
    out = tmp_path / "kb.jsonl"
    r = harness("--kb", "kb", "--problem", "p.py", "--candidate", "good.py",  # relative to the working directory
                "--candidate", tmp_path / "crash.py", "--pairs", tmp_path / "pairs.txt", "--out", out,
                "--trials", 3, "--perf-trials", 7, cwd=tmp_path)
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [json.loads(x) for x in out.read_text().splitlines()] == lines
    assert r.returncode == 1, r.stderr  # not every candidate correct
    good, crash, package, wrong = lines
    assert good["kind"] == "file" and good["compiled"] and good["correctness"] and good["speedup"] == 1.5
    assert good["correctness_trials"] == "(3 / 3)" and good["ref_runtime_stats"]["num_trials"] == 7
    assert good["metadata"]["backend"] == "triton" and good["harness"]["backend"] == "triton"
    assert good["harness"]["kernelbench_utils"].startswith("kb_harness stand-in (ModuleNotFoundError")
    assert "[fake eval] vendor unknown backend triton" in r.stderr, "KernelBench's prints go to stderr"
    assert crash["correctness"] is None and "no result" in crash["error"]
    assert package["kind"] == "package" and package["correctness"], package
    assert wrong["correctness"] is False and "correctness_issue" in wrong["error"]
    assert all(x["harness"]["correctness_trials"] == 3 for x in (good, package, wrong))


def test_a_timeout_is_reported(kb, tmp_path):
    (tmp_path / "p.py").write_text(PROBLEM)
    (tmp_path / "slow.py").write_text("import time\ntime.sleep(60)\n")
    r = harness("--kb", kb, "--problem", tmp_path / "p.py", "--candidate", tmp_path / "slow.py", "--timeout", 3)
    [line] = [json.loads(x) for x in r.stdout.splitlines()]
    assert line["error"] == "timeout after 3.0 s" and r.returncode == 1


def test_usage_errors(kb, tmp_path):
    assert harness("--kb", kb).returncode == 2
    assert harness("--kb", kb, "--candidate", "x.py").returncode == 2


def test_peer_adapters_call_kernel_function_with_the_modules_parameters(tmp_path):
    peer = tmp_path / "peer" / "L2" / "29_Matmul_Mish_Mish"
    peer.mkdir(parents=True)
    (peer / "kernel_code.py").write_text(
        "import torch\n\nCALLS = []\n\n\ndef kernel_function(x, W, b):\n    CALLS.append((W, b))\n"
        "    return torch.nn.functional.mish(torch.nn.functional.mish(x @ W.t() + b))\n")
    level = tmp_path / "kb" / "KernelBench" / "level2"
    level.mkdir(parents=True)
    (level / "29_Matmul_Mish_Mish.py").write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self, in_features, out_features):\n        super().__init__()\n"
        "        self.linear = nn.Linear(in_features, out_features)\n\n    def forward(self, x):\n"
        "        return torch.nn.functional.mish(torch.nn.functional.mish(self.linear(x)))\n\n\n"
        "def get_inputs():\n    return [torch.rand(4, 8)]\n\n\ndef get_init_inputs():\n    return [8, 6]\n")
    r = subprocess.run([sys.executable, str(PEER), "--peer", str(tmp_path / "peer"), "--kb", str(tmp_path / "kb"),
                        "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert r.returncode == 0 and "1 adapter(s)" in r.stdout, r.stdout + r.stderr
    assert "skipped L3/31_VisionAttention" in r.stderr  # not in this stand-in mirror
    [pair] = [x for x in (tmp_path / "out" / "pairs.txt").read_text().splitlines() if not x.startswith("#")]
    problem, cand = pair.split()
    assert problem == str((level / "29_Matmul_Mish_Mish.py").resolve())
    ns = {}
    exec(compile(open(cand).read(), cand, "exec"), ns)
    import torch
    m = ns["ModelNew"](*ns["get_init_inputs"]())
    assert isinstance(m, ns["Model"])
    x = ns["get_inputs"]()[0]
    torch.testing.assert_close(m(x), ns["Model"].forward(m, x))
    assert ns["CALLS"][0][0] is m.linear.weight and ns["CALLS"][0][1] is m.linear.bias


def test_loads_kernelbench_eval_from_a_real_checkout():
    kb = os.environ.get("MKEVOLVE_KB") or str(REPO / ".kb")
    if not (pathlib.Path(kb) / "src" / "kernelbench" / "eval.py").is_file():
        pytest.skip("no KernelBench checkout ($MKEVOLVE_KB or .kb/ with src/kernelbench)")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import kb_harness as k; "
            "ev = k.load_kernelbench(sys.argv[2]); import inspect; "
            "p = inspect.signature(ev.eval_kernel_against_ref).parameters; "
            "print(all(n in p for n in ('backend', 'precision', 'num_perf_trials', 'timing_method')))")
    r = subprocess.run([sys.executable, "-c", code, str(HARNESS.parent), kb], capture_output=True, text=True)
    assert r.stdout.strip().endswith("True"), r.stdout + r.stderr
