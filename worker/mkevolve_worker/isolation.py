"""Process isolation: forked children with deadlines, sandboxes and clean-up.

The server (or the one-shot CLI) is a child subreaper and not dumpable. Each
piece of untrusted work runs in a child forked from it: its own session and
process group, a private temp directory as cwd, stdin from /dev/null, stdout
and stderr in files, every inherited descriptor closed except its two pipes,
secret-looking variables removed, no core dumps, and no network where the OS
lets us cut it. When the child ends or misses its deadline, every descendant
of this process is killed and reaped, including ones that called setsid():
they are reparented to us because we are a subreaper.

Limitation (documented for the pool): a child that kills this process takes
it down; its descendants are then reparented to the next subreaper above us.
The pool should start the server inside a PID namespace (`unshare -p -f`)
where permitted, so that losing the server kills everything it started.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
from dataclasses import dataclass, field

from . import sandbox
from .errors import looks_secret

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000

# One handle on the C library, shared with the sandbox.
libc = sandbox.libc


def prctl(option: int, arg: int) -> bool:
    try:
        return libc().prctl(option, ctypes.c_ulong(arg), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def become_supervisor() -> dict:
    """Makes this process a child subreaper, non-dumpable (so same-uid
    children cannot read its memory or descriptors through /proc) and one
    whose freed memory is wiped (wipe_freed_memory)."""
    return {
        "subreaper": prctl(PR_SET_CHILD_SUBREAPER, 1),
        "nondumpable": prctl(PR_SET_DUMPABLE, 0),
        "wipes_freed_memory": wipe_freed_memory(True),
    }


M_PERTURB = -6  # glibc mallopt(3)


def wipe_freed_memory(on: bool) -> bool:
    """With on, glibc overwrites every block this process frees (mallopt
    M_PERTURB). The server turns it on: children are forked from it, so
    whatever an earlier eval left in its heap (expected outputs compared and
    freed) would otherwise be readable in the next candidate's memory.
    Children turn it off again. False where the C library has no mallopt."""
    try:
        return libc().mallopt(M_PERTURB, 0x5A if on else 0) == 1
    except (OSError, AttributeError):
        return False


def unshare_network() -> str:
    """Cuts the network of the calling (single-threaded) process. Returns
    "none" when cut, "shared" when the OS refused (EPERM is ignored)."""
    try:
        if libc().unshare(CLONE_NEWNET) == 0:
            return "none"
        if os.geteuid() != 0:
            uid, gid = os.getuid(), os.getgid()
            if libc().unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
                try:
                    with open("/proc/self/setgroups", "w") as f:
                        f.write("deny")
                    with open("/proc/self/uid_map", "w") as f:
                        f.write(f"{uid} {uid} 1")
                    with open("/proc/self/gid_map", "w") as f:
                        f.write(f"{gid} {gid} 1")
                except OSError:
                    pass
                return "none"
    except (OSError, AttributeError):
        pass
    return "shared"


def scrub_environment(private_dir: str) -> None:
    for k in list(os.environ):
        if looks_secret(k):
            del os.environ[k]
    os.environ["HOME"] = private_dir
    os.environ["TMPDIR"] = private_dir
    os.environ.pop("MKEVOLVE_WORKER_CHANNEL", None)
    os.environ.pop("MKEVOLVE_TIMING_LOCK", None)  # the server's, not the candidate's business
    os.environ.pop("MKEVOLVE_SANDBOX_VERDICTS", None)  # likewise (selftest_cache.py)


def _set_rlimits() -> None:
    import resource
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ValueError, OSError):
        pass
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        cap = 64 << 30
        if hard == resource.RLIM_INFINITY or hard > cap:
            resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap if hard == resource.RLIM_INFINITY else hard))
    except (ValueError, OSError):
        pass


def _set_cpu_limit(cpu_seconds: float | None, already_used: bool = False) -> None:
    """CPU-time limit of the calling child: its deadline plus 30 s, on top of
    what it used before its work arrived (a spare's warm-up)."""
    if not cpu_seconds:
        return
    import resource
    try:
        used = 0
        if already_used:
            ru = resource.getrusage(resource.RUSAGE_SELF)
            used = int(ru.ru_utime + ru.ru_stime) + 1
        lim = int(cpu_seconds) + 30 + used
        soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        if hard == resource.RLIM_INFINITY or hard > lim:
            resource.setrlimit(resource.RLIMIT_CPU, (lim, lim + 5))
    except (ValueError, OSError):
        pass


def _close_fds_except(keep: set[int]) -> None:
    prev = 3
    for fd in sorted(k for k in keep if k >= 3):
        if fd > prev:
            os.closerange(prev, fd)
        prev = fd + 1
    os.closerange(prev, 1 << 20)


@dataclass
class ChildContext:
    """What the body of a child sees."""
    dir: str
    ev_fd: int
    ctl_fd: int
    network: str = "shared"

    def send(self, obj: dict) -> None:
        data = (json.dumps(obj) + "\n").encode()
        try:
            os.write(self.ev_fd, data)
        except OSError:
            pass

    def send_fd(self, fd: int) -> None:
        """Hands the server a descriptor over the control socket (spares only)."""
        sock = socket.socket(fileno=os.dup(self.ctl_fd))
        try:
            socket.send_fds(sock, [b"F"], [fd])
        finally:
            sock.close()

    def recv_msg(self) -> tuple[dict | None, list[int]]:
        """The next message the server sent with send_msg(): (object, descriptors);
        (None, []) when the server closed the channel or sent something else."""
        sock = socket.socket(fileno=os.dup(self.ctl_fd))
        fds: list[int] = []
        try:
            data, fds, _, _ = socket.recv_fds(sock, 8, MAX_MSG_FDS)
            if not data:
                return None, fds
            (n,) = struct.unpack("<Q", _recv_exact(sock, 8, data))
            if n > (16 << 20):
                return None, fds
            obj = json.loads(_recv_exact(sock, n, b""))
            return (obj if isinstance(obj, dict) else None), fds
        except (OSError, EOFError, ValueError):
            return None, fds
        finally:
            sock.close()

    def wait_go(self) -> bool:
        """Blocks until the server says go ("g"); False on anything else or EOF."""
        try:
            b = os.read(self.ctl_fd, 1)
        except OSError:
            return False
        return b == b"g"


@dataclass
class Child:
    pid: int
    dir: str
    ev_fd: int
    ctl_fd: int
    name: str
    started: float = field(default_factory=time.monotonic)
    events: list = field(default_factory=list)
    exit_status: int | None = None   # raw waitpid status
    timed_out: bool = False
    _buf: bytes = b""
    ctl_sock: object = None   # a spare's control socket (prespawn), owning ctl_fd
    prestarted: bool = False  # a spare that was forked and warmed before its work arrived
    box: object = None        # sandbox.Box of a candidate's process (sandbox.py), else None

    @property
    def stdout_path(self) -> str:
        return os.path.join(self.dir, "stdout.txt")

    @property
    def stderr_path(self) -> str:
        return os.path.join(self.dir, "stderr.txt")

    def go(self) -> None:
        """Lets a waiting child go on; one that another process stopped
        (SIGSTOP: every candidate runs as the same user) is continued first."""
        _kill(self, signal.SIGCONT)
        try:
            os.write(self.ctl_fd, b"g")
        except OSError:
            pass

    def stop(self) -> None:
        """The answer to a child waiting in wait_go() that means "no"."""
        try:
            os.write(self.ctl_fd, b"s")
        except OSError:
            pass

    def exit_code(self) -> int | None:
        if self.exit_status is not None and os.WIFEXITED(self.exit_status):
            return os.WEXITSTATUS(self.exit_status)
        return None

    def term_signal(self) -> int | None:
        if self.exit_status is not None and os.WIFSIGNALED(self.exit_status):
            return os.WTERMSIG(self.exit_status)
        return None

    def tail(self, which: str = "stderr", limit: int = 1500) -> str:
        path = self.stderr_path if which == "stderr" else self.stdout_path
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return ""
        try:
            size = os.fstat(fd).st_size
            os.lseek(fd, max(0, size - limit), os.SEEK_SET)
            data = os.read(fd, limit)
        except OSError:
            return ""
        finally:
            os.close(fd)
        return data.decode("utf-8", "replace")

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)


