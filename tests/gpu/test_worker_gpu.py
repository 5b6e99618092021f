"""GPU smoke tests of the worker on real Triton kernels (run on the device machine).

    PYTHONUNBUFFERED=1 python3 -m pytest -q tests/gpu/test_worker_gpu.py

Every entry of examples/kernels/manifest.json is evaluated through one
`serve --test-mode` server with the production options (static checks on,
profile, timing, wall-clock cross-check) and must get the verdict the
manifest names. The cheating kernels are then evaluated again with the static
layer switched off (a test-mode-only option) so that each runtime layer is
shown to catch them on its own. Skipped without a GPU. Results are printed as
a table and, when $OUT is set, written to $OUT/worker_gpu_results.json.
"""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "python", "fixtures"))
sys.path.insert(0, os.path.join(REPO, "worker"))

from worker_client import WorkerClient  # noqa: E402

MANIFEST = os.path.join(REPO, "examples", "kernels", "manifest.json")
RESULTS: list[dict] = []


def _entries():
    if not os.path.isfile(MANIFEST):
        return []
    with open(MANIFEST) as f:
        return json.load(f)["kernels"]


def _matches(entry_like: dict, r: dict) -> bool:
    if r.get("status") != entry_like.get("status"):
        return False
    return entry_like.get("kind") in (None, r.get("kind"))


def _acceptable(entry: dict, r: dict) -> bool:
    return _matches(entry, r) or any(_matches(a, r) for a in entry.get("also_accept") or [])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    client = WorkerClient(["--test-mode"], cwd=str(tmp_path_factory.mktemp("gpu-server")))
    if not client.hello.get("cuda"):
        client.close()
        pytest.skip("no CUDA GPU visible to the worker")
    yield client
    _report(client)
    client.close()


def _eval(server, label: str, problem: str, kernel: str, **options) -> dict:
    opts = {"perf": True}
    opts.update(options)
    t0 = time.monotonic()
    msg, _ = server.request("eval", timeout=opts.get("timeout_s", 300) * 3 + 120,
                            problem=os.path.join(REPO, problem), kernel=os.path.join(REPO, kernel), options=opts)
    wall = time.monotonic() - t0
    row = {"label": label, "kernel": os.path.basename(kernel), "type": msg["type"], "wall_s": round(wall, 2)}
    if msg["type"] == "result":
        rt = msg.get("runtime_ms") or {}
        row.update(status=msg["status"], kind=msg["kind"], median_ms=rt.get("median"),
                   max_abs_err=msg.get("max_abs_err"), message=msg["message"][:300],
                   wall_clock=msg.get("checks", {}).get("wall_clock"),
                   runtime=msg.get("checks", {}).get("runtime"), phases=msg.get("checks", {}).get("phases_s"),
                   elapsed_s=msg.get("elapsed_s"), network=msg.get("checks", {}).get(
                       "isolation", {}).get("network"), isolation=msg.get("checks", {}).get("isolation"))
    else:
        row.update(status="error", kind=None, message=msg["message"][:300])
    RESULTS.append(row)
    _append(row)
    print(f"\n{label:<10} {row['kernel']:<44} {row['status']:<13} {str(row.get('kind')):<22} "
          f"{'' if row.get('median_ms') is None else format(row['median_ms'], '.4g') + ' ms':<12} "
          f"{wall:6.1f}s  {row['message'][:160]}")
    return msg


def test_gpu_info(server):
    msg, _ = server.request("gpu_info")
    assert msg["type"] == "result" and msg["gpus"], msg
    g = msg["gpus"][0]
    assert g["sm_count"] > 0 and g["memory_bytes"] > 0 and len(g["capability"]) == 2
    print("\ngpu:", json.dumps(g))


@pytest.mark.parametrize("entry", _entries(), ids=lambda e: os.path.basename(e["kernel"]))
def test_manifest_verdicts(server, entry):
    timeout = float(entry.get("timeout_s") or 120)
    r = _eval(server, "manifest", entry["problem"], entry["kernel"], timeout_s=timeout)
    assert r["type"] == "result", r
    assert _acceptable(entry, r), (entry, {k: r.get(k) for k in ("status", "kind", "message", "checks")})


