"""Static findings of PyTorch compute are judged by what ran (coverage.py).

A peer's honest Triton kernel for KernelBench level 3 problem 31 was called
cheating for `torch.randn(...) * scale` in a weight-initialisation branch its
forward never takes. Now a torch-compute finding on a line that no trial,
profiled call or timed call ran is a warning; one that ran, or whose running
is unknown, stays cheating.

The end-to-end tests run candidates written in Triton on the CPU: a test
server with fixtures/fake_triton_site on its PYTHONPATH imports the emulator
of fixtures/fake_triton.py as `triton`, and `test_static` enforces the static
layer in test mode. The fixtures are in fixtures/coverage/.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import FIXTURES, WORKER_DIR, WorkerClient

from mkevolve_worker import coverage, loader, static_check

COV = os.path.join(FIXTURES, "coverage")
PROBLEM = os.path.join(COV, "scale_shift_relu_problem.py")


def kernel(name: str) -> str:
    return os.path.join(COV, name + ".py")


@pytest.fixture(scope="module")
def triton_server(tmp_path_factory):
    cwd = str(tmp_path_factory.mktemp("cov-cwd"))
    shim = os.path.join(FIXTURES, "fake_triton_site")
    client = WorkerClient(["--test-mode"], cwd=cwd,
                          extra_env={"PYTHONPATH": WORKER_DIR + os.pathsep + shim,
                                     "MKEVOLVE_TIMING_LOCK": os.path.join(cwd, "timing.lock")})
    assert client.hello["triton"] == "0+fake_triton", client.hello
    yield client
    client.close()


def run(server, kern: str, problem: str = PROBLEM, **options):
    opts = {"test_static": True, "perf": True, "perf_trials": 3, "warmup": 1, "timeout_s": 60}
    opts.update(options)
    return server.eval(problem, kern, timeout=180, **opts)


def lines_of(r) -> dict:
    return {(os.path.basename(x["file"]), x["line"]): x for x in r["checks"]["static"]["coverage"]["lines"]}


# -- the verdicts ------------------------------------------------------------

def test_a_torch_fallback_that_never_runs_is_a_warning_not_cheating(triton_server):
    """(a) `if weight is None: weight = torch.randn(..) * scale`, weights
    always passed: correct, with the finding as a warning in its feedback.
    The static check alone flags the line (before, that was the verdict)."""
    found = static_check.check_file(kernel("fallback_never_runs"))
    assert [(v["line"], v["rule"]) for v in found] == [(32, "torch-compute")], found
    r = run(triton_server, kernel("fallback_never_runs"))
    assert r["status"] == "correct" and r["kind"] == "ok", r
    assert r["runtime_ms"] is not None
    assert "warning" in r["message"] and "fallback_never_runs.py:32" in r["message"], r["message"]
    assert len(r["reasons"]) == 1, r["reasons"]
    assert r["reasons"][0].startswith("fallback_never_runs.py:32: torch-compute (warning): ")
    assert "never ran in any correctness trial or timed call" in r["reasons"][0]
    assert "not counted as cheating, but remove it" in r["reasons"][0]
    st = r["checks"]["static"]
    assert st["enforced"] is True and st["violations"] == [], st
    assert [(w["line"], w["rule"], w["ran"]) for w in st["warnings"]] == [(32, "torch-compute", False)], st
    cov = st["coverage"]
    assert cov["rules"] == ["torch-compute"] and cov["otherwise"] == {"status": "correct", "kind": "ok"}
    assert lines_of(r)[("fallback_never_runs.py", 32)]["ran"] is False
    # Both processes ran the candidate on inputs and reported after their last call.
    for role in ("candidate", "profiling"):
        p = cov["processes"][role]
        assert p["required"] and p["complete"] and p["mechanism"] in ("sys.monitoring", "sys.settrace"), cov


def test_the_same_fallback_taken_on_every_call_is_cheating(triton_server):
    """(b) The same file whose forward leaves out the weight: the branch runs
    in the first trial, so it is cheating (it would be a mismatch otherwise)."""
    r = run(triton_server, kernel("fallback_always_runs"))
    assert r["status"] == "cheating" and r["kind"] == "static_violation", r
    assert "fallback_always_runs.py:32: torch-compute: " in r["message"], r["message"]
    assert "this line ran in trial c0t0" in r["reasons"][0], r["reasons"]
    assert any(x.startswith("otherwise: incorrect (mismatch)") for x in r["reasons"]), r["reasons"]
    st = r["checks"]["static"]
    assert [(v["line"], v["ran"]) for v in st["violations"]] == [(32, True)] and st["warnings"] == [], st
    assert lines_of(r)[("fallback_always_runs.py", 32)]["ran_in"]["candidate"] == "trial c0t0"


def test_a_pytorch_path_that_runs_and_is_right_is_cheating(triton_server):
    """(b) `if not x.is_cuda: return torch.relu(x * weight + bias)`: on the CPU
    the PyTorch path runs on every call and gives the right answer, which is
    exactly what must not pass. The unused weight fallback stays a warning."""
    r = run(triton_server, kernel("device_fallback"))
    assert r["status"] == "cheating" and r["kind"] == "static_violation", r
    assert r["checks"]["static"]["coverage"]["otherwise"] == {"status": "correct", "kind": "ok"}
    assert "device_fallback.py:32: torch-compute: uses torch.relu" in r["reasons"][0], r["reasons"]
    assert "ran in trial c0t0" in r["reasons"][0]
    assert any(x.startswith("device_fallback.py:35: torch-compute (warning)") for x in r["reasons"]), r["reasons"]
    assert [v["line"] for v in r["checks"]["static"]["violations"]] == [32]
    assert [w["line"] for w in r["checks"]["static"]["warnings"]] == [35]


@pytest.mark.parametrize("name, line", [("switch_after_trials", 58), ("switch_on_global_flag", 66)])
def test_a_switch_to_pytorch_after_the_trials_is_caught_in_the_timed_calls(triton_server, name, line):
    """(c) Triton for the first nine calls (the correctness trials), PyTorch
    after that (a counter on the module, or a module-level flag): every trial
    passes, the timed calls and the profiled calls run the PyTorch line, so
    it is cheating, and the verdict says where it ran."""
    r = run(triton_server, kernel(name))
    assert r["checks"]["correctness"]["trials_run"] == 9  # the switch comes right after the trials
    assert r["status"] == "cheating" and r["kind"] == "static_violation", r
    assert r["checks"]["static"]["coverage"]["otherwise"] == {"status": "correct", "kind": "ok"}
    ran = lines_of(r)[(name + ".py", line)]
    assert ran["ran"] is True and ran["where"] == "the timed calls", ran
    assert ran["ran_in"] == {"candidate": "the timed calls", "profiling": "the profiled calls"}, ran
    assert f"{name}.py:{line}: torch-compute: uses torch.relu" in r["reasons"][0]
    assert "this line ran in the timed calls" in r["reasons"][0]
    assert lines_of(r)[(name + ".py", 32)]["ran"] is False


def test_the_timed_process_alone_catches_the_switch(triton_server):
    """(c) Without the profiling process, the timed calls' own report (written
    after the warm-up, timed and wall-clock calls) catches it."""
    r = run(triton_server, kernel("switch_after_trials"), profile=False)
    assert r["status"] == "cheating" and r["kind"] == "static_violation", r
    line = lines_of(r)[("switch_after_trials.py", 58)]
    assert line["ran_in"] == {"candidate": "the timed calls"}, line
    assert list(r["checks"]["static"]["coverage"]["processes"]) == ["candidate"]


def test_without_timing_the_switch_never_runs(triton_server):
    """No timed calls, no switch: both PyTorch lines are warnings."""
    r = run(triton_server, kernel("switch_after_trials"), perf=False)
    assert r["status"] == "correct", r
    assert [w["line"] for w in r["checks"]["static"]["warnings"]] == [32, 58]
    assert list(r["checks"]["static"]["coverage"]["processes"]) == ["candidate"]


@pytest.mark.parametrize("old, new, status, kind", [
    ("    y = tl.maximum(x * w + b, 0.0)\n", "    y = tl.maximum(x * w - b, 0.0)\n", "incorrect", "mismatch"),
    ("    assert x.dtype == torch.float32", "    assert x.dtype == torch.float16", "runtime_error", "runtime_error"),
])
def test_a_failing_kernel_with_a_fallback_that_never_ran_keeps_its_own_verdict(triton_server, tmp_path, old, new,
                                                                                status, kind):
    """Killed after its first wrong output, or failed with an exception: its
    report is complete (the last output event; error.json), so the fallback
    is a warning beside the failure the LLM has to fix."""
    k = tmp_path / "failing.py"
    k.write_text(pathlib.Path(kernel("fallback_never_runs")).read_text().replace(old, new))
    r = run(triton_server, str(k))
    assert (r["status"], r["kind"]) == (status, kind), r
    assert r["reasons"][-1].startswith("failing.py:32: torch-compute (warning)"), r["reasons"]
    assert r["checks"]["static"]["coverage"]["processes"]["candidate"]["complete"] is True


def test_a_process_that_ends_before_it_reports_leaves_its_lines_unknown_and_gets_no_verdict(triton_server):
    """(d) The candidate process never reports after it was let go for its
    timed calls (it outlives its deadline, its outputs all correct): whether
    the fallback ran there is unknown, which would count as ran; but the timed
    pass that overran is the harness's (issue 38), so there is no verdict at
    all: never a score, never a charge."""
    r = run(triton_server, kernel("hang_when_timed"), timeout_s=4, profile=False)
    assert r["status"] == "no_verdict" and r["kind"] == "pass_overrun", r


def test_a_process_that_hangs_in_a_trial_before_it_reports_leaves_its_lines_unknown_which_is_cheating(
        triton_server, tmp_path):
    """(d) Where the candidate itself stalls before it reports (in its first
    correctness trial: its own failure, not a pass of the harness), unknown
    counts as ran: cheating."""
    k = tmp_path / "stalls.py"
    src = pathlib.Path(kernel("fallback_never_runs")).read_text()
    k.write_text(src.replace("    y = tl.maximum(x * w + b, 0.0)\n",
                             "    y = tl.maximum(x * w + b, 0.0)\n    while True:\n        pass\n", 1))
    r = run(triton_server, str(k), timeout_s=4, profile=False)
    assert r["status"] == "cheating" and r["kind"] == "static_violation", r
    assert "whether this line ran is unknown" in r["reasons"][0] and "counts as ran" in r["reasons"][0], r["reasons"]
    assert r["checks"]["static"]["coverage"]["otherwise"] == {"status": "timeout", "kind": "hang"}


def test_another_rule_beside_pytorch_compute_is_cheating_without_running(triton_server, tmp_path):
    """Only PyTorch compute waits for coverage: a thread (or any other rule)
    is a violation whether or not its line runs, and nothing is run."""
    src = pathlib.Path(kernel("fallback_never_runs")).read_text()
    k = tmp_path / "with_thread.py"
    k.write_text(src.replace("import math\n", "import math\nimport threading\n"))
    r = run(triton_server, str(k))
    assert r["status"] == "cheating" and r["kind"] == "static_violation", r
    assert {v["rule"] for v in r["checks"]["static"]["violations"]} == {"threads", "torch-compute"}
    assert "coverage" not in r["checks"]["static"] and "correctness" not in r["checks"], r["checks"]


@pytest.mark.parametrize("reach, rule", [
    ("import mkevolve_worker.coverage as collector", "harness-import"),
    ("import os\ncollector = os.sys.modules['mkevolve_worker.coverage']", "dynamic-code"),
    ("import sys\ncollector = sys.meta_path[0].collector", "dynamic-code"),
])
def test_a_candidate_that_reaches_for_the_collector_is_cheating_before_it_runs(triton_server, tmp_path, reach, rule):
    """Forging "never ran" takes the collector, which only code the static
    check rejects can reach: the candidate is never run."""
    src = pathlib.Path(kernel("fallback_always_runs")).read_text()
    src = src.replace("import math\n", "import math\n" + reach + "\n")
    src = src.replace("        return scale_shift_relu(x, None, self.bias, init_scale=1.0)\n",
                      "        out = scale_shift_relu(x, None, self.bias, init_scale=1.0)\n"
                      "        collector.ran.clear()\n"
                      "        return out\n")
    k = tmp_path / "forge.py"
    k.write_text(src)
    r = run(triton_server, str(k))
    assert r["status"] == "cheating" and r["kind"] == "static_violation", r
    assert rule in {v["rule"] for v in r["checks"]["static"]["violations"]}, r["checks"]["static"]
    assert "correctness" not in r["checks"], r["checks"]


def test_without_the_static_layer_nothing_changes(triton_server):
    """Test mode without test_static: the layer is not enforced, every finding
    stays in checks.static.violations, and no line is watched."""
    r = run(triton_server, kernel("fallback_always_runs"), test_static=False)
    assert r["status"] == "incorrect", r
    st = r["checks"]["static"]
    assert st["enforced"] is False and [v["line"] for v in st["violations"]] == [32]
    assert "coverage" not in st and "warnings" not in st


# -- a composed package -------------------------------------------------------

TOP = '''import torch.nn as nn

from .subkernel_implementations.scale_shift_relu import ModelNew as ScaleShiftRelu


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.ssr = ScaleShiftRelu(features)

    def forward(self, x):
        return self.ssr(x)
'''


def _package(root: pathlib.Path, sub: str) -> str:
    pkg = root / "solution"
    (pkg / "subkernel_implementations").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "subkernel_implementations" / "__init__.py").write_text("")
    (pkg / "decomposed_solution.py").write_text(TOP)
    shutil.copy(kernel(sub), pkg / "subkernel_implementations" / "scale_shift_relu.py")
    return str(pkg / "decomposed_solution.py")


def test_a_subkernels_fallback_that_never_runs_is_a_warning(triton_server, tmp_path):
    """The flagged line is in subkernel_implementations/, imported relatively
    by the package's top level: it is watched there too."""
    r = run(triton_server, _package(tmp_path, "fallback_never_runs"))
    assert r["status"] == "correct", r
    assert [(os.path.basename(w["file"]), w["line"]) for w in r["checks"]["static"]["warnings"]] == \
        [("scale_shift_relu.py", 32)]
    assert r["reasons"][0].startswith("scale_shift_relu.py:32: torch-compute (warning)"), r["reasons"]


