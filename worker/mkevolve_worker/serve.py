"""The worker server: `python -m mkevolve_worker serve [--test-mode]`.

Protocol v1 (docs/ARCHITECTURE.md). One request at a time; each gets
progress lines and exactly one final result or error. The server pre-imports
torch and Triton but never initialises CUDA, so every child it forks can.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
import traceback

from . import children, errors, isolation, sandbox, sandbox_selftest, spares
from .spares import Launcher as SparesLauncher
from .protocol import PROTOCOL_VERSION, Channel


def triton_reads_f32_default(triton_module) -> bool:
    """Whether the installed Triton reads TRITON_F32_DEFAULT (3.x does, in
    knobs.py or language/semantic.py; older ones ignore it)."""
    root = os.path.dirname(getattr(triton_module, "__file__", "") or "")
    for rel in ("knobs.py", os.path.join("language", "semantic.py"), os.path.join("language", "core.py")):
        try:
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                if "TRITON_F32_DEFAULT" in f.read():
                    return True
        except OSError:
            pass
    return False


def preimport() -> dict:
    """Imports torch and Triton once (children inherit them through fork).
    Returns versions and, when torch is missing, an error message."""
    info = {"torch": None, "triton": None, "error": None, "triton_error": None}
    try:
        import torch
        info["torch"] = torch.__version__.split("+")[0] if "+" in torch.__version__ else torch.__version__
        info["torch_full"] = torch.__version__
        # The server compares on CPU with one thread; children restore the count.
        children.ORIG_THREADS = torch.get_num_threads()
        torch.set_num_threads(1)
        import torch.profiler  # noqa: F401  (children profile; import once here)
    except Exception as e:  # noqa: BLE001
        info["error"] = (f"torch is not importable by {sys.executable} ({type(e).__name__}: {e}); "
                         f"install PyTorch for this interpreter or choose another with --python / MKEVOLVE_PYTHON")
        return info
    try:
        import triton
        info["triton"] = triton.__version__
        # Whether this Triton reads the fp32 tl.dot default the candidates get (spares.Launcher).
        info["triton_f32_default"] = spares.TRITON_F32_DEFAULT if triton_reads_f32_default(triton) else None
        try:
            import triton.language  # noqa: F401
        except Exception:  # noqa: BLE001
            pass
    except Exception as e:  # noqa: BLE001
        info["triton_error"] = f"{type(e).__name__}: {e}"
    _import_before_forking(info["triton"] is not None)
    return info


def _import_before_forking(triton_ok: bool) -> None:
    """Every module a child may need is imported here, in the trusted server:
    a child imports nothing more from disk before its work (the problem or
    the candidate) runs. The files could have been rewritten by then: every
    candidate runs as the same user."""
    import fcntl, hashlib, mmap, random, resource, traceback  # noqa: F401,E401
    from . import (children, correctness, decompose_check, errors, evaluate, gpulock, loader,  # noqa: F401
                   runtime_check, sandbox, spares, static_check, tensorio, timing)
    from . import coverage  # noqa: F401  (the candidate processes' line collector)
    if triton_ok:
        try:
            from . import warm_kernel  # noqa: F401
        except Exception:  # noqa: BLE001 - a candidate process reports it when warming up
            pass
    # The reference counts its first trial's FLOPs under a dispatch mode
    # (workmodel.counter): its imports and first-use set-up happen here, once,
    # on the CPU, instead of in every reference's first trial.
    children.warm_counter("cpu")


def drop_cwd_from_path() -> None:
    """`python -m` puts the working directory first on sys.path; every child
    inherits it, and candidates can write there. Nothing is imported from it."""
    here = os.path.realpath(os.getcwd())
    sys.path[:] = [p for p in sys.path if p not in ("", ".") and os.path.realpath(p) != here]


class Server:
    def __init__(self, chan: Channel, test_mode: bool, spares: bool = True, sandbox_mode: str | None = None):
        self.chan = chan
        self.test_mode = test_mode
        # Where a server's start goes (hello's startup_s, seconds): the pool
        # records it on the evaluation that waited for it.
        self.started = time.monotonic()
        self.info = preimport()
        self.startup_s = {"preimport": round(time.monotonic() - self.started, 3)}
        self.sandbox_error = None
        try:
            # Every candidate process forked from now on is boxed (sandbox.py).
            sandbox.configure(sandbox_mode, test_mode, SparesLauncher.triton_cache())
        except ValueError as e:
            self.sandbox_error = str(e)
            sandbox.configure("best-effort", test_mode, SparesLauncher.triton_cache())
        self.evaluator = None
        if self.info["torch"]:
            from .evaluate import Evaluator
            self.evaluator = Evaluator(test_mode=test_mode, keep_spares=spares)

    def hello(self) -> dict:
        msg = {"type": "hello", "protocol": PROTOCOL_VERSION, "pid": os.getpid(),
               "python": platform.python_version(), "torch": self.info["torch"], "triton": self.info["triton"],
               "triton_f32_default": self.info.get("triton_f32_default"),
               "cuda": False, "test_mode": self.test_mode}
        if self.info["error"]:
            msg["error"] = self.info["error"]
        if self.evaluator is not None:
            t0 = time.monotonic()
            gi = self.evaluator.gpu_info()
            self.startup_s["gpu_probe"] = round(time.monotonic() - t0, 3)
            msg["cuda"] = bool(gi.get("gpus"))
            msg["gpus"] = len(gi.get("gpus") or [])
            if gi.get("error"):
                msg["cuda_error"] = gi["error"]
            if msg["cuda"] and sandbox.active():
                # What the sandbox leaves of CUDA and its IPC hand-over on this
                # machine, tried once here; the plan falls back where it must.
                t0 = time.monotonic()
                msg["sandbox_selftest"] = sandbox_selftest.self_test(sandbox.PLAN, SparesLauncher.triton_cache(),
                                                                     gpus=gi.get("gpus"))
                self.startup_s["sandbox_selftest"] = round(time.monotonic() - t0, 3)
                # 1: the plan came from a kept verdict (selftest_cache.py), only the seed ran.
                self.startup_s["sandbox_selftest_kept"] = 1 if msg["sandbox_selftest"].get("cached") else 0
        if sandbox.PLAN is not None:
            msg["sandbox"] = sandbox.PLAN.describe()
        if self.sandbox_error:
            msg["sandbox_error"] = self.sandbox_error
        self.startup_s["total"] = round(time.monotonic() - self.started, 3)
        msg["startup_s"] = dict(self.startup_s)
        return msg

    def run(self) -> int:
        self.chan.send(self.hello())
        if self.evaluator is not None:
            self.evaluator.launcher.refill()  # the first candidate's processes warm up now
        while True:
            line = self.chan.read_line()
            if line is None:
                return 0
            if not line.strip():
                continue
            try:
                req = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as e:
                self.chan.send({"id": None, "type": "error", "message": f"malformed request line (not JSON): {e}"})
                continue
            if not isinstance(req, dict):
                self.chan.send({"id": None, "type": "error", "message": "a request must be a JSON object"})
                continue
            rid = req.get("id")
            if not isinstance(rid, int) or isinstance(rid, bool):
                self.chan.send({"id": None, "type": "error", "message": "a request needs an integer id"})
                continue
            op = req.get("op")
            try:
                result = self.dispatch(rid, op, req)
            except Exception as e:  # noqa: BLE001 - the server must survive anything
                from .evaluate import HarnessError, ProblemError, RequestError
                extra = {}
                if isinstance(e, (ProblemError, RequestError, sandbox.SandboxError)):
                    msg = str(e)
                    if isinstance(e, ProblemError) and not isinstance(e, HarnessError):
                        extra["kind"] = "problem_error"  # the problem's own fault, named with its file
                else:
                    msg = f"internal worker error in op {op}: {type(e).__name__}: {e}"
                    traceback.print_exc(file=sys.stderr)
                if op == "eval" and self.evaluator is not None:
                    # An eval that failed before it took its spares left them idle (as a result says).
                    try:
                        extra["spares_idle"] = self.evaluator.launcher.idle()
                    except Exception:  # noqa: BLE001 - the answer matters more than the count
                        pass
                self.chan.send({"id": rid, "type": "error", "message": errors.redact_env_secrets(msg), **extra})
                continue
            self.chan.send({"id": rid, "type": "result", **result})
            if op == "shutdown":
                return 0

    def dispatch(self, rid: int, op, req: dict) -> dict:
        from .evaluate import RequestError
        if op == "ping":
            return {"ok": True}
        if op == "shutdown":
            return {"ok": True}
        if op == "check":
            from .evaluate import Evaluator
            kernel = req.get("kernel")
            if not isinstance(kernel, str):
                raise RequestError("check needs a kernel path")
            return Evaluator(self.test_mode).check(kernel, bool(req.get("allow_pytorch", False)))
        if op == "pin_precision":
            # Source text in, source text out: nothing runs (precision.py).
            from . import precision
            files = req.get("files")
            if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                      for k, v in files.items()):
                raise RequestError("pin_precision needs files: {relative path: source}")
            return precision.pin_files(files)
        if op not in ("eval", "baseline", "gpu_info", "verify_decomposition", "footprint", "problem_check",
                      "calibrate", "refill"):
            raise RequestError(f"unknown op {op!r} (known: ping, gpu_info, check, pin_precision, eval, baseline, "
                               f"verify_decomposition, footprint, problem_check, calibrate, refill, shutdown)")
        if self.evaluator is None:
            raise RequestError(self.info["error"])
        ev = self.evaluator
        if op == "refill":
            # Forks a spare for each role that has none and returns at once;
            # the spares warm up in their own processes.
            return {"ok": True, "forked": ev.launcher.refill()}
        spares_when = req.get("spares", "now")
        if op == "eval" and spares_when not in ("now", "later"):
            raise RequestError(f"eval's spares must be \"now\" or \"later\", not {spares_when!r}")
        ev.refill_at_start = spares_when != "later"
        priority = req.get("priority", 0)
        if op == "eval" and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise RequestError(f"eval's priority must be an integer, not {priority!r}")
        ev.timing_priority = priority if op == "eval" else 0
        ev.progress = lambda phase: self.chan.send({"id": rid, "type": "progress", "phase": phase})
        try:
            if op == "gpu_info":
                return ev.gpu_info()
            if op == "eval":
                out = ev.evaluate(req.get("problem"), req.get("kernel"), req.get("options"))
                # What the evaluation left of the idle spares (with "later",
                # those it did not take): the pool counts their contexts.
                return {**out, "spares_idle": ev.launcher.idle()}
            if op == "baseline":
                return ev.baseline(req.get("problem"), req.get("options"))
            if op == "footprint":
                return ev.footprint_estimate(req.get("problem"))
            if op == "problem_check":
                return ev.problem_check(req.get("problem"), req.get("options"))
            if op == "calibrate":
                return ev.calibrate(req.get("problem"), req.get("options"), req.get("runs", 20))
            return ev.verify_decomposition(req.get("problem"), req.get("decomposed"), req.get("subproblems_dir"),
                                           req.get("options"))
        finally:
            ev.progress = lambda phase: None


def watch_client(fd: int) -> None:
    """Stops this server as soon as its client (mkevolve) is gone. Requests
    are served one at a time on the main thread, so a dead client would be
    noticed only when the current evaluation's answer fails to send: minutes
    with the GPU busy for no one, after a batch stopped by `timeout` or a
    Slurm time limit. A thread polls the answer pipe's write end (fd) for no
    events: Linux reports POLLERR there once no process holds the read end,
    that is when mkevolve has exited (its pipe ends are close-on-exec). A
    client that only closed the request pipe still reads the answers, so
    this does not fire for it. It kills every process the server started
    and exits. (The parent pid would not do: under `unshare --pid` the
    server is its namespace's pid 1.)"""
    import select
    import threading

    def run():
        p = select.poll()
        p.register(fd, 0)
        while True:
            try:
                ready = p.poll()
            except InterruptedError:
                continue
            if any(ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, ev in ready):
                break
        try:
            print("mkevolve-worker: no one reads the answers any more (the client is gone); stopping",
                  file=sys.stderr, flush=True)
            isolation.kill_descendants(spares_too=True)
            isolation.cleanup_dir(isolation.base_tmp())
        finally:
            os._exit(0)
    threading.Thread(target=run, name="client-watch", daemon=True).start()


def main(test_mode: bool, spares: bool = True, sandbox_mode: str | None = None) -> int:
    chan = Channel.claim_stdio()
    isolation.become_supervisor()
    watch_client(chan.out_fd)
    server = None
    try:
        server = Server(chan, test_mode, spares, sandbox_mode)
        return server.run()
    except BrokenPipeError:
        return 0
    finally:
        if server is not None and server.evaluator is not None:
            server.evaluator.close()
        isolation.kill_descendants(spares_too=True)
        isolation.cleanup_dir(isolation.base_tmp())
