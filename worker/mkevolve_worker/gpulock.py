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

Timed phases that wait go highest priority first (best effort). The search
gives each evaluation the beam rounds its subproblem has left (the pool sends it
as the eval request's "priority"): the chain of rounds that decides when the
iteration ends is timed before the candidates of shorter chains, which have
time to spare. A waiting timed phase registers in the directory path +
".waiting" (a file named for its priority, locked while it waits, so a file of
a process that died is seen as stale and removed); one of lower priority stays
off the gate, and leaves it, while a higher one waits, for at most
MAX_DEFER_S in all, so that a stream of higher ones cannot starve it. Equal
priorities keep the order the locks give.

An evaluation's shared work defers the same way (TimingLock(shared=True,
priority=p)): an evaluation of priority p > 0 registers in path + ".active"
(register_active) from before its first GPU work until its timed phase is over,
and shared work of lower priority waits to start while such an evaluation is
live, for at most max_defer_s in all. Without it, a round of twelve candidates
starts twelve correctness windows together (each from the reference's start to
the last comparison, the candidate's Triton compile included, 1-4 s), and the
critical chain's timed phases, first at the gate, still wait for the slowest of
the others' windows to close (measured on one H200: 3-9 s of a round's 8-11 s
after its replies; docs/PERFORMANCE.md). Shared work without a priority (a
baseline, a decomposition check: someone waits for them) never defers.

