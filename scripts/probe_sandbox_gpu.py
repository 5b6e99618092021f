"""The candidates' sandbox on a GPU machine (issue #37), mechanism by mechanism.

    PYTHONPATH=worker python3 scripts/probe_sandbox_gpu.py OUT.jsonl [--only a,b] [--evals 10]

From the repository root, as root (the sandbox drops from root). Each check
runs in a fresh Python process of its own under its own time limit and
writes one JSON line to OUT.jsonl as soon as it ends (flushed), so a check
that hangs or kills its process leaves the others' lines: {"check", "ok",
"seconds", ...}; a check that ran out of time says "timeout". Nothing here
decides anything: the worker's own self-test (sandbox_selftest.self_test, run by
every GPU server at start) picks the plan; this says why.

Checks, each alone where it can be:
  env               versions, kernel, uid, capabilities, /dev/nvidia*, the mounts of
                    the driver folders, seccomp and libseccomp
  libseccomp        libseccomp.so.2 loads; the worker's filter, installed in a forked
                    child, refuses unshare/setns/ptrace and clone3 (ENOSYS), fork still works
  bpf               the same with the hand-built BPF filter (x86_64)
  cuda_seccomp      CUDA init and a kernel in a child under the worker's filter
  setuid_cuda       CUDA init in a child that dropped to a uid of its own (dumpable 1, and 0)
  cupti             a CUPTI session (the profiling process's) around a kernel: plainly, under the
                    filter, with perf_event_open let through, as a uid of its own, as uid 0
                    without capabilities
  ipc_plain         CUDA IPC from a root reference to a child (no sandbox): the baseline
  ipc_uid           ... to a child that dropped to a uid of its own, and back
  ipc_pidns         ... to a child in a PID namespace of its own, and back
  ipc_nocaps        ... to a uid-0 child without capabilities, and back
  ipc_seccomp       ... to a root child under the worker's filter, and back
  ipc_matrix        CUDA IPC both ways between a root reference and a child boxed one
                    piece at a time (sandbox.enter with plans of host PID namespace, uid 0
                    without capabilities or a uid of its own, with and without the view and
                    an IPC namespace; and by hand: a network, UTS or IPC namespace alone, a
                    mount namespace with a private /dev/shm, with a new /proc), each with and
                    without torch's IPC event handles (tensorio.IPC_EVENTS)
  proc              /proc of a new PID namespace; hidepid=invisible on a new proc mount
  view              the worker's whole filesystem view (pivot_root, /dev/nvidia* bound) in
                    a child, CUDA init inside
  overlay           an overlay mount (lower read-only, upper private) in a mount namespace
  links             hard links into a private directory of files owned by nobody, 0444
  triton_cold       Triton compile + launch of the worker's warm kernel in an empty cache,
                    then in the warm one, unsandboxed (the cost a private cache adds)
  plan              sandbox_selftest.try_plan of the strongest plan: set-up, CUDA, Triton in the
                    box's cache, a CUPTI profile, IPC both ways; the record a verdict would carry
  self_test         sandbox_selftest.self_test as a server runs it at start: the plan it keeps
  eval_cost         a worker server evaluating examples/kernels/01_relu__triton.py
                    --evals times with the sandbox and with MKEVOLVE_SANDBOX=off:
                    elapsed_s median, spares and no spares
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "worker"))

CHECKS = {  # name -> its time limit (s)
    "env": 60, "libseccomp": 60, "bpf": 60, "cuda_seccomp": 120, "setuid_cuda": 120, "cupti": 240, "ipc_plain": 120,
    "ipc_uid": 120, "ipc_pidns": 120, "ipc_nocaps": 120, "ipc_seccomp": 120, "ipc_matrix": 420, "proc": 60, "view": 180,
    "overlay": 60, "links": 60, "triton_cold": 300, "plan": 300, "self_test": 600, "eval_cost": 900,
}
UID = 1_999_000_123


# --------------------------------------------------------------------------
# helpers (inside a check's process)
# --------------------------------------------------------------------------

def _fork_start(fn) -> tuple[int, int]:
    """fn() in a forked child; (pid, read end) for _fork_collect."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = fn()
        except BaseException as e:  # noqa: BLE001
            out = {"error": f"{type(e).__name__}: {e}"[:500]}
        os.write(w, json.dumps(out, default=str).encode())
        os._exit(0)
    os.close(w)
    return pid, r


