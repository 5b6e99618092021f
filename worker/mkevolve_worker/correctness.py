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

plan_trials() runs in the server; generate_inputs() and the compare
functions run in the reference child, on its device. torch is imported lazily.
"""

from __future__ import annotations

import math
import operator

from . import layouts as _layouts

DEFAULTS = {
    "trials": 5,
    "candidate_first_trials": 2,   # accepted for protocol v1; every trial now runs candidate first
    "alt_dist_trials": 1,
    "trials_dist": "x1,x3,x0.01,neg",  # KernelBench-Verified's input scales, one extra trial each (x1: the
                                       # regular trials); "none": only the regular and signed-input trials
    "atol": None,        # None: by the output's dtype (DTYPE_TOLERANCE), unless the problem declares it
    "rtol": None,
    "pass_rate": None,   # the fraction of elements that must be within tolerance; None: as atol
    "scale_tol": None,   # default: max(1e-2, 10 * rtol)
    "calibrated": None,  # calibrated tolerances (calibration.py): {"outputs": {path: {trial kind: atol}},
                         # "source": file}; an output found there is judged at that atol with rtol 0
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
    "profile_ncu": False,   # a correct, timed candidate is also profiled by Nsight Compute (ncu.py):
                            # measured DRAM bytes, SM and memory throughput, achieved occupancy per kernel
    "static_check": True,   # false is honoured only in --test-mode (to exercise the runtime layers alone)
    "test_static": False,   # --test-mode only: enforce the static layer in test_cpu too (candidates written
                            # in Triton, run on the CPU through a stand-in Triton on the server's path)
    "shapes": "benchmark",  # shapes.py: benchmark, check (a correct candidate is also run at the problem's
                            # derived shape variants, reported) or search (the variants are configurations)
    "shape_variant": None,  # internal (check mode): evaluate at this derived variant's index alone
    "host_mem_limit_bytes": 0,    # a candidate process over this much private host memory is killed (oom); 0: none
    "device_mem_limit_bytes": 0,  # a candidate process may reserve at most this much on the GPU; 0: none
    "reference_timeout_s": 0.0,   # each step of the reference's own deadline; 0: max(timeout_s, 600)
    "compile_timeout_s": 0.0,     # the torch.compile baseline's compile step; 0: 2 x max(timeout_s, 60).
                                  # Past it the baseline has eager only, and compile_error says why
    "compile_lock_s": 60.0,       # at most this long the compile step holds the GPU's timing lock shared;
                                  # longer compiles (mostly CPU work) go on without it, so they never
                                  # hold up neighbours' timed phases for minutes
    "test_slow_compile_s": 0.0,   # CPU test mode only: the compile step sleeps this long first
    "trace_memory": False,        # diagnosis: the reference reports its device memory at each step of each
                                  # trial (checks.footprint.ref_trace; scripts/probe_reference_memory.py)
    "ref_max_split_mb": 0,        # diagnosis: the reference's caching allocator never splits a cached block
                                  # larger than this for a smaller tensor (torch's max_split_size_mb; 0:
                                  # torch's default, no limit), to tell fragmentation from memory held
    "test_pool_bytes": 0,         # CPU test mode only: timing.POOL_BYTES instead (0: the real one), so small
                                  # inputs take the large-input path (timed in place, timing.in_place)
    "tf32": False,          # the baseline op only: time eager and torch.compile with TF32 on (--baseline-tf32,
                            # a second baseline beside the TF32-off one); an evaluation refuses it
    "plain_env": False,     # the candidate's processes run without the harness's TRITON_F32_DEFAULT=ieee, as
                            # in the user's own process (the final check of a package whose dots name their
                            # precision: precision.py)
    "timing": "device",     # "device": GPU time (the host's launch hidden behind a short device-side spin);
                            # "synced": each call launched onto an idle GPU, host latency included
                            # (KernelBench's way). Both are recorded; this one is the speed.
    "input_layouts": None,  # the strides the composed model gives this subproblem's inputs (layouts.py): a list
                            # of layouts, each a list of null or {"shape", "stride", "offset"} per input; trial k
                            # of a configuration feeds its inputs in layout k mod len(list)
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
        if k == "trials_dist":
            v = parse_trials_dist(v)
        elif k == "input_layouts":
            v = _layouts.parse_input_layouts(v)
        elif k == "calibrated":
            v = parse_calibrated(v)
        elif k == "shapes":
            if v not in ("benchmark", "check", "search"):
                raise ValueError("option shapes must be one of benchmark, check, search")
        elif k == "shape_variant":
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ValueError("option shape_variant must be a non-negative integer or null")
        elif isinstance(d, str):
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
    if out["pass_rate"] is not None and not 0 < out["pass_rate"] <= 1:
        raise ValueError("option pass_rate must be in (0, 1]")
    return out


# Tolerances by output dtype when neither a flag nor the problem sets them:
# KernelBench's 1e-4 for fp32 and 1e-2 for fp16/bf16; fp8 as FlashInfer-Bench
# judges its FP8 MoE tasks (atol 0.1, rtol 0.2, 85% of elements within).
DTYPE_TOLERANCE = {
    "float64": (1e-4, 1e-4, 1.0), "float32": (1e-4, 1e-4, 1.0), "complex64": (1e-4, 1e-4, 1.0),
    "complex128": (1e-4, 1e-4, 1.0), "float16": (1e-2, 1e-2, 1.0), "bfloat16": (1e-2, 1e-2, 1.0),
    "float8_e4m3fn": (0.1, 0.2, 0.85), "float8_e5m2": (0.1, 0.2, 0.85), "float8_e4m3fnuz": (0.1, 0.2, 0.85),
    "float8_e5m2fnuz": (0.1, 0.2, 0.85), "float8_e8m0fnu": (0.1, 0.2, 0.85),
}
TOLERANCE_FIELDS = ("atol", "rtol", "pass_rate")
PROBLEM_TOLERANCE_NAME = "MKEVOLVE_TOLERANCE"


def dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def problem_tolerance(mod) -> dict | None:
    """The problem module's own declaration, MKEVOLVE_TOLERANCE = {"atol": ...,
    "rtol": ..., "pass_rate": ...} (any subset), checked; None when absent.
    Raises ValueError saying what is wrong with it."""
    decl = getattr(mod, PROBLEM_TOLERANCE_NAME, None)
    if decl is None:
        return None
    if not isinstance(decl, dict):
        raise ValueError(f"{PROBLEM_TOLERANCE_NAME} must be a dict with any of atol, rtol, pass_rate; "
                         f"it is a {type(decl).__name__}")
    out = {}
    for k, v in decl.items():
        if k not in TOLERANCE_FIELDS:
            raise ValueError(f"{PROBLEM_TOLERANCE_NAME} has an unknown key {k!r}; the keys are atol, rtol, pass_rate")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"{PROBLEM_TOLERANCE_NAME}[{k!r}] must be a non-negative number, not {v!r}")
        if k == "pass_rate" and not 0 < v <= 1:
            raise ValueError(f"{PROBLEM_TOLERANCE_NAME}['pass_rate'] must be in (0, 1], not {v!r}")
        out[k] = float(v)
    return out


def parse_calibrated(v) -> dict | None:
    """The calibrated option, checked: None, or {"outputs": {path: {trial
    kind: atol}}, "source": str} (calibration.py's kinds)."""
    if v is None:
        return None
    bad = "option calibrated must be {\"outputs\": {PATH: {KIND: ATOL}}, \"source\": FILE}"
    if not isinstance(v, dict) or not isinstance(v.get("outputs"), dict):
        raise ValueError(bad)
    outs = {}
    for p, kinds in v["outputs"].items():
        if not isinstance(kinds, dict):
            raise ValueError(bad)
        outs[p] = {}
        for k, a in kinds.items():
            if isinstance(a, bool) or not isinstance(a, (int, float)) or not math.isfinite(a) or a < 0:
                raise ValueError(f"option calibrated: output {p!r} kind {k!r}: atol must be a non-negative number")
            outs[p][k] = float(a)
    return {"outputs": outs, "source": str(v.get("source", "calibration"))}


def trial_kind(t: dict) -> str:
    """The kind of inputs a trial draws, as calibration names them: "x1"
    (get_inputs()), "signed" (the signed-normal trial), or its scale."""
    if not t.get("alt"):
        return "x1"
    return t.get("dist") or "signed"


def tolerance_for(dtype, opts: dict, path: str | None = None) -> dict:
    """The tolerance an output of this dtype is judged by, each field with
    where it came from: the flag (the option), else the calibrated atol of
    this output (path) on this trial's kind of inputs with rtol 0
    (opts["calibrated"], opts["trial_kind"]), else the problem's declaration
    (opts["problem_tolerance"]), else the dtype's default."""
    name = dtype_name(dtype)
    default = dict(zip(TOLERANCE_FIELDS, DTYPE_TOLERANCE.get(name, DTYPE_TOLERANCE["float32"])))
    declared = dict(opts.get("problem_tolerance") or {})
    cal = opts.get("calibrated") or {}
    by_kind = (cal.get("outputs") or {}).get(path if path is not None else "") or {}
    kind = opts.get("trial_kind") or "x1"
    calibrated = by_kind.get(kind)
    tol: dict = {"dtype": name, "source": {}}
    for k in TOLERANCE_FIELDS:
        if opts.get(k) is not None:
            tol[k], tol["source"][k] = float(opts[k]), "flag"
        elif calibrated is not None and k in ("atol", "rtol"):
            tol[k] = calibrated if k == "atol" else 0.0
            tol["source"][k] = "calibrated"
        elif k in declared:
            tol[k], tol["source"][k] = float(declared[k]), "problem"
        else:
            tol[k], tol["source"][k] = default[k], f"{name} default"
    if calibrated is not None:
        tol["calibration"] = {"file": cal.get("source"), "output": path or "output", "inputs": kind}
    # The scale check keeps the rtol the dtype (or the flag, or the problem)
    # would give: a calibrated rtol of 0 is no statement about scale.
    scale_rtol = tol["rtol"] if tol["source"]["rtol"] != "calibrated" else declared.get("rtol", default["rtol"])
    tol["scale_tol"] = opts["scale_tol"] if opts.get("scale_tol") is not None else max(1e-2, 10 * scale_rtol)
    return tol


# Extra trials at other input scales (KernelBench-Verified's hidden inputs):
# get_inputs()'s floating tensors multiplied by the factor. "x1" is what the
# regular trials already are.
TRIAL_DISTS = {"x1": 1.0, "x3": 3.0, "x0.01": 0.01, "neg": -1.0}


def parse_trials_dist(v) -> str:
    """The trials_dist option, checked: a comma list of TRIAL_DISTS names, or "none"."""
    if not isinstance(v, str):
        raise ValueError("option trials_dist must be a comma-separated list of x1, x3, x0.01, neg, or none")
    names = [x.strip() for x in v.split(",") if x.strip()]
    if names == ["none"]:
        return "none"
    bad = [x for x in names if x not in TRIAL_DISTS]
    if bad or not names:
        raise ValueError(f"option trials_dist: unknown {', '.join(bad) or '(empty)'}; "
                         f"use a comma-separated list of {', '.join(TRIAL_DISTS)}, or none")
    return ",".join(dict.fromkeys(names))


def plan_trials(n_configs: int, opts: dict, shapes: list | None = None) -> list[dict]:
    """Every correctness trial: config index, seed, kind of inputs, and order.
    shapes: the labels of the last len(shapes) configurations, derived shape
    variants (shapes.py): one regular trial each, named by its "shape".
    With input_layouts, each trial also names the layout its inputs take
    ("layout": the trial's place in its configuration, mod the number of
    layouts), so every layout of the list is exercised, by regular,
    alternate-distribution and scaled trials alike."""
    seed = opts["seed"]
    dists = [] if opts.get("trials_dist", "none") == "none" else opts["trials_dist"].split(",")
    n_layouts = len(opts.get("input_layouts") or [])
    trials = []
    shapes = list(shapes or [])
    n_own = n_configs - len(shapes)
    for c in range(n_configs):
        first = len(trials)
        if c >= n_own:
            trials.append({"id": f"c{c}t0", "config": c, "seed": seed + 1000 * c, "alt": False,
                           "cand_first": False, "shape": shapes[c - n_own]})
            if n_layouts:
                trials[-1]["layout"] = 0
            continue
        for t in range(opts["trials"]):
            trials.append({"id": f"c{c}t{t}", "config": c, "seed": seed + 1000 * c + t, "alt": False,
                           "cand_first": t >= opts["trials"] - opts["candidate_first_trials"]})
        for a in range(opts["alt_dist_trials"]):
            trials.append({"id": f"c{c}a{a}", "config": c, "seed": seed + 1000 * c + 500 + a, "alt": True,
                           "cand_first": False})
        for k, name in enumerate(d for d in dists if d != "x1"):
            # Judged like the signed-input trial: a reference that is not
            # finite on them (a log of negated inputs) skips the trial.
            trials.append({"id": f"c{c}{name}", "config": c, "seed": seed + 1000 * c + 600 + k, "alt": True,
                           "dist": name, "cand_first": False})
        if n_layouts:
            for k, t in enumerate(trials[first:]):
                t["layout"] = k % n_layouts
    return trials


def timing_inputs_trial(opts: dict) -> dict:
    """The inputs of the last timed call: known to both children by seed.
    With input_layouts, in layout 0: the timed calls' buffers are made from
    the first trial's inputs (layout 0) and refilled in place."""
    t = {"id": "last", "config": 0, "seed": opts["seed"] + 777_777, "alt": False, "cand_first": False}
    if opts.get("input_layouts"):
        t["layout"] = 0
    return t


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


def rng_state(device: str) -> list:
    """The random generators' state (Python, torch's CPU and, on the GPU, its
    CUDA generator: seed and Philox offset), to tell whether a call drew
    random numbers (KernelBench's Dropout in training mode, for instance)."""
    import random
    import torch
    state = [random.getstate(), torch.get_rng_state()]
    if device == "cuda":
        state.append(torch.cuda.get_rng_state())
    return state


def rng_drawn(before: list, after: list) -> bool:
    import torch
    for a, b in zip(before, after):
        same = torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
        if not same:
            return True
    return False


def set_tf32(on: bool) -> None:
    """TF32 for matmuls and cuDNN: off for every reference and candidate; on
    only for the --baseline-tf32 baseline (as KernelBench-Verified reports
    its baselines)."""
    import torch
    try:
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on
    except AttributeError:
        pass
    try:
        torch.set_float32_matmul_precision("high" if on else "highest")
    except AttributeError:
        pass


def disable_tf32() -> None:
    set_tf32(False)


def enable_tf32() -> None:
    set_tf32(True)


def alternate_distribution(inputs: list, seed: int) -> list:
    """Same shapes, dtypes and devices; floating tensors drawn from a scaled
    signed normal instead (integer and bool inputs keep their values). On
    the GPU the draw stays there (no host copy of a large input).

    Takes the list and returns it, each floating entry replaced: the drawn
    tensor is let go before its replacement is drawn, so a freshly drawn
    input and its replacement never exist at once (one copy of a large
    input, not two; on the GPU the shared pool keeps what it ever held)."""
    import torch
    gens: dict = {}
    for i in range(len(inputs)):  # not enumerate(): its reused tuple would keep the last input alive
        x = inputs[i]
        if not (isinstance(x, torch.Tensor) and x.dtype.is_floating_point):
            continue
        x = x.detach()
        if x.numel() == 0:
            scale = 1.0
        elif _all_finite(x):  # the usual case: no boolean-indexed copy of a large input
            lo, hi = torch.aminmax(x.reshape(-1))
            scale = max(1.0, abs(float(lo)), abs(float(hi)))
        else:
            finite = x[torch.isfinite(x)]
            scale = max(1.0, float(finite.abs().max())) if finite.numel() else 1.0
            del finite
        shape, dtype, dev = x.shape, x.dtype, x.device
        inputs[i] = x = None  # freed here unless the problem keeps it
        if dev not in gens:
            gens[dev] = torch.Generator(device=dev).manual_seed(seed)
        y = torch.randn(shape, generator=gens[dev], dtype=torch.float32, device=dev).mul_(scale)
        inputs[i] = y if dtype == torch.float32 else y.to(dtype=dtype)
        del y
    return inputs


def _draw(cfg: dict, device: str, seed: int) -> list:
    """get_inputs(), its factory calls pointed at `device` where that works
    (a multi-GB torch.rand draws in milliseconds on a GPU, in seconds on one
    CPU thread); on the CPU when the problem's code does not run that way."""
    import torch
    if device != "cpu" and hasattr(torch.device(device), "__enter__"):
        try:
            with torch.device(device):
                return list(cfg["get_inputs"]())
        except Exception:  # noqa: BLE001 - e.g. numpy round trips: draw on the CPU instead
            seed_all(seed)
    return list(cfg["get_inputs"]())


def generate_inputs(cfg: dict, trial: dict, device: str = "cpu"):
    """Inputs of one trial, seeded by the trial, on `device` (drawn there
    where the problem allows it, else drawn on the CPU and moved)."""
    import torch
    seed_all(trial["seed"])
    inputs = _draw(cfg, device, trial["seed"])
    inputs = [x.detach().to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    if trial["alt"] and trial.get("dist"):
        inputs = scaled_inputs(inputs, TRIAL_DISTS[trial["dist"]])
    elif trial["alt"]:
        inputs = alternate_distribution(inputs, trial["seed"] + 1)
    return inputs


def scaled_inputs(inputs: list, factor: float) -> list:
    """get_inputs()'s floating tensors times factor (integer and bool inputs
    keep their values). Takes the list and returns it. A tensor nothing else
    holds (no other reference, view or alias of its storage: _only_ours) is
    scaled in place, so a large input is not held twice; any other (a
    problem may hand out the same tensor every call) gives a new tensor and
    is left as it was. Both ways give the same values."""
    import torch
    for i in range(len(inputs)):  # not enumerate(): its reused tuple would hold a second reference
        x = inputs[i]
        if not (isinstance(x, torch.Tensor) and x.dtype.is_floating_point):
            continue
        inputs[i] = None
        if _only_ours(x):
            x = x.neg_() if factor == -1.0 else x.mul_(factor)
        else:
            x = -x.detach() if factor == -1.0 else x.detach() * factor
        inputs[i] = x
        del x
    return inputs


def _only_ours(x) -> bool:
    """Whether writing to tensor x in place can change nothing anyone else
    sees: x is contiguous, has no other Python reference than
    the caller's one (here: x's parameter, its argument, the caller's local),
    and its storage no other tensor (a view, a detach(), a global the
    problem hands out). Counted against a fresh tensor made here, not
    against numbers this torch happens to give; False where this torch
    cannot count a storage's users (torch._C._storage_Use_Count)."""
    import sys
    import torch
    uses = getattr(torch._C, "_storage_Use_Count", None)
    if uses is None or not hasattr(x, "untyped_storage") or x.requires_grad:
        return False
    if not x.is_contiguous() or x.numel() == 0:  # a view's base, if alive, shows in the storage's count
        return False

    def refs(t):
        return sys.getrefcount(t)  # t: the argument, this frame's t, the caller's name

    try:
        # Memory torch did not allocate (torch.from_numpy, frombuffer, DLPack)
        # may be the problem's own array, which no storage count sees: such a
        # storage cannot be resized, one torch allocated can.
        if not x.untyped_storage().resizable():
            return False
        fresh = torch.empty(1, dtype=x.dtype, device=x.device)
        return (refs(x) == refs(fresh) + 1  # x is also held by its caller's frame (the list let go of it)
                and uses(x.untyped_storage()._cdata) == uses(fresh.untyped_storage()._cdata))
    except Exception:  # noqa: BLE001 - a torch whose storages cannot be counted this way
        return False


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


_SLICE = 1 << 24   # elements compared at a time: no whole-output temporaries


def same_values(x, orig) -> bool:
    """Whether tensor x (on any device) still holds exactly orig's values (a
    CPU tensor), NaN equal to NaN; compared slice by slice on x's device, so
    no whole copy of either is made."""
    import torch
    if not isinstance(x, torch.Tensor) or not isinstance(orig, torch.Tensor):
        return x == orig
    if x.shape != orig.shape or x.dtype != orig.dtype:
        return False
    a = x.detach().reshape(-1)
    b = orig.reshape(-1)
    for i in range(0, a.numel(), _SLICE):
        if not tensors_equal(a[i:i + _SLICE], b[i:i + _SLICE].to(a.device)):
            return False
    return True


_FP_PERIOD = 65521  # the position weights repeat with this period (a prime)


def fingerprint(x):
    """Two position-weighted sums of tensor x's raw bits, computed on x's own
    device: equal before and after a call means the call left x alone (NaN
    payloads included), without keeping a pristine copy or moving x to the
    host. None for a non-tensor.

    The word at flat index i weighs (i mod P) + 1. Laid out P words to a row,
    that is its column's weight, so the device only sums columns (integer
    sums, wrapping mod 2^32 for 32-bit words: any one changed word still
    changes its column), with no temporary for 32-bit words and no host sync
    until the P column sums come back; the weighting is done here, exactly.
    At KernelBench's 6.4 GB inputs this is one read of the data, where the
    slice-by-slice form before it built each slice's weights and an int64
    copy of it and synced with the host twice a slice (192 syncs), about
    six times a trial. On the CPU (test mode, 2 cores) a 256 MiB tensor took
    8.2 s that way and takes 0.15 s this way."""
    import torch
    if not isinstance(x, torch.Tensor):
        return None
    from .tensorio import flat_bytes
    flat = flat_bytes(x)
    words = flat.view(torch.int32) if flat.numel() % 4 == 0 else flat
    n = words.numel()
    period = _FP_PERIOD
    m = n // period
    s1 = s2 = 0
    if m:
        # Byte words (odd sizes) are widened slice by slice: a bounded temporary.
        acc = torch.int32 if words.dtype == torch.int32 else torch.int64
        cols = torch.zeros(period, dtype=acc, device=words.device)
        rows = max(1, _SLICE // period)
        for r in range(0, m, rows):
            cols += words[r * period:min(m, r + rows) * period].view(-1, period).sum(dim=0, dtype=acc)
        vals = cols.tolist()
        s1 = sum(vals)
        s2 = sum(map(operator.mul, range(1, period + 1), vals))
    tail = words[m * period:].to(torch.int64).tolist()  # fewer than P words
    s1 += sum(tail)
    s2 += sum(map(operator.mul, range(1, len(tail) + 1), tail))
    return (tuple(x.shape), str(x.dtype), n, s1, s2)


# ---------------------------------------------------------------------------
# The trusted comparison (in the reference's process, on its device: the
# expected output never leaves it; the candidate's comes in sealed)


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
    try:
        if math.isfinite(float(x.sum())):
            return True
    except (RuntimeError, TypeError):  # a dtype this torch cannot sum (float8): the exact test
        pass
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
    dev = exp.device  # got may live elsewhere (the candidate's output, mapped on the host)
    if not (exp.dtype.is_floating_point or exp.dtype.is_complex):
        e_all, g_all = exp.reshape(-1), got.reshape(-1)
        first, count, worst = None, 0, 0.0
        for a in range(0, e_all.numel(), _SLICE):
            e, g = e_all[a:a + _SLICE], g_all[a:a + _SLICE].to(dev)
            neq = g != e
            k = int(neq.sum())
            if k:
                count += k
                worst = max(worst, float((g.double() - e.double()).abs().max()))
                if first is None:
                    i = int(neq.nonzero()[0])
                    first = (a + i, g[i].item(), e[i].item())
        if first is not None:
            i, gv, ev = first
            return {"ok": False, "kind": "mismatch",
                    "message": f"{name} differs at index {_index(i, exp.shape)}: got {gv}, expected {ev} "
                               f"({count} of {exp.numel()} elements differ)",
                    "max_abs_err": worst}
        return res
    # Compare in float32 (float64 for float64 outputs): a float32 subtraction
    # errs by at most one ulp, far below any tolerance we accept. The work
    # goes slice by slice (_SLICE elements): outputs can have billions of
    # elements, and no temporary as large as the output is ever made.
    cdt = torch.float64 if exp.dtype in (torch.float64, torch.complex128) else torch.float32
    tolr = tolerance_for(exp.dtype, opts, path)
    res["tolerance"] = tolr
    e_all = exp.reshape(-1)
    g_all = got.reshape(-1)
    if exp.dtype.is_complex:
        e_all = torch.view_as_real(e_all).reshape(-1)
        g_all = torch.view_as_real(g_all).reshape(-1)
    n = e_all.numel()

    def at(i: int):
        # Index into the original tensor (complex outputs are compared as real pairs).
        j = i // 2 if exp.dtype.is_complex else i
        return _index(j, exp.shape)

    nan_first = nf_first = bad_first = None
    nan_count = bad_count = 0
    any_e_fin = False
    max_abs = e_max_abs = 0.0
    g_min = e_min = math.inf
    g_max = e_max = -math.inf
    sq_e = sq_d = 0.0
    zero = torch.zeros((), dtype=cdt, device=dev)
    for a in range(0, n, _SLICE):
        e = e_all[a:a + _SLICE].to(cdt)
        g = g_all[a:a + _SLICE].to(device=dev, dtype=cdt)
        fin_e, fin_g = _all_finite(e), _all_finite(g)
        if fin_e and fin_g:
            any_e_fin = True
        else:
            e_fin = torch.isfinite(e)
            if not fin_g:
                bad_nf = e_fin & ~torch.isfinite(g)
                k = int(bad_nf.sum())
                if k:
                    nan_count += k
                    if nan_first is None:
                        i = int(bad_nf.nonzero()[0])
                        nan_first = (a + i, g[i].item(), e[i].item())
            if nan_first is not None:
                continue  # failing already: only the count goes on
            if not fin_e:
                # Where the reference itself is non-finite, demand the same value;
                # then compare the rest with those positions zeroed in both.
                wrong = ~e_fin & ~((torch.isnan(e) & torch.isnan(g)) | (e == g))
                if bool(wrong.any()) and nf_first is None:
                    i = int(wrong.nonzero()[0])
                    nf_first = (a + i, g[i].item(), e[i].item())
                e = torch.where(e_fin, e, zero)
                g = torch.where(e_fin, g, zero)
            any_e_fin = any_e_fin or bool(e_fin.any())
            del e_fin
        if nan_first is not None or nf_first is not None:
            continue
        diff = (g - e).abs_()
        m = float(diff.max())
        max_abs = max(max_abs, m)
        e_abs = e.abs()
        em = float(e_abs.max())
        e_max_abs = max(e_max_abs, em)
        g_min, g_max = min(g_min, float(g.min())), max(g_max, float(g.max()))
        e_min, e_max = min(e_min, float(e.min())), max(e_max, float(e.max()))
        sq_e += _norm(e, em) ** 2
        tol = e_abs.mul_(tolr["rtol"]).add_(tolr["atol"])
        bad = diff > tol
        k = int(bad.sum())
        # Under a pass rate below 1 the scale check looks at the elements
        # within tolerance only (the others are allowed to be off).
        if k and tolr["pass_rate"] < 1:
            d_in = torch.where(bad, zero, diff)
            sq_d += _norm(d_in, float(d_in.max())) ** 2
            del d_in
        else:
            sq_d += _norm(diff, m) ** 2
        if k:
            bad_count += k
            if bad_first is None:
                i = int(torch.argmax(bad.to(torch.uint8)))
                bad_first = (a + i, g[i].item(), e[i].item(), diff[i].item(), tol[i].item())
        del diff, e_abs, tol, bad, e, g
    if nan_first is not None:
        i, gv, ev = nan_first
        return {"ok": False, "kind": "nan",
                "message": f"{name} has {_fmt(gv)} at index {at(i)} where {_fmt(ev)} "
                           f"was expected ({nan_count} of {n} elements are NaN/Inf)",
                "max_abs_err": math.inf}
    if nf_first is not None:
        i, gv, ev = nf_first
        return {"ok": False, "kind": "mismatch",
                "message": f"{name} differs at index {at(i)}: got {_fmt(gv)}, expected {_fmt(ev)}",
                "max_abs_err": math.inf}
    if not any_e_fin:
        return res
    res["max_abs_err"] = max_abs
    # A constant where the reference varies well beyond rounding noise.
    if n > 1 and g_min == g_max and (e_max - e_min) > 1e-3 * e_max_abs:
        return {"ok": False, "kind": "mismatch",
                "message": f"{name} is constant (every element is {_fmt(g_min)}) but the expected output "
                           f"varies from {_fmt(e_min)} to {_fmt(e_max)}",
                "max_abs_err": max_abs}
    res["pass_fraction"] = 1.0 - bad_count / n
    # Elements outside the tolerance are allowed up to (1 - pass_rate) of them.
    if bad_first is not None and bad_count > math.floor((1.0 - tolr["pass_rate"]) * n + 1e-9):
        i, gv, ev, dv, tv = bad_first
        rate = "" if tolr["pass_rate"] >= 1 else (
            f", {res['pass_fraction']:.4g} of elements within tolerance where {tolr['pass_rate']:g} are required")
        return {"ok": False, "kind": "mismatch",
                "message": f"{name} differs at index {at(i)}: got {_fmt(gv)}, expected "
                           f"{_fmt(ev)} (|diff| {dv:.3g} > atol+rtol*|expected| "
                           f"{tv:.3g}, {tolr['dtype']} atol {tolr['atol']:g} rtol {tolr['rtol']:g}"
                           f"{' calibrated on ' + tolr['calibration']['inputs'] + ' inputs' if 'calibration' in tolr else ''}); "
                           f"{bad_count} of {n} elements differ{rate}, max_abs_err {max_abs:.3g}",
                "max_abs_err": max_abs, "pass_fraction": res["pass_fraction"], "tolerance": tolr}
    norm_e = math.sqrt(sq_e)
    if norm_e > 0:
        rel = math.sqrt(sq_d) / norm_e
        res["rel_err"] = rel
        if rel > tolr["scale_tol"]:
            return {"ok": False, "kind": "mismatch",
                    "message": f"{name} is wrong relative to its own scale: relative L2 error {rel:.3g} > "
                               f"{tolr['scale_tol']:.3g} although every element is within atol "
                               f"(expected values are tiny: max |expected| {e_max_abs:.3g}); "
                               f"compute the actual values, zeros or constants do not pass",
                    "max_abs_err": max_abs, "rel_err": rel}
    return res


def tolerance_key(tol: dict) -> str:
    """Where a verdict lists a tolerance: by dtype; a calibrated one by
    dtype, output and kind of inputs (each has its own)."""
    cal = tol.get("calibration")
    return tol["dtype"] if not cal else f"{tol['dtype']} {cal['output']} {cal['inputs']}"


def _merge_worst(worst: dict, r: dict) -> None:
    """Folds one output's result into the whole output's: the largest errors,
    the smallest fraction within tolerance, the tolerance of each dtype."""
    worst["max_abs_err"] = max(worst["max_abs_err"], r.get("max_abs_err", 0.0) or 0.0)
    worst["rel_err"] = max(worst["rel_err"], r.get("rel_err", 0.0) or 0.0)
    if "pass_fraction" in r:
        worst["pass_fraction"] = min(worst.get("pass_fraction", 1.0), r["pass_fraction"])
    if isinstance(r.get("tolerance"), dict):
        worst.setdefault("tolerance", r["tolerance"])  # the first output's (the verdict's atol/rtol)
        worst.setdefault("tolerances", {})[tolerance_key(r["tolerance"])] = r["tolerance"]
    for k, v in (r.get("tolerances") or {}).items():
        worst.setdefault("tolerances", {})[k] = v
        worst.setdefault("tolerance", v)


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
            _merge_worst(worst, r)
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
            _merge_worst(worst, r)
        return worst
    if isinstance(exp, (int, float)) and not isinstance(exp, bool):
        if isinstance(got, torch.Tensor) or not isinstance(got, (int, float)) or isinstance(got, bool):
            return {"ok": False, "kind": "wrong_structure",
                    "message": f"{_where(path)} is a {type(got).__name__}, expected a Python number"}
        if not math.isfinite(got) and math.isfinite(exp):
            return {"ok": False, "kind": "nan", "message": f"{_where(path)} is {got}, expected {exp}"}
        tolr = tolerance_for("float64", opts)
        if abs(got - exp) > tolr["atol"] + tolr["rtol"] * abs(exp):
            return {"ok": False, "kind": "mismatch", "message": f"{_where(path)} is {got}, expected {exp}",
                    "max_abs_err": abs(got - exp)}
        return {"ok": True, "max_abs_err": abs(got - exp), "rel_err": 0.0}
    if exp != got:
        return {"ok": False, "kind": "mismatch", "message": f"{_where(path)} is {got!r}, expected {exp!r}"}
    return {"ok": True, "max_abs_err": 0.0, "rel_err": 0.0}


def is_finite_tree(obj) -> bool:
    import torch
    if isinstance(obj, torch.Tensor):
        if obj.dtype.is_floating_point:
            return _all_finite(obj)  # no output-sized boolean temporary in the usual, finite case
        if obj.dtype.is_complex:
            return bool(torch.isfinite(obj).all())
        return True
    if isinstance(obj, (list, tuple)):
        return all(is_finite_tree(x) for x in obj)
    if isinstance(obj, dict):
        return all(is_finite_tree(x) for x in obj.values())
    if isinstance(obj, float):
        return math.isfinite(obj)
    return True


def _tensors_in(obj, out: list) -> list:
    import torch
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _tensors_in(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _tensors_in(x, out)
    return out


def is_constant_tree(obj) -> bool:
    """True when every tensor in obj holds a single repeated value. (No
    recursive closure here: its reference cycle would keep the tensors, and
    the mappings under them, alive until the garbage collector ran.)"""
    ts = _tensors_in(obj, [])
    if not ts:
        return False
    for t in ts:
        if t.numel() > 1:
            f = t.reshape(-1)
            for a in range(0, f.numel(), _SLICE):
                if not bool((f[a:a + _SLICE] == f[0]).all()):
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
