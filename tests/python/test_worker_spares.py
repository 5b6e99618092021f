"""Pre-started children (spares.py) and what a candidate can find in its own memory.

The server keeps one warmed, idle process per role (reference, candidate,
profiling) forked ahead of the next candidate; each is used once. These
tests check that candidates really run in them, that a spare which died
while idle costs nothing but the warm-up, that clean-up between candidates
leaves idle spares alone, that the inputs handed over cannot be changed, and
that no candidate finds an earlier candidate's expected outputs in the
memory it inherits from the server.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from conftest import WorkerClient, cand, problem, write_source



def _children(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
            out.append(int(name))
    return out


def _wait_children(pid: int, n: int, timeout: float = 30) -> list[int]:
    deadline = time.monotonic() + timeout
    kids = _children(pid)
    while len(kids) != n and time.monotonic() < deadline:
        time.sleep(0.05)
        kids = _children(pid)
    return kids


@pytest.fixture()
def fresh_server(tmp_path, sandbox_share):
    servers = []

    def start(*args, sandbox: str | None = None):
        lock = str(tmp_path / "timing.lock")
        env = {"MKEVOLVE_TIMING_LOCK": lock, "MKEVOLVE_TEST_SANDBOX_SHARE": str(sandbox_share)}
        if sandbox is not None:
            env["MKEVOLVE_SANDBOX"] = sandbox
        s = WorkerClient(["--test-mode", *args], extra_env=env, cwd=str(tmp_path))
        servers.append(s)
        return s
    yield start
    for s in servers:
        s.close()


def _sandboxed(s) -> bool:
    return (s.hello.get("sandbox") or {}).get("mode", "off") != "off"


def _refilled_after_an_eval_without_timing(s) -> list[str]:
    """The roles refill forks after an evaluation without timing: the ones it
    used (reference, candidate), and, sandboxed, the profiling spare too: it
    shares the candidate's box, which no second candidate may use (spares.py)."""
    return ["cand", "prof", "ref"] if _sandboxed(s) else ["cand", "ref"]


def test_candidates_run_in_prestarted_processes(fresh_server):
    s = fresh_server()
    # Right after its hello the server forks one spare per role.
    assert len(_wait_children(s.proc.pid, 3)) == 3
    for _ in range(2):
        r = s.eval(problem("add"), cand("add_ok"))
        assert r["status"] == "correct", r
        assert r["checks"]["isolation"]["prestarted"] is True
        assert r["checks"]["isolation"]["warm"]["cuda"] is False  # CPU only here; GPU tests see True
    # Between requests: the three replacements are idle, nothing else is left.
    assert len(_wait_children(s.proc.pid, 3)) == 3


def test_spares_asked_for_later_are_forked_by_refill(fresh_server):
    """With "spares": "later" an eval forks no replacements; op refill
    forks one per missing role, once, and the next eval runs in them."""
    s = fresh_server()
    assert len(_wait_children(s.proc.pid, 3)) == 3
    msg, _ = s.request("eval", problem=problem("add"), kernel=cand("add_ok"), spares="later",
                       options={"test_cpu": True, "perf": False})
    assert msg["type"] == "result" and msg["status"] == "correct", msg
    assert msg["checks"]["isolation"]["prestarted"] is True
    # Without timing no profiling process ran: only its spare is left, and
    # the answer says so (the pool counts its CUDA context).
    assert len(_wait_children(s.proc.pid, 1)) == 1
    assert msg["spares_idle"] == 1, msg
    msg, _ = s.request("refill")
    assert msg["type"] == "result" and sorted(msg["forked"]) == _refilled_after_an_eval_without_timing(s), msg
    assert len(_wait_children(s.proc.pid, 3)) == 3
    msg, _ = s.request("refill")
    assert msg["forked"] == [], msg
    r = s.eval(problem("add"), cand("add_ok"))
    assert r["status"] == "correct" and r["checks"]["isolation"]["prestarted"] is True, r
    assert r["spares_idle"] == 3, r  # refilled at its start ("now", the default)
    msg, _ = s.request("eval", problem=problem("add"), kernel=cand("add_ok"), spares="soon",
                       options={"test_cpu": True, "perf": False})
    assert msg["type"] == "error" and "spares" in msg["message"], msg


