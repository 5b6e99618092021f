"""Bodies of the forked children. Each runs in isolation.spawn()'s sandbox,
writes its results as files in its private directory, and returns an exit code.

- reference: loads ONLY the problem file; generates inputs and computes the
  expected outputs. Never sees candidate code.
- candidate: loads ONLY the candidate; runs every trial on its own copy of the
  inputs (mapped copy-on-write from the sealed inputs file the server handed
  over); then, if the server says go, times itself.
- profile: a second process of the candidate; profiles its forward calls.
- baseline: times eager and torch.compile of the problem's Model.
- gpu_probe, decomposition: small jobs that must not run in the server.

The first three run in pre-started children (spares.py): BODIES names them,
and the warm_* functions are what such a child does before its work arrives.
"""

from __future__ import annotations

import json
import os

from . import correctness as C
from . import errors, loader, tensorio

# Set by the server before it limits its own thread count (children restore it).
ORIG_THREADS: int | None = None


def _restore_threads() -> None:
    import torch
    if ORIG_THREADS:
        try:
            torch.set_num_threads(ORIG_THREADS)
        except RuntimeError:
            pass


def _sync(device: str) -> None:
    if device == "cuda":
        import torch
        torch.cuda.synchronize()


def write_json(path: str, obj) -> None:
    tmp = path + ".part"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def write_error(ctx, kind: str, message: str, phase: str) -> int:
    write_json(os.path.join(ctx.dir, "error.json"), {"kind": kind, "message": message, "phase": phase})
    return 0


def _fail(ctx, exc: BaseException, where: str, files: list[str], default_kind: str | None = None) -> int:
    kind = errors.classify_exception(exc)
    if isinstance(exc, SystemExit):
        msg = (f"the candidate called sys.exit({exc.code!r}) while {where}; a kernel must return its output, "
               f"never exit the process")
        return write_error(ctx, "exit_without_result", msg, where)
    if kind == "runtime_error" and default_kind:
        kind = default_kind
    label = {
        "syntax_error": "syntax error", "import_error": "import failed", "triton_compile_error":
        "Triton compilation failed", "illegal_memory_access": "illegal memory access", "device_assert":
        "device-side assert", "oom": "out of GPU memory", "construct_error": "ModelNew(...) raised",
    }.get(kind, "error")
    msg = f"{label} while {where}: " + errors.trimmed_traceback(exc, files)
    return write_error(ctx, kind, msg, where)


# ---------------------------------------------------------------------------


