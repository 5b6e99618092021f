"""The candidate's sandbox (issue #37): who it runs as, what it can see, which
system calls it may make.

A kernel written by an LLM is untrusted code, and one rewarded for speed
looks for holes in the harness. The candidate's processes (roles "cand" and
"prof": the candidate and its profiling process) are therefore boxed when
they are forked, before they know which kernel they will run (spares.py forks
them ahead of time), by the steps below. Each step that the OS refuses falls
back to the next-strongest, and the child itself reports, before any
candidate code runs, what was really in force (its "sandbox" event, read
back from the kernel and from the calls' results, never assumed):
checks.isolation.sandbox. docs/EVAL.md has the threat model.

Processes (with a PID namespace):

    server ── B ── C1 (pid 1 of a new PID namespace) ── C2 (the candidate)

  B   stays in the server's namespaces. It only waits for C1 and then ends
      the way the candidate ended (same exit code or same signal), so the
      server sees one child, as without the sandbox. Killing B (its process
      group) kills everything: C1 has PR_SET_PDEATHSIG, and when the init of
      a PID namespace dies the kernel kills every process in it.
  C1  the namespace's init: builds the filesystem view, mounts /proc for its
      own namespace (only the candidate's processes are in it), forks C2 and
      reaps. Being pid 1 has odd signal rules (a pid 1 ignores its own
      SIGKILL), so the candidate is not pid 1.
  C2  drops privileges, installs the seccomp filter and returns to the
      child's body (warm-up, then the candidate's work).

Without a PID namespace, B does C1's and C2's steps itself.

Steps, strongest first, and their fallbacks:

  user     a uid of its own from a random block above 1.5e9, or within what
           the user namespace maps (uid_block; per candidate: its two
           processes share it; its directories are chowned to it),
           no capabilities, PR_SET_NO_NEW_PRIVS; else uid 0 with every
           capability dropped (bounding set, ambient, securebits locked so
           that exec cannot regain them); as a non-root server, uid 0 of a
           user namespace without capabilities.
  pid      a new PID namespace with its own /proc; else /proc with
           hidepid=invisible (Linux >= 5.8, where each proc mount has its own
           options; only with a uid of its own); else the host's /proc,
           where other users' processes' memory, environment and descriptors
           stay unreadable to an unprivileged uid.
  files    a new mount namespace whose root is a tmpfs holding read-only bind
           mounts of an allow-list (the Python installation and sys.path,
           system libraries and /etc's loader files, the GPU device nodes) and
           the box: a directory of its own, the only writable place, bound at
           the same path as outside, so that every path the server hands over
           means the same on both sides. pivot_root, else chroot. /tmp and
           /dev/shm are private tmpfs instances. The worker's own package is
           bound read-only (lazy imports); the repository, caches, run
           directories, HOME and the mkevolve binary are not there at all.
           The server's exec-time environment block, which every forked
           process carries and /proc/<pid>/environ shows, is wiped.
  network  a new network namespace (loopback down); also IPC and UTS
           namespaces.
  seccomp  a deny-list loaded with libseccomp (ctypes, libseccomp.so.2); else
           a hand-assembled BPF filter (x86_64 only); else none.
  triton   TRITON_CACHE_DIR is the box's own, shared by the candidate's two
           processes only: hard links to the files of the server's cache,
           which only trusted processes write and which is sealed (owned by
           nobody, 0444: no candidate's uid can change them), else copies,
           else empty. One candidate can no longer plant compiled kernels or
           launchers for another. (Not an overlay: two processes' overlays
           cannot share one upper layer, and gVisor's support is unknown.)

MKEVOLVE_SANDBOX (or `serve --sandbox`): "best-effort" (default: use what
works, say what was in force), "require" (an evaluation whose candidate lacks
any of: no capabilities, no_new_privs, a seccomp filter, the filesystem view,
a /proc of its own or with hidepid, the network cut, a private /dev/shm, is a
protocol error naming what is missing: complete()), "off" (the old
behaviour: same user, no filesystem view, no filter).

On a GPU the server tests its plan once at start (self_test): whether CUDA,
Triton and the CUDA IPC hand-over work inside the sandbox is the driver's
business, and the plan steps down where they do not.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import random
import shutil
import signal
import stat
import struct
import sys
from dataclasses import dataclass, field

MODES = ("best-effort", "require", "off")

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWTIME = 0x00000080
NS_FLAGS = (CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
            CLONE_NEWNET, CLONE_NEWTIME)

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
ST_RDONLY = 1

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
# NOROOT | NOROOT_LOCKED | NO_SETUID_FIXUP | NO_SETUID_FIXUP_LOCKED | KEEP_CAPS_LOCKED
SECUREBITS_LOCKED_NOROOT = 0x01 | 0x02 | 0x04 | 0x08 | 0x20

# Process-, namespace- and kernel-control calls a kernel never needs. Denied
# with EPERM (clone3 with ENOSYS, so that glibc falls back to clone, whose
# flags the filter can see; clone with any CLONE_NEW* flag is EPERM).
DENIED_SYSCALLS = (
    # other processes' memory and descriptors
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
    # namespaces and mounts: re-entering the server's, or building new ones
    "setns", "unshare", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr",
    # identity and privileges
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "setfsuid", "setfsgid",
    "capset",
    # the kernel itself
    "kexec_load", "kexec_file_load", "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key",
    "request_key", "init_module", "finit_module", "delete_module", "iopl", "ioperm", "swapon", "swapoff",
    "reboot", "sethostname", "setdomainname", "acct", "settimeofday", "clock_settime", "clock_adjtime",
    "syslog", "quotactl", "quotactl_fd", "lookup_dcookie", "name_to_handle_at", "open_by_handle_at",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "fanotify_init", "vhangup", "modify_ldt",
    "uselib", "nfsservctl", "_sysctl",
)
# x86_64 numbers of the calls above, for the hand-built filter (used only
# where libseccomp cannot be loaded; a test checks them against libseccomp).
X86_64_NR = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "pidfd_getfd": 438,
    "process_madvise": 440, "setns": 308, "unshare": 272, "mount": 165, "umount2": 166, "pivot_root": 155,
    "chroot": 161, "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "mount_setattr": 442, "setuid": 105, "setgid": 106, "setreuid": 113, "setregid": 114,
    "setresuid": 117, "setresgid": 119, "setgroups": 116, "setfsuid": 122, "setfsgid": 123, "capset": 126,
    "kexec_load": 246, "kexec_file_load": 320, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
    "keyctl": 250, "add_key": 248, "request_key": 249, "init_module": 175, "finit_module": 313,
    "delete_module": 176, "iopl": 172, "ioperm": 173, "swapon": 167, "swapoff": 168, "reboot": 169,
    "sethostname": 170, "setdomainname": 171, "acct": 163, "settimeofday": 164, "clock_settime": 227,
    "clock_adjtime": 305, "syslog": 103, "quotactl": 179, "quotactl_fd": 443, "lookup_dcookie": 212,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "fanotify_init": 300, "vhangup": 153, "modify_ldt": 154, "uselib": 134,
    "nfsservctl": 180, "_sysctl": 156,
    "clone": 56, "clone3": 435,
}
PIVOT_ROOT_NR = {"x86_64": 155, "aarch64": 41}

# Uids handed to candidate processes: a random block per server in a range
# no real account uses, so that two candidates never share one by chance
# (and a uid collision between servers is harmless anyway: each candidate
# sees only its own box and its own processes).
UID_BASE = 1_500_000_000
UID_SPAN = 500_000_000

_libc = None


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _err(what: str) -> str:
    e = ctypes.get_errno()
    return f"{what}: {os.strerror(e) if e else 'failed'}"


def _prctl(option: int, a: int = 0, b: int = 0, c: int = 0, d: int = 0) -> int:
    return libc().prctl(ctypes.c_int(option), ctypes.c_ulong(a), ctypes.c_ulong(b), ctypes.c_ulong(c),
                        ctypes.c_ulong(d))


def _mount(src, target, fstype, flags: int, data=None) -> None:
    def b(s):
        return None if s is None else (s.encode() if isinstance(s, str) else s)
    if libc().mount(b(src), b(target), b(fstype), ctypes.c_ulong(flags), b(data)) != 0:
        raise OSError(ctypes.get_errno(), f"mount {fstype or ''} {src or ''} on {target}: "
                      f"{os.strerror(ctypes.get_errno())}")


def _unshare(flags: int) -> bool:
    return libc().unshare(ctypes.c_int(flags)) == 0


def kernel_at_least(major: int, minor: int) -> bool:
    try:
        parts = platform.release().split(".")
        return (int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)) >= (major, minor)
    except (ValueError, IndexError):
        return False


def _status_fields(pid: str = "self") -> dict:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                out[k] = v.strip()
    except OSError:
        pass
    return out


def has_cap_sys_admin() -> bool:
    try:
        return bool(int(_status_fields().get("CapEff", "0"), 16) & (1 << 21))
    except ValueError:
        return False


# --------------------------------------------------------------------------
# The server's plan
# --------------------------------------------------------------------------


@dataclass
class Plan:
    """What the server asks of every candidate process. Each child still
    falls back step by step where the OS refuses, and says so."""
    mode: str = "best-effort"
    user: str = "own"          # own | root-nocaps | userns | none
    pidns: bool = True
    mountns: bool = True
    seccomp: bool = True
    cuda_ipc: bool = True      # False: the self-test found CUDA IPC broken inside the sandbox
    triton_lower: str | None = None
    share: str | None = None   # test mode only: a directory bound read-write at its own path
    libseccomp: bool = True    # False: the hand-built filter (test mode: MKEVOLVE_TEST_SANDBOX_WITHOUT)
    broken: str | None = None  # require, and the self-test found no sandbox that runs CUDA
    allow_perf: bool = False   # perf_event_open let through (the self-test: CUPTI needed it here)
    ipcns: bool = True         # an IPC namespace of its own (the self-test: CUDA IPC may need the host's)
    notes: list = field(default_factory=list)

    def describe(self) -> dict:
        return {"mode": self.mode, "user": self.user, "pid_namespace": self.pidns,
                "mount_namespace": self.mountns, "seccomp": self.seccomp, "cuda_ipc": self.cuda_ipc,
                **({"perf_event_open": "allowed"} if self.allow_perf else {}),
                **({"ipc_namespace": "the host's"} if not self.ipcns else {}),
                **({"notes": list(self.notes)} if self.notes else {}),
                **({"broken": self.broken} if self.broken else {})}


PLAN: Plan | None = None
_uid_next = None


class SandboxError(Exception):
    """MKEVOLVE_SANDBOX=require, and a candidate's process lacks a protection:
    the evaluation is a protocol error naming what is missing."""


def configure(flag: str | None, test_mode: bool, triton_lower: str | None) -> Plan:
    """The server's (or the one-shot CLI's) plan, from `--sandbox` or
    $MKEVOLVE_SANDBOX; set as PLAN for every child forked from now on."""
    plan = make_plan(mode_from_env(flag), test_mode, triton_lower)
    set_plan(plan)
    return plan


def mode_from_env(flag: str | None = None) -> str:
    want = (flag or os.environ.get("MKEVOLVE_SANDBOX") or "best-effort").strip().lower()
    if want in ("", "auto", "on", "best_effort", "besteffort"):
        want = "best-effort"
    if want not in MODES:
        raise ValueError(f"MKEVOLVE_SANDBOX={want}: expected best-effort, require or off")
    return want


def make_plan(mode: str, test_mode: bool = False, triton_lower: str | None = None) -> Plan:
    """The strongest plan this process can attempt (no CUDA involved: the
    GPU self-test, self_test(), may weaken it)."""
    p = Plan(mode=mode, triton_lower=triton_lower)
    if mode == "off":
        p.user, p.pidns, p.mountns, p.seccomp = "none", False, False, False
        return p
    if os.geteuid() == 0 and has_cap_sys_admin():
        p.user = "own"
    elif _userns_possible():
        p.user = "userns"
    else:
        p.user = "none"
        p.pidns = p.mountns = False
        p.notes.append("not root and no user namespaces: no namespaces, no filesystem view")
    if test_mode:
        share = os.environ.get("MKEVOLVE_TEST_SANDBOX_SHARE")
        if share and os.path.isdir(share):
            p.share = os.path.realpath(share)
        # Each fallback, forced, so that CI exercises it (test mode only).
        without = {w.strip() for w in os.environ.get("MKEVOLVE_TEST_SANDBOX_WITHOUT", "").split(",") if w.strip()}
        if "pidns" in without:
            p.pidns = False
        if "mountns" in without:
            p.mountns = False
        if "seccomp" in without:
            p.seccomp = False
        if "libseccomp" in without:
            p.libseccomp = False
        if "own-uid" in without and p.user == "own":
            p.user = "root-nocaps"
        if without:
            p.notes.append("test mode: without " + ", ".join(sorted(without)))
    return p


def _userns_possible() -> bool:
    """Whether an unprivileged user namespace can be made here (a forked probe)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if _unshare(CLONE_NEWUSER) else 1
        finally:
            os._exit(code)
    _, st = os.waitpid(pid, 0)
    return os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0


