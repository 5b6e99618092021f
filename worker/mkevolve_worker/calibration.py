"""Calibrated tolerances (the paper's Appendix D): how far the reference,
run in its own precision, is from the same reference run in a higher one.

For each of N runs (input seeds), and for each kind of correctness trial the
evaluator plans (the regular inputs "x1", the signed-normal trial "signed",
and the scaled trials "x3", "x0.01", "neg"), the reference runs twice on the
same inputs and weights: as written, and with its floating parameters,
buffers and inputs in float64 (float32 where float64 fails). The error of
one output in one run is max |native - high| over its finite elements. An
output's calibrated tolerance for a trial kind is max + 3 sigma of its N
errors (sigma: the population standard deviation), with rtol = 0 (Appendix
D's rule), and never below one unit in the last place of the output's dtype
at its largest magnitude: where the reference's only error is its final
rounding (a bf16 Linear on the CPU), its error is about half a unit, and a
correct kernel that rounds one element the other way is a whole unit away. The tolerance bounds how far
a kernel that computes in higher precision and rounds once may be from the
reference; a kernel that computes as coarsely as the reference, in another
order, can be up to about twice as far, and may fail it.

summarize() is the arithmetic (no torch); calibrate_body() the forked child
that measures. The evaluator applies the result per output and trial kind
(correctness.tolerance_for, with opts["calibrated"]).
"""

from __future__ import annotations

import math
import os
import time

from . import correctness as C
from . import errors, loader

RULE = ("max + 3 sigma (population) over the runs of max|reference - higher-precision reference|, at least one "
        "unit in the last place of the output's dtype at its largest magnitude; rtol 0")
# The trial kinds, as correctness.trial_kind() names a trial.
KINDS = ("x1", "signed", "x3", "x0.01", "neg")
SEED_BASE = 1_000_003  # far from the evaluation's trial seeds (seed + 1000 * config + ...)


def summarize(errs: list[float], floor: float = 0.0) -> dict:
    """max + 3 sigma of one output's errors over the runs, and never below
    floor: {"runs", "max", "mean", "std", "floor", "atol"}. Raises ValueError
    on no errors or a non-finite one."""
    if not errs:
        raise ValueError("no errors to calibrate from")
    for e in errs:
        if not isinstance(e, (int, float)) or isinstance(e, bool) or not math.isfinite(e) or e < 0:
            raise ValueError(f"an error must be a finite non-negative number, not {e!r}")
    n = len(errs)
    mean = sum(errs) / n
    std = math.sqrt(sum((e - mean) ** 2 for e in errs) / n)
    mx = max(errs)
    return {"runs": n, "max": mx, "mean": mean, "std": std, "floor": floor, "atol": max(mx + 3 * std, floor)}


def kind_trial(kind: str, run: int, config: int) -> dict:
    """The trial record generate_inputs() draws one calibration run's inputs from."""
    seed = SEED_BASE + 1000 * config + 10 * run + KINDS.index(kind)
    if kind == "x1":
        return {"id": f"cal{run}{kind}", "seed": seed, "alt": False}
    if kind == "signed":
        return {"id": f"cal{run}{kind}", "seed": seed, "alt": True}
    return {"id": f"cal{run}{kind}", "seed": seed, "alt": True, "dist": kind}


def _leaves(obj, path: str = "", out=None) -> dict:
    """{path: tensor} for every tensor in an output tree; paths as
    correctness.compare_tree names them ("" for a lone tensor, "[0]", "['k']")."""
    import torch
    out = {} if out is None else out
    if isinstance(obj, torch.Tensor):
        out[path] = obj
    elif isinstance(obj, (list, tuple)):
        for i, x in enumerate(obj):
            _leaves(x, f"{path}[{i}]", out)
    elif isinstance(obj, dict):
        for k, x in obj.items():
            _leaves(x, f"{path}[{k!r}]", out)
    return out


def _to_dtype(xs, dtype):
    import torch
    return [x.detach().to(dtype) if isinstance(x, torch.Tensor) and x.dtype.is_floating_point else x for x in xs]


def _max_err(native, high) -> float | None:
    """max |native - high| over the elements where both are finite; None
    when no element is (a trial kind on which the reference is not finite)."""
    import torch
    if not (native.dtype.is_floating_point or native.dtype.is_complex):
        return float((native.double() - high.double()).abs().max()) if native.numel() else 0.0
    a = native.detach().to(torch.float64).reshape(-1)
    b = high.detach().to(torch.float64).reshape(-1)
    fin = torch.isfinite(a) & torch.isfinite(b)
    if not bool(fin.any()):
        return None
    return float((a[fin] - b[fin]).abs().max())


def _max_abs(x) -> float:
    import torch
    if not (x.dtype.is_floating_point or x.dtype.is_complex) or x.numel() == 0:
        return 0.0
    a = x.detach().to(torch.float64).abs().reshape(-1)
    a = a[torch.isfinite(a)]
    return float(a.max()) if a.numel() else 0.0


def ulp_at(dtype, magnitude: float) -> float:
    """The spacing of dtype's values at this magnitude (its unit in the last
    place): eps, the spacing at 1.0, times 2^floor(log2 magnitude)."""
    import torch
    if not dtype.is_floating_point or not magnitude > 0 or not math.isfinite(magnitude):
        return 0.0
    fi = torch.finfo(dtype)
    return max(fi.eps * 2.0 ** math.floor(math.log2(magnitude)), fi.tiny)