_base_tmp: str | None = None


def base_tmp() -> str:
    """One private directory per server for all children's directories."""
    global _base_tmp
    if _base_tmp is None or not os.path.isdir(_base_tmp):
        _base_tmp = tempfile.mkdtemp(prefix="mkworker-")
        os.chmod(_base_tmp, 0o700)
    return _base_tmp


def spawn(name: str, body, *, cut_network: bool = True, cpu_seconds: float | None = None,
          extra_env: dict | None = None, box=None) -> Child:
    """Forks a child that runs body(ctx) -> exit code in a sandbox (with box,
    a sandbox.Box: the candidate's sandbox, sandbox.py)."""
    def run(ctx):
        _set_cpu_limit(cpu_seconds)
        return body(ctx)
    return _fork(name, run, cut_network=cut_network, extra_env=extra_env, socket_ctl=False, box=box)


# Pids of idle spares (prespawn): kill_descendants() leaves them alone until
# they are handed a body (hand_over) or everything is torn down.
_SPARES: set[int] = set()


def prespawn(name: str, warm, bodies: dict, *, cut_network: bool = True, extra_env: dict | None = None,
             box=None) -> Child:
    """Forks a spare: a child sandboxed exactly like spawn()'s that runs
    warm(ctx) (start CUDA, the profiler: costs that do not depend on the
    work), reports {"ev": "warm"}, and then waits for hand_over() to name
    its body (one of `bodies`) and job. A spare runs one body and exits, like
    any child: it is a fresh process prepared ahead of time, never reused.
    With box, it is boxed at fork time (sandbox.py): the work it is handed
    later reaches it through the box."""
    child = _fork(name, lambda ctx: _spare_main(ctx, warm, bodies), cut_network=cut_network,
                  extra_env=extra_env, socket_ctl=True, box=box)
    _SPARES.add(child.pid)
    return child


