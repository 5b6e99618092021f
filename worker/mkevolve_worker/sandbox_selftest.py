"""The sandbox's self-test, once at a GPU server's start (docs/EVAL.md,
The candidate's sandbox): a trusted process (a reference's privileges,
which also seeds the server's Triton cache) and a sandboxed one (a
candidate's, boxed by sandbox.py's plan) check that CUDA, a Triton compile,
the profiler and the CUDA IPC hand-over work in the box; the first plan of
fallbacks() that passes is kept. Apart from sandbox.py because it runs the
processes isolation.py makes, which sandbox.py itself boxes."""

from __future__ import annotations

import os
import time

from . import isolation
from . import selftest_cache as sc
from .sandbox import Plan, make_box, record_of, seal_triton_cache



def fallbacks(plan: Plan) -> list[tuple[str, str, bool]]:
    """(label, user, pidns) to try, strongest first, where CUDA or its IPC
    hand-over fails in the sandbox: whether a driver resolves an IPC handle
    across PID namespaces and uids is the driver's business (a handle may
    name the exporting process by its pid)."""
    users = {"own": ["own", "root-nocaps"], "root-nocaps": ["root-nocaps"], "userns": ["userns"]}.get(plan.user,
                                                                                                     [plan.user])
    names = {"own": "own uid", "root-nocaps": "uid 0 without capabilities",
             "userns": "uid 0 of a user namespace without capabilities", "none": "the server's uid"}
    out = []
    for u in users:
        for pid in ([True, False] if plan.pidns else [False]):
            out.append((f"{names[u]}, {'own' if pid else 'host'} PID namespace", u, pid))
    return out


def _selftest_reference(ctx, job: dict) -> int:
    """The trusted side (a reference's privileges): compiles and launches the
    worker's own Triton kernel into the server's cache (its seed), then
    shares a CUDA tensor by IPC as a reference shares its inputs, and checks
    what the sandboxed side hands back."""
    out: dict = {}
    try:
        import torch
        from . import children, tensorio
        torch.zeros(1, device="cuda")
        try:
            from . import warm_kernel
            t0 = time.monotonic()
            warm_kernel.run()
            out["seed_s"] = round(time.monotonic() - t0, 3)
        except Exception as e:  # noqa: BLE001 - no Triton: the candidate side says so too
            out["seed_error"] = f"{type(e).__name__}: {e}"[:300]
        ctx.send({"ev": "seeded", **out})
        if not job.get("ipc"):
            return 0
        pool = children._share_pool()
        with torch.cuda.use_mem_pool(pool):
            x = torch.arange(4096, dtype=torch.float32, device="cuda")
        fd = tensorio.save_sealed({"x": x}, ipc=True)
        try:
            ctx.send_fd(fd)
        finally:
            os.close(fd)
        msg, fds = ctx.recv_msg()
        if not fds:
            ctx.send({"ev": "back", "ok": False, "error": "nothing came back"})
            return 0
        try:
            got = tensorio.load_fd(fds[0], ipc="open")[0]["y"]
            ok = bool(torch.equal(got, x * 2))
            ctx.send({"ev": "back", "ok": ok, **({} if ok else {"error": "wrong values"})})
        except Exception as e:  # noqa: BLE001
            ctx.send({"ev": "back", "ok": False, "error": f"{type(e).__name__}: {e}"[:300]})
        finally:
            for fd in fds:
                os.close(fd)
        ctx.recv_msg()  # keep x alive until the server is done
    except Exception as e:  # noqa: BLE001
        ctx.send({"ev": "seeded", "error": f"{type(e).__name__}: {e}"[:300]})
    return 0