# Cheats that static analysis catches first; each must also be caught by a
# runtime layer when the static layer is off.
RUNTIME_ONLY = [
    ("03_linear_gelu__side_stream.py", "03_linear_gelu.py", {("cheating", "timing_mismatch")}),
    ("03_linear_gelu__timer_patch.py", "03_linear_gelu.py", {("cheating", "timing_mismatch")}),
    ("03_linear_gelu__torch_fallback.py", "03_linear_gelu.py", {("cheating", "foreign_kernel"),
                                                                ("cheating", "no_triton_launch")}),
    ("03_linear_gelu__getattr_alias.py", "03_linear_gelu.py", {("cheating", "foreign_kernel")}),
    # Honest for its first seven calls: the profiling process profiles the later ones too.
    ("03_linear_gelu__count_calls.py", "03_linear_gelu.py", {("cheating", "foreign_kernel")}),
    ("03_linear_gelu__output_cache.py", "03_linear_gelu.py", {("incorrect", "mismatch"),
                                                              ("cheating", "stale_output")}),
    ("01_relu__empty_like_stale.py", "01_relu.py", {("incorrect", "mismatch")}),
    ("01_relu__segfault.py", "01_relu.py", {("crashed", "segfault")}),
    ("01_relu__exit.py", "01_relu.py", {("crashed", "exit_without_result")}),
]


@pytest.mark.parametrize("kernel,problem,allowed", RUNTIME_ONLY, ids=[k for k, _, _ in RUNTIME_ONLY])
def test_runtime_layers_alone(server, kernel, problem, allowed):
    kpath = os.path.join("examples", "kernels", kernel)
    if not os.path.isfile(os.path.join(REPO, kpath)):
        pytest.skip(f"{kpath} not present")
    r = _eval(server, "no-static", os.path.join("examples", "problems", problem), kpath, static_check=False,
              timeout_s=120)
    assert r["type"] == "result", r
    assert (r["status"], r["kind"]) in allowed, {k: r.get(k) for k in ("status", "kind", "message", "checks")}


def test_server_still_serves_after_faults_and_timing_repeats(server):
    runs = [_eval(server, "repeat", "examples/problems/03_linear_gelu.py",
                  "examples/kernels/03_linear_gelu__tiled.py") for _ in range(2)]
    assert all(r["status"] == "correct" for r in runs), runs
    a, b = (r["runtime_ms"]["median"] for r in runs)
    print(f"\nrepeat medians: {a:.5g} ms, {b:.5g} ms (ratio {max(a, b) / min(a, b):.4f})")
    assert runs[0]["checks"]["wall_clock"]["ok"] and runs[0]["checks"]["runtime"]["own_launches"] >= 1
    # Back to back, each candidate ran in a process warmed before it arrived:
    # CUDA started and Triton's own kernel launched (spares.py).
    for r in runs:
        iso = r["checks"]["isolation"]
        assert iso["prestarted"] is True, iso
        assert iso["warm"]["cuda"] is True and iso["warm"]["triton"] is True, iso


def test_allow_pytorch_marks_uses_pytorch(server):
    r = _eval(server, "swap", "examples/problems/03_linear_gelu.py",
              "examples/kernels/03_linear_gelu__torch_fallback.py", allow_pytorch=True)
    assert r["type"] == "result", r
    # The static layer may still reject torch compute it cannot excuse; if it passes, it is marked.
    if r["status"] == "correct":
        assert r["uses_pytorch"] is True