def _exited(child: Child) -> bool:
    """Reaps the child if it has exited (also when the catch-all reaper got it
    first), recording its status; False while it runs."""
    try:
        pid, status = os.waitpid(child.pid, os.WNOHANG)
    except ChildProcessError:
        pid, status = child.pid, _REAPED.pop(child.pid, 0)
    if pid == child.pid:
        child.exit_status = status
        return True
    return False


def spare_alive(child: Child) -> bool:
    """False if an idle spare has died (and reaps it)."""
    return not _exited(child)


def release_spare(child: Child) -> None:
    """Kills an idle spare (if alive), reaps it and closes its channels. Unlike
    finish(), it touches no other process: spares have no descendants, and
    other children may be running."""
    _SPARES.discard(child.pid)
    if child.exit_status is None:
        _kill(child)
        try:
            _, child.exit_status = os.waitpid(child.pid, 0)
        except ChildProcessError:
            child.exit_status = _REAPED.pop(child.pid, 0)
    if child.ctl_sock is not None:
        child.ctl_sock.close()
        child.ctl_sock = None
    try:
        os.close(child.ev_fd)
    except OSError:
        pass


def hand_over(child: Child, body: str, job: dict, payload_fd: int | None = None,
              cpu_seconds: float | None = None, new_dir: bool = True) -> None:
    """Gives a spare its work: the body's name, its job (JSON) and, where the
    job carries tensors, a descriptor of a sealed tensor file (tensorio) whose
    top-level keys are merged into the job. The child's deadline counts from
    here. With new_dir (a spare that sat idle) it also gets a new private
    directory, made now: anything a candidate left in the old one stays
    behind (and a spare someone stopped with SIGSTOP is continued)."""
    if new_dir:
        _kill(child, signal.SIGCONT)
        # The child removes the old one once it has moved (it may not even
        # have opened its output files there yet). A boxed child's new
        # directory is in its box, the only place it can see.
        if child.box is not None:
            child.dir = child.box.rehome(child.dir, child.name)
        else:
            child.dir = tempfile.mkdtemp(prefix=f"{child.name}-", dir=base_tmp())
    msg = json.dumps({"body": body, "job": job, "cpu_seconds": cpu_seconds,
                      "dir": child.dir if new_dir else None}).encode()
    data = struct.pack("<Q", len(msg)) + msg
    fds = [payload_fd] if payload_fd is not None else []
    _SPARES.discard(child.pid)
    child.started = time.monotonic()
    try:
        sent = socket.send_fds(child.ctl_sock, [data], fds)
        if sent < len(data):
            child.ctl_sock.sendall(data[sent:])
    except OSError:
        pass  # the spare died: supervise() finds it exited and reports how


