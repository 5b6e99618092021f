"""Correctness: the trial plan, input generation and the trusted comparison.

KernelBench-compatible (seeded Model/ModelNew construction, N trials with
fresh random inputs, allclose with atol/rtol) and stricter:
- exact shape and dtype (broadcastable or castable is wrong);
- NaN/Inf never pass where the reference is finite;
- error must also be small relative to the output's own scale, so zeros or
  constants cannot pass on tiny outputs (softmax over wide rows);
- a constant output where the reference varies is rejected;
- alternate-distribution trials (scaled signed normal for floating inputs)
  catch kernels that only work on nonnegative torch.rand inputs;
- every configuration of get_input_configs() is checked;
- in-place mutation of an input the reference leaves alone is rejected.

plan_trials() and the compare functions run in the server; generate_inputs()
runs in the reference child. torch is imported lazily.
"""

from __future__ import annotations

import math

DEFAULTS = {
    "trials": 5,
    "candidate_first_trials": 2,   # accepted for protocol v1; every trial now runs candidate first
    "alt_dist_trials": 1,
    "atol": 1e-4,
    "rtol": 1e-4,
    "scale_tol": None,   # default: max(1e-2, 10 * rtol)
    "seed": 42,
    "perf": True,
    "warmup": 10,
    "perf_trials": 100,
    "baselines": False,
    "timeout_s": 300.0,
    "allow_pytorch": False,
    "test_cpu": False,
    "wall_check": True,
    "profile": True,        # the runtime profile, in a second process of the candidate (CUPTI's start-up,
                            # 3.3 s on an H200, overlaps the first process's compile and trials); turning it
                            # off leaves the static layer alone against foreign kernels
    "static_check": True,   # false is honoured only in --test-mode (to exercise the runtime layers alone)
    "timing": "device",     # "device": GPU time (the host's launch hidden behind a short device-side spin);
                            # "synced": each call launched onto an idle GPU, host latency included
                            # (KernelBench's way). Both are recorded; this one is the speed.
}


TIMING_MODES = ("device", "synced")


def normalize_options(raw: dict | None) -> dict:
    """Defaults filled in; types checked. Raises ValueError naming a bad option."""
    raw = dict(raw or {})
    out = dict(DEFAULTS)
    for k, v in raw.items():
        if k not in DEFAULTS:
            continue  # unknown options are ignored (forward compatibility)
        d = DEFAULTS[k]
        if isinstance(d, str):
            if v not in TIMING_MODES:
                raise ValueError(f"option {k} must be one of {', '.join(TIMING_MODES)}")
        elif isinstance(d, bool):
            if not isinstance(v, bool):
                raise ValueError(f"option {k} must be true or false")
        elif isinstance(d, int):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v or v < 0:
                raise ValueError(f"option {k} must be a non-negative integer")
            v = int(v)
        elif isinstance(d, float) or d is None:
            if v is None and d is None:
                pass
            elif isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"option {k} must be a non-negative number")
            else:
                v = float(v)
        out[k] = v
    if out["trials"] < 1:
        raise ValueError("option trials must be at least 1")
    if out["timeout_s"] <= 0:
        raise ValueError("option timeout_s must be positive")
    out["candidate_first_trials"] = min(out["candidate_first_trials"], out["trials"])
    if out["scale_tol"] is None:
        out["scale_tol"] = max(1e-2, 10 * out["rtol"])
    return out


def plan_trials(n_configs: int, opts: dict) -> list[dict]:
    """Every correctness trial: config index, seed, kind of inputs, and order."""
    seed = opts["seed"]
    trials = []
    for c in range(n_configs):
        for t in range(opts["trials"]):
            trials.append({"id": f"c{c}t{t}", "config": c, "seed": seed + 1000 * c + t, "alt": False,
                           "cand_first": t >= opts["trials"] - opts["candidate_first_trials"]})
        for a in range(opts["alt_dist_trials"]):
            trials.append({"id": f"c{c}a{a}", "config": c, "seed": seed + 1000 * c + 500 + a, "alt": True,
                           "cand_first": False})
    return trials


def timing_inputs_trial(opts: dict) -> dict:
    """The inputs of the last timed call: known to both children by seed."""
    return {"id": "last", "config": 0, "seed": opts["seed"] + 777_777, "alt": False, "cand_first": False}


# ---------------------------------------------------------------------------
# Seeding and input generation (children)


def seed_all(seed: int) -> None:
    import random
    import torch
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import sys
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed(seed % (2 ** 32))
    except Exception:  # noqa: BLE001 - numpy seeding is best effort
        pass


def disable_tf32() -> None:
    import torch
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    except AttributeError:
        pass
    try:
        torch.set_float32_matmul_precision("highest")
    except AttributeError:
        pass