def reference_body(ctx, job: dict) -> int:
    """Phase 1 (before the candidate): generate every trial's inputs; run the
    model only to vet the problem (first trial of each config) and the
    alternate-distribution trials (skipped where the reference raises or is
    not finite). No expected output leaves this child.
    Phase 2 (started beside the candidate): compute the expected outputs of
    job["trials"] from the inputs inherited from the server, then, with
    job["hold"], wait for the server's go (given once the candidate has handed
    over its outputs) before writing them.
    job: problem, opts, device, phase, timing_trial (1); trials, inputs, init, hold (2)."""
    import torch
    _restore_threads()
    C.disable_tf32()
    device = job["device"]
    opts = job["opts"]
    try:
        mod = loader.load_problem(job["problem"])
        configs = loader.problem_configs(mod)
    except BaseException as e:  # noqa: BLE001
        return write_error(ctx, "problem_error", "loading the problem failed: "
                           + errors.trimmed_traceback(e, [job["problem"]]), "load")
    # The problem's code is in memory: the server starts the candidate only now.
    ctx.send({"ev": "loaded"})
    phase = job["phase"]
    if phase == 1:
        plan = C.plan_trials(len(configs), opts)
        if job.get("timing_trial"):
            plan.append(job["timing_trial"])
        first = {c: next(t["id"] for t in plan if t["config"] == c and not t["alt"]) for c in range(len(configs))}
        run = [t for t in plan if t["alt"] or t["id"] == first[t["config"]]]
    else:
        plan = job["trials"]
        run = plan
    inputs: dict = dict(job.get("inputs") or {})
    init: list = list(job.get("init") or [])
    expected: dict = {}
    mutated: dict = {}
    alt_skipped: dict = {}
    where = "load"
    try:
        for c, cfg in enumerate(configs):
            mine = [t for t in plan if t["config"] == c]
            if phase == 1:
                where = f"get_init_inputs() of config {c}"
                C.seed_all(opts["seed"])
                init.append(list(cfg["get_init_inputs"]()))
                for t in mine:
                    where = f"get_inputs() of config {c}"
                    inputs[t["id"]] = C.generate_inputs(cfg, t)
            todo = [t for t in run if t["config"] == c]
            if not todo:
                continue
            where = f"Model(*get_init_inputs()) of config {c}"
            C.seed_all(opts["seed"])
            model = mod.Model(*init[c]).to(device)
            for t in todo:
                where = f"Model.forward on trial {t['id']}"
                xs = C.to_device(inputs[t["id"]], device)
                try:
                    C.seed_all(t["seed"] + 1)
                    with torch.no_grad():
                        out = model(*xs)
                    _sync(device)
                except Exception as e:  # noqa: BLE001
                    if t["alt"]:
                        alt_skipped[t["id"]] = f"the reference raised on these inputs: {type(e).__name__}"
                        continue
                    raise
                out = C.to_cpu_tree(out)
                if t["alt"] and not C.is_finite_tree(out):
                    alt_skipped[t["id"]] = "the reference output is not finite on signed-normal inputs"
                    continue
                if phase == 1:
                    continue  # vetting only: nothing is handed over before the candidate has run
                expected[t["id"]] = out
                mutated[t["id"]] = [isinstance(x, torch.Tensor) and not C.tensors_equal(x.detach().to("cpu"), o)
                                    for x, o in zip(xs, inputs[t["id"]])]
            del model
    except BaseException as e:  # noqa: BLE001
        return write_error(ctx, "problem_error", f"the reference failed in {where}: "
                           + errors.trimmed_traceback(e, [job["problem"]]), where)
    if phase == 1:
        tensorio.save(os.path.join(ctx.dir, "inputs.mkt"), {"init": init, "inputs": inputs},
                      meta={"n_configs": len(configs), "alt_skipped": alt_skipped})
        return 0
    if job.get("hold"):
        # Computed while the candidate runs; nothing leaves this process until
        # the server, holding the candidate's outputs, says go.
        ctx.send({"ev": "expected_ready"})
        if not ctx.wait_go():
            return 0
    # Sealed and handed over by descriptor: a candidate waiting beside us could
    # rewrite a file in our directory before the server read it.
    fd = tensorio.save_sealed({"out": expected, "mutated": mutated})
    try:
        ctx.send_fd(fd)
    finally:
        os.close(fd)
    return 0


# ---------------------------------------------------------------------------


def _warm_cuda() -> bool:
    import torch
    if not torch.cuda.is_available():
        return False
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    return True


def warm_reference(ctx) -> dict:
    """A reference child's warm-up: the CUDA context."""
    return {"cuda": _warm_cuda()}


def warm_candidate(ctx) -> dict:
    """A candidate process's warm-up: the CUDA context, then one launch of the
    worker's own trivial Triton kernel, so that Triton's driver, launcher and
    compiler are loaded before the candidate's first compile."""
    info = {"cuda": _warm_cuda()}
    if info["cuda"]:
        try:
            from . import warm_kernel
            warm_kernel.run()
            info["triton"] = True
        except Exception as e:  # noqa: BLE001 - no Triton: the candidate reports it
            info["triton"] = f"{type(e).__name__}: {e}"[:200]
    return info


def _with_profiler(info: dict) -> dict:
    """Adds an empty profiler session (CUPTI's start-up, seconds) where CUDA is up."""
    if info["cuda"]:
        from . import runtime_check
        runtime_check.warm_profiler()
    return info


def warm_profiling(ctx) -> dict:
    """The profiling process's warm-up: the candidate's, plus the profiler's,
    paid before the candidate arrives."""
    return _with_profiler(warm_candidate(ctx))


def warm_profiler_only(ctx) -> dict:
    """A profiling process forked on demand: CUDA and the empty profiler
    session only (the profile needs it; Triton warms up on the candidate)."""
    return _with_profiler({"cuda": _warm_cuda()})


