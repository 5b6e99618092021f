"""Static (AST) cheat detection for Triton candidates.

Pure standard library: this module never imports torch or triton, so
`mkevolve check` works on machines without either.

A candidate is one file (or a package: a top-level file plus the sibling files
it imports). The checker parses every file, infers a rough type for each
expression (tensor, scalar, torch symbol, candidate class or function, ...),
builds a call graph, and reports violations. Each violation is a dict
{"file", "line", "rule", "message"}. Rule ids are stable (see RULES).

How the data path is decided:
  * `ModelNew.forward` (every file's `ModelNew`) is the root of the data path.
    Everything it calls or refers to, and every function whose reference
    escapes (stored, passed as a callback, registered), is on the data path.
  * Module-level code, class bodies, `__init__` and functions only *called*
    from those run once at construction: torch calls there are allowed
    (weight preparation), but stashing a reference to a torch compute function
    is not.
  * Bodies of `@triton.jit` functions are Triton, not torch, and are skipped.
  * Code that nothing reaches (the reference `Model` an LLM copied into the
    file, `get_inputs`, `if __name__ == "__main__":` blocks) is not data path;
    the non-compute rules still apply to it, except `__main__` blocks, which
    never run on import.

Tensor-ness is a heuristic: forward parameters, parameters and buffers,
torch allocations and anything computed from tensors are tensors; shapes,
strides, sizes, `numel()`, `len()`, literals and `triton.cdiv` results are
scalars. Arithmetic and comparisons are flagged only with a tensor operand;
`@` is flagged unless both operands are known non-tensors.

Known limits (the runtime profile layer covers what this one cannot see):
  * Values whose type is unknown (results of unknown libraries, parameters of
    lambdas handed to external code) are not treated as tensors, so plain
    arithmetic on them is not flagged; `@` and unmistakable compute method
    names (matmul, softmax, conv2d, ...) still are.
  * Compute done in Python on host lists (`x.tolist()` ... `torch.tensor(...)`)
    is not flagged here; the runtime layer sees the host-to-device copy.
  * A kernel launch that is reachable but never executed (dead branch) counts.
    So does PyTorch compute in a branch that never runs; `eval` then runs
    the candidate and counts it only if its line ran (coverage.py).
  * Returning a tensor kept from an earlier call is flagged; keeping state on
    self (running statistics, RNN hidden state) is not.
  * `getattr(self, <computed name>)` is allowed; it is treated as reaching
    every method of the class.
  * torch.cat/stack/repeat and RNG fills (uniform_, bernoulli) are compute,
    except torch.cat/stack in a composed package's decomposed_solution.py,
    which may pack its subproblems' outputs (toplevel.py: the decomposition
    verifier's rule);
    copies (`contiguous`, `clone`, `copy_`, `.to`) and fills (`zero_`, `fill_`)
    are allowed.
"""
from __future__ import annotations

import ast
import os
import re
import sys

from . import toplevel

__all__ = ["RULES", "check_file", "check_source", "main"]

RULES = {
    "syntax-error": "the file does not parse",
    "missing-modelnew": "no ModelNew class",
    "no-triton-launch": "ModelNew.forward never reaches a launch of a @triton.jit kernel defined in the candidate",
    "torch-compute": "PyTorch (or numpy) computes on the data path instead of Triton",
    "aten": "torch.ops / torch._C / other torch internals",
    "torch-compile": "torch.compile, TorchScript, dynamo, inductor, fx or export",
    "tf32": "re-enables TF32 or reduced-precision matmuls in torch",
    "side-stream": "CUDA streams or CUDA graphs",
    "patching": "monkeypatching, hooks, tracing, exit handlers, signals or environment changes",
    "frame-inspection": "walks interpreter frames or the garbage collector",
    "threads": "threads",
    "process": "child processes, fork, exec or kill",
    "native-code": "ctypes, cffi or other native-code loading",
    "network": "network access",
    "exit": "exits the interpreter",
    "dynamic-code": "exec/eval/compile/__import__, dynamic getattr or imports, pickle",
    "file-io": "reads or writes files",
    "reference-import": "imports the reference Model, the problem module or __main__",
    "output-cache": "keeps outputs or inputs across calls",
    "foreign-library": "uses another library's kernels instead of its own Triton",
    "harness-import": "imports the evaluation harness's own modules (mkevolve_worker)",
    "privileges": "changes its process's identity, namespaces, privileges or resource limits "
                  "(setuid, setns, unshare, chroot, prctl, setrlimit)",
}

# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------

TORCH_ALLOC = {
    "empty", "empty_like", "empty_strided", "empty_permuted", "zeros", "zeros_like",
    "ones", "ones_like", "full", "full_like", "arange", "range", "linspace", "logspace",
    "eye", "tensor", "as_tensor", "asarray", "from_numpy", "scalar_tensor",
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm",
}
TORCH_VIEW = {
    "reshape", "view_as_real", "view_as_complex", "transpose", "permute", "t", "flatten",
    "unflatten", "squeeze", "unsqueeze", "narrow", "select", "chunk", "split",
    "tensor_split", "unbind", "movedim", "moveaxis", "swapaxes", "swapdims",
    "broadcast_to", "as_strided", "atleast_1d", "atleast_2d", "atleast_3d",
    "detach", "clone",
}
TORCH_META = {
    "is_tensor", "is_floating_point", "is_complex", "is_storage", "numel", "typename",
    "finfo", "iinfo", "device", "dtype", "Size", "Tensor", "Generator", "get_default_dtype",
    "set_default_dtype", "get_default_device", "set_default_device", "broadcast_shapes",
    "promote_types", "result_type", "can_cast", "no_grad", "enable_grad", "inference_mode",
    "set_grad_enabled", "is_grad_enabled", "is_inference_mode_enabled", "autocast",
    "manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state",
    "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "memory_format", "contiguous_format", "channels_last", "channels_last_3d",
    "preserve_format", "strided", "layout", "version", "__version__", "get_num_threads",
    "is_autocast_enabled", "float32", "float", "float16", "half", "bfloat16", "float64",
    "double", "int8", "int16", "short", "int32", "int", "int64", "long", "uint8", "bool",
    "complex64", "cfloat", "complex128", "cdouble", "float8_e4m3fn", "float8_e5m2",
    "float8_e4m3fnuz", "float8_e5m2fnuz", "uint16", "uint32", "uint64", "qint8", "quint8",
    "FloatTensor", "HalfTensor", "LongTensor", "IntTensor", "BoolTensor", "DoubleTensor",
    "ByteTensor", "BFloat16Tensor", "cuda", "backends", "types", "random",
}
TORCH_COMPUTE_NAMESPACES = {
    "linalg", "fft", "special", "sparse", "nested", "masked", "distributions", "signal",
    "quantization", "ao", "testing", "func", "vmap", "utils",
}
TORCH_CUDA_STREAM = {
    "Stream", "stream", "set_stream", "StreamContext", "ExternalStream", "streams",
    "graph", "graphs", "CUDAGraph", "make_graphed_callables", "graph_pool_handle",
}
NN_CONTAINERS = {"Module", "ModuleList", "ModuleDict", "Sequential", "ParameterList",
                 "ParameterDict"}
NN_PARAM = {"Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer"}

# Tensor attributes that are not tensors, and ones that are views.
TENSOR_SCALAR_ATTRS = {
    "shape", "dtype", "device", "ndim", "is_cuda", "is_cpu", "requires_grad", "layout",
    "is_leaf", "names", "itemsize", "nbytes", "is_sparse", "is_quantized", "is_meta",
    "is_mps", "grad_fn", "is_nested",
}
TENSOR_VIEW_ATTRS = {"T", "mT", "H", "mH", "data", "grad", "real", "imag"}
# Tensor methods that only allocate, view, move, copy or describe.
TENSOR_METHOD_VIEW = {
    "contiguous", "view", "view_as", "reshape", "reshape_as", "permute", "transpose",
    "transpose_", "t", "t_", "expand", "expand_as", "unsqueeze", "unsqueeze_", "squeeze",
    "squeeze_", "flatten", "unflatten", "narrow", "select", "chunk", "split",
    "tensor_split", "unbind", "movedim", "moveaxis", "swapaxes", "swapdims", "as_strided",
    "unfold", "diagonal", "to", "cuda", "cpu", "float", "half", "double", "bfloat16",
    "int", "long", "short", "bool", "byte", "char", "type", "type_as", "detach", "detach_",
    "clone", "copy_", "fill_", "zero_", "requires_grad_", "pin_memory", "share_memory_",
    "numpy", "__getitem__", "__setitem__", "record_stream", "retain_grad",
}
TENSOR_METHOD_ALLOC = {"new_empty", "new_zeros", "new_ones", "new_full", "new_tensor",
                       "new_empty_strided"}
TENSOR_METHOD_META = {
    "size", "stride", "numel", "nelement", "dim", "ndimension", "element_size", "data_ptr",
    "storage_offset", "is_contiguous", "get_device", "is_floating_point", "is_complex",
    "is_pinned", "is_set_to", "item", "tolist", "untyped_storage", "storage",
    "is_shared", "__len__", "dim_order",
}
# Python container / string methods: never flagged, whatever we think the receiver is.
CONTAINER_METHODS = {
    "append", "extend", "insert", "pop", "remove", "clear", "index", "count", "keys",
    "values", "items", "get", "update", "setdefault", "add", "discard", "copy", "format",
    "join", "startswith", "endswith", "strip", "lower", "upper", "replace", "encode",
    "decode", "popitem", "sort", "reverse", "union", "intersection", "difference",
}
CONTAINER_MUTATORS = {"append", "extend", "insert", "update", "setdefault", "add",
                      "__setitem__", "put", "put_nowait", "appendleft"}
CONTAINER_READERS = {"get", "pop", "setdefault", "popitem", "__getitem__", "values", "items"}
# Names that are compute whatever the receiver seems to be.
DISTINCTIVE_COMPUTE = {
    "matmul", "mm", "bmm", "addmm", "addmv", "addbmm", "baddbmm", "mv", "einsum",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "softmax", "log_softmax", "linear", "layer_norm", "group_norm",
    "batch_norm", "instance_norm", "scaled_dot_product_attention", "tensordot", "kron",
    "__matmul__", "__rmatmul__", "__imatmul__",
}
ARITH_DUNDERS = {
    "__matmul__", "__rmatmul__", "__imatmul__", "__mul__", "__rmul__", "__imul__",
    "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "__truediv__",
    "__rtruediv__", "__itruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
    "__pow__", "__rpow__", "__neg__", "__abs__", "__and__", "__or__", "__xor__",
    "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__", "__invert__",
}
FRAME_ATTRS = {"f_back", "f_globals", "f_locals", "f_code", "f_builtins", "tb_frame",
               "gi_frame", "cr_frame", "ag_frame"}
DYNAMIC_ATTRS = {"__globals__", "__code__", "__closure__", "__subclasses__", "__bases__",
                 "__mro__", "__builtins__", "__getattribute__", "__reduce__",
                 "__reduce_ex__", "__import__", "__loader__", "__spec__"}
LAYER_OK_METHODS = {
    "parameters", "named_parameters", "buffers", "named_buffers", "children",
    "named_children", "modules", "named_modules", "to", "cuda", "cpu", "float", "half",
    "double", "bfloat16", "train", "eval", "requires_grad_", "zero_grad", "state_dict",
    "register_buffer", "register_parameter", "reset_parameters", "extra_repr", "type",
    "get_parameter", "get_buffer", "get_submodule", "add_module", "apply",
}
MODULE_OK_METHODS = LAYER_OK_METHODS | {"__init__", "__setattr__", "__getattr__",
                                        "register_module", "__repr__", "__new__"}
HOOK_METHODS = {"register_forward_hook", "register_forward_pre_hook",
                "register_full_backward_hook", "register_backward_hook",
                "register_full_backward_pre_hook", "register_module_forward_hook",
                "register_module_forward_pre_hook", "register_state_dict_pre_hook",
                "register_load_state_dict_post_hook"}
FILE_METHODS = {"read_text", "read_bytes", "write_text", "write_bytes", "tofile"}
BUILTIN_NAMES = set(dir(__import__("builtins")))
SCALAR_BUILTINS = {"len", "int", "float", "bool", "str", "isinstance", "issubclass",
                   "hasattr", "id", "hash", "callable", "repr", "ord", "chr", "print",
                   "format", "hex", "bin", "oct", "all", "any"}
TENSORY_BUILTINS = {"abs", "sum", "min", "max", "pow", "round", "divmod"}
SCALAR_ANNOTATIONS = {"int", "float", "bool", "str", "tuple", "list", "dict", "Tuple",
                      "List", "Dict", "Sequence", "Optional", "Union"}