def set_plan(plan: Plan | None) -> None:
    global PLAN
    PLAN = plan


def active() -> bool:
    return PLAN is not None and PLAN.mode != "off"


_uid_block: tuple[int, int] | None = None


def uid_block(uid_map: str | None = None) -> tuple[int, int]:
    """[lo, hi) of the uids candidates get: UID_BASE.. where this user
    namespace maps it (a host's does), else the upper part of its largest
    mapped range above 10000 (a container mapping 65536 uids), keeping clear
    of 65534 (nobody)."""
    if uid_map is None:
        try:
            with open("/proc/self/uid_map") as f:
                uid_map = f.read()
        except OSError:
            uid_map = f"0 0 {2**32 - 1}"
    ranges = []
    for line in uid_map.splitlines():
        parts = line.split()
        if len(parts) == 3:
            lo, n = int(parts[0]), int(parts[2])
            ranges.append((lo, lo + n))
    for lo, hi in ranges:
        if lo <= UID_BASE and UID_BASE + UID_SPAN <= hi:
            return UID_BASE, UID_BASE + UID_SPAN
    def clear(lo: int, hi: int) -> tuple[int, int]:
        lo = max(lo, 10000)
        return (lo, min(hi, 65534)) if lo < 65534 < hi + 1 else (lo, hi)
    best = max((clear(lo, hi) for lo, hi in ranges), key=lambda r: r[1] - r[0], default=(0, 0))
    lo, hi = best
    if hi - lo < 64:
        return 0, 0  # no room: no uid of its own
    return lo + (hi - lo) // 2, hi