MAX_MSG_FDS = 16


def send_msg(child: Child, obj: dict, fds=()) -> bool:
    """Sends a child (one with a control socket) a JSON message and, with it,
    descriptors (SCM_RIGHTS); the child reads it with ChildContext.recv_msg().
    False when the child is gone."""
    if child.ctl_sock is None:
        return False
    msg = json.dumps(obj).encode()
    data = struct.pack("<Q", len(msg)) + msg
    _kill(child, signal.SIGCONT)  # a child another process stopped still gets its work
    try:
        child.ctl_sock.settimeout(None)
        sent = socket.send_fds(child.ctl_sock, [data], list(fds)[:MAX_MSG_FDS])
        if sent < len(data):
            child.ctl_sock.sendall(data[sent:])
        return True
    except OSError:
        return False


def receive_fd(child: Child, timeout_s: float) -> int | None:
    """A descriptor the child sent with ChildContext.send_fd(), or None when it
    closed its end or sent none within timeout_s."""
    if child.ctl_sock is None:
        return None
    child.ctl_sock.settimeout(max(0.01, timeout_s))
    try:
        data, fds, _, _ = socket.recv_fds(child.ctl_sock, 1, 4)
    except OSError:  # socket.timeout included
        return None
    for extra in fds[1:]:
        os.close(extra)
    if not data or not fds:
        if fds:
            os.close(fds[0])
        return None
    return fds[0]


def more_queued(child: Child) -> bool:
    """Whether the child has queued anything more on its control socket (a
    descriptor it sent besides the one just received), without taking it."""
    sock = child.ctl_sock
    if sock is None:
        return False
    # A socket with a timeout (receive_fd sets one) waits for data before a
    # recv, whatever its flags: made non-blocking here, the peek returns at once.
    before = sock.gettimeout()
    sock.settimeout(0.0)
    try:
        return bool(sock.recv(1, socket.MSG_PEEK))
    except OSError:  # BlockingIOError: nothing queued
        return False
    finally:
        sock.settimeout(before)


def _recv_exact(sock, n: int, first: bytes) -> bytes:
    buf = bytearray(first)
    while len(buf) < n:
        chunk = sock.recv(min(1 << 20, n - len(buf)))
        if not chunk:
            raise EOFError("the server closed the channel before the job arrived")
        buf += chunk
    return bytes(buf)