def test_a_subkernels_fallback_that_runs_is_cheating(triton_server, tmp_path):
    r = run(triton_server, _package(tmp_path, "device_fallback"))
    assert r["status"] == "cheating" and r["kind"] == "static_violation", r
    assert "scale_shift_relu.py:32: torch-compute: " in r["reasons"][0] and "ran in trial c0t0" in r["reasons"][0]


# -- the server's account (Tracker) ------------------------------------------

def _tracker(n: int = 2) -> coverage.Tracker:
    return coverage.Tracker([["/k.py", 10 + i] for i in range(n)])


def _rep(ran=(), unknown=(), ok=True, **kw):
    return {"mechanism": "sys.monitoring", "ok": ok, "ran": list(ran), "unknown": list(unknown), **kw}


def test_unknown_coverage_counts_as_ran():
    """(d) Each way a required process's coverage can be unknown: no report,
    no report since its last work, a malformed report, a failed collector, a
    file never loaded through the collector."""
    t = _tracker()
    t.given("candidate", required=True)
    assert [j["ran"] for j in t.judge()] == [None, None]  # never reported
    t.reported("candidate", _rep(), "trial c0t0")
    assert [j["ran"] for j in t.judge()] == [False, False]
    t.given("candidate")  # sent the next trial: the last report no longer covers everything
    assert [j["ran"] for j in t.judge()] == [None, None]
    assert "since it was last given work" in t.judge()[0]["why"]
    t.reported("candidate", _rep(ran=[1]), "trial c0t1")
    assert [j["ran"] for j in t.judge()] == [False, True]
    for bad in (None, {}, _rep(ran=[2]), _rep(ran=[True]), _rep(ran="0"), {"ran": [], "unknown": None}):
        u = _tracker()
        u.given("candidate", required=True)
        u.reported("candidate", bad, "trial c0t0")
        assert [j["ran"] for j in u.judge()] == [None, None], bad
        assert "malformed" in u.judge()[0]["why"]
    u = _tracker()
    u.given("candidate", required=True)
    u.reported("candidate", _rep(ok=False, error="no free sys.monitoring tool id"), "trial c0t0")
    assert [j["ran"] for j in u.judge()] == [None, None] and "tool id" in u.judge()[0]["why"]
    u = _tracker()
    u.given("candidate", required=True)
    u.reported("candidate", _rep(unknown=[0]), "trial c0t0")
    assert [j["ran"] for j in u.judge()] == [None, False] and "not loaded" in u.judge()[0]["why"]


