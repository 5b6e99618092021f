"""Runtime cheat detection: what the GPU actually ran during one forward.

A second candidate process (children.profile_body), started beside the one
that is checked and timed, warms the profiler while it imports and compiles,
then profiles every forward call it makes (as many as the timed process
makes, with CUDA activity: CUPTI sees every stream and every thread of the
process) and lists the GPU activity. judge() then requires:
- every kernel is a Triton kernel defined in the candidate's own files, or a
  copy/fill on a short allow-list (Inductor's, cuBLAS's and cuDNN's kernels do
  not count);
- at least one own Triton launch per forward call;
- no host-to-device copy of result-sized data per call (CPU compute smuggled in).
Under allow_pytorch (Swap's policy) the first two are waived and the result is
marked uses_pytorch instead.
judge() needs no torch, so CPU tests exercise it on recorded kernel lists.
"""

from __future__ import annotations

import json
import os
import re

# Data movement that PyTorch launches for allocation, views and copies.
ALLOWED = (
    "FillFunctor",          # torch.zeros / fill_
    "direct_copy_kernel",   # .contiguous(), .copy_()
    "copy_kernel",          # dtype-converting copies
    "CatArrayBatchedCopy",  # torch.cat / stack
    "Memset",
    "Memcpy DtoD",
    "Memcpy DtoH",
    "Memcpy PtoP",
)

HTOD_FLOOR_BYTES = 1024


def matches_own(name: str, own: set[str]) -> bool:
    """Triton names a kernel after its function (older versions append a
    mangled signature such as _0d1d2de)."""
    if name in own:
        return True
    m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*?)_(\d[0-9a-z]*)$", name)
    return bool(m and m.group(1) in own)


def is_allowed(name: str) -> bool:
    return any(a in name for a in ALLOWED)


def warm_profiler() -> None:
    """An empty profiler session with the same activities as profile_calls, so
    that the next session in this process does not pay the profiler's one-time
    start-up (3.3 s on an H200, docs/PERFORMANCE.md). Errors are ignored: the
    real session reports its own."""
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]):
            torch.cuda.synchronize()
    except Exception:  # noqa: BLE001
        pass