# Modules that are a violation as soon as they are imported: (rule, why).
IMPORT_RULES = [
    ("threading", "threads", "starts threads"),
    ("_thread", "threads", "starts threads"),
    ("concurrent.futures.process", "process", "starts processes"),
    ("concurrent", "threads", "runs work on executor threads"),
    ("asyncio", "threads", "runs an event loop"),
    ("multiprocessing", "process", "starts processes"),
    ("torch.multiprocessing", "process", "starts processes"),
    ("torch.distributed", "process", "uses distributed process groups"),
    ("subprocess", "process", "starts processes"),
    ("pty", "process", "starts processes"),
    ("pexpect", "process", "starts processes"),
    ("ctypes", "native-code", "loads native code"),
    ("_ctypes", "native-code", "loads native code"),
    ("cffi", "native-code", "loads native code"),
    ("pycuda", "native-code", "loads native code"),
    ("cuda", "native-code", "calls the CUDA driver directly"),
    ("cupy", "native-code", "runs CuPy kernels"),
    ("numba", "native-code", "compiles native kernels with numba"),
    ("torch.utils.cpp_extension", "native-code", "compiles C++/CUDA extensions"),
    ("torch.cuda.jiterator", "native-code", "compiles CUDA kernels with jiterator"),
    ("mmap", "native-code", "maps raw memory"),
    ("socket", "network", "opens sockets"),
    ("ssl", "network", "opens network connections"),
    ("urllib", "network", "opens network connections"),
    ("http", "network", "opens network connections"),
    ("requests", "network", "opens network connections"),
    ("httpx", "network", "opens network connections"),
    ("aiohttp", "network", "opens network connections"),
    ("ftplib", "network", "opens network connections"),
    ("smtplib", "network", "opens network connections"),
    ("xmlrpc", "network", "opens network connections"),
    ("websocket", "network", "opens network connections"),
    ("websockets", "network", "opens network connections"),
    ("paramiko", "network", "opens network connections"),
    ("pickle", "dynamic-code", "unpickling runs arbitrary code and can replay outputs"),
    ("_pickle", "dynamic-code", "unpickling runs arbitrary code and can replay outputs"),
    ("cPickle", "dynamic-code", "unpickling runs arbitrary code and can replay outputs"),
    ("marshal", "dynamic-code", "loads code objects"),
    ("dill", "dynamic-code", "unpickling runs arbitrary code and can replay outputs"),
    ("cloudpickle", "dynamic-code", "unpickling runs arbitrary code and can replay outputs"),
    ("joblib", "dynamic-code", "loads pickled data and runs workers"),
    ("shelve", "dynamic-code", "loads pickled data"),
    ("runpy", "dynamic-code", "runs other modules"),
    ("code", "dynamic-code", "runs dynamic code"),
    ("codeop", "dynamic-code", "compiles dynamic code"),
    ("importlib.util", "dynamic-code", "loads modules from files"),
    ("importlib.machinery", "dynamic-code", "loads modules from files"),
    ("unittest.mock", "patching", "monkeypatches objects"),
    ("mock", "patching", "monkeypatches objects"),
    ("atexit", "patching", "registers exit handlers"),
    ("signal", "patching", "installs signal handlers"),
    ("faulthandler", "patching", "installs fault handlers"),
    ("shutil", "file-io", "touches files"),
    ("tempfile", "file-io", "creates files"),
    ("glob", "file-io", "lists files"),
    ("h5py", "file-io", "reads files"),
    ("safetensors", "file-io", "reads tensors from files"),
    ("zipfile", "file-io", "reads archives"),
    ("tarfile", "file-io", "reads archives"),
    ("triton.ops", "foreign-library", "uses Triton's library kernels, not its own"),
    ("triton_kernels", "foreign-library", "uses a kernel library, not its own Triton"),
    ("flash_attn", "foreign-library", "uses FlashAttention's kernels"),
    ("xformers", "foreign-library", "uses xformers' kernels"),
    ("apex", "foreign-library", "uses apex's kernels"),
    ("transformer_engine", "foreign-library", "uses Transformer Engine's kernels"),
    ("liger_kernel", "foreign-library", "uses Liger's kernels"),
    ("cutlass", "foreign-library", "uses CUTLASS"),
    ("tilelang", "foreign-library", "uses TileLang kernels"),
    ("jax", "foreign-library", "computes with JAX"),
    ("tensorflow", "foreign-library", "computes with TensorFlow"),
    ("scipy", "foreign-library", "computes with SciPy"),
    ("sklearn", "foreign-library", "computes with scikit-learn"),
    ("torchvision.ops", "foreign-library", "uses torchvision's operators"),
    ("kornia", "foreign-library", "computes with kornia"),
    ("einops", None, ""),  # handled per function below
    # The harness itself (its file, process and namespace helpers): a kernel
    # has no business with it. Checked for local modules too: a file of the
    # candidate's named mkevolve_worker would import the harness at run
    # time, which the server has already imported.
    ("mkevolve_worker", "harness-import", "imports the evaluation harness's own modules"),
    ("prctl", "privileges", "calls prctl"),
    ("pyprctl", "privileges", "calls prctl"),
    ("python_prctl", "privileges", "calls prctl"),
    ("seccomp", "privileges", "changes the process's seccomp filter"),
    ("pyseccomp", "privileges", "changes the process's seccomp filter"),
    ("pyroute2", "privileges", "controls network namespaces"),
    ("nsenter", "privileges", "enters namespaces"),
    ("_posixsubprocess", "process", "starts processes"),
    ("pkgutil", "dynamic-code", "loads modules by name"),
    ("imp", "dynamic-code", "loads modules from files"),
    ("zipimport", "dynamic-code", "loads modules from archives"),
]
HARNESS_PACKAGE = "mkevolve_worker"
# os (and posix, which os wraps) functions that change who the process is,
# which namespaces it is in or what it may do.
OS_PRIVILEGES = {"setns", "unshare", "chroot", "setuid", "seteuid", "setreuid", "setresuid", "setgid",
                 "setegid", "setregid", "setresgid", "setgroups", "initgroups", "pidfd_open"}
REFERENCE_NAMES = {"Model", "get_inputs", "get_init_inputs", "get_input_configs"}
REFERENCE_MODULE_RE = re.compile(
    r"^(reference|references|ref|problem|problems|kernelbench|original|orig|baseline|"
    r"level[0-9]+|[0-9]+_[A-Za-z0-9_]*)$", re.IGNORECASE)

INIT_METHODS = ("__init__", "__new__", "__init_subclass__", "__post_init__", "__set_name__")
MAX_FILES = 64  # a candidate package is a handful of files

TENSORISH = frozenset({"T", "A", "W", "P"})
S = frozenset({"S"})
U = frozenset({"U"})
EMPTY = frozenset()


def _seq(elem, depth=0):
    """A container (tuple, list, dict, ModuleList) holding values of type elem."""
    if depth >= 2:
        return frozenset({("SEQ", U)})
    capped = set()
    for a in _norm(elem):
        if isinstance(a, tuple) and a[0] == "SEQ":
            inner = _seq(a[1], depth + 1)
            capped |= inner
        else:
            capped.add(a)
    return frozenset({("SEQ", frozenset(capped))})


MAX_ATOMS = 48      # widening: a type with more alternatives than this is collapsed
MAX_QUAL_PARTS = 8  # torch.a.b.c... deeper than this is not a symbol we classify