The pool names the file in $MKEVOLVE_TIMING_LOCK (one per physical GPU, shared
by every pool on the host); a standalone worker falls back to a file named for
$CUDA_VISIBLE_DEVICES in the temp directory.
"""
from __future__ import annotations

import fcntl
import os
import re
import secrets
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


def timed_phase_waiting(path: str | None = None) -> bool:
    """Whether a timed phase holds the gate of the lock at path: it waits for
    the shared holders to finish (or is just taking the lock). Shared work
    that can pause (a baseline's compile step) gives way to it."""
    gate = (path or default_path()) + ".gate"
    try:
        fd = os.open(gate, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


MAX_DEFER_S = 15.0  # at most this long in all a timed phase lets higher-priority ones go first


class TimingLock:
    """shared=True takes the lock shared instead: for GPU work that may run
    beside other such work but never during a timed phase (a candidate's
    profiling process runs its burst of profiled calls under it). priority:
    waiting timed phases of higher priority go first; shared work given a
    priority first waits while a live evaluation of higher priority is
    registered (register_active). Either defers for at most max_defer_s."""

    def __init__(self, path: str | None = None, shared: bool = False, priority: int | None = None,
                 max_defer_s: float = MAX_DEFER_S):
        self.path = path or default_path()
        self.shared = shared
        # Shared: None never defers; an int defers to live evaluations of higher priority.
        self.priority = priority if shared else int(priority or 0)
        self.max_defer_s = max_defer_s
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, max_wait_s: float) -> dict:
        """Waits up to max_wait_s for the lock (the gate first). Returns a
        record for the verdict's checks: {"path", "waited_s", "held"}, and for
        a timed phase its "priority" and the seconds it let higher ones go
        first ("deferred_s"). Never raises: if the file cannot be opened or the
        wait runs out, the work goes ahead unlocked and the record says so
        (held: false, plus "error")."""
        t0 = time.monotonic()
        rec: dict = {"waited_s": 0.0, "held": False}
        if self._fd is not None:
            rec["held"] = True
            return rec
        deadline = t0 + max_wait_s
        if self.shared:
            deferred, busy = self._defer_to_active(deadline)
            if self.priority is not None:
                rec["deferred_s"] = round(deferred, 4)
            # A gate that cannot be opened or locked gives no priority, but the lock
            # still excludes; a gate busy past the deadline is a busy lock.
            gate, err = None, _busy(max_wait_s)
            if not busy:
                gate, err, busy = _lock(self.path + ".gate", fcntl.LOCK_SH, deadline, max_wait_s)
            fd = None
            try:
                if not busy:
                    fd, err, _ = _lock(self.path, fcntl.LOCK_SH, deadline, max_wait_s)
            finally:
                if gate is not None:
                    _unlock(gate)
        else:
            fd, err, deferred = self._acquire_exclusive(deadline, max_wait_s)
            rec["priority"] = self.priority
            rec["deferred_s"] = round(deferred, 4)
        if fd is not None:
            self._fd = fd
            rec["held"] = True
        else:
            rec["error"] = err
        rec["waited_s"] = round(time.monotonic() - t0, 4)
        return rec

    def _defer_to_active(self, deadline: float) -> tuple[float, bool]:
        """(seconds deferred, deadline passed): shared work with a priority
        waits while a live evaluation of higher priority is registered, for at
        most max_defer_s."""
        if self.priority is None or self.max_defer_s <= 0:
            return 0.0, False
        active = self.path + ".active"
        t0 = time.monotonic()
        deferred = 0.0  # stays 0 unless it did wait
        while deferred < self.max_defer_s and _higher_live(active, self.priority):
            if time.monotonic() >= deadline:
                return time.monotonic() - t0, True
            time.sleep(0.01)
            deferred = time.monotonic() - t0
        return deferred, False

    def _acquire_exclusive(self, deadline: float, max_wait_s: float):
        """(fd, why, seconds deferred): the gate, then the lock, both exclusive,
        polled; while a live waiter of higher priority is registered (and the
        deferral budget lasts), stays off the gate and gives it up if held."""
        waiting = _Registration(self.path, self.priority)
        gate = None
        deferred = 0.0
        delay = 0.002
        gate_err = None  # a gate that cannot be opened gives no priority; the lock still excludes
        try:
            while True:
                now = time.monotonic()
                if deferred < self.max_defer_s and waiting.higher_waiting():
                    if gate is not None:
                        _unlock(gate)
                        gate = None
                    if now >= deadline:
                        return None, _busy(max_wait_s), deferred
                    time.sleep(min(0.01, deadline - now))
                    deferred += time.monotonic() - now
                    continue
                if gate is None and gate_err is None:
                    gate, why = _try_lock(self.path + ".gate", fcntl.LOCK_EX)
                    if why is not None:
                        gate_err = why
                if gate is not None or gate_err is not None:
                    fd, why = _try_lock(self.path, fcntl.LOCK_EX)
                    if why is not None:
                        return None, why, deferred
                    if fd is not None:
                        return fd, None, deferred
                if time.monotonic() >= deadline:
                    return None, _busy(max_wait_s), deferred
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        finally:
            if gate is not None:
                _unlock(gate)
            waiting.close()

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            _unlock(fd)


def register_active(priority: int, path: str | None = None) -> "_Registration":
    """Registers an evaluation of this priority as live on the GPU of the lock
    at path (until .close()): shared work of lower priority defers to it."""
    return _Registration(path or default_path(), priority, "active")


class _Registration:
    """An entry in path + ".waiting/" (a waiting timed phase) or ".active/" (a
    live evaluation): the file "<priority>-<pid>-<random>", locked exclusively while
    it lasts. Best effort: where the directory cannot be written, nothing is
    registered and nobody defers to it."""

    def __init__(self, path: str, priority: int, kind: str = "waiting"):
        self.dir = path + "." + kind
        self.priority = priority
        self.fd: int | None = None
        self.file: str | None = None
        # Random, not pid and count: the pool starts each server in its own PID
        # namespace, where every server has the same pid and its own count.
        name = f"{priority}-{os.getpid()}-{secrets.token_hex(8)}"
        try:
            try:
                os.mkdir(self.dir, 0o777)
            except FileExistsError:
                pass
            # Locked before it is given its name: a reader that finds an entry
            # unlocked takes it for a dead owner's and removes it, so an entry
            # must never be seen between its creation and its lock.
            new = os.path.join(self.dir, ".new-" + name)
            self.fd = os.open(new, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.file = os.path.join(self.dir, name)
                os.rename(new, self.file)
            except OSError:
                self.file = None
                try:
                    os.unlink(new)
                except OSError:
                    pass
                raise
        except OSError:
            self.close()

    def higher_waiting(self) -> bool:
        return _higher_live(self.dir, self.priority)

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if self.file is not None:
            try:
                os.unlink(self.file)
            except OSError:
                pass
            self.file = None
        if fd is not None:
            os.close(fd)


def _higher_live(directory: str, priority: int) -> bool:
    """Whether a live entry of higher priority than this is registered in
    directory (stale entries, whose process died, are removed on the way)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return False
    for name in names:
        if name.startswith(".new-"):
            _remove_abandoned(os.path.join(directory, name))
            continue
        head = name.split("-", 1)[0]
        try:
            prio = int(head)
        except ValueError:
            continue
        if prio <= priority:
            continue
        if _held_else_removed(os.path.join(directory, name)):
            return True
    return False


def _remove_abandoned(path: str, age_s: float = 60.0) -> None:
    """Removes an entry still being made (".new-...") that nobody holds and
    that is older than age_s: its process died between making and naming it."""
    try:
        if time.time() - os.stat(path).st_mtime < age_s:
            return
    except OSError:
        return
    _held_else_removed(path)


def _held_else_removed(path: str) -> bool:
    """Whether the entry at path is held (its owner is alive); one nobody
    holds is its dead owner's, and is removed (False)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False  # gone already
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    else:
        try:
            os.unlink(path)
        except OSError:
            pass
        return False
    finally:
        os.close(fd)


def _unlock(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _busy(max_wait_s: float) -> str:
    return f"the GPU timing lock was busy for {max_wait_s:g} s; went ahead without it"


def _lock(path: str, mode: int, deadline: float, max_wait_s: float):
    """(fd, None, False) with path locked in mode, or (None, why, busy): busy
    once the deadline has passed, not busy where the file cannot be opened or
    locked at all. Polls _try_lock."""
    delay = 0.002
    while True:
        fd, why = _try_lock(path, mode)
        if fd is not None or why is not None:
            return fd, why, False
        if time.monotonic() >= deadline:
            return None, _busy(max_wait_s), True
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _try_lock(path: str, mode: int):
    """(fd, None) with path locked in mode, (None, None) while it is busy, or
    (None, why) where it cannot be opened or locked at all. One try."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as e:
            return None, f"cannot open the GPU timing lock {path}: {e.strerror}"
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None, None
        except OSError as e:
            os.close(fd)
            return None, f"cannot lock {path}: {e.strerror}"
        if _same_file(fd, path):
            return fd, None
        # The file was unlinked or replaced since it was opened: a lock on the
        # old inode excludes no one. Open the current one.
        _unlock(fd)
