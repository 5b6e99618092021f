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
import time

from . import correctness as C
from . import errors, layouts, loader, tensorio, timing, workmodel
from . import coverage

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
    write_json(os.path.join(ctx.dir, "error.json"), {"kind": kind, "message": message, "phase": phase,
                                                     **_coverage("coverage")})
    return 0


def _coverage(key: str = "cov") -> dict:
    """{key: which flagged lines ran so far} in a candidate's process whose
    static findings are judged by what runs (coverage.py), else {}."""
    rep = coverage.report()
    return {key: rep} if rep is not None else {}


def _plain_env(opts: dict) -> None:
    """With the plain_env option, the candidate compiles as in a user's own
    process: Triton's fp32 dot default is its own, not the harness's IEEE
    (spares.TRITON_F32_DEFAULT), before any of its code is imported."""
    if opts.get("plain_env"):
        os.environ.pop("TRITON_F32_DEFAULT", None)


def _ran_event(ctx):
    """Tells the server the moment a flagged line first runs (coverage.py)."""
    return lambda i: ctx.send({"ev": "ran", "i": i})


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


def device_peak(device: str) -> int | None:
    """Bytes the caching allocator of this process reserved at most on the GPU."""
    if device != "cuda":
        return None
    import torch
    try:
        return int(torch.cuda.max_memory_reserved())
    except Exception:  # noqa: BLE001
        return None


def _on_device(xs, device: str) -> list:
    """xs with every tensor on `device` (moved only where it is elsewhere)."""
    import torch
    return [x.to(device) if isinstance(x, torch.Tensor) and x.device.type != device else x for x in xs]


def _trial_layout(xs: list, opts: dict, t: dict):
    """(inputs, record): trial t's inputs in the layout the option
    input_layouts gives it (layouts.py), and what was applied and skipped;
    record None when the trial has no layout."""
    layout = layouts.for_trial(opts, t)
    if layout is None:
        return xs, None
    return layouts.apply_all(xs, layout)


def _mutated(xs, orig, before) -> list[bool]:
    """Which inputs forward changed: against fingerprints taken before it
    (before, on the GPU) or the pristine mapping (orig, in test mode)."""
    import torch
    if before is not None:
        return [isinstance(x, torch.Tensor) and C.fingerprint(x) != b for x, b in zip(xs, before)]
    return [isinstance(x, torch.Tensor) and not C.same_values(x, o) for x, o in zip(xs, orig)]


def _compare_handed(expected, fds: list[int], keys, opts: dict, ipc: str = "refuse") -> dict:
    """Compares the candidate's output, handed over by the server as a
    sealed file (fds[0]), with the expected output held here, on this
    process's device: {key: result} for each key of the file's object. A
    failure of the comparison itself is the harness's ("error"); a CUDA IPC
    reference that does not hold up (ipc "open": the server could check only
    its form) is the candidate's ("malformed")."""
    try:
        if len(fds) != 1:
            raise tensorio.FormatError(f"{len(fds)} files handed over, expected 1")
        got, _ = tensorio.load_fd(fds[0], ipc=ipc)
    except tensorio.FormatError as e:
        if ipc == "open":
            return {"malformed": f"the candidate's output in device memory could not be used ({e})"}
        return {"error": f"the candidate's output could not be mapped here ({e})"}
    except OSError as e:
        return {"error": f"the candidate's output could not be mapped here ({e})"}
    finally:
        _close_all(fds)
    try:
        out = {}
        for k in keys:
            if isinstance(got, dict) and k in got and not (k == "wall_last" and got[k] is None):
                out[k] = C.compare_tree(expected, got[k], opts)
        return {"results": out}
    except Exception as e:  # noqa: BLE001 - e.g. out of device memory while comparing
        return {"error": f"comparing failed: {type(e).__name__}: {errors.shorten(str(e), 300)}"}
    finally:
        del got


