"""Pre-started children: a candidate's processes are ready before it arrives.

Every candidate gets fresh processes forked from the pre-imported server, as
before; what changes is when they are forked. Starting a CUDA context costs
about half a second and the profiler's first session (CUPTI) over three
seconds, the same for every candidate. So the server keeps one idle "spare"
per role, forked and warmed ahead of time (isolation.prespawn):

  ref   reference children #1 and #2: CUDA started
  cand  the candidate's process: CUDA started, Triton's compiler and launcher
        used once on the worker's own trivial kernel
  prof  the candidate's profiling process: the same, plus an empty profiler
        session

When an evaluation needs a child, it takes the spare of that role, hands it
its body and job (isolation.hand_over) and forks a replacement at once, which
warms up while this evaluation runs. A spare is used for one body and never
again; the sandbox, deadlines and clean-up are those of any child. A spare
that died while idle is replaced by a process forked on the spot.

Replacements are forked when an evaluation starts (request field "spares":
"now", the default) or, when the pool asks for them later ("later"), by op
"refill", which the pool sends once no evaluation runs on the GPU: a round
of evaluations that start together then does not also warm three processes
each beside them. Either way a spare inherits the server's memory as it is
between or at the start of evaluations. No expected output is ever in the
server (the reference compares in its own process), the server maps a
candidate's output only to check its form and unmaps it, and it wipes what
it frees (isolation.wipe_freed_memory), so a spare forked after an
evaluation finds no more of it than one forked at the next one's start
(test_worker_spares.py scans for it both ways).

Sandboxed (sandbox.py), a spare is boxed when it is forked: the candidate's
two processes of a pair (cand, prof) share one box, and so one uid and one
Triton cache (the profiling process reuses what the candidate compiled);
the kernel's files are copied into the box at hand-over. A box serves one
candidate only: a spare whose box another evaluation's candidate ran in
(the profiling spare of an evaluation without timing) is discarded, never
handed to the next one.
"""

from __future__ import annotations

import os
import time

from . import children, isolation, sandbox

ROLES = ("ref", "cand", "prof")
_WARM = {"ref": children.warm_reference, "cand": children.warm_candidate, "prof": children.warm_profiling}
# Forked when the work is already waiting: only what the body needs first
# (the profiler session), as a process started the old way would do.
_WARM_ON_DEMAND = {"ref": lambda ctx: {}, "cand": lambda ctx: {}, "prof": children.warm_profiler_only}


# Triton's fp32 tl.dot default in every candidate process (Launcher._fork).
TRITON_F32_DEFAULT = "ieee"