def _alloc_uid() -> int | None:
    global _uid_next, _uid_block
    if _uid_block is None:
        _uid_block = uid_block()
    lo, hi = _uid_block
    if hi <= lo:
        return None
    if _uid_next is None or not lo <= _uid_next < hi:
        span = hi - lo
        _uid_next = lo + (random.SystemRandom().randrange(0, span // 65536) * 65536 if span >= 2 * 65536 else 0)
    uid = _uid_next
    _uid_next = _uid_next + 1 if _uid_next + 1 < hi else lo
    return uid


# --------------------------------------------------------------------------
# The box (server side)
# --------------------------------------------------------------------------


@dataclass
class Box:
    """A candidate's own directory, made by the server before the fork and
    shared by the candidate's two processes (cand and prof: one trust domain,
    one uid, one Triton cache, so the profiling process reuses what the
    candidate compiled). Never used by a second candidate (Launcher).

    path/           root-owned, 0711: the candidate cannot add or rename entries
      root/         where each process mounts its new root (empty on this side)
      tmp/          spare /tmp where no tmpfs can be mounted
      shm/          spare /dev/shm where no tmpfs can be mounted
      triton/       its TRITON_CACHE_DIR: hard links to the server's sealed cache
      <role>-N/     each process's private directories (uid- and gid-owned, 0770)
      kernel-N/     the kernel's files, copied at hand-over, root-owned, group-readable
    """
    path: str
    uid: int | None
    gid: int | None
    plan: Plan
    n: int = 0
    refs: int = 0
    used_by: int | None = None   # the evaluation (Launcher's count) whose candidate runs in it
    triton: str = "private, empty"
    kernel_map: list = field(default_factory=list)  # (copy root, original root)

    def _own(self, p: str, mode: int = 0o770) -> str:
        # Group too: a process that fell back to uid 0 without capabilities
        # keeps the box's gid, and no longer owns these.
        os.makedirs(p, exist_ok=True)
        os.chmod(p, mode)
        if self.uid is not None:
            os.chown(p, self.uid, self.gid)
        return p

    def new_dir(self, prefix: str) -> str:
        """A fresh private directory in the box, registered as a child's."""
        self.n += 1
        d = self._own(os.path.join(self.path, f"{prefix}-{self.n}"))
        _DIR_BOX[d] = self
        return d

    def rehome(self, old: str, prefix: str) -> str:
        """A spare's new private directory at hand-over, in place of `old`
        (which the child removes itself)."""
        _DIR_BOX.pop(old, None)
        return self.new_dir(prefix)

    def copy_kernel(self, kernel: str) -> str:
        """Copies the kernel's files into the box (names and layout kept: a
        composed package keeps decomposed_solution.py and
        subkernel_implementations/*.py, so tracebacks name them as before)
        and returns the copy's path of the kernel. Root-owned and only
        group-readable: the candidate reads them and cannot change them."""
        self.n += 1
        dst_root = os.path.join(self.path, f"kernel-{self.n}")
        src_root, files = kernel_files(kernel)
        os.makedirs(dst_root, mode=0o750)
        for f in files:
            out = os.path.join(dst_root, os.path.relpath(f, src_root))
            if not os.path.isdir(os.path.dirname(out)):
                os.makedirs(os.path.dirname(out), mode=0o750)
            shutil.copyfile(f, out)
            os.chmod(out, 0o640)
        if self.gid is not None:
            for d, _, names in os.walk(dst_root):
                os.chown(d, 0, self.gid)
                for n in names:
                    os.chown(os.path.join(d, n), 0, self.gid)
        self.kernel_map.append((dst_root, src_root))
        return os.path.join(dst_root, os.path.relpath(os.path.abspath(kernel), src_root))

    def copy_path(self, path: str) -> str:
        """The path, in the latest copy (each process of the box gets its
        own), of an original file of a kernel copied in (the inverse of
        original_path); other paths unchanged."""
        for copy_root, src_root in reversed(self.kernel_map):
            if isinstance(path, str) and os.path.abspath(path).startswith(src_root + os.sep):
                return os.path.join(copy_root, os.path.relpath(os.path.abspath(path), src_root))
        return path

    def original_path(self, path: str) -> str:
        """The original of a file the candidate names by its copy's path."""
        for copy_root, src_root in self.kernel_map:
            if isinstance(path, str) and path.startswith(copy_root + os.sep):
                return os.path.join(src_root, os.path.relpath(path, copy_root))
        return path


_DIR_BOX: dict[str, Box] = {}   # a child's current directory -> its box


def make_box(base: str, plan: Plan) -> Box:
    import tempfile
    path = tempfile.mkdtemp(prefix="box-", dir=base)
    uid = gid = None
    if plan.user == "own":
        uid = gid = _alloc_uid()
    box = Box(path=path, uid=uid, gid=gid, plan=plan)
    os.chmod(path, 0o711)
    if uid is not None:
        # Traversable (not listable) by others: a uid of its own must reach
        # its box where no filesystem view could be made.
        os.chmod(base, os.stat(base).st_mode & 0o777 | 0o711)
    os.makedirs(os.path.join(path, "root"), mode=0o755)
    try:
        for d in ("tmp", "shm", "triton"):
            box._own(os.path.join(path, d))
    except OSError as e:
        # A uid this namespace cannot hold (EINVAL): this plan's candidates
        # run as uid 0 without capabilities instead, and say so.
        box.uid = box.gid = None
        if plan.user == "own":
            plan.user = "root-nocaps"
            plan.notes.append(f"no uid of its own: chown to uid {uid} failed ({e})")
        for d in ("tmp", "shm", "triton"):
            box._own(os.path.join(path, d))
    if plan.user == "own" and box.uid is None:
        plan.user = "root-nocaps"
        plan.notes.append("no uid of its own: this user namespace maps no room for one")
    box.triton = _link_triton_cache(box)
    return box


def box_of_dir(path: str) -> Box | None:
    return _DIR_BOX.get(path) if path else None


def moved(old: str, new: str) -> None:
    """A child's directory changed (hand-over): keep its box registered."""
    box = _DIR_BOX.pop(old, None)
    if box is not None:
        _DIR_BOX[new] = box


def forget_boxes_in_child() -> None:
    """A forked child never removes boxes: it owns none of them."""
    _DIR_BOX.clear()


def release_dir(path: str) -> bool:
    """A child of a box is done with its directory: the directory goes, and
    with the box's last child the whole box (True when path was a box's)."""
    box = _DIR_BOX.pop(path, None) if path else None
    if box is None:
        return False
    _rmtree_one_fs(path)
    box.refs -= 1
    if box.refs <= 0:
        _rmtree_one_fs(box.path)
    return True


def _mount_points() -> set:
    """Every mount point this process's namespace has (/proc/self/mountinfo)."""
    out = set()
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                mp = line.split()[4]
                for esc, ch in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
                    mp = mp.replace(esc, ch)
                out.add(mp)
    except (OSError, IndexError):
        pass
    return out


def _rmtree_one_fs(top: str) -> None:
    """rmtree that never descends into a mount. The children's mounts are
    private to their namespaces and never show here; were one ever to, a
    plain rmtree would empty a bound /usr. A bind mount from the same file
    system has the same st_dev, and os.path.ismount cannot tell it: the
    mount table says."""
    try:
        dev = os.lstat(top).st_dev
    except OSError:
        return
    mounts = _mount_points()

    def rm(d: str) -> None:
        try:
            entries = list(os.scandir(d))
        except OSError:
            return
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if st.st_dev != dev or e.path in mounts or os.path.ismount(e.path):
                    continue
                rm(e.path)
                try:
                    os.rmdir(e.path)
                except OSError:
                    pass
            else:
                try:
                    os.unlink(e.path)
                except OSError:
                    pass
    if top in mounts:
        return
    rm(top)
    try:
        os.rmdir(top)
    except OSError:
        pass


SEALED_UID = 65534   # "nobody": owns the server's Triton cache once sealed


def seal_triton_cache(lower: str) -> int:
    """Makes the server's Triton cache unwritable by any candidate: every file
    owned by nobody and read-only (0444), every directory 0555. A candidate's
    hard link to one of its files then cannot change it, whatever the
    candidate's uid (uid 0 without capabilities included). Returns the number of files."""
    n = 0
    for d, _, names in os.walk(lower):
        for name in names:
            p = os.path.join(d, name)
            try:
                os.lchown(p, SEALED_UID, SEALED_UID)
                if not os.path.islink(p):
                    os.chmod(p, 0o444)
                n += 1
            except OSError:
                pass
        try:
            os.chmod(d, 0o555)
        except OSError:
            pass
    return n


def _link_triton_cache(box: Box) -> str:
    """The box's Triton cache: hard links to the server's cache files that no
    candidate can write (sealed), copies of the others, nothing where there
    is no server cache. The candidate's own writes stay in its box."""
    lower = box.plan.triton_lower
    target = os.path.join(box.path, "triton")
    if not lower or not os.path.isdir(lower):
        return "private, empty"
    cand_uid = box.uid if box.uid is not None else (0 if box.plan.user != "userns" else os.getuid())
    links = copies = 0
    try:
        for d, dirs, names in os.walk(lower):
            out = os.path.normpath(os.path.join(target, os.path.relpath(d, lower)))
            box._own(out)
            for name in names:
                src, dst = os.path.join(d, name), os.path.join(out, name)
                st = os.lstat(src)
                if not stat.S_ISREG(st.st_mode):
                    continue
                writable = st.st_uid == cand_uid or st.st_mode & 0o022
                if not writable:
                    try:
                        os.link(src, dst)
                        links += 1
                        continue
                    except OSError:
                        pass
                shutil.copyfile(src, dst)
                if box.uid is not None:
                    os.chown(dst, box.uid, box.gid)
                copies += 1
    except OSError as e:
        return f"private, partly filled ({e})"
    return (f"private; the server's cache linked read-only ({links} files) and copied ({copies})"
            if links or copies else "private, empty")


def kernel_files(kernel: str) -> tuple[str, list[str]]:
    """(root, files): what a candidate needs of its own sources, relative to
    root. A package (loader.package_root): its .py files, rooted at the
    package's parent. A plain file: itself plus the sibling modules and
    packages it imports, transitively."""
    from . import loader
    kernel = os.path.abspath(kernel)
    pkg = loader.package_root(kernel)
    if pkg is not None:
        return os.path.dirname(pkg), loader.candidate_files(kernel)
    base = os.path.dirname(kernel)
    files, todo, seen = [], [kernel], set()
    while todo and len(files) < 256:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        files.append(f)
        for name in _imported_names(f):
            top = name.split(".")[0]
            mod = os.path.join(base, top + ".py")
            sub = os.path.join(base, top)
            if os.path.isfile(mod):
                todo.append(mod)
            elif os.path.isdir(sub):
                for d, dirs, names in os.walk(sub):
                    dirs[:] = [x for x in dirs if not x.startswith(".") and x != "__pycache__"]
                    todo += [os.path.join(d, n) for n in names if n.endswith(".py")]
    return base, sorted(files)


def _imported_names(path: str) -> list[str]:
    import ast
    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                out.append(node.module)
            elif node.level == 1:
                out += ([node.module] if node.module else []) + [a.name for a in node.names]
    return out


# --------------------------------------------------------------------------
# In the child: entering the sandbox
# --------------------------------------------------------------------------


def enter(box: Box, extra_env: dict | None) -> dict:
    """Boxes the calling freshly forked child (see the module docstring).
    Returns, in the candidate's process only, the record of what is in force;
    the helper processes (B, C1) never return from here."""
    plan = box.plan
    rec: dict = {"mode": plan.mode, "failed": []}
    rec["exec_environment"] = "wiped" if _wipe_exec_environment() else "not wiped"
    userns = False
    if plan.user == "userns":
        userns = _enter_userns(rec)
    rec["user_namespace"] = userns
    if plan.pidns and _unshare(CLONE_NEWPID):
        rec["pid_namespace"] = True
        r, w = os.pipe()
        pid = os.fork()
        if pid != 0:  # B: waits, then ends as the candidate ended
            os.close(w)
            _close_fds_except({0, 1, 2, r})
            _relay(pid, r)
        os.close(r)
        # C1, pid 1 of the new namespace
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _namespaces_and_root(box, rec, own_pidns=True)
        pid2 = os.fork()
        if pid2 != 0:
            _close_fds_except({0, 1, 2, w})
            _init_loop(pid2, w)
        os.close(w)
    else:
        if plan.pidns:
            rec["failed"].append(_err("unshare(CLONE_NEWPID)"))
        rec["pid_namespace"] = False
        _namespaces_and_root(box, rec, own_pidns=False)
    # C2 (or B without a PID namespace): the candidate's own process.
    rec["triton_cache"] = box.triton
    _reopen_stdio()
    _minimal_environment(box, extra_env)
    _drop_privileges(box, rec, userns)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the uid change cleared it
    if _prctl(PR_SET_NO_NEW_PRIVS, 1) != 0:
        rec["failed"].append(_err("PR_SET_NO_NEW_PRIVS"))
    rec["seccomp"] = install_seccomp(rec, plan.libseccomp, plan.allow_perf) if plan.seccomp else "off"
    _measure(rec)
    return rec


def _wipe_exec_environment() -> bool:
    """Zeroes the environment block the server was started with. Every
    forked process carries it in its memory, and /proc/<pid>/environ shows
    that block, not os.environ: /proc/self/environ of a candidate (and of its
    namespace's pid 1) gave the server's HOME and every variable the pool
    passed. Python's os.environ keeps its own copies (the candidate's are
    rebuilt from an allow-list below)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])
    except (OSError, ValueError, IndexError):
        return False
    if not 0 < start < end or end - start > (1 << 24):
        return False
    ctypes.memset(start, 0, end - start)
    return True


def _enter_userns(rec: dict) -> bool:
    """A non-root server: uid 0 of a new user namespace (mapped to the
    server's uid), whose capabilities cover the namespaces made after it."""
    uid, gid = os.getuid(), os.getgid()
    if not _unshare(CLONE_NEWUSER):
        rec["failed"].append(_err("unshare(CLONE_NEWUSER)"))
        return False
    # Non-dumpable (inherited from the server), /proc/self's files belong to
    # root and the maps cannot be written: dumpable for as long as that takes.
    _prctl(PR_SET_DUMPABLE, 1)
    try:
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"0 {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"0 {gid} 1")
    except OSError as e:
        rec["failed"].append(f"user namespace maps: {e}")
    finally:
        _prctl(PR_SET_DUMPABLE, 0)
    return True


def _relay(c1: int, r: int) -> None:
    """B: waits for the namespace's init and ends as the candidate (C2) ended."""
    st = None
    while True:
        try:
            _, st = os.waitpid(c1, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            break
    status = st if st is not None else 0
    try:
        data = os.read(r, 4)
        if len(data) == 4:
            status = struct.unpack("<i", data)[0]
    except OSError:
        pass
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset
            try:
                signal.signal(sig, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
            except (OSError, ValueError):
                pass
        try:
            os.kill(os.getpid(), sig)
        except OSError:
            pass
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 70)


def _init_loop(c2: int, w: int) -> None:
    """C1: reaps; when the candidate's process ends, hands its status to B
    and exits, which kills whatever it left in the namespace."""
    while True:
        try:
            pid, st = os.wait()
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(0)
        if pid == c2:
            try:
                os.write(w, struct.pack("<i", st))
            except OSError:
                pass
            os._exit(0)


def _close_fds_except(keep: set) -> None:
    prev = 0
    for fd in sorted(keep):
        if fd > prev:
            os.closerange(prev, fd)
        prev = fd + 1
    os.closerange(prev, 1 << 20)


def _namespaces_and_root(box: Box, rec: dict, own_pidns: bool) -> None:
    """Network, IPC and UTS namespaces, then the filesystem view."""
    plan = box.plan
    rec["network"] = "none" if _unshare(CLONE_NEWNET) else "shared"
    if rec["network"] != "none":
        rec["failed"].append(_err("unshare(CLONE_NEWNET)"))
    rec["ipc_namespace"] = _unshare(CLONE_NEWIPC) if plan.ipcns else False
    rec["uts_namespace"] = _unshare(CLONE_NEWUTS)
    rec["filesystem"] = "shared"
    rec["proc"] = "host"
    rec["dev_shm"] = "shared"
    if not plan.mountns:
        return
    if not _unshare(CLONE_NEWNS):
        rec["failed"].append(_err("unshare(CLONE_NEWNS)"))
        return
    try:
        # No mount made here may ever show in the server's namespace.
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
    except OSError as e:
        rec["failed"].append(str(e))
        return
    try:
        _build_root(box, rec, own_pidns)
    except Exception as e:  # noqa: BLE001 - no view is better than no candidate; the record says so
        rec["failed"].append(f"filesystem view: {e}")
        rec["filesystem"] = "shared"
        rec["dev_shm"] = "shared"


def _bind(src: str, dst: str, rec: dict, ro: bool = True, dev: bool = False, recursive: bool = False) -> bool:
    """A bind mount of src at dst (made to exist), read-only unless ro=False,
    nosuid, and nodev unless dev. Checks that a read-only one is read-only
    (with recursive, its submounts keep their own flags)."""
    try:
        if os.path.isdir(src):
            os.makedirs(dst, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if not os.path.exists(dst):
                os.close(os.open(dst, os.O_WRONLY | os.O_CREAT, 0o644))
        _mount(src, dst, None, MS_BIND | (MS_REC if recursive else 0))
        flags = MS_BIND | MS_REMOUNT | MS_NOSUID | (0 if dev else MS_NODEV) | (MS_RDONLY if ro else 0)
        _mount(None, dst, None, flags)
        if ro and not (os.statvfs(dst).f_flag & ST_RDONLY):
            raise OSError(errno.EROFS, f"{dst} stayed writable")
        return True
    except OSError as e:
        rec["failed"].append(f"bind {src}: {e}")
        libc().umount2(dst.encode(), MNT_DETACH)
        return False


def _submounts(path: str) -> list[str]:
    """Mount points strictly below path (from /proc/self/mountinfo), outermost first."""
    out = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                mp = line.split()[4].replace("\\040", " ")
                if mp.startswith(path.rstrip("/") + "/"):
                    out.append(mp)
    except (OSError, IndexError):
        pass
    return sorted(set(out), key=lambda p: p.count("/"))


def _is_ancestor_or_same(p: str, of: str) -> bool:
    p = p.rstrip("/") or "/"
    return of == p or of.startswith(p.rstrip("/") + "/")


def compiler_paths() -> list[str]:
    """What Triton needs to build its launcher stubs on a cold cache: the
    directories on PATH (the assembler and linker the compiler calls), and
    the installation prefix of the C compiler it picks ($CC, else gcc, else
    clang, as triton.runtime.build does), which need not live under /usr: on
    the GPU machine gcc is /opt/gcc/bin/gcc, with its cc1 and crt files
    under /opt/gcc. Without them every kernel fails to compile inside the view
    (measured on an H200, docs/GPU-RESULTS.md)."""
    import shutil
    home = os.path.realpath(os.path.expanduser("~"))
    # Never a folder of the user's own (~/.local/bin and the like): what is
    # under HOME stays out of the view.
    out = [p for p in os.environ.get("PATH", "").split(":")
           if p and os.path.isdir(p) and not _is_ancestor_or_same(home, os.path.realpath(p))]
    for cc in (os.environ.get("CC"), shutil.which("gcc"), shutil.which("cc"), shutil.which("clang")):
        if not cc:
            continue
        real = os.path.realpath(shutil.which(cc) or cc)
        prefix = os.path.dirname(os.path.dirname(real))  # <prefix>/bin/gcc
        if prefix not in ("", "/", "/usr"):
            out.append(prefix)
    return out


def readonly_paths(protect: tuple = ()) -> list[str]:
    """The allow-list bound read-only into the view: system directories, the
    Python installation and every directory on sys.path, the directories of
    the shared libraries this process has loaded and of LD_LIBRARY_PATH, the
    CUDA/NVIDIA driver folders, and the worker's own package (so that a
    module it imports lazily still loads). Never a directory holding any of
    `protect` (the server's HOME, the repository, the box's parent), which
    could otherwise show through."""
    paths = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]
    paths += [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)]
    paths += [p for p in sys.path if p and os.path.isdir(p)]
    paths += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    paths += ["/usr/local/nvidia", "/usr/local/cuda", os.environ.get("CUDA_HOME", ""),
              os.environ.get("CUDA_PATH", "")]
    paths += compiler_paths()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and parts[5].startswith("/") and ".so" in parts[5]:
                    paths.append(os.path.dirname(parts[5]))
    except OSError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    out, seen = [], set()
    for p in paths + [here]:
        if not p or not os.path.lexists(p):
            continue
        for q in ([os.path.abspath(p), os.path.realpath(p)] if os.path.islink(p) else [os.path.abspath(p)]):
            if q in seen or q == "/":
                continue
            if q != here and any(_is_ancestor_or_same(q, x) for x in protect + (os.path.dirname(here),) if x):
                continue
            seen.add(q)
            out.append(q)
    return out


ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "nsswitch.conf", "hosts", "host.conf",
             "localtime", "os-release", "lsb-release", "debian_version", "ssl", "ca-certificates", "gai.conf",
             "mime.types", "nvidia", "OpenCL", "vulkan", "timezone")
MASKED_PROC = ("kcore", "keys", "timer_list", "sched_debug", "latency_stats", "sysrq-trigger")
READONLY_PROC = ("sys", "bus", "fs", "irq", "asound", "acpi", "scsi")


def _build_root(box: Box, rec: dict, own_pidns: bool) -> None:
    """The new root: a tmpfs of mount points, read-only binds of the
    allow-list, a tmpfs /tmp, the box read-write at its own path, /dev of the
    needed nodes and a private /dev/shm; then pivot_root into it and a /proc
    of its own. Raises OSError where the view cannot be made (nothing has
    been pivoted by then)."""
    plan = box.plan
    new = os.path.join(box.path, "root")
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=755")

    def at(p: str) -> str:
        return os.path.join(new, p.lstrip("/"))
    protect = (os.path.expanduser("~"), os.path.dirname(box.path),
               os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    bound: list = []
    for p in readonly_paths(protect):
        if any(_is_ancestor_or_same(d, p) for d in bound):
            continue  # inside a tree already bound (its submounts are bound with it)
        if os.path.islink(p):
            # /bin -> usr/bin and the like: the same link in the view
            if not os.path.lexists(at(p)):
                os.makedirs(os.path.dirname(at(p)), exist_ok=True)
                os.symlink(os.readlink(p), at(p))
            continue
        if _bind(p, at(p), rec):
            bound.append(p)
            for sub in _submounts(p):
                if os.path.isdir(sub) and not sub.startswith(("/proc/", "/sys/", "/dev/")):
                    _bind(sub, at(sub), rec)
    rec["readonly"] = bound
    for name in ETC_FILES:
        p = os.path.join("/etc", name)
        if os.path.exists(p):
            _bind(p, at(p), rec)
    _write_passwd(new, box)
    n_failed = len(rec["failed"])
    if os.path.isdir("/sys") and not _bind("/sys", at("/sys"), rec):
        # In a user namespace a mount with locked submounts binds only whole.
        if _bind("/sys", at("/sys"), rec, recursive=True):
            del rec["failed"][n_failed:]
    # /tmp before the box: the box usually lives below it.
    os.makedirs(at("/tmp"), exist_ok=True)
    try:
        _mount("tmpfs", at("/tmp"), "tmpfs", MS_NOSUID | MS_NODEV, "size=1g,mode=1777")
        tmp = "private tmpfs"
    except OSError as e:
        rec["failed"].append(f"/tmp: {e}")
        tmp = "the box's own directory" if _bind(os.path.join(box.path, "tmp"), at("/tmp"), rec, ro=False) \
            else "none"
    # The box itself, read-write at its own path: its only writable place.
    if not _bind(box.path, at(box.path), rec, ro=False):
        raise OSError(errno.EIO, "the box could not be bound into the view")
    writable = [box.path, "/tmp", "/dev/shm"]
    if plan.share:
        if _bind(plan.share, at(plan.share), rec, ro=False):
            rec["test_share"] = plan.share
            writable.append(plan.share)
    _make_dev(new, box, rec)
    # /proc before pivoting: in a user namespace proc may be mounted only
    # while a fully visible one is still in the mount namespace.
    _mount_proc(at("/proc"), rec, own_pidns, box)
    # Everything is in place: the view's own directories become read-only.
    try:
        _mount(None, new, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "size=16m,mode=755")
    except OSError as e:
        rec["failed"].append(f"read-only root: {e}")
    cwd = os.getcwd()
    how = _pivot(new, rec)
    if how == "shared":
        raise OSError(errno.EPERM, "neither pivot_root nor chroot")
    rec["filesystem"] = how
    rec["tmp"] = tmp
    rec["writable"] = writable
    try:
        os.chdir(cwd)
    except OSError as e:
        rec["failed"].append(f"chdir {cwd}: {e}")


def _write_passwd(new: str, box: Box) -> None:
    """/etc/passwd and /etc/group of the view: root and the candidate's uid
    only (getpass and torch's cache paths ask for a user name; the host's
    accounts are none of its business)."""
    etc = os.path.join(new, "etc")
    os.makedirs(etc, exist_ok=True)
    uid = box.uid if box.uid is not None else 0
    for name, text in (("passwd", "root:x:0:0::/nonexistent:/usr/sbin/nologin\n"
                                  + (f"mkcand:x:{uid}:{uid}::/nonexistent:/usr/sbin/nologin\n" if uid else "")),
                       ("group", "root:x:0:\n" + (f"mkcand:x:{uid}:\n" if uid else ""))):
        with open(os.path.join(etc, name), "w") as f:
            f.write(text)


def _make_dev(new: str, box: Box, rec: dict) -> None:
    dev = os.path.join(new, "dev")
    os.makedirs(dev, exist_ok=True)
    _mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=755")  # no view without it
    names = ["null", "zero", "full", "random", "urandom"]
    try:
        names += [n for n in os.listdir("/dev") if n.startswith(("nvidia", "dri", "kfd"))]
    except OSError:
        pass
    gpu = []
    for n in names:
        src = os.path.join("/dev", n)
        if not os.path.exists(src):
            continue
        if _bind(src, os.path.join(dev, n), rec, ro=False, dev=True) and n not in ("null", "zero", "full", "random",
                                                                                    "urandom"):
            gpu.append(n)
    rec["gpu_devices"] = sorted(gpu)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, os.path.join(dev, name))
    shm = os.path.join(dev, "shm")
    os.makedirs(shm)
    try:
        _mount("tmpfs", shm, "tmpfs", MS_NOSUID | MS_NODEV, "size=1g,mode=1777")
        rec["dev_shm"] = "private tmpfs"
    except OSError as e:
        rec["failed"].append(f"/dev/shm: {e}")
        if _bind(os.path.join(box.path, "shm"), shm, rec, ro=False):
            rec["dev_shm"] = "the box's own directory"
    try:
        _mount(None, dev, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "size=64k,mode=755")
    except OSError as e:
        rec["failed"].append(f"read-only /dev: {e}")


def _pivot(new: str, rec: dict) -> str:
    nr = PIVOT_ROOT_NR.get(platform.machine())
    os.chdir(new)
    if nr is not None:
        if libc().syscall(ctypes.c_long(nr), ctypes.c_char_p(b"."), ctypes.c_char_p(b".")) == 0:
            if libc().umount2(b".", MNT_DETACH) != 0:
                rec["failed"].append(_err("detaching the old root"))
            os.chdir("/")
            return "pivot_root into an allow-list view"
        rec["failed"].append(_err("pivot_root"))
    try:
        os.chroot(new)
        os.chdir("/")
        return "chroot into an allow-list view (pivot_root refused)"
    except OSError as e:
        rec["failed"].append(f"chroot: {e}")
        return "shared"


def _mount_proc(target: str, rec: dict, own_pidns: bool, box: Box) -> None:
    """A proc of its own at target: of its own PID namespace, else one that
    hides other users' processes (only per mount on Linux >= 5.8, and only
    useful with a uid of its own), else one that shows them all. Parts of it
    that change the machine are bound read-only or masked."""
    os.makedirs(target, exist_ok=True)
    opts = None
    if not own_pidns:
        if box.uid is not None and kernel_at_least(5, 8):
            opts = "hidepid=invisible"
    try:
        _mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts)
        rec["proc"] = ("own PID namespace" if own_pidns else
                       "hidepid=invisible (other users' processes hidden)" if opts else
                       "every process visible; other users' memory, environment and descriptors unreadable")
    except OSError as e:
        rec["failed"].append(f"/proc: {e}")
        rec["proc"] = "none"
        return
    for n in READONLY_PROC:
        p = os.path.join(target, n)
        if os.path.isdir(p):
            _bind(p, p, rec)
    for n in MASKED_PROC:
        p = os.path.join(target, n)
        if os.path.exists(p):
            try:
                _mount("/dev/null", p, None, MS_BIND)
            except OSError:
                pass


def _reopen_stdio() -> None:
    """stdin, stdout and stderr reopened inside the view (the descriptors
    opened before it name paths outside it)."""
    try:
        cwd = os.getcwd()
    except OSError:
        return
    try:
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
            f = os.open(os.path.join(cwd, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(f, fd)
            os.close(f)
    except OSError:
        pass


# What a candidate's environment keeps: the locale, the paths its libraries
# and compilers need, and the GPU/Triton/torch settings (TRITON_F32_DEFAULT).
# Nothing else of the server's: no paths to the repository or the caches.
ENV_EXACT = ("PATH", "LANG", "LANGUAGE", "TZ", "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
             "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED",
             "PYTHONUNBUFFERED", "CC", "CXX", "MKEVOLVE_WORKER_TOKEN")
ENV_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "TRITON_", "TORCH", "PYTORCH_", "NCCL_", "CUBLAS_", "CUDNN_")


def _minimal_environment(box: Box, extra_env: dict | None) -> None:
    from .errors import looks_secret
    keep = {k: v for k, v in os.environ.items()
            if (k in ENV_EXACT or k.startswith(ENV_PREFIXES)) and not looks_secret(k)}
    keep.update(extra_env or {})
    home = os.getcwd()
    keep.update(HOME=home, TMPDIR=home, USER="mkcand", LOGNAME="mkcand",
                XDG_CACHE_HOME=os.path.join(home, ".cache"), XDG_CONFIG_HOME=os.path.join(home, ".config"),
                XDG_DATA_HOME=os.path.join(home, ".local", "share"),
                XDG_STATE_HOME=os.path.join(home, ".local", "state"), XDG_RUNTIME_DIR=home,
                TRITON_CACHE_DIR=os.path.join(box.path, "triton"),
                TORCHINDUCTOR_CACHE_DIR=os.path.join(home, ".cache", "inductor"))
    keep.pop("TRITON_HOME", None)
    os.environ.clear()
    os.environ.update(keep)


def point_home(new: str, old: str) -> None:
    """At hand-over: HOME, TMPDIR and XDG_* move to the new private directory."""
    for k, v in list(os.environ.items()):
        if (k in ("HOME", "TMPDIR") or k.startswith("XDG_")) and (v == old or v.startswith(old + os.sep)):
            os.environ[k] = new + v[len(old):]


def _drop_privileges(box: Box, rec: dict, userns: bool) -> None:
    plan = box.plan
    rec["user"] = "server's (root, with capabilities)" if os.geteuid() == 0 else "server's"
    if plan.user == "none" and not userns:
        return
    last = _cap_last()
    if box.uid is not None and not userns and rec.get("filesystem") == "shared" and not _reachable(box.path):
        rec["failed"].append(f"without a filesystem view the box is out of reach of another uid "
                             f"({os.path.dirname(box.path)} or above is not traversable)")
    elif box.uid is not None and not userns:
        try:
            for cap in range(last + 1):
                _prctl(PR_CAPBSET_DROP, cap)
            _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
            os.setgroups([])
            os.setresgid(box.gid, box.gid, box.gid)
            os.setresuid(box.uid, box.uid, box.uid)
            # The uid change made this process non-dumpable (fs.suid_dumpable),
            # which leaves /proc/self owned by root; only this uid could use
            # dumpable, and no other process runs as it.
            _prctl(PR_SET_DUMPABLE, 1)
            rec["user"] = f"own uid {box.uid}"
            return
        except OSError as e:
            rec["failed"].append(f"uid {box.uid}: {e}")
    # uid 0 (of the host, or of a user namespace) without capabilities; with
    # the box's gid where it has one (its directories are the group's).
    try:
        if box.gid is not None and not userns:
            os.setgroups([box.gid])
            os.setresgid(box.gid, box.gid, box.gid)
        if _prctl(PR_SET_SECUREBITS, SECUREBITS_LOCKED_NOROOT) != 0:
            rec["failed"].append(_err("securebits"))
        for cap in range(last + 1):
            _prctl(PR_CAPBSET_DROP, cap)
        _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
        _capset_empty()
        rec["user"] = ("uid 0 of a user namespace, no capabilities" if userns else
                       "uid 0 without capabilities")
    except OSError as e:
        rec["failed"].append(f"dropping capabilities: {e}")


def _reachable(path: str) -> bool:
    """Whether every directory from / down to path lets others through."""
    p = os.path.abspath(path)
    while True:
        try:
            if not os.stat(p).st_mode & 0o001:
                return False
        except OSError:
            return False
        if p == "/":
            return True
        p = os.path.dirname(p)


def _cap_last() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 63


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _capset_empty() -> None:
    hdr = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    if libc().capset(ctypes.byref(hdr), data) != 0:
        raise OSError(ctypes.get_errno(), _err("capset"))


PR_CAPBSET_READ = 23
PR_GET_SECCOMP = 21
PR_GET_NO_NEW_PRIVS = 39
PR_CAP_AMBIENT_IS_SET = 1


def _measure(rec: dict) -> None:
    """What the kernel says is in force (not what was asked for): capget,
    the bounding and ambient sets, PR_GET_NO_NEW_PRIVS, PR_GET_SECCOMP."""
    hdr = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    caps: dict = {}
    if libc().capget(ctypes.byref(hdr), data) == 0:
        for name in ("effective", "permitted", "inheritable"):
            v = getattr(data[0], name) | (getattr(data[1], name) << 32)
            if v:
                caps[name] = f"{v:#x}"
    else:
        caps["capget"] = _err("capget")
    last = _cap_last()
    bnd = [c for c in range(last + 1) if _prctl(PR_CAPBSET_READ, c) == 1]
    amb = [c for c in range(last + 1) if _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c) == 1]
    if bnd:
        caps["bounding"] = len(bnd)
    if amb:
        caps["ambient"] = len(amb)
    rec["capabilities"] = "none" if not caps else caps
    rec["no_new_privs"] = _prctl(PR_GET_NO_NEW_PRIVS) == 1
    rec["seccomp_mode"] = {0: "none", 1: "strict", 2: "filter"}.get(_prctl(PR_GET_SECCOMP), "unknown")
    rec["uid"] = os.getuid()
    if not rec["failed"]:
        rec.pop("failed")


def complete(rec: dict) -> list[str]:
    """What a record lacks for MKEVOLVE_SANDBOX=require (empty: nothing)."""
    missing = []
    if rec.get("capabilities") != "none":
        missing.append("capabilities dropped")
    if not rec.get("no_new_privs"):
        missing.append("no_new_privs")
    if rec.get("seccomp_mode") != "filter":
        missing.append("seccomp filter")
    if not str(rec.get("filesystem", "")).startswith(("pivot_root", "chroot")):
        missing.append("filesystem view")
    if rec.get("proc") not in ("own PID namespace",) and not str(rec.get("proc", "")).startswith("hidepid"):
        missing.append("own /proc")
    if rec.get("network") != "none":
        missing.append("network cut")
    if rec.get("dev_shm") == "shared":
        missing.append("private /dev/shm")
    return missing


# --------------------------------------------------------------------------
# seccomp
# --------------------------------------------------------------------------


class _ScmpArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_MASKED_EQ = 7


def _scmp_errno(e: int) -> int:
    return 0x00050000 | (e & 0xFFFF)


def load_libseccomp():
    """libseccomp.so.2 through ctypes, or None (Debian's libseccomp2)."""
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ScmpArgCmp)]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def install_seccomp(rec: dict, use_libseccomp: bool = True, allow_perf: bool = False) -> str:
    """Loads the deny-list filter into the calling (single-threaded) process:
    libseccomp, else the hand-built BPF (x86_64), else none. Returns how.
    allow_perf: perf_event_open is let through (a machine whose CUPTI needs it)."""
    denied = tuple(n for n in DENIED_SYSCALLS if not (allow_perf and n == "perf_event_open"))
    lib = load_libseccomp() if use_libseccomp else None
    if lib is not None:
        try:
            n = _libseccomp_filter(lib, denied)
            return f"libseccomp ({n} system calls denied, clone with namespace flags refused)"
        except OSError as e:
            rec["failed"].append(f"libseccomp: {e}")
    elif use_libseccomp:
        rec["failed"].append("libseccomp.so.2 could not be loaded")
    if platform.machine() == "x86_64":
        try:
            _bpf_filter(denied)
            return (f"hand-built BPF, x86_64 ({len(denied)} system calls denied, clone with namespace "
                    f"flags refused)")
        except OSError as e:
            rec["failed"].append(f"BPF filter: {e}")
    else:
        rec["failed"].append(f"no hand-built filter for {platform.machine()}")
    return "none"