def _norm(t):
    """Merges every container atom of t into one and bounds the number of
    alternatives, so types stop growing (loops like `e = e.__cause__`)."""
    if len(t) > MAX_ATOMS:
        quals = sorted((a for a in t if isinstance(a, tuple) and a[0] == "Q"),
                       key=lambda a: (len(a[1]), a[1]))[:MAX_ATOMS // 2]
        t = frozenset(a for a in t if not (isinstance(a, tuple) and a[0] == "Q")) \
            | frozenset(quals) | U
    seqs = [a for a in t if isinstance(a, tuple) and a[0] == "SEQ"]
    if len(seqs) < 2:
        return t
    merged = frozenset().union(*(a[1] for a in seqs))
    return frozenset(a for a in t if not (isinstance(a, tuple) and a[0] == "SEQ")) | _seq(merged)


def _elems(t):
    out = set()
    for a in t:
        if isinstance(a, tuple) and a[0] == "SEQ":
            out |= a[1]
        elif a == "S":
            out.add("S")
        elif a in TENSORISH:
            out.add(a)
        elif isinstance(a, tuple) and a[0] == "L":
            out.add(a)
        else:
            out.add("U")
    if "P" in t and (out & TENSORISH or any(_is_seq(a) for a in out)):
        out.add("P")
    return frozenset(out) or U


def _is_seq(a):
    return isinstance(a, tuple) and a[0] == "SEQ"


def _tensor(t):
    return bool(t & TENSORISH)


def _deep_atoms(t, depth=0):
    """All atoms of t including those inside containers."""
    out = set(t)
    if depth < 3:
        for a in t:
            if _is_seq(a):
                out |= _deep_atoms(a[1], depth + 1)
    return out


def _atoms(t, kind):
    return [a for a in t if isinstance(a, tuple) and a[0] == kind]


LAYER = ("L",)


def _const_str(node):
    """Folds string constants, concatenations, f-strings of constants, ''.join."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _const_str(node.left), _const_str(node.right)
        if a is not None and b is not None:
            return a + b
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                parts.append(v.value)
            elif isinstance(v, ast.FormattedValue):
                s = _const_str(v.value)
                if s is None:
                    return None
                parts.append(s)
            else:
                return None
        return "".join(parts)
    return None


def _dotted(node):
    """'a.b.c' for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _is_main_guard(test):
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return False
    sides = [test.left] + list(test.comparators)
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return bool(names and consts and isinstance(test.ops[0], ast.Eq))


# --------------------------------------------------------------------------
# Program model
# --------------------------------------------------------------------------

class FuncInfo:
    def __init__(self, key, node, finfo, cls):
        self.key = key
        self.node = node
        self.file = finfo
        self.cls = cls
        self.name = node.name
        self.is_jit = False
        self.kind = "function"  # function | method | static | classmethod
        self.param_types = {}   # name -> joined call-site type
        self.ret = EMPTY
        self.has_return = False

    def __repr__(self):
        return f"<FuncInfo {self.key}>"


class ClassInfo:
    def __init__(self, key, node, finfo):
        self.key = key
        self.node = node
        self.file = finfo
        self.name = node.name
        self.methods = {}       # name -> FuncInfo
        self.bases = []         # ClassInfo
        self.torch_bases = []   # qualified names of torch bases
        self.attrs = {}         # self.<attr> -> type (joined)
        self.class_attrs = {}   # class-body names -> type
        self.writers = {}       # attr -> set of node keys that assign or mutate it
        self.autograd = False
        self.body_key = key + ".<body>"

    def mro(self, seen=None):
        seen = seen if seen is not None else set()
        if self.key in seen:
            return []
        seen.add(self.key)
        out = [self]
        for b in self.bases:
            out.extend(b.mro(seen))
        return out

    def find_method(self, name):
        for c in self.mro():
            if name in c.methods:
                return c.methods[name]
        return None

    def torch_base_quals(self):
        out = []
        for c in self.mro():
            out.extend(c.torch_bases)
        return out

    def is_torch_layer_subclass(self):
        for q in self.torch_base_quals():
            last = q.rsplit(".", 1)[-1]
            if q.startswith("torch.nn.") and last not in NN_CONTAINERS and last not in NN_PARAM:
                return True
        return False


class FileInfo:
    def __init__(self, path, display, source, tree):
        self.path = path
        self.display = display
        self.source = source
        self.tree = tree
        self.env = {}            # module-level names -> type
        self.functions = {}      # key -> FuncInfo (top-level and methods)
        self.classes = {}        # name -> ClassInfo (top-level)
        self.star_modules = []
        self.writers = {}        # global name -> set of node keys mutating it
        self.module_key = path + "::<module>"


# --------------------------------------------------------------------------
# The analysis
# --------------------------------------------------------------------------

class Project:
    def __init__(self, allow_pytorch):
        self.allow_pytorch = allow_pytorch
        self.files = {}          # path -> FileInfo
        self.order = []
        self.syntax_errors = []
        self.funcs = {}          # key -> FuncInfo
        self.classes = {}        # key -> ClassInfo
        self.calls = {}          # node key -> set of func keys (direct calls)
        self.refs = {}           # node key -> set of func keys (escaping references)
        self.launches = {}       # node key -> list of lines
        self.data_path = set()
        self.init_only = set()
        self.p_enabled = False
        self.reporting = False
        self.violations = []
        self.changed = False
        self.root_dir = None
        self.main_display = ""
        self.registered = set()   # ids of def/class nodes analysed on their own
        self.nested = {}          # id(def or lambda node) -> (node, defining scope, file)
        self.active_nested = set()

    # -- loading ----------------------------------------------------------

    def add_source(self, path, display, source):
        path = os.path.abspath(path)
        if path in self.files:
            return self.files[path]
        try:
            tree = ast.parse(source, filename=display)
        except SyntaxError as e:
            self.syntax_errors.append({
                "file": display, "line": int(e.lineno or 1), "rule": "syntax-error",
                "message": f"syntax error: {e.msg}"})
            self.files[path] = None
            return None
        except ValueError as e:  # null bytes
            self.syntax_errors.append({"file": display, "line": 1, "rule": "syntax-error",
                                       "message": f"cannot parse: {e}"})
            self.files[path] = None
            return None
        fi = FileInfo(path, display, source, tree)
        self.files[path] = fi
        self.order.append(fi)
        self._prepass(fi)
        return fi

    def load_path(self, path, display=None):
        ap = os.path.abspath(path)
        if ap in self.files:
            return self.files[ap]
        if display is None and not self._inside_root(ap):
            return None  # not a candidate file
        if len(self.files) >= MAX_FILES:
            return None
        try:
            with open(ap, "r", encoding="utf-8") as f:
                src = f.read()
        except (OSError, UnicodeDecodeError):
            return None
        if display is None:
            display = self._display_for(ap)
        return self.add_source(ap, display, src)

    def _inside_root(self, ap):
        root = self.root_dir
        return bool(root) and os.path.commonpath([root, ap]) == root

    def _display_for(self, ap):
        """Sibling files are named relative to the main file's name as given."""
        base = os.path.dirname(self.main_display)
        rel = os.path.relpath(ap, self.root_dir)
        return os.path.join(base, rel) if base else rel

    # -- prepass: imports, defs, classes ------------------------------------

    def _prepass(self, fi):
        # Imports first (anywhere at module level), so decorators resolve.
        for node in self._module_stmts(fi.tree.body):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self._bind_import(fi, node, fi.env, report=False)
        for node in self._module_stmts(fi.tree.body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                f = self._register_func(fi, node, None, node.name)
                self.registered.add(id(node))
                fi.env[node.name] = frozenset({("K" if f.is_jit else "F", f.key)})
            elif isinstance(node, ast.ClassDef):
                c = self._register_class(fi, node, node.name)
                self.registered.add(id(node))
                fi.classes[node.name] = c
                fi.env[node.name] = frozenset({("C", c.key)})
        # `kernel = triton.jit(fn)` at module level
        for node in fi.tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                fn = self._jit_wrapped(fi, node.value)
                if fn is not None:
                    fn.is_jit = True
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            fi.env[t.id] = frozenset({("K", fn.key)})
                    if fn.name in fi.env:
                        fi.env[fn.name] = frozenset({("K", fn.key)})
        for c in list(fi.classes.values()):
            self._resolve_bases(fi, c)

    def _module_stmts(self, body):
        for node in body:
            yield node
            if isinstance(node, ast.If) and not _is_main_guard(node.test):
                yield from self._module_stmts(node.body)
                yield from self._module_stmts(node.orelse)
            elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                yield from self._module_stmts(node.body)
                for h in node.handlers:
                    yield from self._module_stmts(h.body)
                yield from self._module_stmts(node.orelse)
                yield from self._module_stmts(node.finalbody)

    def _static_qual(self, fi, node):
        """Qualified name of a decorator-like expression from imports only."""
        if isinstance(node, ast.Call):
            node = node.func
        d = _dotted(node)
        if d is None:
            return None
        head, _, rest = d.partition(".")
        t = fi.env.get(head)
        if not t:
            return None
        for a in t:
            if isinstance(a, tuple) and a[0] == "Q":
                return a[1] + ("." + rest if rest else "")
        return None

    def _jit_decorated(self, fi, node):
        quals = [self._static_qual(fi, d) for d in node.decorator_list]
        return any(q in ("triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit",
                         "triton.runtime.jit.JITFunction") for q in quals if q)

    def _jit_wrapped(self, fi, call):
        """fn for `triton.jit(fn)` / `triton.autotune(...)(triton.jit(fn))`."""
        q = self._static_qual(fi, call.func)
        if q not in ("triton.jit", "triton.autotune", "triton.heuristics",
                     "triton.runtime.jit"):
            return None
        if not call.args:
            return None
        arg = call.args[0]
        if isinstance(arg, ast.Call):
            return self._jit_wrapped(fi, arg)
        if isinstance(arg, ast.Name):
            for f in fi.functions.values():
                if f.cls is None and f.name == arg.id:
                    return f
        return None

    def _register_func(self, fi, node, cls, qual):
        key = f"{fi.path}::{qual}"
        f = FuncInfo(key, node, fi, cls)
        f.is_jit = self._jit_decorated(fi, node)
        if cls is not None:
            f.kind = "method"
            for d in node.decorator_list:
                dn = _dotted(d)
                if dn == "staticmethod":
                    f.kind = "static"
                elif dn == "classmethod":
                    f.kind = "classmethod"
        fi.functions[key] = f
        self.funcs[key] = f
        return f

    def _register_class(self, fi, node, qual):
        key = f"{fi.path}::{qual}"
        c = ClassInfo(key, node, fi)
        self.classes[key] = c
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                c.methods[item.name] = self._register_func(fi, item, c, f"{qual}.{item.name}")
            elif isinstance(item, ast.ClassDef):
                inner = self._register_class(fi, item, f"{qual}.{item.name}")
                c.class_attrs[item.name] = frozenset({("C", inner.key)})
        return c

    def _resolve_bases(self, fi, c):
        for b in c.node.bases:
            t = self._static_type(fi, b)
            for a in t:
                if a[0] == "C" and a[1] in self.classes:
                    c.bases.append(self.classes[a[1]])
                    self._resolve_bases(self.classes[a[1]].file, self.classes[a[1]])
                elif a[0] == "Q":
                    c.torch_bases.append(a[1])
                    if a[1] in ("torch.autograd.Function", "torch.autograd.function.Function"):
                        c.autograd = True
        for cc in c.class_attrs.values():
            for a in cc:
                if a[0] == "C":
                    inner = self.classes[a[1]]
                    if not inner.bases and not inner.torch_bases:
                        self._resolve_bases(fi, inner)

    def _static_type(self, fi, node):
        d = _dotted(node)
        if d is None:
            return EMPTY
        parts = d.split(".")
        t = fi.env.get(parts[0], EMPTY)
        for p in parts[1:]:
            nt = set()
            for a in t:
                if a[0] == "Q":
                    nt.add(("Q", a[1] + "." + p))
                elif a[0] == "MOD":
                    nt |= self._module_member(a[1], p)
                elif a[0] == "PKG":
                    nt |= self._package_member(a[1], p)
            t = frozenset(nt)
        return t

    # -- imports ---------------------------------------------------------

    def _find_module_file(self, base_dir, modname):
        rel = modname.replace(".", os.sep)
        cand = [os.path.join(base_dir, rel + ".py"), os.path.join(base_dir, rel, "__init__.py")]
        for p in cand:
            if os.path.isfile(p):
                return p
        if os.path.isdir(os.path.join(base_dir, rel)):
            return ("PKG", os.path.join(base_dir, rel))
        return None

    def _import_base(self, fi, level):
        if fi.path.startswith("<"):
            return None
        d = os.path.dirname(fi.path)
        for _ in range(max(level - 1, 0)):
            d = os.path.dirname(d)
        return d

    def _module_member(self, path, name):
        other = self.load_path(path)
        if other is None:
            return U
        t = other.env.get(name)
        if t:
            return t
        # submodule of a package __init__
        if os.path.basename(path) == "__init__.py":
            return self._package_member(os.path.dirname(path), name)
        return U

    def _package_member(self, dirpath, name):
        r = self._find_module_file(dirpath, name)
        if r is None:
            return U
        if isinstance(r, tuple):
            return frozenset({r})
        return frozenset({("MOD", r)})

    def _resolve_candidate_module(self, fi, modname, level):
        """Path (or ('PKG', dir)) of a candidate file for an import, or None."""
        if fi.path.startswith("<"):
            return None
        bases = []
        if level:
            bases.append(self._import_base(fi, level))
        else:
            bases.append(os.path.dirname(fi.path))
            if self.root_dir and self.root_dir not in bases:
                bases.append(self.root_dir)
        for b in bases:
            if b is None:
                continue
            if not modname:
                return ("PKG", b)
            r = self._find_module_file(b, modname)
            if r is not None:
                return r
        return None

    def _bind_import(self, fi, node, env, report=True, walker=None):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name
                local = self._resolve_candidate_module(fi, name, 0)
                if report and walker:
                    walker.check_import_name(name, node, local is not None)
                if alias.asname:
                    if local is None:
                        env[alias.asname] = frozenset({("Q", name)})
                    elif isinstance(local, tuple):
                        env[alias.asname] = frozenset({local})
                    else:
                        env[alias.asname] = frozenset({("MOD", local)})
                else:
                    top = name.split(".")[0]
                    if local is None:
                        env[top] = frozenset({("Q", top)})
                    else:
                        r = self._resolve_candidate_module(fi, top, 0)
                        if isinstance(r, tuple):
                            env[top] = frozenset({r})
                        elif r:
                            env[top] = frozenset({("MOD", r)})
            return
        # ImportFrom
        mod = node.module or ""
        level = node.level or 0
        local = self._resolve_candidate_module(fi, mod, level)
        if report and walker:
            walker.check_import_from(mod, level, node, local is not None)
        for alias in node.names:
            if alias.name == "*":
                if local is None:
                    fi.star_modules.append(mod)
                elif not isinstance(local, tuple):
                    other = self.load_path(local)
                    if other is not None:
                        for k, v in other.env.items():
                            env.setdefault(k, v)
                continue
            bound = alias.asname or alias.name
            if local is None:
                env[bound] = frozenset({("Q", f"{mod}.{alias.name}" if mod else alias.name)})
            elif isinstance(local, tuple):
                env[bound] = self._package_member(local[1], alias.name)
            else:
                env[bound] = self._module_member(local, alias.name)

    # -- recording ---------------------------------------------------------

    def report(self, fi, line, rule, message):
        if self.reporting:
            self.violations.append({"file": fi.display, "line": int(line), "rule": rule,
                                    "message": message})

    def add_edge(self, src, dst, ref=False):
        table = self.refs if ref else self.calls
        s = table.setdefault(src, set())
        if dst not in s:
            s.add(dst)
            self.changed = True

    def join_param(self, f, name, t):
        old = f.param_types.get(name, EMPTY)
        new = _norm(old | t)
        if new != old:
            f.param_types[name] = new
            self.changed = True

    def join_ret(self, f, t):
        new = _norm(f.ret | t)
        if new != f.ret:
            f.ret = new
            self.changed = True

    def join_attr(self, c, attr, t, writer):
        old = c.attrs.get(attr, EMPTY)
        new = _norm(old | t)
        if new != old:
            c.attrs[attr] = new
            self.changed = True
        w = c.writers.setdefault(attr, set())
        if writer not in w:
            w.add(writer)
            self.changed = True

    def join_global(self, fi, name, t, writer):
        old = fi.env.get(name, EMPTY)
        new = _norm(old | t)
        if new != old:
            fi.env[name] = new
            self.changed = True
        w = fi.writers.setdefault(name, set())
        if writer not in w:
            w.add(writer)
            self.changed = True

    # -- driver ------------------------------------------------------------

    def modelnew_classes(self):
        out = []
        for fi in self.order:
            t = fi.env.get("ModelNew", EMPTY)
            for a in t:
                if a[0] == "C" and a[1] in self.classes:
                    out.append(self.classes[a[1]])
        return out

    def run(self):
        # Phase A: types and graph; Phase B: with persistent-read tracking.
        for phase, rounds in (("A", 6), ("B", 4)):
            self.p_enabled = phase == "B"
            for _ in range(rounds):
                self.changed = False
                self._walk_all()
                if not self.changed:
                    break
            self._compute_contexts()
        self.reporting = True
        self._walk_all()
        self._check_entry()

    def _walk_all(self):
        for fi in list(self.order):
            w = Walker(self, fi, None, None, fi.module_key, "I")
            w.walk_module()
            for c in self._all_classes(fi):
                w = Walker(self, fi, None, c, c.body_key, "I")
                w.walk_class_body()
            for f in list(fi.functions.values()):
                if f.is_jit:
                    continue
                ctx = self.context_of(f.key)
                Walker(self, fi, f, f.cls, f.key, ctx).walk_function()

    def _all_classes(self, fi):
        return [c for c in self.classes.values() if c.file is fi]

    def context_of(self, key):
        if key in self.data_path:
            return "D"
        if key in self.init_only:
            return "I"
        return "X"

    def _compute_contexts(self):
        init_entries = set()
        for fi in self.order:
            init_entries.add(fi.module_key)
        for c in self.classes.values():
            init_entries.add(c.body_key)
            for name in INIT_METHODS:
                if name in c.methods:
                    init_entries.add(c.methods[name].key)
        reach_init = set(init_entries)
        stack = list(init_entries)
        while stack:
            k = stack.pop()
            for d in self.calls.get(k, ()):
                if d not in reach_init:
                    reach_init.add(d)
                    stack.append(d)
        roots = set()
        for c in self.modelnew_classes():
            for name in ("forward", "__call__"):
                m = c.find_method(name)
                if m is not None:
                    roots.add(m.key)
        # Dunder methods run implicitly (attribute hooks, __call__, __del__,
        # operators), so no call edge leads to them.
        for c in self.classes.values():
            for name, m in c.methods.items():
                if name.startswith("__") and name.endswith("__") and name not in INIT_METHODS:
                    roots.add(m.key)
        # escaping references from anywhere reachable
        data = set(roots)
        changed = True
        while changed:
            changed = False
            live = reach_init | data
            for src in list(live):
                for d in self.refs.get(src, ()):
                    if d not in data:
                        data.add(d)
                        changed = True
            stack = list(data)
            while stack:
                k = stack.pop()
                for d in list(self.calls.get(k, ())) + list(self.refs.get(k, ())):
                    if d not in data:
                        data.add(d)
                        stack.append(d)
                        changed = True
        self.data_path = data
        self.init_only = reach_init - data

    def reachable_from(self, key):
        seen = {key}
        stack = [key]
        while stack:
            k = stack.pop()
            for d in list(self.calls.get(k, ())) + list(self.refs.get(k, ())):
                if d not in seen:
                    seen.add(d)
                    stack.append(d)
        return seen

    def _check_entry(self):
        if not self.order:
            return
        fi = self.order[0]
        t = fi.env.get("ModelNew")
        if not t:
            self.report(fi, 1, "missing-modelnew",
                        "no class named ModelNew (define it, or import it from a candidate file)")
            return
        classes = [self.classes[a[1]] for a in t if a[0] == "C" and a[1] in self.classes]
        line = self._modelnew_line(fi)
        if not classes:
            src = ", ".join(sorted(a[1] for a in t if a[0] == "Q")) or "an unresolved name"
            self.report(fi, line, "no-triton-launch",
                        f"ModelNew comes from {src}, which is not a candidate file, so no "
                        "Triton kernel launch can be seen")
            return
        for c in classes:
            fwd = c.find_method("forward")
            if fwd is None:
                self.report(c.file, c.node.lineno, "no-triton-launch",
                            f"class {c.name} has no forward method")
                continue
            reach = self.reachable_from(fwd.key)
            # Under the PyTorch policy (Swap, and a reference checked as its own
            # candidate) a PyTorch forward may pass, marked uses_pytorch: it
            # needs no Triton launch (it still needs a forward, from a candidate file).
            if not self.allow_pytorch and not any(self.launches.get(k) for k in reach):
                self.report(c.file, fwd.node.lineno, "no-triton-launch",
                            f"{c.name}.forward never launches a @triton.jit kernel defined in the "
                            "candidate (expected kernel[grid](...) in forward or a helper it calls)")

    def _modelnew_line(self, fi):
        for node in self._module_stmts(fi.tree.body):
            if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
                return node.lineno
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    if (a.asname or a.name) == "ModelNew":
                        return node.lineno
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name) and t.id == "ModelNew":
                        return node.lineno
        return 1


class Scope:
    def __init__(self, parent=None, module_env=None):
        self.vars = {}
        self.parent = parent
        self.module_env = module_env
        self.globals = set()

    def lookup(self, name):
        s = self
        while s is not None:
            if name in s.globals:
                break
            if name in s.vars:
                return s.vars[name]
            s = s.parent
        return None


class Walker:
    def __init__(self, proj, fi, func, cls, key, ctx):
        self.p = proj
        self.fi = fi
        self.func = func
        self.cls = cls
        self.key = key
        self.ctx = ctx
        self.scope = None
        self.lambda_depth = 0
        self.in_class_body = False
        self.nested_rets = []
        # locations assigned earlier in this call: reading them is not stale state
        self.fresh = {}

    # -- reporting helpers -------------------------------------------------

    def report(self, node, rule, message):
        self.p.report(self.fi, getattr(node, "lineno", 1), rule, message)

    def data_ctx(self):
        return self.ctx == "D" or (self.lambda_depth > 0 and self.ctx != "X")

    def compute(self, node, message, call=True):
        """A torch compute use: calls count on the data path; references count
        anywhere that runs (they can be smuggled into forward)."""
        if self.p.allow_pytorch:
            return
        if call and not self.data_ctx():
            return
        if not call and self.ctx == "X" and self.lambda_depth == 0:
            return
        self.report(node, "torch-compute", message)

    # -- entry points ------------------------------------------------------

    def walk_module(self):
        self.scope = _ModuleScope(self.fi)
        self.body(self.fi.tree.body, module=True)

    def walk_class_body(self):
        c = self.cls
        for q in c.torch_bases:
            if q in ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase") or \
                    q.endswith(("TorchFunctionMode", "TorchDispatchMode")):
                self.report(c.node, "patching",
                            f"class {c.name} subclasses {q}, which intercepts torch operations")
        for name in ("__torch_function__", "__torch_dispatch__"):
            if name in c.methods:
                self.report(c.methods[name].node, "patching",
                            f"{c.name}.{name} intercepts torch operations")
        self.scope = Scope(None, self.fi.env)
        self.scope.vars = dict(self.fi.env)
        self.in_class_body = True
        for stmt in c.node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for d in stmt.decorator_list:
                    self.expr(d)
                if isinstance(stmt, ast.ClassDef):
                    for b in stmt.bases:
                        self.expr(b)
                continue
            before = dict(self.scope.vars)
            self.stmt(stmt)
            for k, v in self.scope.vars.items():
                if before.get(k) != v:
                    old = c.class_attrs.get(k, EMPTY)
                    new = _norm(old | v)
                    if new != old:
                        c.class_attrs[k] = new
                        self.p.changed = True
        for kw in c.node.keywords:
            t = self.expr(kw.value)
            if kw.arg == "metaclass" and not any(
                    isinstance(a, tuple) and a[0] == "Q" and a[1] in ("abc.ABCMeta", "type")
                    for a in t):
                self.report(kw.value, "patching",
                            f"class {c.name} uses a metaclass, which controls how it is built "
                            "and called")

    def walk_function(self):
        f = self.func
        node = f.node
        self.scope = Scope(None, self.fi.env)
        self.scope.parent = _ModuleScope(self.fi)
        args = node.args
        params = [a for a in getattr(args, "posonlyargs", [])] + list(args.args)
        evidence = _param_evidence(node)
        defaults = _param_defaults(args)
        # Defaults run at definition time; a default can smuggle a function in.
        default_types = {}
        pos_defaults = list(zip(params[len(params) - len(args.defaults):], args.defaults))
        kw_defaults = [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for a, d in pos_defaults + kw_defaults:
            dt = self.expr(d)
            if any(isinstance(x, tuple) and x[0] in ("Q", "F", "BM", "K", "N", "L") for x in dt):
                default_types[a.arg] = dt
        for i, a in enumerate(params):
            if i == 0 and f.kind == "method" and f.cls is not None:
                self.scope.vars[a.arg] = frozenset({("I", f.cls.key)})
                continue
            if i == 0 and f.kind == "classmethod" and f.cls is not None:
                self.scope.vars[a.arg] = frozenset({("C", f.cls.key)})
                continue
            if i == 0 and f.kind == "static" and f.cls is not None and f.cls.autograd:
                self.scope.vars[a.arg] = U  # ctx
                continue
            self.scope.vars[a.arg] = (self.param_type(f, a, evidence, defaults)
                                      | default_types.get(a.arg, EMPTY))
        for a in args.kwonlyargs:
            self.scope.vars[a.arg] = (self.param_type(f, a, evidence, defaults)
                                      | default_types.get(a.arg, EMPTY))
        if args.vararg:
            self.scope.vars[args.vararg.arg] = _seq(f.param_types.get("*" + args.vararg.arg, U))
        if args.kwarg:
            self.scope.vars[args.kwarg.arg] = _seq(U)
        self.check_decorators(f)
        self.body(node.body)

    def param_type(self, f, a, evidence, defaults):
        ann = _annotation_kind(a.annotation)
        if ann == "S":
            return S
        if ann == "T":
            return frozenset({"T"})
        site = f.param_types.get(a.arg, EMPTY)
        if site and site != U:
            return site - {"U"} if (site - {"U"}) else site
        ev = evidence.get(a.arg)
        if ev == "T":
            return frozenset({"T"})
        if ev == "S":
            return S
        if a.arg in defaults and defaults[a.arg] == "S":
            return S
        if f.name in ("forward", "__call__") and f.cls is not None:
            return frozenset({"T"})
        if f.name == "__init__":
            return S
        return U

    def check_decorators(self, f):
        for d in f.node.decorator_list:
            q = self.p._static_qual(self.fi, d)
            if q in ("functools.lru_cache", "functools.cache", "functools.cached_property"):
                if self.ctx == "D" and any(_tensor(t) for k, t in self.scope.vars.items()
                                           if not k.startswith("*")):
                    self.report(d, "output-cache",
                                f"{q} on {f.name}() caches results for tensor arguments")

    # -- statements ----------------------------------------------------------

    def body(self, stmts, module=False):
        for s in stmts:
            if module and isinstance(s, ast.If) and _is_main_guard(s.test):
                continue
            self.stmt(s)

    def stmt(self, s):
        m = getattr(self, "s_" + type(s).__name__, None)
        if m is not None:
            m(s)
            return
        for child in ast.iter_child_nodes(s):
            if isinstance(child, ast.stmt):
                self.stmt(child)
            elif isinstance(child, ast.expr):
                self.expr(child)
            elif isinstance(child, (ast.excepthandler, ast.match_case if hasattr(ast, "match_case") else ast.excepthandler)):
                for g in ast.iter_child_nodes(child):
                    if isinstance(g, ast.stmt):
                        self.stmt(g)
                    elif isinstance(g, ast.expr):
                        self.expr(g)

    def s_FunctionDef(self, s):
        if id(s) in self.p.registered:
            # analysed as its own FuncInfo; its decorators run here
            for d in s.decorator_list:
                self.expr(d)
            return
        self.nested_def(s)

    s_AsyncFunctionDef = s_FunctionDef

    def nested_def(self, s):
        for d in s.decorator_list:
            self.expr(d)
        for d in list(s.args.defaults) + [d for d in s.args.kw_defaults if d is not None]:
            self.expr(d)
        jit = self.p._jit_decorated(self.fi, s)
        if jit:
            key = f"{self.key}.<locals>.{s.name}"
            self.scope.vars[s.name] = frozenset({("K", key)})
            return
        self.p.nested[id(s)] = (s, self.scope, self.fi)
        self.scope.vars[s.name] = frozenset({("N", id(s))})
        outer = self.scope
        self.scope = Scope(outer, self.fi.env)
        args = s.args
        ev = _param_evidence(s)
        for a in list(getattr(args, "posonlyargs", [])) + list(args.args) + list(args.kwonlyargs):
            e = ev.get(a.arg)
            ann = _annotation_kind(a.annotation)
            self.scope.vars[a.arg] = (S if ann == "S" or e == "S" else
                                      frozenset({"T"}) if e == "T" or ann == "T" else U)
        if args.vararg:
            self.scope.vars[args.vararg.arg] = _seq(U)
        if args.kwarg:
            self.scope.vars[args.kwarg.arg] = _seq(U)
        self.lambda_depth += 1
        self.nested_rets.append(EMPTY)
        self.body(s.body)
        self.nested_rets.pop()
        self.lambda_depth -= 1
        self.scope = outer

    def call_nested(self, nid, argts):
        """Re-walks a local def or lambda with the argument types of a call."""
        entry = self.p.nested.get(nid)
        if entry is None or nid in self.p.active_nested or len(self.p.active_nested) > 3:
            return U
        fnode, scope, fi = entry
        if fi is not self.fi:
            return U
        args = fnode.args
        params = [a.arg for a in list(getattr(args, "posonlyargs", [])) + list(args.args)]
        kwonly = [a.arg for a in args.kwonlyargs]
        pos, kws = argts
        bound = {}
        for i, (star, t) in enumerate(pos):
            if star:
                for p in params[i:]:
                    bound[p] = _elems(t)
                break
            if i < len(params):
                bound[params[i]] = t
        for k, t in kws.items():
            if k in params or k in kwonly:
                bound[k] = t
        outer = self.scope
        self.scope = Scope(scope, self.fi.env)
        for p in params + kwonly:
            self.scope.vars[p] = bound.get(p, U)
        if args.vararg:
            self.scope.vars[args.vararg.arg] = _seq(U)
        if args.kwarg:
            self.scope.vars[args.kwarg.arg] = _seq(U)
        self.p.active_nested.add(nid)
        self.lambda_depth += 1
        try:
            if isinstance(fnode, ast.Lambda):
                ret = self.expr(fnode.body)
            else:
                self.nested_rets.append(EMPTY)
                self.body(fnode.body)
                ret = self.nested_rets.pop() or S
        finally:
            self.lambda_depth -= 1
            self.p.active_nested.discard(nid)
            self.scope = outer
        return ret

    def s_ClassDef(self, s):
        for d in s.decorator_list:
            self.expr(d)
        for b in s.bases:
            self.expr(b)
        if id(s) in self.p.registered:
            return
        # class defined inside a function or a block: walk its methods inline
        for item in s.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.nested_def(item)
            else:
                self.stmt(item)

    def s_Import(self, s):
        self.p._bind_import(self.fi, s, self.scope.vars, report=True, walker=self)

    s_ImportFrom = s_Import

    def s_Global(self, s):
        self.scope.globals.update(s.names)

    def s_Nonlocal(self, s):
        pass

    def s_Expr(self, s):
        self.expr(s.value)

    def s_Assign(self, s):
        t = self.expr(s.value)
        for target in s.targets:
            self.bind(target, t, s.value)

    def s_AnnAssign(self, s):
        if s.value is not None:
            t = self.expr(s.value)
            self.bind(s.target, t, s.value)
        elif isinstance(s.target, (ast.Attribute, ast.Subscript)):
            self.expr(s.target.value)

    def s_AugAssign(self, s):
        cur = self.load_target(s.target)
        val = self.expr(s.value)
        res = self.binop(s, s.op, cur, val)
        self.bind(s.target, res, s.value, aug=True)

    def s_Return(self, s):
        t = self.expr(s.value) if s.value is not None else S
        if self.lambda_depth and self.nested_rets:
            self.nested_rets[-1] = self.nested_rets[-1] | t
        if self.func is not None and self.lambda_depth == 0:
            self.p.join_ret(self.func, t)
            if (self.p.reporting and self.ctx == "D" and self.func.name == "forward"
                    and self.func.cls is not None and "P" in _deep_atoms(t)
                    and (_deep_atoms(t) & {"T", "A", "W"})):
                self.report(s, "output-cache",
                            "forward returns a tensor kept from an earlier call "
                            "(a cache on self, the class or the module)")

    def s_If(self, s):
        self.expr(s.test)
        before = dict(self.fresh)
        self.body(s.body)
        after_body = self.fresh
        self.fresh = dict(before)
        self.body(s.orelse)
        after_else = self.fresh
        if _terminates(s.body):
            self.fresh = after_else
        elif _terminates(s.orelse):
            self.fresh = after_body
        else:
            merged = dict(before)
            for k in after_body.keys() & after_else.keys():
                merged[k] = after_body[k] | after_else[k]
            self.fresh = merged

    def s_While(self, s):
        self.expr(s.test)
        before = dict(self.fresh)
        for _ in range(2):
            self.fresh = dict(before)
            self.body(s.body)
        self.fresh = before
        self.body(s.orelse)

    def s_For(self, s):
        it = self.expr(s.iter)
        before = dict(self.fresh)
        for _ in range(2):
            self.fresh = dict(before)
            self.bind(s.target, _elems(it), None)
            self.body(s.body)
        self.fresh = before
        self.body(s.orelse)

    s_AsyncFor = s_For

    def s_With(self, s):
        for item in s.items:
            t = self.expr(item.context_expr)
            if item.optional_vars is not None:
                self.bind(item.optional_vars, U if not _tensor(t) else t, None)
        self.body(s.body)

    s_AsyncWith = s_With

    def s_Try(self, s):
        before = dict(self.fresh)
        self.body(s.body)
        self.fresh = before
        for h in s.handlers:
            if h.type is not None:
                self.expr(h.type)
            if h.name:
                self.scope.vars[h.name] = U
            self.body(h.body)
        self.body(s.orelse)
        self.body(s.finalbody)

    s_TryStar = s_Try

    def s_Raise(self, s):
        if s.exc is not None:
            t = self.expr(s.exc)
            if any(a[0] == "Q" and a[1] in ("builtins.SystemExit", "builtins.KeyboardInterrupt")
                   for a in t if isinstance(a, tuple)):
                self.report(s, "exit", "raises SystemExit/KeyboardInterrupt to leave the process")
        if s.cause is not None:
            self.expr(s.cause)

    def s_Delete(self, s):
        for t in s.targets:
            if isinstance(t, ast.Attribute):
                base = self.expr(t.value)
                if self.is_external(base):
                    self.report(t, "patching", f"deletes attribute {t.attr} of a module or class "
                                "it does not own")
            elif isinstance(t, ast.Subscript):
                base = self.expr(t.value)
                self.expr(t.slice)
                self.check_external_subscript_store(t, base)
            else:
                self.expr(t) if not isinstance(t, ast.Name) else None

    # -- binding ------------------------------------------------------------

    def load_target(self, target):
        if isinstance(target, ast.Name):
            return self.lookup_name(target.id, target)
        return self.expr(target)

    def bind(self, target, t, value_node, aug=False):
        if isinstance(target, ast.Name):
            name = target.id
            if name in self.scope.globals:
                self.store_check(target, t, f"global {name}")
                self.p.join_global(self.fi, name, t, self.key)
                self.fresh[("g", name)] = t
                return
            if self.scope.vars is self.fi.env:
                old = self.fi.env.get(name, EMPTY)
                new = _norm(old | t)
                if new != old:
                    self.fi.env[name] = new
                    self.p.changed = True
                return
            self.scope.vars[name] = _norm(t)
        elif isinstance(target, (ast.Tuple, ast.List)):
            inner = _elems(t)
            if _tensor(t) and not any(_is_seq(a) for a in t):
                inner = t
            for elt in target.elts:
                if isinstance(elt, ast.Starred):
                    self.bind(elt.value, _seq(inner), None)
                else:
                    self.bind(elt, inner, None)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, t, None)
        elif isinstance(target, ast.Attribute):
            base = self.expr(target.value, inner=True)
            self.attr_store(target, base, t, value_node)
        elif isinstance(target, ast.Subscript):
            base = self.expr(target.value, inner=True)
            self.expr(target.slice)
            if self.check_external_subscript_store(target, base):
                return
            loc = self.location(target.value)
            if loc is not None:
                self.store_check(target, t, self.loc_desc(loc))
                self.join_location(loc, _seq(t))

    def attr_store(self, target, base, t, value_node):
        attr = target.attr
        for a in base:
            if not isinstance(a, tuple):
                continue
            if a[0] == "Q":
                q = a[1]
                if q.startswith("torch.backends"):
                    self.check_backend_flag(target, attr, value_node)
                    continue
                self.check_qual(target, q, call=False)
                if q in ("sys",) and attr in ("stdout", "stderr", "stdin"):
                    self.report(target, "patching", f"replaces sys.{attr}")
                else:
                    self.report(target, "patching",
                                f"assigns {q}.{attr}: monkeypatching a module or class "
                                "it does not own")
            elif a[0] in ("MOD", "PKG"):
                self.report(target, "patching", f"assigns {attr} on another candidate module")
            elif a[0] == "I" and a[1] in self.p.classes:
                # Plain state on self (running statistics, RNN hidden state) is
                # legitimate; a cache shows when forward returns it later.
                c = self.p.classes[a[1]]
                self.p.join_attr(c, attr, t, self.key)
                self.fresh[("a", c.key, attr)] = t
            elif a[0] == "C" and a[1] in self.p.classes:
                c = self.p.classes[a[1]]
                if self.ctx == "D":
                    self.store_check(target, t, f"{c.name}.{attr}")
                self.p.join_attr(c, attr, t, self.key)
        if attr == "__class__" and _tensor(base):
            self.report(target, "patching", "changes the class of a tensor")

    def check_backend_flag(self, node, attr, value_node):
        bad = False
        if attr in ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                    "allow_bf16_reduced_precision_reduction"):
            bad = not (isinstance(value_node, ast.Constant) and value_node.value is False)
        elif attr == "fp32_precision":
            bad = not (isinstance(value_node, ast.Constant) and value_node.value in ("ieee", "highest"))
        if bad:
            self.report(node, "tf32", f"sets torch.backends ...{attr}: TF32/reduced precision "
                        "must stay off (the reference runs in full fp32)")

    def check_external_subscript_store(self, target, base):
        for a in base:
            if not isinstance(a, tuple) or a[0] != "Q":
                continue
            q = a[1]
            if q == "sys.modules":
                self.report(target, "patching", "writes sys.modules (replaces a module)")
            elif q == "os.environ":
                self.report(target, "patching", "changes os.environ")
            else:
                self.report(target, "patching", f"writes into {q}")
            return True
        return False

    def store_check(self, node, t, where):
        if not self.p.reporting or self.ctx != "D" and not self.lambda_depth:
            return
        if self.ctx == "X":
            return
        deep = _deep_atoms(t)
        if "T" in deep:
            self.report(node, "output-cache",
                        f"stores a tensor derived from the inputs or outputs in {where}, "
                        "which outlives the call")

    def location(self, node):
        """('g', fi, name) / ('a', ClassInfo, attr) for persistent containers."""
        if isinstance(node, ast.Name):
            if self._is_local(node.id):
                return None
            if node.id in self.fi.env:
                return ("g", self.fi, node.id)
            return None
        if isinstance(node, ast.Attribute):
            base = self.expr(node.value, inner=True, quiet=True)
            for a in base:
                if isinstance(a, tuple) and a[0] in ("I", "C") and a[1] in self.p.classes:
                    return ("a", self.p.classes[a[1]], node.attr)
        return None

    def _is_local(self, name):
        s = self.scope
        while s is not None and not isinstance(s, _ModuleScope):
            if name in s.globals:
                return False
            if name in s.vars:
                return True
            s = s.parent
        return False

    def loc_desc(self, loc):
        if loc[0] == "g":
            return f"module-level {loc[2]}"
        return f"{loc[1].name}.{loc[2]}"

    def join_location(self, loc, t):
        if loc[0] == "g":
            self.p.join_global(loc[1], loc[2], t, self.key)
        else:
            self.p.join_attr(loc[1], loc[2], t, self.key)

    def persistent(self, loc):
        """Is this location written on the data path (so it carries state between calls)?"""
        if not self.p.p_enabled:
            return False
        if loc[0] == "g":
            writers = loc[1].writers.get(loc[2], set())
        else:
            writers = set()
            for c in loc[1].mro():
                writers |= c.writers.get(loc[2], set())
        return any(w in self.p.data_path for w in writers)

    # -- names ---------------------------------------------------------------

    def lookup_name(self, name, node):
        t = self.scope.lookup(name)
        if t is None:
            t = self.fi.env.get(name)
        if t is None:
            if name in BUILTIN_NAMES:
                return frozenset({("Q", "builtins." + name)})
            for m in self.fi.star_modules:
                return frozenset({("Q", f"{m}.{name}")})
            return U
        if ("g", name) in self.fresh and name in self.scope_globals():
            return self.fresh[("g", name)]
        if self.fi.env.get(name) is t and self.func is not None and self.p.p_enabled:
            # module-level tensors, and containers written on the data path, outlive a call
            if _tensor(t) or (self.persistent(("g", self.fi, name))
                              and any(_is_seq(a) for a in t)):
                t = t | {"P"}
        return t

    # -- expressions ----------------------------------------------------------

    def expr(self, node, callee=False, inner=False, quiet=False):
        if node is None:
            return U
        if quiet:
            saved = self.p.reporting
            self.p.reporting = False
            try:
                return self.expr(node, callee, inner, False)
            finally:
                self.p.reporting = saved
        m = getattr(self, "e_" + type(node).__name__, None)
        if m is None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expr(child)
            return U
        t = m(node, callee, inner)
        if not inner:
            self.check_reference(node, t, callee)
        return t

    def e_Constant(self, node, callee, inner):
        return S

    def e_JoinedStr(self, node, callee, inner):
        for v in node.values:
            self.expr(v)
        return S

    def e_FormattedValue(self, node, callee, inner):
        self.expr(node.value)
        if node.format_spec is not None:
            self.expr(node.format_spec)
        return S

    def e_Name(self, node, callee, inner):
        name = node.id
        if name == "__builtins__":
            self.report(node, "patching", "uses __builtins__")
        t = self.lookup_name(name, node)
        return t

    def e_Attribute(self, node, callee, inner):
        base = self.expr(node.value, inner=True)
        return self.attribute(node, base, node.attr, callee)

    def attribute(self, node, base, attr, callee):
        if attr in FRAME_ATTRS:
            self.report(node, "frame-inspection", f"reads frame attribute .{attr}")
        if attr in DYNAMIC_ATTRS:
            self.report(node, "dynamic-code", f"uses .{attr} (reaches code objects, globals or "
                        "class internals)")
        own = all(isinstance(a, tuple) and a[0] in ("I", "C", "SUPER") for a in base) and base
        if attr == "__dict__" and not own:
            self.report(node, "patching", "uses __dict__ of a module, class or object it does not "
                        "own")
        if attr in ARITH_DUNDERS and not own:
            self.compute(node, f"uses the operator method .{attr}", call=False)
            return frozenset({"T"})
        out = set()
        for a in base:
            if a == "S":
                out.add("S")
            elif a == "U":
                out.add("U")
            elif a in TENSORISH:
                if attr in TENSOR_SCALAR_ATTRS:
                    out.add("S")
                elif attr in TENSOR_VIEW_ATTRS:
                    out |= base & TENSORISH
                elif attr == "__class__":
                    out.add(("Q", "torch.Tensor"))
                else:
                    out.add(("TM", attr))
            elif not isinstance(a, tuple):
                out.add("U")
            elif a[0] == "Q":
                if a[1].count(".") >= MAX_QUAL_PARTS:
                    out.add("U")
                else:
                    out.add(("Q", a[1] + "." + attr))
            elif a[0] == "MOD":
                out |= self.p._module_member(a[1], attr)
            elif a[0] == "PKG":
                out |= self.p._package_member(a[1], attr)
            elif a == LAYER:
                if "weight" in attr or "bias" in attr or attr.startswith("running_") or attr.startswith("in_proj"):
                    out.add("W")
                else:
                    out.add(("LM", attr))
            elif a[0] == "I" and a[1] in self.p.classes:
                out |= self.instance_attr(node, self.p.classes[a[1]], attr)
            elif a[0] == "C" and a[1] in self.p.classes:
                out |= self.class_attr(self.p.classes[a[1]], attr)
            elif a[0] == "SUPER" and a[1] in self.p.classes:
                out |= self.super_attr(self.p.classes[a[1]], attr)
            elif a[0] == "K":
                out.add(("KM", a[1], attr))
            elif a[0] == "SEQ":
                out.add(("SM", attr))
            else:
                out.add("U")
        return _norm(frozenset(out)) or U

    def scope_globals(self):
        out = set()
        s = self.scope
        while s is not None:
            out |= s.globals
            s = s.parent
        return out

    def instance_attr(self, node, c, attr):
        if ("a", c.key, attr) in self.fresh:
            return self.fresh[("a", c.key, attr)]
        m = c.find_method(attr)
        if m is not None:
            if m.is_jit:
                return frozenset({("K", m.key)})
            if m.kind == "static":
                return frozenset({("F", m.key)})
            return frozenset({("BM", m.key)})
        t = EMPTY
        for cc in c.mro():
            t = t | cc.attrs.get(attr, EMPTY) | cc.class_attrs.get(attr, EMPTY)
        if not t:
            if c.is_torch_layer_subclass():
                if "weight" in attr or "bias" in attr or attr.startswith("running_"):
                    return frozenset({"W"})
                quals = c.torch_base_quals()
                return frozenset({("Q", quals[0] + "." + attr)}) if quals else U
            if any(q == "torch.nn.Module" for q in c.torch_base_quals()):
                if attr in MODULE_OK_METHODS or attr in ("training",):
                    return frozenset({("Q", "torch.nn.Module." + attr)})
            return U
        if self.p.p_enabled and self.func is not None and (_tensor(t) or any(_is_seq(a) for a in t)):
            if self.persistent(("a", c, attr)):
                t = t | {"P"}
        return t

    def class_attr(self, c, attr):
        if c.autograd and attr == "apply":
            m = c.find_method("forward")
            if m is not None:
                return frozenset({("F", m.key)})
        m = c.find_method(attr)
        if m is not None:
            return frozenset({("K" if m.is_jit else "F", m.key)})
        t = EMPTY
        for cc in c.mro():
            t = t | cc.class_attrs.get(attr, EMPTY) | cc.attrs.get(attr, EMPTY)
        if not t:
            quals = c.torch_base_quals()
            if quals:
                return frozenset({("Q", quals[0] + "." + attr)})
            return U
        if self.p.p_enabled and (_tensor(t) or any(_is_seq(a) for a in t)):
            if self.persistent(("a", c, attr)):
                t = t | {"P"}
        return t

    def super_attr(self, c, attr):
        for b in c.bases:
            m = b.find_method(attr)
            if m is not None:
                return frozenset({("BM", m.key)})
        quals = c.torch_base_quals()
        if quals:
            return frozenset({("Q", quals[0] + "." + attr)})
        return U

    def e_Subscript(self, node, callee, inner):
        base = self.expr(node.value)
        idx = self.expr(node.slice)
        if _tensor(base) and (_tensor(idx) or any(_is_seq(a) and _tensor(a[1]) for a in idx)):
            self.compute(node, "indexes a tensor with a tensor (gather/mask on the host side)")
            return frozenset({"T"}) | (base & {"P"})
        out = set()
        for a in base:
            if a in TENSORISH:
                out.add(a)
            elif isinstance(a, tuple) and a[0] == "Q":
                q = a[1]
                if q == "sys.modules":
                    out.add("U")
                else:
                    out.add(("Q", q))
            elif isinstance(a, tuple) and a[0] == "K":
                out.add(("KG", a[1]))
            else:
                out |= _elems(frozenset({a}))
        out = frozenset(out) or U
        if "P" in base and (_tensor(out - {"P"}) or any(_is_seq(a) for a in out)):
            out = out | {"P"}
        return out

    def e_Starred(self, node, callee, inner):
        return _elems(self.expr(node.value))

    def e_Tuple(self, node, callee, inner):
        ts = EMPTY
        for e in node.elts:
            if isinstance(e, ast.Starred):
                ts = ts | _elems(self.expr(e.value))
            else:
                ts = ts | self.expr(e)
        return _seq(ts or S)

    e_List = e_Tuple
    e_Set = e_Tuple

    def e_Dict(self, node, callee, inner):
        ts = EMPTY
        for k in node.keys:
            if k is not None:
                self.expr(k)
        for v in node.values:
            ts = ts | self.expr(v)
        return _seq(ts or S)

    def e_Slice(self, node, callee, inner):
        for x in (node.lower, node.upper, node.step):
            if x is not None:
                self.expr(x)
        return S

    def e_BinOp(self, node, callee, inner):
        left = self.expr(node.left)
        right = self.expr(node.right)
        return self.binop(node, node.op, left, right)

    def binop(self, node, op, left, right):
        if isinstance(op, ast.MatMult):
            known = lambda t: t and not (t & TENSORISH) and "U" not in t
            if not (known(left) and known(right)):
                self.compute(node, "uses the @ operator (matrix multiply) in PyTorch")
            return frozenset({"T"}) | ((left | right) & {"P"})
        if _tensor(left) or _tensor(right):
            # list/tuple repetition or concatenation is not compute
            if any(_is_seq(a) for a in left | right) and not (
                    (left & TENSORISH) and (right & TENSORISH)):
                return left | right
            sym = _OP_SYMBOLS.get(type(op), "arithmetic")
            self.compute(node, f"computes `{sym}` on tensors in PyTorch")
            return frozenset({"T"}) | ((left | right) & {"P"})
        if any(_is_seq(a) for a in left) and any(_is_seq(a) for a in right):
            return left | right
        if "U" in left or "U" in right:
            return U | (S if (left | right) <= {"S", "U"} else EMPTY)
        return S

    def e_UnaryOp(self, node, callee, inner):
        t = self.expr(node.operand)
        if isinstance(node.op, ast.Not):
            return S
        if _tensor(t):
            self.compute(node, "negates/inverts a tensor in PyTorch")
            return frozenset({"T"})
        return t

    def e_BoolOp(self, node, callee, inner):
        t = EMPTY
        for v in node.values:
            t = t | self.expr(v)
        return t

    def e_Compare(self, node, callee, inner):
        ts = [self.expr(node.left)] + [self.expr(c) for c in node.comparators]
        flagged = False
        for i, op in enumerate(node.ops):
            if isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                continue
            a, b = ts[i], ts[i + 1]
            if (_tensor(a) and not any(_is_seq(x) for x in a)) or (
                    _tensor(b) and not any(_is_seq(x) for x in b)):
                if not flagged:
                    self.compute(node, "compares tensors in PyTorch")
                flagged = True
        return frozenset({"T"}) if flagged else S

    def e_IfExp(self, node, callee, inner):
        self.expr(node.test)
        return self.expr(node.body) | self.expr(node.orelse)

    def e_NamedExpr(self, node, callee, inner):
        t = self.expr(node.value)
        self.bind(node.target, t, node.value)
        return t

    def e_Lambda(self, node, callee, inner):
        outer = self.scope
        self.scope = Scope(outer, self.fi.env)
        args = node.args
        for a in list(getattr(args, "posonlyargs", [])) + list(args.args) + list(args.kwonlyargs):
            self.scope.vars[a.arg] = U
        if args.vararg:
            self.scope.vars[args.vararg.arg] = _seq(U)
        if args.kwarg:
            self.scope.vars[args.kwarg.arg] = _seq(U)
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.expr(d)
        self.p.nested[id(node)] = (node, outer, self.fi)
        self.lambda_depth += 1
        self.expr(node.body)
        self.lambda_depth -= 1
        self.scope = outer
        return frozenset({("N", id(node))})

    def comprehension(self, node, elts):
        outer = self.scope
        self.scope = Scope(outer, self.fi.env)
        for gen in node.generators:
            it = self.expr(gen.iter)
            self.bind(gen.target, _elems(it), None)
            for cond in gen.ifs:
                self.expr(cond)
        t = EMPTY
        for e in elts:
            t = t | self.expr(e)
        self.scope = outer
        return _seq(t or S)

    def e_ListComp(self, node, callee, inner):
        return self.comprehension(node, [node.elt])

    e_SetComp = e_ListComp
    e_GeneratorExp = e_ListComp

    def e_DictComp(self, node, callee, inner):
        return self.comprehension(node, [node.key, node.value])

    def e_Await(self, node, callee, inner):
        return self.expr(node.value)

    def e_Yield(self, node, callee, inner):
        if node.value is not None:
            self.expr(node.value)
        return U

    e_YieldFrom = e_Yield

    # -- references to external symbols ------------------------------------

    def check_reference(self, node, t, callee):
        if not isinstance(node, (ast.Name, ast.Attribute)):
            return
        for a in t:
            if not isinstance(a, tuple):
                continue
            if a[0] == "Q":
                self.check_qual(node, a[1], call=callee)
            elif a[0] in ("F", "BM") and not callee:
                self.p.add_edge(self.key, a[1], ref=True)
            elif a[0] == "I" and not callee and a[1] in self.p.classes:
                # an instance escaping (stored in a list, passed on): its forward may run
                c = self.p.classes[a[1]]
                if not (isinstance(node, ast.Name) and node.id == "self") and not (
                        isinstance(node, ast.Attribute)):
                    for name in ("forward", "__call__"):
                        m = c.find_method(name)
                        if m is not None:
                            self.p.add_edge(self.key, m.key, ref=True)
            elif a[0] == "TM" and not callee:
                name = a[1]
                if name not in TENSOR_METHOD_VIEW | TENSOR_METHOD_META | TENSOR_METHOD_ALLOC:
                    self.compute(node, f"takes the tensor method .{name} as a value", call=False)
            elif a[0] == "LM" and not callee:
                if a[1] in ("forward", "_conv_forward", "__call__"):
                    self.compute(node, f"takes nn layer method .{a[1]} as a value", call=False)

    def classify_here(self, q):
        """classify(q), except what the top level of a composed package may do
        itself (toplevel.py: packing its subproblems' outputs with torch.cat
        or torch.stack), which the decomposition verifier accepted."""
        kind, msg = classify(q)
        if kind == "compute" and toplevel.packing_call(q) and toplevel.is_package_top(self.fi.path):
            return "view", ""
        return kind, msg

    def check_qual(self, node, q, call, args=None, kwargs=None):
        """Classify a use of qualified name q. Returns the result type for calls."""
        kind, msg = self.classify_here(q)
        if kind in ("ok", "module", "meta", "alloc", "view", "param", "init", "layer",
                    "container", "identity", "autograd-base", "numpy", "tensor-method-ok",
                    "builtin", "operator"):
            return kind
        if kind == "compute":
            self.compute(node, msg, call=call)
        elif kind == "matmul-ref":
            self.compute(node, msg, call=False)
        elif kind in ("aten", "torch-compile", "side-stream", "file-io", "dynamic-code",
                      "process", "exit", "native-code", "frame-inspection", "patching",
                      "threads", "network", "foreign-library", "reference-import", "privileges",
                      "harness-import"):
            self.report(node, kind, msg)
        elif kind == "tf32":
            if not call:
                self.report(node, "tf32", msg)
            # calls are checked with their argument in call_qual
        return kind

    # -- calls ----------------------------------------------------------------

    def e_Call(self, node, callee, inner):
        func = node.func
        # kernel[grid](...)
        if isinstance(func, ast.Subscript):
            base = self.expr(func.value, inner=True)
            self.expr(func.slice)
            kernels = _atoms(base, "K") + [a for a in _elems(base) if isinstance(a, tuple) and a[0] == "K"]
            if kernels:
                argts = self.eval_args(node)
                self.launch(node, argts)
                return S
            ftype = self.expr(func)  # e.g. table[name](x)
            argts = self.eval_args(node)
            return self.apply_call(node, ftype, argts, None)
        if isinstance(func, ast.Attribute):
            recv = self.expr(func.value, inner=True)
            attr = func.attr
            ftype = self.attribute(func, recv, attr, True)
            self.check_reference(func, ftype, True)
            argts = self.eval_args(node)
            self.misc_method_checks(node, attr)
            if attr in ("register_buffer", "register_parameter", "add_module") and node.args:
                name = _const_str(node.args[0])
                val = argts[0][1][1] if len(argts[0]) > 1 else U
                if name is not None:
                    for a in recv:
                        if isinstance(a, tuple) and a[0] == "I" and a[1] in self.p.classes:
                            self.p.join_attr(self.p.classes[a[1]], name,
                                             val if attr == "add_module" else frozenset({"W"}),
                                             self.key)
            return self.apply_call(node, ftype, argts, (func.value, recv, attr))
        ftype = self.expr(func, callee=True)
        argts = self.eval_args(node)
        return self.apply_call(node, ftype, argts, None)

    def eval_args(self, node):
        pos = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                pos.append(("*", self.expr(a.value)))
            else:
                pos.append((None, self.expr(a)))
        kws = {}
        for kw in node.keywords:
            t = self.expr(kw.value)
            kws[kw.arg if kw.arg is not None else "**"] = t
        return pos, kws

    def launch(self, node, argts):
        lines = self.p.launches.setdefault(self.key, [])
        if node.lineno not in lines:
            lines.append(node.lineno)
            self.p.changed = True
        pos, kws = argts
        for kw in node.keywords:
            if kw.arg == "stream":
                self.report(kw.value, "side-stream", "launches a kernel on an explicit stream")
        alltypes = [t for _, t in pos] + list(kws.values())
        if any("T" in t or "P" in t for t in alltypes):
            # outputs written by the kernel now hold input-derived data
            for a in node.args:
                if isinstance(a, ast.Name) and a.id in self.scope.vars:
                    cur = self.scope.vars[a.id]
                    if "A" in cur:
                        self.scope.vars[a.id] = cur | {"T"}

    def apply_call(self, node, ftype, argts, method):
        pos, kws = argts
        out = EMPTY
        all_args = [t for _, t in pos] + list(kws.values())
        for a in ftype:
            if a in TENSORISH or a in ("S", "U"):
                out = out | U
                if a == "U" and method is not None:
                    out = out | self.unknown_method(node, method)
                continue
            kind = a[0]
            if kind == "Q":
                out = out | self.call_qual(node, a[1], argts, method)
            elif kind == "TM":
                out = out | self.tensor_method(node, a[1], method, argts)
            elif kind == "LM":
                if a[1] not in LAYER_OK_METHODS:
                    self.compute(node, f"calls .{a[1]}() of a torch.nn layer")
                    out = out | {"T"}
                else:
                    out = out | U
            elif kind == "SM":
                out = out | self.container_method(node, a[1], method, argts)
            elif kind in ("F", "BM"):
                f = self.p.funcs.get(a[1])
                if f is not None:
                    self.p.add_edge(self.key, f.key)
                    self.bind_params(f, argts, bound=(kind == "BM"))
                    out = out | (f.ret or U)
                    if f.is_jit:
                        out = out | U
            elif kind == "KG":
                self.launch(node, argts)
                out = out | S
            elif kind == "K":
                out = out | U
            elif kind == "KM":
                if a[2] == "run":
                    self.launch(node, argts)
                out = out | U
            elif kind == "C":
                c = self.p.classes.get(a[1])
                if c is not None:
                    init = c.find_method("__init__")
                    if init is not None:
                        self.p.add_edge(self.key, init.key)
                        self.bind_params(init, argts, bound=True)
                    out = out | {("I", c.key)}
            elif kind == "I":
                c = self.p.classes.get(a[1])
                if c is not None:
                    out = out | self.call_instance(node, c, argts)
            elif kind == "L":
                self.compute(node, "calls a torch.nn layer to compute (use its .weight/.bias in "
                             "a Triton kernel instead)")
                out = out | {"T"}
            elif kind == "SEQ":
                for e in a[1]:
                    if e == LAYER:
                        self.compute(node, "calls a torch.nn container of layers")
                        out = out | {"T"}
                    elif isinstance(e, tuple) and e[0] == "I" and e[1] in self.p.classes:
                        out = out | self.call_instance(node, self.p.classes[e[1]], argts)
            elif kind == "LI":
                out = out | (pos[0][1] if pos else U)
            elif kind == "N":
                out = out | self.call_nested(a[1], argts)
            else:
                out = out | U
        if not ftype:
            out = U
        return out or U

    def call_instance(self, node, c, argts):
        out = EMPTY
        for name in ("__call__", "forward"):
            m = c.find_method(name)
            if m is not None:
                self.p.add_edge(self.key, m.key)
                self.bind_params(m, argts, bound=True)
                out = out | (m.ret or frozenset({"T"}))
                break
        else:
            if c.is_torch_layer_subclass():
                self.compute(node, f"calls {c.name}, which inherits forward from a torch.nn layer")
            out = frozenset({"T"})
        return out

    def bind_params(self, f, argts, bound):
        pos, kws = argts
        args = f.node.args
        params = [a.arg for a in list(getattr(args, "posonlyargs", [])) + list(args.args)]
        if (bound or f.kind == "classmethod") and params and f.kind != "static":
            params = params[1:]
        if f.kind == "static" and f.cls is not None and f.cls.autograd and params:
            params = params[1:]  # ctx
        i = 0
        for star, t in pos:
            if star:
                for p in params[i:]:
                    self.p.join_param(f, p, _elems(t))
                if args.vararg:
                    self.p.join_param(f, "*" + args.vararg.arg, _elems(t))
                break
            if i < len(params):
                self.p.join_param(f, params[i], t)
            elif args.vararg:
                self.p.join_param(f, "*" + args.vararg.arg, t)
            i += 1
        for k, t in kws.items():
            if k != "**":
                self.p.join_param(f, k, t)

    def unknown_method(self, node, method):
        attr = method[2]
        if attr in DISTINCTIVE_COMPUTE:
            self.compute(node, f"calls .{attr}(), a PyTorch compute method")
            return frozenset({"T"})
        return U

    def misc_method_checks(self, node, attr):
        if attr in FILE_METHODS:
            self.report(node, "file-io", f"calls .{attr}() (file I/O)")
        elif attr == "wait_stream":
            self.report(node, "side-stream", "synchronises with another CUDA stream")
        elif attr in HOOK_METHODS:
            self.report(node, "patching", f"registers a hook with .{attr}(): code that runs "
                        "around forward outside the candidate's own forward")

    def container_method(self, node, attr, method, argts):
        pos, kws = argts
        recv_node, recv, _ = method if method else (None, U, attr)
        if attr in CONTAINER_MUTATORS and recv_node is not None:
            loc = self.location(recv_node)
            vals = EMPTY
            for _, t in pos:
                vals = vals | (_elems(t) if attr in ("extend", "update") else t)
            for t in kws.values():
                vals = vals | t
            if attr == "setdefault" and len(pos) >= 2:
                vals = pos[1][1]
            if loc is not None:
                self.store_check(node, vals, self.loc_desc(loc))
                self.join_location(loc, _seq(vals))
            elif isinstance(recv_node, ast.Name) and recv_node.id in self.scope.vars:
                self.scope.vars[recv_node.id] = self.scope.vars[recv_node.id] | _seq(vals)
        if attr in CONTAINER_READERS:
            r = _elems(recv)
            if attr in ("values", "items"):
                return _seq(r)
            return r
        if attr in ("keys", "copy"):
            return recv
        return U

    def tensor_method(self, node, attr, method, argts):
        recv = method[1] if method else frozenset({"T"})
        prov = recv & TENSORISH or frozenset({"T"})
        if attr in TENSOR_METHOD_VIEW:
            if attr == "record_stream":
                self.report(node, "side-stream", "records a tensor on another CUDA stream")
            return prov
        if attr in TENSOR_METHOD_ALLOC:
            return frozenset({"A"})
        if attr in TENSOR_METHOD_META:
            return S
        if attr in CONTAINER_METHODS and attr not in ("add", "copy", "index"):
            return U
        self.compute(node, f"calls tensor method .{attr}() (PyTorch compute)")
        return frozenset({"T"}) | (prov & {"P"})

    # -- calls of external (qualified) names --------------------------------

    def call_qual(self, node, q, argts, method):
        pos, kws = argts
        all_args = [t for _, t in pos] + list(kws.values())
        kind = self.classify_here(q)[0]
        if q.startswith("builtins."):
            return self.call_builtin(node, q[9:], argts, method)
        if kind == "tf32":
            arg = node.args[0] if node.args else None
            if not (isinstance(arg, ast.Constant) and arg.value == "highest"):
                self.report(node, "tf32", "set_float32_matmul_precision below 'highest' enables "
                            "TF32 matmuls")
            return S
        if kind == "alloc":
            return frozenset({"A"})
        if kind == "view":
            prov = EMPTY
            for t in all_args:
                prov = prov | (t & TENSORISH)
            return prov or frozenset({"T"})
        if kind == "meta":
            return S if not q.endswith(("Tensor", "tensor")) else U
        if kind in ("param", "init"):
            if q.endswith(("_calculate_fan_in_and_fan_out", "calculate_gain",
                           "_calculate_correct_fan")):
                return S
            return frozenset({"W"})
        if kind == "layer":
            return frozenset({LAYER})
        if kind == "identity":
            return frozenset({LAYER_IDENTITY})
        if kind == "container":
            elems = EMPTY
            for _, t in pos:
                elems = elems | t | _elems(t)
            for t in kws.values():
                elems = elems | _elems(t)
            elems = frozenset(a for a in elems if a == LAYER or (isinstance(a, tuple) and a[0] == "I"))
            return _seq(elems or U)
        if kind == "compute":
            return frozenset({"T"}) | frozenset(a for t in all_args for a in t if a == "P")
        if kind == "numpy":
            if any(_tensor(t) for t in all_args):
                self.compute(node, f"computes with {q} on tensor data (CPU compute on the data "
                             "path)")
                return frozenset({"T"})
            return U
        if kind == "operator":
            name = q.rsplit(".", 1)[-1]
            if name in ("methodcaller", "attrgetter"):
                self.report(node, "dynamic-code", f"operator.{name} looks attributes up by "
                            "string")
                return U
            if any(_tensor(t) for t in all_args):
                self.compute(node, f"applies operator.{name} to tensors")
                return frozenset({"T"})
            return U
        if kind == "import-module":
            arg = node.args[0] if node.args else None
            name = _const_str(arg) if arg is not None else None
            if name is None:
                self.report(node, "dynamic-code", "imports a module whose name is computed")
                return U
            self.check_import_name(name, node)
            return frozenset({("Q", name)})
        if q in ("functools.partial",):
            return U
        if q == "functools.reduce":
            return U
        return U

    def call_builtin(self, node, name, argts, method):
        pos, kws = argts
        all_args = [t for _, t in pos] + list(kws.values())
        if name in ("getattr", "hasattr", "delattr", "setattr"):
            return self.call_getattr_family(node, name, pos)
        if name == "super":
            if self.cls is not None:
                return frozenset({("SUPER", self.cls.key)})
            return U
        if name == "type":
            if pos and _tensor(pos[0][1]):
                return frozenset({("Q", "torch.Tensor")})
            if pos:
                t = pos[0][1]
                cs = {("C", a[1]) for a in t if isinstance(a, tuple) and a[0] == "I"}
                if cs:
                    return frozenset(cs)
            return U
        if name in ("exec", "eval", "compile", "__import__", "globals", "locals", "vars",
                    "breakpoint"):
            return self.dynamic_builtin(node, name, pos)
        if name == "open":
            self.report(node, "file-io", "opens a file")
            return U
        if name in ("exit", "quit"):
            self.report(node, "exit", f"calls {name}()")
            return U
        if name in TENSORY_BUILTINS:
            deep = set()
            for t in all_args:
                deep |= set(t) | set(_elems(t)) if any(_is_seq(a) for a in t) else set(t)
            if deep & TENSORISH:
                self.compute(node, f"applies {name}() to tensors")
                return frozenset({"T"})
            return S if all(t <= {"S"} for t in all_args) else U
        if name in SCALAR_BUILTINS:
            return S
        if name in ("range",):
            return _seq(S)
        if name in ("list", "tuple", "set", "frozenset", "sorted", "reversed", "iter"):
            if pos:
                t = pos[0][1]
                if _tensor(t) and not any(_is_seq(a) for a in t):
                    return _seq(t)
                return _seq(_elems(t))
            return _seq(S)
        if name == "next":
            return _elems(pos[0][1]) if pos else U
        if name == "enumerate":
            return _seq(_seq(S | (_elems(pos[0][1]) if pos else U)))
        if name == "zip":
            inner = EMPTY
            for _, t in pos:
                inner = inner | _elems(t)
            return _seq(_seq(inner or U))
        if name == "dict":
            v = EMPTY
            for t in kws.values():
                v = v | t
            for _, t in pos:
                v = v | _elems(t)
            return _seq(v or S)
        if name == "map":
            return _seq(U)
        if name in ("staticmethod", "classmethod", "property"):
            return U
        if name in ("SystemExit", "KeyboardInterrupt"):
            return frozenset({("Q", "builtins." + name)})
        return U

    def dynamic_builtin(self, node, name, pos):
        if name == "__import__":
            arg = node.args[0] if node.args else None
            lit = _const_str(arg) if arg is not None else None
            self.report(node, "dynamic-code", "calls __import__")
            if lit is not None:
                self.check_import_name(lit, node)
                return frozenset({("Q", lit.split(".")[0])})
            return U
        what = {"exec": "runs exec()", "eval": "runs eval()", "compile": "compiles code with "
                "compile()", "globals": "reads globals()", "locals": "reads locals()",
                "vars": "reads vars()", "breakpoint": "calls breakpoint()"}[name]
        self.report(node, "dynamic-code", what)
        return U

    def call_getattr_family(self, node, name, pos):
        if len(pos) < 2:
            return U
        obj = pos[0][1]
        arg_node = node.args[1] if len(node.args) > 1 else None
        lit = _const_str(arg_node) if arg_node is not None else None
        own = bool(obj) and all(isinstance(a, tuple) and a[0] in ("I", "C", "SUPER")
                                for a in obj)
        if name == "setattr":
            external = self.is_external(obj)
            if external:
                if any(a[1].startswith("torch.backends") for a in obj
                       if isinstance(a, tuple) and a[0] == "Q") and lit is not None:
                    val = node.args[2] if len(node.args) > 2 else None
                    self.check_backend_flag(node, lit, val)
                else:
                    self.report(node, "patching", "setattr on a module or class it does not own")
            elif _tensor(obj):
                self.report(node, "patching", "setattr on a tensor")
            elif lit is not None:
                val = pos[2][1] if len(pos) > 2 else U
                for a in obj:
                    if isinstance(a, tuple) and a[0] in ("I", "C") and a[1] in self.p.classes:
                        self.p.join_attr(self.p.classes[a[1]], lit, val, self.key)
            return S
        if name == "delattr":
            if self.is_external(obj):
                self.report(node, "patching", "delattr on a module or class it does not own")
            return S
        if name == "hasattr":
            return S
        # getattr
        if lit is not None:
            t = self.attribute(node, obj, lit, True)
            # a literal getattr on torch is a reference whether or not it is called
            for a in t:
                if isinstance(a, tuple) and a[0] == "Q":
                    self.check_qual(node, a[1], call=False)
                elif isinstance(a, tuple) and a[0] == "TM":
                    if a[1] not in TENSOR_METHOD_VIEW | TENSOR_METHOD_META | TENSOR_METHOD_ALLOC:
                        self.compute(node, f"getattr takes tensor method .{a[1]}", call=False)
            if len(pos) > 2:
                t = t | pos[2][1]
            return t
        if own:
            # getattr(self, name): any method may be picked
            for a in obj:
                c = self.p.classes.get(a[1])
                if c is None:
                    continue
                for cc in c.mro():
                    for m in cc.methods.values():
                        self.p.add_edge(self.key, m.key, ref=True)
                t = EMPTY
                for cc in c.mro():
                    for v in list(cc.attrs.values()) + list(cc.class_attrs.values()):
                        t = t | v
                return (t | U) if t else U
            return U
        if obj <= {"S"} or all(_is_seq(a) for a in obj if isinstance(a, tuple)) and not (
                obj & TENSORISH) and "U" not in obj and any(_is_seq(a) for a in obj):
            return U
        self.report(node, "dynamic-code", "getattr with a computed attribute name on a module, "
                    "tensor or unknown object")
        return U

    def is_external(self, t):
        return any(isinstance(a, tuple) and a[0] in ("Q", "MOD", "PKG") for a in t)

    # -- imports ---------------------------------------------------------

    def check_import_name(self, name, node, local=False):
        if name == HARNESS_PACKAGE or name.startswith(HARNESS_PACKAGE + "."):
            self.report(node, "harness-import", f"imports {name}: the evaluation harness's own modules are "
                                                "off limits to a kernel")
            return
        if local:
            if any(REFERENCE_MODULE_RE.match(c) and not c[:1].isdigit()
                   for c in name.split(".")):
                self.report(node, "reference-import",
                            f"imports {name}, which looks like the problem/reference module")
            return
        for prefix, rule, why in IMPORT_RULES:
            if rule and (name == prefix or name.startswith(prefix + ".")):
                if prefix == "concurrent" and name.startswith("concurrent.futures.process"):
                    continue
                self.report(node, rule, f"imports {name}: {why}")
                return
        comps = name.split(".")
        if name == "__main__" or "__main__" in comps:
            self.report(node, "reference-import", "imports __main__ (where the reference lives)")
            return
        if any(REFERENCE_MODULE_RE.match(c) for c in comps):
            self.report(node, "reference-import",
                        f"imports {name}, which looks like the problem/reference module")

    def check_import_from(self, mod, level, node, local=False):
        full_names = [f"{mod}.{a.name}" if mod else a.name for a in node.names]
        if mod:
            before = len(self.p.violations)
            self.check_import_name(mod, node, local)
            if len(self.p.violations) > before:
                return
        for a, full in zip(node.names, full_names):
            if a.name in REFERENCE_NAMES:
                self.report(node, "reference-import",
                            f"imports {a.name} from {mod or '.'}: the reference is off limits")
                return
            if a.name == "*" or local:
                continue
            before = len(self.p.violations)
            for prefix, rule, why in IMPORT_RULES:
                if rule and (full == prefix or full.startswith(prefix + ".")):
                    self.report(node, rule, f"imports {full}: {why}")
                    break
            if len(self.p.violations) > before:
                return


