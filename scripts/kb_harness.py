#!/usr/bin/env python3
"""Runs KernelBench's own harness on candidates: its `eval_kernel_against_ref`
(src/kernelbench/eval.py: its correctness trials, its timer, its tolerance),
loaded from a KernelBench checkout, never from this repository (KernelBench is
brought in at test time, e.g. unpacked under .kb/, and never committed).

  scripts/kb_harness.py --kb .kb --problem .kb/KernelBench/level3/31_VisionAttention.py \\
      --candidate runs/m31/solution --out kb.jsonl
  scripts/kb_harness.py --kb .kb --pairs pairs.txt --out kb.jsonl

A candidate is a single kernel file (its text is what KernelBench is given), or
a solution package directory holding decomposed_solution.py (KernelBench is
given a small source that puts the package's parent folder on sys.path and
imports ModelNew from PACKAGE.decomposed_solution). --pairs takes the
`mkevolve eval --batch` format: "PROBLEM KERNEL" per line, paths relative to the
file, '#' comments.

Each candidate runs in a child process of its own (a crash or a poisoned CUDA
context ends only that one), with KernelBench's defaults where this script
names none: backend "triton", fp32, seed 42, timing "cuda_event" (an L2 flush
per call, CUDA events on the current stream, the first timed call discarded,
3 warm-up calls), --trials correctness trials (5) and --perf-trials timed calls
(100) of the candidate and, for its excessive-speedup check, of the reference:
that is the `ref_runtime_ms` (eager PyTorch) reported here. KernelBench sets
no TF32 flag; neither does this script unless --tf32-off is given, and each
line records the flags in force.

One JSON line per candidate goes to stdout and is appended to --out, flushed as
it comes: problem, candidate, kind (file/package), compiled, correctness,
runtime_ms, ref_runtime_ms, speedup (ref_runtime / runtime, KernelBench's own
"effective speedup"), runtime_stats, ref_runtime_stats, error (the compilation,
runtime or correctness error KernelBench recorded), correctness_trials,
max_difference, excessive_speedup, seconds, harness (KernelBench's commit when
known, the settings, torch and Triton versions, the TF32 flags).
KernelBench's own prints go to stderr.

KernelBench's package __init__ imports its utils, which need packages a GPU
machine may lack (openai, litellm, dotenv, tqdm); this script registers the
package without running its __init__, uses KernelBench's utils module when it
imports and otherwise a stand-in for the one function eval.py takes from it
(get_gpu_vendor), and stands in for pydantic's BaseModel and for requests
(imported, unused by the harness) only when they are missing.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
import types


# -- loading KernelBench's eval.py ------------------------------------------------------

def _stub_pydantic() -> None:
    try:
        import pydantic  # noqa: F401
        return
    except ImportError:
        pass

    class BaseModel:
        """Stand-in for pydantic.BaseModel: fields from annotations, defaults copied per instance."""

        def __init__(self, **kwargs):
            for klass in reversed(type(self).__mro__):
                for name in getattr(klass, "__annotations__", {}):
                    if name in vars(klass):
                        setattr(self, name, copy.deepcopy(vars(klass)[name]))
            for k, v in kwargs.items():
                setattr(self, k, v)

        def model_dump(self):
            return dict(vars(self))

        dict = model_dump

    mod = types.ModuleType("pydantic")
    mod.BaseModel = BaseModel
    sys.modules["pydantic"] = mod


def _stub_requests() -> None:
    try:
        import requests  # noqa: F401
    except ImportError:
        sys.modules["requests"] = types.ModuleType("requests")


def _gpu_vendor(device=None) -> str:
    import torch
    if not torch.cuda.is_available():
        return "unknown"
    name = torch.cuda.get_device_name(torch.cuda.current_device() if device is None else device).upper()
    if "NVIDIA" in name:
        return "nvidia"
    if "AMD" in name or "MI3" in name:
        return "amd"
    return "unknown"


def load_kernelbench(kb_dir: str):
    """KernelBench's eval module, from KB_DIR/src/kernelbench."""
    src = os.path.join(os.path.abspath(kb_dir), "src", "kernelbench")
    if not os.path.isfile(os.path.join(src, "eval.py")):
        raise SystemExit(f"kb_harness: no KernelBench at {kb_dir} (expected {src}/eval.py)")
    _stub_pydantic()
    _stub_requests()
    pkg = types.ModuleType("kernelbench")
    pkg.__path__ = [src]
    pkg.__file__ = os.path.join(src, "__init__.py")
    sys.modules["kernelbench"] = pkg
    try:
        with contextlib.redirect_stdout(sys.stderr):
            importlib.import_module("kernelbench.utils")
    except Exception as exc:  # noqa: BLE001 (its optional dependencies: openai, litellm, dotenv, tqdm)
        sys.modules.pop("kernelbench.utils", None)
        utils = types.ModuleType("kernelbench.utils")
        utils.get_gpu_vendor = _gpu_vendor
        utils.__doc__ = f"kb_harness stand-in ({type(exc).__name__}: {exc})"
        sys.modules["kernelbench.utils"] = utils
        pkg.utils = utils
    return importlib.import_module("kernelbench.eval")