def test_baselines(server):
    msg, _ = server.request("baseline", timeout=600, problem=os.path.join(REPO, "examples/problems/03_linear_gelu.py"),
                            options={"warmup": 10, "perf_trials": 100})
    assert msg["type"] == "result", msg
    print(f"\nbaseline 03_linear_gelu: eager {msg['eager']} compile {msg.get('compile')} "
          f"({msg.get('compile_error', '')}) gpu {msg.get('gpu')} torch {msg.get('torch')}")
    row = {"label": "baseline", "kernel": "03_linear_gelu", "eager": msg["eager"], "compile": msg.get("compile"),
           "gpu": msg.get("gpu"), "torch": msg.get("torch")}
    RESULTS.append(row)
    _append(row)
    assert msg["eager"]["median_ms"] > 0


def _append(row: dict) -> None:
    """Results survive even if the run is cut short."""
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "worker_gpu_results.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")


def _report(client) -> None:
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "worker_server_stderr.txt"), "w") as f:
            f.write(client.stderr())


def test_device_side_comparison_and_draws():
    """The reference compares on its GPU against a candidate output mapped on
    the host, and draws inputs on the GPU: the same verdicts as on the CPU."""
    import torch
    sys.path.insert(0, os.path.join(REPO, "worker"))
    from mkevolve_worker import correctness as C
    opts = C.normalize_options({})
    torch.manual_seed(0)
    e = torch.randn(3000, 7, device="cuda")
    assert C.compare_tree(e, e.cpu(), opts)["ok"]
    g = e.cpu().clone()
    g[1234, 3] += 1.0
    r = C.compare_tree(e, g, opts)
    assert r["kind"] == "mismatch" and "(1234, 3)" in r["message"], r
    g = e.cpu().clone()
    g[5, 5] = float("nan")
    assert C.compare_tree(e, g, opts)["kind"] == "nan"
    assert not C.compare_tree(e, torch.zeros_like(g), opts)["ok"]
    i = torch.arange(100, device="cuda")
    assert C.compare_tree(i, i.cpu(), opts)["ok"]
    j = i.cpu().clone()
    j[42] = 0
    r = C.compare_tree(i, j, opts)
    assert r["kind"] == "mismatch" and "(42,)" in r["message"], r
    cfg = {"get_inputs": lambda: [torch.rand(64, 64), torch.randint(0, 5, (8,))]}
    xs = C.generate_inputs(cfg, {"seed": 3, "alt": False}, "cuda")
    assert all(x.device.type == "cuda" for x in xs)
    ys = C.generate_inputs(cfg, {"seed": 3, "alt": True}, "cuda")
    assert ys[0].device.type == "cuda" and float(ys[0].min()) < 0 and torch.equal(ys[1], xs[1])
    assert C.same_values(xs[0], xs[0].cpu()) and not C.same_values(xs[0], ys[0].cpu())
    f = C.fingerprint(xs[0])
    assert f == C.fingerprint(xs[0].clone())
    xs[0][3, 3] += 1
    assert C.fingerprint(xs[0]) != f


def test_inputs_and_outputs_cross_by_cuda_ipc(server):
    """On the GPU the reference's inputs and the candidate's outputs cross as
    CUDA IPC references (no copy through the host), and the verdict is the
    one the manifest names."""
    r = _eval(server, "ipc", "examples/problems/01_relu.py", "examples/kernels/01_relu__triton.py")
    assert r["type"] == "result" and r["status"] == "correct", r
    h = r["checks"]["handover"]
    assert (h["inputs"], h["outputs"]) == ("device (CUDA IPC)", "device (CUDA IPC)"), r["checks"]


# ReLU over one 768 MiB input (12288 x 16384 float32): more than half of
# timing.POOL_BYTES, so its evaluation takes the large-input (in place) path.
RELU_768MIB = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
               "    def forward(self, x):\n        return torch.relu(x)\n\n\n"
               "def get_inputs():\n    return [torch.rand(12288, 16384)]\n\n\n"
               "def get_init_inputs():\n    return []\n")