LAYER_IDENTITY = ("LI",)
_OP_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
               ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>",
               ast.BitOr: "|", ast.BitAnd: "&", ast.BitXor: "^", ast.MatMult: "@"}


class _ModuleScope(Scope):
    """Terminates a function's scope chain at the module (class bodies are skipped)."""

    def __init__(self, fi):
        super().__init__(None, fi.env)
        self.vars = fi.env


# --------------------------------------------------------------------------
# Classification of qualified names
# --------------------------------------------------------------------------

# Modules that other modules re-export as attributes (os.sys, torch.sys,
# triton.os): reached that way they are judged as themselves.
ALIASED_MODULES = {"sys", "gc", "inspect", "importlib", "builtins", "os", "ctypes", "subprocess"}


def _under(q, names):
    return any(q == n or q.startswith(n + ".") for n in names)


def classify(q):
    """(kind, message) for a use of the fully qualified name q."""
    parts = q.split(".")
    root = parts[0]
    for k in range(1, len(parts)):
        if parts[k] in ALIASED_MODULES:
            return classify(".".join(parts[k:]))
    if root == "builtins":
        name = parts[1] if len(parts) > 1 else ""
        if name in ("exec", "eval", "compile", "__import__", "globals", "locals", "vars",
                    "breakpoint"):
            return "dynamic-code", f"uses {name}"
        if name == "open":
            return "file-io", "opens a file"
        if name in ("exit", "quit"):
            return "exit", f"uses {name}()"
        return "builtin", ""
    if root == "torch":
        return _classify_torch(q, parts)
    if root == "triton":
        if q.startswith("triton.ops") or q.startswith("triton.kernels"):
            return "foreign-library", f"uses {q}, a library kernel, not its own Triton"
        return "ok", ""
    if root == "numpy":
        last = parts[-1]
        if last in ("load", "save", "savez", "savez_compressed", "fromfile", "memmap",
                    "loadtxt", "savetxt", "genfromtxt", "tofile"):
            return "file-io", f"uses {q}"
        if len(parts) == 1 or parts[1] in ("random", "dtype", "float32", "float16", "int64",
                                          "int32", "ndarray", "pi", "e", "inf", "nan",
                                          "finfo", "iinfo", "newaxis"):
            return "ok", ""
        return "numpy", ""
    if root == HARNESS_PACKAGE:
        return "harness-import", f"uses {q}: the evaluation harness's own modules are off limits to a kernel"
    if root == "resource" and len(parts) > 1 and parts[1] in ("setrlimit", "prlimit"):
        return "privileges", f"uses {q} (changes the process's resource limits)"
    if root in ("os", "posix"):
        last = parts[-1]
        if len(parts) == 2 and last in OS_PRIVILEGES:
            return "privileges", f"uses {q} (changes the process's identity, namespaces or privileges)"
        if len(parts) == 2:
            if last in ("system", "popen", "fork", "forkpty", "kill", "killpg", "setsid",
                        "setpgrp", "setpgid", "startfile", "posix_spawn", "posix_spawnp",
                        "wait", "waitpid") or last.startswith("exec") or last.startswith("spawn"):
                return "process", f"uses {q}"
            if last in ("_exit", "abort"):
                return "exit", f"uses {q}"
            if last in ("open", "remove", "unlink", "rename", "replace", "listdir", "scandir",
                        "walk", "makedirs", "mkdir", "rmdir", "write", "read", "fdopen", "pipe",
                        "truncate", "symlink", "link", "chmod", "chdir", "mkfifo", "memfd_create",
                        "sendfile", "removedirs"):
                return "file-io", f"uses {q}"
            if last in ("putenv", "unsetenv"):
                return "patching", f"uses {q} (changes the environment)"
        if len(parts) == 3 and parts[1] == "environ" and parts[2] in (
                "update", "setdefault", "pop", "clear", "__setitem__", "popitem"):
            return "patching", f"uses {q} (changes the environment)"
        return "ok", ""
    if root == "sys":
        if q == "sys.exit":
            return "exit", "calls sys.exit()"
        if _under(q, ("sys._getframe", "sys._current_frames", "sys.exc_info", "sys.last_traceback",
                      "sys.exception", "sys.last_exc")):
            return "frame-inspection", f"uses {q}"
        if _under(q, ("sys.settrace", "sys.setprofile", "sys.addaudithook", "sys.setswitchinterval",
                      "sys.monitoring", "sys.gettrace", "sys.getprofile")):
            return "patching", f"uses {q}"
        if q == "sys.modules" or q.startswith("sys.modules."):
            return "dynamic-code", "reads sys.modules (looks modules up dynamically)"
        if _under(q, ("sys.meta_path", "sys.path_hooks", "sys.path_importer_cache")):
            return "dynamic-code", f"uses {q} (the import system's hooks)"
        return "ok", ""
    if root == "gc":
        if q in ("gc.get_objects", "gc.get_referrers", "gc.get_referents"):
            return "frame-inspection", f"uses {q} (finds other objects in the process)"
        if q in ("gc.disable", "gc.freeze", "gc.set_threshold", "gc.callbacks", "gc.set_debug"):
            return "patching", f"uses {q}"
        return "ok", ""
    if root == "inspect":
        if len(parts) == 1 or parts[1] in ("signature", "isclass", "isfunction", "ismethod",
                                          "getfullargspec", "Parameter", "Signature",
                                          "iscoroutinefunction"):
            return "ok", ""
        return "frame-inspection", f"uses {q}"
    if root == "traceback" and len(parts) > 1 and parts[1] in ("extract_stack", "walk_stack",
                                                              "print_stack", "format_stack"):
        return "frame-inspection", f"uses {q}"
    if root == "threading" and len(parts) > 1 and parts[1] in ("settrace", "setprofile"):
        return "patching", f"uses {q}"
    if root == "importlib":
        if q in ("importlib.import_module",):
            return "import-module", ""
        if len(parts) > 1:
            return "dynamic-code", f"uses {q}"
        return "module", ""
    if root == "types" and len(parts) > 1 and parts[1] in ("FunctionType", "CodeType",
                                                          "ModuleType", "MethodType",
                                                          "LambdaType"):
        return "dynamic-code", f"builds code or modules with {q}"
    if root == "operator" and len(parts) > 1:
        if parts[1] in ("matmul", "imatmul", "__matmul__", "__imatmul__"):
            return "matmul-ref", f"uses {q} (matrix multiply in PyTorch)"
        return "operator", ""
    if root == "functools":
        return "ok", ""
    if q in ("io.open", "io.FileIO", "codecs.open", "io.open_code"):
        return "file-io", f"uses {q}"
    if root == "einops" and len(parts) > 1:
        if parts[1] in ("einsum", "reduce", "repeat", "pack", "unpack"):
            return "compute", f"computes with {q}"
        return "view", ""
    if root == "math" and len(parts) > 1:
        return "ok", ""
    return "ok", ""


