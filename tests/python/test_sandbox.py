"""The candidates' sandbox (worker/mkevolve_worker/sandbox.py): its seccomp
filters, each fallback forced in turn (MKEVOLVE_TEST_SANDBOX_WITHOUT, test
mode only) with what the verdict then says was in force, MKEVOLVE_SANDBOX's
modes, a server that is not root (a user namespace), the GPU self-test's
decisions, the kernel files copied into the box, and the boxes' clean-up.
The attacks themselves are test_sandbox_adversarial.py's."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import WORKER_DIR, WorkerClient, cand, problem, write_source

from mkevolve_worker import sandbox, sandbox_selftest  # noqa: E402

ROOT = os.geteuid() == 0



def _in_child(fn) -> dict:
    """fn() in a forked child (a filter cannot be taken off again)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = fn()
        except BaseException as e:  # noqa: BLE001
            out = {"error": f"{type(e).__name__}: {e}"}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


def _probe_filter() -> dict:
    libc = ctypes.CDLL(None, use_errno=True)

    def err(rc):
        return "ok" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
    out = {"unshare": err(libc.unshare(0x40000000)), "setns": err(libc.setns(-1, 0)),
           "ptrace": err(libc.ptrace(16, os.getppid(), None, None)),
           "clone3": err(libc.syscall(ctypes.c_long(435), None, ctypes.c_long(0)))}
    # clone(CLONE_NEWUSER | SIGCHLD): a namespace by way of clone's flags
    rc = libc.syscall(ctypes.c_long(56), ctypes.c_ulong(0x10000000 | 17), None, None, None, None)
    if rc == 0:
        os._exit(0)  # a child made without the filter's consent: gone at once
    if rc > 0:
        os.waitpid(rc, 0)
    out["clone_newuser"] = err(rc)
    pid = os.fork()
    if pid == 0:
        os._exit(3)
    _, st = os.waitpid(pid, 0)
    out["fork"] = os.WEXITSTATUS(st) == 3
    return out


EXPECT_DENIED = {"unshare": "EPERM", "setns": "EPERM", "ptrace": "EPERM", "clone3": "ENOSYS",
                 "clone_newuser": "EPERM", "fork": True}


@pytest.mark.skipif(platform.machine() != "x86_64" or sandbox.load_libseccomp() is None,
                    reason="needs x86_64 and libseccomp")
def test_the_hand_built_filters_numbers_are_libseccomps():
    lib = sandbox.load_libseccomp()
    for name, nr in sandbox.X86_64_NR.items():
        assert lib.seccomp_syscall_resolve_name(name.encode()) == nr, name
    assert set(sandbox.DENIED_SYSCALLS) <= set(sandbox.X86_64_NR)


@pytest.mark.skipif(sandbox.load_libseccomp() is None, reason="needs libseccomp.so.2")
def test_the_libseccomp_filter_refuses_the_deny_list_and_lets_fork_through():
    def child():
        rec = {"failed": []}
        how = sandbox.install_seccomp(rec)
        return {"how": how, **_probe_filter()}
    out = _in_child(child)
    assert out.pop("how").startswith("libseccomp"), out
    assert out == EXPECT_DENIED


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the hand-built filter is x86_64's")
def test_the_hand_built_filter_refuses_the_same():
    def child():
        rec = {"failed": []}
        how = sandbox.install_seccomp(rec, use_libseccomp=False)
        return {"how": how, **_probe_filter()}
    out = _in_child(child)
    assert out.pop("how").startswith("hand-built BPF"), out
    assert out == EXPECT_DENIED


def test_the_plan_follows_the_mode(monkeypatch):
    monkeypatch.setenv("MKEVOLVE_SANDBOX", "off")
    assert sandbox.make_plan(sandbox.mode_from_env()).user == "none"
    assert sandbox.mode_from_env("require") == "require"
    monkeypatch.setenv("MKEVOLVE_SANDBOX", "strict")
    with pytest.raises(ValueError, match="best-effort, require or off"):
        sandbox.mode_from_env()
    monkeypatch.delenv("MKEVOLVE_SANDBOX")
    assert sandbox.mode_from_env() == "best-effort"


# --------------------------------------------------------------------------
# Each fallback, forced, through a server
# --------------------------------------------------------------------------

@pytest.fixture()
def server(tmp_path, sandbox_share):
    started = []

    def start(*args, **env):
        e = {"MKEVOLVE_TIMING_LOCK": str(tmp_path / "timing.lock"),
             "MKEVOLVE_TEST_SANDBOX_SHARE": str(sandbox_share), "TMPDIR": str(tmp_path)}
        e.update(env)
        s = WorkerClient(["--test-mode", *args], extra_env=e, cwd=str(tmp_path))
        started.append(s)
        return s
    yield start
    for s in started:
        s.close()