def test_what_crossed_by_cuda_ipc_is_freed_trial_to_trial(server, tmp_path):
    """Each trial's inputs (the reference's) and output (the candidate's)
    cross by CUDA IPC; once the other side is done with them they are freed,
    also where the receiver has a /dev/shm of its own (the sandbox) and
    cannot tell torch so itself. Before tensorio.ipc_release every one of
    them stayed allocated: at KernelBench's 19_ReLU (6.4 GB in, 6.4 GB out)
    one evaluation reached 79.3 GB in the reference and 55.9 GB in the
    candidate by its 8th trial (H200, 2026-12-05). Here 768 MiB in and out,
    timed in place (timing.in_place), 8 trials: kept, that is at least
    8 x 768 MiB in each process; freed, each stays under 3 x (in + out)."""
    problem = tmp_path / "relu_768mib.py"
    problem.write_text(RELU_768MIB)
    r = _eval(server, "ipc-free", str(problem), "examples/kernels/01_relu__triton.py", perf=False)
    assert r["type"] == "result" and r["status"] == "correct", {k: r.get(k) for k in ("status", "kind", "message")}
    fp, h = r["checks"]["footprint"], r["checks"]["handover"]
    _append({"label": "ipc_free", "footprint": fp, "handover": h,
             "trials": r["checks"]["correctness"].get("trials_run")})
    i, o = fp["input_bytes"], fp["output_bytes"]
    assert i == o == 12288 * 16384 * 4, fp
    n = r["checks"]["correctness"]["trials_run"]
    assert n >= 6, r["checks"]["correctness"]
    assert (h["inputs"], h["outputs"]) == ("device (CUDA IPC)", "device (CUDA IPC)"), h
    rel = h.get("released") or {}
    # Every trial's copy went back but the last (the process ends with it).
    assert rel.get("reference", {}).get("unexpected") == 0 and \
        rel["reference"]["released"] + rel["reference"]["already"] >= n - 1, h
    assert rel.get("candidate", {}).get("unexpected") == 0 and \
        rel["candidate"]["released"] + rel["candidate"]["already"] >= n - 1, h
    for who in ("ref", "cand"):
        assert fp["device_peaks"][who] < 3 * (i + o), (who, fp["device_peaks"], n)


def test_a_large_first_set_waits_on_the_host_page_locked(server, tmp_path):
    """A problem whose inputs are timed in place (768 MiB here, more than
    half of timing.POOL_BYTES) keeps the timed calls' first set on the host
    until its timed phase. That copy is page-locked (children._lock_host), so
    the copy out and back skip the driver's staging buffer: pageable, 6.4 GB
    took 4.1-4.5 s out and 1.0-4.4 s back on an H200 (2026-12-05). A refused
    registration leaves no CUDA error for the next launch; the verdict is
    correct and timed, and the milestone says the copy was page-locked."""
    import torch
    from mkevolve_worker import children
    x = torch.rand(1 << 20, device="cuda")
    h = torch.empty_like(x, device="cpu")
    p = children._lock_host(h)
    assert p is not None, "CUDA refused to page-lock a 4 MiB host tensor in the test process"
    # Refused (already registered): None, and no CUDA error left behind for
    # the next kernel launch to raise (it would be charged to the candidate).
    assert children._lock_host(h) is None
    torch.zeros(1, device="cuda").add_(1)
    torch.cuda.synchronize()
    h.copy_(x)
    assert torch.equal(h, x.cpu())
    children._unlock_host([p])
    problem = tmp_path / "relu_768mib_timed.py"
    problem.write_text(RELU_768MIB)
    r = _eval(server, "locked", str(problem), "examples/kernels/01_relu__triton.py")
    assert r["type"] == "result" and r["status"] == "correct", {k: r.get(k) for k in ("status", "kind", "message")}
    assert (r.get("runtime_ms") or {}).get("median"), r.get("runtime_ms")
    phases = [p for p, _ in r["checks"]["phases_s"]]
    _append({"label": "first_set_locked", "phases": r["checks"]["phases_s"]})
    assert any(p.startswith("keeping the timed calls' first set on the host") and "page-locked" in p
               for p in phases), phases
    # The same evaluation's footprint: what the processes held at once, phase
    # by phase (footprint.device_phases). The candidate gave back its
    # output's cached block before the profiled burst, so that phase holds
    # about one output less than all three processes at their peaks.
    fp = r["checks"]["footprint"]
    ph, pk, o = fp["device_phases"], fp["device_peaks"], fp["output_bytes"]
    _append({"label": "footprint_phases", "footprint": fp})
    assert set(ph) == {"trials", "profiling", "timed"}, fp
    assert ph["profiling"] <= sum(pk.values()) - o // 2, fp
    assert fp["device_peak_bytes"] == max(ph.values()) + 3 * (600 << 20), fp