def test_refill_without_spares_forks_nothing(fresh_server):
    s = fresh_server("--no-spares")
    msg, _ = s.request("refill")
    assert msg["type"] == "result" and msg["forked"] == [], msg
    assert _wait_children(s.proc.pid, 0) == []


def test_without_spares_every_process_is_forked_on_demand(fresh_server):
    s = fresh_server("--no-spares")
    r = s.eval(problem("add"), cand("add_ok"))
    assert r["status"] == "correct", r
    assert r["checks"]["isolation"]["prestarted"] is False
    assert _wait_children(s.proc.pid, 0) == []


def test_a_spare_that_died_idle_is_replaced_on_the_spot(fresh_server):
    s = fresh_server()
    # The problem's inputs are cached after a first eval, so the next one
    # starts no reference child #1 (whose start would refill the spares).
    assert s.eval(problem("add"), cand("add_ok"))["status"] == "correct"
    kids = _wait_children(s.proc.pid, 3)
    assert len(kids) == 3
    for pid in kids:
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    r = s.eval(problem("add"), cand("add_ok"))
    assert r["status"] == "correct", r
    assert r["checks"]["isolation"]["prestarted"] is False
    # A wrong candidate is still caught by a process forked on demand.
    for pid in _wait_children(s.proc.pid, 3):
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    assert s.eval(problem("add"), cand("add_wrong"))["status"] == "incorrect"


def test_a_hang_and_a_crash_do_not_take_the_spares_with_them(fresh_server):
    s = fresh_server()
    assert s.eval(problem("add"), cand("hang"), timeout_s=2)["kind"] == "hang"
    assert s.eval(problem("add"), cand("segfault"))["status"] == "crashed"
    r = s.eval(problem("add"), cand("add_ok"))
    assert r["status"] == "correct" and r["checks"]["isolation"]["prestarted"] is True, r


def test_the_inputs_handed_over_are_sealed(tmp_path):
    import torch
    from mkevolve_worker import tensorio
    p = str(tmp_path / "in.mkt")
    tensorio.save(p, {"inputs": {"t0": [torch.arange(8.0)]}, "init": [[]]})
    fd = tensorio.sealed_copy(p)
    try:
        obj, _ = tensorio.load_fd(fd)
        obj["inputs"]["t0"][0].fill_(7.0)  # a private copy-on-write page
        again, _ = tensorio.load_fd(fd)
        assert again["inputs"]["t0"][0].tolist() == [float(i) for i in range(8)]
        with pytest.raises(OSError):
            os.pwrite(fd, b"x", 0)
        with pytest.raises(OSError):
            os.ftruncate(fd, 0)
        with pytest.raises(OSError):  # nor through another open of the same file
            w = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY)
            try:
                os.write(w, b"x")
            finally:
                os.close(w)
    finally:
        os.close(fd)


MARKER = 1234.5678  # float32 bytes that appear nowhere but in the expected outputs