def _spare_main(ctx: "ChildContext", warm, bodies: dict) -> int:
    t0 = time.monotonic()
    info: dict = {}
    try:
        info = warm(ctx) or {}
    except BaseException as e:  # noqa: BLE001 - the body meets the same problem and reports it
        info = {"error": f"{type(e).__name__}: {e}"[:300]}
    ctx.send({"ev": "warm", "s": round(time.monotonic() - t0, 3), **info})
    sock = socket.socket(fileno=os.dup(ctx.ctl_fd))
    try:
        # Exactly the 8-byte length first (the descriptors come with it), then
        # exactly the header: nothing after it (the server's "go") is consumed.
        data, fds, _, _ = socket.recv_fds(sock, 8, 4)
        if not data:
            return 0  # closed without work: the server is shutting down
        (n,) = struct.unpack("<Q", _recv_exact(sock, 8, data))
        header = json.loads(_recv_exact(sock, n, b""))
    finally:
        sock.close()
    _set_cpu_limit(header.get("cpu_seconds"), already_used=True)
    if header.get("dir"):
        # The directory made at hand-over; the old one, with what the warm-up
        # printed and anything left there while we sat idle, goes.
        old, ctx.dir = ctx.dir, header["dir"]
        os.chdir(ctx.dir)
        sandbox.point_home(ctx.dir, old)  # XDG_* too, where the sandbox set them
        os.environ["HOME"] = os.environ["TMPDIR"] = ctx.dir
        tempfile.tempdir = None
        _open_output_files(ctx.dir)
        cleanup_dir(old)
    job = header["job"]
    if fds:
        from . import tensorio
        try:
            obj, _ = tensorio.load_fd(fds[0])
        finally:
            os.close(fds[0])
        job.update(obj)
    return bodies[header["body"]](ctx, job)


def _open_output_files(d: str) -> None:
    """stdout and stderr of the calling child: files in its directory d."""
    sys.stdout.flush()
    sys.stderr.flush()
    for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
        f = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)


def _fork(name: str, run, *, cut_network: bool, extra_env: dict | None, socket_ctl: bool, box=None) -> Child:
    """Forks a sandboxed child that runs run(ctx) -> exit code. The control
    channel is a pipe, or a socket pair when descriptors travel over it.
    With box (sandbox.Box), the child is a candidate's process: it enters
    the sandbox (sandbox.enter) and reports what was in force as its first
    event, "sandbox", before any work reaches it."""
    if box is not None:
        d = box.new_dir(name)
        box.refs += 1
    else:
        d = tempfile.mkdtemp(prefix=f"{name}-", dir=base_tmp())
    ev_r, ev_w = os.pipe()
    if socket_ctl:
        srv_sock, kid_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        ctl_w, ctl_r = srv_sock.detach(), kid_sock.detach()
    else:
        ctl_r, ctl_w = os.pipe()
    parent = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError:
        for fd in (ev_r, ev_w, ctl_r, ctl_w):
            os.close(fd)
        cleanup_dir(d)
        raise
    if pid == 0:  # child
        code = 70
        try:
            os.setsid()
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:
                os._exit(71)
            os.chdir(d)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            _open_output_files(d)
            os.close(ev_r)
            os.close(ctl_w)
            _close_fds_except({0, 1, 2, ev_w, ctl_r})
            for fd in (ev_w, ctl_r):
                os.set_inheritable(fd, False)
            scrub_environment(d)
            if extra_env:
                os.environ.update(extra_env)
            _set_rlimits()
            # Default signal dispositions: the server may have changed some.
            for s in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD):
                try:
                    signal.signal(s, signal.SIG_DFL)
                except (OSError, ValueError):
                    pass
            _SPARES.clear()
            wipe_freed_memory(False)
            rec = None
            if box is not None:
                sandbox.forget_boxes_in_child()
                rec = sandbox.enter(box, extra_env)  # returns only in the candidate's own process
                net = rec.get("network", "shared")
            else:
                net = unshare_network() if cut_network else "shared"
            ctx = ChildContext(dir=d, ev_fd=ev_w, ctl_fd=ctl_r, network=net)
            if rec is not None:
                ctx.send({"ev": "sandbox", **rec})
            code = run(ctx)
            code = int(code) if isinstance(code, int) else 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:  # noqa: BLE001 - report and exit; never return into the server loop
            try:
                import traceback
                traceback.print_exc()
            except BaseException:
                pass
            code = 70
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except BaseException:
                pass
            os._exit(code)
    os.close(ev_w)
    os.close(ctl_r)
    child = Child(pid=pid, dir=d, ev_fd=ev_r, ctl_fd=ctl_w, name=name, box=box)
    if socket_ctl:
        child.ctl_sock = socket.socket(fileno=ctl_w)
    return child


