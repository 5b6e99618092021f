"""Diagnostics (GPU): where a candidate's evaluation time goes, and why the same
kernel times differently in two processes.

    python3 scripts/probe_eval_costs.py [--reps 3] [--json-out FILE]

The parent imports torch and Triton once and never touches CUDA; every
measurement runs in a child forked from it, like the worker's candidate
children. Each child loads one example kernel, compiles it with one forward,
then does what its mode says and times the kernel with the worker's own
timing code (timing.time_cuda: 10 warm-up + 100 timed calls, L2 flushed):

  plain        time, then time again in the same process
  profiled     profile one forward as the worker does (timings of the
               profiler's start, stop, export and parse), then time twice
  cuda_only    the same with only CUDA activity in the profiler
  warm_only    an empty profiler session, then time
  bg_warm      the empty session on a thread while the main thread compiles
  fed          a short device-side spin before every start event, so the
               host's launch time is hidden behind queued GPU work
  long_warm    warm-up until the GPU has been busy 300 ms, then time
  cupti_raw    CUPTI itself through ctypes, without the torch profiler: the
               cost of subscribing to driver-API callbacks (kernel names at
               launch) and of enabling kernel activity records

Per child it also records the host time of launching 20 forwards without a
sync (launch overhead; CUPTI left attached would show here) and the GPU's SM
clock and temperature after timing (nvidia-smi, read only). Nothing is
asserted: this measures.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "worker"))

P = os.path.join(ROOT, "examples", "problems")
K = os.path.join(ROOT, "examples", "kernels")
KERNELS = [("05_layernorm_residual", "05_layernorm_residual__rowwise"), ("03_linear_gelu", "03_linear_gelu__tiled")]
MODES = ["plain", "profiled", "cuda_only", "warm_only", "bg_warm", "fed", "long_warm", "cupti_raw"]


def nvsmi() -> dict:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,temperature.gpu,power.draw",
                              "--format=csv,noheader,nounits", "-i", "0"], capture_output=True, text=True,
                             timeout=10).stdout.strip().split(",")
        return {"sm_mhz": float(out[0]), "max_sm_mhz": float(out[1]), "temp_c": float(out[2]),
                "power_w": float(out[3])}
    except Exception as e:  # noqa: BLE001
        return {"error": str(e)[:200]}


def stats(times: list[float]) -> dict:
    xs = sorted(times)
    n = len(xs)
    return {"median": statistics.median(xs), "min": xs[0], "p10": xs[n // 10], "p90": xs[(9 * n) // 10],
            "first_half": statistics.median(times[: n // 2]), "second_half": statistics.median(times[n // 2:])}


def child(mode: str, problem: str, kernel: str) -> dict:
    import torch
    from mkevolve_worker import correctness as C
    from mkevolve_worker import loader, runtime_check, timing
    rec: dict = {"mode": mode, "kernel": kernel}
    t0 = time.perf_counter()
    bg = None
    if mode == "bg_warm":
        torch.cuda.init()
        bg = threading.Thread(target=runtime_check.warm_profiler)
        bg.start()
    C.disable_tf32()
    pmod = loader.load_problem(os.path.join(P, problem + ".py"))
    kmod = loader.import_candidate(os.path.join(K, kernel + ".py"))
    C.seed_all(0)
    init = list(pmod.get_init_inputs())
    pool = []
    for s in range(5):
        C.seed_all(100 + s)
        pool.append([x.cuda() if isinstance(x, torch.Tensor) else x for x in pmod.get_inputs()])
    C.seed_all(0)
    model = kmod.ModelNew(*init).cuda()
    rec["cuda_init_s"] = round(time.perf_counter() - t0, 3)
    bufs = [x.clone() if isinstance(x, torch.Tensor) else x for x in pool[0]]

    def call():
        with torch.no_grad():
            return model(*bufs)
    t = time.perf_counter()
    call()
    torch.cuda.synchronize()
    rec["first_forward_s"] = round(time.perf_counter() - t, 3)
    if bg is not None:
        bg.join()
        rec["bg_warm_joined_s"] = round(time.perf_counter() - t0, 3)

    def launch_us() -> float:
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(20):
            call()
        dt = (time.perf_counter() - t) / 20 * 1e6
        torch.cuda.synchronize()
        return round(dt, 1)
    rec["launch_us_before"] = launch_us()
    if mode in ("profiled", "cuda_only", "bg_warm"):
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CUDA] if mode == "cuda_only" else [ProfilerActivity.CPU, ProfilerActivity.CUDA]
        torch.cuda.synchronize()
        t = time.perf_counter()
        prof = profile(activities=acts)
        prof.__enter__()
        t1 = time.perf_counter()
        call()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        prof.__exit__(None, None, None)
        t3 = time.perf_counter()
        path = os.path.join(tempfile.mkdtemp(prefix="probe-"), "trace.json")
        prof.export_chrome_trace(path)
        t4 = time.perf_counter()
        with open(path) as f:
            n_events = len(json.load(f).get("traceEvents", []))
        t5 = time.perf_counter()
        rec["profile_s"] = {"enter": round(t1 - t, 3), "forward": round(t2 - t1, 3), "exit": round(t3 - t2, 3),
                            "export": round(t4 - t3, 3), "parse": round(t5 - t4, 3), "events": n_events}
    elif mode == "cupti_raw":
        rec["cupti"] = cupti_raw(call)
    elif mode == "warm_only":
        t = time.perf_counter()
        runtime_check.warm_profiler()
        rec["warm_s"] = round(time.perf_counter() - t, 3)
    rec["launch_us_after"] = launch_us()
    refill = timing.make_refill(bufs, pool, pool[-1])
    flush, _ = timing.l2_flush_buffer("cuda")
    if mode == "long_warm":
        torch.cuda.synchronize()
        t = time.perf_counter()
        n = 0
        while time.perf_counter() - t < 0.3:
            refill(n, False)
            flush.zero_()
            call()
            torch.cuda.synchronize()
            n += 1
        rec["long_warm_calls"] = n
    runs = []
    for _ in range(2):
        if mode == "fed":
            times = time_fed(call, refill, 10, 100, flush)
        else:
            times, _, _ = timing.time_cuda(call, refill, 10, 100, flush, fed=False)
        runs.append(stats(times))
    rec["runs"] = runs
    rec["gpu"] = nvsmi()
    rec["total_s"] = round(time.perf_counter() - t0, 3)
    return rec


def cupti_raw(call) -> dict:
    """Times CUPTI's callback API (what a launch-name check would need) and its
    activity API (what kineto uses) separately, in this CUDA process."""
    import ctypes
    import glob
    import torch
    out: dict = {}
    maps = open("/proc/self/maps").read()
    loaded = sorted({line.split()[-1] for line in maps.splitlines() if "libcupti" in line})
    out["already_loaded"] = loaded
    cands = loaded or sorted(glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "**",
                                                    "libcupti.so*"), recursive=True))
    if not cands:
        return {"error": "no libcupti found", **out}
    t = time.perf_counter()
    lib = ctypes.CDLL(cands[0])
    out["lib"] = cands[0]
    out["dlopen_s"] = round(time.perf_counter() - t, 4)
    names: list = []
    CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)

    def on_cb(_u, domain, cbid, data):
        if not data:
            return
        site = ctypes.cast(data, ctypes.POINTER(ctypes.c_int))[0]
        if site != 0:
            return
        sym = ctypes.cast(data + 32, ctypes.POINTER(ctypes.c_char_p))[0]
        fn = ctypes.cast(data + 8, ctypes.POINTER(ctypes.c_char_p))[0]
        if sym:
            names.append(((fn or b"").decode(errors="replace"), sym.decode(errors="replace")[:80]))
    cb = CB(on_cb)
    sub = ctypes.c_void_p()
    t = time.perf_counter()
    r1 = lib.cuptiSubscribe(ctypes.byref(sub), cb, None)
    r2 = lib.cuptiEnableDomain(1, sub, 1)  # CUPTI_CB_DOMAIN_DRIVER_API
    out["subscribe_enable_s"] = round(time.perf_counter() - t, 4)
    out["rc"] = [r1, r2]
    t = time.perf_counter()
    call()
    torch.cuda.synchronize()
    out["forward_s"] = round(time.perf_counter() - t, 4)
    out["launches"] = names[:12]
    out["n_launches"] = len(names)
    t = time.perf_counter()
    lib.cuptiEnableDomain(0, sub, 1)
    lib.cuptiUnsubscribe(sub)
    out["unsubscribe_s"] = round(time.perf_counter() - t, 4)
    BUFREQ = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                              ctypes.POINTER(ctypes.c_size_t))
    BUFDONE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                               ctypes.c_size_t)
    keep = []

    def req(buf, size, maxrec):
        b = ctypes.create_string_buffer(1 << 20)
        keep.append(b)
        buf[0] = ctypes.cast(b, ctypes.c_void_p)
        size[0] = 1 << 20
        maxrec[0] = 0
    done_n = []

    def done(ctx, sid, buf, size, valid):
        done_n.append(valid)
    rq, dn = BUFREQ(req), BUFDONE(done)
    t = time.perf_counter()
    r3 = lib.cuptiActivityRegisterCallbacks(rq, dn)
    r4 = lib.cuptiActivityEnable(10)  # CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
    out["activity_enable_s"] = round(time.perf_counter() - t, 4)
    call()
    torch.cuda.synchronize()
    t = time.perf_counter()
    lib.cuptiActivityFlushAll(0)
    lib.cuptiActivityDisable(10)
    out["activity_flush_s"] = round(time.perf_counter() - t, 4)
    out["activity_rc"] = [r3, r4]
    out["activity_bytes"] = sum(done_n)
    return out


def time_fed(call, refill, warmup: int, trials: int, flush) -> list[float]:
    """timing.time_cuda with a ~200 us device-side spin queued before each start
    event: the host's launch of the call overlaps the spin."""
    import torch
    for i in range(warmup):
        refill(i + 1, False)
        call()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(trials)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(trials)]
    for i in range(trials):
        refill(i, i == trials - 1)
        flush.zero_()
        torch.cuda._sleep(400_000)
        starts[i].record()
        call()
        ends[i].record()
        torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def run_forked(mode: str, problem: str, kernel: str, timeout: float = 120) -> dict:
    fd, path = tempfile.mkstemp(prefix="probe-", suffix=".json")
    os.close(fd)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            rec = child(mode, problem, kernel)
        except BaseException as e:  # noqa: BLE001
            rec = {"mode": mode, "kernel": kernel, "error": f"{type(e).__name__}: {e}"[:500]}
            code = 1
        with open(path, "w") as f:
            json.dump(rec, f)
        os._exit(code)
    t = time.monotonic()
    while time.monotonic() - t < timeout:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        return {"mode": mode, "kernel": kernel, "error": "timeout"}
    with open(path) as f:
        text = f.read()
    os.unlink(path)
    return json.loads(text) if text else {"mode": mode, "kernel": kernel, "error": "no result"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--json-out")
    args = ap.parse_args()
    t = time.perf_counter()
    import torch  # noqa: F401
    import triton  # noqa: F401
    print(f"import torch+triton: {time.perf_counter() - t:.2f} s (parent, once)", flush=True)
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="probe-triton-"))
    recs = []
    modes = args.modes.split(",")
    for rep in range(args.reps):
        for problem, kernel in KERNELS:
            for mode in modes:  # interleaved, so drift over time does not favour one mode
                r = run_forked(mode, problem, kernel)
                r["rep"] = rep
                recs.append(r)
                runs = r.get("runs") or [{}]
                print(json.dumps({k: r.get(k) for k in ("kernel", "mode", "rep", "error", "cuda_init_s",
                                                        "first_forward_s", "profile_s", "warm_s", "bg_warm_joined_s",
                                                        "launch_us_before", "launch_us_after", "gpu", "cupti")}
                                 | {"median_ms": [round(x.get("median", 0), 4) for x in runs],
                                    "min_ms": [round(x.get("min", 0), 4) for x in runs],
                                    "halves_ms": [[round(x.get("first_half", 0), 4), round(x.get("second_half", 0), 4)]
                                                  for x in runs]}), flush=True)
    print("\nsummary: median of the first timing per process (ms), by kernel and mode")
    for _, kernel in KERNELS:
        for mode in modes:
            meds = [r["runs"][0]["median"] for r in recs if r.get("kernel") == kernel and r.get("mode") == mode
                    and r.get("runs")]
            if meds:
                spread = (max(meds) - min(meds)) / max(meds) * 100
                print(f"  {kernel:34s} {mode:10s} " + " ".join(f"{m:.4f}" for m in meds)
                      + f"   spread {spread:.1f}%")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(recs, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
