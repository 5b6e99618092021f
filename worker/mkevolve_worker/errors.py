"""Outcome kinds, their coarse statuses, and short messages an LLM can act on.

Nothing here imports torch: exceptions are recognised by class name and text,
so the same code classifies errors in the server and in forked children.
"""

from __future__ import annotations

import os
import re
import signal
import traceback

# Coarse statuses (the C++ side's eval::Status).
CORRECT = "correct"
INCORRECT = "incorrect"
CHEATING = "cheating"
COMPILE_ERROR = "compile_error"
RUNTIME_ERROR = "runtime_error"
TIMEOUT = "timeout"
CRASHED = "crashed"
# The harness failed (the reference side), not the candidate: no verdict on it.
NO_VERDICT = "no_verdict"

# Fine-grained kinds and the status each one implies.
STATUS_OF_KIND = {
    "ok": CORRECT,
    # The candidate did not build.
    "syntax_error": COMPILE_ERROR,
    "import_error": COMPILE_ERROR,
    "missing_model_new": COMPILE_ERROR,
    "triton_compile_error": COMPILE_ERROR,
    # It built but failed while running.
    "illegal_memory_access": RUNTIME_ERROR,
    "device_assert": RUNTIME_ERROR,
    "oom": RUNTIME_ERROR,
    "construct_error": RUNTIME_ERROR,
    "runtime_error": RUNTIME_ERROR,
    "malformed_result": RUNTIME_ERROR,
    # The process died or never finished.
    "segfault": CRASHED,
    "killed": CRASHED,
    "exit_without_result": CRASHED,   # sys.exit / os._exit: the process ended with no result
    "hang": TIMEOUT,
    # It ran and returned something wrong.
    "wrong_shape": INCORRECT,
    "wrong_dtype": INCORRECT,
    "wrong_structure": INCORRECT,
    "wrong_device": INCORRECT,
    "nan": INCORRECT,
    "mismatch": INCORRECT,
    "constant_output": INCORRECT,
    "input_mutation": INCORRECT,
    # It ran, but broke the rules.
    "static_violation": CHEATING,
    "foreign_kernel": CHEATING,
    "no_triton_launch": CHEATING,
    "host_compute": CHEATING,
    "stale_output": CHEATING,
    "timing_mismatch": CHEATING,
    "problem_tampered": CHEATING,   # the problem's files changed while the candidate ran
    # Not the candidate's doing: the server's own side failed.
    "reference_failed": NO_VERDICT,
    # A candidate whose outputs were all correct ran past the deadline of the
    # harness's own profiling or timing pass: the harness planned a pass that
    # did not fit (contention, slow calls), so nothing is charged to it.
    "pass_overrun": NO_VERDICT,
}

KINDS = frozenset(STATUS_OF_KIND)

MAX_MESSAGE = 3000

# Lines PyTorch appends to every CUDA error; they bury the cause.
_CUDA_HINTS = (
    "CUDA kernel errors might be asynchronously reported",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING",
    "Compile with `TORCH_USE_CUDA_DSA`",
    "Compile with TORCH_USE_CUDA_DSA",
    "Device-side assertion tracking was not enabled",
    "Search for `cudaError",
    "Exception raised from",
)


def status_of(kind: str) -> str:
    return STATUS_OF_KIND.get(kind, RUNTIME_ERROR)


def clean_cuda_text(text: str) -> str:
    """Drops PyTorch's debugging hints so the cause comes first."""
    lines = []
    for line in text.splitlines():
        if any(h in line for h in _CUDA_HINTS):
            continue
        # C++ frame dumps that follow "Exception raised from ...".
        if re.match(r"^frame #\d+:", line.strip()):
            continue
        lines.append(line.rstrip())
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines).strip()


def _class_names(exc: BaseException) -> list[str]:
    return [c.__name__ for c in type(exc).__mro__]