def supervise(child: Child, timeout_s: float, on_event=None, protect: frozenset = frozenset(),
              on_tick=None) -> Child:
    """Waits for child to exit, collecting its events (each stamped with our
    own monotonic clock as ev["_t"]). on_event(child, ev) runs for each event;
    time spent inside it does not count against the child's deadline. At the
    deadline the child's whole tree is killed and child.timed_out is set.
    on_tick(child), where given, runs at least every 50 ms; it returns True to
    end the wait early (the child is then killed as at the deadline, but
    child.timed_out is left unset: the caller knows why it stopped)."""
    deadline = time.monotonic() + timeout_s
    deadline += _take_events(child, on_event)  # lines wait_event() read but left
    ev_open = True
    # After the pipe's end, waits for the exit on a pidfd where the OS has
    # one (it wakes at the exit), else polls 1 ms apart at first, doubling up
    # to 50 ms: a sandboxed child's relay process ends a few ms after the
    # candidate closed the pipe (sandbox.py), and a flat 50 ms cost every one.
    eof_sleep = 0.001
    pidfd = None
    while True:
        now = time.monotonic()
        if now >= deadline:
            child.timed_out = True
            break
        if on_tick is not None and on_tick(child):
            break
        wait = min(deadline - now, 0.05)
        if ev_open:
            try:
                r, _, _ = select.select([child.ev_fd], [], [], wait)
            except InterruptedError:
                r = []
            if r:
                try:
                    data = os.read(child.ev_fd, 1 << 16)
                except OSError:
                    data = b""
                if not data:
                    ev_open = False
                else:
                    child._buf += data
                    deadline += _take_events(child, on_event)
                    # A pass the harness planned (the timed calls) gets at
                    # least the time it planned from its start (on_event sets it).
                    grant = getattr(child, "min_left_s", 0.0)
                    if grant:
                        child.min_left_s = 0.0
                        deadline = max(deadline, time.monotonic() + grant)
                    continue
        else:
            if pidfd is None:
                pidfd = _pidfd(child.pid)
            if pidfd >= 0:
                try:
                    select.select([pidfd], [], [], wait)
                except InterruptedError:
                    pass
            else:
                time.sleep(min(wait, eof_sleep))
                eof_sleep = min(eof_sleep * 2, 0.05)
        if _exited(child):
            break
    if pidfd is not None and pidfd >= 0:
        os.close(pidfd)
    finish(child, protect)
    return child


