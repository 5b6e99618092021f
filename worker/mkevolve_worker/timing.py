"""GPU timing with CUDA events (runs inside a forked child).

Per timed call: refill the SAME input buffers with new values (outside the
timed window), flush L2 by writing a buffer several times larger than L2,
queue a short device-side spin (so the host has launched the call before the
GPU reaches the start event: GPU time, not the host's launch jitter), record a
start event, call, record an end event, synchronize. A second, shorter series
without the spin records the host-inclusive ("synced") time, KernelBench's
way; the wall-clock cross-check compares against that one. The inputs of
the last timed call are fixed by a seed both children know, and its output is
handed back so the server can check it: a kernel that caches results keyed
on buffer addresses returns a stale output there.

Then a wall-clock batch: the child sends begin/end markers around K
synchronized calls over a pipe and the server stamps them with its own clock
(see wall_clock_verdict); event time that hides work (side streams, patched
timers) shows up as wall time far above event time.
"""

from __future__ import annotations

import math
import statistics


def summarize(times_ms: list[float]) -> dict:
    return {"median": statistics.median(times_ms), "mean": statistics.fmean(times_ms),
            "min": min(times_ms), "max": max(times_ms), "n": len(times_ms)}


def spread(times_ms: list[float]) -> dict:
    """How the timed calls were distributed, for diagnosing unstable timings:
    percentiles, and the medians of the first and second half in call order (a
    first half much slower than the second points at clocks still ramping up)."""
    xs = sorted(times_ms)
    n = len(xs)

    def pct(p: float) -> float:
        return xs[min(n - 1, max(0, round(p / 100 * (n - 1))))]
    half = n // 2
    out = {"p10_ms": pct(10), "p25_ms": pct(25), "p75_ms": pct(75), "p90_ms": pct(90)}
    if half >= 1:
        out["first_half_median_ms"] = statistics.median(times_ms[:half])
        out["second_half_median_ms"] = statistics.median(times_ms[half:])
    return out


