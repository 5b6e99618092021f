"""Shape variants of a KernelBench-style problem (issue #35).

KernelBench fixes one input shape per problem, so a kernel that hard-codes it
passes. A problem whose get_inputs() reads module-level size constants
(batch_size = 16, dim = 16384) describes a family of instances: re-binding
those constants and calling get_inputs() again gives other valid inputs for
the same model. This module finds the constants (statically: the AST, no
import), derives a few variants (smaller, non-power-of-two, and a larger
non-batch dim with a smaller batch), and builds their configurations.

Only constants that get_inputs() reads and that neither get_init_inputs() nor
the Model class reads are re-bound: the model (and its weights, drawn from the
same seed) stays the one of the benchmark, and forward never sees a value
other than the one its inputs were made with. A problem that lists its own
configurations (get_input_configs()) gets no variants: its author said which
shapes count.

Whether a variant is a valid instance is decided by running the reference on
it (validate(), in the reference's process): one it cannot run, whose output
is not finite, or whose inputs are larger than the benchmark's, is skipped and
reported, never charged to a candidate.

Modes (option "shapes"): "benchmark" (the problem's own configurations only),
"check" (a correct candidate is also run at each variant, reported in
checks.shapes, verdict unchanged), "search" (every variant is a configuration
the candidate must pass).
"""
from __future__ import annotations

import ast

MODES = ("benchmark", "check", "search")
MAX_VARIANTS = 3


def _reads(fn: ast.AST, funcs: dict, seen: set | None = None) -> set:
    """Names a function reads, through the module-level functions it calls."""
    seen = set() if seen is None else seen
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            out.add(node.id)
            if node.id in funcs and node.id not in seen:
                seen.add(node.id)
                out |= _reads(funcs[node.id], funcs, seen)
    return out


_FOLD = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
         ast.FloorDiv: lambda a, b: a // b if b else None, ast.Pow: lambda a, b: a ** b if 0 <= b <= 64 else None,
         ast.LShift: lambda a, b: a << b if 0 <= b <= 64 else None}


def _int_of(node) -> int | None:
    """An int literal, or arithmetic of int literals (N = 2048 * 2); else None."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.BinOp) and type(node.op) in _FOLD:
        a, b = _int_of(node.left), _int_of(node.right)
        return None if a is None or b is None else _FOLD[type(node.op)](a, b)
    return None


def size_constants(source: str) -> dict:
    """{"constants": {name: value}} (the re-bindable ones, in file order),
    "kept": {name: why} (module-level ints get_inputs() reads that stay),
    "error": why no variant can be derived, or None."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return {"constants": {}, "kept": {}, "error": f"the problem does not parse ({e.msg})"}
    ints: dict = {}
    assigned: dict = {}
    funcs: dict = {}
    classes: dict = {}
    for node in tree.body:
        targets = []
        value = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            funcs[node.name] = node
        elif isinstance(node, ast.ClassDef):
            classes[node.name] = node
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    assigned[n.id] = assigned.get(n.id, 0) + 1
        n = _int_of(value) if len(targets) == 1 and isinstance(targets[0], ast.Name) else None
        if n is not None and n > 0:
            ints[targets[0].id] = n
    if "get_input_configs" in funcs:
        return {"constants": {}, "kept": {}, "error": "the problem lists its own configurations "
                                                     "(get_input_configs())"}
    if "get_inputs" not in funcs:
        return {"constants": {}, "kept": {}, "error": "the problem defines no get_inputs() function"}
    inputs = _reads(funcs["get_inputs"], funcs)
    init = _reads(funcs["get_init_inputs"], funcs) if "get_init_inputs" in funcs else set()
    model = set()
    for c in classes.values():
        model |= _reads(c, funcs)
    constants, kept = {}, {}
    for name, value in ints.items():
        if name not in inputs:
            continue
        if assigned.get(name, 0) > 1:
            kept[name] = "assigned more than once"
        elif name in init:
            kept[name] = "get_init_inputs() reads it (the model's shape)"
        elif name in model:
            kept[name] = "the Model reads it"
        else:
            constants[name] = value
    err = None if constants else ("get_inputs() reads no module-level int constant that could be re-bound"
                                  + (f" ({', '.join(f'{k}: {v}' for k, v in kept.items())})" if kept else ""))
    return {"constants": constants, "kept": kept, "error": err}


def label(bindings: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in bindings.items())


def _batch_name(names: list) -> str:
    for n in names:
        if "batch" in n.lower():
            return n
    return names[0]