def _pidfd(pid: int) -> int:
    """A descriptor that becomes readable when pid exits, or -1 where the
    OS has none (Linux < 5.3, Python < 3.9, a sandbox that refuses it)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return -1


def _take_events(child: Child, on_event=None, stop_at: str | None = None) -> float:
    """Parses the complete lines in child._buf into child.events (stamped with
    our clock), calling on_event for each; with stop_at, stops after the first
    event of that name and returns -1.0. Otherwise returns the seconds spent in
    on_event."""
    if len(child._buf) > (1 << 20) and b"\n" not in child._buf:
        child._buf = b""
    t = time.monotonic()
    spent = 0.0
    while b"\n" in child._buf:
        line, child._buf = child._buf.split(b"\n", 1)
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if not isinstance(ev, dict) or len(child.events) > 10000:
            continue
        ev["_t"] = t
        child.events.append(ev)
        if on_event is not None:
            t0 = time.monotonic()
            on_event(child, ev)
            spent += time.monotonic() - t0
        if stop_at is not None and ev.get("ev") == stop_at:
            return -1.0
    return spent


def wait_event(child: Child, name: str, timeout_s: float) -> bool:
    """Reads child's events until one named `name` arrives (True), or until EOF
    or the timeout (False). Events read on the way are kept, as supervise()
    keeps them; supervise() may follow."""
    deadline = time.monotonic() + timeout_s
    while True:
        if _take_events(child, stop_at=name) < 0:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            r, _, _ = select.select([child.ev_fd], [], [], min(left, 0.5))
        except InterruptedError:
            continue
        if not r:
            continue
        try:
            data = os.read(child.ev_fd, 1 << 16)
        except OSError:
            data = b""
        if not data:
            return False
        child._buf += data


def _kill(child: Child, sig: int = signal.SIGKILL) -> None:
    """A signal (SIGKILL) to the child's process group and to the child itself."""
    for kill in (os.killpg, os.kill):
        try:
            kill(child.pid, sig)
        except OSError:
            pass


def finish(child: Child, protect: frozenset = frozenset()) -> None:
    """Kills the child (if alive) and every other descendant of this process
    outside the protected subtrees, then reaps."""
    if child.exit_status is None:
        _kill(child)
    statuses = kill_descendants(protect)
    if child.exit_status is None:
        if child.pid in statuses:
            child.exit_status = statuses[child.pid]
        else:
            try:
                _, child.exit_status = os.waitpid(child.pid, 0)
            except ChildProcessError:
                child.exit_status = _REAPED.pop(child.pid, 0)
    _SPARES.discard(child.pid)
    if child.ctl_sock is not None:
        child.ctl_sock.close()  # owns ctl_fd
        child.ctl_sock = None
        fds = (child.ev_fd,)
    else:
        fds = (child.ev_fd, child.ctl_fd)
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, state) for every visible process."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        r = data.rfind(b")")
        fields = data[r + 2:].split()
        if len(fields) < 2:
            continue
        table[int(name)] = (int(fields[1]), fields[0].decode())
    return table


def descendants(root: int, protect: frozenset = frozenset()) -> list[int]:
    """Live descendants of root, skipping the subtrees rooted at protected pids."""
    table = _proc_table()
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    out, stack = [], [root]
    while stack:
        p = stack.pop()
        for c in kids.get(p, []):
            if c in protect:
                continue
            out.append(c)
            stack.append(c)
    return [p for p in out if table.get(p, (0, "Z"))[1] not in ("Z", "X")]


# Wait statuses of children reaped by the catch-all reaper, for supervise().
_REAPED: dict[int, int] = {}


def _reap() -> dict[int, int]:
    statuses = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        statuses[pid] = status
        _REAPED[pid] = status
    if len(_REAPED) > 4096:
        _REAPED.clear()
    return statuses


def kill_descendants(protect: frozenset = frozenset(), rounds: int = 200,
                     spares_too: bool = False) -> dict[int, int]:
    """SIGKILLs every live descendant of this process until none is left,
    except the subtrees of protected pids (a candidate waiting for its timing
    phase while a reference child runs) and idle spares (unless spares_too).
    Orphans that left their session are ours too (we are a subreaper).
    Returns the wait statuses reaped on the way."""
    me = os.getpid()
    if spares_too:
        _SPARES.clear()
    else:
        protect = frozenset(protect) | frozenset(_SPARES)
    statuses: dict[int, int] = {}
    for _ in range(rounds):
        live = descendants(me, protect)
        statuses.update(_reap())
        if not live:
            break
        for p in live:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.005)
        statuses.update(_reap())
    statuses.update(_reap())
    return statuses


def cleanup_dir(path: str) -> None:
    """Removes a child's directory; a boxed child's goes with its box once
    the box's last process is done with it (sandbox.release_dir)."""
    if sandbox.release_dir(path):
        return
    shutil.rmtree(path, ignore_errors=True)
