"""Verification of an LLMDecompose output (paper section 3, prompt I.1).

A decomposition is a directory holding ``decomposed_problem.py`` (defines
``ModelNew``) and ``subkernel_problems/<name>.py`` files, each a KernelBench
problem (``Model`` plus ``get_inputs``/``get_init_inputs``, or
``get_input_configs()`` when ``ModelNew`` builds that Model more than once).

``verify_decomposition`` loads everything in this process and checks:

1. every file loads and defines what the layout requires;
2. ``ModelNew`` computes what the original ``Model`` computes under the same
   seeding, within a bound well inside the evaluator's own tolerance: each
   output within ``decompose_tol_fraction`` (0.1) times the tolerance a
   kernel's output of that dtype is judged by (``correctness.tolerance_for``:
   the ``atol``/``rtol`` options when given, else the problem's
   ``MKEVOLVE_TOLERANCE``, else the dtype's). Honest re-expressions (linear as
   matmul + bias, GELU written with erf, a softmax or a reduction written out)
   differ from the original by rounding only and pass; a changed formula or an
   approximation does not. A fraction of 0 demands exact equality. On a
   mismatch it says whether the parameters already differ (RNG order);
3. the top level constructs only subproblem Models and does no tensor math
   (AST rules plus a runtime tracer on ``ModelNew.forward``);
4. each subproblem's declared inputs cover the inputs the top level passes it;
5. each subproblem's declared init args cover the args it is built with, with
   ``get_input_configs()`` when instances differ;
6. each subproblem runs standalone on its own inputs and gives finite output;
7. no subproblem is trivial (identity/copy/view) and none is unused.

Every failure is one line that names the file and says what to change; the
lines are written to be fed back to the LLM.

Policy for the top level (``ModelNew.forward`` outside subproblem calls):
allowed are Python control flow, shape queries, and ops that move or pack
data without changing any value: view, reshape, flatten, unflatten, permute,
transpose, squeeze/unsqueeze, expand, contiguous, clone, detach, basic slicing
that returns a view, split/chunk/unbind (unpacking), cat/stack (packing:
skip connections in U-Nets and DenseNets are concatenated here; the prompt
calls a subproblem that only packs or unpacks data trivial), and device
moves. Everything else that reaches torch counts as math: arithmetic, ``@``,
torch.*/F.* compute, dtype casts, factories (torch.zeros, torch.ones, ...),
padding, repeat, advanced indexing (a gather) and in-place writes.

torch is imported lazily so importing this module stays cheap.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import importlib.machinery
import importlib.util
import inspect
import json
import math
import os
import random
import signal
import sys
import threading
import traceback
import types

from . import correctness as C
from . import layouts, toplevel

DECOMPOSED_NAME = "decomposed_problem.py"
DEFAULT_PACKAGE = "subkernel_problems"

# Names that root torch-like libraries in the top-level file.
_TORCHY_ROOTS = {"torch", "numpy", "triton", "scipy", "einops", "jax"}

# torch.<name> functions the top-level file may call (layout only, no math):
# the rule the evaluator's static check applies to the composed package too.
_AST_LAYOUT_FUNCS = toplevel.LAYOUT_FUNCS

# Tensor ops (short names) the top level may run: shape queries and
# value-preserving layout changes.
_RUNTIME_LAYOUT_OPS = {
    "size", "dim", "ndimension", "numel", "nelement", "stride", "storage_offset",
    "is_contiguous", "data_ptr", "element_size", "get_device", "is_floating_point",
    "is_complex", "dim_order", "_is_view",
    "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "permute",
    "transpose", "t", "contiguous", "unsqueeze", "squeeze", "expand", "expand_as",
    "chunk", "split", "split_with_sizes", "tensor_split", "unbind", "narrow", "select",
    "movedim", "moveaxis", "swapaxes", "swapdims", "detach", "requires_grad_", "clone",
    "cat", "concat", "concatenate", "stack",
    "__len__", "__iter__", "__bool__", "__index__", "__int__", "__float__", "item",
    "tolist", "__format__", "__repr__", "__str__", "__hash__", "__reversed__",
}
# Allowed only when the result keeps the input's dtype (device moves).
_DTYPE_PRESERVING_OPS = {"to", "cpu", "cuda", "type", "float", "double", "half", "bfloat16",
                         "int", "long", "short", "bool", "byte", "char"}

# Method names that make a subproblem forward trivial when it only chains them.
_TRIVIAL_METHODS = {
    "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "permute",
    "transpose", "t", "contiguous", "unsqueeze", "squeeze", "expand", "expand_as",
    "clone", "detach", "chunk", "split", "unbind", "narrow", "select", "movedim",
    "size", "dim", "numel", "to", "copy_", "cat", "concat", "concatenate", "stack",
}

_NAN_MISMATCH_ERR = 3.4028234663852886e38  # float32 max: "one side is NaN/inf"

# Distinct input layouts kept per subproblem (input_layouts_seen): enough for
# every way a top level calls one subproblem, bounded for a loop that slices
# differently on each call.
_MAX_LAYOUTS_SEEN = 16

# How close a decomposition must come to the original, as a fraction of the
# tolerance the evaluator judges a kernel's output by. A tenth: re-expressing
# an operation (matmul + bias for F.linear, GELU with erf, a softmax written
# out, a split reduction) moves an fp32 output by ulps (1e-8 to 1e-6 here),
# far inside it, while a formula change (GELU as x * sigmoid(1.702 x), the
# tanh GELU) moves it by 1e-5 to 1e-3; and the subkernels written later need
# the rest of the problem's tolerance for themselves.
DEFAULT_TOL_FRACTION = 0.1


class _BadInput(Exception):
    """The original problem or the arguments are unusable (exit status 2)."""


class _Timeout(BaseException):
    """Raised by SIGALRM; a BaseException so `except Exception` in LLM code cannot swallow it."""


# ---------------------------------------------------------------------------
# Small helpers


def _torch():
    import torch  # noqa: PLC0415 (lazy on purpose)
    return torch


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _exc_text(exc: BaseException, files: dict) -> str:
    """'TypeError: msg (at decomposed_problem.py line 12)' for the deepest user frame."""
    where = ""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        label = files.get(os.path.realpath(frame.filename))
        if label:
            where = f" (at {label} line {frame.lineno})"
            break
    if isinstance(exc, SyntaxError) and exc.lineno and not where:
        label = files.get(os.path.realpath(exc.filename or ""), exc.filename)
        where = f" (at {label} line {exc.lineno})"
    return _one_line(f"{type(exc).__name__}: {exc}") + where


def _seed_all(seed: int) -> None:
    torch = _torch()
    random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    try:
        import numpy  # noqa: PLC0415
        numpy.random.seed(seed % (2**32))
    except ImportError:
        pass


def _to_device(obj, device):
    torch = _torch()
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if type(obj) in (list, tuple):
        return type(obj)(_to_device(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: _to_device(v, device) for k, v in obj.items()}
    return obj


def _clone(obj):
    torch = _torch()
    if isinstance(obj, torch.Tensor):
        return obj.clone()
    if type(obj) in (list, tuple):
        return type(obj)(_clone(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _clone(v) for k, v in obj.items()}
    return obj


def _as_args(value, what: str):
    if isinstance(value, (list, tuple)):
        return list(value)
    raise TypeError(f"{what} must return a list or tuple, got {type(value).__name__}")


def _flat_tensors(obj):
    torch = _torch()
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _flat_tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _flat_tensors(o)


def _storage_ptr(t) -> int:
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage().data_ptr()
    return t.storage().data_ptr()


# ---------------------------------------------------------------------------
# Signatures: a hashable description of argument lists (shapes, dtypes, values)


def _sig(value):
    torch = _torch()
    if isinstance(value, torch.Tensor):
        return ("T", tuple(int(d) for d in value.shape), str(value.dtype).replace("torch.", ""))
    if isinstance(value, bool) or value is None:
        return ("V", repr(value))
    if isinstance(value, (int, float)):
        return ("N", value) if value == value else ("V", "nan")
    if isinstance(value, str):
        return ("S", value)
    if isinstance(value, (list, tuple)):
        return ("L", tuple(_sig(v) for v in value))
    if isinstance(value, dict):
        return ("D", tuple(sorted((str(k), _sig(v)) for k, v in value.items())))
    if isinstance(value, (torch.dtype, torch.device)):
        return ("V", str(value))
    if isinstance(value, torch.nn.Module):
        return ("M", type(value).__name__)
    return ("O", type(value).__name__)


def _sig_text(sig) -> str:
    kind, payload = sig[0], sig[1]
    if kind == "T":
        dims = ", ".join(str(d) for d in payload)
        return f"({dims}{',' if len(payload) == 1 else ''}) {sig[2]}"
    if kind == "L":
        return "[" + ", ".join(_sig_text(s) for s in payload) + "]"
    if kind == "D":
        return "{" + ", ".join(f"{k}: {_sig_text(v)}" for k, v in payload) + "}"
    if kind == "S":
        return repr(payload)
    if kind == "M":
        return f"<nn.Module {payload}>"
    if kind == "O":
        return f"<{payload}>"
    return str(payload)


def _sig_json(sig):
    kind = sig[0]
    if kind == "T":
        return {"shape": list(sig[1]), "dtype": sig[2]}
    if kind == "L":
        return [_sig_json(s) for s in sig[1]]
    if kind == "D":
        return {k: _sig_json(v) for k, v in sig[1]}
    if kind == "N":
        value = sig[1]
        return value if math.isfinite(value) else repr(value)
    if kind == "V":
        return {"True": True, "False": False, "None": None}.get(sig[1], sig[1])
    return _sig_text(sig)


def _args_text(sigs) -> str:
    """Argument list: '[(128, 256) float32, 4]'."""
    return "[" + ", ".join(_sig_text(s) for s in sigs) + "]"


def _init_text(sigs) -> str:
    """Constructor args: '(784, 256)'."""
    return "(" + ", ".join(_sig_text(s) for s in sigs) + ")"


def _bind(signature, args, kwargs, drop_first: bool):
    """Normalises a call to one positional tuple (defaults applied) when possible."""
    if signature is None:
        return tuple(args) + tuple(v for _, v in sorted(kwargs.items()))
    try:
        call_args = ((None,) + tuple(args)) if drop_first else tuple(args)
        bound = signature.bind(*call_args, **kwargs)
        bound.apply_defaults()
    except TypeError:
        return tuple(args) + tuple(v for _, v in sorted(kwargs.items()))
    values = []
    params = list(signature.parameters.values())
    for i, param in enumerate(params):
        if drop_first and i == 0:
            continue
        value = bound.arguments.get(param.name)
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            values.extend(value or ())
        elif param.kind is inspect.Parameter.VAR_KEYWORD:
            values.extend(v for _, v in sorted((value or {}).items()))
        else:
            values.append(value)
    return tuple(values)


def _signature(fn):
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------
# Loading files without touching bytecode caches or leaking sys.path/sys.modules


def _exec_file(path: str, modname: str, package: str = ""):
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    code = compile(source, path, "exec", dont_inherit=True)
    mod = types.ModuleType(modname)
    mod.__file__ = path
    mod.__package__ = package
    mod.__spec__ = importlib.util.spec_from_file_location(modname, path)
    sys.modules[modname] = mod
    try:
        exec(code, mod.__dict__)  # noqa: S102 (that is the job)
    except BaseException:
        sys.modules.pop(modname, None)
        raise
    return mod


def _purge_modules(prefixes) -> None:
    for key in list(sys.modules):
        for prefix in prefixes:
            if key == prefix or key.startswith(prefix + "."):
                sys.modules.pop(key, None)
                break


@contextlib.contextmanager
def _isolated_imports(dirs, packages):
    saved_path = list(sys.path)
    saved_bytecode = sys.dont_write_bytecode
    _purge_modules(packages)
    importlib.invalidate_caches()
    for d in reversed(dirs):
        sys.path.insert(0, d)
    sys.dont_write_bytecode = True
    try:
        yield
    finally:
        sys.path[:] = saved_path
        sys.dont_write_bytecode = saved_bytecode
        _purge_modules(packages)
        importlib.invalidate_caches()


@contextlib.contextmanager
def _deadline(seconds):
    usable = (seconds and seconds > 0 and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def on_alarm(signum, frame):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, on_alarm)
    # Fire a little early on long budgets so that this report, not a supervisor's kill at
    # the same deadline, is what the caller sees.
    seconds = float(seconds)
    signal.setitimer(signal.ITIMER_REAL, seconds - min(5.0, 0.05 * seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def _numerics(device: str):
    """TF32 off and deterministic kernels, restored afterwards."""
    torch = _torch()
    saved = {}
    if device.startswith("cuda"):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        saved["matmul_tf32"] = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
    saved["cudnn_tf32"] = torch.backends.cudnn.allow_tf32
    saved["cudnn_det"] = torch.backends.cudnn.deterministic
    saved["cudnn_bench"] = torch.backends.cudnn.benchmark
    saved["det"] = torch.are_deterministic_algorithms_enabled()
    saved["det_warn"] = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        if "matmul_tf32" in saved:
            torch.backends.cuda.matmul.allow_tf32 = saved["matmul_tf32"]
        torch.backends.cudnn.allow_tf32 = saved["cudnn_tf32"]
        torch.backends.cudnn.deterministic = saved["cudnn_det"]
        torch.backends.cudnn.benchmark = saved["cudnn_bench"]
        torch.use_deterministic_algorithms(saved["det"], warn_only=saved["det_warn"])


# ---------------------------------------------------------------------------
# Static (AST) rules for decomposed_problem.py and for trivial subproblems


def _dotted(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        parts.append(_dotted(node.func) + "()")
    else:
        parts.append("<expr>")
    return ".".join(reversed(parts))


def _root_name(node):
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _static_toplevel(tree, label: str, package: str):
    """Returns [(lineno, message)] for rule violations in the top-level file."""
    torch_names, sub_names, sub_classes, local_classes = set(), set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            root = module.split(".")[0]
            if node.level == 0 and root == package:
                sub_names.update(a.asname or a.name for a in node.names)
                sub_classes.update(a.asname or a.name for a in node.names if a.name == "Model")
            elif node.level == 0 and root in _TORCHY_ROOTS:
                torch_names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                bound = alias.asname or root
                if root in _TORCHY_ROOTS:
                    torch_names.add(bound)
                elif root == package:
                    sub_names.add(bound)
        elif isinstance(node, ast.ClassDef) and node.name != "ModelNew":
            local_classes.add(node.name)

    model_new = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"),
                     None)
    if model_new is None:
        return []
    found = []
    for item in model_new.body:
        if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        in_init = item.name == "__init__"
        where = f"ModelNew.{item.name}"
        for node in ast.walk(item):
            if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult):
                found.append((node.lineno, f"{label} line {node.lineno}: {where} uses the `@` "
                              "operator; matrix products belong inside a subproblem Model"))
            if not isinstance(node, ast.Call):
                continue
            root = _root_name(node.func)
            name = _dotted(node.func)
            if in_init:
                if root in torch_names:
                    found.append((node.lineno, f"{label} line {node.lineno}: ModelNew.__init__ "
                                  f"calls `{name}(...)`; the top level may construct only Model "
                                  f"classes imported from {package}/ (no torch.nn layers, "
                                  "nn.ModuleList, nn.Sequential, nn.Parameter or tensors)"))
                elif isinstance(node.func, ast.Name) and node.func.id in local_classes:
                    found.append((node.lineno, f"{label} line {node.lineno}: ModelNew.__init__ "
                                  f"constructs `{node.func.id}`, a class defined in {label}; move "
                                  f"it into a {package}/ file and import it from there"))
                elif (isinstance(node.func, ast.Attribute) and node.func.attr in
                      ("register_buffer", "register_parameter")):
                    found.append((node.lineno, f"{label} line {node.lineno}: ModelNew.__init__ "
                                  f"calls `{name}`; parameters and buffers must live inside "
                                  "subproblem Models"))
            elif (isinstance(node.func, ast.Name) and node.func.id in sub_classes) or \
                    (root in sub_names and name.endswith(".Model")):
                found.append((node.lineno, f"{label} line {node.lineno}: {where} calls "
                              f"`{name}(...)` directly; construct subproblem Models once in "
                              "ModelNew.__init__ and call those instances"))
            elif root in torch_names:
                last = name.rsplit(".", 1)[-1]
                if last not in _AST_LAYOUT_FUNCS:
                    found.append((node.lineno, f"{label} line {node.lineno}: {where} calls "
                                  f"`{name}`; all tensor math must happen inside subproblem "
                                  "Models (the top level may only call them and reshape/view)"))
    return found


def _is_trivial_expr(node, params, in_arg: bool = False) -> bool:
    """True when node only names, views or copies values; arithmetic is allowed only in call
    arguments (shape arithmetic such as x.view(n, c * h))."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return in_arg and _is_trivial_expr(node.operand, params, in_arg)
    if isinstance(node, ast.BinOp):
        return in_arg and _is_trivial_expr(node.left, params, True) and \
            _is_trivial_expr(node.right, params, True)
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_is_trivial_expr(e, params, in_arg) for e in node.elts)
    if isinstance(node, ast.Starred):
        return _is_trivial_expr(node.value, params, in_arg)
    if isinstance(node, ast.Attribute):
        # x.shape, x.T; but not self.layer
        return _root_name(node) != "self" and _is_trivial_expr(node.value, params, in_arg)
    if isinstance(node, ast.Subscript):
        return _is_trivial_expr(node.value, params) and _is_trivial_slice(node.slice, params)
    if isinstance(node, ast.Call):
        func = node.func
        if not isinstance(func, ast.Attribute) or _root_name(func) == "self":
            return False
        ok_args = all(_is_trivial_expr(a, params, True) for a in node.args) and \
            all(_is_trivial_expr(k.value, params, True) for k in node.keywords)
        if func.attr in _TRIVIAL_METHODS and ok_args:
            if _root_name(func) == "torch":  # torch.flatten(x, 1)
                return True
            return _is_trivial_expr(func.value, params)
        return False
    return False