def candidate_body(ctx, job: dict) -> int:
    """job: kernel, opts, device, trials, inputs, init, perf (bool)."""
    import torch
    _restore_threads()
    C.disable_tf32()
    device = job["device"]
    opts = job["opts"]
    kernel = job["kernel"]
    files = loader.candidate_files(kernel)
    ctx.send({"ev": "isolation", "network": ctx.network})
    ctx.send({"ev": "phase", "phase": "importing the candidate"})
    try:
        mod = loader.import_candidate(kernel)
    except BaseException as e:  # noqa: BLE001
        return _fail(ctx, e, f"importing {os.path.basename(kernel)}", files)
    files = loader.loaded_own_files(kernel)
    if not isinstance(getattr(mod, "ModelNew", None), type):
        return write_error(ctx, "missing_model_new",
                           f"{os.path.basename(kernel)} defines no class ModelNew (the candidate must define "
                           f"class ModelNew(torch.nn.Module) with the same constructor arguments as Model)", "import")
    outputs: dict = {}
    post: dict = {}
    devices: dict = {}
    keep = None
    trials = job["trials"]
    n_configs = len(job["init"])
    for c in range(n_configs):
        mine = [t for t in trials if t["config"] == c]
        if not mine and c != 0:
            continue
        where = f"constructing ModelNew (config {c})"
        ctx.send({"ev": "phase", "phase": where})
        try:
            C.seed_all(opts["seed"])
            model = mod.ModelNew(*job["init"][c]).to(device)
        except BaseException as e:  # noqa: BLE001
            return _fail(ctx, e, where, files, default_kind="construct_error")
        for t in mine:
            where = f"running forward (trial {t['id']})"
            ctx.send({"ev": "phase", "phase": where})
            xs = C.to_device(job["inputs"][t["id"]], device)
            try:
                C.seed_all(t["seed"] + 1)
                with torch.no_grad():
                    out = model(*xs)
                _sync(device)
                devices[t["id"]] = C.tree_devices(out)
                outputs[t["id"]] = C.to_cpu_tree(out)
                post[t["id"]] = [x.detach().to("cpu") if isinstance(x, torch.Tensor) else None for x in xs]
            except BaseException as e:  # noqa: BLE001
                return _fail(ctx, e, where, files)
        if c == 0:
            keep = model
        else:
            del model
    try:
        tensorio.save(os.path.join(ctx.dir, "candidate.mkt"), {"out": outputs, "post": post},
                      meta={"devices": devices, "files": files})
    except BaseException as e:  # noqa: BLE001
        return write_error(ctx, "malformed_result", f"the output cannot be handed over: {e}", "saving outputs")
    ctx.send({"ev": "correctness_ready"})
    if not job["perf"] or not ctx.wait_go():
        return 0
    return _perf(ctx, job, keep, files)


def _warmup(job: dict) -> int:
    """Warm-up calls: the option plus a count the server draws per eval, so the
    candidate cannot tell its calls apart by counting them."""
    return job["opts"]["warmup"] + int(job.get("extra_warmup", 0))


def profiled_calls(job: dict) -> int:
    """Forward calls the profiling process makes: config 0's trials, then as
    many as the timed process makes (warm-up, timed, synced). The server
    judges the profile against this count, not against what the child says."""
    from .timing import SYNCED_TRIALS
    n_trials = sum(1 for t in job["trials"] if t["config"] == 0)
    return n_trials + _warmup(job) + job["opts"]["perf_trials"] + SYNCED_TRIALS


def _timed_inputs(job: dict, device: str):
    """What every timed (and every profiled) call reads: the trials' inputs of
    config 0 to refill from, the seeded inputs of the last call, and the
    buffers the calls are made with. Returns (refill, buffers)."""
    from . import timing
    normal = [t for t in job["trials"] if t["config"] == 0 and not t["alt"]]
    pool = [C.to_device(job["inputs"][t["id"]], device) for t in normal]
    last = C.to_device(job["inputs"]["last"], device)
    bufs = C.to_device(job["inputs"][normal[0]["id"]], device)
    return timing.make_refill(bufs, pool, last), bufs