def alternate_distribution(inputs, seed: int):
    """Same shapes and dtypes; floating tensors drawn from a scaled signed
    normal instead (integer and bool inputs keep their values)."""
    import torch
    g = torch.Generator().manual_seed(seed)
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.dtype.is_floating_point:
            cpu = x.detach().to("cpu")
            finite = cpu[torch.isfinite(cpu)] if cpu.numel() else cpu
            scale = max(1.0, float(finite.abs().max())) if finite.numel() else 1.0
            y = torch.randn(cpu.shape, generator=g, dtype=torch.float32) * scale
            out.append(y.to(dtype=x.dtype))
        else:
            out.append(x)
    return out


def generate_inputs(cfg: dict, trial: dict):
    """Inputs of one trial, on CPU."""
    import torch
    seed_all(trial["seed"])
    inputs = list(cfg["get_inputs"]())
    inputs = [x.detach().to("cpu") if isinstance(x, torch.Tensor) else x for x in inputs]
    if trial["alt"]:
        inputs = alternate_distribution(inputs, trial["seed"] + 1)
    return inputs


def to_device(inputs, device):
    """Fresh device copies of the tensors in inputs (each model gets its own)."""
    import torch
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            out.append(x.detach().to(device=device, copy=True))
        else:
            out.append(x)
    return out


def to_cpu_tree(obj):
    import torch
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu")
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu_tree(x) for x in obj)
    if isinstance(obj, dict):
        return {k: to_cpu_tree(v) for k, v in obj.items()}
    return obj


def tree_devices(obj) -> list[str]:
    import torch
    if isinstance(obj, torch.Tensor):
        return [obj.device.type]
    if isinstance(obj, (list, tuple)):
        return [d for x in obj for d in tree_devices(x)]
    if isinstance(obj, dict):
        return [d for x in obj.values() for d in tree_devices(x)]
    return []


def tensors_equal(a, b) -> bool:
    """Bitwise-ish equality that treats NaN == NaN (for input-mutation checks)."""
    import torch
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return a == b
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if torch.equal(a, b):
        return True
    if a.dtype.is_floating_point or a.dtype.is_complex:
        both_nan = torch.isnan(a) & torch.isnan(b)
        return bool(((a == b) | both_nan).all())
    return bool(torch.equal(a, b))


# ---------------------------------------------------------------------------
# The trusted comparison (server)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _index(flat: int, shape) -> tuple:
    idx = []
    for s in reversed(list(shape)):
        idx.append(flat % s if s else 0)
        flat = flat // s if s else 0
    return tuple(reversed(idx))


def _where(path: str) -> str:
    return f"output{path}" if path else "output"


def _all_finite(x) -> bool:
    """Fast test: a finite sum means every element is finite (torch.isfinite is
    slow on some CPU builds); an infinite sum falls back to the exact test."""
    import torch
    if x.numel() == 0:
        return True
    if math.isfinite(float(x.sum())):
        return True
    return bool(torch.isfinite(x).all())


def _norm(x, max_abs: float) -> float:
    """L2 norm without overflow or underflow of the squares in float32."""
    import torch
    if max_abs == 0:
        return 0.0
    if 1e-15 < max_abs < 1e15:
        return float(torch.linalg.vector_norm(x))
    return float(torch.linalg.vector_norm(x / max_abs)) * max_abs