@pytest.mark.parametrize("spares", ["now", "later"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_no_candidate_finds_an_earlier_expected_output_in_its_memory(fresh_server, tmp_path, dtype, spares):
    """The reference's output is a block of one value (64 KiB in float32,
    below glibc's mmap threshold, so it lives in the server's heap after
    being compared; in float16 the comparison's float32 copy does). A later
    candidate scans its own memory, inherited from the server, for such a
    block and returns it if found. The server zeroes what it compared and
    glibc wipes what it frees, so the scan must come back empty. With
    spares "later", the scanning candidate's processes are forked after the
    second eval's comparison (op refill), not at its start."""
    prob = write_source(tmp_path / "marker.py", f"""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, x):
                return torch.full_like(x, {MARKER}).to(torch.{dtype})

        def get_inputs():
            return [torch.randn(128, 128)]

        def get_init_inputs():
            return []
        """)
    zeros = write_source(tmp_path / "zeros.py", f"""
        import torch
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, x):
                return torch.zeros_like(x).to(torch.{dtype})
        """)
    scan = write_source(tmp_path / "scan.py", """
        import struct
        import torch
        import torch.nn as nn

        def find_marker():
            \"\"\"The most frequent repeated 4-byte float block of the heap, if any
            looks like a whole output (64 equal non-zero floats in a row).\"\"\"
            with open("/proc/self/maps") as f:
                regions = [l.split() for l in f]
            with open("/proc/self/mem", "rb", buffering=0) as mem:
                for r in regions:
                    lo, hi = (int(x, 16) for x in r[0].split("-"))
                    named = len(r) > 5 and r[5] != "[heap]"
                    if not r[1].startswith("rw") or named or hi - lo > (256 << 20):
                        continue
                    try:
                        mem.seek(lo)
                        data = mem.read(hi - lo)
                    except (OSError, ValueError, OverflowError):
                        continue
                    for off in range(0, len(data) - 256, 4096):
                        word = data[off:off + 4]
                        if word == b"\\0\\0\\0\\0" or word == b"\\x5a\\x5a\\x5a\\x5a":
                            continue
                        if data[off:off + 256] == word * 64:
                            v = struct.unpack("<f", word)[0]
                            if v == v and 1000.0 < abs(v) < 2000.0:
                                return v
                        half = data[off:off + 2]
                        if data[off:off + 256] == half * 128:
                            v = struct.unpack("<e", half)[0]
                            if v == v and 1000.0 < abs(v) < 2000.0:
                                return v
            return None

        class ModelNew(nn.Module):
            def forward(self, x):
                v = find_marker()
                out = torch.full_like(x, v) if v is not None else torch.zeros_like(x)
                return out.to(torch.float16) if x.dtype == torch.float32 and DTYPE == "float16" else out
        """.replace("DTYPE", repr(dtype)))
    s = fresh_server()
    opts = dict(test_cpu=True, perf=False, trials=2, alt_dist_trials=0, candidate_first_trials=0)

    def ev(kernel):
        msg, _ = s.request("eval", problem=prob, kernel=kernel, options=opts, spares=spares)
        assert msg["type"] == "result", msg
        return msg
    assert ev(zeros)["status"] == "incorrect"
    # Forked at the start of the second eval ("now"), or after it (op refill),
    # the third eval's processes inherit the server's heap after the first
    # (or second) eval's expected outputs were compared.
    assert ev(zeros)["status"] == "incorrect"
    if spares == "later":
        assert sorted(s.request("refill")[0]["forked"]) == _refilled_after_an_eval_without_timing(s)
    r = ev(scan)
    assert r["status"] == "incorrect", ("a candidate read an earlier eval's expected output from the memory "
                                        f"it inherited: {r}")


def test_a_waiting_candidate_cannot_swap_the_expected_outputs(fresh_server, tmp_path):
    """With timing on, the candidate waits alive while reference #2 hands its
    expected outputs over. A thread of the candidate rewrites every tensor
    file it can find in the reference's directory with zeros, the outputs it
    returns itself. The outputs travel as a sealed descriptor, so it finds none."""
    swapper = write_source(tmp_path / "swapper.py", """
        import os
        import threading
        import time
        import torch
        import torch.nn as nn
        from mkevolve_worker import tensorio

        def zero(o):
            if isinstance(o, torch.Tensor):
                return torch.zeros_like(o)
            if isinstance(o, dict):
                return {k: zero(v) for k, v in o.items()}
            if isinstance(o, (list, tuple)):
                return type(o)(zero(x) for x in o)
            return o

        def swap_forever():
            base = os.path.dirname(os.getcwd())
            t_end = time.monotonic() + 60
            while time.monotonic() < t_end:
                for d in os.listdir(base):
                    if not d.startswith("ref"):
                        continue
                    for name in os.listdir(os.path.join(base, d)) if os.path.isdir(os.path.join(base, d)) else []:
                        p = os.path.join(base, d, name)
                        if name.endswith((".mkt", ".part")):
                            try:
                                obj, meta = tensorio.load(p)
                                obj["out"] = zero(obj["out"])
                                tensorio.save(p, obj, meta)
                            except Exception:
                                pass
                time.sleep(0.0005)

        threading.Thread(target=swap_forever, daemon=True).start()

        class ModelNew(nn.Module):
            def forward(self, a, b):
                return torch.zeros_like(a + b)
        """)
    s = fresh_server()
    for _ in range(3):
        r = s.eval(problem("add"), swapper, perf=True, perf_trials=3, warmup=1)
        assert r["status"] == "incorrect" and r["kind"] == "mismatch", r


@pytest.mark.parametrize("sandbox", ["best-effort", "off"])
def test_modules_planted_in_the_servers_directory_never_run(fresh_server, tmp_path, share_path, sandbox):
    """Children are forked from the server and import after forking what the
    server had not imported. A candidate plants modules with the names of
    such standard modules in the server's working directory (first on
    sys.path under `python -m`); no later process may run them. Sandboxed,
    the candidate cannot even see that directory (the planting fails); the
    server's own defence is tested without the sandbox."""
    marker = tmp_path / "planted-ran.txt"
    (tmp_path / "k").mkdir()  # the candidate's own folder is on its sys.path, and only on its
    planter = write_source(tmp_path / "k" / "planter.py", f"""
        import os
        import sys
        import torch
        import torch.nn as nn

        NAMES = ["resource", "mmap", "fcntl", "traceback", "hashlib", "random", "runpy", "zz_probe"]
        CODE = "open({str(marker)!r}, 'a').write(__name__ + '\\\\n')\\n"
        for d in [{str(tmp_path)!r}] + [p for p in sys.path if p in ('', '.')]:
            for name in NAMES:
                try:
                    with open(os.path.join(d or '.', name + '.py'), 'w') as f:
                        f.write(CODE)
                except OSError:
                    pass  # sandboxed: not in its sight
        with open({str(share_path / "seen-path.txt")!r}, 'w') as f:
            f.write('\\n'.join(sys.path))

        class ModelNew(nn.Module):
            def forward(self, a, b):
                return a + b
        """)
    s = fresh_server(sandbox=sandbox)  # its working directory is tmp_path
    assert s.eval(problem("add"), planter)["status"] == "correct"
    seen = (share_path / "seen-path.txt").read_text().splitlines()
    assert str(tmp_path) not in seen and "" not in seen, seen
    for prob in ("add", "relu_rand", "softmax_wide"):  # new problems: reference #1 runs too
        r = s.eval(problem(prob), cand({"add": "add_ok", "relu_rand": "relu_ok", "softmax_wide": "softmax_ok"}[prob]))
        assert r["status"] == "correct", r
    assert not marker.exists(), marker.read_text()


@pytest.mark.parametrize("sandbox", ["best-effort", "off"])
def test_stopped_spares_are_continued_and_get_a_fresh_directory(fresh_server, tmp_path, sandbox):
    """A candidate stops the idle spares (SIGSTOP) and litters their
    directories; the next candidate still runs in one of them, correctly.
    Sandboxed, it sees no spare at all (its own PID namespace) and stops none."""
    vandal = write_source(tmp_path / "vandal.py", """
        import os
        import signal
        import torch
        import torch.nn as nn

        def vandalize():
            me = os.getpid()
            parent = os.getppid()
            for name in os.listdir("/proc"):
                if not name.isdigit() or int(name) == me:
                    continue
                try:
                    with open(f"/proc/{name}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    cwd = os.readlink(f"/proc/{name}/cwd")
                except OSError:
                    continue
                if int(fields[1]) != parent:
                    continue
                try:
                    os.makedirs(os.path.join(cwd, "expected.mkt.part"), exist_ok=True)
                    os.makedirs(os.path.join(cwd, "inputs.mkt.part"), exist_ok=True)
                    os.makedirs(os.path.join(cwd, "candidate.mkt.part"), exist_ok=True)
                except OSError:
                    pass
                os.kill(int(name), signal.SIGSTOP)

        class ModelNew(nn.Module):
            def forward(self, a, b):
                vandalize()
                return a + b
        """)
    s = fresh_server(sandbox=sandbox)
    assert s.eval(problem("add"), cand("add_ok"))["status"] == "correct"
    assert s.eval(problem("add"), vandal)["status"] == "correct"
    stopped = [p for p in _children(s.proc.pid) if open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] == "T"]
    if _sandboxed(s):
        assert not stopped, "a sandboxed candidate stopped a spare"
    else:
        assert stopped, "the vandal stopped no spare: the test proves nothing"
    for prob, k in (("add", "add_ok"), ("relu_rand", "relu_ok")):
        r = s.eval(problem(prob), cand(k), timeout_s=20)
        assert r["status"] == "correct" and r["checks"]["isolation"]["prestarted"] is True, r


def test_made_up_wall_clock_events_do_not_stall_the_server(fresh_server, tmp_path):
    """During its timed phase a candidate writes hundreds of made-up
    wall-clock events and ends of round to its event pipe; the verdict still
    comes (the bound on answers is test_worker_units'
    test_wall_rounds_are_answered_once_in_order_and_at_most_four_times)."""
    forger = write_source(tmp_path / "forger.py", """
        import json
        import os
        import time
        import torch
        import torch.nn as nn

        CALLS = [0]

        def forge():
            for fd in os.listdir("/proc/self/fd"):
                try:
                    target = os.readlink(f"/proc/self/fd/{fd}")
                except OSError:
                    continue
                if not target.startswith("pipe:"):
                    continue
                def send(*evs):
                    os.write(int(fd), ("\\n".join(json.dumps(x) for x in evs) + "\\n").encode())
                try:
                    # Rounds whose model batch is slow next to a claimed 1 ns median: each fails.
                    for i in range(300):
                        send({"ev": "wall", "mark": "begin", "batch": "null", "rep": i, "n": 10},
                             {"ev": "wall", "mark": "end", "batch": "null", "rep": i, "n": 10},
                             {"ev": "wall", "mark": "begin", "batch": "model", "rep": i, "n": 10})
                        time.sleep(0.002)
                        send({"ev": "wall", "mark": "end", "batch": "model", "rep": i, "n": 10},
                             {"ev": "wall", "mark": "round_end", "round": i % 3, "synced_median_ms": 1e-6})
                except OSError:
                    pass

        class ModelNew(nn.Module):
            def forward(self, a, b):
                CALLS[0] += 1
                if CALLS[0] == 7:  # the first call after the six trials: the timed phase
                    forge()
                return a + b
        """)
    s = fresh_server()
    t0 = time.monotonic()
    r = s.eval(problem("add"), forger, perf=True, perf_trials=5, warmup=0, timeout_s=3)
    assert r["type"] == "result", r
    assert time.monotonic() - t0 < 60, r


def test_an_evaluation_records_where_its_time_went(fresh_server):
    # checks.phases_s: the milestones of one evaluation (scripts/eval_phases.py
    # sums them over a run), the reference's stamped by its own clock.
    s = fresh_server()
    r = s.eval(problem("add"), cand("add_ok"), perf=True, perf_trials=3, warmup=1)
    assert r["status"] == "correct", r
    marks = {name: t for name, t in r["checks"]["phases_s"]}
    order = ["running forward (trial c0t0)", "forward returned (trial c0t0)",
             "output of the first trial received", "reference ran the first trial", "first trial compared",
             "compared", "next candidate's spares warm", "timing lock taken", "exited"]
    for name in order + ["reference: first trial's inputs handed over", "reference: Model constructed",
                         "reference: first forward returned"]:
        assert name in marks, (name, r["checks"]["phases_s"])
    assert [marks[n] for n in order] == sorted(marks[n] for n in order), r["checks"]["phases_s"]
    # The reference draws and computes the first trial before the server hears of it.
    assert marks["reference: Model constructed"] <= marks["reference: first forward returned"] \
        <= marks["reference ran the first trial"]
    # The server's own steps around the candidate's run: the rest of elapsed_s.
    server = ["server: request received", "server: taking the shared lock", "server: reference started",
              "server: first inputs drawn"]
    assert [marks[n] for n in server] == sorted(marks[n] for n in server) and marks[server[-1]] <= 0.0, marks
    assert marks["server: verdict ready"] >= marks["exited"], marks
    assert marks["server: verdict ready"] - marks["server: request received"] <= r["elapsed_s"] + 0.01, r


def test_an_evals_priority_reaches_its_timing_lock(fresh_server):
    """The request's "priority" is the timed phase's priority at the GPU's
    timing lock (its record says so); it must be an integer."""
    s = fresh_server()
    msg, _ = s.request("eval", problem=problem("add"), kernel=cand("add_ok"), priority=4,
                       options={"test_cpu": True, "perf": True, "perf_trials": 3, "warmup": 1})
    assert msg["type"] == "result" and msg["status"] == "correct", msg
    rec = msg["checks"]["timing_lock"]
    assert rec["held"] is True and rec["priority"] == 4 and rec["deferred_s"] == 0, rec
    msg, _ = s.request("eval", problem=problem("add"), kernel=cand("add_ok"),
                       options={"test_cpu": True, "perf": True, "perf_trials": 3, "warmup": 1})
    assert msg["checks"]["timing_lock"]["priority"] == 0, msg["checks"]["timing_lock"]
    for bad in ("high", 2.5, True):
        msg, _ = s.request("eval", problem=problem("add"), kernel=cand("add_ok"), priority=bad,
                           options={"test_cpu": True, "perf": False})
        assert msg["type"] == "error" and "priority" in msg["message"], msg


def test_an_eval_of_lower_priority_lets_a_live_higher_one_go_first(fresh_server, tmp_path):
    """An eval registers as live at its priority (gpulock.register_active) for
    as long as it runs, and an eval of lower priority starts its correctness
    trials only once no live evaluation of higher priority is left (the
    critical chain's timed phases then need not wait for its compile)."""
    import threading

    from mkevolve_worker import gpulock
    s = fresh_server()
    lock = str(tmp_path / "timing.lock")
    opts = {"test_cpu": True, "perf": True, "perf_trials": 3, "warmup": 1}
    seen: set = set()
    done = threading.Event()

    def watch():
        while not done.is_set():
            try:
                seen.update(os.listdir(lock + ".active"))
            except OSError:
                pass
            time.sleep(0.002)
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        msg, _ = s.request("eval", problem=problem("add"), kernel=cand("add_ok"), priority=5, options=opts)
    finally:
        done.set()
        watcher.join()
    assert msg["type"] == "result" and msg["status"] == "correct", msg
    assert any(n.startswith("5-") for n in seen), seen
    assert os.listdir(lock + ".active") == []  # gone with the eval
    assert msg["checks"]["trials_lock"]["deferred_s"] == 0, msg["checks"]["trials_lock"]

    # Closed 3 s from now; the eval reaches its trials well within the first
    # 1.5 s, even on a loaded machine, so it defers for at least 1.5 s.
    higher = gpulock.register_active(5, lock)
    threading.Timer(3.0, higher.close).start()
    msg, _ = s.request("eval", problem=problem("add"), kernel=cand("add_ok"), priority=2, options=opts)
    assert msg["type"] == "result" and msg["status"] == "correct", msg
    trials = msg["checks"]["trials_lock"]
    assert trials["held"] and trials["deferred_s"] >= 1.5, trials
    marks = dict(msg["checks"]["phases_s"])
    assert marks["deferred to higher-priority evaluations"] <= -1.5, msg["checks"]["phases_s"]

    # An eval without a priority never registers (nothing defers to it).
    seen.clear()
    done.clear()
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        msg, _ = s.request("eval", problem=problem("add"), kernel=cand("add_ok"), options=opts)
    finally:
        done.set()
        watcher.join()
    assert msg["type"] == "result" and msg["status"] == "correct", msg
    assert seen == set(), seen
    assert msg["checks"]["profile_lock"]["deferred_s"] == 0, msg["checks"]["profile_lock"]


_BROKEN_REFERENCE = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, a, b):
        raise ValueError("shapes do not match")
def get_inputs():
    return [torch.randn(16, 32), torch.randn(16, 32)]
def get_init_inputs():
    return []
"""


def test_an_eval_answered_as_an_error_says_which_spares_it_left_idle(fresh_server, tmp_path):
    """Found by review: an eval that failed before it took its spares (here
    the problem's own reference raises) is answered as an error, and said
    nothing of the spares it left idle, which the pool then counted nowhere."""
    s = fresh_server()
    assert len(_wait_children(s.proc.pid, 3)) == 3
    msg, _ = s.request("eval", problem=write_source(tmp_path / "broken.py", _BROKEN_REFERENCE),
                       kernel=cand("add_ok"), spares="later", options={"test_cpu": True, "perf": False})
    assert msg["type"] == "error", msg
    alive = len(_children(s.proc.pid))
    assert alive >= 1 and msg.get("spares_idle") == alive, (msg, alive)