def _fork_run(fn, timeout_s: float = 90.0) -> dict:
    """fn() in a forked child; its dict result comes back over a pipe."""
    return _fork_collect(*_fork_start(fn), timeout_s)


def _fork_collect(pid: int, r: int, timeout_s: float = 90.0) -> dict:
    data = b""
    deadline = time.monotonic() + timeout_s
    import select
    while time.monotonic() < deadline:
        rr, _, _ = select.select([r], [], [], 0.5)
        if rr:
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            data += chunk
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    _, st = os.waitpid(pid, 0)
    os.close(r)
    try:
        return json.loads(data)
    except ValueError:
        return {"error": f"the child gave no result (wait status {st})"}


def _errno_of(call) -> int:
    ctypes.set_errno(0)
    rc = call()
    return 0 if rc == 0 else ctypes.get_errno()


def _filter_checks(sbx) -> dict:
    import errno
    libc = sbx.libc()
    out = {"unshare": os.strerror(_errno_of(lambda: libc.unshare(0x40000000)) or 0) or "allowed",
           "setns": os.strerror(_errno_of(lambda: libc.setns(-1, 0)) or 0)}
    out["ptrace"] = os.strerror(_errno_of(lambda: libc.ptrace(16, os.getppid(), None, None)) or 0)
    ctypes.set_errno(0)
    libc.syscall(ctypes.c_long(435), None, ctypes.c_long(0))
    out["clone3"] = errno.errorcode.get(ctypes.get_errno(), "allowed")
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    _, st = os.waitpid(pid, 0)
    out["fork"] = os.WEXITSTATUS(st) == 7
    out["ok"] = out["unshare"].startswith("Operation not permitted") and out["clone3"] == "ENOSYS" and out["fork"]
    return out


def _drop_uid(sbx, dumpable: int = 1) -> None:
    os.setgroups([])
    os.setresgid(UID, UID, UID)
    os.setresuid(UID, UID, UID)
    sbx._prctl(sbx.PR_SET_DUMPABLE, dumpable)


def _drop_caps(sbx) -> None:
    sbx._prctl(sbx.PR_SET_SECUREBITS, sbx.SECUREBITS_LOCKED_NOROOT)
    for cap in range(sbx._cap_last() + 1):
        sbx._prctl(sbx.PR_CAPBSET_DROP, cap)
    sbx._capset_empty()


def _ipc_pair(setup, pidns: bool = False, events: bool = False) -> dict:
    """A root child shares a CUDA tensor by IPC (as the reference shares its
    inputs) with a second child that ran setup() first (and, with pidns, is
    pid 1's child in a namespace of its own); the second opens it, checks it
    and shares one back, which the first checks."""
    import torch  # noqa: F401  (imported before forking, as the server does)
    from mkevolve_worker import children, tensorio
    tensorio.IPC_EVENTS = events
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

    def ref():
        try:
            import torch
            pool = children._share_pool()
            if pool is None:
                raise RuntimeError("this torch has no MemPool (no CUDA IPC in the worker)")
            with torch.cuda.use_mem_pool(pool):
                x = torch.arange(4096, dtype=torch.float32, device="cuda")
            fd = tensorio.save_sealed({"x": x}, ipc=True)
        except BaseException as e:  # noqa: BLE001
            a.send(b"e")  # the other side stops waiting
            return {"error": f"{type(e).__name__}: {e}"[:500]}
        socket.send_fds(a, [b"x"], [fd])
        _, fds, _, _ = socket.recv_fds(a, 1, 1)
        if not fds:
            return {"back": "nothing came back"}
        y = tensorio.load_fd(fds[0], ipc="open")[0]["y"]
        ok = bool(torch.equal(y, x * 2))
        a.send(b"d")
        return {"back": ok}

    def cand():
        try:
            setup()
            import torch
            _, fds, _, _ = socket.recv_fds(b, 1, 1)
            if not fds:
                return {"in": "the reference shared nothing"}
            x = tensorio.load_fd(fds[0], ipc="open")[0]["x"]
            if not torch.equal(x, torch.arange(4096, dtype=torch.float32, device="cuda")):
                raise ValueError("wrong values")
            y = x * 2
            fd = tensorio.save_sealed({"y": y}, ipc=True)
        except BaseException as e:  # noqa: BLE001
            b.send(b"e")
            return {"in": f"{type(e).__name__}: {e}"[:500]}
        socket.send_fds(b, [b"y"], [fd])
        b.recv(1)
        return {"in": True}

    def cand_in_pidns():
        from mkevolve_worker import sandbox as sbx
        if not sbx._unshare(sbx.CLONE_NEWPID):
            return {"in": "unshare(CLONE_NEWPID) refused"}
        return _fork_run(cand)

    t0 = time.monotonic()
    started = _fork_start(cand_in_pidns if pidns else cand)  # both run at once: no threads here
    ref_res = _fork_run(ref)
    cand_res = _fork_collect(*started)
    out = {"ref": ref_res, "cand": cand_res, "seconds": round(time.monotonic() - t0, 3)}
    out["ok"] = cand_res.get("in") is True and ref_res.get("back") is True
    return out