def test_transformed_trials_keep_one_copy_of_a_large_input_in_the_shared_pool():
    """The signed-normal and scaled trials draw their inputs in the pool
    that crosses to the candidate by CUDA IPC (torch.cuda.MemPool), which
    keeps what it once held for the rest of the evaluation. Each lets go of
    the drawn input before (or instead of) making its replacement, so the
    pool never holds two copies: before, one signed-normal trial of
    KernelBench's 19_ReLU left 2 x 6.4 GB in it. 768 MiB here."""
    import torch
    from mkevolve_worker import children, correctness as C
    if not torch.cuda.is_available() or not children.cuda_ipc_possible():
        pytest.skip("no CUDA GPU, or no torch.cuda.MemPool")
    n = 192 << 20
    s = n * 4
    cfg = {"get_inputs": lambda: [torch.rand(n)]}
    trials = [{"seed": 1, "alt": False}, {"seed": 2, "alt": True}] + \
        [{"seed": 3, "alt": True, "dist": d} for d in C.TRIAL_DISTS if d != "x1"]
    pool = torch.cuda.MemPool()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_reserved()
    rises = {}
    for t in trials:
        with torch.cuda.use_mem_pool(pool):
            xs = C.generate_inputs(cfg, t, "cuda")
        torch.cuda.synchronize()
        rises[t.get("dist") or ("alt" if t["alt"] else "regular")] = (torch.cuda.max_memory_reserved() - base) / s
        del xs
    _append({"label": "transformed_trials_pool", "copies": rises,
             "storage_use_count": hasattr(torch._C, "_storage_Use_Count")})
    assert max(rises.values()) < 1.3, rises


def test_an_input_the_problem_keeps_on_the_gpu_is_never_scaled_in_place():
    """On the GPU's torch (which can count a storage's users) a scaled trial
    writes a freshly drawn input in place; one the problem keeps must stay
    as it was however it is handed out: the tensor itself, a view, a
    detach(), a DLPack alias (memory no storage count sees), or the same
    tensor twice. The values are x * factor in every case."""
    import torch
    from mkevolve_worker import correctness as C
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    assert hasattr(torch._C, "_storage_Use_Count"), "this torch cannot count a storage's users"
    g = torch.rand(1000, device="cuda")
    base = torch.rand(2000, device="cuda")
    other = torch.rand(1000, device="cuda")
    alias = torch.from_dlpack(other)
    keep = [t.clone() for t in (g, base, other)]
    cfg = {"get_inputs": lambda: [g, base[:1000], g.detach(), alias, torch.rand(1000)]}
    for name, f in C.TRIAL_DISTS.items():
        if name == "x1":
            continue
        xs = C.generate_inputs(cfg, {"seed": 5, "alt": True, "dist": name}, "cuda")
        for kept, now in zip(keep, (g, base, other)):
            assert torch.equal(kept, now), name
        assert torch.equal(xs[0], keep[0] * f) and torch.equal(xs[1], keep[1][:1000] * f), name
        assert torch.equal(xs[2], keep[0] * f) and torch.equal(xs[3], keep[2] * f), name
    twice = C.generate_inputs({"get_inputs": lambda: [torch.full((8,), 2.0)] * 2},
                              {"seed": 1, "alt": True, "dist": "x3"}, "cuda")
    assert torch.equal(twice[0], twice[1]) and float(twice[0][0]) == 6.0
    fresh = torch.rand(8, device="cuda")  # held by this one name, as scaled_inputs holds what it checks
    assert C._only_ours(fresh), "a fresh tensor nothing else holds must be written in place"