def _perf(ctx, job: dict, model, files: list[str]) -> int:
    import torch
    from . import timing
    device = job["device"]
    opts = job["opts"]
    refill, bufs = _timed_inputs(job, device)

    def call():
        with torch.no_grad():
            return model(*bufs)
    where = "waiting for the GPU timing lock"
    try:
        # The timed phase waits for the server's second go: the server first
        # takes the GPU's timing lock (gpulock.py), so no other candidate or
        # baseline on this GPU is timed at the same time.
        ctx.send({"ev": "timing_ready"})
        if not ctx.wait_go():
            return 0
        where = "timing"
        ctx.send({"ev": "phase", "phase": where})
        extra = {}
        if device == "cuda":
            flush, nbytes = timing.l2_flush_buffer(device)
            times, out, info, synced = timing.time_cuda_with_synced(call, refill, _warmup(job), opts["perf_trials"],
                                                                    flush, opts["timing"])
            timed_last = C.to_cpu_tree(out)
            extra.update(l2_flush_bytes=nbytes, synced_times_ms=synced, **info)
            del flush
            wall_last = None
            if opts["wall_check"]:
                where = "the wall-clock batch"
                synced_median = sorted(synced)[len(synced) // 2]
                n = timing.wall_batch_size(synced_median)
                extra["wall_calls"] = n
                wall_last = C.to_cpu_tree(timing.wall_batches(ctx, call, n, synced_median_ms=synced_median))
        else:
            times, out = timing.time_cpu(call, refill, min(_warmup(job), 2), opts["perf_trials"])
            timed_last = C.to_cpu_tree(out)
            wall_last = None
        tensorio.save(os.path.join(ctx.dir, "timed.mkt"), {"timed_last": timed_last, "wall_last": wall_last})
        write_json(os.path.join(ctx.dir, "timing.json"), {"times_ms": times, **extra})
    except BaseException as e:  # noqa: BLE001
        return _fail(ctx, e, where, files)
    ctx.send({"ev": "done"})
    return 0


# ---------------------------------------------------------------------------


def profile_body(ctx, job: dict) -> int:
    """The runtime profile, in a second process of the same candidate started
    beside the first (same job, same isolation). Its warm-up (warm_profiling)
    already paid CUPTI's start-up. It imports the candidate and profiles
    every forward call it makes: config 0's trials and
    as many further calls as the timed process makes, inputs refilled between
    them. A candidate that computes honestly only on the calls it expects to
    be profiled has to tell the two processes apart. Writes runtime.json; its
    outputs are not compared (the other process's are)."""
    import torch
    from . import runtime_check
    _restore_threads()
    C.disable_tf32()
    device = job["device"]
    opts = job["opts"]
    kernel = job["kernel"]
    files = loader.candidate_files(kernel)
    where = "importing the candidate"
    ctx.send({"ev": "phase", "phase": where})
    try:
        mod = loader.import_candidate(kernel)
        where = "constructing ModelNew (config 0)"
        C.seed_all(opts["seed"])
        model = mod.ModelNew(*job["init"][0]).to(device)
        mine = [t for t in job["trials"] if t["config"] == 0]
        xs = [C.to_device(job["inputs"][t["id"]], device) for t in mine]
        refill, bufs = _timed_inputs(job, device)
        n_more = profiled_calls(job) - len(mine)
        out_nbytes = [0]
        # The burst of calls waits for the server: it runs only when no
        # candidate on this GPU is being timed (gpulock.py, shared).
        ctx.send({"ev": "profile_ready"})
        if not ctx.wait_go():
            return 0

        def run():
            with torch.no_grad():
                for t, x in zip(mine, xs):
                    C.seed_all(t["seed"] + 1)
                    model(*x)
                for i in range(n_more):
                    refill(i, i == n_more - 1)
                    out = model(*bufs)
                    out_nbytes[0] = C.tree_nbytes(out)
        where = "running forward under the profiler"
        ctx.send({"ev": "phase", "phase": where})
        if device == "cuda":
            acts = runtime_check.profile_calls(run, os.path.join(ctx.dir, "trace.json"))
        else:  # test mode: the same calls and protocol, nothing to profile
            run()
            acts = []
    except BaseException as e:  # noqa: BLE001
        return _fail(ctx, e, where, loader.loaded_own_files(kernel) or files)
    write_json(os.path.join(ctx.dir, "runtime.json"), {"activities": acts, "output_nbytes": out_nbytes[0]})
    ctx.send({"ev": "phase", "phase": "profiled"})
    return 0


def baseline_body(ctx, job: dict) -> int:
    """Times eager and torch.compile (inductor, default mode) like a candidate."""
    # Private compile caches: nothing a candidate wrote can slow the baseline down.
    os.environ["TRITON_CACHE_DIR"] = os.path.join(ctx.dir, "triton-cache")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(ctx.dir, "inductor-cache")
    import torch
    from . import timing
    _restore_threads()
    C.disable_tf32()
    device = job["device"]
    opts = job["opts"]
    try:
        mod = loader.load_problem(job["problem"])
        cfg = loader.problem_configs(mod)[0]
        C.seed_all(opts["seed"])
        init = list(cfg["get_init_inputs"]())
        trials = [t for t in C.plan_trials(1, opts) if not t["alt"]]
        pool_cpu = [C.generate_inputs(cfg, t) for t in trials]
        last_cpu = C.generate_inputs(cfg, C.timing_inputs_trial(opts))
        C.seed_all(opts["seed"])
        model = mod.Model(*init).to(device)
    except BaseException as e:  # noqa: BLE001
        return write_error(ctx, "problem_error", "loading the problem failed: "
                           + errors.trimmed_traceback(e, [job["problem"]]), "load")
    pool = [C.to_device(x, device) for x in pool_cpu]
    last = C.to_device(last_cpu, device)
    bufs = C.to_device(pool_cpu[0], device)
    refill = timing.make_refill(bufs, pool, last)
    result: dict = {"torch": torch.__version__, "tf32": False, "warmup": opts["warmup"],
                    "perf_trials": opts["perf_trials"]}
    if device == "cuda":
        result["gpu"] = torch.cuda.get_device_name(0)
        flush, result["l2_flush_bytes"] = timing.l2_flush_buffer(device)

    def measure(fn):
        def call():
            with torch.no_grad():
                return fn(*bufs)
        extra = {}
        if device == "cuda":
            times, _, info, synced = timing.time_cuda_with_synced(call, refill, opts["warmup"], opts["perf_trials"],
                                                                  flush, opts["timing"])
            extra.update(info, synced_median_ms=timing.summarize(synced)["median"])
        else:
            times, _ = timing.time_cpu(call, refill, min(opts["warmup"], 2), opts["perf_trials"])
        s = timing.summarize(times)
        return {"median_ms": s["median"], "mean_ms": s["mean"], "min_ms": s["min"], **extra}
    # Compile first (seconds, up to minutes), so that only the timed calls wait
    # for and hold the GPU's timing lock.
    compiled, compile_error = None, None
    if not hasattr(torch, "compile"):
        compile_error = f"torch {torch.__version__} has no torch.compile"
    else:
        try:
            compiled = torch.compile(model, mode="default", backend="inductor")
            with torch.no_grad():
                compiled(*bufs)
            _sync(device)
        except BaseException as e:  # noqa: BLE001
            compiled = None
            compile_error = errors.shorten(f"{type(e).__name__}: {e}", 1500)
    ctx.send({"ev": "timing_ready"})
    if not ctx.wait_go():
        return 0
    try:
        result["eager"] = measure(model)
    except BaseException as e:  # noqa: BLE001
        return write_error(ctx, "problem_error", "timing eager failed: "
                           + errors.trimmed_traceback(e, [job["problem"]]), "eager")
    if compiled is None:
        result["compile"] = None
        result["compile_error"] = compile_error
    else:
        try:
            result["compile"] = measure(compiled)
        except BaseException as e:  # noqa: BLE001
            result["compile"] = None
            result["compile_error"] = errors.shorten(f"{type(e).__name__}: {e}", 1500)
    write_json(os.path.join(ctx.dir, "baseline.json"), result)
    return 0


def gpu_probe_body(ctx, job: dict) -> int:
    import torch
    info: dict = {"gpus": [], "cuda_version": getattr(torch.version, "cuda", None)}
    try:
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        for i in range(n):
            p = torch.cuda.get_device_properties(i)
            info["gpus"].append({
                "index": i, "name": p.name, "capability": [p.major, p.minor],
                "sm_count": p.multi_processor_count, "memory_bytes": p.total_memory,
                "l2_bytes": int(getattr(p, "L2_cache_size", 0) or 0),
            })
    except BaseException as e:  # noqa: BLE001
        info["error"] = f"{type(e).__name__}: {e}"
    write_json(os.path.join(ctx.dir, "gpu.json"), info)
    return 0


def decomposition_body(ctx, job: dict) -> int:
    _restore_threads()
    C.disable_tf32()
    from . import decompose_check
    res = decompose_check.verify_decomposition(job["problem"], job["decomposed"], job["subproblems_dir"],
                                               job["options"])
    write_json(os.path.join(ctx.dir, "decomposition.json"), res)
    return 0


BODIES = {"reference": reference_body, "candidate": candidate_body, "profile": profile_body}
