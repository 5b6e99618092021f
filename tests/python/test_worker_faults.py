"""Fault handling and isolation: every failure gets its kind, and the server carries on."""

from __future__ import annotations

import json
import os
import time

import pytest

from conftest import REFERENCE_DIES_ON_SECOND_INPUTS, REFERENCE_OUT_OF_MEMORY_ON_SECOND_FORWARD, cand, problem, write_source



def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return False


def test_hang_is_killed_at_the_deadline_and_server_carries_on(worker_server):
    t0 = time.monotonic()
    r = worker_server.eval(problem("add"), cand("hang"), timeout_s=2)
    assert r["status"] == "timeout" and r["kind"] == "hang", r
    assert "deadline" in r["message"] and "forward" in r["message"]
    assert time.monotonic() - t0 < 30
    assert worker_server.eval(problem("add"), cand("add_ok"))["status"] == "correct"


@pytest.mark.parametrize("name", ["segfault", "ctypes_segfault"])
def test_segfault(worker_server, name):
    r = worker_server.eval(problem("add"), cand(name))
    assert r["status"] == "crashed" and r["kind"] == "segfault", r
    assert "SIGSEGV" in r["message"]


def test_sys_exit_in_forward(worker_server):
    r = worker_server.eval(problem("add"), cand("sys_exit"))
    assert r["kind"] == "exit_without_result", r
    assert "sys.exit" in r["message"]


def test_os_exit_in_forward(worker_server):
    r = worker_server.eval(problem("add"), cand("os_exit"))
    assert r["kind"] == "exit_without_result", r
    assert r["status"] == "crashed"


def test_syntax_error(worker_server):
    r = worker_server.eval(problem("add"), cand("syntax_error"))
    assert r["status"] == "compile_error" and r["kind"] == "syntax_error", r
    assert "syntax_error.py:6" in r["message"] and "expected ':'" in r["message"]


def test_import_error(worker_server):
    r = worker_server.eval(problem("add"), cand("import_error"))
    assert r["status"] == "compile_error" and r["kind"] == "import_error", r
    assert "no_such_module_for_mkevolve_tests" in r["message"]


def test_missing_model_new(worker_server):
    r = worker_server.eval(problem("add"), cand("no_model_new"))
    assert r["kind"] == "missing_model_new", r


def test_runtime_error_has_trimmed_traceback(worker_server):
    r = worker_server.eval(problem("add"), cand("raises"))
    assert r["kind"] == "runtime_error", r
    msg = r["message"]
    assert msg.splitlines()[0].endswith("ValueError: block size must divide 32"), msg
    assert "raises.py:" in msg and "in helper" in msg
    assert "mkevolve_worker" not in msg  # worker frames are trimmed