def _classify_torch(q, parts):
    n = len(parts)
    if n == 1:
        return "module", ""
    p1 = parts[1]
    internal = ("ops", "_C", "_ops", "_prims", "_refs", "_decomp", "_VF", "library",
                "_tensor", "_functorch", "_vmap_internals", "_prims_common", "_higher_order_ops")
    if p1 in internal:
        if q in ("torch.ops.load_library",):
            return "native-code", "loads a native library into torch"
        return "aten", f"uses {q}: torch internals/aten ops bypass the rules"
    if p1 in ("compile", "_dynamo", "_inductor", "fx", "export", "_export", "compiler"):
        return "torch-compile", f"uses {q}"
    if p1 == "jit":
        if n > 2 and parts[2] in ("is_scripting", "is_tracing", "Final", "ignore", "unused",
                                  "annotations"):
            return "ok", ""
        return "torch-compile", f"uses {q} (TorchScript)"
    if p1 in ("load", "save", "from_file", "hub"):
        return "file-io", f"uses {q}"
    if p1 == "set_float32_matmul_precision":
        return "tf32", "set_float32_matmul_precision enables TF32 matmuls"
    if p1 in ("multiprocessing", "distributed"):
        return "process", f"uses {q}"
    if p1 == "Stream":
        return "side-stream", f"uses {q}"
    if p1 == "cuda":
        if n == 2:
            return "module", ""
        p2 = parts[2]
        if p2 in TORCH_CUDA_STREAM:
            return "side-stream", f"uses torch.cuda.{p2} (streams and graphs escape the timer)"
        if p2 == "jiterator":
            return "native-code", "compiles CUDA kernels with jiterator"
        return "meta", ""
    if p1 in ("backends", "version", "__version__", "types", "amp", "autocast", "random",
              "overrides", "hub", "mps", "xpu"):
        return "meta", ""
    if p1 == "autograd":
        if n == 2:
            return "module", ""
        if parts[2] in ("Function", "function"):
            return "autograd-base", ""
        if parts[2] in ("grad_mode", "no_grad", "enable_grad", "set_grad_enabled",
                        "inference_mode"):
            return "meta", ""
        return "compute", f"uses {q}"
    if p1 == "Tensor":
        if n == 2:
            return "meta", ""
        m = parts[2]
        if m in TENSOR_METHOD_VIEW or m in TENSOR_METHOD_META or m in TENSOR_METHOD_ALLOC \
                or m in ("__init__", "__new__", "__name__"):
            return "view" if m in TENSOR_METHOD_VIEW else "meta", ""
        return "compute", f"uses torch.Tensor.{m} (a PyTorch compute method)"
    if p1 == "nn":
        if n == 2:
            return "module", ""
        p2 = parts[2]
        if p2 == "functional":
            if n == 3:
                return "module", ""
            return "compute", f"uses torch.nn.functional.{parts[3]} (PyTorch compute; do it in a Triton kernel)"
        if p2 == "init":
            return ("module", "") if n == 3 else ("init", "")
        if p2 in ("parameter",) and n > 3:
            p2 = parts[3]
            rest = parts[4:]
        else:
            rest = parts[3:]
        if p2 in ("modules", "utils", "grad", "common_types", "attention", "parallel",
                  "intrinsic", "quantized", "qat"):
            if p2 == "modules" and n > 4:
                cls = parts[-1] if parts[-1][:1].isupper() else None
                if cls:
                    return ("container", "") if cls in NN_CONTAINERS else ("layer", "")
            if p2 == "modules" and n <= 4:
                return "module", ""
            return "compute", f"uses {q}"
        if p2 in NN_PARAM:
            return "param", ""
        if p2 in NN_CONTAINERS:
            if rest and rest[0] in ("forward", "__call__", "_call_impl", "_wrapped_call_impl"):
                return "compute", f"uses {q}"
            return ("container", "") if not rest else ("meta", "")
        if p2 == "Identity":
            return "identity", ""
        if p2[:1].isupper():
            if rest:
                if rest[0] in ("__init__", "__new__", "__name__", "reset_parameters",
                               "extra_repr") or rest[0] in LAYER_OK_METHODS:
                    return "meta", ""
                return "compute", f"uses {q} (a torch.nn layer's compute)"
            return "layer", ""
        return "compute", f"uses {q}"
    if p1 in TORCH_COMPUTE_NAMESPACES:
        if n == 2:
            return "module", ""
        if p1 == "utils" and parts[2] in ("data", "checkpoint", "hooks", "benchmark",
                                          "_pytree", "dlpack"):
            if parts[2] == "checkpoint":
                return "compute", f"uses {q}"
            if parts[2] == "dlpack":
                return "ok", ""
            return "meta", ""
        if p1 == "utils" and parts[2] == "cpp_extension":
            return "native-code", f"uses {q}"
        return "compute", f"uses {q} (PyTorch compute; do it in a Triton kernel)"
    if p1 in TORCH_ALLOC:
        return "alloc", ""
    if p1 in TORCH_VIEW:
        return "view", ""
    if p1 in TORCH_META:
        return "meta", ""
    if p1[:1].isupper():
        return "meta", ""
    return "compute", f"uses {q} (PyTorch compute; do it in a Triton kernel)"