def _record(r) -> dict:
    return r["checks"]["isolation"]["sandbox"]


FALLBACKS = {
    # what is forced off -> what the record must then say
    "pidns": lambda s: s["pid_namespace"] is False and (
        s["proc"].startswith("hidepid") if sandbox.kernel_at_least(5, 8) else s["proc"].startswith("every")),
    "mountns": lambda s: s["filesystem"] == "shared" and s["dev_shm"] == "shared",
    "libseccomp": lambda s: s["seccomp"].startswith("hand-built BPF") if platform.machine() == "x86_64"
    else s["seccomp"] == "none",
    "seccomp": lambda s: s["seccomp"] == "off" and s["seccomp_mode"] == "none",
    "own-uid": lambda s: s["user"] == "uid 0 without capabilities" and s["capabilities"] == "none",
    "pidns,mountns,seccomp,own-uid": lambda s: (s["pid_namespace"] is False and s["filesystem"] == "shared"
                                                and s["seccomp"] == "off" and s["capabilities"] == "none"),
}


@pytest.mark.skipif(not ROOT, reason="the full sandbox, and so each of its fallbacks, needs root here")
@pytest.mark.parametrize("without", sorted(FALLBACKS))
@pytest.mark.parametrize("spares", [True, False], ids=["spares", "no-spares"])
def test_each_fallback_still_evaluates_and_says_what_was_in_force(server, without, spares):
    s = server(*([] if spares else ["--no-spares"]), MKEVOLVE_TEST_SANDBOX_WITHOUT=without)
    assert "without" in " ".join(s.hello["sandbox"].get("notes", [])), s.hello
    good = s.eval(problem("add"), cand("add_ok"), perf=True, perf_trials=3, warmup=1)
    assert good["status"] == "correct", good
    rec = _record(good)
    assert FALLBACKS[without](rec), rec
    assert rec["no_new_privs"] is True, rec
    assert s.eval(problem("add"), cand("add_wrong"))["status"] == "incorrect"


@pytest.mark.skipif(not ROOT, reason="needs root")
def test_require_evaluates_where_everything_is_in_force_and_refuses_where_not(server):
    s = server(MKEVOLVE_SANDBOX="require")
    assert s.hello["sandbox"]["mode"] == "require"
    r = s.eval(problem("add"), cand("add_ok"))
    assert r["status"] == "correct", r
    weak = server(MKEVOLVE_SANDBOX="require", MKEVOLVE_TEST_SANDBOX_WITHOUT="mountns")
    msg, _ = weak.request("eval", problem=problem("add"), kernel=cand("add_ok"),
                          options={"test_cpu": True, "perf": False})
    assert msg["type"] == "error", msg
    assert "MKEVOLVE_SANDBOX=require" in msg["message"] and "filesystem view" in msg["message"], msg
    assert weak.request("ping")[0]["ok"] is True


def test_off_is_the_old_behaviour_and_says_so(server):
    s = server(MKEVOLVE_SANDBOX="off")
    assert s.hello["sandbox"]["mode"] == "off"
    r = s.eval(problem("add"), cand("add_ok"))
    assert r["status"] == "correct", r
    assert _record(r)["mode"] == "off" and _record(r)["filesystem"] == "shared", _record(r)
    bad = server(MKEVOLVE_SANDBOX="strict")
    assert "best-effort, require or off" in bad.hello.get("sandbox_error", ""), bad.hello