FORGERIES = {
    # The storage said to run past the allocation its handle maps.
    "oversized": 'r["ssize"] += 1 << 30',
    # The storage said to start far beyond it, perhaps inside the reference's
    # own memory (its expected output): the driver's range must refute it.
    "elsewhere": 'r["soff"] += 1 << 33',
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_forged_ipc_output_is_the_candidates_own_failure(server, tmp_path, name):
    """A candidate that patches the worker in its process to forge the IPC
    reference of its (honest) output is the candidate's malformed_result:
    not correct, and not a harness failure that would spare it a verdict."""
    with open(os.path.join(REPO, "examples", "kernels", "01_relu__triton.py")) as f:
        honest = f.read()
    forged = (f"import sys as _s\n_tio = _s.modules['mkevolve_worker.tensorio']\n_orig = _tio._ipc_export\n"
              f"def _forge(t):\n    r = _orig(t)\n    if r is not None:\n        {FORGERIES[name]}\n    return r\n"
              f"_tio._ipc_export = _forge\n")
    path = tmp_path / f"01_relu__forged_{name}.py"
    path.write_text(forged + honest)
    r = _eval(server, "forged", "examples/problems/01_relu.py", str(path), static_check=False, perf=False)
    assert r["type"] == "result", r
    assert (r["status"], r["kind"]) == ("runtime_error", "malformed_result"), \
        {k: r.get(k) for k in ("status", "kind", "message")}
    assert "outside its allocation" in r["message"] or "no device allocation" in r["message"] \
        or "could not be mapped" in r["message"], r["message"]


KEEPS_MAPPINGS = '''
import sys as _s
import torch as _torch
_tio = _s.modules["mkevolve_worker.tensorio"]
_open = _tio._ipc_open
_KEPT = []


_CHANGED = []


def _keep(ref, shape, dt):
    # Every input the reference hands over, mapped by the harness in this
    # process: kept open for the rest of the evaluation, with a copy of what
    # it held when it came. Checked as each new one comes (outside the
    # forward, so that no torch op runs in it).
    _CHANGED.extend(i for i, (t, c) in enumerate(_KEPT) if not _torch.equal(t, c))
    t = _open(ref, shape, dt)
    _KEPT.append((t, t.clone()))
    return t


_tio._ipc_open = _keep


def _all_as_given():
    return bool(_KEPT) and not _CHANGED
'''


def test_a_kept_ipc_mapping_never_sees_another_trials_inputs(server, tmp_path):
    """A candidate that keeps open the mapping of every input it was handed
    (its own code, patching the harness in its process) must never find in
    one of them another trial's data: a block handed out once is never
    reused by the reference, which computes on its copies. The candidate
    below is honest while every kept mapping still holds what it was given
    and returns zeros as soon as one does not (or when it kept none: then
    the probe did not run, and the test fails too). Before each trial drew
    into a pool of its own, the reference's one shared pool gave a freed
    trial's block to the next trial's inputs."""
    with open(os.path.join(REPO, "examples", "kernels", "01_relu__triton.py")) as f:
        honest = f.read()
    body = honest.replace("        x = x.contiguous()\n",
                          "        if not _all_as_given():\n            return torch.zeros_like(x)\n"
                          "        x = x.contiguous()\n")
    assert body != honest
    path = tmp_path / "01_relu__keeps_mappings.py"
    path.write_text(KEEPS_MAPPINGS + body)
    r = _eval(server, "kept-ipc", "examples/problems/01_relu.py", str(path), static_check=False, perf=False)
    assert r["type"] == "result", r
    assert r["checks"]["handover"]["inputs"] == "device (CUDA IPC)", r["checks"]["handover"]
    assert r["checks"]["correctness"]["trials_run"] >= 3, r["checks"]["correctness"]
    assert r["status"] == "correct", {k: r.get(k) for k in ("status", "kind", "message")}


def test_roofline_records_of_a_gemm(server):
    """Issue 15 on a GPU: the work record of a GEMM counts its FLOPs exactly
    (2*M*N*K for x @ W.T), and the profiling process reads each compiled Triton
    kernel's metadata (registers, warps, stages, an occupancy estimate)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("p03", os.path.join(REPO, "examples/problems/03_linear_gelu.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = mod.get_inputs()[0]
    in_f, out_f = mod.get_init_inputs()[:2]
    m = x.numel() // x.shape[-1]
    r = _eval(server, "roofline", "examples/problems/03_linear_gelu.py", "examples/kernels/03_linear_gelu__tiled.py")
    assert r["type"] == "result" and r["status"] == "correct", r
    work = r["checks"]["work"]
    assert work["flops"] == 2 * m * in_f * out_f, work
    tk = r["checks"]["runtime"].get("triton_kernels")
    print("\ntriton_kernels:", json.dumps(tk)[:600])
    assert isinstance(tk, list) and tk, r["checks"]["runtime"]
    for k in tk:
        assert k["n_regs"] > 0 and k["num_warps"] > 0 and k["num_stages"] >= 1, k
        assert k["n_spills"] >= 0 and k["shared_bytes"] >= 0, k
        assert 0 < k["occupancy"] <= 1, k


def test_nsight_compute_counters(server):
    """--profile ncu on a GPU: Nsight Compute profiles one call of a correct
    candidate in its own sandboxed process; relu must move about the bytes the
    work model counts (one read and one write of the tensor, caches flushed)."""
    sys.path.insert(0, os.path.join(REPO, "worker"))
    from mkevolve_worker import ncu
    if ncu.find_ncu() is None:
        pytest.skip("no ncu on this machine")
    r = _eval(server, "ncu", "examples/problems/01_relu.py", "examples/kernels/01_relu__triton.py",
              profile_ncu=True)
    assert r["type"] == "result" and r["status"] == "correct", r
    n = r["checks"].get("ncu")
    print("\nncu:", json.dumps(n)[:800])
    assert isinstance(n, dict) and not n.get("error"), n
    assert any(k["name"].startswith("relu_kernel") for k in n["kernels"]), n
    work = r["checks"]["work"]
    k = next(k for k in n["kernels"] if k["name"].startswith("relu_kernel"))
    # Reads come from DRAM (caches flushed); writes still held in L2 when the
    # call ends are not counted, so the total may be short by up to the L2's size.
    assert 0.95 * work["inputs_bytes"] <= k["dram_read_bytes"] <= 1.05 * work["inputs_bytes"], (k, work)
    assert k["dram_read_bytes"] <= n["dram_bytes"] <= 1.05 * work["bytes"], (n, work)
    assert n["time_ms"] > 0 and 0 < n["dram_gb_s"] < 6000


# TF32 off for Triton too (the paper: "for both PyTorch and Triton"): every
# candidate process runs with TRITON_F32_DEFAULT=ieee (spares.Launcher).
_DOT_PROBE = r'''
import json, sys
import torch, triton, triton.language as tl

@triton.jit
def mm(a_ptr, b_ptr, c_ptr, K: tl.constexpr):
    m = tl.arange(0, 64)[:, None]
    n = tl.arange(0, 64)[None, :]
    acc = tl.zeros((64, 64), dtype=tl.float32)
    for k0 in range(0, K, 64):
        kk = k0 + tl.arange(0, 64)
        acc += tl.dot(tl.load(a_ptr + m * K + kk[None, :]), tl.load(b_ptr + kk[:, None] * 64 + n))
    tl.store(c_ptr + m * 64 + n, acc)

torch.manual_seed(0)
K = 4096
a = torch.randn(64, K, device="cuda")
b = torch.randn(K, 64, device="cuda")
c = torch.empty(64, 64, device="cuda")
mm[(1,)](a, b, c, K)
ref = a.double() @ b.double()
print(json.dumps({"rel_err": float(((c.double() - ref).abs().max() / ref.abs().max()).item())}))
'''


def _dot_error(tmp_path, f32_default):
    import subprocess
    env = {k: v for k, v in os.environ.items() if k != "TRITON_F32_DEFAULT"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / f"cache-{f32_default}")
    if f32_default:
        env["TRITON_F32_DEFAULT"] = f32_default
    probe = tmp_path / "dot_probe.py"  # @triton.jit needs its source in a file
    probe.write_text(_DOT_PROBE)
    p = subprocess.run([sys.executable, str(probe)], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])["rel_err"]


def test_an_fp32_dot_without_input_precision_is_ieee_under_the_candidates_setting(tmp_path):
    sys.path.insert(0, os.path.join(REPO, "worker"))
    from mkevolve_worker.spares import TRITON_F32_DEFAULT
    import torch
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    ieee = _dot_error(tmp_path, TRITON_F32_DEFAULT)
    default = _dot_error(tmp_path, None)
    _append({"label": "tf32", "dot_rel_err_candidate_setting": ieee, "dot_rel_err_triton_default": default})
    print(f"\nfp32 tl.dot, K=4096, relative error: {ieee:.3g} with TRITON_F32_DEFAULT={TRITON_F32_DEFAULT}, "
          f"{default:.3g} with Triton's default")
    assert ieee < 1e-5, ieee
    # Triton's own default on this GPU is TF32: without the setting the same dot is far less exact.
    assert default > 10 * ieee, (default, ieee)


def test_a_kernel_whose_dot_names_no_precision_passes_fp32_tolerances(server, tmp_path):
    src = open(os.path.join(REPO, "examples", "kernels", "03_linear_gelu__tiled.py")).read()
    assert ', input_precision="ieee"' in src
    k = tmp_path / "03_linear_gelu__tiled_default_precision.py"
    k.write_text(src.replace(', input_precision="ieee"', ""))
    r = _eval(server, "tf32", os.path.join("examples", "problems", "03_linear_gelu.py"), str(k), timeout_s=120)
    assert r["type"] == "result", r
    assert (r["status"], r["kind"]) == ("correct", "ok"), {x: r.get(x) for x in ("status", "kind", "message")}


def test_the_candidates_sandbox_on_the_gpu(server):
    """The sandbox this GPU machine allows (worker/mkevolve_worker/sandbox.py;
    scripts/probe_sandbox_gpu.py tests each mechanism alone): whatever plan the
    server's start-up self-test kept, its candidates hold no capabilities and
    cannot regain any, and its record says so. The hello's self-test and the
    record go to the results file."""
    _append({"label": "sandbox", "hello_sandbox": server.hello.get("sandbox"),
             "selftest": server.hello.get("sandbox_selftest")})
    r = _eval(server, "sandbox", "examples/problems/01_relu.py", "examples/kernels/01_relu__triton.py")
    assert r["type"] == "result" and r["status"] == "correct", r
    rec = r["checks"]["isolation"].get("sandbox") or {}
    _append({"label": "sandbox_record", "record": rec})
    if (server.hello.get("sandbox") or {}).get("mode", "off") == "off":
        pytest.skip(f"the sandbox is off here: {server.hello.get('sandbox')}")
    assert rec.get("capabilities") == "none" and rec.get("no_new_privs") is True, rec
    # The reference's inputs and the candidate's outputs cross by CUDA IPC
    # inside the box too: no IPC event handle is sent (an event opens through
    # a /dev/shm file, and the box's /dev/shm is its own; H200, 2026-12-04:
    # with events every boxed plan failed cudaIpcOpenMemHandle, without them
    # every plan passed).
    assert (server.hello.get("sandbox") or {}).get("cuda_ipc") is True, server.hello.get("sandbox_selftest")
    h = r["checks"]["handover"]
    assert (h["inputs"], h["outputs"]) == ("device (CUDA IPC)", "device (CUDA IPC)"), r["checks"]