def _selftest_candidate(ctx, job: dict) -> int:
    """The sandboxed side: CUDA, a cold Triton compile and launch in the box,
    a CUPTI profile, the reference's IPC handle opened, one of its own
    handed back."""
    res: dict = {}
    try:
        import torch
        from . import tensorio
        t0 = time.monotonic()
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
        res["cuda"] = True
        res["cuda_s"] = round(time.monotonic() - t0, 3)
    except Exception as e:  # noqa: BLE001
        res["cuda"] = f"{type(e).__name__}: {e}"[:300]
        ctx.send({"ev": "selftest", **res})
        return 0
    try:
        # Cold, in an empty cache: Triton's utilities and the launcher built
        # with gcc inside the view, as a candidate's new launcher signature
        # will be (the seeded cache would spare this one the compiler).
        os.environ["TRITON_CACHE_DIR"] = os.path.join(ctx.dir, "cold-triton-cache")
        from . import warm_kernel
        t0 = time.monotonic()
        warm_kernel.run()
        res["triton"] = True
        res["triton_cold_s"] = round(time.monotonic() - t0, 3)
    except Exception as e:  # noqa: BLE001
        res["triton"] = f"{type(e).__name__}: {e}"[:300]
    try:
        # The profiling process's CUPTI session (runtime_check), in the box.
        from . import runtime_check
        t0 = time.monotonic()
        acts = runtime_check.profile_calls(lambda: torch.ones(1024, device="cuda").mul_(2),
                                           os.path.join(ctx.dir, "trace.json"))
        res["profiler"] = True if acts else "the profile recorded no kernel"
        res["profiler_s"] = round(time.monotonic() - t0, 3)
    except Exception as e:  # noqa: BLE001
        res["profiler"] = f"{type(e).__name__}: {e}"[:300]
    y = None
    if job.get("ipc"):
        msg, fds = ctx.recv_msg()
        try:
            x = tensorio.load_fd(fds[0], ipc="open")[0]["x"]
            if not torch.equal(x, torch.arange(4096, dtype=torch.float32, device="cuda")):
                raise ValueError("wrong values")
            y = x * 2
            fd = tensorio.save_sealed({"y": y}, ipc=True)
            try:
                ctx.send_fd(fd)
            finally:
                os.close(fd)
            res["ipc_in"] = True
        except Exception as e:  # noqa: BLE001
            res["ipc_in"] = f"{type(e).__name__}: {e}"[:300]
        finally:
            for fd in fds:
                os.close(fd)
    ctx.send({"ev": "selftest", **res})
    if y is not None:
        ctx.recv_msg()  # keep y alive until the reference has checked it
    return 0


def _last(child, name: str) -> dict:
    evs = [e for e in child.events if e.get("ev") == name]
    return evs[-1] if evs else {}


def _trusted_side(plan: Plan, extra_env: dict | None = None):
    """The trusted process (a reference's privileges), not yet started."""
    env = {"TRITON_CACHE_DIR": plan.triton_lower} if plan.triton_lower else {}
    return isolation.prespawn("sbxref", lambda ctx: {}, {"ref": _selftest_reference}, cut_network=True,
                              extra_env={**env, **(extra_env or {})})


def _seeded(ref, plan: Plan, ipc: bool, timeout_s: float, out: dict) -> None:
    """Starts the trusted process, which seeds the server's Triton cache
    (plan.triton_lower, sealed once seeded) and, with `ipc`, stays to share a
    tensor; `out` gets seed_s or the error. The caller ends the process."""
    isolation.hand_over(ref, "ref", {"ipc": ipc}, new_dir=False)
    if not isolation.wait_event(ref, "seeded", timeout_s):
        out["error"] = "the trusted side did not start CUDA in time"
        return
    seeded = _last(ref, "seeded")
    out.update({k: v for k, v in seeded.items() if k in ("seed_s", "seed_error", "error")})
    if not seeded.get("error") and plan.triton_lower and os.path.isdir(plan.triton_lower) and \
            os.path.dirname(plan.triton_lower) == isolation.base_tmp():
        out["sealed_files"] = seal_triton_cache(plan.triton_lower)  # our own: nobody writes it again


def _end(child) -> None:
    isolation.send_msg(child, {"op": "done"})
    isolation.supervise(child, 10)
    isolation.cleanup_dir(child.dir)


def seed(plan: Plan, timeout_s: float = 60.0) -> dict:
    """The trusted half alone: the server's Triton cache seeded and sealed,
    as a server whose plan came from a kept verdict still needs."""
    t0 = time.monotonic()
    out: dict = {}
    ref = _trusted_side(plan)
    try:
        _seeded(ref, plan, False, timeout_s, out)
    finally:
        _end(ref)
        out["seconds"] = round(time.monotonic() - t0, 3)
    return out


