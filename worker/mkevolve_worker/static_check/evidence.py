"""What a function's parameters are (tensor or scalar), from how its body
uses them, their defaults and their annotations."""

from __future__ import annotations

import ast

from .names import SCALAR_ANNOTATIONS
from .astutil import _dotted


_TENSOR_EVIDENCE_ATTRS = {
    "shape", "stride", "contiguous", "view", "reshape", "dtype", "device", "numel",
    "data_ptr", "is_contiguous", "ndim", "permute", "transpose", "unsqueeze", "squeeze",
    "flatten", "element_size", "is_cuda", "new_empty", "expand", "storage_offset",
}
_SCALAR_EVIDENCE_CALLS = {"range", "cdiv", "next_power_of_2", "sqrt", "log2", "ceil", "floor"}


_EVIDENCE_CACHE = {}


def _param_evidence(fnode):
    """name -> 'T' / 'S' from how a parameter is used in the body (cached per node)."""
    key = id(fnode)
    hit = _EVIDENCE_CACHE.get(key)
    if hit is not None and hit[0] is fnode:
        return hit[1]
    ev = _compute_param_evidence(fnode)
    if len(_EVIDENCE_CACHE) > 4096:
        _EVIDENCE_CACHE.clear()
    _EVIDENCE_CACHE[key] = (fnode, ev)
    return ev


def _compute_param_evidence(fnode):
    params = {a.arg for a in list(getattr(fnode.args, "posonlyargs", [])) + list(fnode.args.args)
              + list(fnode.args.kwonlyargs)}
    ev = {}
    for n in ast.walk(fnode):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in params:
            if n.attr in _TENSOR_EVIDENCE_ATTRS:
                ev[n.value.id] = "T"
        elif isinstance(n, ast.Call):
            fname = n.func.attr if isinstance(n.func, ast.Attribute) else (
                n.func.id if isinstance(n.func, ast.Name) else None)
            if fname in _SCALAR_EVIDENCE_CALLS:
                for a in n.args:
                    if isinstance(a, ast.Name) and a.id in params and ev.get(a.id) != "T":
                        ev[a.id] = "S"
    return ev


def _scalar_default(d):
    """Is a parameter default a literal (so the parameter is a scalar/config)?"""
    if d is None:
        return False
    if isinstance(d, ast.Constant):
        return d.value is not None
    if isinstance(d, ast.UnaryOp):
        return isinstance(d.operand, ast.Constant) and d.operand.value is not None
    if isinstance(d, (ast.Tuple, ast.List)):
        return all(_scalar_default(e) for e in d.elts)
    if isinstance(d, ast.Attribute):  # torch.float32, Enum.X
        return True
    return False


def _param_defaults(args):
    out = {}
    pos = list(getattr(args, "posonlyargs", [])) + list(args.args)
    for a, d in zip(pos[len(pos) - len(args.defaults):], args.defaults):
        if _scalar_default(d):
            out[a.arg] = "S"
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        if _scalar_default(d):
            out[a.arg] = "S"
    return out


def _annotation_kind(ann):
    if ann is None:
        return None
    d = _dotted(ann.value if isinstance(ann, ast.Subscript) else ann)
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        d = ann.value
    if d is None:
        return None
    last = d.rsplit(".", 1)[-1]
    if last in ("Tensor",):
        return "T"
    if last in SCALAR_ANNOTATIONS:
        if last in ("Optional", "Union") and isinstance(ann, ast.Subscript):
            inner = ast.dump(ann.slice)
            if "Tensor" in inner:
                return "T"
        return "S"
    return None
