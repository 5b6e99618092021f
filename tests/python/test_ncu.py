"""ncu.py: Nsight Compute's CSV read back, the command line, and the sandboxed
child that execs it, with a stand-in `ncu` script (this machine has no GPU and
no Nsight Compute; the real one ran on an H200, docs/GPU-RESULTS.md). The CSV
samples are in the shape ncu's `--csv --page raw` prints: a header row, a units
row, one row per kernel."""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap

import pytest

from mkevolve_worker import evaluate, ncu

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","dram__bytes_read.sum","dram__bytes_write.sum",'
          '"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum",'
          '"launch__registers_per_thread","sm__throughput.avg.pct_of_peak_sustained_elapsed",'
          '"sm__warps_active.avg.pct_of_peak_sustained_active"')


def sample(units: str, rows: list[str]) -> str:
    return "\n".join(["==PROF== Connected to process 2303 (/usr/bin/python3.12)",
                      "==PROF== Profiling \"relu_kernel\" - 0: 0%....50%....100% - 9 passes",
                      "==PROF== Disconnected from process 2303", HEADER, units] + rows) + "\n"


BASE_UNITS = '"","","","","","","","","","","","byte","byte","%","nsecond","register/thread","%","%"'


def test_kernel_rows_in_base_units():
    text = sample(BASE_UNITS, [
        '"0","2303","python3.12","127.0.0.1","relu_kernel","1","7","(1024, 1, 1)","(32768, 1, 1)","0","9.0",'
        '"67108864","67108864","81.5","35872","18","12.25","88.1"',
        '"1","2303","python3.12","127.0.0.1","add_kernel","1","7","(256, 1, 1)","(4, 1, 1)","0","9.0",'
        '"1,024","0","0.4","2048","16","0.1","6.2"'])
    ks = ncu.parse_csv(text)
    assert [k["name"] for k in ks] == ["relu_kernel", "add_kernel"]
    r = ks[0]
    assert r["dram_bytes"] == 134217728 and r["dram_read_bytes"] == 67108864
    assert r["time_ms"] == pytest.approx(0.035872)
    assert r["memory_pct"] == 81.5 and r["sm_pct"] == 12.25 and r["achieved_occupancy_pct"] == 88.1
    assert r["registers"] == 18 and r["grid"] == "(32768, 1, 1)" and r["block"] == "(1024, 1, 1)"
    assert ks[1]["dram_read_bytes"] == 1024  # a thousands separator is read as a number
    s = ncu.summarize(ks, "2025.3.1.0")
    assert s["n_kernels"] == 2 and s["dram_bytes"] == 134217728 + 1024
    assert s["time_ms"] == pytest.approx(0.035872 + 0.002048)
    assert s["dram_gb_s"] == pytest.approx((134217728 + 1024) / (0.03792e-3) / 1e9)
    assert s["source"].startswith("Nsight Compute 2025.3.1.0 hardware counters")


def test_scaled_units_and_unreadable_metrics():
    # Without --print-units base ncu scales units per column; an n/a is unknown, never 0.
    units = '"","","","","","","","","","","","Mbyte","Kbyte","%","usecond","register/thread","%","%"'
    text = sample(units, ['"0","1","p","h","k","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0",'
                          '"67.11","5.38","n/a","30.72","32","50","n/a"'])
    k = ncu.parse_csv(text)[0]
    assert k["dram_read_bytes"] == pytest.approx(67.11e6) and k["dram_write_bytes"] == pytest.approx(5380)
    assert k["time_ms"] == pytest.approx(0.03072)
    assert k["memory_pct"] is None and k["achieved_occupancy_pct"] is None
    assert ncu.summarize([k], None)["source"].startswith("Nsight Compute hardware counters")


def test_no_kernels_no_rows():
    assert ncu.parse_csv("") == []
    assert ncu.parse_csv("==PROF== Disconnected from process 1\n==WARNING== No kernels were profiled.\n") == []
    assert ncu.parse_csv(HEADER + "\n" + BASE_UNITS + "\n") == []
    s = ncu.summarize([], None)
    assert s["time_ms"] is None and s["dram_bytes"] is None and s["dram_gb_s"] is None


def test_the_command_profiles_one_call_and_leaves_the_clocks_alone():
    cmd = ncu.command("/opt/ncu", "/tmp/x/ncu.csv", "/usr/bin/python3", "/tmp/x/job.json")
    assert cmd[0] == "/opt/ncu"
    joined = " ".join(cmd)
    assert "--clock-control none" in joined and "--profile-from-start off" in joined
    assert "--csv --page raw --print-units base" in joined and "--log-file /tmp/x/ncu.csv" in joined
    assert cmd[cmd.index("--metrics") + 1].split(",") == list(ncu.METRICS)
    assert cmd[-5:] == ["/usr/bin/python3", "-m", "mkevolve_worker.ncu", "target", "/tmp/x/job.json"]


