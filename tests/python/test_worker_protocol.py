"""Protocol v1 behaviour of `python -m mkevolve_worker serve` and the one-shot CLI."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import WorkerClient, cand, problem, worker_env, worker_python


def test_hello(worker_server):
    h = worker_server.hello
    assert h["type"] == "hello" and h["protocol"] == 1
    assert isinstance(h["pid"], int) and h["test_mode"] is True
    assert h["torch"]  # Debian's python3-torch
    assert h["cuda"] is False  # no GPU in CI; probed in a child, not the server
    assert "python" in h and "triton" in h
    # Where its start went, in seconds: the pool puts it on the evaluation that waited for it.
    st = h["startup_s"]
    assert st["preimport"] > 0 and st["gpu_probe"] >= 0 and "sandbox_selftest" not in st  # no GPU: no self-test
    # (each rounded to the millisecond: the sum may exceed the total by up to 1 ms a term)
    assert st["total"] >= st["preimport"] + st["gpu_probe"] - 0.002


def test_ping(worker_server):
    msg, progress = worker_server.request("ping")
    assert msg == {"id": msg["id"], "type": "result", "ok": True}
    assert progress == []


def test_unknown_op_is_an_error(worker_server):
    msg, _ = worker_server.request("frobnicate")
    assert msg["type"] == "error" and "unknown op" in msg["message"]


def test_malformed_lines_get_errors_and_the_server_survives(worker_server):
    worker_server.send_raw(b"this is not json\n")
    msg = worker_server.read(30)
    assert msg["type"] == "error" and msg["id"] is None and "not JSON" in msg["message"]
    worker_server.send_raw(b'{"op": "ping"}\n')
    msg = worker_server.read(30)
    assert msg["type"] == "error" and "integer id" in msg["message"]
    worker_server.send_raw(b"[1, 2]\n")
    assert worker_server.read(30)["type"] == "error"
    assert worker_server.request("ping")[0]["ok"] is True


def test_eval_sends_progress_then_one_result(worker_server):
    opts = {"test_cpu": True, "perf": False, "seed": 987654}  # a seed no other test uses: inputs not cached
    msg, progress = worker_server.request("eval", problem=problem("add"), kernel=cand("add_ok"), options=opts)
    assert msg["type"] == "result" and msg["status"] == "correct"
    phases = [p["phase"] for p in progress]
    assert phases == ["reference", "candidate", "reference", "compare"], phases
    # The same problem and options again: the same phases (each eval streams its own trials).
    msg, progress = worker_server.request("eval", problem=problem("add"), kernel=cand("add_ok"), options=opts)
    assert msg["status"] == "correct"
    assert [p["phase"] for p in progress] == ["reference", "candidate", "reference", "compare"], progress


def test_missing_files_and_bad_options_are_errors(worker_server):
    msg, _ = worker_server.request("eval", problem="/nonexistent/p.py", kernel=cand("add_ok"),
                                   options={"test_cpu": True})
    assert msg["type"] == "error" and "/nonexistent/p.py" in msg["message"]
    msg, _ = worker_server.request("eval", problem=problem("add"), kernel="/nonexistent/k.py",
                                   options={"test_cpu": True})
    assert msg["type"] == "error" and "/nonexistent/k.py" in msg["message"]
    msg, _ = worker_server.request("eval", problem=problem("add"), kernel=cand("add_ok"),
                                   options={"test_cpu": True, "trials": "five"})
    assert msg["type"] == "error" and "trials" in msg["message"]


def test_without_gpu_eval_says_so(worker_server):
    msg, _ = worker_server.request("eval", problem=problem("add"), kernel=cand("add_ok"), options={})
    assert msg["type"] == "error" and "no CUDA GPU" in msg["message"]


def test_gpu_info_without_gpu(worker_server):
    msg, _ = worker_server.request("gpu_info")
    assert msg["type"] == "result" and msg["gpus"] == []


def test_check_op(worker_server):
    msg, _ = worker_server.request("check", kernel=cand("add_ok"))
    assert msg["type"] == "result"
    assert msg["clean"] is False and msg["violations"]
    v = msg["violations"][0]
    assert {"file", "line", "rule", "message"} <= set(v)
    # A check runs nothing: it reports PyTorch compute like any finding, and
    # says which rules an eval counts only where their line runs.
    assert msg["conditional_rules"] == ["torch-compute"], msg


def test_baseline_in_test_mode(worker_server):
    msg, _ = worker_server.request("baseline", problem=problem("add"),
                                   options={"test_cpu": True, "perf_trials": 3, "warmup": 1})
    assert msg["type"] == "result", msg
    assert msg["eager"]["median_ms"] > 0 and msg["eager"]["mean_ms"] > 0
    assert msg["tf32"] is False and "torch" in msg
    # torch 1.13 has no torch.compile: reported, not fatal.
    assert msg["compile"] is None or msg["compile"]["median_ms"] > 0


DECOMP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "decomp_fixtures")


def test_verify_decomposition_runs_in_a_child(worker_server):
    fix = os.path.join(DECOMP, "mlp_good")
    msg, _ = worker_server.request("verify_decomposition", problem=os.path.join(DECOMP, "problems", "mlp.py"),
                                   decomposed=os.path.join(fix, "decomposed_problem.py"),
                                   subproblems_dir=os.path.join(fix, "subkernel_problems"),
                                   options={"test_cpu": True, "timeout_s": 120})
    assert msg["type"] == "result" and msg["ok"] is True, msg
    bad = os.path.join(DECOMP, "mlp_bad_mismatch")
    msg, _ = worker_server.request("verify_decomposition", problem=os.path.join(DECOMP, "problems", "mlp.py"),
                                   decomposed=os.path.join(bad, "decomposed_problem.py"),
                                   subproblems_dir=os.path.join(bad, "subkernel_problems"),
                                   options={"test_cpu": True, "timeout_s": 120})
    assert msg["type"] == "result" and msg["ok"] is False and msg["failures"], msg
    msg, _ = worker_server.request("verify_decomposition", problem=os.path.join(DECOMP, "problems", "mlp.py"),
                                   decomposed=os.path.join(fix, "decomposed_problem.py"),
                                   subproblems_dir="/nonexistent/dir", options={"test_cpu": True})
    assert msg["type"] == "error" and "/nonexistent/dir" in msg["message"]


def test_verify_decomposition_answers_the_bound_and_the_input_layouts(worker_server):
    # What the C++ side reads: the tolerance the decomposition was held to, with the
    # error measured, and the layouts each subproblem's inputs arrived in.
    fix = os.path.join(DECOMP, "views_good")
    msg, _ = worker_server.request("verify_decomposition", problem=os.path.join(DECOMP, "problems", "views.py"),
                                   decomposed=os.path.join(fix, "decomposed_problem.py"),
                                   subproblems_dir=os.path.join(fix, "subkernel_problems"),
                                   options={"test_cpu": True, "timeout_s": 120})
    assert msg["type"] == "result" and msg["ok"] is True, msg
    assert msg["tolerance"]["fraction"] == 0.1
    assert [o["output"] for o in msg["tolerance"]["outputs"]] == ["output[0]", "output[1]", "output[2]"]
    assert msg["subproblems"]["tanh"]["input_layouts_seen"] == [[
        {"shape": [8, 4, 16], "stride": [16, 128, 1], "offset": 0, "dtype": "float32", "contiguous": False}]]
    msg, _ = worker_server.request("verify_decomposition", problem=os.path.join(DECOMP, "problems", "views.py"),
                                   decomposed=os.path.join(fix, "decomposed_problem.py"),
                                   subproblems_dir=os.path.join(fix, "subkernel_problems"),
                                   options={"test_cpu": True, "decompose_tol_fraction": "a tenth"})
    assert msg["type"] == "error" and "decompose_tol_fraction" in msg["message"], msg


@pytest.fixture(scope="module")
def production_server(tmp_path_factory):
    client = WorkerClient([], cwd=str(tmp_path_factory.mktemp("prod-cwd")))
    yield client
    client.close()


def test_test_cpu_is_refused_without_test_mode(production_server):
    assert production_server.hello["test_mode"] is False
    msg, _ = production_server.request("eval", problem=problem("add"), kernel=cand("add_ok"),
                                       options={"test_cpu": True})
    assert msg["type"] == "error" and "--test-mode" in msg["message"]
    msg, _ = production_server.request("baseline", problem=problem("add"), options={"test_cpu": True})
    assert msg["type"] == "error" and "--test-mode" in msg["message"]
    msg, _ = production_server.request("eval", problem=problem("add"), kernel=cand("add_ok"),
                                       options={"test_static": True})
    assert msg["type"] == "error" and "test_static" in msg["message"] and "--test-mode" in msg["message"], msg
    msg, _ = production_server.request("eval", problem=problem("add"), kernel=cand("add_ok"),
                                       options={"static_check": False})
    assert msg["type"] == "error" and "--test-mode" in msg["message"]


def test_shutdown(tmp_path):
    client = WorkerClient(["--test-mode"], cwd=str(tmp_path))
    msg, _ = client.request("shutdown")
    assert msg["type"] == "result" and msg["ok"] is True
    assert client.proc.wait(timeout=30) == 0
    client.close()


def test_missing_torch_is_reported_in_hello(tmp_path):
    # An interpreter that cannot import torch: hide it behind a stub that raises.
    stub = tmp_path / "stub"
    (stub / "torch").mkdir(parents=True)
    (stub / "torch" / "__init__.py").write_text("raise ImportError('torch deliberately hidden')\n")
    env = worker_env()
    env["PYTHONPATH"] = str(stub) + os.pathsep + env["PYTHONPATH"]
    p = subprocess.Popen([worker_python(), "-m", "mkevolve_worker", "serve"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=str(tmp_path))
    out, _ = p.communicate(b'{"id": 1, "op": "eval", "problem": "p.py", "kernel": "k.py"}\n'
                           b'{"id": 2, "op": "check", "kernel": "/nonexistent.py"}\n', timeout=60)
    lines = [json.loads(x) for x in out.splitlines()]
    assert lines[0]["type"] == "hello" and lines[0]["torch"] is None
    assert "torch" in lines[0]["error"]
    assert lines[1]["type"] == "error" and "torch" in lines[1]["message"]
    assert lines[2]["id"] == 2 and lines[2]["type"] == "error"  # check still answers without torch
    assert p.returncode == 0


def test_cli_eval_json_and_exit_codes(tmp_path):
    def run(*args):
        return subprocess.run([worker_python(), "-m", "mkevolve_worker", *args], capture_output=True, text=True,
                              env=worker_env(), cwd=str(tmp_path), timeout=120)
    ok = run("eval", "--test-mode", "--test-cpu", "--no-perf", "--problem", problem("add"),
             "--kernel", cand("add_ok"), "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["status"] == "correct"
    bad = run("eval", "--test-mode", "--test-cpu", "--no-perf", "--problem", problem("add"),
              "--kernel", cand("add_wrong"))
    assert bad.returncode == 1 and "mismatch" in bad.stdout
    refused = run("eval", "--test-cpu", "--problem", problem("add"), "--kernel", cand("add_ok"))
    assert refused.returncode == 2 and "--test-mode" in refused.stderr
    missing = run("eval", "--test-mode", "--test-cpu", "--problem", "/nonexistent.py", "--kernel", cand("add_ok"))
    assert missing.returncode == 2 and "/nonexistent.py" in missing.stderr
    nogpu = run("eval", "--problem", problem("add"), "--kernel", cand("add_ok"))
    assert nogpu.returncode == 3 and "no CUDA GPU" in nogpu.stderr
    chk = run("check", cand("add_ok"))
    assert chk.returncode == 1 and "add_ok.py:" in chk.stdout