@pytest.mark.skipif(not ROOT or not shutil.which("setpriv"), reason="needs root (to become another user) and setpriv")
def test_a_server_that_is_not_root_boxes_its_candidates_in_a_user_namespace(tmp_path, sandbox_share):
    if subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "unshare", "--user", "true"],
                      capture_output=True).returncode != 0:
        pytest.skip("unprivileged user namespaces are not allowed here")
    home = tmp_path / "nobody"
    home.mkdir()
    os.chmod(home, 0o777)
    s = WorkerClient(["--test-mode"], extra_env={"TMPDIR": str(home), "HOME": str(home)}, cwd=str(home),
                     prefix=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
    try:
        assert s.hello["sandbox"]["user"] == "userns", s.hello
        r = s.eval(problem("add"), cand("add_ok"), perf=True, perf_trials=3, warmup=1)
        assert r["status"] == "correct", r
        rec = _record(r)
        assert rec["user"] == "uid 0 of a user namespace, no capabilities", rec
        assert rec["capabilities"] == "none" and rec["seccomp_mode"] == "filter", rec
        assert rec["filesystem"].startswith("pivot_root") and rec["proc"] == "own PID namespace", rec
        assert s.eval(problem("add"), cand("add_wrong"))["status"] == "incorrect"
    finally:
        s.close()


# --------------------------------------------------------------------------
# The GPU self-test's decisions (try_plan stands in for the GPU)
# --------------------------------------------------------------------------

def _decide(monkeypatch, outcome, mode="best-effort"):
    """self_test with try_plan answering outcome(user, pidns[, allow_perf]) -> its result."""
    import inspect
    from mkevolve_worker import children
    monkeypatch.setattr(children, "cuda_ipc_possible", lambda: True)
    n = len(inspect.signature(outcome).parameters)
    monkeypatch.setattr(sandbox_selftest, "try_plan", lambda plan, ipc, timeout_s=120: (
        outcome(plan.user, plan.pidns, plan.allow_perf, plan.ipcns) if n == 4
        else outcome(plan.user, plan.pidns, plan.allow_perf) if n == 3 else outcome(plan.user, plan.pidns)))
    plan = sandbox.Plan(mode=mode, user="own", pidns=True)
    return plan, sandbox_selftest.self_test(plan, None)


OK = {"cuda": True, "triton": True, "profiler": True, "ipc_in": True, "ipc_out": True, "ok": True}
NO_IPC = {"cuda": True, "triton": True, "profiler": True, "ipc_in": "RuntimeError: invalid resource handle",
          "ok": False}
NO_PROFILER = {"cuda": True, "triton": True, "profiler": "RuntimeError: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
               "ipc_in": True, "ipc_out": True, "ok": False}
NO_CUDA = {"cuda": "RuntimeError: no CUDA-capable device", "ok": False}


def test_the_self_test_keeps_the_strongest_plan_that_works(monkeypatch):
    plan, rep = _decide(monkeypatch, lambda user, pidns: OK)
    assert (plan.user, plan.pidns, plan.cuda_ipc) == ("own", True, True) and len(rep["attempts"]) == 1
    # IPC only without a PID namespace of its own
    plan, rep = _decide(monkeypatch, lambda user, pidns: OK if not pidns else NO_IPC)
    assert (plan.user, plan.pidns, plan.cuda_ipc) == ("own", False, True), rep
    # IPC only as uid 0 without capabilities
    plan, rep = _decide(monkeypatch, lambda user, pidns: OK if user == "root-nocaps" else NO_IPC)
    assert (plan.user, plan.pidns) == ("root-nocaps", True), rep
    # Each plan whose hand-over alone failed is tried once more in the host's IPC namespace.
    assert [a["plan"] for a in rep["attempts"]] == [
        "own uid, own PID namespace", "own uid, own PID namespace, host IPC namespace",
        "own uid, host PID namespace", "own uid, host PID namespace, host IPC namespace",
        "uid 0 without capabilities, own PID namespace"]


def test_where_ipc_needs_the_hosts_ipc_namespace_the_rest_of_the_sandbox_stays(monkeypatch):
    plan, rep = _decide(monkeypatch, lambda user, pidns, perf, ipcns: OK if not ipcns else NO_IPC)
    assert (plan.user, plan.pidns, plan.ipcns, plan.cuda_ipc) == ("own", True, False, True), rep
    assert rep["chosen"] == "own uid, own PID namespace, host IPC namespace"
    assert plan.describe()["ipc_namespace"] == "the host's"


def test_where_only_cupti_fails_the_self_test_lets_perf_event_open_through(monkeypatch):
    plan, rep = _decide(monkeypatch, lambda user, pidns, perf: OK if perf else NO_PROFILER)
    assert (plan.user, plan.pidns, plan.allow_perf, plan.cuda_ipc) == ("own", True, True, True), rep
    assert rep["chosen"].endswith("perf_event_open allowed") and len(rep["attempts"]) == 2, rep


def test_the_self_test_turns_ipc_off_before_it_gives_up_the_sandbox(monkeypatch):
    plan, rep = _decide(monkeypatch, lambda user, pidns: NO_IPC)
    assert (plan.user, plan.pidns, plan.cuda_ipc, plan.mode) == ("own", True, False, "best-effort"), rep
    assert "CUDA IPC off" in rep["chosen"]


def test_a_plan_where_triton_cannot_compile_is_never_kept(monkeypatch):
    # Measured on an H200: every plan got CUDA and the profiler, but gcc
    # (/opt/gcc) was outside the view, so no Triton kernel compiled; keeping
    # such a plan "with IPC off" failed every honest candidate.
    no_gcc = {"cuda": True, "triton": "FileNotFoundError: [Errno 2] No such file or directory: '/opt/gcc/bin/gcc'",
              "profiler": True, "ipc_in": "FormatError: mapping of buffer object failed", "ok": False}
    plan, rep = _decide(monkeypatch, lambda user, pidns: no_gcc)
    assert plan.mode == "off" and "unsandboxed" in rep["chosen"], rep
    # And where one plan compiles, that one is kept, with IPC off where IPC failed.
    plan, rep = _decide(monkeypatch, lambda user, pidns: dict(NO_IPC) if user == "root-nocaps" else no_gcc)
    assert plan.user == "root-nocaps" and not plan.cuda_ipc and plan.mode == "best-effort", rep


# --------------------------------------------------------------------------
# The self-test's kept verdicts (selftest_cache.py): tested once per machine
# and boot, taken by the servers after it
# --------------------------------------------------------------------------

def _kept_world(monkeypatch, tmp_path, outcome, seed_result=None):
    """self_test with a verdict folder, try_plan answering outcome(user, pidns)
    and seed() standing in for the trusted half; returns run(mode) -> (plan,
    report) and the calls each stand-in got."""
    from mkevolve_worker import children
    calls = {"try": 0, "seed": 0}
    monkeypatch.setattr(children, "cuda_ipc_possible", lambda: True)

    def try_plan(plan, ipc, timeout_s=120):
        calls["try"] += 1
        return outcome(plan.user, plan.pidns)

    def seed(plan, timeout_s=60):
        calls["seed"] += 1
        return dict(seed_result or {"seed_s": 0.1, "seconds": 0.2})

    monkeypatch.setattr(sandbox_selftest, "try_plan", try_plan)
    monkeypatch.setattr(sandbox_selftest, "seed", seed)
    monkeypatch.setenv("MKEVOLVE_SANDBOX_VERDICTS", str(tmp_path / "verdicts"))

    def run(mode="best-effort", budget_s=110.0):
        plan = sandbox.Plan(mode=mode, user="own", pidns=True)
        return plan, sandbox_selftest.self_test(plan, None, budget_s=budget_s, gpus=[{"name": "H200"}])
    return run, calls


def _verdicts(tmp_path):
    return list((tmp_path / "verdicts").glob("*.json"))


def test_a_passing_self_test_is_kept_and_the_next_server_takes_it_without_testing(monkeypatch, tmp_path):
    run, calls = _kept_world(monkeypatch, tmp_path, lambda user, pidns: OK)
    plan, rep = run()
    assert (plan.user, plan.pidns, plan.cuda_ipc) == ("own", True, True) and rep["kept"] is True, rep
    assert calls == {"try": 1, "seed": 0}, calls
    (kept,) = _verdicts(tmp_path)
    assert (kept.stat().st_mode & 0o777) == 0o600 and ((tmp_path / "verdicts").stat().st_mode & 0o777) == 0o700
    # The next server: the same plan, no test, its own Triton cache seeded.
    plan2, rep2 = run()
    assert calls == {"try": 1, "seed": 1}, calls
    assert (plan2.user, plan2.pidns, plan2.cuda_ipc, plan2.mode) == ("own", True, True, "best-effort"), rep2
    assert rep2["chosen"] == rep["chosen"] and rep2["cached"]["seed"]["seed_s"] == 0.1, rep2
    assert rep2["cached"]["tested_at"] and "kept" not in rep2, rep2
    # Another plan asked for (require) is another key: tested again.
    plan3, rep3 = run(mode="require")
    assert calls["try"] == 2 and "cached" not in rep3 and rep3["kept"] is True, (calls, rep3)


def test_a_weakened_plan_is_never_kept_so_every_server_tests_again(monkeypatch, tmp_path):
    # A fallback that passed (the host's PID namespace), CUDA IPC off, unsandboxed:
    # none is kept, since what failed may have failed once only.
    for outcome, n in ((lambda user, pidns: OK if not pidns else NO_IPC, 3), (lambda user, pidns: NO_IPC, 6),
                       (lambda user, pidns: NO_CUDA, 4), (lambda user, pidns: NO_PROFILER, 0)):
        run, calls = _kept_world(monkeypatch, tmp_path / str(n), outcome)
        plan, rep = run()
        first = calls["try"]
        assert first >= 2 and "kept" not in rep, rep
        plan, rep = run()
        assert calls["try"] == 2 * first and calls["seed"] == 0 and "cached" not in rep, calls
        assert not _verdicts(tmp_path / str(n)) and list((tmp_path / str(n) / "verdicts").glob("*.weak"))


def test_after_a_weakened_test_a_first_attempt_pass_is_kept_again(monkeypatch, tmp_path):
    # Once (another pool's candidate holding the GPU, say) the strongest plan failed.
    state = {"fail": True}
    run, calls = _kept_world(monkeypatch, tmp_path, lambda user, pidns: NO_IPC if state["fail"] else OK)
    plan, rep = run()
    assert "CUDA IPC off" in rep["chosen"] and list((tmp_path / "verdicts").glob("*.weak")), rep
    state["fail"] = False
    first = calls["try"]
    plan, rep = run()  # a weak key: tested without the lock, and kept where it passes at once
    assert calls["try"] == first + 1 and rep["kept"] is True and "lock" not in rep, rep
    plan, rep = run()
    assert calls["try"] == first + 1 and rep["cached"], calls


def test_without_a_verdict_folder_every_server_tests(monkeypatch, tmp_path):
    for value in ("", "relative/verdicts"):
        run, calls = _kept_world(monkeypatch, tmp_path, lambda user, pidns: OK)
        monkeypatch.setenv("MKEVOLVE_SANDBOX_VERDICTS", value)
        monkeypatch.chdir(tmp_path)
        run()
        plan, rep = run()
        assert calls == {"try": 2, "seed": 0} and "kept" not in rep and "cached" not in rep, (value, calls)
        assert not (tmp_path / "relative").exists()


def test_two_servers_of_one_pool_compute_the_same_key(tmp_path):
    # As the pool starts them: each its own cwd, token and timing lock.
    code = ("import sys; from mkevolve_worker import sandbox, selftest_cache as sc; "
            "p = sandbox.Plan(mode='best-effort', user='own', pidns=True); "
            "print(sc.name_of(sc.key_material(p, True, [{'name': 'H200'}])))")
    names = set()
    for i in range(2):
        cwd = tmp_path / f"slot{i}" / "cwd"
        cwd.mkdir(parents=True)
        env = {**os.environ, "PYTHONPATH": WORKER_DIR, "MKEVOLVE_WORKER_TOKEN": f"token{i}",
               "MKEVOLVE_TIMING_LOCK": f"/tmp/lock{i}", "MKEVOLVE_SANDBOX_VERDICTS": str(tmp_path / "v")}
        out = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        names.add(out.stdout.strip())
    assert len(names) == 1, names


def test_a_plan_without_a_view_or_a_uid_of_its_own_is_never_kept(monkeypatch, tmp_path):
    from mkevolve_worker import selftest_cache as sc
    ok = {"attempts": [{"plan": "p", "ok": True}], "chosen": "p"}
    for change in ({"user": "none"}, {"mountns": False}, {"mode": "off"}, {"cuda_ipc": False}):
        plan = sandbox.Plan(mode="best-effort", user="own", pidns=True)
        for k, v in change.items():
            setattr(plan, k, v)
        assert not sc.keepable(ok, plan, sc.asked(plan)), change
    plan = sandbox.Plan(mode="best-effort", user="own", pidns=True)
    assert sc.keepable(ok, plan, sc.asked(plan))
    assert not sc.keepable({**ok, "attempts": [{"plan": "q", "ok": False}, {"plan": "p", "ok": True}]}, plan,
                           sc.asked(plan))


def test_the_key_changes_with_what_the_answer_depends_on(monkeypatch):
    from mkevolve_worker import selftest_cache as sc
    plan = sandbox.Plan(mode="best-effort", user="own", pidns=True)
    files = {"/proc/sys/kernel/random/boot_id": "b1", "/proc/driver/nvidia/version": "NVRM 580.1",
             "/proc/sys/kernel/perf_event_paranoid": "2", "/proc/sys/user/max_mnt_namespaces": "100"}
    monkeypatch.setattr(sc, "_read", lambda path, limit=4096: files.get(path, ""))

    def name(p=plan, ipc=True, gpu="H200"):
        return sc.name_of(sc.key_material(p, ipc, [{"name": gpu}]))
    base = name()
    assert base == name() and base.startswith("b1-")
    for path, value in (("/proc/sys/kernel/random/boot_id", "b2"), ("/proc/driver/nvidia/version", "NVRM 590.2"),
                        ("/proc/sys/kernel/perf_event_paranoid", "4"), ("/proc/sys/user/max_mnt_namespaces", "0")):
        old = files[path]
        files[path] = value
        assert name() != base, path
        files[path] = old
    assert name(ipc=False) != base and name(gpu="H100") != base
    assert name(sandbox.Plan(mode="require", user="own", pidns=True)) != base
    monkeypatch.setattr(sc, "_source_digest", lambda: "another worker")
    assert name() != base
    monkeypatch.undo()
    monkeypatch.setattr(sc, "_read", lambda path, limit=4096: files.get(path, ""))
    base = name()
    for var, value in (("PATH", "/opt/other/bin:" + os.environ.get("PATH", "")),
                       ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"), ("CUDA_MPS_PIPE_DIRECTORY", "/x")):
        monkeypatch.setenv(var, value)
        assert name() != base, var
        monkeypatch.undo()
        monkeypatch.setattr(sc, "_read", lambda path, limit=4096: files.get(path, ""))
    # What changes per job or per server, not the sandbox: the same key.
    monkeypatch.setenv("SLURM_JOB_ID", "1234")
    monkeypatch.setenv("MKEVOLVE_WORKER_TOKEN", "t0k3n")
    monkeypatch.setenv("MKEVOLVE_TIMING_LOCK", "/tmp/other.lock")
    assert name() == base


def test_a_kept_verdict_is_taken_only_as_it_was_written(monkeypatch, tmp_path):
    run, calls = _kept_world(monkeypatch, tmp_path, lambda user, pidns: OK)
    run()
    (kept,) = _verdicts(tmp_path)
    good = kept.read_text()
    # One that says another plan (the sandbox off), even at 0600: refused, the plan untouched.
    doc = json.loads(good)
    doc["plan"].update(mode="off", seccomp=False, mountns=False, user="none")
    kept.write_text(json.dumps(doc))
    plan, rep = run()
    assert calls["try"] == 2 and "cached" not in rep, (calls, rep)
    assert (plan.mode, plan.seccomp, plan.mountns, plan.user) == ("best-effort", True, True, "own")
    # Group-writable: refused.
    kept.write_text(good)
    kept.chmod(0o666)
    plan, rep = run()
    assert calls["try"] == 3 and "cached" not in rep, calls
    # A name that is not its file's: refused.
    doc = json.loads(good)
    doc["name"] = "0" * 40
    kept.write_text(json.dumps(doc))
    kept.chmod(0o600)
    plan, rep = run()
    assert calls["try"] == 4 and "cached" not in rep, calls
    # Not a regular file (a FIFO would block the start): refused.
    kept.unlink()
    os.mkfifo(kept, 0o600)
    plan, rep = run()
    assert calls["try"] == 5 and "cached" not in rep, calls
    # A folder others may write to: nothing is read from it or kept in it.
    kept.unlink()
    (tmp_path / "verdicts").chmod(0o777)
    run()
    plan, rep = run()
    assert calls["try"] == 7 and "kept" not in rep and "cached" not in rep, (calls, rep)


def test_where_the_trusted_half_fails_on_a_kept_verdict_it_is_forgotten_and_tested_again(monkeypatch, tmp_path):
    for failed in ({"error": "the trusted side did not start CUDA in time", "seconds": 60},
                   {"seed_error": "FileNotFoundError: gcc", "seconds": 2}):
        where = tmp_path / next(iter(failed))
        run, calls = _kept_world(monkeypatch, where, lambda user, pidns: OK, seed_result=failed)
        run()
        plan, rep = run()
        assert calls == {"try": 2, "seed": 1}, calls
        assert rep["forgot_kept_verdict"] == next(iter(failed.values())) and rep["kept"] is True, rep
    # Where the test then fails too, the verdict is gone, not left for the next server.
    state = {"ok": True}
    run, calls = _kept_world(monkeypatch, tmp_path / "gone", lambda user, pidns: OK if state["ok"] else NO_CUDA,
                             seed_result={"error": "no CUDA", "seconds": 1})
    run()
    state["ok"] = False
    plan, rep = run()
    assert rep["forgot_kept_verdict"] == "no CUDA" and not _verdicts(tmp_path / "gone"), rep


def test_servers_that_start_together_wait_for_the_first_ones_test(monkeypatch, tmp_path):
    import fcntl
    import threading
    from mkevolve_worker import selftest_cache as sc
    run, calls = _kept_world(monkeypatch, tmp_path, lambda user, pidns: OK)
    d = tmp_path / "verdicts"
    d.mkdir(mode=0o700)
    plan = sandbox.Plan(mode="best-effort", user="own", pidns=True)
    name = sc.name_of(sc.key_material(plan, True, [{"name": "H200"}]))
    fd = os.open(d / (name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # the first server, still testing

    def first_done():
        time.sleep(0.4)
        assert sc.store(str(d), name, sc.asked(plan), {"attempts": [{"plan": "own uid, own PID namespace",
                                                                       "ok": True}],
                                                         "chosen": "own uid, own PID namespace"})
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    t = threading.Thread(target=first_done)
    t.start()
    plan2, rep = run()
    t.join()
    assert calls == {"try": 0, "seed": 1}, calls
    assert rep["cached"]["waited_s"] >= 0.3 and rep["chosen"] == "own uid, own PID namespace", rep


def test_a_server_that_waits_too_long_for_another_s_test_tests_for_itself(monkeypatch, tmp_path):
    import fcntl
    from mkevolve_worker import selftest_cache as sc
    budgets = []
    run, calls = _kept_world(monkeypatch, tmp_path, lambda user, pidns: OK)
    real = sandbox_selftest.full_test
    monkeypatch.setattr(sandbox_selftest, "full_test",
                        lambda plan, ipc, timeout_s, budget_s: budgets.append(budget_s) or real(plan, ipc, timeout_s,
                                                                                                  budget_s))
    d = tmp_path / "verdicts"
    d.mkdir(mode=0o700)
    plan = sandbox.Plan(mode="best-effort", user="own", pidns=True)
    name = sc.name_of(sc.key_material(plan, True, [{"name": "H200"}]))
    fd = os.open(d / (name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another server's test, still running
    try:
        t0 = time.monotonic()
        plan, rep = run(budget_s=0.6)
        waited = time.monotonic() - t0
    finally:
        os.close(fd)
    assert calls["try"] == 1 and rep["kept"] is False and "not taken" in rep["lock"], rep
    assert 0.3 <= waited and (plan.user, plan.pidns) == ("own", True), waited
    assert budgets[-1] <= 0.6 - 0.3, budgets  # what the wait took is not the test's again
    assert not _verdicts(tmp_path)
    # Once the other is done, the next server tests, keeps, and the one after takes it.
    run()
    plan, rep = run()
    assert calls == {"try": 2, "seed": 1} and rep["cached"], calls


def test_other_boots_verdicts_are_removed_once_stale_this_boots_never(monkeypatch, tmp_path):
    from mkevolve_worker import selftest_cache as sc
    monkeypatch.setattr(sc, "boot_tag", lambda: "mine")
    d = tmp_path / "v"
    d.mkdir()
    old = time.time() - sc.STALE_S - 60
    names = ("other-" + "a" * 40 + ".json", "other-" + "a" * 40 + ".lock", "other-" + "a" * 40 + ".weak",
             "mine-" + "b" * 40 + ".json", "mine-" + "b" * 40 + ".lock", "notes.txt", ".mine-x.123.tmp")
    for n in names:
        (d / n).write_text("{}")
        os.utime(d / n, (old, old))
    (d / ("third-" + "c" * 40 + ".json")).write_text("{}")  # another machine's, in use: kept
    assert sc.prune(str(d)) == 4
    assert sorted(p.name for p in d.iterdir()) == sorted(
        ["mine-" + "b" * 40 + ".json", "mine-" + "b" * 40 + ".lock", "notes.txt", "third-" + "c" * 40 + ".json"])


def test_the_test_processes_are_ended_whatever_fails(monkeypatch):
    from mkevolve_worker import isolation
    ended = []

    class Fake:
        dir = "/nonexistent"
        events = []

    monkeypatch.setattr(isolation, "prespawn", lambda *a, **k: Fake())
    monkeypatch.setattr(isolation, "send_msg", lambda ch, msg, *a: ended.append(msg))
    monkeypatch.setattr(isolation, "supervise", lambda ch, t: None)
    monkeypatch.setattr(isolation, "cleanup_dir", lambda d: None)

    def boom(*a, **k):
        raise RuntimeError("hand-over failed")
    monkeypatch.setattr(isolation, "hand_over", boom)
    plan = sandbox.Plan(mode="best-effort", user="own", pidns=True)
    with pytest.raises(RuntimeError):
        sandbox_selftest.seed(plan, 1)
    assert ended == [{"op": "done"}]
    with pytest.raises(RuntimeError):
        sandbox_selftest.try_plan(plan, True, 1)
    assert ended == [{"op": "done"}] * 2


def test_no_candidate_process_is_told_where_the_verdicts_are(monkeypatch, tmp_path):
    from mkevolve_worker import isolation
    monkeypatch.setenv("MKEVOLVE_SANDBOX_VERDICTS", str(tmp_path / "v"))

    def scrubbed():
        isolation.scrub_environment(str(tmp_path))
        return {"left": os.environ.get("MKEVOLVE_SANDBOX_VERDICTS")}
    assert _in_child(scrubbed) == {"left": None}


def test_the_view_holds_the_compiler_triton_builds_with_but_nothing_of_home(monkeypatch, tmp_path):
    gcc = tmp_path / "opt" / "gcc" / "bin" / "gcc"
    gcc.parent.mkdir(parents=True)
    gcc.write_text("#!/bin/sh\n")
    gcc.chmod(0o755)
    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{gcc.parent}:{home / '.local' / 'bin'}:/usr/bin:/bin")
    monkeypatch.delenv("CC", raising=False)
    paths = sandbox.compiler_paths()
    assert str(tmp_path / "opt" / "gcc") in paths and str(gcc.parent) in paths, paths
    assert not any(p.startswith(str(home)) for p in paths), paths
    assert str(tmp_path / "opt" / "gcc") in sandbox.readonly_paths((str(home),))


def test_without_cuda_in_any_sandbox_best_effort_runs_unsandboxed_and_require_refuses(monkeypatch):
    plan, rep = _decide(monkeypatch, lambda user, pidns: NO_CUDA)
    assert plan.mode == "off" and plan.user == "none" and "unsandboxed" in rep["chosen"], rep
    plan, rep = _decide(monkeypatch, lambda user, pidns: NO_CUDA, mode="require")
    assert plan.mode == "require" and plan.broken, rep
    # A failure of the trusted side is not the sandbox's: nothing changes.
    plan, rep = _decide(monkeypatch, lambda user, pidns: {"error": "the trusted side did not start CUDA", "ok": False})
    assert (plan.mode, plan.user, plan.pidns, plan.cuda_ipc) == ("best-effort", "own", True, True), rep


# --------------------------------------------------------------------------
# The box
# --------------------------------------------------------------------------

def test_a_plain_kernel_brings_the_sibling_modules_it_imports(tmp_path):
    (tmp_path / "helper.py").write_text("X = 1\n")
    (tmp_path / "unrelated.py").write_text("Y = 2\n")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("")
    (tmp_path / "lib" / "inner.py").write_text("Z = 3\n")
    k = tmp_path / "kernel.py"
    k.write_text("import torch\nimport helper\nfrom lib import inner\n")
    root, files = sandbox.kernel_files(str(k))
    assert root == str(tmp_path)
    assert sorted(os.path.relpath(f, root) for f in files) == ["helper.py", "kernel.py", "lib/__init__.py",
                                                               "lib/inner.py"]


def test_a_package_keeps_its_layout_in_the_box(tmp_path):
    from composed_package import write
    _, kernel = write(tmp_path / "src")
    pkg = os.path.dirname(kernel)
    plan = sandbox.Plan(user="none")
    box = sandbox.make_box(str(tmp_path), plan)
    copy = box.copy_kernel(kernel)
    assert os.path.basename(os.path.dirname(copy)) == os.path.basename(pkg)
    rel = sorted(os.path.relpath(os.path.join(d, n), os.path.dirname(copy))
                 for d, _, ns in os.walk(os.path.dirname(copy)) for n in ns)
    assert "decomposed_solution.py" in rel and any(r.startswith("subkernel_implementations/") for r in rel), rel
    assert box.original_path(copy) == kernel


def test_boxes_go_with_their_evaluations(server, tmp_path):
    s = server()
    for perf in (True, False, True):
        assert s.eval(problem("add"), cand("add_ok"), perf=perf, perf_trials=3, warmup=1)["status"] == "correct"
    time.sleep(0.5)
    bases = [d for d in os.listdir(tmp_path) if d.startswith("mkworker-")]
    assert len(bases) == 1, bases
    boxes = [d for d in os.listdir(tmp_path / bases[0]) if d.startswith("box-")]
    assert len(boxes) <= 1, boxes  # the idle spares' pair, nothing of the evaluations
    s.close()
    assert not os.path.exists(tmp_path / bases[0])


@pytest.mark.skipif(not ROOT or not shutil.which("unshare"), reason="needs root to mount")
def test_removing_a_box_never_crosses_into_a_mounted_file_system(tmp_path):
    """Were a mount of a child's view ever to show in the server's namespace,
    the box's removal must stop at it (a bound /usr must never be emptied)."""
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("x")
    box = tmp_path / "box"
    (box / "root" / "usr").mkdir(parents=True)
    (box / "junk").write_text("y")
    code = textwrap.dedent(f"""
        import os, subprocess, sys
        sys.path.insert(0, {WORKER_DIR!r})
        from mkevolve_worker import sandbox
        subprocess.run(["mount", "--make-rprivate", "/"], check=True)
        subprocess.run(["mount", "--bind", {str(keep)!r}, {str(box / "root" / "usr")!r}], check=True)
        sandbox._rmtree_one_fs({str(box)!r})
        print(os.path.exists({str(keep / "precious")!r}), os.path.exists({str(box / "junk")!r}))
        """)
    p = subprocess.run(["unshare", "-m", sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["True", "False"], p.stdout


def test_a_sandboxed_candidates_memory_is_counted_as_the_candidates():
    """The evaluation knows the candidate by its relay process (B); its memory
    is in B's descendants (C1, C2), which peak_by_role counts for its role,
    never for the server's, which every process descends from."""
    from mkevolve_worker import footprint
    me = os.getpid()
    s = footprint.Sampler()
    s.roles.update({100: "candidate", 200: "reference"})
    s.peak_by_pid = {me: 1, 100: 2, 101: 4, 102: 8, 200: 16, 300: 32, 301: 64}
    s.peak_parents = {100: me, 101: 100, 102: 101, 200: me, 300: me, 301: 300}
    by = s.peak_by_role()
    assert by["candidate"] == 14 and by["reference"] == 16 and by["server"] == 1, by
    assert by["idle spares and other processes"] == 96, by


def test_candidate_uids_come_from_what_the_user_namespace_maps():
    assert sandbox.uid_block(f"0 0 {2**32 - 1}") == (sandbox.UID_BASE, sandbox.UID_BASE + sandbox.UID_SPAN)
    lo, hi = sandbox.uid_block("0 100000 65536")  # a container's map
    assert 10000 <= lo < hi <= 65534 and hi - lo >= 64, (lo, hi)
    assert sandbox.uid_block("0 1000 1") == (0, 0)  # rootless: nothing but itself
