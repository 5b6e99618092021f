"""The rules: their stable ids, and the modules whose import alone breaks one.

A violation is {"file", "line", "rule", "message"}; "rule" is a key of RULES.
"""

from __future__ import annotations

import re


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