def _is_trivial_slice(node, params) -> bool:
    if isinstance(node, ast.Slice):
        return all(p is None or isinstance(p, (ast.Constant, ast.UnaryOp, ast.Name))
                   for p in (node.lower, node.upper, node.step))
    if isinstance(node, ast.Tuple):
        return all(_is_trivial_slice(e, params) for e in node.elts)
    if isinstance(node, ast.Constant):
        return True
    if hasattr(ast, "Index") and isinstance(node, getattr(ast, "Index")):  # Python < 3.9
        return _is_trivial_slice(node.value, params)
    return False


def _trivial_forward(tree) -> bool:
    """True when Model.forward only returns its inputs, possibly reshaped or copied."""
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None:
        return False
    forward = next((n for n in model.body
                    if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    if forward is None:
        return False
    params = {a.arg for a in forward.args.args[1:]}
    returns = 0
    for stmt in forward.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # docstring
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, ast.Return):
            if stmt.value is None or not _is_trivial_expr(stmt.value, params):
                return False
            returns += 1
            continue
        if isinstance(stmt, ast.Assign) and all(isinstance(t, (ast.Name, ast.Tuple))
                                                 for t in stmt.targets):
            if not _is_trivial_expr(stmt.value, params):
                return False
            continue
        return False
    return returns > 0


# ---------------------------------------------------------------------------
# Runtime recording: constructor args, per-instance inputs, top-level math


class _Recorder:
    def __init__(self):
        self.inits = []          # [(cls, instance, init_sig_tuple)]
        self.calls = {}          # id(instance) -> [input_sig_tuple]
        self.layouts = {}        # id(instance) -> [distinct per-call layouts: one dict or None per argument]
        self.depth = 0           # >0 while a subproblem forward runs
        self.init_stack = []     # subproblem classes whose __init__ is running
        self.nested = []         # [(inner cls, outer cls)]: built inside another subproblem
        self.toplevel_ops = []   # [(label, lineno, op)]
        self.module_args = []    # [(cls, "init"|"forward")]

    @contextlib.contextmanager
    def patched_inits(self, classes):
        torch = _torch()
        patches = []
        for cls in classes:
            had_own = "__init__" in cls.__dict__
            original = cls.__init__
            signature = _signature(original)

            def make(cls=cls, original=original, signature=signature):
                @functools.wraps(original)
                def __init__(inner_self, *args, **kwargs):
                    outer = self.init_stack[0] if self.init_stack else None
                    values = _bind(signature, args, kwargs, drop_first=True)
                    sig = tuple(_sig(v) for v in values)
                    if outer is None and any(isinstance(v, torch.nn.Module) for v in values):
                        self.module_args.append((cls, "__init__"))
                    self.init_stack.append(cls)
                    try:
                        original(inner_self, *args, **kwargs)
                    finally:
                        self.init_stack.pop()
                    if type(inner_self) is not cls:
                        return
                    if outer is None:
                        self.inits.append((cls, inner_self, sig))
                    elif outer is not cls:
                        self.nested.append((cls, outer))
                return __init__

            patches.append((cls, had_own, cls.__dict__.get("__init__")))
            cls.__init__ = make()
        try:
            yield
        finally:
            for cls, had_own, own in patches:
                if had_own:
                    cls.__init__ = own
                else:
                    del cls.__init__

    def wrap_forwards(self):
        torch = _torch()
        for cls, inst, _ in self.inits:
            original = inst.forward
            signature = _signature(original)
            calls = self.calls.setdefault(id(inst), [])
            seen = self.layouts.setdefault(id(inst), [])

            def make(original=original, signature=signature, calls=calls, cls=cls, seen=seen):
                def forward(*args, **kwargs):
                    values = _bind(signature, args, kwargs, drop_first=False)
                    calls.append(tuple(_sig(v) for v in values))
                    # The strides each tensor argument arrives with (a transposed or
                    # sliced view from the top level): the subkernel's evaluation
                    # reproduces them (eval option input_layouts, layouts.py).
                    call = [layouts.describe(v) if isinstance(v, torch.Tensor) else None
                            for v in values]
                    if call not in seen and len(seen) < _MAX_LAYOUTS_SEEN:
                        seen.append(call)
                    if any(isinstance(v, torch.nn.Module) for v in values):
                        self.module_args.append((cls, "forward"))
                    self.depth += 1
                    try:
                        return original(*args, **kwargs)
                    finally:
                        self.depth -= 1
                return forward

            object.__setattr__(inst, "forward", make())


def _op_short_name(func) -> str:
    torch = _torch()
    try:
        name = torch.overrides.resolve_name(func) or ""
    except Exception:  # noqa: BLE001
        name = ""
    if not name:
        name = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    return name


def _make_tracer(recorder: _Recorder, user_files: dict, own_file: str):
    """A TorchFunctionMode that records torch calls made by the top level itself."""
    torch = _torch()
    from torch.overrides import TorchFunctionMode  # noqa: PLC0415

    torch_dir = os.path.dirname(os.path.realpath(torch.__file__))

    def where():
        frame = sys._getframe(2)
        fallback = None
        while frame is not None:
            path = os.path.realpath(frame.f_code.co_filename)
            if path in user_files:
                return user_files[path], frame.f_lineno
            if fallback is None and path != own_file and not path.startswith(torch_dir):
                fallback = (os.path.basename(path), frame.f_lineno)
            frame = frame.f_back
        return fallback or ("?", 0)

    class TopLevelTracer(TorchFunctionMode):
        busy = False

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if self.busy or recorder.depth > 0:
                return func(*args, **kwargs)
            self.busy = True
            try:
                out = func(*args, **kwargs)
                full = _op_short_name(func)
                parts = full.split(".")
                short = parts[-2] if parts[-1] in ("__get__",) and len(parts) > 1 else parts[-1]
                allowed = parts[-1] == "__get__" or short in _RUNTIME_LAYOUT_OPS
                if short == "__getitem__":
                    allowed = not isinstance(out, torch.Tensor) or out._is_view()
                elif short in _DTYPE_PRESERVING_OPS:
                    src = args[0] if args and isinstance(args[0], torch.Tensor) else None
                    allowed = (not isinstance(out, torch.Tensor) or
                               (src is not None and out.dtype == src.dtype))
                if not allowed:
                    label, line = where()
                    op = full.replace("torch.Tensor.", "Tensor.")
                    recorder.toplevel_ops.append((label, line, op))
                return out
            finally:
                self.busy = False

    return TopLevelTracer()


# ---------------------------------------------------------------------------
# The verifier


class _Subproblem:
    def __init__(self, name, path, label):
        self.name, self.path, self.label = name, path, label
        self.module = None
        self.cls = None
        self.tree = None
        self.uses_configs = False
        self.configs = []        # [{"get_init_inputs": fn, "get_inputs": fn}]
        self.declared = []       # [(init_sig, input_sig)] per config (None when it failed)
        self.failed = False
        self.covered = True
        self.trivial_runtime = False

    def declared_incomplete(self) -> bool:
        """True when some declared config could not even be evaluated."""
        return not self.declared or any(d is None for d in self.declared)


class _Verifier:
    def __init__(self, problem, decomposed, subproblems_dir, options):
        options = dict(options or {})
        self.problem = os.path.realpath(problem) if problem else ""
        decomposed = decomposed or ""
        if os.path.isdir(decomposed):
            decomposed = os.path.join(decomposed, DECOMPOSED_NAME)
        self.decomposed = os.path.realpath(decomposed) if decomposed else ""
        self.root = os.path.dirname(self.decomposed)
        if not subproblems_dir:
            subproblems_dir = os.path.join(self.root, DEFAULT_PACKAGE)
        self.subdir = os.path.realpath(subproblems_dir)
        self.package = os.path.basename(self.subdir.rstrip(os.sep))
        self.seed = int(options.get("seed", 42))
        self.trials = max(1, int(options.get("trials", 2)))
        # None: the tolerance by the output's dtype or the problem's declaration;
        # a number (the run's --atol/--rtol) stands for the problem's tolerance.
        # Checked in check_inputs (tolerance_option_error).
        self.atol = options.get("atol")
        self.rtol = options.get("rtol")
        self.fraction = options.get("decompose_tol_fraction", DEFAULT_TOL_FRACTION)
        self.problem_tol = None  # the problem's MKEVOLVE_TOLERANCE, once loaded
        self.tolerances = {}     # output path -> the bound and the errors measured (result "tolerance")
        self.timeout_s = options.get("timeout_s")
        self.device = options.get("device")
        self.failures = []
        self.subproblems = {}    # name -> _Subproblem
        self.max_abs_err = None  # stays None until outputs were compared
        self.incomparable = False  # outputs differed in structure, shape or dtype
        self.recorder = _Recorder()
        self.decomposed_label = DECOMPOSED_NAME
        self.problem_label = os.path.basename(self.problem)
        self.user_files = {}
        self.static_found = []   # [(lineno, failure line)] from the AST rules
        self.built_model_new = False

    # -- reporting --------------------------------------------------------

    def fail(self, line: str) -> None:
        line = _one_line(line, 700)
        if line not in self.failures:
            self.failures.append(line)

    def result(self) -> dict:
        subs = {}
        for name, sp in sorted(self.subproblems.items()):
            instances = [r for r in self.recorder.inits if sp.cls is not None and r[0] is sp.cls]
            init_seen, inputs_seen, layouts_seen = [], [], []
            for _, inst, init_sig in instances:
                js = [_sig_json(s) for s in init_sig]
                if js not in init_seen:
                    init_seen.append(js)
                for call in self.recorder.calls.get(id(inst), []):
                    cj = [_sig_json(s) for s in call]
                    if cj not in inputs_seen:
                        inputs_seen.append(cj)
                for call in self.recorder.layouts.get(id(inst), []):
                    if call not in layouts_seen and len(layouts_seen) < _MAX_LAYOUTS_SEEN:
                        layouts_seen.append(call)
            subs[name] = {
                "instances": len(instances),
                "init_args_seen": init_seen,
                "input_shapes_seen": inputs_seen,
                # Per distinct call, per argument: {"shape", "stride", "offset", "dtype",
                # "contiguous"} or None (not a tensor); what eval's input_layouts takes.
                "input_layouts_seen": layouts_seen,
                "covered": bool(sp.covered and not sp.failed and instances),
            }
        return {"ok": not self.failures, "failures": list(self.failures), "subproblems": subs,
                "max_abs_err": (-1.0 if self.max_abs_err is None or self.incomparable
                                else float(self.max_abs_err)),
                "tolerance": {"fraction": self.fraction_value(),
                              "outputs": list(self.tolerances.values())}}

    def fraction_value(self) -> float:
        """The fraction for the result (strict JSON): the default while the option is bad."""
        if tolerance_option_error({"decompose_tol_fraction": self.fraction}):
            return DEFAULT_TOL_FRACTION
        return float(self.fraction)

    # -- driver -----------------------------------------------------------

    def run(self) -> dict:
        self.check_inputs()
        torch = _torch()
        if not self.device:
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        if self.device not in ("cpu", "cuda") and not self.device.startswith("cuda:"):
            raise _BadInput(f"options.device must be 'cpu' or 'cuda', got {self.device!r}")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise _BadInput("options.device is 'cuda' but torch sees no CUDA device")
        problem_mod = self.load_problem()
        dirs = [self.root, os.path.dirname(self.subdir)]
        with _isolated_imports(dirs, {self.package, DEFAULT_PACKAGE}), _numerics(self.device):
            try:
                with _deadline(self.timeout_s):
                    self.verify(problem_mod)
            except _Timeout:
                self.fail(f"{self.decomposed_label}: verification did not finish within "
                          f"{self.timeout_s} s (options.timeout_s); make the subproblems' "
                          "get_inputs() smaller or remove the hang")
        return self.result()

    def check_inputs(self):
        bad = tolerance_option_error({"atol": self.atol, "rtol": self.rtol,
                                      "decompose_tol_fraction": self.fraction})
        if bad:
            raise _BadInput(bad)
        self.fraction = float(self.fraction)
        if not self.problem or not os.path.isfile(self.problem):
            raise _BadInput(f"problem file not found: {self.problem or '(none given)'}")
        if not self.decomposed or not os.path.isfile(self.decomposed):
            raise _BadInput(f"decomposed file not found: {self.decomposed or '(none given)'}")
        if not self.package.isidentifier():
            raise _BadInput(f"subproblems directory name {self.package!r} is not a Python "
                            "package name")
        self.user_files = {self.problem: self.problem_label,
                           self.decomposed: self.decomposed_label}
        rel = os.path.relpath(self.subdir, self.root)
        self.sub_prefix = rel if not rel.startswith("..") else self.package

    def load_problem(self):
        try:
            mod = _exec_file(self.problem, f"_mk_problem_{os.getpid()}_{id(self)}")
        except Exception as exc:  # noqa: BLE001
            raise _BadInput(f"{self.problem_label}: failed to load: "
                            f"{_exc_text(exc, self.user_files)}") from None
        finally:
            sys.modules.pop(f"_mk_problem_{os.getpid()}_{id(self)}", None)
        missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(mod, n)]
        if missing:
            raise _BadInput(f"{self.problem_label}: missing {', '.join(missing)}; a KernelBench "
                            "problem defines Model, get_inputs and get_init_inputs")
        try:
            # Its own tolerance, where it declares one: the bound is a fraction of it.
            self.problem_tol = C.problem_tolerance(mod)
        except ValueError as exc:
            raise _BadInput(f"{self.problem_label}: {exc}") from None
        return mod

    def verify(self, problem_mod):
        self.load_subproblems()
        new_cls = self.load_decomposed()
        self.declare_configs()
        if new_cls is not None:
            self.equivalence(problem_mod, new_cls)
            self.coverage()
        self.trivial_and_unused(new_cls is not None)

    # -- 1. loading ---------------------------------------------------------

    def load_subproblems(self):
        if not os.path.isdir(self.subdir):
            self.fail(f"{self.sub_prefix}/: directory not found; put one KernelBench-format file "
                      "per subproblem there")
            return
        pkg = types.ModuleType(self.package)
        pkg.__path__ = [self.subdir]
        pkg.__package__ = self.package
        spec = importlib.machinery.ModuleSpec(self.package, None, is_package=True)
        spec.submodule_search_locations = [self.subdir]
        pkg.__spec__ = spec
        pkg.__file__ = None
        sys.modules[self.package] = pkg
        init_py = os.path.join(self.subdir, "__init__.py")
        if os.path.isfile(init_py):
            try:
                with open(init_py, encoding="utf-8") as fh:
                    code = compile(fh.read(), init_py, "exec", dont_inherit=True)
                exec(code, pkg.__dict__)  # noqa: S102
            except Exception as exc:  # noqa: BLE001
                self.fail(f"{self.sub_prefix}/__init__.py: failed to load: {_exc_text(exc, {})}")
        names = sorted(f[:-3] for f in os.listdir(self.subdir)
                       if f.endswith(".py") and f != "__init__.py")
        if not names:
            self.fail(f"{self.sub_prefix}/: no subproblem files; the decomposition needs at least "
                      "one")
        for name in names:
            path = os.path.realpath(os.path.join(self.subdir, name + ".py"))
            label = f"{self.sub_prefix}/{name}.py"
            self.user_files[path] = label
            self.subproblems[name] = _Subproblem(name, path, label)
        for name, sp in self.subproblems.items():
            if not name.isidentifier():
                self.fail(f"{sp.label}: file name is not a Python identifier, so it cannot be "
                          "imported; rename it")
                sp.failed = True
                continue
            modname = f"{self.package}.{name}"
            try:
                with open(sp.path, encoding="utf-8") as fh:
                    sp.tree = ast.parse(fh.read(), sp.path)
                mod = sys.modules.get(modname) or _exec_file(sp.path, modname, self.package)
                setattr(pkg, name, mod)
            except Exception as exc:  # noqa: BLE001
                self.fail(f"{sp.label}: failed to load: {_exc_text(exc, self.user_files)}")
                sp.failed = True
                continue
            sp.module = mod
            cls = getattr(mod, "Model", None)
            torch = _torch()
            if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
                self.fail(f"{sp.label}: defines no `Model` class (an nn.Module); every subproblem "
                          "file must define one")
                sp.failed = True
                continue
            sp.cls = cls
            has_configs = callable(getattr(mod, "get_input_configs", None))
            has_plain = callable(getattr(mod, "get_inputs", None)) and \
                callable(getattr(mod, "get_init_inputs", None))
            if not has_configs and not has_plain:
                missing = [n for n in ("get_inputs", "get_init_inputs")
                           if not callable(getattr(mod, n, None))]
                self.fail(f"{sp.label}: missing {' and '.join(missing)}; define get_inputs() and "
                          "get_init_inputs(), or get_input_configs() when ModelNew builds this "
                          "Model more than once")
                sp.failed = True
                continue
            sp.uses_configs = has_configs

    def load_decomposed(self):
        torch = _torch()
        label = self.decomposed_label
        try:
            with open(self.decomposed, encoding="utf-8") as fh:
                tree = ast.parse(fh.read(), self.decomposed)
        except SyntaxError as exc:
            self.fail(f"{label}: syntax error: {_exc_text(exc, self.user_files)}")
            return None
        modname = f"_mk_decomposed_{os.getpid()}_{id(self)}"
        try:
            mod = _exec_file(self.decomposed, modname)
        except Exception as exc:  # noqa: BLE001
            self.fail(f"{label}: failed to load: {_exc_text(exc, self.user_files)}")
            return None
        finally:
            sys.modules.pop(modname, None)
        cls = getattr(mod, "ModelNew", None)
        if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
            self.fail(f"{label}: defines no `ModelNew` class (an nn.Module)")
            return None
        self.static_found = _static_toplevel(tree, label, self.package)
        for _, line in self.static_found:
            self.fail(line)
        return cls

    def declare_configs(self):
        """Materialises every declared config; also the standalone run (check 6)."""
        torch = _torch()
        for sp in self.subproblems.values():
            if sp.failed or sp.cls is None:
                continue
            mod = sp.module
            if sp.uses_configs:
                try:
                    configs = mod.get_input_configs()
                except Exception as exc:  # noqa: BLE001
                    self.fail(f"{sp.label}: get_input_configs() raised "
                              f"{_exc_text(exc, self.user_files)}")
                    sp.failed = True
                    continue
                if not isinstance(configs, (list, tuple)) or not configs:
                    self.fail(f"{sp.label}: get_input_configs() must return a non-empty list of "
                              "dicts with callables 'get_init_inputs' and 'get_inputs'")
                    sp.failed = True
                    continue
                bad = [i for i, c in enumerate(configs)
                       if not (isinstance(c, dict) and callable(c.get("get_init_inputs"))
                               and callable(c.get("get_inputs")))]
                if bad:
                    self.fail(f"{sp.label}: get_input_configs() entry #{bad[0]} is not a dict with "
                              "callables 'get_init_inputs' and 'get_inputs'")
                    sp.failed = True
                    continue
                sp.configs = list(configs)
            else:
                sp.configs = [{"get_init_inputs": mod.get_init_inputs,
                               "get_inputs": mod.get_inputs}]
            init_signature = _signature(sp.cls.__init__)
            forward_signature = _signature(sp.cls.forward)
            for index, config in enumerate(sp.configs):
                init_fn, inputs_fn = "get_init_inputs()", "get_inputs()"
                entry = f"get_input_configs() entry #{index}: " if sp.uses_configs else ""
                sp.declared.append(None)
                try:
                    _seed_all(self.seed)
                    init = _as_args(config["get_init_inputs"](), init_fn)
                    inputs = self.make_inputs(config["get_inputs"], inputs_fn, self.seed)
                except Exception as exc:  # noqa: BLE001
                    self.fail(f"{sp.label}: {entry}{init_fn} / {inputs_fn} raised "
                              f"{_exc_text(exc, self.user_files)}")
                    sp.failed = True
                    continue
                init_sig = tuple(_sig(v) for v in _bind(init_signature, init, {}, True))
                input_sig = tuple(_sig(v) for v in _bind(forward_signature, inputs, {}, True))
                sp.declared[-1] = (init_sig, input_sig)
                try:
                    _seed_all(self.seed)
                    model = sp.cls(*init).to(self.device)
                except Exception as exc:  # noqa: BLE001
                    self.fail(f"{sp.label}: {entry}Model(*{init_fn}) raised "
                              f"{_exc_text(exc, self.user_files)}")
                    sp.failed = True
                    continue
                device_inputs = inputs
                try:
                    _seed_all(self.seed)
                    with torch.no_grad():
                        out = model(*device_inputs)
                except Exception as exc:  # noqa: BLE001
                    self.fail(f"{sp.label}: {entry}Model(*{init_fn})(*{inputs_fn}) raised "
                              f"{_exc_text(exc, self.user_files)}")
                    sp.failed = True
                    continue
                for t in _flat_tensors(out):
                    if t.is_floating_point() or t.is_complex():
                        if not bool(torch.isfinite(t).all()):
                            self.fail(f"{sp.label}: {entry}Model(*{init_fn})(*{inputs_fn}) "
                                      "returns NaN or inf; the subproblem must give finite output "
                                      "on its own inputs")
                            sp.failed = True
                            break
                if index == 0 and not sp.failed and self.is_view_only(model, device_inputs, out):
                    sp.trivial_runtime = True

    def make_inputs(self, fn, what, seed):
        """Calls a get_inputs() after seeding. On CUDA with torch >= 2.0 the tensors are
        created on the device (KernelBench-sized inputs take seconds to draw on the CPU);
        if that fails, the call is repeated on the CPU."""
        torch = _torch()
        if self.device.startswith("cuda") and hasattr(torch, "set_default_device"):
            previous = torch.get_default_device() if hasattr(torch, "get_default_device") \
                else torch.device("cpu")
            torch.set_default_device(self.device)
            try:
                _seed_all(seed)
                return _to_device(_as_args(fn(), what), self.device)
            except Exception:  # noqa: BLE001 (retried below, where the error is reported)
                pass
            finally:
                # None removes the device context entirely, as when nothing was set.
                torch.set_default_device(None if previous.type == "cpu" else previous)
        _seed_all(seed)
        return _to_device(_as_args(fn(), what), self.device)

    @staticmethod
    def is_view_only(model, inputs, out) -> bool:
        """No parameters/buffers and every output tensor aliases an input tensor."""
        if any(True for _ in model.parameters()) or any(True for _ in model.buffers()):
            return False
        outs = list(_flat_tensors(out))
        ins = {_storage_ptr(t) for t in _flat_tensors(inputs) if t.numel()}
        return bool(outs) and all(t.numel() and _storage_ptr(t) in ins for t in outs)

    # -- 2 and 3. equivalence and top-level rules ----------------------------

    def equivalence(self, problem_mod, new_cls):
        torch = _torch()
        label, plabel = self.decomposed_label, self.problem_label
        try:
            _seed_all(self.seed)
            init = _as_args(problem_mod.get_init_inputs(), "get_init_inputs()")
            _seed_all(self.seed)
            ref = problem_mod.Model(*init)
        except Exception as exc:  # noqa: BLE001
            raise _BadInput(f"{plabel}: Model(*get_init_inputs()) raised "
                            f"{_exc_text(exc, self.user_files)}") from None
        classes = [sp.cls for sp in self.subproblems.values() if sp.cls is not None]
        try:
            with self.recorder.patched_inits(classes):
                _seed_all(self.seed)
                new = new_cls(*init)
        except Exception as exc:  # noqa: BLE001
            self.fail(f"{label}: ModelNew(*get_init_inputs()) raised "
                      f"{_exc_text(exc, self.user_files)}")
            return
        self.built_model_new = True
        self.structure(new)
        self.recorder.wrap_forwards()
        try:
            ref = ref.to(self.device)
            new = new.to(self.device)
        except Exception as exc:  # noqa: BLE001
            self.fail(f"{label}: moving ModelNew to {self.device} raised "
                      f"{_exc_text(exc, self.user_files)}")
            return
        own_file = os.path.realpath(__file__)
        tracer = _make_tracer(self.recorder, self.user_files, own_file)
        new_forward = new.forward

        def traced_forward(*args, **kwargs):
            # The tracer sees only what ModelNew.forward itself runs.
            self.recorder.depth = 0
            with tracer:
                return new_forward(*args, **kwargs)

        object.__setattr__(new, "forward", traced_forward)
        for trial in range(self.trials):
            seed = self.seed + trial
            try:
                inputs = self.make_inputs(problem_mod.get_inputs, "get_inputs()", seed)
                ref_inputs = _clone(inputs)
                _seed_all(seed)
                with torch.no_grad():
                    expected = ref(*ref_inputs)
            except Exception as exc:  # noqa: BLE001
                raise _BadInput(f"{plabel}: Model(*get_init_inputs())(*get_inputs()) raised "
                                f"{_exc_text(exc, self.user_files)}") from None
            try:
                new_inputs = _clone(inputs)
                _seed_all(seed)
                with torch.no_grad():
                    got = new(*new_inputs)
            except _Timeout:
                raise
            except Exception as exc:  # noqa: BLE001
                self.fail(f"{label}: ModelNew(*get_init_inputs())(*get_inputs()) raised "
                          f"{_exc_text(exc, self.user_files)}")
                self.report_toplevel_ops()
                return
            problem = self.compare(expected, got, trial)
            if problem:
                param_line = self.compare_parameters(ref, new)
                self.fail(problem)
                if param_line:
                    self.fail(param_line)
                elif "differs from Model's" in problem:
                    # Within the bound, a different order of operations would have passed.
                    why = ("operation order, formula or approximation" if "exact equality" in problem
                           else "a changed formula, an approximation, or an operation missing or "
                           "added")
                    self.failures[-1] = _one_line(
                        problem + "; the parameters are identical, so ModelNew.forward computes "
                        f"something different ({why})", 700)
                break
        self.report_toplevel_ops()
        for cls, where in self.recorder.module_args:
            sp = self.by_class(cls)
            name = sp.label if sp else cls.__name__
            self.fail(f"{name}: ModelNew passes an nn.Module to Model.{where}; subproblem Models "
                      "must receive only tensors and plain values (shapes, flags)")

    def report_toplevel_ops(self):
        flagged = {lineno for lineno, _ in self.static_found}
        by_line = {}  # (label, line) -> ops, in first-seen order
        for label, line, op in self.recorder.toplevel_ops:
            if label == self.decomposed_label and line in flagged:
                continue  # the AST rule already named this line
            ops = by_line.setdefault((label, line), [])
            if op not in ops:
                ops.append(op)
        for (label, line), ops in by_line.items():
            names = ", ".join(f"`{op}`" for op in ops)
            self.fail(f"{label} line {line}: the top level runs {names} on tensors outside any "
                      "subproblem; move this computation into a subproblem Model (the top level "
                      "may only call subproblems, view/reshape and cat/split)")

    def structure(self, new):
        """Runtime form of the rule: ModelNew holds only subproblem instances."""
        torch = _torch()
        label = self.decomposed_label
        sub_classes = {sp.cls for sp in self.subproblems.values() if sp.cls is not None}
        static_text = " ".join(line for _, line in self.static_found)
        # Skip what an AST rule already reported for the same cause.
        for name in list(new._parameters):
            if "Parameter" not in static_text and "register_parameter" not in static_text:
                self.fail(f"{label}: ModelNew owns parameter `{name}`; parameters must be created "
                          "inside subproblem Models")
        for name in list(new._buffers):
            if "register_buffer" not in static_text:
                self.fail(f"{label}: ModelNew owns buffer `{name}`; buffers must be created "
                          "inside subproblem Models")
        for name, value in vars(new).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter) \
                    and "ModelNew.__init__ calls `torch." not in static_text:
                self.fail(f"{label}: ModelNew.{name} is a tensor; constants belong inside a "
                          "subproblem Model")
        for name, child in new.named_children():
            if type(child) in sub_classes:
                continue
            cls = type(child)
            if cls.__name__ in static_text:
                continue
            self.fail(f"{label}: ModelNew.{name} is a {cls.__module__}.{cls.__qualname__}; the "
                      f"top level may hold only Model instances from {self.package}/ (no "
                      "nn.ModuleList, nn.Sequential or torch.nn layers)")
        self.silence_foreign_modules(new, sub_classes)
        registered = {id(m) for m in new.modules()}
        for cls, inst, init_sig in self.recorder.inits:
            if id(inst) not in registered:
                sp = self.by_class(cls)
                self.fail(f"{label}: the {sp.label if sp else cls.__name__} Model built with "
                          f"{_init_text(init_sig)} is not registered as a submodule of ModelNew; "
                          "assign it to an attribute of self (setattr works in loops)")

    def silence_foreign_modules(self, new, sub_classes):
        """Stops the tracer from reporting again what runs inside a non-subproblem
        module that ModelNew holds: the rule above has already named it."""
        stack = list(new.children())
        while stack:
            module = stack.pop()
            if type(module) in sub_classes:
                continue
            stack.extend(module.children())
            original = module.forward

            def make(original=original):
                def forward(*args, **kwargs):
                    self.recorder.depth += 1
                    try:
                        return original(*args, **kwargs)
                    finally:
                        self.recorder.depth -= 1
                return forward

            object.__setattr__(module, "forward", make())

    def by_class(self, cls):
        return next((sp for sp in self.subproblems.values() if sp.cls is cls), None)

    def bound_for(self, dtype) -> dict:
        """The decomposition's bound for an output of this dtype: the fraction of
        the tolerance the evaluator would judge a kernel's output by (the options'
        atol/rtol, else the problem's declaration, else the dtype's default).
        Integer and bool outputs, which the evaluator compares exactly, stay exact."""
        torch = _torch()
        name = C.dtype_name(dtype)
        if not (dtype.is_floating_point or dtype.is_complex) or dtype == torch.bool:
            return {"dtype": name, "atol": 0.0, "rtol": 0.0, "problem_atol": 0.0,
                    "problem_rtol": 0.0, "source": {"atol": "exact", "rtol": "exact"}}
        tol = C.tolerance_for(dtype, {"atol": self.atol, "rtol": self.rtol,
                                      "problem_tolerance": self.problem_tol})
        return {"dtype": name, "atol": tol["atol"] * self.fraction,
                "rtol": tol["rtol"] * self.fraction, "problem_atol": tol["atol"],
                "problem_rtol": tol["rtol"],
                "source": {k: tol["source"][k] for k in ("atol", "rtol")}}

    def bound_text(self, bound: dict) -> str:
        """'atol 1e-05 + rtol 1e-05 x |ref| (a tenth of the evaluator's float32
        tolerance, atol 0.0001 rtol 0.0001)': what the failure line states."""
        if bound["atol"] == 0 and bound["rtol"] == 0:
            return "exact equality is required under the same seeding" + (
                " (decompose_tol_fraction is 0)" if self.fraction == 0 else "")
        whose = {"flag": "the tolerance the run was given (--atol/--rtol)",
                 "problem": "the problem's MKEVOLVE_TOLERANCE"}.get(
            bound["source"].get("atol"), f"the evaluator's {bound['dtype']} tolerance")
        share = "a tenth of" if self.fraction == 0.1 else f"{self.fraction:g} x"
        return (f"the decomposition bound atol {bound['atol']:.3g} + rtol {bound['rtol']:.3g} x "
                f"|ref| ({share} {whose}, atol {bound['problem_atol']:g} rtol "
                f"{bound['problem_rtol']:g})")

    def record_error(self, path, bound, abs_err, rel_err) -> None:
        """Keeps the largest errors of one output over the trials (result "tolerance")."""
        entry = self.tolerances.get(path)
        if entry is None:
            entry = {"output": f"output{path}", "dtype": bound["dtype"], "atol": bound["atol"],
                     "rtol": bound["rtol"], "problem_atol": bound["problem_atol"],
                     "problem_rtol": bound["problem_rtol"], "source": bound["source"],
                     "max_abs_err": 0.0, "max_rel_err": 0.0}
            self.tolerances[path] = entry
        entry["max_abs_err"] = max(entry["max_abs_err"], abs_err)
        entry["max_rel_err"] = max(entry["max_rel_err"], rel_err)

    def compare(self, expected, got, trial):
        torch = _torch()
        label = self.decomposed_label
        if self.max_abs_err is None:
            self.max_abs_err = 0.0
        exp_list, got_list = list(_flat_outputs(expected)), list(_flat_outputs(got))
        if len(exp_list) != len(got_list):
            self.incomparable = True
            return (f"{label}: ModelNew returns {len(got_list)} output value(s), Model returns "
                    f"{len(exp_list)}")
        for i, ((path, e), (_, g)) in enumerate(zip(exp_list, got_list)):
            which = f"output #{i}" if len(exp_list) > 1 else "the output"
            if isinstance(e, torch.Tensor) != isinstance(g, torch.Tensor):
                self.incomparable = True
                return f"{label}: {which} of ModelNew is a {type(g).__name__}, Model's is a " \
                       f"{type(e).__name__}"
            if not isinstance(e, torch.Tensor):
                if e != g:
                    return f"{label}: {which} of ModelNew is {g!r}, Model's is {e!r}"
                continue
            if tuple(e.shape) != tuple(g.shape):
                self.incomparable = True
                return (f"{label}: {which} of ModelNew has shape {tuple(g.shape)}, Model's has "
                        f"{tuple(e.shape)}")
            if e.dtype != g.dtype:
                self.incomparable = True
                return (f"{label}: {which} of ModelNew has dtype {g.dtype}, Model's has "
                        f"{e.dtype}")
            g = g.to(e.device)
            bound = self.bound_for(e.dtype)
            if e.numel() == 0 or torch.equal(e, g):
                self.record_error(path, bound, 0.0, 0.0)
                continue
            ef = e.double() if (e.is_floating_point() or not e.is_complex()) else e
            gf = g.double() if (g.is_floating_point() or not g.is_complex()) else g
            both_nan = torch.isnan(ef) & torch.isnan(gf) if e.is_floating_point() else None
            diff = (ef - gf).abs()
            if both_nan is not None:
                diff = torch.where(both_nan, torch.zeros_like(diff), diff)
            diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
            ref_abs = ef.abs()
            bad = diff > (bound["atol"] + bound["rtol"] * ref_abs)
            if both_nan is not None:
                bad = bad & ~both_nan
            worst = float(diff.max())
            worst = worst if math.isfinite(worst) else _NAN_MISMATCH_ERR
            # Relative to the reference where it is not zero (NaN/inf pairs count as 0 above).
            nonzero = ref_abs > 0
            rel = float((diff[nonzero] / ref_abs[nonzero]).max()) if bool(nonzero.any()) else 0.0
            rel = rel if math.isfinite(rel) else _NAN_MISMATCH_ERR
            self.max_abs_err = max(self.max_abs_err, worst)
            self.record_error(path, bound, worst, rel)
            if bool(bad.any()):
                count = int(bad.sum())
                index = tuple(int(v) for v in torch.nonzero(bad)[0].tolist())
                first = (f"first at index {index}: ModelNew {float(gf[index]):.6g}, Model "
                         f"{float(ef[index]):.6g}")
                if bound["atol"] == 0 and bound["rtol"] == 0:
                    return (f"{label}: {which} of ModelNew differs from Model's on trial {trial} "
                            f"at {count} of {e.numel()} elements (max abs err {worst:.3g}, {first}; "
                            f"{self.bound_text(bound)})")
                return (f"{label}: {which} of ModelNew differs from Model's on trial {trial} at "
                        f"{count} of {e.numel()} elements: max abs err {worst:.2e} exceeds "
                        f"{self.bound_text(bound)}; {first}; re-express operations only in ways "
                        "exact up to rounding, never approximate them")
        return None

    def compare_parameters(self, ref, new):
        """One line saying which original parameter has no identical twin in ModelNew."""
        label = self.decomposed_label
        ref_params = list(ref.named_parameters())
        new_params = [p for _, p in new.named_parameters()]
        used = set()
        for index, (name, p) in enumerate(ref_params):
            same_shape = [j for j, q in enumerate(new_params)
                          if j not in used and q.shape == p.shape and q.dtype == p.dtype]
            match = next((j for j in same_shape if _equal(new_params[j], p)), None)
            if match is not None:
                used.add(match)
                continue
            shape = list(p.shape)
            if same_shape:
                return (f"{label}: parameter #{index} of Model (`{name}`, shape {shape}) differs "
                        "from every ModelNew parameter of that shape: create the subproblem "
                        "Models in ModelNew.__init__ in the same order as Model creates its nn "
                        "layers, so the random initialisation consumes the RNG identically")
            return (f"{label}: parameter #{index} of Model (`{name}`, shape {shape}) has no "
                    "parameter of that shape in ModelNew: the subproblems do not build the same "
                    "layers as the original")
        extra = len(new_params) - len(used)
        if extra > 0:
            return (f"{label}: ModelNew has {extra} parameter(s) that Model does not have; build "
                    "exactly the original's layers, in the original's order")
        return None

    # -- 4 and 5. coverage of inputs and init args ---------------------------

    def coverage(self):
        for sp in self.subproblems.values():
            if sp.cls is None:
                continue
            instances = [(inst, sig) for cls, inst, sig in self.recorder.inits if cls is sp.cls]
            if not instances or sp.declared_incomplete():
                continue
            uses = []  # distinct (init_sig, input_sig-or-None)
            for inst, init_sig in instances:
                calls = self.recorder.calls.get(id(inst), [])
                for call in (calls or [None]):
                    if (init_sig, call) not in uses:
                        uses.append((init_sig, call))
            distinct_instances = {(sig, tuple(dict.fromkeys(self.recorder.calls.get(id(i), []))))
                                  for i, sig in instances}
            if not sp.uses_configs and len(distinct_instances) > 1:
                inits = ", ".join(dict.fromkeys(_init_text(s) for _, s in instances))
                self.fail(f"{sp.label}: ModelNew builds Model {len(instances)} times with "
                          f"different arguments or input shapes (init args {inits}); define "
                          "get_input_configs() returning one {'get_init_inputs': ..., "
                          "'get_inputs': ...} dict per instantiation")
                sp.covered = False
                continue
            declared = [d for d in sp.declared if d is not None]
            for init_sig, call in uses:
                with_init = [d for d in declared if d[0] == init_sig]
                if not with_init:
                    sp.covered = False
                    if sp.uses_configs:
                        have = ", ".join(_init_text(d[0]) for d in declared)
                        self.fail(f"{sp.label}: ModelNew builds Model{_init_text(init_sig)} but no "
                                  "get_input_configs() entry has get_init_inputs() returning "
                                  f"those args (entries return {have})")
                    else:
                        self.fail(f"{sp.label}: ModelNew builds Model{_init_text(init_sig)} but "
                                  f"get_init_inputs() returns {_init_text(declared[0][0])}")
                    continue
                if call is None or any(d[1] == call for d in with_init):
                    continue
                sp.covered = False
                if not sp.uses_configs:
                    self.fail(f"{sp.label}: ModelNew calls it with inputs {_args_text(call)} but "
                              f"get_inputs() returns {_args_text(with_init[0][1])}")
                elif any(d[1] == call for d in declared):
                    self.fail(f"{sp.label}: the instance built with {_init_text(init_sig)} is "
                              f"called with inputs {_args_text(call)}, but get_input_configs() "
                              "pairs those inputs with different init args; each entry must pair "
                              "an instance's init args with the inputs that instance receives")
                else:
                    have = " or ".join(_args_text(d[1]) for d in with_init)
                    self.fail(f"{sp.label}: ModelNew calls the instance built with "
                              f"{_init_text(init_sig)} with inputs {_args_text(call)} but the "
                              f"get_input_configs() entry with those init args has get_inputs() "
                              f"returning {have}")

    # -- 7. trivial and unused subproblems -----------------------------------

    def trivial_and_unused(self, ran_model_new: bool):
        used = {cls for cls, _, _ in self.recorder.inits}
        for sp in self.subproblems.values():
            if sp.cls is None:
                continue
            trivial = sp.trivial_runtime or \
                (sp.tree is not None and _trivial_forward(sp.tree))
            if trivial:
                sp.covered = False
                self.fail(f"{sp.label}: Model.forward does no computation (it only returns, "
                          "views, reshapes or copies its input); merge it into the neighbouring "
                          "subproblem or do the reshape in the top level")
            if ran_model_new and self.built_model_new and sp.cls not in used:
                sp.covered = False
                outer = next((self.by_class(o) for c, o in self.recorder.nested if c is sp.cls),
                             None)
                if outer is not None:
                    self.fail(f"{sp.label}: its Model is built only inside {outer.label}, not by "
                              "ModelNew; subproblems must not use each other: build it in "
                              f"ModelNew.__init__ or inline its code into {outer.label}")
                else:
                    self.fail(f"{sp.label}: ModelNew never builds this Model; use it or delete "
                              "the file")