# --------------------------------------------------------------------------
# the checks
# --------------------------------------------------------------------------

def check_env() -> dict:
    from mkevolve_worker import sandbox as sbx
    out = {"python": platform.python_version(), "kernel": platform.release(), "machine": platform.machine(),
           "euid": os.geteuid(), "cap_sys_admin": sbx.has_cap_sys_admin(), "status": {
               k: v for k, v in sbx._status_fields().items() if k.startswith(("Cap", "NoNewPrivs", "Seccomp"))}}
    try:
        import torch
        out["torch"] = torch.__version__
        out["mempool"] = hasattr(torch.cuda, "MemPool")
    except Exception as e:  # noqa: BLE001
        out["torch"] = str(e)
    try:
        import triton
        out["triton"] = triton.__version__
    except Exception as e:  # noqa: BLE001
        out["triton"] = str(e)
    out["dev"] = sorted(n for n in os.listdir("/dev") if n.startswith(("nvidia", "dri")))
    try:
        with open("/proc/self/mountinfo") as f:
            out["mounts"] = [" ".join(l.split()[3:6] + l.split(" - ")[1].split()[:1]) for l in f
                             if any(k in l for k in ("nvidia", "/usr", " / ", "/dev", "/proc", "/tmp", "cuda"))][:40]
    except OSError as e:
        out["mounts"] = str(e)
    out["libseccomp"] = sbx.load_libseccomp() is not None
    out["readonly_paths"] = sbx.readonly_paths()
    out["ok"] = True
    return out


def check_libseccomp() -> dict:
    from mkevolve_worker import sandbox as sbx
    lib = sbx.load_libseccomp()
    if lib is None:
        return {"ok": False, "error": "libseccomp.so.2 could not be loaded"}
    names = {n: lib.seccomp_syscall_resolve_name(n.encode()) for n in ("setns", "ptrace", "clone3", "bpf")}

    def child():
        sbx._prctl(sbx.PR_SET_NO_NEW_PRIVS, 1)
        n = sbx._libseccomp_filter(lib)
        return {"denied": n, **_filter_checks(sbx)}
    return {"resolved": names, **_fork_run(child)}


def check_bpf() -> dict:
    from mkevolve_worker import sandbox as sbx
    if platform.machine() != "x86_64":
        return {"ok": False, "error": "the hand-built filter is for x86_64 only"}

    def child():
        sbx._bpf_filter()
        return _filter_checks(sbx)
    return _fork_run(child)


def check_cuda_seccomp() -> dict:
    import torch  # noqa: F401
    from mkevolve_worker import sandbox as sbx

    def child():
        rec = {"failed": []}
        how = sbx.install_seccomp(rec)
        import torch
        t0 = time.monotonic()
        x = torch.ones(1 << 20, device="cuda")
        ok = float((x * 2).sum()) == 2 * (1 << 20)
        return {"seccomp": how, "ok": ok, "cuda_s": round(time.monotonic() - t0, 3), **rec}
    return _fork_run(child)