def _libseccomp_filter(lib, denied: tuple = DENIED_SYSCALLS) -> int:
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise OSError(errno.ENOMEM, "seccomp_init failed")
    try:
        n = 0
        for name in denied:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:
                continue  # not a system call on this architecture
            rc = lib.seccomp_rule_add_array(ctx, _scmp_errno(errno.EPERM), nr, 0, None)
            if rc < 0:
                raise OSError(-rc, f"seccomp_rule_add({name}): {os.strerror(-rc)}")
            n += 1
        nr = lib.seccomp_syscall_resolve_name(b"clone3")
        if nr >= 0:
            rc = lib.seccomp_rule_add_array(ctx, _scmp_errno(errno.ENOSYS), nr, 0, None)
            if rc < 0:
                raise OSError(-rc, f"seccomp_rule_add(clone3): {os.strerror(-rc)}")
        nr = lib.seccomp_syscall_resolve_name(b"clone")
        for flag in NS_FLAGS:
            if flag == CLONE_NEWTIME:
                continue  # CSIGNAL's bits in clone(2): only clone3 and unshare take it
            cmp = _ScmpArgCmp(0, SCMP_CMP_MASKED_EQ, flag, flag)
            rc = lib.seccomp_rule_add_array(ctx, _scmp_errno(errno.EPERM), nr, 1, ctypes.byref(cmp))
            if rc < 0:
                raise OSError(-rc, f"seccomp_rule_add(clone): {os.strerror(-rc)}")
        rc = lib.seccomp_load(ctx)
        if rc < 0:
            raise OSError(-rc, f"seccomp_load: {os.strerror(-rc)}")
        return n
    finally:
        lib.seccomp_release(ctx)


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