def _flat_outputs(obj, path: str = ""):
    """(path, value) of every leaf of an output, paths as the evaluator names
    them ("" for a lone tensor, "[0]", "[1]['k']")."""
    torch = _torch()
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, (list, tuple)):
        for i, o in enumerate(obj):
            yield from _flat_outputs(o, f"{path}[{i}]")
    elif isinstance(obj, dict):
        for k in sorted(obj, key=str):
            yield from _flat_outputs(obj[k], f"{path}[{k!r}]")
    else:
        yield path, obj


def _equal(a, b) -> bool:
    torch = _torch()
    if a.device != b.device:
        b = b.to(a.device)
    if a.is_floating_point():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool(torch.equal(a, b))


# ---------------------------------------------------------------------------
# Public API


def _verify(problem, decomposed, subproblems_dir, options):
    """Returns (result, bad_input)."""
    verifier = _Verifier(problem, decomposed, subproblems_dir, options)
    try:
        return verifier.run(), False
    except _BadInput as exc:
        verifier.fail(str(exc))
        result = verifier.result()
        result["ok"] = False
        return result, True


def tolerance_option_error(options: dict) -> str | None:
    """What is wrong with the tolerance options (atol, rtol: None or a
    non-negative number; decompose_tol_fraction: a non-negative number), or None."""
    for key in ("atol", "rtol", "decompose_tol_fraction"):
        value = options.get(key)
        if value is None and key != "decompose_tol_fraction":
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value) or value < 0:
            return f"options.{key} must be a non-negative number, not {value!r}"
    return None


