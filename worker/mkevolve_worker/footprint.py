"""What one evaluation holds in memory, measured while it runs.

The server samples its own process tree (itself, the children of the
evaluation and the idle spares) every 100 ms from /proc: each process's
proportional share of its anonymous and shared-memory pages (Pss_Anon +
Pss_Shmem in smaps_rollup, so a page that several processes map, such as a
sealed inputs file or the heap a child inherited from the server, counts
once in the sum), plus the sealed in-memory files the server holds without
mapping them. The peak is reported with the verdict (checks.footprint); the
C++ pool keeps it per problem and machine and admits evaluations by it
(docs/EVAL.md). Where smaps_rollup is missing, RssAnon + RssShmem is summed
instead, which counts shared pages once per process (too high).

The same thread enforces a host memory limit on the candidate's processes:
one whose private memory (RssAnon) passes its limit is killed, and its
verdict is its own runtime_error/oom, never an out-of-memory kill of a
neighbour by the kernel.
"""

from __future__ import annotations

import os
import signal
import threading
import time

PAGE_KB = 1024
CUDA_CONTEXT_BYTES = 600 << 20  # device memory a process's CUDA context takes (counted per CUDA process)
L2_FLUSH_BYTES = 256 << 20      # timing.l2_flush_buffer on an H200 (4 x its 60 MiB L2, at least 256 MiB)


def device_accounting(input_bytes: float, output_bytes: float, timed: bool = True, n_sets: int = 5,
                      pool_bytes: int = 0) -> dict:
    """What one evaluation holds on its GPU (docs/EVAL.md, Device memory of
    one evaluation; the pool's estimate_device is the same rule): copies of
    one call's inputs and outputs per process at its own peak ("copies"),
    and what the processes hold at once in each phase ("phases": the trials,
    the profiled burst, the timed calls). The whole ("bytes") is the worst
    phase, the rotated input sets of the timed calls (small inputs only), a
    CUDA context per process and the L2 flush buffer. n_sets: the regular
    trials of the first configuration (the sets the timed calls may rotate)."""
    from .timing import POOL_BYTES, in_place, pool_size
    pool_bytes = pool_bytes or POOL_BYTES
    large = in_place(int(input_bytes), pool_bytes)
    if large:
        # The reference computes on the copy it hands over and keeps the last
        # call's with its expected output; the candidate computes on its own
        # copy (timed: one set of buffers read in place, the first set waiting
        # on the host); the profiling process reads the reference's copy.
        copies = {"reference": (1, 1), "candidate": (1, 1)}
        if timed:
            copies["profiling"] = (0, 1)
        pool = 0.0
    else:
        # The reference computes on a private clone of the copy it hands over;
        # timed, each process also holds the rotated sets, and the candidate
        # and the profiling process the last call's inputs and their buffers.
        copies = {"reference": (2, 1), "candidate": (2, 1) if timed else (1, 1)}
        if timed:
            copies["profiling"] = (2, 1)
        k = pool_size(n_sets, max(1, int(input_bytes)), pool_bytes) if timed else 0
        pool = 3.0 * k * input_bytes
    # The profiling process runs its burst while the candidate waits with its
    # buffers only (it gave its cached output blocks back: children._perf),
    # and is gone before the timed calls: never all three at their peaks.
    ref, cand = copies["reference"], copies["candidate"]
    phases = {"trials": (ref[0] + cand[0], ref[1] + cand[1])}
    if timed:
        prof = copies["profiling"]
        phases["profiling"] = (ref[0] + cand[0] + prof[0], ref[1] + prof[1])
        phases["timed"] = (ref[0] + cand[0], ref[1] + cand[1])
    data = max(n_in * input_bytes + n_out * output_bytes for n_in, n_out in phases.values())
    fixed = len(copies) * CUDA_CONTEXT_BYTES + (L2_FLUSH_BYTES if timed else 0)
    return {"in_place": large, "copies": copies, "phases": phases, "data_bytes": data, "pool_bytes": pool,
            "fixed_bytes": fixed, "bytes": data + pool + fixed}


def device_phases(peaks: dict, cand_held: int | None = None, cand_timed: int | None = None,
                  timed: bool = False, profiled: bool | None = None) -> tuple[dict, bool]:
    """(phases, complete): bytes the evaluation's processes held at once in
    each phase, from each one's allocator high-water marks (peaks: "ref",
    "cand" over its trials, "prof"), and whether every phase the evaluation
    had was seen. The reference is counted at its peak throughout. The
    candidate gives back its trials' cached blocks before the profiling
    process gets its inputs, and waits through the profiled burst holding
    cand_held (its buffers); the profiling process has exited before the
    timed calls, whose candidate peak is cand_timed. Without cand_held the
    profiling phase is the plain sum of the three peaks (the candidate's
    share cannot be told apart); without cand_timed (a timed evaluation that
    ended before its timed calls finished) the timed phase is missing and
    the measurement incomplete. timed: the evaluation was to time the
    candidate; profiled: and to profile it first (default: as timed)."""
    ref, cand = peaks.get("ref", 0), peaks.get("cand", 0)
    phases = {"trials": ref + cand}
    if "prof" in peaks:
        phases["profiling"] = ref + (cand_held if cand_held is not None else cand) + peaks["prof"]
    if cand_timed is not None:
        phases["timed"] = ref + cand_timed
    profiled = timed if profiled is None else profiled
    complete = "cand" in peaks and (not timed or ("timed" in phases and (
        not profiled or ("profiling" in phases and cand_held is not None))))
    return phases, complete