def reference_body(ctx, job: dict) -> int:
    """Streams every trial of the plan, one at a time: draws the trial's
    inputs (seeded, on its device where the problem allows) and hands them
    to the server (a sealed in-memory file; on the GPU it refers to a copy
    in device memory by CUDA IPC), computes the expected output and keeps it
    here (the candidate computes meanwhile), says "expected", and then
    compares the candidate's output for this trial, which the server hands
    over sealed, with it, on the device, and reports the result
    ("compared"); only then does it draw the next trial. The expected output
    never leaves this process. Alternate-distribution trials on which the
    reference raises or is not finite are reported as skipped instead. So
    one trial's expected output and inputs exist at a time (and the copies
    the timed calls reuse). The timing trial's expected output is kept while
    the server hands over the candidate's timed outputs, one at a time during
    its timed phase (op "compare_last", with the "keys" the file holds), until
    the server says "done".
    job: problem, opts, device, perf (plan the timing trial too)."""
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
    try:
        # Its own tolerance, where it declares one (flags still win).
        opts = dict(opts, problem_tolerance=C.problem_tolerance(mod))
    except ValueError as e:
        return write_error(ctx, "problem_error", str(e), "load")  # the server names the file
    # Shape variants (shapes.py): derived from the problem's size constants,
    # each run by the reference once before any candidate sees it; those it
    # cannot run are reported as skipped, never charged to the candidate.
    loaded = {"ev": "loaded"}
    labels: list = []
    if opts.get("shapes") == "search" or opts.get("shape_variant") is not None:
        from . import shapes
        try:
            found = shapes.validate(mod, job["problem"], device, opts["seed"], only=opts.get("shape_variant"))
        except BaseException as e:  # noqa: BLE001
            return write_error(ctx, "problem_error", "deriving the shape variants failed: "
                               + errors.trimmed_traceback(e, [job["problem"]]), "load")
        loaded["shapes"] = {k: found[k] for k in ("benchmark", "kept", "error", "skipped")}
        if opts.get("shape_variant") is not None:
            configs = []  # that variant alone (none when it is skipped)
        configs = configs + [v["config"] for v in found["variants"]]
        labels = [v["label"] for v in found["variants"]]
        loaded["variants"] = labels
    # The problem's code is in memory: the server starts the candidate only now.
    ctx.send({**loaded, "n_configs": len(configs)})
    if not configs:
        return 0  # the one variant asked for is skipped (the server reads why from "shapes")
    plan = C.plan_trials(len(configs), opts, labels) + ([C.timing_inputs_trial(opts)] if job.get("perf") else [])
    init: dict = {}
    where = "load"
    # On the GPU the inputs cross as CUDA IPC references to a copy made for
    # the candidate in a memory pool of its own (nothing else of this
    # process, above all no expected output, shares an allocation with it):
    # no trip through the host. shared[id] holds trial id's copy until the
    # candidate is done with it: until its comparison, or to the end for
    # the trials the timed calls reuse and the timing trial.
    # Each trial draws into a pool of its own (pools[id]), dropped and its
    # memory given back to the driver once the candidate is done with the
    # copy: a block handed out by IPC is never reused for another trial's
    # data, so a candidate that keeps a mapping open can read or write only
    # what it was given (docs/EVAL.md, threat model). ipc_pools: whether
    # this torch makes pools here at all (host files where it cannot).
    ipc_pools = device == "cuda" and opts.get("cuda_ipc", True) and _share_pool() is not None
    pools: dict = {}
    unfreed = 0  # bytes of inputs in pools dropped since their memory last went back
    if device == "cuda" and opts.get("ref_max_split_mb"):
        ctx.send({"ev": "ref_alloc", **_limit_splits(int(opts["ref_max_split_mb"]))})
    shared: dict = {}
    # What each shared copy's hand-over exported (tensorio.ipc_release): a
    # sandboxed candidate cannot tell torch here that it is done with a
    # copy, so its release (below) says so before the copy is dropped.
    sent: dict = {}
    released = tensorio.release_tally()
    retained: set = set()
    # Trials whose inputs are large (timing.in_place): drawn straight into the
    # shared pool, computed on there first and handed over after (hand_over),
    # so this process holds one copy of them and not two (docs/EVAL.md,
    # Device memory of one evaluation). id -> the fingerprints as drawn.
    deferred: dict = {}
    pool_bytes = timing.pool_bytes_of(opts, device == "cpu")

    def send_shared(tid: str) -> None:
        fd = tensorio.save_sealed(shared[tid], ipc=True, sent=sent.setdefault(tid, []))
        try:
            ctx.send_fd(fd)
        finally:
            os.close(fd)

    def draw(t):
        """Draws trial t's inputs, hands them over, and returns them with a
        pristine view (the sealed file, mapped) to check mutation against
        (None on the GPU, where fingerprints do it). In test mode the work
        copy is a copy-on-write mapping of the file too. On the GPU they are
        drawn in the shared pool; this process computes on a private clone,
        or, for large inputs, on the shared copy itself before handing it
        over (hand_over)."""
        c = t["config"]
        if c not in init:
            C.seed_all(opts["seed"])
            init[c] = list(configs[c]["get_init_inputs"]())
        if ipc_pools:
            trial_pool = pools[t["id"]] = torch.cuda.MemPool()  # _share_pool showed this torch makes them
            with torch.cuda.use_mem_pool(trial_pool):
                xs = C.generate_inputs(configs[c], t, device)
                copy = {"init": _clone_device(init[c]), "inputs": list(xs)}
            shared[t["id"]] = copy
            if timing.in_place(C.tree_nbytes(xs), pool_bytes) and not opts.get("input_layouts"):
                deferred[t["id"]] = [C.fingerprint(x) for x in xs]
                return xs, None
            send_shared(t["id"])
            return _clone_device(xs), None
        xs = C.generate_inputs(configs[c], t, device)
        fd = tensorio.save_sealed({"init": init[c], "inputs": xs})
        try:
            ctx.send_fd(fd)
            pristine, _ = tensorio.load_fd(fd)
            if device == "cpu":
                del xs
                xs = tensorio.load_fd(fd)[0]["inputs"]
        finally:
            os.close(fd)
        return xs, pristine["inputs"]

    def hand_over(t) -> None:
        """A large trial's shared copy, computed on just now, goes to the
        candidate as it was drawn: when the reference's forward wrote to it,
        it is drawn again (seeded) and must come out the same."""
        drawn = deferred.pop(t["id"])
        now = [C.fingerprint(x) for x in shared[t["id"]]["inputs"]]
        if now != drawn:
            del shared[t["id"]]
            with torch.cuda.use_mem_pool(pools[t["id"]]):  # its own pool: nothing of it was handed out yet
                xs = C.generate_inputs(configs[t["config"]], t, device)
                shared[t["id"]] = {"init": _clone_device(init[t["config"]]), "inputs": list(xs)}
            if [C.fingerprint(x) for x in xs] != drawn:
                raise RuntimeError("forward changed its large inputs in place and get_inputs() drew different "
                                   "values for the same seed, so the candidate cannot be given the inputs the "
                                   "expected output was computed on")
            del xs
        send_shared(t["id"])

    def release(upto: str, retain: bool) -> None:
        """The candidate is done with every trial up to `upto`: their copies
        go, but for those the timed calls still need."""
        nonlocal unfreed
        if retain:
            retained.add(upto)
        for p in plan:
            if p["id"] in shared and p["id"] not in retained:
                tensorio.ipc_release(sent.pop(p["id"], []), released)
                if pools.pop(p["id"], None) is not None:
                    unfreed += C.tree_nbytes(shared[p["id"]]["inputs"])
                del shared[p["id"]]
            if p["id"] == upto:
                break
        if unfreed >= FREE_POOLS_AT:
            _free_dropped_pools()
            unfreed = 0

    def draw_after(i: int):
        """Trial i+1's inputs, drawn and handed over (None after the last)."""
        nonlocal where
        if i + 1 >= len(plan):
            return None
        where = f"get_inputs() of config {plan[i + 1]['config']}"
        return draw(plan[i + 1])

    models: dict = {}
    t_ref = 0.0
    work = None  # the first trial's work record (workmodel.py)

    trace = bool(opts.get("trace_memory")) and device == "cuda"

    def mem(tid: str, at: str) -> None:
        # Diagnosis (option trace_memory): this process's device memory now,
        # and where it lies (_memory_layout).
        if trace:
            ctx.send({"ev": "ref_mem", "id": tid, "at": at, "reserved": torch.cuda.memory_reserved(),
                      "allocated": torch.cuda.memory_allocated(), "peak": torch.cuda.max_memory_reserved(),
                      "layout": _memory_layout(list(pools.values()))})

    def mark(what: str) -> None:
        # A milestone of the first trial, stamped with this machine's monotonic
        # clock (the server's too): where an evaluation's time goes (phases_s).
        ctx.send({"ev": "ref_phase", "phase": what, "t": time.monotonic()})
    try:
        where = f"get_inputs() of config {plan[0]['config']}"
        mark("drawing the first trial's inputs")
        pending = draw(plan[0])
        mem(plan[0]["id"], "drawn")
        mark("first trial's inputs handed over")
        for i, t in enumerate(plan):
            c = t["config"]
            xs, orig = pending
            if c not in models:
                where = f"Model(*get_init_inputs()) of config {c}"
                for k in [k for k in models if k != 0]:
                    del models[k]  # config 0's model is kept for the timing trial
                C.seed_all(opts["seed"])
                models[c] = mod.Model(*init[c]).to(device)
                if i == 0:
                    mark("Model constructed")
            where = f"Model.forward on trial {t['id']}"
            skip = None
            out = None
            xs = _on_device(xs, device)
            # The layout the composed model gives these inputs (option
            # input_layouts), made here from this process's own copy, as the
            # candidate makes it from its own: the same values, the same strides.
            xs, laid = _trial_layout(xs, opts, t)
            if laid is not None and laid["applied"]:
                orig = None  # the pristine mapping has the old layout: fingerprints judge mutation
            # On the GPU, mutation is judged by fingerprints taken here (no
            # pristine copy crosses the bus); in test mode against the mapping.
            before = [C.fingerprint(x) for x in xs] if device != "cpu" or orig is None else None
            t0 = time.monotonic()
            draws = False
            # The first trial's forward also counts the work one call must do
            # (workmodel.py: bytes and matmul/conv/attention FLOPs, for the
            # roofline); the count never changes what the forward computes.
            flops = workmodel.counter() if i == 0 and work is None else None
            try:
                C.seed_all(t["seed"] + 1)
                rng_before = C.rng_state(device) if t["id"] == "last" else None
                with torch.no_grad():
                    out = None
                    if flops is not None:
                        try:
                            with flops:
                                out = models[c](*xs)
                        except Exception as e:  # noqa: BLE001 - the count must never fail the reference:
                            work = {"error": f"counting failed: {type(e).__name__}: {e}"[:300]}
                            flops = None       # run it again plainly (same seed) and let that decide
                            C.seed_all(t["seed"] + 1)
                    if flops is None:
                        out = models[c](*xs)
                _sync(device)
                # A forward that draws random numbers gives the same output
                # only on the same draw: the last timed call is seeded as this
                # one, the wall-clock batch's calls cannot be (compare_last).
                draws = rng_before is not None and C.rng_drawn(rng_before, C.rng_state(device))
            except Exception as e:  # noqa: BLE001
                if not t["alt"]:
                    raise
                skip = f"the reference raised on these inputs: {type(e).__name__}"
            t_ref = max(t_ref, time.monotonic() - t0)
            mem(t["id"], "forward returned")
            if i == 0:
                mark("first forward returned")
            if skip is None and t["alt"] and not C.is_finite_tree(out):
                skip = "the reference output is not finite on signed-normal inputs"
            mutated = [] if skip else _mutated(xs, orig, before)
            in_bytes = C.tree_nbytes(xs) if flops is not None else 0
            constant = None if (skip or t["alt"] or t["id"] == "last") else C.is_constant_tree(out)
            del xs, orig
            pending = None
            if t["id"] in deferred:
                where = f"handing over the inputs of trial {t['id']}"
                hand_over(t)
                mem(t["id"], "handed over")
            if skip is not None:
                out = None
                ctx.send({"ev": "expected", "id": t["id"], "skip": skip})
                pending = draw_after(i)
                continue
            ev = {"ev": "expected", "id": t["id"], "ref_s": round(t_ref, 4), "device_peak": device_peak(device)}
            if laid is not None:
                ev["layout"] = dict(laid, index=t["layout"])  # what was applied, for the verdict's checks
            if i == 0 and work is None:
                try:
                    work = workmodel.record(models[c], in_bytes, out, flops)
                    ev["work"] = work
                except Exception as e:  # noqa: BLE001 - diagnostics only
                    work = {"error": f"{type(e).__name__}: {e}"[:300]}
                    ev["work"] = work
            ctx.send(ev)
            last = t["id"] == "last"
            if last and device == "cuda":
                torch.cuda.empty_cache()  # idle through the candidate's timed calls: hold only what is kept
            # A trial's output comes once. The timing trial's come one at a
            # time while the candidate is timed (the last timed call's, then
            # the wall-clock batch's), each while the candidate holds it, until
            # the server says done: the expected output stays here till then.
            while True:
                msg, fds = ctx.recv_msg()
                op = (msg or {}).get("op")
                if op != ("compare_last" if last else "compare") or msg.get("id") != t["id"]:
                    _close_all(fds)
                    if last and op == "done":
                        break
                    return 0  # the server is done with us
                if not last:
                    release(t["id"], bool(msg.get("retain")))
                    mem(t["id"], "released")
                where = f"comparing the candidate's output of trial {t['id']}"
                if not last:
                    asked = keys = ("out",)
                else:
                    asked = tuple(k for k in ("timed_last", "wall_last")
                                  if k in (msg.get("keys") if isinstance(msg.get("keys"), list) else []))
                    keys = tuple(k for k in asked if not (k == "wall_last" and draws))
                r = _compare_handed(out, fds, keys, dict(opts, trial_kind=C.trial_kind(t)),
                                    ipc="open" if device == "cuda" else "refuse")
                if last and draws and "results" in r and "wall_last" in asked:
                    r["results"]["wall_last_skipped"] = "the reference's forward draws random numbers; the " \
                        "wall-clock batch's calls are not seeded, so their output is not compared"
                mem(t["id"], "compared")
                if "malformed" in r:
                    r = {"result": {"ok": False, "kind": "malformed_result", "message": r.pop("malformed")}} \
                        if not last else {"results": {k: {"ok": False, "kind": "malformed_result",
                                                          "message": r["malformed"]} for k in asked}}
                elif "results" in r and not last:
                    res = r.pop("results").get("out")
                    if res is None:
                        r = {"error": "the handed-over file holds no output"}
                    else:
                        res.update(ref_mutated=mutated, constant=constant)
                        r["result"] = res
                if ipc_pools:
                    r["ipc_released"] = dict(released)  # so far: the last comparison's says it all
                ctx.send({"ev": "compared", "id": t["id"], **r})
                if not last:
                    break
            del out
            # The next trial is drawn only now, with this one's expected
            # output and copy gone: one trial's data at a time, not two.
            pending = draw_after(i)
            if pending is not None:
                mem(plan[i + 1]["id"], "drawn")
    except BaseException as e:  # noqa: BLE001
        # Out of GPU memory is the machine's state (neighbours on a shared GPU),
        # not the problem's fault: the server answers it as no verdict.
        kind = "oom" if errors.classify_exception(e) == "oom" else "problem_error"
        return write_error(ctx, kind, f"the reference failed in {where}: "
                           + errors.trimmed_traceback(e, [job["problem"]]), where)
    ctx.send({"ev": "mem", "device_peak": device_peak(device)})
    return 0