def test_a_line_reported_the_moment_it_ran_stays_ran():
    """The event a process sends when a flagged line first runs is kept,
    whatever a later report of the same process says."""
    t = _tracker()
    t.given("candidate", required=True)
    t.ran_now("candidate", 1, "the timed calls")
    t.reported("candidate", _rep(), "the timed calls")
    assert [j["ran"] for j in t.judge()] == [False, True]
    for bad in (-1, 2, True, "1", None):
        t.ran_now("candidate", bad, "the timed calls")
    assert [j["ran"] for j in t.judge()] == [False, True]


def test_the_profiling_process_counts_once_it_gets_the_inputs():
    """Before it is sent the timed calls' inputs the profiling process only
    imported the candidate (as the candidate process did): it need not
    report. After, it must, and whatever it reports ran counts anywhere."""
    t = _tracker()
    t.given("candidate", required=True)
    t.given("profiling")
    t.reported("candidate", _rep(), "the correctness trials")
    assert [j["ran"] for j in t.judge()] == [False, False]
    t.given("profiling", required=True)
    assert [j["ran"] for j in t.judge()] == [None, None]
    assert "profiling process ended" in t.judge()[0]["why"]
    t.reported("profiling", _rep(ran=[0]), "the profiled calls")
    j = t.judge()
    assert j[0] == {"ran": True, "where": "the profiled calls (profiling process)",
                    "ran_in": {"profiling": "the profiled calls"}} and j[1]["ran"] is False, j
    assert t.record()["profiling"] == {"required": True, "reports": 1, "complete": True,
                                       "mechanism": "sys.monitoring"}