#: The rule device_peak_bytes is measured by (checks.footprint.device_rule_version;
#: the pool's footprint records keep it): 2, the processes' peaks summed over
#: the phase that held the most; 1 (no such field), every process's peak summed.
DEVICE_RULE_VERSION = 2


def _status_kb(pid: int, fields=("RssAnon", "RssShmem")) -> dict:
    out = {}
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                k, _, v = line.partition(b":")
                name = k.decode()
                if name in fields:
                    out[name] = int(v.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return out


def _pss_bytes(pid: int) -> int | None:
    """Pss_Anon + Pss_Shmem of pid in bytes; None without smaps_rollup."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            data = f.read()
    except OSError:
        return None
    total, seen = 0, 0
    for line in data.split(b"\n"):
        if line.startswith(b"Pss_Anon:") or line.startswith(b"Pss_Shmem:"):
            try:
                total += int(line.split()[1]) * 1024
                seen += 1
            except (ValueError, IndexError):
                pass
    return total if seen == 2 else None


def process_bytes(pid: int) -> int:
    """What one process of the tree adds to the footprint (see the module docstring)."""
    pss = _pss_bytes(pid)
    if pss is not None:
        return pss
    kb = _status_kb(pid)
    return (kb.get("RssAnon", 0) + kb.get("RssShmem", 0)) * 1024


def _children_of() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return kids
    for n in names:
        if not n.isdigit():
            continue
        try:
            with open(f"/proc/{n}/stat", "rb") as f:
                data = f.read()
            ppid = int(data[data.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(n))
    return kids


def tree_pids(root: int, kids: dict | None = None) -> list[int]:
    kids = _children_of() if kids is None else kids
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


class Sampler:
    """Peak host memory of the server's process tree during one evaluation."""

    def __init__(self, interval_s: float = 0.1):
        self.interval_s = interval_s
        self.peak_bytes = 0
        self.peak_by_pid: dict[int, int] = {}   # each process's share at the peak
        self.peak_parents: dict[int, int] = {}  # pid -> parent pid, at the peak
        self.roles: dict[int, str] = {os.getpid(): "server"}  # what peak_by_role calls each process
        self.samples = 0
        self.held_bytes = 0            # sealed files the server holds unmapped (set by the evaluation)
        self.peak_held = 0
        self._limits: dict[int, int] = {}   # pid -> private-memory limit (bytes)
        self.over: dict[int, int] = {}      # pid -> private bytes when it was killed
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = None

    def watch(self, pid: int, limit_bytes: int) -> None:
        """Kills pid's process group once pid's private memory passes limit_bytes (0: no limit)."""
        if limit_bytes > 0:
            with self._lock:
                self._limits[pid] = int(limit_bytes)

    def peak_by_role(self) -> dict[str, int]:
        """The peak, split by the role of each process (roles; the rest are
        idle spares) and the sealed files held."""
        out = {"sealed files held by the server": self.peak_held}
        me = os.getpid()
        for pid, n in self.peak_by_pid.items():
            # A role's process and its descendants (a sandboxed candidate runs
            # two processes below the one the evaluation knows, sandbox.py);
            # never the server's role, which every process descends from.
            p, role = pid, self.roles.get(pid) if pid == me else None
            for _ in range(16):
                if p is None or p == me or role is not None:
                    break
                role = self.roles.get(p)
                p = self.peak_parents.get(p)
            role = role or "idle spares and other processes"
            out[role] = out.get(role, 0) + n
        return out

    def sample(self) -> int:
        total = 0
        kids = _children_of()
        pids = tree_pids(os.getpid(), kids)
        by_pid = {}
        for p in pids:
            by_pid[p] = process_bytes(p)
            total += by_pid[p]
        with self._lock:
            limits = dict(self._limits)
        for pid, limit in limits.items():
            # The candidate's process and everything it started.
            priv = sum(_status_kb(p, ("RssAnon",)).get("RssAnon", 0) * 1024 for p in pids if p == pid or
                       _is_descendant(p, pid))
            if priv > limit and pid not in self.over:
                self.over[pid] = priv
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
        total += self.held_bytes
        self.samples += 1
        if total > self.peak_bytes:
            self.peak_bytes = total
            self.peak_by_pid = by_pid
            self.peak_parents = {c: p for p, cs in kids.items() for c in cs if c in by_pid}
            self.peak_held = self.held_bytes
        return total

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - measuring must never break an evaluation
                pass

    def __enter__(self) -> "Sampler":
        self.sample()
        self._thread = threading.Thread(target=self._run, name="mk-footprint", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.sample()
        except Exception:  # noqa: BLE001
            pass


def _is_descendant(pid: int, root: int) -> bool:
    seen = 0
    p = pid
    while p > 1 and seen < 64:
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                data = f.read()
            p = int(data[data.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if p == root:
            return True
        seen += 1
    return False