def _token_alive(token: str) -> list[int]:
    """Live processes (of any PID namespace: this test sees them all) whose
    command line carries token."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if token.encode() in f.read() and _alive(int(name)):
                    out.append(int(name))
        except OSError:
            pass
    return out


def test_setsid_grandchild_is_killed_after_the_candidate_ends(worker_server, tmp_path):
    # The grandchild is found by a token in its command line, not by a pid it
    # reports: a sandboxed candidate's pids are those of its own namespace.
    token = f"mk-grandchild-{os.getpid()}-{time.time_ns()}"
    k = write_source(tmp_path / "grandchild.py", f"""
        import os, sys, time
        import torch
        import torch.nn as nn

        def running():
            for p in os.listdir("/proc"):
                try:
                    with open("/proc/" + p + "/cmdline", "rb") as f:
                        if {token!r}.encode() in f.read():
                            return True
                except OSError:
                    pass
            return False

        class ModelNew(nn.Module):
            def forward(self, a, b):
                if os.fork() == 0:
                    os.setsid()
                    if os.fork() == 0:
                        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(1000)", {token!r}])
                    os._exit(0)
                for _ in range(500):
                    if running():
                        return a + b
                    time.sleep(0.01)
                raise RuntimeError("the grandchild never ran")
        """)
    r = worker_server.eval(problem("add"), k, trials=1, alt_dist_trials=0, candidate_first_trials=0)
    assert r["status"] == "correct", r
    for _ in range(100):
        if not _token_alive(token):
            break
        time.sleep(0.05)
    assert not _token_alive(token), "the grandchild survived the candidate"


def test_candidate_sees_scrubbed_env_and_private_cwd(worker_server, tmp_path, share_path):
    out = share_path / "seen.json"
    k = write_source(tmp_path / "envprobe.py", f"""
        import json, os, socket
        import torch
        import torch.nn as nn

        def net():
            try:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.settimeout(0.5)
                s.connect(("127.0.0.1", 9))
                return "connected"
            except OSError as e:
                return type(e).__name__ + ":" + str(e.errno)

        class ModelNew(nn.Module):
            def forward(self, a, b):
                with open({str(out)!r}, "w") as f:
                    fds = {{}}
                    for fd in os.listdir("/proc/self/fd"):
                        try:
                            fds[fd] = os.readlink("/proc/self/fd/" + fd)
                        except OSError:
                            pass
                    json.dump({{"env": dict(os.environ), "cwd": os.getcwd(), "fds": fds,
                               "net": net(), "ifaces": [n for _, n in socket.if_nameindex()]}}, f)
                return a + b
        """)
    r = worker_server.eval(problem("add"), k, trials=1, alt_dist_trials=0, candidate_first_trials=0)
    assert r["status"] == "correct", r
    seen = json.loads(out.read_text())
    assert "FOO_API_KEY" not in seen["env"]
    # TF32 off for Triton too: a tl.dot on fp32 without input_precision is IEEE (spares.Launcher).
    assert seen["env"].get("TRITON_F32_DEFAULT") == "ieee", seen["env"]
    assert not any("KEY" in k or "TOKEN" in k or "SECRET" in k for k in seen["env"])
    assert os.path.realpath(seen["cwd"]) != os.path.realpath(worker_server.cwd)
    assert os.path.basename(seen["cwd"]).startswith("cand-")
    assert not os.path.exists(seen["cwd"]), "the private directory is removed afterwards"
    # stdin is /dev/null, stdout/stderr are files in the private dir, and the only
    # channels are the event pipe and the control socket (none of the server's
    # protocol pipes) and the sealed inputs file its inputs are mapped from
    # (mmap keeps a descriptor; the seals make it read-only for everyone).
    fds = seen["fds"]
    assert fds["0"] == "/dev/null"
    assert fds["1"].startswith(seen["cwd"]) and fds["2"].startswith(seen["cwd"])
    assert sum(v.startswith("pipe:") for v in fds.values()) == 1, fds
    assert sum(v.startswith("socket:") for v in fds.values()) == 1, fds
    allowed = ("pipe:", "socket:", "/dev/null", "/memfd:mk-tensors", seen["cwd"], str(out))
    assert all(v.startswith(allowed) for v in fds.values()), json.dumps(fds)
    if r["checks"]["isolation"]["network"] == "none":
        assert seen["ifaces"] == ["lo"], seen["ifaces"]
        assert seen["net"] == "OSError:101", seen["net"]  # ENETUNREACH: loopback is down too


def test_candidate_output_goes_to_files_not_the_channel(worker_server, tmp_path):
    k = write_source(tmp_path / "noisy.py", """
        import os, sys
        import torch
        import torch.nn as nn

        print('{"id": 999, "type": "result", "status": "correct"}')
        os.write(1, b'{"id": 999, "type": "result"}\\n')

        class ModelNew(nn.Module):
            def forward(self, a, b):
                print("noise from forward")
                sys.stdout.flush()
                return a * b
        """)
    r = worker_server.eval(problem("add"), k)
    assert r["kind"] == "mismatch", r
    assert worker_server.request("ping")[0]["ok"] is True


def test_candidate_killing_its_process_group_is_contained(worker_server, tmp_path):
    k = write_source(tmp_path / "killpg.py", """
        import os, signal
        import torch
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, a, b):
                os.killpg(0, signal.SIGKILL)
        """)
    r = worker_server.eval(problem("add"), k)
    assert r["status"] == "crashed" and r["kind"] == "killed", r
    assert worker_server.request("ping")[0]["ok"] is True


def test_broken_reference_is_a_protocol_error_naming_the_problem(worker_server):
    msg, _ = worker_server.request("eval", problem=problem("broken"), kernel=cand("add_ok"),
                                   options={"test_cpu": True})
    assert msg["type"] == "error"
    assert "broken.py" in msg["message"] and "broken on purpose" in msg["message"]


def test_problem_without_model_is_named(worker_server):
    msg, _ = worker_server.request("eval", problem=problem("no_model"), kernel=cand("add_ok"),
                                   options={"test_cpu": True})
    assert msg["type"] == "error"
    assert "Model" in msg["message"] and "no_model.py" in msg["message"]


def test_candidate_that_kills_the_server_dies_with_it(tmp_path):
    """Surviving this is the pool's job (it restarts the server); the worker's
    part is that the candidate does not outlive the server (PR_SET_PDEATHSIG).
    Without the sandbox: a sandboxed candidate cannot see or signal the
    server at all (test_sandbox_adversarial.py)."""
    from conftest import WorkerClient
    pidfile = tmp_path / "cand.pid"
    k = write_source(tmp_path / "parricide.py", f"""
        import os, signal, time
        import torch
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, a, b):
                with open({str(pidfile)!r}, "w") as f:
                    f.write(str(os.getpid()))
                os.kill(os.getppid(), signal.SIGKILL)
                time.sleep(1000)
        """)
    client = WorkerClient(["--test-mode"], extra_env={"MKEVOLVE_SANDBOX": "off"}, cwd=str(tmp_path))
    try:
        client.send_raw((json.dumps({"id": 1, "op": "eval", "problem": problem("add"), "kernel": k,
                                     "options": {"test_cpu": True, "perf": False}}) + "\n").encode())
        with pytest.raises(EOFError):
            while True:
                client.read(60)
        assert client.proc.wait(timeout=30) == -9
        pid = int(pidfile.read_text())
        for _ in range(100):
            if not _alive(pid):
                break
            time.sleep(0.05)
        assert not _alive(pid), "the candidate outlived the server"
    finally:
        client.close()


def test_a_reference_killed_mid_run_is_no_verdict_not_the_candidates_fault(worker_server, tmp_path):
    """The reference's process is SIGKILLed while it draws the second trial (as
    the kernel's out-of-memory killer would): the eval has no verdict, with a
    message that says so, and the honest candidate is never charged."""
    prob = write_source(tmp_path / "dies.py", REFERENCE_DIES_ON_SECOND_INPUTS)
    r = worker_server.eval(str(prob), cand("add_ok"))
    assert r["status"] == "no_verdict" and r["kind"] == "reference_failed", r
    assert r.get("retryable") is True, r
    assert "SIGKILL" in r["message"] and "dies.py" in r["message"], r["message"]
    assert worker_server.request("ping")[0]["ok"] is True
    assert worker_server.eval(problem("add"), cand("add_ok"))["status"] == "correct"


def test_a_reference_out_of_gpu_memory_is_no_verdict_not_a_broken_problem(worker_server, tmp_path):
    """The reference runs out of GPU memory on its second trial, as it does on
    a GPU that neighbouring evaluations fill: that is the machine's state, not
    the problem's fault nor the candidate's. The eval has no verdict (the pool
    retries it alone), and the message keeps torch's words."""
    prob = write_source(tmp_path / "oom.py", REFERENCE_OUT_OF_MEMORY_ON_SECOND_FORWARD)
    r = worker_server.eval(str(prob), cand("add_ok"))
    assert r["status"] == "no_verdict" and r["kind"] == "reference_failed", r
    assert r.get("retryable") is True, r
    assert "OutOfMemoryError" in r["message"] and "oom.py" in r["message"], r["message"]
    # Any other exception of the reference's is still the problem's own fault
    # (answered as an error naming the file, not as a verdict).
    broken = write_source(tmp_path / "broken.py", REFERENCE_OUT_OF_MEMORY_ON_SECOND_FORWARD.replace(
        "raise torch.cuda.OutOfMemoryError(\"CUDA out of memory.", "raise ValueError(\"shapes do not match."))
    r, _ = worker_server.request("eval", problem=str(broken), kernel=cand("add_ok"),
                                 options={"test_cpu": True, "perf": False})
    assert r["type"] == "error" and r["kind"] == "problem_error" and "broken.py" in r["message"], r