def l2_flush_buffer(device):
    """A buffer at least 4x the L2 size (and at least 256 MiB)."""
    import torch
    l2 = 0
    try:
        props = torch.cuda.get_device_properties(device)
        l2 = int(getattr(props, "L2_cache_size", 0) or getattr(props, "l2_cache_size", 0) or 0)
    except Exception:  # noqa: BLE001
        l2 = 0
    nbytes = max(256 << 20, 4 * l2)
    return torch.empty(nbytes // 4, dtype=torch.int32, device=device), nbytes


POOL_BYTES = 1 << 30   # the input sets the timed calls refill from stay on the GPU: at most this much of them


def pool_size(n_sets: int, set_bytes: int, pool_bytes: int = 0) -> int:
    """How many input sets the timed calls refill from: all n_sets while they
    fit in POOL_BYTES, fewer (at least one) when one set is large."""
    return max(1, min(n_sets, (pool_bytes or POOL_BYTES) // max(1, set_bytes)))


def in_place(set_bytes: int, pool_bytes: int = 0) -> bool:
    """Whether one call's inputs are large enough to be timed in place: more
    than half of POOL_BYTES (the pool holds one set then anyway). In place,
    every process holds one copy of the inputs (docs/EVAL.md, Device memory
    of one evaluation): the candidate's timed calls read one set of buffers
    without refilling them between calls (the L2 flush buffer evicts the
    cache), and only the last call's inputs are copied in, from the
    reference's copy; the reference computes each trial on the very copy it
    hands over, before handing it over."""
    return set_bytes > (pool_bytes or POOL_BYTES) // 2


def pool_bytes_of(opts: dict, test_mode: bool) -> int:
    """POOL_BYTES, or the test-only option test_pool_bytes in test mode (so
    that CPU tests reach the in-place path with small inputs)."""
    v = int(opts.get("test_pool_bytes") or 0) if test_mode else 0
    return v if v > 0 else POOL_BYTES


def make_refill(buffers: list, pool: list[list], last: list, seed_last=None, in_place: bool = False):
    """refill(i, is_last): copies pool[i % len(pool)] (or last) into the input
    buffers in place. Before the last call, seed_last() (when given) seeds the
    random generators as the reference seeded them for that call's expected
    output, so a module that draws random numbers (Dropout in training mode)
    is compared on the same draw. Outside the timed region: refill runs before
    each call's start event. in_place: the calls before the last read the
    buffers as they are (pool[0]'s values, copied in once by the caller), and
    only the last call's inputs are copied in (large inputs, in_place())."""
    import torch
    from .layouts import copy_into
    state = {"last": False}

    def refill(i: int, is_last: bool) -> None:
        if in_place and not is_last:
            if not state["last"]:
                return
            src = pool[0]  # a series after the last call: back to the first set
        else:
            src = last if is_last else pool[i % len(pool)]
        state["last"] = is_last
        for b, s in zip(buffers, src):
            if isinstance(b, torch.Tensor) and isinstance(s, torch.Tensor):
                copy_into(b, s)  # in place: the buffers keep their layout (strides, broadcast dims)
        if is_last and seed_last is not None:
            seed_last()
    return refill


# The device-side spin before each start event: long enough that the host has
# launched the whole call before the GPU reaches the start event, so events
# measure GPU time rather than the host's launch latency (which varied by
# 40-80 us between processes on one H200 host, enough to move a 0.43 ms GEMM's
# median by 3-17%; docs/PERFORMANCE.md). Both ends are clamped: the spin is paid
# 100 times per eval.
SPIN_MIN_MS = 0.1
SPIN_MAX_MS = 20.0
SYNCED_TRIALS = 30   # host-inclusive calls recorded beside the device timing


def spin_cycles_per_ms() -> float:
    """torch.cuda._sleep counts GPU clock cycles; calibrate them against events."""
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = 0.0
    for _ in range(2):  # the first call may load the spin kernel
        torch.cuda.synchronize()
        start.record()
        torch.cuda._sleep(1_000_000)
        end.record()
        end.synchronize()
        ms = start.elapsed_time(end)
    return 1_000_000 / ms if ms > 0 else 2_000_000.0


def spin_ms_for(host_launch_ms: float) -> float:
    return min(SPIN_MAX_MS, max(SPIN_MIN_MS, 3 * host_launch_ms + 0.05))


def time_cuda(call, refill, warmup: int, trials: int, flush, fed: bool = True) -> tuple[list[float], object, dict]:
    """Returns (per-call event times in ms, output of the last timed call, info).

    fed=True (the default, "device" timing): each start event is queued behind
    a device-side spin sized from the call's host launch time, measured during
    warm-up, so the times are the GPU's. fed=False ("synced"): the GPU is idle
    when each call is launched, so the times include the host's launch
    latency, as KernelBench measures; that is also what the wall-clock
    cross-check compares against."""
    import time
    import torch
    host: list[float] = []
    for i in range(warmup):
        refill(i + 1, False)
        torch.cuda.synchronize()
        t = time.perf_counter()
        call()
        host.append((time.perf_counter() - t) * 1e3)
        torch.cuda.synchronize()
    torch.cuda.synchronize()
    info: dict = {"mode": "device" if fed else "synced"}
    cycles = 0
    if fed:
        tail = sorted(host[1:] or host)
        host_ms = tail[len(tail) // 2] if tail else 0.0
        spin_ms = spin_ms_for(host_ms)
        cycles = int(spin_ms * spin_cycles_per_ms())
        # The spin is capped (SPIN_MAX_MS): a call whose host launch takes longer
        # (hundreds of small kernels, an unrolled recurrent layer) starves the
        # GPU mid-call, so its "GPU time" includes host time and moves with the
        # host's load. Say so rather than let such a time pass as the GPU's.
        info.update(host_launch_ms=host_ms, spin_ms=spin_ms, launch_bound=bool(host_ms > spin_ms))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(trials)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(trials)]
    out = None
    for i in range(trials):
        refill(i, i == trials - 1)
        flush.zero_()
        if cycles:
            torch.cuda._sleep(cycles)
        out = None  # one call's output at a time: the previous one is freed before the next call
        starts[i].record()
        out = call()
        ends[i].record()
        torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)], out, info


def time_cuda_with_synced(call, refill, warmup: int, trials: int, flush, mode: str, take_out=None):
    """The speed series in `mode` ("device" or "synced") and, beside it, the
    synced series the wall-clock check and the records use (the same list when
    mode is "synced"). Returns (times, output of the last timed call, info,
    synced times). take_out(out) (when given) takes the last timed call's
    output before the synced series runs (to the host): the device then never
    holds it beside the synced calls' outputs."""
    fed = mode == "device"
    times, out, info = time_cuda(call, refill, warmup, trials, flush, fed=fed)
    if take_out is not None:
        out = take_out(out)
    synced = time_cuda(call, refill, 0, SYNCED_TRIALS, flush, fed=False)[0] if fed else times
    return times, out, info, synced


def wall_batch_size(event_median_ms: float) -> int:
    """Enough calls that the batch lasts ~25 ms, so scheduling jitter averages out."""
    if event_median_ms <= 0:
        return 50
    return int(min(1000, max(10, math.ceil(25.0 / event_median_ms))))


WALL_REPEATS = 3
WALL_MAX_ROUNDS = 4


def wall_batches(ctx, call, n: int, repeats: int = WALL_REPEATS, sync=None, probe=None,
                 max_rounds: int = WALL_MAX_ROUNDS, synced_median_ms: float | None = None):
    """Null and model batches, each between markers, in rounds of `repeats`;
    the server uses the fastest repeat of each (a preemption inflates one,
    hidden work all). A null call launches a one-element kernel and
    synchronizes: it pays the submission and completion latency that every
    synchronized call pays but events miss. After each round the child waits
    for the server: another round ("g") while the check fails and rounds are
    left (other processes' GPU or CPU work can inflate every repeat of one
    round; work the events miss inflates them all), else stop."""
    import torch
    sync = sync or torch.cuda.synchronize
    probe = probe if probe is not None else torch.zeros(1, device="cuda")
    out = None
    for rnd in range(max_rounds):
        for i in range(repeats):
            rep = rnd * repeats + i
            sync()
            ctx.send({"ev": "wall", "mark": "begin", "batch": "null", "rep": rep, "n": n})
            for _ in range(n):
                probe.zero_()
                sync()
            ctx.send({"ev": "wall", "mark": "end", "batch": "null", "rep": rep, "n": n})
            ctx.send({"ev": "wall", "mark": "begin", "batch": "model", "rep": rep, "n": n})
            for _ in range(n):
                out = None  # one output at a time on the device
                out = call()
                sync()
            ctx.send({"ev": "wall", "mark": "end", "batch": "model", "rep": rep, "n": n})
        ctx.send({"ev": "wall", "mark": "round_end", "round": rnd, "synced_median_ms": synced_median_ms})
        # The server answers every round, the last one too ("stop"): its
        # answer is read here, or it would be read as the answer to the
        # next thing this child waits for (the hand-over of this output).
        if not ctx.wait_go() or rnd + 1 == max_rounds:
            break
    return out


class WallRounds:
    """The server's side of the rounds of wall-clock batches. It counts the
    rounds itself and answers each once, in order: "go" (another round)
    while the check fails and rounds are left, else "stop". An end of round
    out of order, repeated or after the last answer gets None (no answer):
    made-up events cannot buy a child time. The median is the child's word
    here; the verdict itself takes it from timing.json."""

    def __init__(self):
        self.rounds = 0
        self.done = False

    def answer(self, events: list[dict], ev: dict) -> str | None:
        if self.done or ev.get("round") != self.rounds or isinstance(ev.get("round"), bool):
            return None
        self.rounds += 1
        sm = ev.get("synced_median_ms")
        more = False
        if self.rounds < WALL_MAX_ROUNDS and isinstance(sm, (int, float)) and not isinstance(sm, bool) and sm > 0:
            w = wall_clock_verdict(events, float(sm))
            more = w is not None and not w["ok"]
        if not more:
            self.done = True
        return "go" if more else "stop"


def wall_clock_verdict(events: list[dict], event_median_ms: float) -> dict | None:
    """The server's check of a child's wall-clock batches (timestamps are ours).

    Event time covers everything between the start and end records, including
    host time spent launching, so a synchronized call can only take longer by
    the submission/completion latency of a launch (the null batch measures it:
    ~15-20 us per call on an H200) and noise. Rule, on the fastest repeat of
    each batch: flag when per-call wall time > 1.3 x event median + 2 x null
    per-call + 0.02 ms. The batches run without an L2 flush, so honest kernels
    are usually faster there than under events; work that events do not see
    (side streams, faked timers) is what pushes wall time above the bound.
    """
    begins: dict[tuple, float] = {}
    per_call: dict[str, list[float]] = {"null": [], "model": []}
    n_of: dict[str, int] = {}
    for ev in events:
        batch, mark, rep, n = ev.get("batch"), ev.get("mark"), ev.get("rep", 0), ev.get("n")
        if ev.get("ev") != "wall" or batch not in per_call or mark not in ("begin", "end"):
            continue
        if not isinstance(n, int) or n <= 0 or not isinstance(rep, int):
            continue
        key = (batch, rep)
        if mark == "begin":
            begins.setdefault(key, ev["_t"])
        elif key in begins and len(per_call[batch]) < 16:
            per_call[batch].append(max(0.0, (ev["_t"] - begins.pop(key)) * 1e3 / n))
            n_of[batch] = n
    if not per_call["null"] or not per_call["model"]:
        return None
    null_ms = min(per_call["null"])
    model_ms = min(per_call["model"])
    threshold = 1.3 * event_median_ms + 2 * null_ms + 0.02
    return {"per_call_ms": model_ms, "event_median_ms": event_median_ms, "null_per_call_ms": null_ms,
            "threshold_ms": threshold, "calls": n_of["model"], "repeats": len(per_call["model"]),
            "ok": model_ms <= threshold}


def time_cpu(call, refill, warmup: int, trials: int) -> tuple[list[float], object]:
    """Wall-clock timing on CPU (test mode only; no L2 flush, no events)."""
    import time
    for i in range(warmup):
        refill(i + 1, False)
        call()
    times = []
    out = None
    for i in range(trials):
        refill(i, i == trials - 1)
        t0 = time.perf_counter()
        out = call()
        times.append((time.perf_counter() - t0) * 1e3)
    return times, out