def profile_calls(run, trace_path: str, milestone=lambda what: None) -> list[dict]:
    """Runs run() under the profiler (CUDA activity: CUPTI sees every stream and
    thread of the process); returns the GPU activities. milestone(what) is
    told when the calls are done, the profiler stopped and the trace written."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
        milestone("profiled calls done")
    milestone("profiler stopped")
    prof.export_chrome_trace(trace_path)
    milestone("trace written")
    with open(trace_path, encoding="utf-8", errors="replace") as f:
        trace = json.load(f)
    try:
        os.unlink(trace_path)
    except OSError:
        pass
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    del trace
    acts = []
    for ev in events:
        if not isinstance(ev, dict):
            continue
        cat = str(ev.get("cat", "")).lower()
        if cat not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        args = ev.get("args") or {}
        dur = ev.get("dur")
        acts.append({"name": str(ev.get("name", "")), "cat": cat, "stream": args.get("stream"),
                     "bytes": int(args.get("bytes", 0) or 0),
                     "dur_us": float(dur) if isinstance(dur, (int, float)) else 0.0})
    return aggregate(acts)


def aggregate(acts: list[dict]) -> list[dict]:
    """One record per (name, category, stream) with how many times it ran
    ("count") and its bytes and GPU time summed. A profile of a few hundred
    calls of a kernel that launches many small kernels holds millions of
    activities; summed, its size follows the distinct kernels, not the calls
    (judge and subkernel_runtimes weigh each record by its count)."""
    by_key: dict[tuple, dict] = {}
    for a in acts:
        key = (a.get("name", ""), a.get("cat", "kernel"), a.get("stream"))
        rec = by_key.get(key)
        if rec is None:
            by_key[key] = rec = {"name": key[0], "cat": key[1], "stream": key[2], "bytes": 0, "dur_us": 0.0,
                                 "count": 0}
        rec["count"] += count_of(a)
        rec["bytes"] += int(a.get("bytes", 0) or 0)
        rec["dur_us"] += float(a.get("dur_us") or 0.0)
    return list(by_key.values())


def count_of(a: dict) -> int:
    """How many launches one activity record stands for (1 unless aggregated);
    anything else than a sane positive integer counts once."""
    n = a.get("count", 1)
    return n if isinstance(n, int) and not isinstance(n, bool) and 0 < n < 1 << 40 else 1


def subkernel_runtimes(activities: list[dict], names_by_subkernel: dict[str, set[str]], forwards: int) -> dict:
    """Per subkernel of a composed package, the GPU time of its own Triton
    kernels per forward call (ms), from the profile of `forwards` calls:
    {subkernel: ms}. A kernel name that two subkernel files define is nobody's
    (it cannot be attributed); a subkernel none of whose kernels ran is absent."""
    owner: dict[str, str] = {}
    shared: set[str] = set()
    for sub, names in names_by_subkernel.items():
        for n in names:
            if n in owner and owner[n] != sub:
                shared.add(n)
            owner[n] = sub
    for n in shared:
        owner.pop(n, None)
    total: dict[str, float] = {}
    for a in activities:
        if a.get("cat", "kernel") != "kernel":
            continue
        name = a.get("name", "")
        for n, sub in owner.items():
            if matches_own(name, {n}):
                total[sub] = total.get(sub, 0.0) + float(a.get("dur_us") or 0.0)
                break
    return {sub: round(us / 1000.0 / max(1, forwards), 6) for sub, us in total.items() if us > 0}


def judge(activities: list[dict], own_names: set[str], allow_pytorch: bool, output_nbytes: int,
          forwards: int = 1) -> dict:
    """activities: everything the GPU ran during `forwards` forward calls (and
    the device-to-device refills of their inputs between them)."""
    own, allowed, foreign = [], [], []
    htod = 0
    n_own = n_allowed = n_foreign = 0
    for a in activities:
        name = a.get("name", "")
        cat = a.get("cat", "kernel")
        n = count_of(a)
        if cat == "gpu_memcpy" and "HtoD" in name:
            htod += int(a.get("bytes", 0) or 0)
            continue
        if cat == "kernel" and matches_own(name, own_names):
            own.append(name)
            n_own += n
        elif is_allowed(name) or cat in ("gpu_memset",) or (cat == "gpu_memcpy" and "HtoD" not in name):
            allowed.append(name)
            n_allowed += n
        else:
            foreign.append(name)
            n_foreign += n
    streams = sorted({str(a.get("stream")) for a in activities if a.get("stream") is not None})
    out = {"ok": True, "own_launches": n_own, "own_kernels": sorted(set(own)),
           "allowed_launches": n_allowed, "foreign_kernels": _summarize(foreign),
           "htod_bytes": htod, "streams": streams, "uses_pytorch": False, "reasons": []}
    forwards = max(1, int(forwards))
    out["forwards"] = forwards
    out["kernels"], out["kernel_ms"] = kernel_times(activities, forwards)
    per_forward = htod // forwards
    limit = max(HTOD_FLOOR_BYTES, output_nbytes // 2)
    if per_forward >= limit:
        out.update(ok=False, kind="host_compute")
        out["reasons"].append(
            f"runtime: each forward copied {per_forward} bytes from host to device on average (the output is "
            f"{output_nbytes} bytes): results must be computed on the GPU, not on the CPU and uploaded")
        return out
    if allow_pytorch:
        out["uses_pytorch"] = bool(foreign) or not own
        return out
    calls = "forward" if forwards == 1 else f"{forwards} forward calls"
    if foreign:
        names = ", ".join(_short(n) for n in _summarize(foreign)[:4])
        out.update(ok=False, kind="foreign_kernel")
        out["reasons"].append(
            f"runtime: {calls} launched {n_foreign} GPU kernel(s) that are not Triton kernels defined in the "
            f"candidate's files: {names}. Compute with your own @triton.jit kernels, not PyTorch/cuBLAS/cuDNN ops")
    elif n_own < forwards:
        out.update(ok=False, kind="no_triton_launch")
        what = "forward launched no Triton kernel" if forwards == 1 else \
            f"only {n_own} Triton launches in {forwards} forward calls: some calls launched none"
        out["reasons"].append(
            f"runtime: {what} defined in the candidate's files; the computation must run in your "
            f"@triton.jit kernels on every call")
    return out


def kernel_times(activities: list[dict], forwards: int, top: int = 8) -> tuple[list[dict], float]:
    """Where a forward's GPU time goes, from the profile of `forwards` calls:
    the `top` kernels by time, each {"name", "ms" (per call), "share" (of all
    kernel time), "launches" (per call)}, and the kernel time per call (ms).
    Diagnostics for the roofline block of the optimize prompt."""
    by_name: dict[str, list] = {}
    for a in activities:
        if a.get("cat", "kernel") != "kernel":
            continue
        rec = by_name.setdefault(a.get("name", ""), [0.0, 0])
        rec[0] += float(a.get("dur_us") or 0.0)
        rec[1] += count_of(a)
    total_us = sum(v[0] for v in by_name.values())
    rows = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:top]
    out = [{"name": _short(n), "ms": round(us / forwards / 1e3, 6),
            "share": round(us / total_us, 4) if total_us > 0 else 0.0,
            "launches": round(k / forwards, 3)} for n, (us, k) in rows]
    return out, round(total_us / forwards / 1e3, 6)


def _short(name: str, n: int = 90) -> str:
    return name if len(name) <= n else name[: n - 3] + "..."


def _summarize(names: list[str]) -> list[str]:
    seen = []
    for n in names:
        if n not in seen:
            seen.append(n)
    return seen[:20]


# -- per-subkernel time by module hooks ------------------------------------------------


def _class_file(cls) -> str | None:
    """The real path of the file that defines cls, or None."""
    import sys
    f = getattr(sys.modules.get(getattr(cls, "__module__", None) or ""), "__file__", None)
    return os.path.realpath(f) if isinstance(f, str) else None


class ModuleTimer:
    """Times each subkernel's module calls inside a composed package's forward.

    Hooks (forward pre and post) go on every module whose class is defined in
    one of `files` ({subkernel: path of subkernel_implementations/<name>.py})
    and that is not inside another such module (a subkernel's own helper
    modules are part of it); each call's time is added to its subkernel, over
    all its instances. A call made while another timed call runs is not timed
    again. On the CPU the clock is the wall clock; on the GPU a CUDA
    event pair on the current stream around each call, read once after the
    calls (it includes the GPU's waits for the host's launches inside the call).

    It runs in the profiling process only, never in the timed one. A hook
    never raises: a failure marks the timer broken and its figures unused."""

    def __init__(self, model, files: dict[str, str], device: str):
        self.device = device
        self.broken = False
        self.instances: dict[str, int] = {}
        self._total_ms: dict[str, float] = {}
        self._pairs: list[tuple] = []
        self._stack: list = []
        self._handles: list = []
        by_path = {os.path.realpath(p): n for n, p in files.items()}
        found = [(m, by_path.get(_class_file(type(m)) or "")) for m in model.modules()]
        found = [(m, n) for m, n in found if n is not None]
        # A subkernel's own helper modules (inside another found one) are part of it.
        inner = {id(c) for m, _ in found for c in m.modules() if c is not m}
        for m, name in found:
            if id(m) in inner:
                continue
            self.instances[name] = self.instances.get(name, 0) + 1
            self._handles.append(m.register_forward_pre_hook(self._pre(name)))
            self._handles.append(m.register_forward_hook(self._post()))

    def _now(self):
        if self.device == "cuda":
            import torch
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        import time
        return time.perf_counter()

    def _pre(self, name: str):
        def hook(module, args):
            try:
                self._stack.append(None if self._stack else (name, self._now()))
            except Exception:  # noqa: BLE001
                self.broken = True
                self._stack.append(None)
            return None
        return hook

    def _post(self):
        def hook(module, args, output):
            try:
                top = self._stack.pop() if self._stack else None
                if top is not None:
                    name, start = top
                    end = self._now()
                    if self.device == "cuda":
                        self._pairs.append((name, start, end))
                    else:
                        self._total_ms[name] = self._total_ms.get(name, 0.0) + (end - start) * 1e3
            except Exception:  # noqa: BLE001
                self.broken = True
            return None
        return hook

    def result(self) -> dict:
        """{"ms": {subkernel: total ms over every call}, "instances", "clock"};
        {} when broken. Removes the hooks."""
        for h in self._handles:
            h.remove()
        self._handles = []
        if self.broken or self._stack:
            return {}
        total = dict(self._total_ms)
        if self.device == "cuda":
            try:
                import torch
                torch.cuda.synchronize()
                for name, s, e in self._pairs:
                    total[name] = total.get(name, 0.0) + float(s.elapsed_time(e))
            except Exception:  # noqa: BLE001
                return {}
        return {"ms": total, "instances": dict(self.instances),
                "clock": "cuda events" if self.device == "cuda" else "cpu wall clock"}


def module_runtimes(record, subkernels, forwards: int) -> dict:
    """Per subkernel, ms per forward call from a ModuleTimer result that the
    (untrusted) profiling process wrote: only known subkernels, finite
    non-negative figures; positive entries only."""
    if not isinstance(record, dict) or not isinstance(record.get("ms"), dict):
        return {}
    out = {}
    for name, ms in record["ms"].items():
        if name in subkernels and isinstance(ms, (int, float)) and not isinstance(ms, bool) and 0 < ms < 1e12:
            out[name] = round(float(ms) / max(1, int(forwards)), 6)
    return {k: v for k, v in out.items() if v > 0}


def choose_subkernel_runtimes(subkernels, profile: dict, modules: dict) -> tuple[dict, str]:
    """Which per-subkernel figures a composed package reports, and their source.
    The profile's attribution (GPU time of each file's own kernels) when it
    covers every subkernel; else the module timing when that does (one clock
    for all: a kernel name two files define, or a PyTorch subkernel, leaves
    the profile short); else whatever the profile attributed."""
    subs = set(subkernels)
    if profile and subs <= set(profile):
        return dict(profile), "profile"
    if modules and subs <= set(modules):
        return dict(modules), "modules"
    if profile:
        return dict(profile), "profile"
    return {}, ""