def classify_exception(exc: BaseException) -> str:
    """The kind of a failure raised while importing or running a candidate."""
    names = _class_names(exc)
    # Classify the cause, not PyTorch's hints ("... enable device-side assertions").
    text = clean_cuda_text(str(exc))
    low = text.lower()
    module = type(exc).__module__ or ""
    if "SystemExit" in names:
        return "exit_without_result"
    if "SyntaxError" in names or "IndentationError" in names or "TabError" in names:
        return "syntax_error"
    if any(p in low for p in ("illegal memory access", "misaligned address", "illegal address",
                              "unspecified launch failure", "operation not supported on global/shared address",
                              "illegal instruction", "invalid program counter")):
        return "illegal_memory_access"
    if "device-side assert" in low or "device side assert" in low or ("assert" in low and "cuda" in low):
        return "device_assert"
    if "OutOfMemoryError" in names or "out of memory" in low:
        return "oom"
    if "OutOfResources" in names:
        return "triton_compile_error"
    if module.startswith("triton") and ("CompilationError" in names or "CompileTimeAssertionFailure" in names
                                         or "compil" in module):
        return "triton_compile_error"
    if any(n in ("CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct") for n in names):
        return "triton_compile_error"
    if "ModuleNotFoundError" in names or "ImportError" in names:
        return "import_error"
    return "runtime_error"


def _frame_is_ours(filename: str) -> bool:
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.abspath(filename).startswith(here + os.sep)


def trimmed_traceback(exc: BaseException, focus_files: list[str] | None = None, max_frames: int = 6) -> str:
    """A short traceback: the exception line first, then the candidate's frames.

    Frames from the worker itself are dropped. When focus_files is given, frames
    in those files are preferred; library frames after the last focus frame are
    kept (up to two) because they often name the failing call.
    """
    focus = {os.path.abspath(f) for f in (focus_files or [])}
    # The candidate's own frames are named relative to its files' common folder
    # (a composed package: "subkernel_implementations/alpha.py"), so that a
    # failure inside one subkernel says which; other frames by their base name.
    root = os.path.commonpath([os.path.dirname(f) for f in focus]) if focus else None

    def shown(filename: str) -> str:
        full = os.path.abspath(filename)
        if root and full in focus:
            return os.path.relpath(full, root)
        return os.path.basename(filename)

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _frame_is_ours(f.filename)]
    if focus:
        idx = [i for i, f in enumerate(frames) if os.path.abspath(f.filename) in focus]
        if idx:
            keep = [frames[i] for i in idx]
            keep += frames[idx[-1] + 1: idx[-1] + 3]
            frames = keep
    frames = frames[-max_frames:]
    head = f"{type(exc).__name__}: {clean_cuda_text(str(exc))}".strip()
    # SyntaxError carries its location outside the traceback.
    if isinstance(exc, SyntaxError) and exc.filename:
        loc = f"{os.path.basename(exc.filename)}:{exc.lineno}"
        src = (exc.text or "").rstrip("\n")
        head = f"{loc}: {type(exc).__name__}: {exc.msg}"
        if src:
            head += f"\n    {src.strip()}"
    lines = [head]
    if frames:
        lines.append("Traceback (most recent call last, worker frames removed):")
        for f in frames:
            lines.append(f"  {shown(f.filename)}:{f.lineno} in {f.name}")
            if f.line:
                lines.append(f"    {f.line.strip()}")
    return shorten("\n".join(lines))


def shorten(text: str, limit: int = MAX_MESSAGE) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2 - 20
    return text[:half] + "\n... [trimmed] ...\n" + text[-half:]


def describe_signal(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def kind_for_signal(signum: int) -> str:
    if signum in (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT, signal.SIGSYS):
        return "segfault"
    return "killed"


def redact_env_secrets(text: str) -> str:
    """Hides values of secret-looking environment variables present in this process."""
    for k, v in os.environ.items():
        if looks_secret(k) and len(v) >= 8:
            text = text.replace(v, "[REDACTED]")
    return text


_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "SESSION", "COOKIE")


def looks_secret(name: str) -> bool:
    """Same rule as the C++ mk::looks_secret (src/util/env.cc)."""
    u = name.upper()
    if any(w in u for w in _SECRET_WORDS):
        return True
    return u.startswith("AWS_") or u.startswith("AZURE_") or u.startswith("GOOGLE_APPLICATION")