def kernelbench_commit(kb_dir: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", kb_dir, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


# -- candidates --------------------------------------------------------------------

def candidate_kind(path: str) -> str:
    if os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, "decomposed_solution.py")):
            raise SystemExit(f"kb_harness: {path}: a directory without decomposed_solution.py")
        return "package"
    if os.path.basename(path) == "decomposed_solution.py" and os.path.isfile(
            os.path.join(os.path.dirname(path), "__init__.py")):
        return "package"
    return "file"


def candidate_source(path: str) -> str:
    """What KernelBench is given: the kernel file's text, or an import of the package's ModelNew."""
    if candidate_kind(path) == "file":
        with open(path, encoding="utf-8") as f:
            return f.read()
    pkg_dir = os.path.abspath(path if os.path.isdir(path) else os.path.dirname(path))
    parent, name = os.path.dirname(pkg_dir), os.path.basename(pkg_dir)
    if not name.isidentifier():
        raise SystemExit(f"kb_harness: {pkg_dir}: the package's folder name is not a Python identifier")
    return ("# kb_harness.py: a solution package, imported from its folder\n"
            "import importlib\nimport sys\n\n"
            f"sys.path.insert(0, {parent!r})\n"
            f"ModelNew = importlib.import_module({name + '.decomposed_solution'!r}).ModelNew\n")


def read_pairs(path: str) -> list[tuple[str, str]]:
    base = os.path.dirname(os.path.abspath(path))
    pairs = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            fields = shlex.split(line)
            if len(fields) != 2:
                raise SystemExit(f"kb_harness: {path}:{n}: expected 'PROBLEM KERNEL', got {line!r}")
            pairs.append(tuple(os.path.join(base, p) for p in fields))
    return pairs


# -- one candidate (the child) ----------------------------------------------------------

def _text(v, limit=2000):
    s = v if isinstance(v, str) else repr(v) if isinstance(v, BaseException) else str(v)
    return s if len(s) <= limit else s[:limit] + "..."


def evaluate_one(args) -> dict:
    import torch
    if args.tf32_off:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    ev = load_kernelbench(args.kb)
    with open(args.problem, encoding="utf-8") as f:
        ref_src = f.read()
    cand_src = candidate_source(args.candidate)
    with contextlib.redirect_stdout(sys.stderr):
        res = ev.eval_kernel_against_ref(
            ref_src, cand_src, seed_num=args.seed, num_correct_trials=args.trials, num_perf_trials=args.perf_trials,
            measure_performance=True, timing_method="cuda_event", verbose=False, device=0, backend="triton",
            precision=torch.float32)
    if res is None:
        return {"compiled": None, "correctness": None,
                "error": "KernelBench returned no result (a lock-file error while loading: it asks for a retry)"}
    meta = dict(getattr(res, "metadata", {}) or {})
    runtime = getattr(res, "runtime", -1.0)
    ref = getattr(res, "ref_runtime", -1.0)
    err = None
    for key in ("compilation_error", "runtime_error", "correctness_issue", "error_during_performance"):
        if meta.get(key):
            err = f"{key}: {_text(meta[key])}"
            break
    return {
        "compiled": bool(res.compiled), "correctness": bool(res.correctness),
        "runtime_ms": runtime if runtime and runtime > 0 else None,
        "ref_runtime_ms": ref if ref and ref > 0 else None,
        "speedup": round(ref / runtime, 4) if runtime and runtime > 0 and ref and ref > 0 else None,
        "runtime_stats": res.runtime_stats or None, "ref_runtime_stats": res.ref_runtime_stats or None,
        "error": err, "correctness_trials": meta.get("correctness_trials"),
        "max_difference": meta.get("max_difference"), "excessive_speedup": bool(meta.get("excessive_speedup")),
        "metadata": {k: _text(v, 400) for k, v in meta.items() if k != "runtime_error_traceback"},
    }