def compare_tensor(exp, got, opts: dict, path: str = "") -> dict:
    """Checks one tensor. Returns {"ok": bool, "kind", "message", "max_abs_err", "rel_err"}."""
    import torch
    res = {"ok": True, "max_abs_err": 0.0, "rel_err": 0.0}
    name = _where(path)
    if not isinstance(got, torch.Tensor):
        return {"ok": False, "kind": "wrong_structure",
                "message": f"{name} is a {type(got).__name__}, expected a tensor of shape {list(exp.shape)}"}
    if tuple(got.shape) != tuple(exp.shape):
        return {"ok": False, "kind": "wrong_shape",
                "message": f"{name} has shape {list(got.shape)}, expected {list(exp.shape)} "
                           f"(shapes must match exactly; broadcastable is not enough)"}
    if got.dtype != exp.dtype:
        return {"ok": False, "kind": "wrong_dtype",
                "message": f"{name} has dtype {str(got.dtype).replace('torch.', '')}, "
                           f"expected {str(exp.dtype).replace('torch.', '')} (dtypes must match exactly)"}
    if exp.numel() == 0:
        return res
    if not (exp.dtype.is_floating_point or exp.dtype.is_complex):
        neq = (got != exp).reshape(-1)
        if bool(neq.any()):
            i = int(neq.nonzero()[0])
            return {"ok": False, "kind": "mismatch",
                    "message": f"{name} differs at index {_index(i, exp.shape)}: got {got.reshape(-1)[i].item()}, "
                               f"expected {exp.reshape(-1)[i].item()} ({int(neq.sum())} of {exp.numel()} elements differ)",
                    "max_abs_err": float((got.double() - exp.double()).abs().max())}
        return res
    # Compare in float32 (float64 for float64 outputs): a float32 subtraction
    # errs by at most one ulp, far below any tolerance we accept. No boolean
    # indexing and no float64 copies: outputs can have hundreds of millions of
    # elements and the server compares on one CPU thread.
    cdt = torch.float64 if exp.dtype in (torch.float64, torch.complex128) else torch.float32
    e = exp.reshape(-1)
    g = got.reshape(-1)
    if exp.dtype.is_complex:
        e = torch.view_as_real(e).reshape(-1)
        g = torch.view_as_real(g).reshape(-1)
    e = e.to(cdt)
    g = g.to(cdt)

    def at(i: int):
        # Index into the original tensor (complex outputs are compared as real pairs).
        j = i // 2 if exp.dtype.is_complex else i
        return _index(j, exp.shape)

    all_e_fin = _all_finite(e)
    all_g_fin = _all_finite(g)
    e_fin = torch.isfinite(e) if not (all_e_fin and all_g_fin) else None
    if not all_g_fin:
        g_fin = torch.isfinite(g)
        bad_nf = e_fin & ~g_fin
        if bool(bad_nf.any()):
            i = int(bad_nf.nonzero()[0])
            n = int(bad_nf.sum())
            return {"ok": False, "kind": "nan",
                    "message": f"{name} has {_fmt(g[i].item())} at index {at(i)} where {_fmt(e[i].item())} "
                               f"was expected ({n} of {e.numel()} elements are NaN/Inf)",
                    "max_abs_err": math.inf}
    if not all_e_fin:
        # Where the reference itself is non-finite, demand the same value; then
        # compare the rest with those positions zeroed in both.
        same = (torch.isnan(e) & torch.isnan(g)) | (e == g)
        wrong = ~e_fin & ~same
        if bool(wrong.any()):
            i = int(wrong.nonzero()[0])
            return {"ok": False, "kind": "mismatch",
                    "message": f"{name} differs at index {at(i)}: got {_fmt(g[i].item())}, "
                               f"expected {_fmt(e[i].item())}", "max_abs_err": math.inf}
        zero = torch.zeros((), dtype=cdt)
        e = torch.where(e_fin, e, zero)
        g = torch.where(e_fin, g, zero)
        if not bool(e_fin.any()):
            return res
    del e_fin
    diff = (g - e).abs_()
    max_abs = float(diff.max())
    res["max_abs_err"] = max_abs
    e_abs = e.abs()
    e_max_abs = float(e_abs.max())
    # A constant where the reference varies well beyond rounding noise.
    if g.numel() > 1:
        g_min, g_max = float(g.min()), float(g.max())
        e_min, e_max = float(e.min()), float(e.max())
        if g_min == g_max and (e_max - e_min) > 1e-3 * e_max_abs:
            return {"ok": False, "kind": "mismatch",
                    "message": f"{name} is constant (every element is {_fmt(g_min)}) but the expected output "
                               f"varies from {_fmt(e_min)} to {_fmt(e_max)}",
                    "max_abs_err": max_abs}
    tol = e_abs.mul_(opts["rtol"]).add_(opts["atol"])
    bad = diff > tol
    if bool(bad.any()):
        i = int(bad.nonzero()[0]) if bad.numel() < (1 << 31) else int(torch.argmax(bad.to(torch.uint8)))
        return {"ok": False, "kind": "mismatch",
                "message": f"{name} differs at index {at(i)}: got {_fmt(g[i].item())}, expected "
                           f"{_fmt(e[i].item())} (|diff| {diff[i].item():.3g} > atol+rtol*|expected| "
                           f"{tol[i].item():.3g}); {int(bad.sum())} of {e.numel()} elements differ, "
                           f"max_abs_err {max_abs:.3g}",
                "max_abs_err": max_abs}
    del bad, tol
    norm_e = _norm(e, e_max_abs)
    if norm_e > 0:
        rel = _norm(diff, max_abs) / norm_e
        res["rel_err"] = rel
        if rel > opts["scale_tol"]:
            return {"ok": False, "kind": "mismatch",
                    "message": f"{name} is wrong relative to its own scale: relative L2 error {rel:.3g} > "
                               f"{opts['scale_tol']:.3g} although every element is within atol "
                               f"(expected values are tiny: max |expected| {e_max_abs:.3g}); "
                               f"compute the actual values, zeros or constants do not pass",
                    "max_abs_err": max_abs, "rel_err": rel}
    return res


