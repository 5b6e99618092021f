"""One timed phase per GPU at a time.

Several worker servers may share a GPU (the pool's --slots-per-gpu, or two
mkevolve processes on one machine). Compiling and correctness trials can overlap
safely; timing cannot: a candidate timed while another kernel runs beside it
looks slower than it is. So the trusted parent takes an exclusive flock on a file
named for the GPU before it lets a candidate (or a baseline child) start its
timed phase, and drops it when that child exits. The candidate never holds the
lock: it is forked before the lock is taken. A candidate's profiling process
runs its burst of profiled calls (runtime_check.py) under the same lock taken
shared: such bursts may overlap each other, never a timed phase.

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
        """Waits up to max_wait_s for the lock. Returns a record for the
        verdict's checks: {"path", "waited_s", "held"}. Never raises: if the file
        cannot be opened or the wait runs out, the timing goes ahead unlocked and
        the record says so (held: false, plus "error")."""
        t0 = time.monotonic()
        rec: dict = {"waited_s": 0.0, "held": False}
        if self._fd is not None:
            rec["held"] = True
            return rec
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as e:
            rec["error"] = f"cannot open the GPU timing lock {self.path}: {e.strerror}"
            return rec
        delay = 0.002
        while True:
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                if not _same_file(fd, self.path):
                    # The file was unlinked or replaced since we opened it: a lock
                    # on the old inode excludes no one. Open the current one.
                    os.close(fd)
                    try:
                        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
                    except OSError as e:
                        rec["error"] = f"cannot open the GPU timing lock {self.path}: {e.strerror}"
                        break
                    continue
                self._fd = fd
                rec["held"] = True
                break
            except BlockingIOError:
                if time.monotonic() - t0 >= max_wait_s:
                    os.close(fd)
                    rec["error"] = f"the GPU timing lock was busy for {max_wait_s:g} s; timed without it"
                    break
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
            except OSError as e:
                os.close(fd)
                rec["error"] = f"cannot lock {self.path}: {e.strerror}"
                break
        rec["waited_s"] = round(time.monotonic() - t0, 4)
        return rec

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
