"""Classification of fully qualified names (torch.nn.functional.relu,
os.fork, ...): what kind of use each is, and the message when it breaks a
rule."""

from __future__ import annotations

from .rules import HARNESS_PACKAGE, OS_PRIVILEGES
from .names import (LAYER_OK_METHODS, NN_CONTAINERS, NN_PARAM, TENSOR_METHOD_ALLOC, TENSOR_METHOD_META,
                    TENSOR_METHOD_VIEW, TORCH_ALLOC, TORCH_COMPUTE_NAMESPACES, TORCH_CUDA_STREAM, TORCH_META,
                    TORCH_VIEW)


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
