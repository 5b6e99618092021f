"""The sandbox self-test's verdict, kept for the servers that start after it
on the same machine (docs/EVAL.md, The candidate's sandbox).

A GPU server tests its sandbox plan as it starts (sandbox_selftest.self_test):
a trusted and a sandboxed process check CUDA, a cold Triton compile, CUPTI and
the CUDA IPC hand-over. That took 3.9-5.8 s of each server's start on an H100
(docs/GPU-RESULTS.md), and every pool of every `mkevolve eval` paid it again,
although the answer depends only on the machine as it is booted. So where the
plan asked for passed every check at its first attempt, that is written down
here, and a server whose key matches skips the test; it still seeds its own
Triton cache (the trusted half of the test), which is its own per server.

A kept verdict only ever says "the plan asked for works": it carries no plan
of its own, and one whose recorded plan differs from the one asked for is not
taken. So the worst a forged or stale verdict can do is skip a test, never
weaken the box. A plan the test had to weaken (a fallback: host PID or IPC
namespace, perf_event_open allowed, uid 0, CUDA IPC off, unsandboxed) is never
kept: a failure that may have been transient (another pool's candidate holding
the GPU, a timeout while ten servers start) must not weaken the box for the
rest of the boot. Such a key is marked `.weak`, and later servers with it test
on their own, at once, as before.

What the key holds, so that anything the answer depends on changes it: the
boot (boot_id), the kernel and the NVIDIA driver, the uid, Python, torch and
Triton, the worker's own source, the plan asked for, whether CUDA IPC is
possible at all, the GPUs this server sees, the server's whole environment
(less the per-server and per-job variables, SKIP_ENV) and the sysctls that
decide namespaces and profiling. Where the trusted half fails on a kept
verdict, the verdict is forgotten and the full test runs.

The folder is the pool's (MKEVOLVE_SANDBOX_VERDICTS, beside the footprints in
the baseline cache): mode 0700, files 0600, never inside a candidate's view
(the view binds system and Python folders only, and nothing under HOME). Files
are named by the boot, so a folder shared by several machines (a home on NFS)
keeps each machine's own; another boot's files are removed once 30 days old.
Servers that start together wait on one lock per key, so one tests and the
rest read its verdict; a server that waits longer than half the test's budget
tests for itself and keeps nothing. The GPUs a server sees (CUDA_VISIBLE_DEVICES)
are part of the key, so each GPU of a machine is tested once per boot.

A machine where the plan asked for always needs a fallback (CUDA IPC broken in
every sandboxed plan, say) gains nothing: every server tests there, as before.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import stat
import sys
import time

FORMAT = 2
ENV = "MKEVOLVE_SANDBOX_VERDICTS"
STALE_S = 30 * 86400   # another boot's verdicts and locks this old are removed
TMP_STALE_S = 3600     # a half-written verdict of a server killed while writing

# The sysctls that decide whether a user, PID, mount, IPC or network namespace
# or a CUPTI session is allowed: a change at run time changes the key.
SYSCTLS = ("kernel/unprivileged_userns_clone", "user/max_user_namespaces", "user/max_pid_namespaces",
           "user/max_mnt_namespaces", "user/max_ipc_namespaces", "user/max_net_namespaces",
           "user/max_uts_namespaces", "kernel/apparmor_restrict_unprivileged_userns",
           "kernel/perf_event_paranoid", "kernel/yama/ptrace_scope", "kernel/seccomp/actions_avail")

# Left out of the key: the server's own channel, token and locks, and what
# changes per shell or per job without touching the sandbox.
SKIP_ENV = {"MKEVOLVE_WORKER_TOKEN", "MKEVOLVE_WORKER_CHANNEL", "MKEVOLVE_TIMING_LOCK", ENV, "PWD", "OLDPWD",
            "SHLVL", "_", "TERM", "COLUMNS", "LINES", "DISPLAY", "LS_COLORS"}
SKIP_ENV_PREFIXES = ("SLURM_", "SSH_", "XDG_SESSION_", "PBS_", "LSB_")

# The plan's fields as asked for (the key) and as a kept verdict must show them.
ASKED = ("mode", "user", "pidns", "mountns", "seccomp", "libseccomp", "share", "allow_perf", "ipcns", "cuda_ipc")


def folder() -> str | None:
    """The folder, or None (always test): unset, empty, or not an absolute
    path (a relative one would name each server's own fresh cwd)."""
    d = os.environ.get(ENV, "").strip()
    return d if d and os.path.isabs(d) else None


def _read(path: str, limit: int = 4096) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace").strip()
    except OSError:
        return ""


def boot_tag() -> str:
    b = "".join(c for c in _read("/proc/sys/kernel/random/boot_id") if c.isalnum())
    return (b[:12] or "noboot").lower()


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


def _environment() -> dict:
    from .errors import looks_secret
    return {k: v for k, v in os.environ.items()
            if k not in SKIP_ENV and not k.startswith(SKIP_ENV_PREFIXES) and not looks_secret(k)}


def asked(plan) -> dict:
    return {k: getattr(plan, k, None) for k in ASKED}


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
        "plan": asked(plan),
        "ipc_possible": bool(ipc_possible),
        "gpus": gpus,
        "env": _environment(),
        "sys_path": list(sys.path),
        "sysctls": {s: _read("/proc/sys/" + s, 400) for s in SYSCTLS},
    }