# ---------------------------------------------------------------------------


def _limit_splits(mb: int) -> dict:
    """Option ref_max_split_mb: this process's caching allocator stops
    splitting cached blocks above `mb` MiB for smaller tensors (diagnosis:
    whether a large block carved up for temporaries is what makes the
    reference reserve more than it holds). Says whether this torch took it."""
    import torch
    try:
        torch.cuda.memory._set_allocator_settings(f"max_split_size_mb:{mb}")
        return {"max_split_mb": mb, "applied": True}
    except Exception as e:  # noqa: BLE001 - diagnosis only: the evaluation goes on as it would
        return {"max_split_mb": mb, "applied": False, "error": f"{type(e).__name__}: {e}"[:200]}


def _memory_layout(share_pools: list) -> dict:
    """Where this process's reserved device memory lies (option
    trace_memory): bytes by pool ("shared": the pools of the trials whose
    inputs cross by CUDA IPC and are still held; "default": the rest, with
    dropped pools not yet given back), the free bytes
    inside partly used blocks (memory_stats' inactive_split_bytes: a large
    block split for smaller tensors), the segment count, and the four largest
    segments as [size, in use]. Best effort: what this torch cannot say is
    left out."""
    import torch
    out: dict = {}
    try:
        stats = torch.cuda.memory_stats()
        out["split_free"] = int(stats.get("inactive_split_bytes.all.current", 0))
        out["segments"] = int(stats.get("segment.all.current", 0))
    except Exception:  # noqa: BLE001 - diagnosis only
        pass
    try:
        shared_ids = {tuple(p.id) for p in share_pools if hasattr(p, "id")}
        pools: dict = {}
        sizes = []
        for seg in torch.cuda.memory_snapshot():
            pid = seg.get("segment_pool_id")
            key = "shared" if pid is not None and tuple(pid) in shared_ids else "default"
            pools[key] = pools.get(key, 0) + int(seg.get("total_size", 0))
            sizes.append([int(seg.get("total_size", 0)), int(seg.get("allocated_size", 0))])
        out["pools"] = pools
        out["largest"] = sorted(sizes, reverse=True)[:4]
    except Exception as e:  # noqa: BLE001 - diagnosis only
        out["snapshot_error"] = f"{type(e).__name__}: {e}"[:200]
    return out