def _cupti() -> dict:
    """A CUPTI session (the profiling process's, runtime_check.profile_calls)
    around one kernel: does it record the kernel?"""
    import torch
    from mkevolve_worker import runtime_check
    t0 = time.monotonic()
    acts = runtime_check.profile_calls(lambda: torch.ones(1 << 16, device="cuda").mul_(2),
                                       os.path.join(tempfile.mkdtemp(), "trace.json"))
    return {"ok": bool(acts), "kernels": len(acts), "seconds": round(time.monotonic() - t0, 3)}


def check_cupti() -> dict:
    """CUPTI plainly, under the worker's filter, as a uid of its own, as uid 0
    without capabilities, and under the filter with perf_event_open let through."""
    import torch  # noqa: F401
    from mkevolve_worker import sandbox as sbx
    out = {"plain": _fork_run(_cupti)}

    def filtered(allow_perf=False):
        rec = {"failed": []}
        how = sbx.install_seccomp(rec, True, allow_perf)
        return {"seccomp": how, **_cupti()}
    out["seccomp"] = _fork_run(filtered)
    out["seccomp_perf_allowed"] = _fork_run(lambda: filtered(True))
    out["own_uid"] = _fork_run(lambda: (_drop_uid(sbx, 1), _cupti())[1])
    out["uid0_nocaps"] = _fork_run(lambda: (_drop_caps(sbx), _cupti())[1])
    out["ok"] = all(v.get("ok") for v in out.values() if isinstance(v, dict))
    return out


def check_setuid_cuda() -> dict:
    import torch  # noqa: F401
    from mkevolve_worker import sandbox as sbx
    out = {}
    for dumpable in (1, 0):
        def child(d=dumpable):
            _drop_uid(sbx, d)
            import torch
            t0 = time.monotonic()
            x = torch.ones(1 << 20, device="cuda")
            ok = float((x * 2).sum()) == 2 * (1 << 20)
            return {"ok": ok, "uid": os.getuid(), "cuda_s": round(time.monotonic() - t0, 3),
                    "proc_self_owner": os.stat("/proc/self/status").st_uid}
        out[f"dumpable{dumpable}"] = _fork_run(child)
    out["ok"] = all(v.get("ok") for v in out.values())
    return out


def check_ipc_plain() -> dict:
    return _ipc_pair(lambda: None)


def check_ipc_uid() -> dict:
    from mkevolve_worker import sandbox as sbx
    return _ipc_pair(lambda: _drop_uid(sbx, 1))


def check_ipc_pidns() -> dict:
    return _ipc_pair(lambda: None, pidns=True)


def check_ipc_nocaps() -> dict:
    from mkevolve_worker import sandbox as sbx
    return _ipc_pair(lambda: _drop_caps(sbx))


def check_ipc_seccomp() -> dict:
    from mkevolve_worker import sandbox as sbx

    def setup():
        rec = {"failed": []}
        if not sbx.install_seccomp(rec).startswith(("libseccomp", "hand-built")):
            raise RuntimeError(f"no filter: {rec}")
    return _ipc_pair(setup)