def calibrate_body(ctx, job: dict) -> int:
    """The forked child: measures (calibrate_problem) and writes
    calibration.json. job: problem, device, runs, seed."""
    from .children import _restore_threads, write_json
    _restore_threads()
    C.disable_tf32()
    t0 = time.monotonic()
    out = calibrate_problem(job["problem"], job["device"], int(job["runs"]), job["seed"])
    out["seconds"] = round(time.monotonic() - t0, 3)
    write_json(os.path.join(ctx.dir, "calibration.json"), out)
    return 0


def calibrate_problem(path: str, device: str, runs: int, seed: int = 42, kinds=KINDS) -> dict:
    """Measures the errors: {"outputs": {path: {"dtype", "by_kind": {kind:
    summarize() + "errors"}}}, "high_precision", "runs", "configs", "device",
    "skipped"}, or {"error": message} (the message names the file)."""
    try:
        mod = loader.load_problem(path)
    except BaseException as e:  # noqa: BLE001
        return {"error": f"{path}: calibration failed while loading it: " + errors.trimmed_traceback(e, [path])}
    return calibrate_module(mod, path, device, runs, seed, kinds)


def calibrate_module(mod, path: str, device: str, runs: int, seed: int = 42, kinds=KINDS) -> dict:
    """calibrate_problem() on a loaded problem module (path names it in errors)."""
    import copy

    import torch
    from .children import _sync
    where = "loading it"
    errs: dict = {}     # path -> kind -> [error per run]
    dtypes: dict = {}
    mags: dict = {}     # path -> kind -> largest finite |reference| over the runs
    skipped: dict = {}  # kind -> why, where the reference is not finite or raises on those inputs
    high_names = set()

    def done(obj) -> dict:
        return obj
    try:
        configs = loader.problem_configs(mod)
        for c, cfg in enumerate(configs):
            where = f"building Model(*get_init_inputs()) of configuration {c}"
            C.seed_all(seed)
            init = list(cfg["get_init_inputs"]())
            C.seed_all(seed)
            model = mod.Model(*init).to(device).eval()
            high, high_dtype = None, None
            for r in range(runs):
                for kind in kinds:
                    t = kind_trial(kind, r, c)
                    where = f"get_inputs() of configuration {c} (run {r}, {kind} inputs)"
                    xs = C.generate_inputs(cfg, t, device)
                    where = f"Model.forward of configuration {c} (run {r}, {kind} inputs)"
                    try:
                        with torch.no_grad():
                            C.seed_all(t["seed"] + 1)
                            native = model(*xs)
                            _sync(device)
                    except Exception as e:  # noqa: BLE001
                        if kind == "x1":
                            raise
                        skipped[kind] = f"the reference raised on these inputs: {type(e).__name__}"
                        continue
                    leaves = _leaves(native)
                    if not leaves:
                        return done({"error": f"{path}: Model.forward returned no tensor; nothing to calibrate"})
                    if high is None and all(x.dtype in (torch.float64, torch.complex128) for x in leaves.values()):
                        return done({"error": f"{path}: its outputs are float64; there is no higher "
                                              f"precision to calibrate against"})
                    got = None
                    # float64 first; float32 where the reference cannot run in
                    # float64 (the choice made on the first run holds after it).
                    choices = (high_dtype,) if high is not None else (torch.float64, torch.float32)
                    for dt in choices:
                        where = f"the {C.dtype_name(dt)} copy of Model of configuration {c} (run {r}, {kind} inputs)"
                        try:
                            if high is None:
                                high, high_dtype = copy.deepcopy(model).to(dt), dt
                            with torch.no_grad():
                                C.seed_all(t["seed"] + 1)
                                got = _leaves(high(*_to_dtype(xs, dt)))
                                _sync(device)
                            break
                        except Exception:  # noqa: BLE001 - e.g. an op without float64: try float32
                            if len(choices) == 1 or dt == torch.float32:
                                raise
                            high = None
                    high_names.add(C.dtype_name(high_dtype))
                    if sorted(got) != sorted(leaves):
                        return done({"error": f"{path}: the higher-precision reference returns other outputs "
                                              f"({sorted(got)}) than the reference ({sorted(leaves)})"})
                    for p, x in leaves.items():
                        e = _max_err(x, got[p])
                        if e is None:
                            skipped[kind] = "the reference output is not finite on these inputs"
                            continue
                        dtypes[p] = x.dtype
                        errs.setdefault(p, {}).setdefault(kind, []).append(e)
                        m = mags.setdefault(p, {})
                        m[kind] = max(m.get(kind, 0.0), _max_abs(x))
                    del native, leaves, got, xs
            del model, high
    except BaseException as e:  # noqa: BLE001
        return done({"error": f"{path}: calibration failed while {where}: "
                              + errors.trimmed_traceback(e, [path])})
    outputs = {}
    for p, by in errs.items():
        # Never below one unit in the last place at the output's largest
        # magnitude: a correct kernel may round any element the other way.
        outputs[p] = {"dtype": C.dtype_name(dtypes[p]),
                      "by_kind": {k: {**summarize(v, ulp_at(dtypes[p], mags[p][k])), "errors": v,
                                      "max_abs_reference": mags[p][k]} for k, v in by.items()}}
    return done({"outputs": outputs, "high_precision": sorted(high_names), "runs": runs, "configs": len(configs),
                 "device": device, "seed": seed, "rule": RULE,
                 "skipped": {k: v for k, v in skipped.items() if not any(k in o["by_kind"] for o in outputs.values())}})


def applied(entry: dict) -> dict:
    """The form the evaluator's option "calibrated" takes, from one problem's
    entry in a calibration file: {"outputs": {path: {kind: atol}}, "source"}."""
    outs = {}
    for p, o in (entry.get("outputs") or {}).items():
        outs[p] = {k: float(v["atol"]) for k, v in (o.get("by_kind") or {}).items()}
    return {"outputs": outs, "source": entry.get("source", "calibration")}