def cuda_ipc_possible() -> bool:
    """Whether this torch can share the reference's inputs by CUDA IPC from a
    pool of their own (torch.cuda.MemPool); the worker falls back to host
    files where it cannot."""
    import torch
    return hasattr(torch.cuda, "MemPool") and hasattr(torch.cuda, "use_mem_pool")


def _share_pool():
    """A CUDA memory pool for what this process shares by IPC, or None
    where this torch has none (the inputs then cross as bytes)."""
    import torch
    if not cuda_ipc_possible():
        return None
    try:
        return torch.cuda.MemPool()
    except Exception:  # noqa: BLE001 - a torch whose pools cannot be made here
        return None


#: Dropped trial pools give their memory back to the driver once they held
#: this much between them. Until then their blocks stay allocated but idle:
#: torch never gives a dropped pool's block to another allocation, so
#: waiting is safe, and small inputs spare every trial empty_cache's cost
#: (cudaFree of the reference's own cached blocks too, and their next
#: cudaMalloc). The timing trial's empty_cache frees whatever is left.
FREE_POOLS_AT = 64 << 20


def _free_dropped_pools() -> None:
    """Gives the memory of the pools dropped so far back to the driver:
    torch frees a dropped pool's blocks once nothing holds them (the IPC
    counters ipc_release set to 0 are collected first) and returns its
    cached segments only on empty_cache."""
    import torch
    torch.cuda.ipc_collect()
    torch.cuda.empty_cache()


def _clone_device(xs) -> list:
    """xs with each device tensor cloned (allocated where the caller says)."""
    import torch
    return [x.detach().clone() if isinstance(x, torch.Tensor) and x.device.type != "cpu" else x for x in xs]


def _warm_cuda() -> bool:
    import torch
    if not torch.cuda.is_available():
        return False
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    return True


def warm_reference(ctx) -> dict:
    """A reference child's warm-up: the CUDA context, then the libraries an
    eager forward starts on its first call (cuBLAS's handle and its GEMM
    kernels in the three float types, cuDNN's for a convolution), which
    would otherwise be started in the reference's first trial, on the
    evaluation's clock."""
    info = {"cuda": _warm_cuda()}
    if info["cuda"]:
        info["libraries"] = _warm_libraries()
        info["counter"] = warm_counter("cuda")
    return info


def warm_counter(device: str) -> bool:
    """One small forward (linear, matmuls, masked softmax) under the work
    model's FLOP counter, as the reference's first trial runs: the counter's
    imports and the dispatch mode's first-use costs are paid here. False
    where it cannot run (never raises)."""
    try:
        import torch
        from . import workmodel
        mode = workmodel.counter()
        if mode is None:
            return False
        x = torch.ones(2, 8, 16, device=device)
        w = torch.ones(16, 16, device=device)
        with torch.no_grad(), mode:
            q = torch.nn.functional.linear(x, w, w[0])
            s = torch.matmul(q, q.transpose(-2, -1)).masked_fill(torch.ones(8, 8, dtype=torch.bool, device=device).triu(1),
                                                                 float("-inf"))
            torch.matmul(torch.softmax(s, dim=-1), q).reshape(2, -1)
        if device == "cuda":
            torch.cuda.synchronize()
        return True
    except Exception:  # noqa: BLE001 - warming only
        return False


def _warm_libraries() -> list[str]:
    import torch
    done = []
    try:
        x = torch.ones(64, 64, device="cuda")
        for dt in (torch.float32, torch.float16, torch.bfloat16):
            a = x.to(dt)
            torch.matmul(a, a)
            torch.bmm(a[None], a[None])
        done.append("cublas")
        torch.nn.functional.conv2d(torch.ones(1, 4, 8, 8, device="cuda"), torch.ones(4, 4, 3, 3, device="cuda"))
        done.append("cudnn")
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - a library that cannot start here starts (or fails) in the trial
        pass
    return done


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


def _limit_device_memory(job: dict) -> None:
    """A candidate's processes may reserve at most opts.device_mem_limit_bytes
    on the GPU (0: no limit): a runaway allocation is then this candidate's
    own out-of-memory error, not its neighbours'."""
    limit = int(job["opts"].get("device_mem_limit_bytes") or 0)
    if limit <= 0 or job["device"] != "cuda":
        return
    import torch
    try:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, max(0.01, limit / total)))
    except Exception:  # noqa: BLE001 - no limit is better than no evaluation
        pass


def _close_all(fds) -> None:
    for fd in fds:
        os.close(fd)


def _load_message_fds(fds: list[int], ipc: str = "refuse") -> list:
    """The tensor files the server sent with a message, loaded (mapped)."""
    try:
        return [tensorio.load_fd(fd, ipc=ipc)[0] for fd in fds]
    finally:
        _close_all(fds)