# --------------------------------------------------------------------------
# Parameter evidence
# --------------------------------------------------------------------------

_TENSOR_EVIDENCE_ATTRS = {
    "shape", "stride", "contiguous", "view", "reshape", "dtype", "device", "numel",
    "data_ptr", "is_contiguous", "ndim", "permute", "transpose", "unsqueeze", "squeeze",
    "flatten", "element_size", "is_cuda", "new_empty", "expand", "storage_offset",
}
_SCALAR_EVIDENCE_CALLS = {"range", "cdiv", "next_power_of_2", "sqrt", "log2", "ceil", "floor"}


def _terminates(stmts):
    return bool(stmts) and isinstance(stmts[-1], (ast.Return, ast.Raise, ast.Continue,
                                                  ast.Break))


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


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------

def _finish(proj):
    seen = set()
    out = []
    for v in proj.syntax_errors + proj.violations:
        k = (v["file"], v["line"], v["rule"])
        if k in seen:
            continue
        seen.add(k)
        out.append(v)
    out.sort(key=lambda v: (v["file"] != proj.main_display, v["file"], v["line"], v["rule"]))
    return out


def check_source(source: str, filename: str, allow_pytorch: bool = False) -> list:
    """Checks one candidate given as text. Relative imports resolve next to
    `filename` when it names a real directory."""
    proj = Project(allow_pytorch)
    proj.main_display = filename
    path = os.path.abspath(filename)
    proj.root_dir = os.path.dirname(path)
    fi = proj.add_source(path, filename, source)
    if fi is None:
        return _finish(proj)
    proj.run()
    return _finish(proj)


