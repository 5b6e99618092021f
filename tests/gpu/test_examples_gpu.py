"""GPU checks of the hand-written example kernels (examples/kernels/manifest.json).

Standalone: needs torch with CUDA and Triton, not the MKEvolve worker. Run it on a
GPU machine from the repository root:

    PYTHONUNBUFFERED=1 python3 -m pytest -q tests/gpu/test_examples_gpu.py

What it checks:
- every kernel marked correct matches its problem's Model (seeded identically,
  TF32 off, 3 trials of fresh inputs, every get_input_configs entry) within
  atol=rtol=1e-4 and within 1e-3 relative L2 error, and launched at least one
  Triton kernel defined in its own file (and, where the profiler sees kernels,
  no CUDA kernel from anywhere else);
- every kernel marked incorrect does not match, for the reason the manifest
  gives (mismatch, wrong_shape, nan); the two that fool naive checks are shown
  to fool them (identity on torch.rand inputs, zeros under a plain allclose);
- the crashing, hanging and erroring kernels fail the way the manifest says
  (probe_kind where a static check would stop them before they run).
  They run in forked children of a separate process (this file run with
  --probe), so an illegal address or a hang cannot take pytest down;
- the cheating kernels compute the right numbers in such a child: only the
  verifier's static and runtime checks can catch them.

If $OUT (or $MK_GPU_RESULTS_DIR) is set, results go to examples_gpu.json and a
table to examples_gpu_summary.txt there.
"""
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "examples" / "kernels" / "manifest.json"
ATOL = RTOL = 1e-4
REL_L2_MAX = 1e-3
MODEL_SEED = 42
TRIALS = 3
STATUSES = {"correct", "incorrect", "cheating", "compile_error", "runtime_error", "timeout", "crashed"}
FAILING = {"compile_error", "runtime_error", "timeout", "crashed"}
ALLOWED_FOREIGN = ("memcpy", "memset", "fill", "copy")


def load_manifest():
    with open(MANIFEST) as f:
        return json.load(f)["kernels"]


def entry_id(entry):
    return Path(entry["kernel"]).stem