def check_ipc_matrix() -> dict:
    import torch  # noqa: F401
    from mkevolve_worker import isolation
    from mkevolve_worker import sandbox as sbx

    def boxed(user: str, mountns: bool, ipcns: bool, seccomp: bool = True):
        def setup():
            plan = sbx.Plan(mode="best-effort", user=user, pidns=False, mountns=mountns, seccomp=seccomp,
                            ipcns=ipcns)
            box = sbx.make_box(isolation.base_tmp(), plan)
            rec = sbx.enter(box, None)
            if rec.get("failed"):
                sys.stderr.write(f"enter: {rec['failed']}\n")
        return setup

    def by_hand(*flags, shm: bool = False, proc: bool = False):
        def setup():
            for fl in flags:
                if not sbx._unshare(fl):
                    raise OSError(sbx._err(f"unshare({fl:#x})"))
            if shm or proc:
                sbx._mount(None, "/", None, sbx.MS_REC | sbx.MS_PRIVATE)
            if shm:
                sbx._mount("tmpfs", "/dev/shm", "tmpfs", sbx.MS_NOSUID | sbx.MS_NODEV, "size=64m,mode=1777")
            if proc:
                sbx._mount("proc", "/proc", "proc", sbx.MS_NOSUID | sbx.MS_NODEV | sbx.MS_NOEXEC)
            _drop_caps(sbx)
        return setup

    variants = [
        ("nocaps", by_hand()),
        ("nocaps+netns", by_hand(sbx.CLONE_NEWNET)),
        ("nocaps+utsns", by_hand(sbx.CLONE_NEWUTS)),
        ("nocaps+ipcns", by_hand(sbx.CLONE_NEWIPC)),
        ("nocaps+mountns+private_shm", by_hand(sbx.CLONE_NEWNS, shm=True)),
        ("nocaps+mountns+new_proc", by_hand(sbx.CLONE_NEWNS, proc=True)),
        ("enter:root-nocaps,no view,host ipc", boxed("root-nocaps", False, False)),
        ("enter:root-nocaps,view,host ipc", boxed("root-nocaps", True, False)),
        ("enter:root-nocaps,view,own ipc", boxed("root-nocaps", True, True)),
        ("enter:own uid,view,own ipc", boxed("own", True, True)),
        ("enter:own uid,no view,host ipc", boxed("own", False, False)),
    ]
    out: dict = {}
    for label, setup in variants:
        for events in (False, True):
            key = f"{label} | {'events' if events else 'no events'}"
            try:
                r = _ipc_pair(setup, events=events)
            except BaseException as e:  # noqa: BLE001
                r = {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}
            out[key] = {"ok": r.get("ok"), "in": r.get("cand", {}).get("in"), "back": r.get("ref", {}).get("back"),
                        "s": r.get("seconds")}
            print(f"{key}: {out[key]}", file=sys.stderr, flush=True)
    out["ok"] = any(v.get("ok") for k, v in out.items() if k.startswith("enter:root-nocaps,view"))
    return out


def check_proc() -> dict:
    from mkevolve_worker import sandbox as sbx

    def own_pidns():
        if not sbx._unshare(sbx.CLONE_NEWPID):
            return {"ok": False, "error": sbx._err("unshare(CLONE_NEWPID)")}

        def inner():
            if not sbx._unshare(sbx.CLONE_NEWNS):
                return {"ok": False, "error": sbx._err("unshare(CLONE_NEWNS)")}
            sbx._mount(None, "/", None, sbx.MS_REC | sbx.MS_PRIVATE)
            sbx._mount("proc", "/proc", "proc", sbx.MS_NOSUID | sbx.MS_NODEV | sbx.MS_NOEXEC)
            pids = [p for p in os.listdir("/proc") if p.isdigit()]
            return {"ok": pids == ["1"] or sorted(pids) == ["1"], "pids": pids[:10]}
        return _fork_run(inner)

    def hidepid():
        if not sbx._unshare(sbx.CLONE_NEWNS):
            return {"ok": False, "error": sbx._err("unshare(CLONE_NEWNS)")}
        sbx._mount(None, "/", None, sbx.MS_REC | sbx.MS_PRIVATE)
        d = tempfile.mkdtemp()
        sbx._mount("proc", d, "proc", sbx.MS_NOSUID | sbx.MS_NODEV | sbx.MS_NOEXEC, "hidepid=invisible")
        _drop_uid(sbx, 1)
        pids = [p for p in os.listdir(d) if p.isdigit()]
        return {"ok": pids == [str(os.getpid())], "visible": len(pids)}
    return {"own_pidns": _fork_run(own_pidns), "hidepid": _fork_run(hidepid),
            "ok": None, "kernel_per_mount_proc_options": sbx.kernel_at_least(5, 8)}


def check_view() -> dict:
    import torch  # noqa: F401
    from mkevolve_worker import isolation
    from mkevolve_worker import sandbox as sbx
    plan = sbx.make_plan("best-effort")
    plan.seccomp = False
    box = sbx.make_box(isolation.base_tmp(), plan)

    def child():
        rec = {"failed": []}
        t0 = time.monotonic()
        os.chdir(box.new_dir("probe"))
        sbx._namespaces_and_root(box, rec, own_pidns=False)
        rec["setup_s"] = round(time.monotonic() - t0, 3)
        rec["dev_inside"] = sorted(n for n in os.listdir("/dev") if n.startswith(("nvidia", "dri")))
        import torch
        x = torch.ones(16, device="cuda")
        rec["cuda"] = float(x.sum()) == 16.0
        rec["ok"] = rec["cuda"] and str(rec.get("filesystem", "")).startswith(("pivot_root", "chroot"))
        return rec
    try:
        return _fork_run(child)
    finally:
        sbx._rmtree_one_fs(box.path)


