"""The sandbox self-test's verdict, kept for the servers that start after it
on the same machine (docs/EVAL.md, The candidate's sandbox).

A GPU server tests its sandbox plan as it starts (sandbox_selftest.self_test):
a trusted and a sandboxed process check CUDA, a cold Triton compile, CUPTI and
the CUDA IPC hand-over. That took 3.9-5.8 s of each server's start on an H100
(docs/GPU-RESULTS.md), and every pool of every `mkevolve eval` paid it again,
although the answer depends only on the machine as it is booted. So a plan
that passed every check is written down here, and a server whose key matches
takes it without testing; it still seeds its own Triton cache (the trusted
half of the test), which is its own per server.

What the key holds, so that anything the answer depends on changes it: the
boot (boot_id), the kernel and the NVIDIA driver, the uid, Python, torch and
Triton, the worker's own source, the plan asked for, whether CUDA IPC is
possible at all, the GPUs this server sees, the settings the view is built
from (PATH, CC, LD_LIBRARY_PATH, CUDA_HOME, sys.path) and the sysctls that
decide namespaces and profiling. Only a plan that passed is kept: a plan the
test weakened (CUDA IPC off, unsandboxed) is tested again at every start, in
case what failed comes back.

The folder is the pool's (MKEVOLVE_SANDBOX_VERDICTS, beside the footprints in
the baseline cache): mode 0700, files 0600, never inside a candidate's view
(the view binds system and Python folders only, and nothing under HOME). Servers
that start together wait on one lock, so one of them tests and the rest read
its verdict; a server that waits longer than the test's own budget tests for
itself and keeps nothing.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import sys
import time

FORMAT = 1
ENV = "MKEVOLVE_SANDBOX_VERDICTS"

# The sysctls that decide whether a user namespace, a PID namespace or a
# CUPTI session is allowed: a change at run time changes the key.
SYSCTLS = ("kernel/unprivileged_userns_clone", "user/max_user_namespaces", "user/max_pid_namespaces",
           "kernel/apparmor_restrict_unprivileged_userns", "kernel/perf_event_paranoid",
           "kernel/yama/ptrace_scope", "kernel/seccomp/actions_avail")

# The plan's fields the self-test decides (copied from a kept verdict).
DECIDED = ("user", "pidns", "allow_perf", "ipcns", "cuda_ipc", "mode", "mountns", "seccomp")


def folder() -> str | None:
    d = os.environ.get(ENV, "").strip()
    return d or None


def _read(path: str, limit: int = 4096) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _source_digest() -> str:
    """The worker package's own source: a new worker tests again."""
    here = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for name in sorted(os.listdir(here)):
        if name.endswith(".py"):
            h.update(name.encode())
            try:
                with open(os.path.join(here, name), "rb") as f:
                    h.update(hashlib.sha256(f.read()).digest())
            except OSError:
                h.update(b"?")
    return h.hexdigest()


def key_material(plan, ipc_possible: bool, gpus=None) -> dict:
    """Everything the self-test's answer depends on (see the module's doc)."""
    try:
        import torch
        torch_v = torch.__version__
    except Exception:  # noqa: BLE001
        torch_v = None
    try:
        import triton
        triton_v = triton.__version__
    except Exception:  # noqa: BLE001
        triton_v = None
    return {
        "format": FORMAT,
        "boot_id": _read("/proc/sys/kernel/random/boot_id"),
        "kernel": " ".join(os.uname()),
        "driver": _read("/proc/driver/nvidia/version", 400).splitlines()[:1],
        "uid": [os.getuid(), os.geteuid()],
        "python": sys.version, "executable": sys.executable, "torch": torch_v, "triton": triton_v,
        "worker": _source_digest(),
        "plan": {k: getattr(plan, k, None) for k in ("mode", "user", "pidns", "mountns", "seccomp", "libseccomp",
                                                     "share", "allow_perf", "ipcns", "cuda_ipc")},
        "ipc_possible": bool(ipc_possible),
        "gpus": gpus,
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "env": {k: os.environ.get(k) for k in ("PATH", "CC", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "HOME")},
        "sys_path": list(sys.path),
        "sysctls": {s: _read("/proc/sys/" + s, 400) for s in SYSCTLS},
    }


def key_of(material: dict) -> str:
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()[:40]


def keepable(report: dict, plan) -> bool:
    """Only a plan that passed every check, sandboxed, with CUDA IPC."""
    if not report.get("chosen") or getattr(plan, "broken", None) or getattr(plan, "mode", "off") == "off":
        return False
    if not getattr(plan, "cuda_ipc", False) or report.get("cached"):
        return False
    attempts = report.get("attempts") or []
    return bool(attempts) and attempts[-1].get("ok") is True and attempts[-1].get("plan") == report["chosen"]


def apply(plan, kept: dict) -> None:
    for k in DECIDED:
        if k in kept["plan"]:
            setattr(plan, k, kept["plan"][k])


class Lock:
    """An exclusive lock on the key's own lock file, waited for at most
    `wait_s` (None where the folder cannot be used or the wait ran out: the
    caller then tests for itself and keeps nothing)."""

    def __init__(self, path: str, wait_s: float):
        self.fd = None
        self.waited_s = 0.0
        t0 = time.monotonic()
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError:
            return
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.fd = fd
                break
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES) or \
                        time.monotonic() - t0 > wait_s:
                    os.close(fd)
                    break
                time.sleep(0.05)
        self.waited_s = round(time.monotonic() - t0, 3)

    def release(self) -> None:
        if self.fd is not None:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                os.close(self.fd)
            self.fd = None


def _safe_folder(d: str) -> bool:
    """Ours alone: made 0700 where missing, refused where another user owns
    it or others may write to it (a forged verdict would weaken the box)."""
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        st = os.stat(d, follow_symlinks=False)
    except OSError:
        return False
    import stat
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not (st.st_mode & 0o022)


def load(d: str, key: str) -> dict | None:
    path = os.path.join(d, key + ".json")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o022 or st.st_size > 1 << 20:
            return None
        with os.fdopen(fd, "rb") as f:
            fd = None
            kept = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    finally:
        if fd is not None:
            os.close(fd)
    if not isinstance(kept, dict) or kept.get("format") != FORMAT or kept.get("key") != key or \
            not isinstance(kept.get("plan"), dict) or not isinstance(kept.get("report"), dict):
        return None
    return kept


STALE_S = 30 * 86400  # a verdict or lock file this old is another boot's: removed as a new one is kept


def prune(d: str, keep: str, now: float | None = None) -> int:
    """Removes the folder's verdicts and locks older than STALE_S (other
    boots' keys: one pair per boot would otherwise pile up), never `keep`'s."""
    now = time.time() if now is None else now
    gone = 0
    try:
        names = os.listdir(d)
    except OSError:
        return 0
    for name in names:
        if name.startswith(keep) or not name.endswith((".json", ".lock")):
            continue
        path = os.path.join(d, name)
        try:
            if now - os.lstat(path).st_mtime > STALE_S:
                os.unlink(path)
                gone += 1
        except OSError:
            pass
    return gone


def store(d: str, key: str, plan, report: dict) -> bool:
    kept = {"format": FORMAT, "key": key, "tested_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "plan": {k: getattr(plan, k) for k in DECIDED},
            "report": {k: v for k, v in report.items() if k != "cached"}}
    tmp = os.path.join(d, f".{key}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(kept, f, sort_keys=True, default=str)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(d, key + ".json"))
        prune(d, key)
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


def forget(d: str | None, key: str | None) -> None:
    if d and key:
        try:
            os.unlink(os.path.join(d, key + ".json"))
        except OSError:
            pass