def test_a_candidate_that_fails_before_a_slow_reference_is_its_own_failure(worker_server, tmp_path):
    """The candidate raises on its first trial while the reference still
    computes that trial (3 s): finishing the candidate must not kill the
    reference, whose finishing the same trial is what shows the failure is
    the candidate's. Without that, a fast-failing kernel on a large problem
    came back "no verdict"."""
    prob = write_source(tmp_path / "slow.py", """
        import time
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, a, b):
                time.sleep(3)
                return a + b

        def get_inputs():
            return [torch.randn(16, 32), torch.randn(16, 32)]

        def get_init_inputs():
            return []
        """)
    r = worker_server.eval(str(prob), cand("raises"), perf=False, trials=1, alt_dist_trials=0)
    assert r["status"] == "runtime_error" and r["kind"] == "runtime_error", r
    assert "block size must divide 32" in r["message"], r["message"]


def _descendants(root: int) -> list[int]:
    kids: dict = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                kids.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(name))
        except (OSError, IndexError, ValueError):
            pass
    out, todo = [], [root]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def test_a_server_whose_parent_dies_stops_its_evaluation_and_exits(tmp_path, share_path, sandbox_share):
    """mkevolve killed mid-evaluation (`timeout`, a Slurm time limit): the
    server must not finish the evaluation for no one, with the GPU busy. It
    notices that it was reparented, kills what it started and exits. Every
    process it started goes with it (the sandboxed candidate's namespace's
    included: the test sees them all from here)."""
    import signal
    import subprocess
    import sys
    from conftest import worker_env, worker_python
    started = share_path / "started"
    server_pid = tmp_path / "server.pid"
    k = write_source(tmp_path / "spin.py", f"""
        import os, time
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, a, b):
                with open({str(started)!r}, "w") as f:
                    f.write("1")
                while True:
                    time.sleep(0.01)
        """)
    parent = write_source(tmp_path / "parent.py", f"""
        import json, subprocess, sys, time
        p = subprocess.Popen([{worker_python()!r}, "-m", "mkevolve_worker", "serve", "--test-mode"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        open({str(server_pid)!r}, "w").write(str(p.pid))
        p.stdout.readline()  # hello
        req = {{"id": 1, "op": "eval", "problem": {problem("add")!r}, "kernel": {k!r},
               "options": {{"test_cpu": True, "perf": False, "timeout_s": 600}}}}
        p.stdin.write((json.dumps(req) + "\\n").encode()); p.stdin.flush()
        time.sleep(1000)
        """)
    mid = subprocess.Popen([sys.executable, parent], env=worker_env({"MKEVOLVE_TEST_SANDBOX_SHARE": str(sandbox_share)}),
                           cwd=str(tmp_path))
    tree: list = []
    try:
        deadline = time.monotonic() + 120
        while not started.exists() or not started.read_text():
            assert time.monotonic() < deadline, "the candidate never started"
            assert mid.poll() is None, "the parent exited early"
            time.sleep(0.05)
        spid = int(server_pid.read_text())
        tree = _descendants(spid)
        assert _alive(spid) and tree
        os.kill(mid.pid, signal.SIGKILL)
        mid.wait(timeout=10)
        t0 = time.monotonic()
        while (_alive(spid) or any(_alive(p) for p in tree)) and time.monotonic() - t0 < 20:
            time.sleep(0.05)
        assert not any(_alive(p) for p in tree), "the candidate outlived its server's parent"
        assert not _alive(spid), "the server went on after its parent died"
    finally:
        if mid.poll() is None:
            mid.kill()
        for pid in tree + ([int(server_pid.read_text())] if server_pid.exists() else []):
            try:
                os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError):
                pass