def load_module(path, name):
    """Imports a file as a real module (Triton's jit reads the source)."""
    spec = importlib.util.spec_from_file_location(name, str(ROOT / path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def input_configs(problem):
    if hasattr(problem, "get_input_configs"):
        return list(problem.get_input_configs())
    return [{"get_init_inputs": problem.get_init_inputs, "get_inputs": problem.get_inputs}]


def disable_tf32(torch):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def to_cuda(torch, values):
    return [v.cuda() if isinstance(v, torch.Tensor) else v for v in values]


def clones(torch, values):
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def build_pair(torch, problem, candidate, init):
    torch.manual_seed(MODEL_SEED)
    ref = problem.Model(*init).cuda().eval()
    torch.manual_seed(MODEL_SEED)
    new = candidate.ModelNew(*init).cuda().eval()
    return ref, new


def compare(torch, got, expected):
    """The verdict on one output: ok, kind (mismatch, wrong_shape, ...) and errors."""
    out = {"ok": False, "kind": None, "max_abs_err": None, "rel_l2_err": None, "plain_allclose": False}
    if not isinstance(got, torch.Tensor):
        out["kind"] = "not_a_tensor"
        return out
    if tuple(got.shape) != tuple(expected.shape):
        out["kind"] = "wrong_shape"
        out["shapes"] = [list(got.shape), list(expected.shape)]
        return out
    if got.dtype != expected.dtype:
        out["kind"] = "wrong_dtype"
        return out
    if not bool(torch.isfinite(got).all()):
        out["kind"] = "nan"
        return out
    diff = got.double() - expected.double()
    out["max_abs_err"] = float(diff.abs().max())
    out["rel_l2_err"] = float(diff.norm() / expected.double().norm().clamp_min(1e-30))
    out["plain_allclose"] = bool(torch.allclose(got, expected, atol=ATOL, rtol=RTOL))
    out["ok"] = out["plain_allclose"] and out["rel_l2_err"] <= REL_L2_MAX
    out["kind"] = None if out["ok"] else "mismatch"
    return out


# ---------------------------------------------------------------------------
# Probe mode: a pre-imported parent forks one child per failing/cheating kernel.
# ---------------------------------------------------------------------------

def classify_exception(exc):
    """The worker's own classifier (it reads the CUDA error's first line, not the
    TORCH_USE_CUDA_DSA hint that mentions device-side assertions)."""
    sys.path.insert(0, str(ROOT / "worker"))
    from mkevolve_worker import errors
    return errors.classify_exception(exc)


def probe_child(entry, result_path):
    import torch
    result = {"outcome": "error"}
    try:
        disable_tf32(torch)
        problem = load_module(entry["problem"], "mk_probe_problem")
        candidate = load_module(entry["kernel"], "mk_probe_kernel")
        cfg = input_configs(problem)[0]
        ref, new = build_pair(torch, problem, candidate, cfg["get_init_inputs"]())
        matches = []
        for trial in range(2):
            torch.manual_seed(1000 + trial)
            inputs = to_cuda(torch, cfg["get_inputs"]())
            with torch.no_grad():
                expected = ref(*clones(torch, inputs))
                got = new(*clones(torch, inputs))
            torch.cuda.synchronize()
            matches.append(compare(torch, got, expected)["ok"])
        result = {"outcome": "ran", "matches": matches}
    except BaseException as exc:  # the point is to see every failure
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        result = {"outcome": "error", "kind": classify_exception(exc),
                  "message": f"{type(exc).__name__}: {first}"[:300]}
    tmp = result_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, result_path)


def probe_main(out_path, parallel=4):
    import torch  # noqa: F401  (imported once, before any fork; CUDA stays uninitialized here)
    import triton  # noqa: F401
    entries = [e for e in load_manifest() if e["status"] in FAILING or e["status"] == "cheating"]
    entries.sort(key=lambda e: -float(e.get("timeout_s", 0)))  # long deadlines first
    workdir = tempfile.mkdtemp(prefix="mk_probe_")
    pending = list(entries)
    running = {}
    results = {}
    while pending or running:
        while pending and len(running) < parallel:
            entry = pending.pop(0)
            path = os.path.join(workdir, entry_id(entry) + ".json")
            pid = os.fork()
            if pid == 0:
                try:
                    os.setpgid(0, 0)
                    probe_child(entry, path)
                finally:
                    os._exit(0)
            running[pid] = (entry, path, time.monotonic())
        time.sleep(0.05)
        for pid, (entry, path, start) in list(running.items()):
            deadline = float(entry.get("timeout_s", 120))
            done, status = os.waitpid(pid, os.WNOHANG)
            elapsed = time.monotonic() - start
            if done == 0:
                if elapsed > deadline:
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    os.waitpid(pid, 0)
                    results[entry_id(entry)] = {"outcome": "timeout", "kind": "hang", "seconds": round(elapsed, 2)}
                    del running[pid]
                continue
            del running[pid]
            if os.path.exists(path):
                with open(path) as f:
                    res = json.load(f)
            elif os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
                res = {"outcome": "signal", "signal": sig,
                       "kind": "segfault" if sig == signal.SIGSEGV else f"signal_{sig}"}
            else:
                res = {"outcome": "no_result", "kind": "exit_without_result",
                       "exit_code": os.WEXITSTATUS(status)}
            res["seconds"] = round(elapsed, 2)
            results[entry_id(entry)] = res
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--probe":
        probe_main(sys.argv[2])
        sys.exit(0)
    sys.exit("usage: test_examples_gpu.py --probe OUT.json  (or run it under pytest)")


# ---------------------------------------------------------------------------
# pytest mode
# ---------------------------------------------------------------------------

import pytest  # noqa: E402

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

ENTRIES = load_manifest()
RESULTS = {}


def _results_dir():
    d = os.environ.get("MK_GPU_RESULTS_DIR") or os.environ.get("OUT")
    return Path(d) if d else None


@pytest.fixture(scope="session", autouse=True)
def record_results():
    disable_tf32(torch)
    yield
    d = _results_dir()
    if d is None:
        return
    d.mkdir(parents=True, exist_ok=True)
    props = torch.cuda.get_device_properties(0)
    doc = {"gpu": props.name, "torch": torch.__version__, "triton": triton.__version__,
           "tf32": False, "date": time.strftime("%Y-%m-%d"), "results": RESULTS}
    (d / "examples_gpu.json").write_text(json.dumps(doc, indent=1))
    lines = [f"GPU {props.name}  torch {torch.__version__}  triton {triton.__version__}  TF32 off",
             f"{'kernel':44} {'verdict':28} {'max_abs_err':>11} {'rel_l2':>9} {'eager_ms':>9} {'new_ms':>9}"]
    for name in sorted(RESULTS):
        r = RESULTS[name]
        fmt = lambda v, p: "-" if v is None else f"{v:.{p}}"
        lines.append(f"{name:44} {r.get('verdict', '?'):28} {fmt(r.get('max_abs_err'), '2e'):>11} "
                     f"{fmt(r.get('rel_l2_err'), '1e'):>9} {fmt(r.get('eager_ms'), '3f'):>9} "
                     f"{fmt(r.get('new_ms'), '3f'):>9}")
    (d / "examples_gpu_summary.txt").write_text("\n".join(lines) + "\n")


class LaunchCounter:
    """Counts launches of @triton.jit functions, by the module that defined them."""

    def __init__(self):
        self.by_module = {}

    def __enter__(self):
        from triton.runtime.jit import JITFunction
        self._cls = JITFunction
        self._orig = JITFunction.run
        counter = self

        def counting_run(jit_self, *args, **kwargs):
            module = getattr(getattr(jit_self, "fn", None), "__module__", "?")
            counter.by_module[module] = counter.by_module.get(module, 0) + 1
            return counter._orig(jit_self, *args, **kwargs)

        JITFunction.run = counting_run
        return self

    def __exit__(self, *exc):
        self._cls.run = self._orig


def own_kernel_names(candidate):
    from triton.runtime.jit import JITFunction
    return sorted(n for n, v in vars(candidate).items() if isinstance(v, JITFunction))


def profile_kernels(fn):
    """Names of the CUDA kernels one call launches; None if the profiler sees none."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        return names or None
    except Exception as exc:  # the profiler is a second opinion, not the gate
        return ["<profiler failed: %s>" % exc]


def median_ms(fn, warmup=5, reps=20):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def load_pair(entry):
    stem = entry_id(entry)
    problem = load_module(entry["problem"], "mk_problem_" + stem)
    candidate = load_module(entry["kernel"], "mk_kernel_" + stem)
    return problem, candidate


def test_manifest_is_consistent():
    seen = set()
    for entry in ENTRIES:
        assert entry["status"] in STATUSES, entry
        assert (ROOT / entry["kernel"]).is_file(), entry["kernel"]
        assert (ROOT / entry["problem"]).is_file(), entry["problem"]
        assert entry_id(entry) not in seen, "duplicate " + entry_id(entry)
        seen.add(entry_id(entry))
    on_disk = {p.stem for p in (ROOT / "examples" / "kernels").glob("*.py")}
    assert on_disk == seen, "kernels missing from the manifest or files missing: %s" % (on_disk ^ seen)
    problems = {p.stem for p in (ROOT / "examples" / "problems").glob("*.py")}
    correct = {Path(e["problem"]).stem for e in ENTRIES if e["status"] == "correct"}
    assert problems == correct, "problems without a correct kernel: %s" % (problems ^ correct)


CORRECT = [e for e in ENTRIES if e["status"] == "correct"]


@pytest.mark.parametrize("entry", CORRECT, ids=entry_id)
def test_correct_kernel_matches_reference(entry):
    problem, candidate = load_pair(entry)
    own = own_kernel_names(candidate)
    assert own, "no @triton.jit function in " + entry["kernel"]
    record = {"verdict": "correct?", "max_abs_err": 0.0, "rel_l2_err": 0.0, "launches": 0}
    RESULTS[entry_id(entry)] = record
    for cfg_index, cfg in enumerate(input_configs(problem)):
        init = cfg["get_init_inputs"]()
        ref, new = build_pair(torch, problem, candidate, init)
        for trial in range(TRIALS):
            torch.manual_seed(1000 + trial)
            inputs = to_cuda(torch, cfg["get_inputs"]())
            with torch.no_grad(), LaunchCounter() as counter:
                expected = ref(*clones(torch, inputs))
                got = new(*clones(torch, inputs))
            torch.cuda.synchronize()
            verdict = compare(torch, got, expected)
            where = f"{entry['kernel']} config {cfg_index} trial {trial}"
            assert verdict["ok"], f"{where}: {verdict}"
            launches = counter.by_module.get(candidate.__name__, 0)
            assert launches > 0, f"{where}: no Triton kernel from the candidate ran"
            record["launches"] = launches
            record["max_abs_err"] = max(record["max_abs_err"], verdict["max_abs_err"])
            record["rel_l2_err"] = max(record["rel_l2_err"], verdict["rel_l2_err"])
        with torch.no_grad():
            names = profile_kernels(lambda: new(*inputs))
        record.setdefault("cuda_kernels", sorted(set(names or [])))
        if names and not names[0].startswith("<profiler failed"):
            mine = [n for n in names if any(k in n for k in own)]
            foreign = [n for n in names if n not in mine
                       and not any(a in n.lower() for a in ALLOWED_FOREIGN)]
            assert mine, f"{entry['kernel']}: the profiler saw none of {own} among {names}"
            assert not foreign, f"{entry['kernel']}: non-Triton CUDA kernels ran: {foreign}"
        if cfg_index == 0:
            with torch.no_grad():
                record["eager_ms"] = median_ms(lambda: ref(*inputs))
                record["new_ms"] = median_ms(lambda: new(*inputs))
        ref = new = None
        torch.cuda.empty_cache()
    record["verdict"] = "correct"


WRONG = [e for e in ENTRIES if e["status"] == "incorrect" and e.get("kind")]


@pytest.mark.parametrize("entry", WRONG, ids=entry_id)
def test_wrong_kernel_is_rejected(entry):
    problem, candidate = load_pair(entry)
    cfg = input_configs(problem)[0]
    ref, new = build_pair(torch, problem, candidate, cfg["get_init_inputs"]())
    torch.manual_seed(1000)
    inputs = to_cuda(torch, cfg["get_inputs"]())
    with torch.no_grad():
        expected = ref(*clones(torch, inputs))
        got = new(*clones(torch, inputs))
    torch.cuda.synchronize()
    verdict = compare(torch, got, expected)
    record = {"verdict": "problem_inputs:" + ("pass" if verdict["ok"] else str(verdict["kind"])),
              "max_abs_err": verdict["max_abs_err"], "rel_l2_err": verdict["rel_l2_err"]}
    RESULTS[entry_id(entry)] = record
    fools = entry.get("fools")
    if fools == "problem_inputs":
        # Matches on the problem's nonnegative inputs, and only there.
        assert verdict["ok"], f"expected the gaming kernel to pass on get_inputs(): {verdict}"
        signed = [torch.randn_like(t) if isinstance(t, torch.Tensor) else t for t in inputs]
        with torch.no_grad():
            verdict = compare(torch, new(*clones(torch, signed)), ref(*clones(torch, signed)))
        torch.cuda.synchronize()
        record["verdict"] += ", signed:" + str(verdict["kind"])
    elif fools == "plain_allclose":
        assert verdict["plain_allclose"], f"expected a plain allclose to accept it: {verdict}"
    assert not verdict["ok"], f"{entry['kernel']} matched the reference: {verdict}"
    assert verdict["kind"] == entry["kind"], f"{entry['kernel']}: {verdict}"


def test_stale_empty_like_is_recorded():
    """The Sakana-style kernel writes nothing; whether it 'matches' in one process
    depends on the allocator reusing the reference's freed block. Record, don't assert."""
    entry = next(e for e in ENTRIES if entry_id(e) == "01_relu__empty_like_stale")
    problem, candidate = load_pair(entry)
    ref, new = build_pair(torch, problem, candidate, [])
    torch.manual_seed(1000)
    inputs = to_cuda(torch, problem.get_inputs())
    with torch.no_grad():
        expected = ref(*clones(torch, inputs)).clone()
        # Reference first, its output freed, then the candidate: the exploit's setting.
        ref(*clones(torch, inputs))
        got = new(*clones(torch, inputs))
    torch.cuda.synchronize()
    verdict = compare(torch, got, expected)
    RESULTS[entry_id(entry)] = {"verdict": "same_process_after_ref:" + ("pass" if verdict["ok"] else str(verdict["kind"])),
                                "max_abs_err": verdict["max_abs_err"], "rel_l2_err": verdict["rel_l2_err"]}


@pytest.fixture(scope="module")
def probe_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("probe") / "probe.json"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--probe", str(out)],
                          cwd=str(ROOT), env=env, timeout=600, capture_output=True, text=True)
    assert proc.returncode == 0, f"probe process failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(out.read_text())


PROBED = [e for e in ENTRIES if e["status"] in FAILING or e["status"] == "cheating"]


@pytest.mark.parametrize("entry", PROBED, ids=entry_id)
def test_failure_mode_in_forked_child(entry, probe_results):
    res = probe_results.get(entry_id(entry))
    assert res is not None, "probe produced no result for " + entry_id(entry)
    RESULTS[entry_id(entry)] = {"verdict": f"{res['outcome']}:{res.get('kind', res.get('matches'))}",
                                "message": res.get("message"), "seconds": res.get("seconds")}
    expected = entry.get("probe_kind") or entry["kind"]
    if entry["status"] == "cheating" and not entry.get("probe_kind"):
        # The numbers are right on the first call: only non-numeric checks catch it.
        assert res["outcome"] == "ran", res
        assert res["matches"][0], res
    else:
        assert res.get("kind") == expected, f"{entry['kernel']}: expected {expected}, got {res}"