def candidate_body(ctx, job: dict) -> int:
    """Runs the trials the server streams to it, one at a time: each message
    brings a trial and a sealed file with its inputs (and the constructor
    arguments of its config); the output goes back as a sealed in-memory
    file, with which inputs forward changed. Inputs of the trials marked
    "keep", and those of the last timed call ("last"), stay on the device for
    the timed phase. job: kernel, opts, device, perf, extra_warmup."""
    import torch
    _restore_threads()
    C.disable_tf32()
    device = job["device"]
    opts = job["opts"]
    kernel = job["kernel"]
    files = loader.candidate_files(kernel)
    _plain_env(opts)
    ctx.send({"ev": "isolation", "network": ctx.network})
    _limit_device_memory(job)
    # Before any candidate code runs: which of its flagged lines run (coverage.py).
    coverage.start(job.get("coverage"), _ran_event(ctx))
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
    models: dict = {}
    pool: list = []
    pinned: list = []  # host addresses page-locked for the timed calls' first set (_lock_host)
    pool_layout = None
    last = None
    in_place = False   # large inputs (timing.in_place): one copy of them on the device, timed in place
    mutates = False    # forward changed its inputs (allowed where the reference does too)
    held = None   # the last output handed over by IPC: alive until the server moves on
    held_sent: list = []  # what its hand-over exported (released when the server moves on)
    released = tensorio.release_tally()
    first_forward = True
    ipc = "open" if device == "cuda" else "refuse"
    ctx.send({"ev": "phase", "phase": "waiting for inputs"})
    while True:
        msg, fds = ctx.recv_msg()
        # The server moved on: the reference compared the last output (and,
        # from its own /dev/shm, could not tell torch here it was done).
        tensorio.ipc_release(held_sent, released)
        held, held_sent = None, []
        op = (msg or {}).get("op")
        if op == "done":
            _close_all(fds)
            break
        if op not in ("trial", "last") or len(fds) != 1 or not isinstance(msg.get("trial"), dict):
            _close_all(fds)
            return 0  # the server is done with us (or the channel is gone)
        t = msg["trial"]
        # Test mode computes on a copy-on-write mapping of the sealed file and
        # checks mutation against a second one (no private copy).
        twice = device == "cpu" and op == "trial"
        try:
            try:
                obj = tensorio.load_fd(fds[0], ipc=ipc)[0]
                pristine = tensorio.load_fd(fds[0])[0]["inputs"] if twice else None
            finally:
                _close_all(fds)
        except (OSError, tensorio.FormatError) as e:
            return write_error(ctx, "malformed_result", f"the inputs could not be read ({e})", "inputs")
        if op == "last":
            if msg.get("in_place"):
                # Large inputs: the reference's copy, mapped (no copy of ours);
                # it is copied into the timed calls' buffers for the last call only.
                in_place = True
                last = list(obj["inputs"])
            else:
                last = C.to_device(obj["inputs"], device)
            del obj
            continue
        c = t["config"]
        if c not in models:
            where = f"constructing ModelNew (config {c})"
            ctx.send({"ev": "phase", "phase": where})
            for k in [k for k in models if k != 0]:
                del models[k]  # config 0's model is kept for the timed phase
            try:
                C.seed_all(opts["seed"])
                models[c] = mod.ModelNew(*obj["init"]).to(device)
            except BaseException as e:  # noqa: BLE001
                return _fail(ctx, e, where, files, default_kind="construct_error")
        where = f"running forward (trial {t['id']})"
        ctx.send({"ev": "phase", "phase": where})
        orig = obj["inputs"]
        kept = None
        before = None
        if pristine is not None:
            xs, orig = orig, pristine
            # The composed model's layout (option input_layouts), made from this
            # process's own copy; mutation is then judged by fingerprints (orig,
            # the pristine mapping, stays: the timed calls refill from it).
            xs, laid = _trial_layout(xs, opts, t)
            if laid is not None and laid["applied"]:
                before = [C.fingerprint(x) for x in xs]
        else:
            xs = C.to_device(orig, device)
            del orig, obj
            orig = None
            if msg.get("keep") and msg.get("in_place"):
                # Large inputs: the timed calls' first set waits on the host (not
                # a second copy on the device through the remaining trials). Its
                # own milestone: at KernelBench's 6.4 GB it is a part of the first
                # trial's 5 s whose size is not yet known (checks.phases_s).
                # Page-locked where CUDA lets this process lock it, so that the
                # copy out and every copy back run at the bus's speed (docs/EVAL.md).
                ctx.send({"ev": "phase", "phase": f"page-locking the timed calls' first set on the host (trial {t['id']})"})
                kept, how = _host_set(xs, pinned, lambda how: ctx.send(
                    {"ev": "phase", "phase": f"keeping the timed calls' first set on the host (trial {t['id']}, {how})"}))
                ctx.send({"ev": "phase", "phase": where})
            elif msg.get("keep"):  # the original values, for refilling the timed calls
                kept = [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]
            xs, _ = _trial_layout(xs, opts, t)
            before = [C.fingerprint(x) for x in xs]
        try:
            C.seed_all(t["seed"] + 1)
            # The call alone, on the server's clock (what the harness's own
            # passes are sized by: evaluate.pass_plan), without this trial's
            # input hand-over, host copy and fingerprints around it.
            ctx.send({"ev": "fwd", "at": "start"})
            with torch.no_grad():
                out = models[c](*xs)
            _sync(device)
            ctx.send({"ev": "fwd", "at": "end"})
            devices = C.tree_devices(out)
            mutated = _mutated(xs, orig, before)
            mutates = mutates or any(mutated)
        except BaseException as e:  # noqa: BLE001
            return _fail(ctx, e, where, files)
        if first_forward:
            # The first forward's end (its Triton kernels compiled by now): a
            # milestone of the evaluation's time (checks.phases_s).
            first_forward = False
            ctx.send({"ev": "phase", "phase": f"forward returned (trial {t['id']})"})
        del xs
        try:
            out_fd = tensorio.save_sealed({"out": out}, meta={"devices": devices, "mutated": mutated, "files": files},
                                          ipc=device == "cuda" and opts.get("cuda_ipc", True), sent=held_sent)
        except BaseException as e:  # noqa: BLE001
            return write_error(ctx, "malformed_result", f"the output cannot be handed over: {e}", "saving outputs")
        held = out
        del out
        try:
            ctx.send_fd(out_fd)
        finally:
            os.close(out_fd)
        if msg.get("keep"):
            if kept is None and msg.get("in_place"):
                kept = orig  # test mode: the pristine mapping of the sealed file, no copy
            pool.append(kept if kept is not None else C.to_device(orig, device))
            if len(pool) == 1:
                pool_layout = layouts.for_trial(opts, t)  # the timed calls' buffers take the first set's layout
        del orig, pristine, kept
        obj = None
        ctx.send({"ev": "output", "id": t["id"], **_coverage()})
    peak = device_peak(device)
    if device == "cuda":
        # What the trials left cached goes back before the profiling process
        # gets its inputs (the server sends them on this event): the two never
        # hold their peaks at once (footprint.device_phases). Outputs handed
        # over by CUDA IPC are freed once the reference let go of them.
        _give_back_cached()
    ctx.send({"ev": "correctness_ready", "device_peak": peak, "ipc_released": released,
              **_coverage()})
    if not job["perf"] or not ctx.wait_go():
        return 0
    if not pool or last is None or 0 not in models:
        return write_error(ctx, "malformed_result", "the server sent no inputs for the timed calls", "timing")
    # Timed in place only where forward leaves its inputs alone: a forward
    # that changes them (as its reference does) gets them refilled every call.
    try:
        return _perf(ctx, job, models[0], files, pool, last, pool_layout, in_place=in_place and not mutates)
    finally:
        _unlock_host(pinned)


def _give_back_cached() -> None:
    """Returns the device blocks this process's allocator keeps cached to the
    driver, those of outputs handed over by CUDA IPC once the reference let go
    of them included. Best effort, never the candidate's failure: the harness
    asks it for the footprint's sake (footprint.device_phases), every trial
    already synchronized (an error its kernels left would have surfaced
    there), and what stays cached is still reported as held."""
    import torch
    try:
        torch.cuda.ipc_collect()
        torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001
        pass


