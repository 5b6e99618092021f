"""One timed phase per GPU at a time.

Several worker servers may share a GPU (the pool's --slots-per-gpu, or two
mkevolve processes on one machine). Compiling and correctness trials can overlap
safely; timing cannot: a candidate timed while another kernel runs beside it
looks slower than it is. So the trusted parent takes an exclusive flock on a file
named for the GPU before it lets a candidate (or a baseline child) start its
timed phase, and drops it when that child exits. The candidate never holds the
lock: it is forked before the lock is taken. Every other GPU work of an
evaluation runs under the same lock taken shared: an evaluation's correctness
trials (its reference and candidate, from the reference's start to the last
comparison) and a candidate's profiling process's burst of profiled calls
(runtime_check.py). Such work may overlap other such work, never a timed
phase: measured on one H200, timing beside neighbours' correctness trials moved
reference-as-candidate speedups by up to 2.4x (docs/GPU-RESULTS.md).

A timed phase that waits must not wait forever behind a stream of shared
holders, so the lock has a gate (the same path + ".gate"): an exclusive taker
holds the gate while it waits, and a shared taker passes the gate (takes it
shared and drops it) before it queues. Once a timed phase waits, no new shared
work starts; the work already running finishes, then the timing runs.

The pool names the file in $MKEVOLVE_TIMING_LOCK (one per physical GPU, shared
by every pool on the host); a standalone worker falls back to a file named for
$CUDA_VISIBLE_DEVICES in the temp directory.
"""
from __future__ import annotations

import fcntl
import os
import re
import tempfile
import time


def default_path() -> str:
    env = os.environ.get("MKEVOLVE_TIMING_LOCK")
    if env:
        return env
    dev = os.environ.get("CUDA_VISIBLE_DEVICES") or "default"
    dev = re.sub(r"[^A-Za-z0-9_.-]", "_", dev)[:80]
    return os.path.join(tempfile.gettempdir(), f"mkevolve-timing-{dev}.lock")


def _same_file(fd: int, path: str) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


class TimingLock:
    """shared=True takes the lock shared instead: for GPU work that may run
    beside other such work but never during a timed phase (a candidate's
    profiling process runs its burst of profiled calls under it)."""

    def __init__(self, path: str | None = None, shared: bool = False):
        self.path = path or default_path()
        self.shared = shared
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, max_wait_s: float) -> dict:
        """Waits up to max_wait_s for the lock (the gate first). Returns a
        record for the verdict's checks: {"path", "waited_s", "held"}. Never
        raises: if the file cannot be opened or the wait runs out, the work goes
        ahead unlocked and the record says so (held: false, plus "error")."""
        t0 = time.monotonic()
        rec: dict = {"waited_s": 0.0, "held": False}
        if self._fd is not None:
            rec["held"] = True
            return rec
        deadline = t0 + max_wait_s
        mode = fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX
        # A gate that cannot be opened or locked gives no priority, but the lock
        # still excludes; a gate busy past the deadline is a busy lock.
        gate, err, busy = _lock(self.path + ".gate", mode, deadline, max_wait_s)
        fd = None
        try:
            if not busy:
                fd, err, _ = _lock(self.path, mode, deadline, max_wait_s)
        finally:
            if gate is not None:
                _unlock(gate)
        if fd is not None:
            self._fd = fd
            rec["held"] = True
        else:
            rec["error"] = err
        rec["waited_s"] = round(time.monotonic() - t0, 4)
        return rec

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            _unlock(fd)


def _unlock(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _lock(path: str, mode: int, deadline: float, max_wait_s: float):
    """(fd, None, False) with path locked in mode, or (None, why, busy): busy
    once the deadline has passed, not busy where the file cannot be opened or
    locked at all."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as e:
        return None, f"cannot open the GPU timing lock {path}: {e.strerror}", False
    delay = 0.002
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            if not _same_file(fd, path):
                # The file was unlinked or replaced since we opened it: a lock
                # on the old inode excludes no one. Open the current one.
                os.close(fd)
                try:
                    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
                except OSError as e:
                    return None, f"cannot open the GPU timing lock {path}: {e.strerror}", False
                continue
            return fd, None, False
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None, f"the GPU timing lock was busy for {max_wait_s:g} s; went ahead without it", True
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        except OSError as e:
            os.close(fd)
            return None, f"cannot lock {path}: {e.strerror}", False