def try_plan(plan: Plan, ipc: bool, timeout_s: float = 120.0, extra_env: dict | None = None) -> dict:
    """One self-test run of `plan`: a trusted process (which also seeds the
    server's Triton cache, plan.triton_lower) and a sandboxed one. Returns
    {"ok", "record", "cuda", "triton", "ipc_in", "ipc_out", "seconds", ...}."""
    t0 = time.monotonic()
    out: dict = {}
    ref = _trusted_side(plan, extra_env)
    cand = None
    try:
        _seeded(ref, plan, ipc, timeout_s, out)
        if out.get("error"):
            return out
        box = make_box(isolation.base_tmp(), plan)
        cand = isolation.prespawn("sbxcand", lambda ctx: {}, {"cand": _selftest_candidate}, box=box,
                                  extra_env=extra_env)
        box.used_by = -1
        isolation.hand_over(cand, "cand", {"ipc": ipc}, new_dir=False)
        if ipc:
            fd = isolation.receive_fd(ref, timeout_s)
            if fd is None:
                out["error"] = "the trusted side shared nothing"
                return out
            try:
                isolation.send_msg(cand, {"op": "x"}, [fd])
            finally:
                os.close(fd)
            fd2 = isolation.receive_fd(cand, timeout_s)
            if fd2 is not None:
                try:
                    isolation.send_msg(ref, {"op": "y"}, [fd2])
                finally:
                    os.close(fd2)
                isolation.wait_event(ref, "back", timeout_s)
                back = _last(ref, "back")
                out["ipc_out"] = True if back.get("ok") else back.get("error", "no answer")
        isolation.wait_event(cand, "selftest", timeout_s)
        res = _last(cand, "selftest")
        out.update({k: v for k, v in res.items() if k not in ("ev", "_t")})
        out["record"] = record_of(cand)
        if not res:
            out["error"] = "the sandboxed side died: " + (cand.tail()[-300:] or "no output")
    finally:
        for ch in (cand, ref):
            if ch is not None:
                _end(ch)
        out["seconds"] = round(time.monotonic() - t0, 3)
        ipc_ok = not ipc or (out.get("ipc_in") is True and out.get("ipc_out") is True)
        out["ok"] = (out.get("cuda") is True and out.get("triton") is True and out.get("profiler") is True
                     and ipc_ok)
    return out


def self_test(plan: Plan, triton_lower: str | None, timeout_s: float = 60.0, budget_s: float = 110.0,
              gpus=None) -> dict:
    """The plan, tested (full_test()), or, where a server on this machine
    already tested the same plan under the same key and it passed at the first
    attempt, that verdict taken (selftest_cache.py; $MKEVOLVE_SANDBOX_VERDICTS
    names the folder, none: always tested). A taken verdict never changes the
    plan; the server still seeds its Triton cache, and where that fails the
    verdict is forgotten and the full test runs. Servers that start together
    wait for one another's test, at most half the budget. The report says
    "cached" (when it was tested, the wait, the seed) or "kept" (whether this
    test's verdict was written down)."""
    from . import children
    plan.triton_lower = triton_lower
    ipc = children.cuda_ipc_possible()
    d = sc.folder()
    if not d or not sc.safe_folder(d):
        return full_test(plan, ipc, timeout_s, budget_s)
    t0 = time.monotonic()
    wanted = sc.asked(plan)
    name = sc.name_of(sc.key_material(plan, ipc, gpus))
    lock = sc.Lock(os.path.join(d, name + ".lock"), budget_s / 2)
    had_lock = lock.fd is not None  # (release() clears fd)
    kept = None
    try:
        if had_lock:
            kept = sc.load(d, name, wanted)
            if kept is None and not sc.is_weak(d, name):
                # The first of its key: the others wait for this test's verdict.
                report = full_test(plan, ipc, timeout_s, budget_s - lock.waited_s)
                _keep(d, name, wanted, report, plan)
                return report
    finally:
        lock.release()
    if kept is not None:
        seeded = seed(plan, timeout_s)
        if not seeded.get("error") and not seeded.get("seed_error"):
            report = dict(kept["report"])
            report["cached"] = {"tested_at": kept.get("tested_at"), "waited_s": lock.waited_s, "seed": seeded}
            return report
        sc.forget(d, name)  # what the key missed has changed: test it all again
        report = full_test(plan, ipc, timeout_s, budget_s - (time.monotonic() - t0))
        report["forgot_kept_verdict"] = seeded.get("error") or seeded.get("seed_error")
        _keep(d, name, wanted, report, plan)
        return report
    # A weakened key (each server tests at once, as before), or the lock not had in time.
    report = full_test(plan, ipc, timeout_s, budget_s - lock.waited_s)
    if not had_lock:
        report["kept"] = False
        report["lock"] = f"not taken in {lock.waited_s:g} s: tested here, nothing kept"
    else:
        _keep(d, name, wanted, report, plan)
    return report


def _keep(d: str, name: str, wanted: dict, report: dict, plan: Plan) -> None:
    if sc.keepable(report, plan, wanted):
        report["kept"] = sc.store(d, name, wanted, report)
    else:
        sc.mark_weak(d, name)