def verify_decomposition(problem: str, decomposed: str, subproblems_dir: str,
                         options: dict) -> dict:
    """Checks an LLMDecompose output against the original problem.

    options: seed (42), trials (2), atol/rtol (None: the problem's own tolerance
    or the dtype's, as the evaluator judges kernels), decompose_tol_fraction (0.1:
    the share of that tolerance a decomposition may use; 0: exact equality),
    timeout_s, device.

    Returns {"ok", "failures" (one actionable line each), "subproblems"
    {name: {"instances", "init_args_seen", "input_shapes_seen", "input_layouts_seen",
    "covered"}}, "max_abs_err" (-1.0 when the outputs were never compared or differ in
    structure, shape or dtype; 3.4e38 when one side has NaN/inf where the other has not),
    "tolerance" {"fraction", "outputs": [{"output", "dtype", "atol", "rtol" (the bound),
    "problem_atol", "problem_rtol" (the tolerance it is a fraction of), "source",
    "max_abs_err", "max_rel_err"}]}}.
    """
    return _verify(problem, decomposed, subproblems_dir, options)[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mkevolve_worker.decompose_check",
        description="Verify an LLMDecompose output against the original KernelBench problem.")
    parser.add_argument("--problem", required=True, help="original problem file")
    parser.add_argument("--decomposed", required=True,
                        help=f"{DECOMPOSED_NAME} (or the directory holding it)")
    parser.add_argument("--subproblems", default=None,
                        help=f"subproblems directory (default: {DEFAULT_PACKAGE}/ beside it)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--atol", type=float, default=None,
                        help="the problem's tolerance (default: its MKEVOLVE_TOLERANCE, or the "
                        "output dtype's, as the evaluator judges kernels)")
    parser.add_argument("--rtol", type=float, default=None, help="as --atol")
    parser.add_argument("--tol-fraction", type=float, default=DEFAULT_TOL_FRACTION,
                        help="the share of that tolerance the decomposition may use "
                        f"(default {DEFAULT_TOL_FRACTION}; 0: exact equality)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    options = {"seed": args.seed, "trials": args.trials, "atol": args.atol, "rtol": args.rtol,
               "decompose_tol_fraction": args.tol_fraction}
    if args.device:
        options["device"] = args.device
    if args.timeout:
        options["timeout_s"] = args.timeout
    result, bad_input = _verify(args.problem, args.decomposed, args.subproblems, options)
    if args.json:
        print(json.dumps(result, indent=2, allow_nan=False))
    else:
        for line in result["failures"]:
            print(line)
        if result["ok"]:
            print(f"ok: {len(result['subproblems'])} subproblem(s) verified, ModelNew matches "
                  f"Model (max abs err {result['max_abs_err']:.3g})")
    if bad_input:
        return 2
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