def test_findings_split_by_rule():
    vs = [{"file": "k.py", "line": 3, "rule": "torch-compute", "message": "m"},
          {"file": "k.py", "line": 3, "rule": "foreign-library", "message": "m"},
          {"file": "k.py", "line": 9, "rule": "side-stream", "message": "m"},
          {"file": "k.py", "line": 7, "rule": "torch-compute", "message": "n"}]
    hard, cond = coverage.split(vs)
    assert [v["rule"] for v in hard] == ["foreign-library", "side-stream"]
    assert coverage.targets_of(cond) == [[os.path.abspath("k.py"), 3], [os.path.abspath("k.py"), 7]]


# -- the collector, in this interpreter and in any Python 3.12+ here ----------

COLLECTOR_SCRIPT = r'''
import json, os, sys
sys.path.insert(0, sys.argv[1])
from mkevolve_worker import coverage, loader
root = sys.argv[2]
main = os.path.join(root, "cand.py")
helper = os.path.join(root, "helper.py")
lonely = os.path.join(root, "lonely.py")
targets = [[main, 3], [main, 7], [main, 9], [main, 12], [main, 15], [main, 18], [helper, 2], [helper, 4],
           [lonely, 1], [main, 99]]
first = []
coverage.start({"targets": targets}, first.append)
mod = loader.import_file(main, "cand")
m = mod.M()
for i in range(1000):
    m.forward(i)
rep = coverage.report()
rep["first"] = first
print(json.dumps(rep))
'''