def _host_set(xs: list, pinned: list, copying=None):
    """A host copy of input set xs (the timed calls' first set of a large
    problem), each tensor laid out as `.to("cpu", copy=True)` would lay it
    out, page-locked where CUDA allows (_lock_host; the locked addresses are
    added to `pinned`). copying(how), when given, is called between locking
    and copying, with "page-locked", "N of M page-locked" or "pageable".
    Returns (the copy, how)."""
    import torch
    kept = [torch.empty_like(x.detach(), device="cpu") if isinstance(x, torch.Tensor) else x for x in xs]
    tried = [_lock_host(h) for h in kept if isinstance(h, torch.Tensor) and h.numel()]
    locked = [p for p in tried if p is not None]
    pinned.extend(locked)
    how = "page-locked" if locked and len(locked) == len(tried) else \
        f"{len(locked)} of {len(tried)} page-locked" if locked else "pageable"
    if copying is not None:
        copying(how)
    for h, x in zip(kept, xs):
        if isinstance(x, torch.Tensor):
            h.copy_(x.detach())
    return kept, how


def _lock_host(h):
    """Page-locks host tensor h's storage for CUDA (cudaHostRegister), so
    that copies between it and the device skip the driver's staging buffer.
    Returns the locked address, or None where h is no tensor, is empty, or
    CUDA refuses (h then stays a plain pageable copy; never raises)."""
    try:
        import torch
        if not isinstance(h, torch.Tensor) or not torch.cuda.is_available():
            return None
        st = h.untyped_storage()
        if st.nbytes() == 0:
            return None
        rt = torch.cuda.cudart()
        if rt.cudaHostRegister(st.data_ptr(), st.nbytes(), 0) != rt.cudaError.success:
            _consume_cuda_error()
            return None
        return st.data_ptr()
    except Exception:  # noqa: BLE001 - a torch or driver without it: pageable
        return None


def _consume_cuda_error() -> None:
    """A refused cudaHostRegister leaves its error as the CUDA runtime's last
    error of this thread (torch's binding does not read it), and torch's
    check after the next kernel launch would raise it there: in the
    candidate's forward, charged to the candidate. One tiny launch here
    reads it (and so clears it) inside a try; a second shows it is gone."""
    import torch
    for _ in range(2):
        try:
            torch.full((1,), 1.0, device="cuda")  # a fill kernel (zeros may be a memset, checked by its own status)
            return
        except RuntimeError:
            continue


def _unlock_host(ptrs: list) -> None:
    """Undoes _lock_host for every address in ptrs (best effort)."""
    if not ptrs:
        return  # nothing locked: no CUDA to start (test mode)
    try:
        import torch
        rt = torch.cuda.cudart()
        for p in ptrs:
            rt.cudaHostUnregister(p)
    except Exception:  # noqa: BLE001 - the process ends soon anyway
        pass
    ptrs.clear()


class _ServerGone(Exception):
    """The server answered a timed output's hand-over with anything but go."""


def _warmup(job: dict) -> int:
    """Warm-up calls: the option plus a count the server draws per eval, so the
    candidate cannot tell its calls apart by counting them."""
    return job["opts"]["warmup"] + int(job.get("extra_warmup", 0))


def profiled_calls(job: dict, n_pool: int) -> int:
    """Forward calls the profiling process makes: one per input set of the
    timing pool, then as many as the timed process makes (warm-up, timed,
    synced). The server judges the profile against this count, not against
    what the child says."""
    from .timing import SYNCED_TRIALS
    return n_pool + _warmup(job) + job["opts"]["perf_trials"] + SYNCED_TRIALS