def variants_of(constants: dict) -> list[dict]:
    """Up to MAX_VARIANTS bindings {name: value}: every constant halved and
    made odd-ish (smaller, non-power-of-two); every constant one less (the
    benchmark's size, off its power of two: a tail a tile must mask); and the
    batch doubled plus one with the largest other constant shrunk so that
    their product does not grow (a larger, non-power-of-two dim where there is
    a second one). Deterministic, so server and reference agree."""
    if not constants:
        return []
    names = list(constants)
    out = []
    smaller = {n: max(1, v // 2 - 1) if v >= 4 else max(1, v - 1) for n, v in constants.items()}
    out.append(smaller)
    out.append({n: v - 1 if v > 2 else v for n, v in constants.items()})
    b = _batch_name(names)
    others = [n for n in names if n != b]
    if others:
        d = max(others, key=lambda n: constants[n])
        grown = dict(constants)
        # Grow the largest non-batch dim, shrink the batch (or the other way
        # when the batch is 1 and cannot shrink); the product never grows.
        if constants[b] >= 2:
            grown[d] = constants[d] * 3 // 2 + 1
            grown[b] = max(1, constants[b] * constants[d] // grown[d])
        else:
            grown[b] = 3
            grown[d] = max(1, constants[d] // 3 - 1)
        out.append(grown)
    seen, unique = set(), []
    for v in out:
        key = tuple(sorted(v.items()))
        if v == constants or key in seen:
            continue
        seen.add(key)
        unique.append(v)
    return unique[:MAX_VARIANTS]


def derive(path: str) -> dict:
    """The problem file's variants: {"benchmark": label, "variants":
    [{"label", "bindings"}], "kept", "error"}."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            src = f.read()
    except OSError as e:
        return {"benchmark": "", "variants": [], "kept": {}, "error": f"cannot read the problem ({e})"}
    found = size_constants(src)
    vs = variants_of(found["constants"])
    return {"benchmark": label(found["constants"]), "variants": [{"label": label(v), "bindings": v} for v in vs],
            "kept": found["kept"], "error": found["error"]}


def rebound(mod, fn, bindings: dict):
    """fn, called with the module's globals re-bound (restored after)."""
    def call():
        g = mod.__dict__
        old = {k: g[k] for k in bindings if k in g}
        g.update(bindings)
        try:
            return fn()
        finally:
            g.update(old)
    return call


def config_of(mod, bindings: dict) -> dict:
    """The variant's configuration: the benchmark's model, re-bound inputs."""
    return {"get_init_inputs": mod.get_init_inputs, "get_inputs": rebound(mod, mod.get_inputs, bindings)}


def input_bytes(cfg: dict) -> int:
    """The bytes of one call's inputs: drawn on the meta device where the
    problem's code allows (no memory), else drawn for real on the CPU."""
    import torch

    from . import correctness as C
    if hasattr(torch.device("meta"), "__enter__"):
        try:
            with torch.device("meta"):
                return C.tree_nbytes(list(cfg["get_inputs"]()))
        except Exception:  # noqa: BLE001 - e.g. a numpy round trip: measure for real
            pass
    return C.tree_nbytes(list(cfg["get_inputs"]()))


def validate(mod, path: str, device: str, seed: int, only: int | None = None) -> dict:
    """Derives the variants and runs the reference once on each, as an
    evaluation would (seeded, the benchmark's model). {"benchmark", "kept",
    "error", "variants": [{"label", "bindings", "config"}] (those it runs),
    "skipped": [{"shape", "error"}]}. only: that variant's index alone."""
    import torch

    from . import correctness as C
    from . import errors
    d = derive(path)
    if only is not None:
        d["variants"] = d["variants"][only:only + 1]
    out = {"benchmark": d["benchmark"], "kept": d["kept"], "error": d["error"], "variants": [], "skipped": []}
    if not d["variants"]:
        return out
    base = {"get_init_inputs": mod.get_init_inputs, "get_inputs": mod.get_inputs}
    try:
        cap = input_bytes(base)
    except Exception as e:  # noqa: BLE001 - the evaluation itself will say what is wrong
        out["error"] = f"the benchmark's get_inputs() failed: {type(e).__name__}: {e}"[:300]
        return out
    model = None
    for v in d["variants"]:
        cfg = config_of(mod, v["bindings"])
        try:
            n = input_bytes(cfg)
            if n > cap:
                out["skipped"].append({"shape": v["label"], "error": f"its inputs take {n} bytes, more than the "
                                                                     f"benchmark's {cap}"})
                continue
            if model is None:
                C.seed_all(seed)
                model = mod.Model(*list(mod.get_init_inputs())).to(device)
            xs = C.generate_inputs(cfg, {"seed": seed, "alt": False}, device)
            with torch.no_grad():
                y = model(*xs)
            if not C._tensors_in(y, []):
                raise ValueError("Model.forward returned no tensor")
            if not C.is_finite_tree(y):
                raise ValueError("the reference's output is not finite")
            del xs, y
        except Exception as e:  # noqa: BLE001 - the reference's failure: the variant is skipped
            out["skipped"].append({"shape": v["label"], "error": "the reference cannot run it: "
                                   + errors.shorten(f"{type(e).__name__}: {e}", 300)})
            continue
        out["variants"].append({"label": v["label"], "bindings": v["bindings"], "config": cfg})
    del model
    return out