def check_file(path: str, allow_pytorch: bool = False, extra_files=None) -> list:
    """Checks a candidate file, the sibling candidate files it imports, and
    extra_files. Raises OSError/UnicodeDecodeError when `path` cannot be read."""
    with open(path, "r", encoding="utf-8") as f:
        source = f.read()
    proj = Project(allow_pytorch)
    proj.main_display = path
    ap = os.path.abspath(path)
    proj.root_dir = os.path.dirname(ap)
    fi = proj.add_source(ap, path, source)
    for extra in extra_files or []:
        # extra files are candidate files wherever they live; named as given
        if os.path.abspath(extra) not in proj.files:
            with open(extra, "r", encoding="utf-8") as f:
                proj.add_source(extra, extra, f.read())
    if fi is None:
        return _finish(proj)
    proj.run()
    return _finish(proj)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    allow = False
    if "--allow-pytorch" in argv:
        argv.remove("--allow-pytorch")
        allow = True
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m mkevolve_worker.static_check [--allow-pytorch] K.py [EXTRA.py ...]",
              file=sys.stderr)
        return 2
    path, extras = argv[0], argv[1:]
    for p in [path] + extras:
        try:
            with open(p, "r", encoding="utf-8") as f:
                f.read()
        except (OSError, UnicodeDecodeError) as e:
            print(f"{p}: cannot read: {e}", file=sys.stderr)
            return 2
    violations = check_file(path, allow_pytorch=allow, extra_files=extras)
    for v in violations:
        print(f"{v['file']}:{v['line']}: {v['rule']}: {v['message']}")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