AUDIT_ARCH_X86_64 = 0xC000003E
_LD_ABS_W, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_KILL_PROCESS = 0x7FFF0000, 0x80000000


def bpf_program(denied: tuple = DENIED_SYSCALLS) -> list[tuple[int, int, int, int]]:
    """The x86_64 filter as (code, jt, jf, k): other architectures' calls
    (int 0x80) and x32 calls kill the process; the deny-list returns EPERM,
    clone3 ENOSYS, clone with a CLONE_NEW* flag EPERM."""
    mask = 0
    for f in NS_FLAGS:
        if f != CLONE_NEWTIME:
            mask |= f
    # (code, true-label, false-label, k); labels resolved below (BPF jumps are relative).
    ins: list = [("ld", None, None, 4),                                 # arch
                 ("jeq", None, "kill", AUDIT_ARCH_X86_64),
                 ("ld", None, None, 0),                                 # nr
                 ("jge", "kill", None, 0x40000000)]                     # x32 ABI
    ins += [("jeq", "eperm", None, X86_64_NR[n]) for n in denied]
    ins += [("jeq", "enosys", None, X86_64_NR["clone3"]),
            ("jeq", "clone", None, X86_64_NR["clone"]),
            ("ret", None, None, _RET_ALLOW),
            ("label", "clone"), ("ld", None, None, 16),                 # args[0], low half
            ("jset", "eperm", None, mask),
            ("ret", None, None, _RET_ALLOW),
            ("label", "eperm"), ("ret", None, None, 0x00050000 | errno.EPERM),
            ("label", "enosys"), ("ret", None, None, 0x00050000 | errno.ENOSYS),
            ("label", "kill"), ("ret", None, None, _RET_KILL_PROCESS)]
    labels, pos = {}, 0
    for i in ins:
        if i[0] == "label":
            labels[i[1]] = pos
        else:
            pos += 1
    codes = {"ld": _LD_ABS_W, "jeq": _JEQ, "jge": _JGE, "jset": _JSET, "ret": _RET}
    out, pos = [], 0
    for i in ins:
        if i[0] == "label":
            continue
        op, t, f, k = i

        def rel(label):
            if label is None:
                return 0
            d = labels[label] - pos - 1
            if not 0 <= d <= 255:
                raise ValueError(f"BPF jump to {label} out of range ({d})")
            return d
        out.append((codes[op], rel(t), rel(f), k))
        pos += 1
    return out