def check_overlay() -> dict:
    from mkevolve_worker import sandbox as sbx

    def child():
        base = tempfile.mkdtemp()
        lower, upper, work, merged = (os.path.join(base, n) for n in ("lower", "upper", "work", "merged"))
        for d in (lower, upper, work, merged):
            os.makedirs(d)
        with open(os.path.join(lower, "f"), "w") as f:
            f.write("lower")
        if not sbx._unshare(sbx.CLONE_NEWNS):
            return {"ok": False, "error": sbx._err("unshare(CLONE_NEWNS)")}
        sbx._mount(None, "/", None, sbx.MS_REC | sbx.MS_PRIVATE)
        sbx._mount("overlay", merged, "overlay", 0, f"lowerdir={lower},upperdir={upper},workdir={work}")
        with open(os.path.join(merged, "f"), "w") as f:
            f.write("changed")
        with open(os.path.join(lower, "f")) as f:
            return {"ok": f.read() == "lower"}
    return _fork_run(child)


def check_links() -> dict:
    from mkevolve_worker import sandbox as sbx

    def child():
        base = tempfile.mkdtemp()
        lower = os.path.join(base, "lower")
        os.makedirs(lower)
        with open(os.path.join(lower, "f"), "w") as f:
            f.write("lower")
        sbx.seal_triton_cache(lower)
        os.link(os.path.join(lower, "f"), os.path.join(base, "link"))
        _drop_uid(sbx, 1)
        try:
            with open(os.path.join(base, "link"), "w") as f:
                f.write("x")
            return {"ok": False, "error": "a uid of its own wrote the sealed file through a link"}
        except OSError as e:
            return {"ok": True, "refused": str(e)}
    return _fork_run(child)


def check_triton_cold() -> dict:
    import torch  # noqa: F401
    out = {}
    cache = tempfile.mkdtemp(prefix="probe-triton-")
    for label in ("cold", "warm"):
        def child():
            os.environ["TRITON_CACHE_DIR"] = cache
            t0 = time.monotonic()
            import torch
            torch.zeros(1, device="cuda")
            t1 = time.monotonic()
            from mkevolve_worker import warm_kernel
            warm_kernel.run()
            return {"cuda_s": round(t1 - t0, 3), "compile_and_launch_s": round(time.monotonic() - t1, 3)}
        out[label] = _fork_run(child, 240)
    out["ok"] = "error" not in out["cold"] and "error" not in out["warm"]
    return out


def check_plan() -> dict:
    import torch  # noqa: F401
    from mkevolve_worker import children, isolation, sandbox_selftest, spares
    from mkevolve_worker import sandbox as sbx
    isolation.become_supervisor()
    plan = sbx.make_plan("best-effort", triton_lower=spares.Launcher.triton_cache())
    try:
        res = sandbox_selftest.try_plan(plan, children.cuda_ipc_possible())
    finally:
        isolation.kill_descendants(spares_too=True)
        isolation.cleanup_dir(isolation.base_tmp())
    return res


def check_self_test() -> dict:
    import torch  # noqa: F401
    from mkevolve_worker import isolation, sandbox_selftest, spares
    from mkevolve_worker import sandbox as sbx
    isolation.become_supervisor()
    plan = sbx.make_plan("best-effort")
    os.environ.pop("MKEVOLVE_SANDBOX_VERDICTS", None)  # the probe tests, never takes a kept verdict
    try:
        rep = sandbox_selftest.self_test(plan, spares.Launcher.triton_cache())
    finally:
        isolation.kill_descendants(spares_too=True)
        isolation.cleanup_dir(isolation.base_tmp())
    return {"ok": not str(rep.get("chosen", "none")).startswith(("none", "unchanged")), "plan": plan.describe(),
            **rep}