def test_find_ncu_honours_the_variable(tmp_path, monkeypatch):
    exe = tmp_path / "ncu"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("MKEVOLVE_NCU", str(exe))
    assert ncu.find_ncu() == str(exe)
    monkeypatch.setenv("MKEVOLVE_NCU", str(tmp_path / "missing"))
    assert ncu.find_ncu() is None


FAKE_NCU = textwrap.dedent('''\
    #!{python}
    """A stand-in for ncu: checks it was started as the worker starts ncu, in a
    sandbox, then writes the CSV ncu would write to --log-file."""
    import os, sys
    args = sys.argv[1:]
    log = args[args.index("--log-file") + 1]
    job = args[-1]
    assert args[-4:-1] == ["-m", "mkevolve_worker.ncu", "target"], args
    assert os.path.isfile(job), job
    if any("API_KEY" in k for k in os.environ):
        sys.exit(5)  # the environment was not scrubbed
    with open(log, "w") as f:
        f.write({csv!r})
    ''')


def in_child(fn):
    """fn() -> JSON-able, run in a forked process: the evaluator kills every
    descendant of the process it runs in once a child is done (the session's
    worker server included), so it must not run in pytest's own."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = json.dumps(fn())
        except BaseException as e:  # noqa: BLE001
            out = json.dumps({"exception": repr(e)})
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


def ncu_profile(problem, kernel, opts):
    def run():
        ev = evaluate.Evaluator(test_mode=True)
        try:
            return ev.ncu_profile(problem, kernel, opts)
        finally:
            ev.close()
    return in_child(run)


def test_the_evaluator_runs_ncu_in_a_sandboxed_child(tmp_path, monkeypatch):
    text = sample(BASE_UNITS, ['"0","1","python3","h","relu_kernel","1","7","(1024, 1, 1)","(64, 1, 1)","0","9.0",'
                               '"4096","4096","50","1000","18","5","90"'])
    exe = tmp_path / "ncu"
    exe.write_text(FAKE_NCU.format(python=sys.executable, csv=text))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("MKEVOLVE_NCU", str(exe))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-the-child")
    monkeypatch.setenv("MKEVOLVE_TIMING_LOCK", str(tmp_path / "timing.lock"))
    problem = tmp_path / "p.py"
    kernel = tmp_path / "k.py"
    problem.write_text("x = 1\n")
    kernel.write_text("y = 2\n")
    out = ncu_profile(str(problem), str(kernel), {"seed": 42, "timeout_s": 60.0})
    assert "error" not in out, out
    assert out["n_kernels"] == 1 and out["kernels"][0]["name"] == "relu_kernel"
    assert out["dram_bytes"] == 8192 and out["time_ms"] == pytest.approx(0.001)
    assert out["seconds"] >= 0


def test_a_failing_ncu_is_an_error_record_not_a_verdict(tmp_path, monkeypatch):
    exe = tmp_path / "ncu"
    exe.write_text("#!/bin/sh\necho '==ERROR== the profiler could not start' >&2\nexit 1\n")
    exe.chmod(0o755)
    monkeypatch.setenv("MKEVOLVE_NCU", str(exe))
    monkeypatch.setenv("MKEVOLVE_TIMING_LOCK", str(tmp_path / "timing.lock"))
    out = ncu_profile(str(tmp_path), str(tmp_path), {"seed": 1, "timeout_s": 30.0})
    assert "could not start" in out["error"] and "exit status 1" in out["error"], out
    monkeypatch.setenv("MKEVOLVE_NCU", str(tmp_path / "nowhere"))
    assert "not found" in ncu_profile(str(tmp_path), str(tmp_path), {"seed": 1, "timeout_s": 30.0})["error"]


def test_loopback_comes_up_in_a_fresh_network_namespace():
    # Only where this process may make one (root, or user namespaces).
    pid = os.fork()
    if pid == 0:
        from mkevolve_worker import isolation
        if isolation.unshare_network() != "none":
            os._exit(3)
        os._exit(0 if ncu.loopback_up() else 1)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 3:
        pytest.skip("no network namespace here")
    assert code == 0


def test_the_csv_ncu_wrote_on_an_h200():
    """ncu 2025.3.1's own output for one relu call (examples/kernels/01_relu__triton.py on
    examples/problems/01_relu.py), recorded by gpu-suite's ncu stage on 2026-12-02: every
    device attribute and each metric's avg/max/min/sum as columns, numbers with
    thousands separators, units in the second row."""
    path = os.path.join(os.path.dirname(__file__), "fixtures", "ncu_raw_h200.csv")
    with open(path) as f:
        ks = ncu.parse_csv(f.read())
    assert len(ks) == 1
    k = ks[0]
    assert k["name"] == "relu_kernel" and k["grid"] == "(16384, 1, 1)" and k["block"] == "(128, 1, 1)"
    assert k["dram_read_bytes"] == 67116032 and k["dram_write_bytes"] == 42779648
    assert k["time_ms"] == pytest.approx(0.031808)
    assert k["memory_pct"] == 71.92 and k["sm_pct"] == 6.55 and k["achieved_occupancy_pct"] == 82.52
    assert k["registers"] == 18