def name_of(material: dict) -> str:
    """The files' stem: this boot's tag, then the key's digest."""
    digest = hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()[:40]
    return f"{boot_tag()}-{digest}"


def keepable(report: dict, plan, wanted: dict) -> bool:
    """Only the plan asked for, passing every check at the first attempt:
    sandboxed (its own uid and view), with CUDA IPC, nothing weakened."""
    if report.get("cached") or getattr(plan, "broken", None) or asked(plan) != wanted:
        return False
    if wanted["mode"] == "off" or wanted["user"] == "none" or not wanted["mountns"] or not wanted["cuda_ipc"]:
        return False
    attempts = report.get("attempts") or []
    return len(attempts) == 1 and attempts[0].get("ok") is True and attempts[0].get("plan") == report.get("chosen")


class Lock:
    """An exclusive lock on the key's own lock file, waited for at most
    `wait_s` (fd None where the folder cannot be used or the wait ran out:
    the caller then tests for itself and keeps nothing)."""

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
                try:
                    os.utime(fd)  # in use: never another machine's prune's
                except OSError:
                    pass
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


def safe_folder(d: str) -> bool:
    """Ours alone: made 0700 where missing, refused where another user owns
    it or others may write to it."""
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        st = os.stat(d, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not (st.st_mode & 0o022)


def load(d: str, name: str, wanted: dict) -> dict | None:
    """The kept verdict of `name`, if it is ours, whole, and says the plan
    asked for (`wanted`) passed; None otherwise."""
    path = os.path.join(d, name + ".json")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022 or \
                st.st_size > 1 << 20:
            return None
        with os.fdopen(fd, "rb") as f:
            fd = None
            kept = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    finally:
        if fd is not None:
            os.close(fd)
    if not isinstance(kept, dict) or kept.get("format") != FORMAT or kept.get("name") != name or \
            kept.get("plan") != wanted or not isinstance(kept.get("report"), dict):
        return None
    try:
        os.utime(path)  # in use: never another machine's prune's
    except OSError:
        pass
    return kept


def prune(d: str, now: float | None = None) -> int:
    """Removes another boot's verdicts, marks and locks once STALE_S old
    (one set per boot would otherwise pile up), and half-written verdicts
    once TMP_STALE_S old; never this boot's."""
    now = time.time() if now is None else now
    mine = boot_tag() + "-"
    gone = 0
    try:
        names = os.listdir(d)
    except OSError:
        return 0
    for n in names:
        if n.endswith(".tmp") and n.startswith("."):
            limit = TMP_STALE_S
        elif n.endswith((".json", ".lock", ".weak")) and not n.startswith(mine):
            limit = STALE_S
        else:
            continue
        path = os.path.join(d, n)
        try:
            if now - os.lstat(path).st_mtime > limit:
                os.unlink(path)
                gone += 1
        except OSError:
            pass
    return gone


def store(d: str, name: str, wanted: dict, report: dict) -> bool:
    kept = {"format": FORMAT, "name": name, "tested_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "plan": wanted, "report": {k: v for k, v in report.items() if k not in ("cached", "kept")}}
    tmp = os.path.join(d, f".{name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(kept, f, sort_keys=True, default=str)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(d, name + ".json"))
    except Exception:  # noqa: BLE001 - keeping nothing is always safe
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
    prune(d)
    return True


def mark_weak(d: str, name: str) -> None:
    """This key's test weakened the plan: later servers test at once, without the lock."""
    try:
        fd = os.open(os.path.join(d, name + ".weak"), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                     0o600)
        os.close(fd)
    except OSError:
        pass


def is_weak(d: str, name: str) -> bool:
    return os.path.lexists(os.path.join(d, name + ".weak"))


def forget(d: str, name: str) -> None:
    try:
        os.unlink(os.path.join(d, name + ".json"))
    except OSError:
        pass