def check_eval_cost(evals: int) -> dict:
    sys.path.insert(0, os.path.join(ROOT, "tests", "python", "fixtures"))
    from worker_client import WorkerClient
    prob = os.path.join(ROOT, "examples", "problems", "01_relu.py")
    kern = os.path.join(ROOT, "examples", "kernels", "01_relu__triton.py")
    out = {}
    for mode in ("best-effort", "off"):
        for spares_arg in ([],) if os.environ.get("PROBE_SPARES_ONLY") else ([], ["--no-spares"]):
            label = f"{mode}{'/no-spares' if spares_arg else '/spares'}"
            cwd = tempfile.mkdtemp(prefix="probe-eval-")
            t0 = time.monotonic()
            c = WorkerClient(spares_arg, extra_env={"MKEVOLVE_SANDBOX": mode}, cwd=cwd)
            rec = {"hello_s": round(time.monotonic() - t0, 3), "hello_sandbox": c.hello.get("sandbox"),
                   "selftest": c.hello.get("sandbox_selftest")}
            try:
                xs = []
                for i in range(evals + 1):
                    msg, _ = c.request("eval", timeout=600, problem=prob, kernel=kern,
                                       options={"perf_trials": 20, "warmup": 5})
                    if msg.get("type") != "result" or msg.get("status") != "correct":
                        rec["error"] = {k: msg.get(k) for k in ("type", "status", "kind", "message")}
                        break
                    if i:  # the first one warms what is per server
                        xs.append(msg["elapsed_s"])
                    time.sleep(1.0)  # spares warm, as between a search's evaluations
                if xs:
                    rec["elapsed_s_median"] = statistics.median(xs)
                    rec["elapsed_s"] = xs
                    rec["isolation"] = msg["checks"].get("isolation")
                    rec["phases_s"] = msg["checks"].get("phases_s")
            finally:
                c.close()
            out[label] = rec
    out["ok"] = all("elapsed_s_median" in v for v in out.values() if isinstance(v, dict))
    return out


def run_check(name: str, evals: int) -> dict:
    fn = globals()[f"check_{name}"]
    return fn(evals) if name == "eval_cost" else fn()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?")
    ap.add_argument("--only", default="")
    ap.add_argument("--evals", type=int, default=10)
    ap.add_argument("--check", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.check:
        t0 = time.monotonic()
        try:
            res = run_check(args.check, args.evals)
        except BaseException as e:  # noqa: BLE001
            res = {"ok": False, "error": f"{type(e).__name__}: {e}"[:1000]}
        res.setdefault("seconds", round(time.monotonic() - t0, 3))
        res.setdefault("ok", False if "error" in res else None)
        sys.stdout.write("\nRESULT " + json.dumps(res, default=str) + "\n")
        sys.stdout.flush()
        return 0
    if not args.out:
        ap.error("OUT.jsonl is needed")
    names = [n for n in CHECKS if not args.only or n in args.only.split(",")]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "worker") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    with open(args.out, "a", buffering=1) as out:
        for name in names:
            t0 = time.monotonic()
            line = {"check": name}
            # Its own session: at the time limit the whole group goes (a
            # grandchild holding the pipes would otherwise hang this reader).
            p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--check", name, "--evals",
                                  str(args.evals)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=env, cwd=ROOT, start_new_session=True)
            try:
                stdout, stderr = p.communicate(timeout=CHECKS[name])
                res = None
                for ln in stdout.splitlines():
                    if ln.startswith("RESULT "):
                        res = json.loads(ln[7:])
                if res is None:
                    line.update(ok=False, error=f"exit status {p.returncode}, no result", stderr=stderr[-2000:])
                else:
                    line.update(res)
                    if p.returncode or (res.get("ok") is False):
                        line["stderr"] = stderr[-1500:]
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                try:
                    _, stderr = p.communicate(timeout=15)
                except subprocess.TimeoutExpired:
                    stderr = "(its output could not be read)"
                line.update(ok=False, error=f"timeout after {CHECKS[name]} s", stderr=(stderr or "")[-1500:])
            line["wall_s"] = round(time.monotonic() - t0, 3)
            out.write(json.dumps(line, default=str) + "\n")
            out.flush()
            print(f"{name:14} ok={line.get('ok')} {line['wall_s']:.1f}s"
                  + (f"  {str(line.get('error'))[:200]}" if line.get("error") else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