def _perf(ctx, job: dict, model, files: list[str], pool: list, last: list, layout=None,
          in_place: bool = False) -> int:
    import torch
    from . import timing
    device = job["device"]
    opts = job["opts"]
    where = ""

    def step(what: str) -> None:
        # A milestone of the timed calls (checks.phases_s): where their time goes.
        nonlocal where
        where = what
        ctx.send({"ev": "phase", "phase": what})
    step("copying the timed calls' inputs")  # from the host, for large inputs
    try:
        # The buffers every timed call reads, refilled in place before each call
        # from the pool (and, for the last call, with its own seeded inputs).
        # Inside the try: out of GPU memory here (neighbours' use) is an "oom"
        # the pool retries alone, never a process that exits without a word.
        # With input_layouts they take the first set's layout (its trial's,
        # and the last call's: the reference computed both in it), and keep it
        # through the refills (timing.make_refill copies in place).
        bufs = C.to_device(pool[0], device)
        if layout is not None:
            bufs, _ = layouts.apply_all(bufs, layout)
        last_seed = C.timing_inputs_trial(opts)["seed"] + 1  # as the reference seeds its expected output
        refill = timing.make_refill(bufs, pool, last, seed_last=lambda: C.seed_all(last_seed), in_place=in_place)

        def call():
            with torch.no_grad():
                return model(*bufs)
        where = "waiting for the GPU timing lock"
        held = None
        if device == "cuda":
            # The profiled burst runs while this process waits: it holds its
            # buffers (and the rotated sets), not the blocks its trials'
            # outputs left cached, so the three processes never hold their
            # peaks at once (footprint.device_phases). What it holds now, and
            # its peak from here on (the timed calls'), go into the footprint.
            _give_back_cached()
            held = int(torch.cuda.memory_reserved())
            torch.cuda.reset_peak_memory_stats()
        # The timed phase waits for the server's second go: the server first
        # takes the GPU's timing lock (gpulock.py), so no other candidate or
        # baseline on this GPU is timed at the same time.
        ctx.send({"ev": "timing_ready", "device_held": held})
        if not ctx.wait_go():
            return 0
        step("timing")
        extra = {"in_place": in_place}
        handed = tensorio.release_tally()

        def hand_over(key: str, out, what: str) -> None:
            # A timed output goes to the reference while this process waits:
            # on the GPU by CUDA IPC (no trip through the host), in test mode
            # as bytes in a sealed file. The server answers once the
            # reference compared it; then it is released and dropped, so the
            # device holds one call's output at a time.
            step(f"handing over {what}")
            sent: list = []
            fd = tensorio.save_sealed({key: out}, ipc=device == "cuda" and opts.get("cuda_ipc", True), sent=sent)
            try:
                ctx.send_fd(fd)
            finally:
                os.close(fd)
            ctx.send({"ev": "timed_output", "key": key})
            ok = ctx.wait_go()
            tensorio.ipc_release(sent, handed)
            if not ok:
                raise _ServerGone()
        if device == "cuda":
            flush, nbytes = timing.l2_flush_buffer(device)

            def take_out(out):
                hand_over("timed_last", out, "the last timed output")
                if opts["timing"] == "device":  # "synced" timing has no second series
                    step("the synced calls")
                return None
            times, _, info, synced = timing.time_cuda_with_synced(
                call, refill, _warmup(job), opts["perf_trials"], flush, opts["timing"], take_out=take_out)
            extra.update(l2_flush_bytes=nbytes, synced_times_ms=synced, **info)
            del flush
            if opts["wall_check"]:
                step("the wall-clock batch")
                synced_median = sorted(synced)[len(synced) // 2]
                n = timing.wall_batch_size(synced_median)
                extra["wall_calls"] = n
                out = timing.wall_batches(ctx, call, n, synced_median_ms=synced_median)
                hand_over("wall_last", out, "the wall-clock batch's output")
                del out
        else:
            times, out = timing.time_cpu(call, refill, min(_warmup(job), 2), opts["perf_trials"])
            hand_over("timed_last", out, "the last timed output")
            del out
        extra["ipc_released"] = handed
        extra["device_peak"] = device_peak(device)  # since timing_ready: the timed calls' high-water mark
        write_json(os.path.join(ctx.dir, "timing.json"), {"times_ms": times, **extra, **_coverage("coverage")})
    except _ServerGone:
        return 0  # the server is done with us (it judged a handed-over output, or is gone)
    except BaseException as e:  # noqa: BLE001
        return _fail(ctx, e, where, files)
    ctx.send({"ev": "done"})
    return 0


# ---------------------------------------------------------------------------


def profile_body(ctx, job: dict) -> int:
    """The runtime profile, in a second process of the same candidate started
    beside the first (same job, same isolation). Its warm-up (warm_profiling)
    already paid CUPTI's start-up. It imports the candidate, then waits for
    the inputs of the timed calls (the server sends them once correctness is
    settled: the timing pool's sets, then the last call's) and profiles every
    forward call it makes: one per pool set, then as many as the timed
    process makes, inputs refilled between them. A candidate that computes
    honestly only on the calls it expects to be profiled has to tell the two
    processes apart. Writes runtime.json; its outputs are not compared (the
    other process's are)."""
    import torch
    from . import runtime_check, timing
    _restore_threads()
    C.disable_tf32()
    device = job["device"]
    opts = job["opts"]
    kernel = job["kernel"]
    files = loader.candidate_files(kernel)
    _plain_env(opts)
    _limit_device_memory(job)
    coverage.start(job.get("coverage"), _ran_event(ctx))  # before any candidate code runs (coverage.py)
    where = "importing the candidate"
    ctx.send({"ev": "phase", "phase": where})
    try:
        mod = loader.import_candidate(kernel)
        where = "waiting for the inputs of the timed calls"
        msg, fds = ctx.recv_msg()
        in_place = bool((msg or {}).get("in_place"))
        if (msg or {}).get("op") != "pool" or len(fds) < (1 if in_place else 2):
            _close_all(fds)
            return 0  # the candidate failed: nothing to profile
        sets = _load_message_fds(fds, ipc="open" if device == "cuda" else "refuse")
        n_more = int(msg.get("n_more", 0))
        where = "constructing ModelNew (config 0)"
        C.seed_all(opts["seed"])
        model = mod.ModelNew(*sets[0]["init"]).to(device)
        if in_place:
            # Large inputs: no pool; every call reads the last call's inputs,
            # the reference's copy where the candidate's forward left its
            # inputs alone on every trial (msg "map": no copy of ours; what a
            # forward wrote there could only fail its own timed last call,
            # which is copied from it), else a copy of our own.
            pool = []
            last = list(sets[-1]["inputs"])
            bufs = last if msg.get("map") else C.to_device(last, device)
        else:
            pool = [C.to_device(s["inputs"], device) for s in sets[:-1]]
            last = C.to_device(sets[-1]["inputs"], device)
            bufs = C.to_device(pool[0], device)
        del sets
        # The layouts the timed process uses (option input_layouts): each pool
        # set's call in its trial's layout, the buffers in the first set's.
        set_layouts = msg.get("layouts") if isinstance(msg.get("layouts"), list) else []
        for i, k in enumerate(set_layouts[:len(pool)]):
            layout = layouts.for_trial(opts, {"layout": k})
            if layout is not None:
                pool[i], _ = layouts.apply_all(pool[i], layout)
                if i == 0:
                    bufs, _ = layouts.apply_all(bufs, layout)
        refill = timing.make_refill(bufs, pool, last) if not in_place else (lambda i, is_last: None)
        out_nbytes = [0]
        # A composed package: each subkernel module's share of the forward,
        # timed around its calls (runtime_check.ModuleTimer; never in the timed process).
        timer = None
        try:
            subs = loader.subkernel_files(kernel)
            timer = runtime_check.ModuleTimer(model, subs, device) if subs else None
        except Exception:  # noqa: BLE001  (a figure for the budget, never the candidate's failure)
            timer = None
        # The burst of calls waits for the server: it runs only when no
        # candidate on this GPU is being timed (gpulock.py, shared).
        ctx.send({"ev": "profile_ready", **_coverage()})
        if not ctx.wait_go():
            return 0

        def run():
            with torch.no_grad():
                for x in pool:
                    model(*x)
                for i in range(n_more):
                    refill(i, i == n_more - 1)
                    out = model(*bufs)
                    out_nbytes[0] = C.tree_nbytes(out)
                    del out  # one call's output at a time
        where = "running forward under the profiler"
        ctx.send({"ev": "phase", "phase": where})
        if device == "cuda":
            acts = runtime_check.profile_calls(run, os.path.join(ctx.dir, "trace.json"),
                                               lambda what: ctx.send({"ev": "phase", "phase": what}))
            ctx.send({"ev": "phase", "phase": "trace read"})
        else:  # test mode: the same calls and protocol, nothing to profile
            run()
            acts = []
    except BaseException as e:  # noqa: BLE001
        return _fail(ctx, e, where, loader.loaded_own_files(kernel) or files)
    record = {"activities": acts, "output_nbytes": out_nbytes[0], "device_peak": device_peak(device),
              **_coverage("coverage")}
    if timer is not None:
        record["modules"] = timer.result()
    if device == "cuda":
        # Registers, spills and occupancy of the kernels it compiled (never fails it).
        try:
            from . import tritonmeta
            record.update(tritonmeta.candidate_kernels(loader.loaded_own_files(kernel), mod))
        except Exception:  # noqa: BLE001
            pass
    write_json(os.path.join(ctx.dir, "runtime.json"), record)
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
    opts = job["opts"]
    if opts.get("tf32"):
        C.enable_tf32()  # --baseline-tf32: the second baseline, TF32 on
    else:
        C.disable_tf32()
    device = job["device"]
    try:
        mod = loader.load_problem(job["problem"])
        cfg = loader.problem_configs(mod)[0]
        C.seed_all(opts["seed"])
        init = list(cfg["get_init_inputs"]())
        trials = [t for t in C.plan_trials(1, opts) if not t["alt"]]
        # Drawn on the device (where the problem allows), as the reference draws.
        pool = [C.generate_inputs(cfg, trials[0], device)]
        # As for candidates: several input sets to refill from when they are
        # small, one when a set is large.
        k = timing.pool_size(len(trials), C.tree_nbytes(pool[0]))
        pool += [C.generate_inputs(cfg, t, device) for t in trials[1:k]]
        last = C.generate_inputs(cfg, C.timing_inputs_trial(opts), device)
        C.seed_all(opts["seed"])
        model = mod.Model(*init).to(device)
    except BaseException as e:  # noqa: BLE001
        return write_error(ctx, "problem_error", "loading the problem failed: "
                           + errors.trimmed_traceback(e, [job["problem"]]), "load")
    bufs = C.to_device(pool[0], device)  # the buffers every call reads, refilled in place
    refill = timing.make_refill(bufs, pool, last)
    result: dict = {"torch": torch.__version__, "tf32": bool(opts.get("tf32")), "warmup": opts["warmup"],
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
    # Eager first: its figure must not depend on how long torch.compile takes
    # (minutes for some problems: an unrolled LSTM). Each timed phase waits for
    # the server's go, which it gives under the GPU's timing lock; the server
    # also gives the compile step a deadline of its own, and reads eager.json
    # when that deadline passes.
    ctx.send({"ev": "timing_ready", "what": "eager"})
    if not ctx.wait_go():
        return 0
    try:
        result["eager"] = measure(model)
    except BaseException as e:  # noqa: BLE001
        return write_error(ctx, "problem_error", "timing eager failed: "
                           + errors.trimmed_traceback(e, [job["problem"]]), "eager")
    write_json(os.path.join(ctx.dir, "eager.json"), result)
    ctx.send({"ev": "compiling"})
    if not ctx.wait_go():
        return 0
    compiled, compile_error = None, None
    slow = float(opts.get("test_slow_compile_s") or 0) if device == "cpu" else 0.0
    if slow > 0:
        time.sleep(slow)  # test mode only: a compile that takes this long
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
    if compiled is None:
        result["compile"] = None
        result["compile_error"] = compile_error
    else:
        ctx.send({"ev": "timing_ready", "what": "compile"})
        if not ctx.wait_go():
            return 0
        try:
            result["compile"] = measure(compiled)
        except BaseException as e:  # noqa: BLE001
            result["compile"] = None
            result["compile_error"] = errors.shorten(f"{type(e).__name__}: {e}", 1500)
    write_json(os.path.join(ctx.dir, "baseline.json"), result)
    return 0


def footprint_body(ctx, job: dict) -> int:
    """Sizes of one call's inputs, outputs and parameters of every config, on
    the meta device (nothing is allocated); "unknown" where the problem does
    not run there (data-dependent shapes, or a PyTorch without device contexts)."""
    import torch
    res: dict = {"method": "meta", "input_bytes": 0, "output_bytes": 0, "param_bytes": 0}
    try:
        mod = loader.load_problem(job["problem"])
        configs = loader.problem_configs(mod)
        if not hasattr(torch.device("meta"), "__enter__"):
            raise RuntimeError(f"torch {torch.__version__} has no device context manager")
        with torch.device("meta"):
            for cfg in configs:
                C.seed_all(0)
                init = list(cfg["get_init_inputs"]())
                xs = list(cfg["get_inputs"]())
                model = mod.Model(*init)
                with torch.no_grad():
                    out = model(*xs)
                res["input_bytes"] = max(res["input_bytes"], C.tree_nbytes(xs))
                res["output_bytes"] = max(res["output_bytes"], C.tree_nbytes(out))
                res["param_bytes"] = max(res["param_bytes"], sum(p.numel() * p.element_size()
                                                                  for p in list(model.parameters())
                                                                  + list(model.buffers())))
    except BaseException as e:  # noqa: BLE001
        res = {"method": "unknown", "error": errors.shorten(f"{type(e).__name__}: {e}", 300)}
    write_json(os.path.join(ctx.dir, "footprint.json"), res)
    return 0


def _describe_tree(obj) -> str:
    ts = C._tensors_in(obj, [])
    return ", ".join(f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}" for t in ts[:4]) + \
        (f" and {len(ts) - 4} more" if len(ts) > 4 else "")


def problem_check_body(ctx, job: dict) -> int:
    """The pre-flight check of a problem: loads it, checks what
    get_init_inputs() and get_inputs() return, builds Model and runs forward
    once on the device that will evaluate, as an evaluation would (seeded,
    inputs drawn there). Writes problem_check.json: {"ok", "message",
    "output", "seconds"}; "message" names the file and what is wrong."""
    import torch
    _restore_threads()
    C.disable_tf32()
    device = job["device"]
    path = job["problem"]
    name = os.path.basename(path)
    t0 = time.monotonic()
    where = "loading it"

    def fail(msg: str) -> int:
        write_json(os.path.join(ctx.dir, "problem_check.json"),
                   {"ok": False, "message": f"{path}: {msg}", "seconds": round(time.monotonic() - t0, 3)})
        return 0
    try:
        mod = loader.load_problem(path)
        configs = loader.problem_configs(mod)
        try:
            declared = C.problem_tolerance(mod)
        except ValueError as e:
            return fail(str(e))
        descs = []
        for c, cfg in enumerate(configs):
            label = f" (input configuration {c})" if len(configs) > 1 else ""
            where = f"calling get_init_inputs(){label}"
            C.seed_all(0)
            init = cfg["get_init_inputs"]()
            if not isinstance(init, (list, tuple)):
                return fail(f"get_init_inputs(){label} returned a {type(init).__name__}; it must return a list of "
                            f"Model's constructor arguments")
            where = f"calling get_inputs(){label}"
            xs = cfg["get_inputs"]()
            if not isinstance(xs, (list, tuple)):
                return fail(f"get_inputs(){label} returned a {type(xs).__name__}; it must return a list of "
                            f"forward's arguments")
            if not any(isinstance(x, torch.Tensor) for x in xs):
                return fail(f"get_inputs(){label} returned no tensor ({[type(x).__name__ for x in xs]}); forward "
                            f"needs at least one tensor input")
            if c > 0:
                continue  # forward runs once, on the first configuration
            del xs
            xs = C.generate_inputs(cfg, {"seed": 42, "alt": False}, device)
            where = f"building Model(*get_init_inputs()){label}"
            C.seed_all(42)
            model = mod.Model(*init).to(device)
            where = f"running Model.forward once on the {'GPU' if device == 'cuda' else 'CPU'}{label}"
            with torch.no_grad():
                out = model(*xs)
            _sync(device)
            if not C._tensors_in(out, []):
                return fail(f"Model.forward returned {type(out).__name__} and no tensor; it must return a tensor "
                            f"(or a tuple of tensors)")
            descs.append(_describe_tree(out))
            del out, xs, model
    except BaseException as e:  # noqa: BLE001
        return fail(f"the problem failed while {where}: " + errors.trimmed_traceback(e, [path]))
    declares = f"; it declares {C.PROBLEM_TOLERANCE_NAME} = {declared}" if declared else ""
    answer = {"ok": True, "message": f"{name}: loads, and its reference runs ({'; '.join(descs)}){declares}",
              "output": descs, "configs": len(configs), "tolerance": declared}
    if job.get("shapes", "benchmark") != "benchmark":
        # The shape variants (shapes.py), each run by the reference once: those
        # it cannot run are reported now, before any LLM call, and skipped.
        from . import shapes
        try:
            found = shapes.validate(mod, path, device, 42)
            answer["shapes"] = {"benchmark": found["benchmark"], "variants": [v["label"] for v in found["variants"]],
                                "skipped": found["skipped"], "kept": found["kept"], "error": found["error"]}
        except BaseException as e:  # noqa: BLE001
            answer["shapes"] = {"benchmark": "", "variants": [], "skipped": [], "kept": {},
                                "error": "deriving the shape variants failed: " + errors.trimmed_traceback(e, [path])}
    answer["seconds"] = round(time.monotonic() - t0, 3)
    write_json(os.path.join(ctx.dir, "problem_check.json"), answer)
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