def _bpf_filter(denied: tuple = DENIED_SYSCALLS) -> None:
    prog = bpf_program(denied)
    arr = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), arr)
    if _prctl(PR_SET_NO_NEW_PRIVS, 1) != 0:
        raise OSError(ctypes.get_errno(), _err("PR_SET_NO_NEW_PRIVS"))
    if libc().prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog),
                    ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        raise OSError(ctypes.get_errno(), _err("PR_SET_SECCOMP"))


# --------------------------------------------------------------------------
# The record a verdict carries
# --------------------------------------------------------------------------


def record_of(child) -> dict | None:
    """The first "sandbox" event of a child: sent before any of its work
    arrived, so no candidate code wrote it (later ones are ignored)."""
    for ev in getattr(child, "events", []):
        if ev.get("ev") == "sandbox":
            return {k: v for k, v in ev.items() if k not in ("ev", "_t")}
    return None


def isolation_fields(cand, prof=None) -> dict:
    """checks.isolation's sandbox fields for an evaluation: the candidate's
    own record (and its profiling process's, where that differs)."""
    if PLAN is None or PLAN.mode == "off":
        return {"sandbox": {"mode": "off" if PLAN is not None else "not configured", "user": "server's",
                            "filesystem": "shared", "seccomp": "none"}}
    rec = record_of(cand) if cand is not None else None
    out: dict = {"sandbox": rec if rec is not None else
                 {"mode": PLAN.mode, "error": "the candidate's process sent no sandbox record"}}
    if rec is not None:
        out["env"] = "minimal allow-list; HOME, TMPDIR and XDG_* in its box"
        if str(rec.get("filesystem", "")).startswith(("pivot_root", "chroot")):
            out["cwd"] = "private directory in its box"
    if prof is not None:
        prec = record_of(prof)
        if prec is not None and {k: v for k, v in prec.items() if k != "uid"} != \
                {k: v for k, v in (rec or {}).items() if k != "uid"}:
            out["sandbox_profiling"] = prec
    return out