def harness_record(args) -> dict:
    rec = {"kernelbench": os.path.abspath(args.kb), "kernelbench_commit": kernelbench_commit(args.kb),
           "function": "kernelbench.eval.eval_kernel_against_ref", "backend": "triton", "precision": "fp32",
           "seed": args.seed, "correctness_trials": args.trials, "perf_trials": args.perf_trials,
           "timing": "cuda_event (KernelBench's timer: L2 flush, 3 warm-up calls, first timed call discarded)",
           "tolerance": "KernelBench's for fp32 (atol = rtol = 1e-4)"}
    try:
        import torch
        rec["torch"] = torch.__version__
        rec["tf32"] = {"matmul": torch.backends.cuda.matmul.allow_tf32, "cudnn": torch.backends.cudnn.allow_tf32,
                       "set_by_kb_harness": bool(args.tf32_off)}
        rec["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
        import triton
        rec["triton"] = triton.__version__
    except Exception as exc:  # noqa: BLE001
        rec["versions_error"] = _text(exc, 200)
    rec["TRITON_F32_DEFAULT"] = os.environ.get("TRITON_F32_DEFAULT")
    utils = sys.modules.get("kernelbench.utils")
    rec["kernelbench_utils"] = (None if utils is None else utils.__doc__ if (utils.__doc__ or "").startswith(
        "kb_harness stand-in") else "KernelBench's own")
    return rec


def child_main(args) -> int:
    t0 = time.time()
    try:
        out = evaluate_one(args)
    except BaseException as exc:  # noqa: BLE001 (reported, not raised: the parent writes the line)
        out = {"compiled": None, "correctness": None, "error": f"kb_harness: {type(exc).__name__}: {_text(exc)}"}
    out["harness"] = harness_record(args)
    out["child_seconds"] = round(time.time() - t0, 2)
    with open(args.result, "w", encoding="utf-8") as f:
        json.dump(out, f, default=str)
    return 0


# -- the parent -------------------------------------------------------------------

def run_pair(args, problem: str, candidate: str) -> dict:
    problem, candidate = os.path.abspath(problem), os.path.abspath(candidate)  # the child runs elsewhere
    line = {"problem": problem, "candidate": candidate}
    try:
        line["kind"] = candidate_kind(candidate)
    except SystemExit as exc:
        return {**line, "compiled": None, "correctness": None, "error": str(exc)}
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="kb-harness-") as tmp:
        result = os.path.join(tmp, "result.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--kb", os.path.abspath(args.kb),
               "--problem", problem, "--candidate", candidate, "--result", result, "--trials", str(args.trials),
               "--perf-trials", str(args.perf_trials), "--seed", str(args.seed)]
        if args.tf32_off:
            cmd.append("--tf32-off")
        try:
            # The child's own output (KernelBench's prints) goes to our stderr as it comes.
            proc = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr, timeout=args.timeout, cwd=tmp)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = None
        if os.path.isfile(result):
            with open(result, encoding="utf-8") as f:
                line.update(json.load(f))
        elif rc is None:
            line.update({"compiled": None, "correctness": None, "error": f"timeout after {args.timeout} s"})
        else:
            line.update({"compiled": None, "correctness": None,
                         "error": f"the child process ended with status {rc} and no result (crashed)"})
    line["seconds"] = round(time.time() - t0, 2)
    return line


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kb", default=os.environ.get("MKEVOLVE_KB", ".kb"),
                    help="KernelBench checkout (holds src/kernelbench/eval.py); default $MKEVOLVE_KB or .kb")
    ap.add_argument("--problem", help="the problem file (with --candidate)")
    ap.add_argument("--candidate", action="append", default=[], help="a kernel file or a solution package (repeat)")
    ap.add_argument("--pairs", help="a file of 'PROBLEM KERNEL' lines (mkevolve eval --batch's format)")
    ap.add_argument("--out", help="append each JSON line here too")
    ap.add_argument("--trials", type=int, default=5, help="KernelBench's correctness trials (5)")
    ap.add_argument("--perf-trials", type=int, default=100, help="KernelBench's timed calls (100)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--timeout", type=float, default=600, help="seconds per candidate")
    ap.add_argument("--tf32-off", action="store_true", help="turn PyTorch's TF32 flags off (KernelBench sets none)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        args.candidate = args.candidate[0]
        return child_main(args)
    pairs = [(args.problem, c) for c in args.candidate] if args.candidate else []
    if args.candidate and not args.problem:
        ap.error("--candidate needs --problem")
    if args.pairs:
        pairs += read_pairs(args.pairs)
    if not pairs:
        ap.error("nothing to evaluate: give --problem P --candidate C, or --pairs FILE")
    out = open(args.out, "a", encoding="utf-8") if args.out else None
    bad = 0
    for problem, candidate in pairs:
        line = json.dumps(run_pair(args, problem, candidate), default=str)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()
        bad += '"correctness": true' not in line
    if out:
        out.close()
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