def full_test(plan: Plan, ipc: bool, timeout_s: float = 60.0, budget_s: float = 110.0) -> dict:
    """Once, at a GPU server's start: does a sandboxed process get CUDA,
    compile and launch a Triton kernel, profile a launch with CUPTI (the
    profiling process's session) and exchange CUDA IPC handles with a
    trusted one (the reference's hand-over)? Where only the profiler fails,
    the same plan is tried again with perf_event_open let through. The first plan of fallbacks() that
    does is kept (plan is changed in place); where CUDA works but no plan
    passes IPC, the strongest one that gets CUDA is kept with CUDA IPC off
    (inputs and outputs then cross as host files); where no sandboxed
    process gets CUDA at all, best-effort runs candidates unsandboxed and
    says so, and require refuses every evaluation. It runs inside the
    server's hello, which the pool waits for 180 s at most: no attempt starts
    after budget_s, and what was not tried counts as failed. Returns the report."""
    report: dict = {"ipc_possible": ipc, "attempts": []}
    first_cuda = None
    t0 = time.monotonic()
    tries = [(label, user, pidns, False, True) for label, user, pidns in fallbacks(plan)]
    i = 0
    while i < len(tries):
        label, user, pidns, allow_perf, ipcns = tries[i]
        i += 1
        if time.monotonic() - t0 > budget_s:
            report["attempts"].append({"plan": label, "error": f"not tried: the self-test's {budget_s:g} s were spent"})
            continue
        trial = Plan(**{**plan.__dict__, "user": user, "pidns": pidns, "allow_perf": allow_perf, "ipcns": ipcns,
                        "notes": list(plan.notes)})
        res = try_plan(trial, ipc, timeout_s)
        report["attempts"].append({"plan": label, **{k: v for k, v in res.items() if k != "record"}})
        # A plan whose sandboxed process cannot compile a Triton kernel fails
        # every honest candidate: never one to keep, not even with IPC off.
        if res.get("cuda") is True and res.get("triton") is True and res.get("profiler") is True \
                and first_cuda is None:
            first_cuda = (label, trial, res.get("record"))
        if res.get("ok"):
            plan.user, plan.pidns, plan.allow_perf, plan.ipcns = trial.user, trial.pidns, trial.allow_perf, trial.ipcns
            report["chosen"] = label
            report["record"] = res.get("record")
            return report
        if res.get("cuda") is True and res.get("profiler") is not True and not allow_perf and plan.seccomp:
            # Only the profiler failed: once more with perf_event_open let through.
            tries.insert(i, (label + ", perf_event_open allowed", user, pidns, True, ipcns))
        elif res.get("cuda") is True and res.get("triton") is True and res.get("profiler") is True and ipcns \
                and ipc and res.get("ipc_in") is not True:
            # Only the hand-over failed: once more in the host's IPC namespace
            # (a driver may tie IPC to it; on the H200 the cause was torch's
            # IPC event and its /dev/shm file, which tensorio no longer sends,
            # and every plan passed: docs/GPU-RESULTS.md).
            tries.insert(i, (label + ", host IPC namespace", user, pidns, allow_perf, False))
    if not any("cuda" in a for a in report["attempts"]):
        # The trusted side failed every time: not the sandbox's doing.
        report["chosen"] = "unchanged: the trusted side of the test failed, not the sandboxed one"
        return report
    if first_cuda is not None:
        label, trial, report["record"] = first_cuda
        plan.user, plan.pidns, plan.allow_perf, plan.cuda_ipc = trial.user, trial.pidns, trial.allow_perf, False
        plan.ipcns = trial.ipcns
        plan.notes.append(f"CUDA IPC failed in every sandboxed plan: inputs and outputs cross as host files ({label})")
        report["chosen"] = label + ", CUDA IPC off"
        return report
    if plan.mode == "require":
        plan.broken = "no sandboxed process could run CUDA, compile a Triton kernel and profile it (the self-test's " \
                      "attempts say why)"
        report["chosen"] = "none: every evaluation is refused (MKEVOLVE_SANDBOX=require)"
    else:
        plan.user, plan.pidns, plan.mountns, plan.seccomp = "none", False, False, False
        plan.mode = "off"
        plan.notes.append("no sandboxed process could run CUDA, compile a Triton kernel and profile it: "
                          "candidates run unsandboxed (best-effort)")
        report["chosen"] = "none: candidates run unsandboxed"
    return report