def compare_tree(exp, got, opts: dict, path: str = "") -> dict:
    """Compares an output (tensor, tuple/list of outputs, or scalar) with the reference's."""
    import torch
    if isinstance(exp, torch.Tensor):
        return compare_tensor(exp, got, opts, path)
    if isinstance(exp, (list, tuple)):
        if not isinstance(got, (list, tuple)):
            return {"ok": False, "kind": "wrong_structure",
                    "message": f"{_where(path)} is a {type(got).__name__}, expected a {type(exp).__name__} of {len(exp)}"}
        if len(got) != len(exp):
            return {"ok": False, "kind": "wrong_structure",
                    "message": f"{_where(path)} has {len(got)} elements, expected {len(exp)}"}
        worst = {"ok": True, "max_abs_err": 0.0, "rel_err": 0.0}
        for i, (a, b) in enumerate(zip(exp, got)):
            r = compare_tree(a, b, opts, f"{path}[{i}]")
            if not r["ok"]:
                return r
            worst["max_abs_err"] = max(worst["max_abs_err"], r.get("max_abs_err", 0.0))
            worst["rel_err"] = max(worst["rel_err"], r.get("rel_err", 0.0))
        return worst
    if isinstance(exp, dict):
        if not isinstance(got, dict) or sorted(got) != sorted(exp):
            return {"ok": False, "kind": "wrong_structure",
                    "message": f"{_where(path)} must be a dict with keys {sorted(exp)}"}
        worst = {"ok": True, "max_abs_err": 0.0, "rel_err": 0.0}
        for k in exp:
            r = compare_tree(exp[k], got[k], opts, f"{path}[{k!r}]")
            if not r["ok"]:
                return r
            worst["max_abs_err"] = max(worst["max_abs_err"], r.get("max_abs_err", 0.0))
        return worst
    if isinstance(exp, (int, float)) and not isinstance(exp, bool):
        if isinstance(got, torch.Tensor) or not isinstance(got, (int, float)) or isinstance(got, bool):
            return {"ok": False, "kind": "wrong_structure",
                    "message": f"{_where(path)} is a {type(got).__name__}, expected a Python number"}
        if not math.isfinite(got) and math.isfinite(exp):
            return {"ok": False, "kind": "nan", "message": f"{_where(path)} is {got}, expected {exp}"}
        if abs(got - exp) > opts["atol"] + opts["rtol"] * abs(exp):
            return {"ok": False, "kind": "mismatch", "message": f"{_where(path)} is {got}, expected {exp}",
                    "max_abs_err": abs(got - exp)}
        return {"ok": True, "max_abs_err": abs(got - exp), "rel_err": 0.0}
    if exp != got:
        return {"ok": False, "kind": "mismatch", "message": f"{_where(path)} is {got!r}, expected {exp!r}"}
    return {"ok": True, "max_abs_err": 0.0, "rel_err": 0.0}


def is_finite_tree(obj) -> bool:
    import torch
    if isinstance(obj, torch.Tensor):
        if obj.dtype.is_floating_point or obj.dtype.is_complex:
            return bool(torch.isfinite(obj).all())
        return True
    if isinstance(obj, (list, tuple)):
        return all(is_finite_tree(x) for x in obj)
    if isinstance(obj, dict):
        return all(is_finite_tree(x) for x in obj.values())
    if isinstance(obj, float):
        return math.isfinite(obj)
    return True


def is_constant_tree(obj) -> bool:
    """True when every tensor in obj holds a single repeated value."""
    import torch
    ts = []

    def walk(o):
        if isinstance(o, torch.Tensor):
            ts.append(o)
        elif isinstance(o, (list, tuple)):
            for x in o:
                walk(x)
        elif isinstance(o, dict):
            for x in o.values():
                walk(x)
    walk(obj)
    if not ts:
        return False
    for t in ts:
        if t.numel() > 1:
            f = t.reshape(-1)
            if not bool((f == f[0]).all()):
                return False
    return True


def tree_nbytes(obj) -> int:
    import torch
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, (list, tuple)):
        return sum(tree_nbytes(x) for x in obj)
    if isinstance(obj, dict):
        return sum(tree_nbytes(x) for x in obj.values())
    return 0


def wipe_tree(obj) -> None:
    """Zeroes every tensor in obj in place (outputs the server has compared:
    children forked later must not find them in its memory)."""
    import torch
    if isinstance(obj, torch.Tensor):
        try:
            with torch.no_grad():
                obj.zero_()
        except RuntimeError:
            pass  # read-only or an expanded view: freed, and glibc wipes it (isolation.wipe_freed_memory)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            wipe_tree(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            wipe_tree(x)