class Launcher:
    def __init__(self, keep_spares: bool):
        self.keep_spares = keep_spares
        self.ready: dict[str, isolation.Child] = {}
        self.stats = {"prestarted": 0, "forked_on_demand": 0, "died_idle": 0}
        self._eval = 0              # evaluations started (each "cand" start is one)
        self._pair_box = None       # the box the next spare pair (cand, prof) shares
        self._current_box = None    # the box of the evaluation in hand's candidate

    @staticmethod
    def triton_cache() -> str:
        # Without the sandbox, candidates share one Triton cache per server
        # (compiling the launcher stubs per candidate would cost seconds).
        # Sandboxed, each candidate writes to its box's own cache, and this
        # one, written only by trusted processes, is linked into it read-only
        # (sandbox.py). Baselines use private ones.
        return os.environ.get("TRITON_CACHE_DIR") or os.path.join(isolation.base_tmp(), "triton-cache")

    def _fork(self, role: str, ahead: bool) -> isolation.Child:
        # TF32 is off for candidates as for the reference (the paper: "for both
        # PyTorch and Triton"): a tl.dot on fp32 without input_precision runs
        # in IEEE fp32, not Triton's TF32 default. A kernel that names
        # input_precision gets what it names. Triton keys its cache on this
        # variable (3.x), and every candidate of a server has it anyway.
        env = ({"TRITON_CACHE_DIR": self.triton_cache(), "TRITON_F32_DEFAULT": TRITON_F32_DEFAULT}
               if role in ("cand", "prof") else None)
        warm = _WARM[role] if ahead else _WARM_ON_DEMAND[role]
        return isolation.prespawn(role, warm, children.BODIES, extra_env=env, box=self._box(role, ahead))

    def _box(self, role: str, ahead: bool):
        """The box a candidate's process is forked into (None: not boxed)."""
        if not sandbox.active() or role not in ("cand", "prof"):
            return None
        if not ahead:
            # On demand, for the evaluation in hand: the profiling process joins its candidate's box.
            cur = self._current_box
            if role == "prof" and cur is not None and cur.used_by == self._eval:
                return cur
            return sandbox.make_box(isolation.base_tmp(), sandbox.PLAN)
        if self._pair_box is None or self._pair_box.used_by is not None:
            self._pair_box = sandbox.make_box(isolation.base_tmp(), sandbox.PLAN)
        return self._pair_box

    def _tainted(self, child: isolation.Child | None, allowed: int | None = None) -> bool:
        """Whether a spare's box has served another evaluation's candidate."""
        return child is not None and child.box is not None and child.box.used_by not in (None, allowed)

    def _discard(self, child: isolation.Child) -> None:
        isolation.release_spare(child)
        isolation.cleanup_dir(child.dir)

    def start(self, role: str, body: str, job: dict, payload_fd: int | None = None,
              cpu_seconds: float | None = None) -> isolation.Child:
        """A child of `role` running children.BODIES[body](job): the idle spare
        when there is a live one, else a process forked now. Its deadline
        starts here."""
        if role == "cand":
            self._eval += 1
        child = self._live(self.ready.pop(role, None))
        if self._tainted(child, self._eval):
            self._discard(child)
            child = None
        if child is None:
            self.stats["forked_on_demand"] += 1
            child = self._fork(role, ahead=False)
        else:
            self.stats["prestarted"] += 1
            child.prestarted = True
        if child.box is not None:
            child.box.used_by = self._eval
            if role == "cand":
                self._current_box = child.box
            if sandbox.PLAN is not None and sandbox.PLAN.mode == "require":
                self._require(child)
            if isinstance(job.get("kernel"), str):
                # The only kernel files it can see: a copy in its box, same names and layout.
                job = dict(job, kernel=child.box.copy_kernel(job["kernel"]))
                if isinstance(job.get("coverage"), dict):
                    # The lines whose running decides, in the copies the candidate imports (coverage.py).
                    job["coverage"] = dict(job["coverage"], targets=[
                        [child.box.copy_path(path), line] for path, line in job["coverage"].get("targets", [])])
        isolation.hand_over(child, body, job, payload_fd, cpu_seconds, new_dir=child.prestarted)
        return child

    def _require(self, child: isolation.Child) -> None:
        """MKEVOLVE_SANDBOX=require: the child's own record must show every
        protection in force before any candidate code reaches it."""
        if sandbox.PLAN.broken:
            self._discard(child)
            raise sandbox.SandboxError(f"MKEVOLVE_SANDBOX=require: {sandbox.PLAN.broken}")
        isolation.wait_event(child, "sandbox", 60)
        rec = sandbox.record_of(child)
        missing = sandbox.complete(rec) if rec is not None else ["a sandbox record"]
        if missing:
            self._discard(child)
            why = "; ".join((rec or {}).get("failed", [])[:6])
            raise sandbox.SandboxError(f"MKEVOLVE_SANDBOX=require: the candidate's process could not get "
                                       f"{', '.join(missing)}" + (f" ({why})" if why else ""))

    def _live(self, child: isolation.Child | None) -> isolation.Child | None:
        """child if it is a live spare; a dead one is reaped and forgotten."""
        if child is not None and not isolation.spare_alive(child):
            self.stats["died_idle"] += 1
            isolation.release_spare(child)
            isolation.cleanup_dir(child.dir)
            return None
        return child

    def refill(self) -> list[str]:
        """Forks a spare for every role that has no live one (no-op when
        spares are off); returns the roles forked."""
        forked: list[str] = []
        if not self.keep_spares:
            return forked
        for role in ROLES:
            if self._tainted(self.ready.get(role)):
                self._discard(self.ready.pop(role))
            if self._live(self.ready.get(role)) is None:
                self.ready[role] = self._fork(role, ahead=True)
                forked.append(role)
        return forked

    def idle(self) -> int:
        """The idle spares alive now (each holds a CUDA context on a GPU): the
        pool counts them as its GPU's overhead (eval's answer, spares_idle)."""
        return sum(1 for child in self.ready.values() if isolation.spare_alive(child))

    def wait_warm(self, timeout_s: float) -> float:
        """Waits until every idle spare has finished warming up (their CUDA,
        Triton and CUPTI start-up must not overlap a timed phase); returns
        the seconds waited."""
        t0 = time.monotonic()
        for child in self.ready.values():
            if not any(ev.get("ev") == "warm" for ev in child.events):
                isolation.wait_event(child, "warm", max(0.0, timeout_s - (time.monotonic() - t0)))
        return time.monotonic() - t0

    def close(self) -> None:
        for child in self.ready.values():
            isolation.release_spare(child)
            isolation.cleanup_dir(child.dir)
        self.ready.clear()