CAND = '''import helper
LEVEL = 2
SCALE = [LEVEL] * 3  # line 3: module level, runs at import


class M:
    def forward(self, x, w=None):
        if w is None and x < 0:
            w = [x] * 2  # line 9: never
        y = helper.double(x)
        if False:
            y = y * 3  # line 12: no instruction at all
        f = lambda v: v + 1
        g = [y for _ in range(0)]
        return f(y) + sum(v * 2 for v in g)  # line 15

    def unused(self):
        return 1  # line 18: never
'''

HELPER = '''def double(x):
    return x * 2  # line 2


def triple(x):
    return x * 3
'''


def _collector_pythons() -> list[str]:
    """This interpreter, and any Python 3.12+ on the machine (sys.monitoring)."""
    out = [sys.executable]
    for name in ("python3.12", "python3.13", "python3.14"):
        p = shutil.which(name)
        cands = [p] if p else []
        cands += sorted(str(x) for x in pathlib.Path(os.path.expanduser("~/.pyenv/versions")).glob(f"*/bin/{name}"))
        for c in cands:
            try:
                ok = subprocess.run([c, "-c", "import sys; sys.monitoring"], capture_output=True, timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                continue
            if ok.returncode == 0:
                out.append(c)
                break
    return out


@pytest.mark.parametrize("python", _collector_pythons())
def test_the_collector_sees_exactly_the_lines_that_ran(tmp_path, python):
    (tmp_path / "cand.py").write_text(CAND)
    (tmp_path / "helper.py").write_text(HELPER)
    (tmp_path / "lonely.py").write_text("X = 1\n")
    out = subprocess.run([python, "-c", COLLECTOR_SCRIPT, WORKER_DIR, str(tmp_path)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    import json
    rep = json.loads(out.stdout.strip().splitlines()[-1])
    monitoring = subprocess.run([python, "-c", "import sys; print(hasattr(sys, 'monitoring'))"],
                                capture_output=True, text=True).stdout.strip() == "True"
    assert rep["mechanism"] == ("sys.monitoring" if monitoring else "sys.settrace"), rep
    assert rep["ok"] is True, rep
    # Ran: line 3 at import, line 7 (the `def`, run by the class body), line 15 and helper.py's line 2
    # (a sibling imported by name: through the finder). Never: lines 9 and 18, line 12 (`if False:`
    # leaves no instruction), helper.py's blank line 4 and line 99 (past the end).
    assert rep["ran"] == [0, 1, 4, 6], rep
    # Each told the moment it first ran, once: import (3, then helper's def), class body (7), forward.
    assert rep["first"] == [0, 1, 6, 4], rep
    # lonely.py is never imported: its line is unknown, not "never ran".
    assert rep["unknown"] == [8], rep


def test_the_collector_leaves_the_loader_alone_without_targets(tmp_path):
    assert coverage.start(None) is None and coverage.start({"targets": []}) is None
    assert coverage.report() is None
    assert loader._loader("x", str(tmp_path / "k.py")) is None
    (tmp_path / "k.py").write_text(textwrap.dedent("""
        class ModelNew:
            pass
    """))
    assert loader.import_file(str(tmp_path / "k.py"), "cand").ModelNew
