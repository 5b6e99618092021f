"""Nsight Compute's hardware counters for a correct candidate (`profile_ncu`).

The CUPTI profile (runtime_check.py) says how long each kernel ran; Nsight
Compute also says what each kernel did to the hardware: the DRAM bytes it
really moved, how busy the SMs and the memory system were against their
peaks, and the occupancy it achieved. The roofline block of the optimize
prompt then shows measured bytes beside the ones the work model counts.

How it runs: once a candidate is correct and timed, the server forks one more
sandboxed child (same isolation as the candidate's: its own directory,
scrubbed environment, no network, limits) that execs `ncu` on a fresh Python
process (`python -m mkevolve_worker.ncu target JOB`). That process loads the
problem and the candidate, draws inputs with the evaluation's seed, runs two
untimed calls (Triton compiles, autotunes), then one call between
cudaProfilerStart and cudaProfilerStop, which is the only one ncu profiles
(`--profile-from-start off`). ncu flushes the caches before each kernel and
replays it once per group of counters; the clocks are left as they are
(`--clock-control none`). The result is advisory (prompts, reports): it never
changes a verdict, and a failure of ncu is recorded, never charged to the
candidate. Like the CUPTI profile it is written inside the candidate's own
process tree, so a candidate could forge it; it feeds no cheat check.

ncu's front end talks to the profiled process over loopback TCP, so the child
brings the loopback interface up inside its own (empty) network namespace
first: nothing outside the namespace becomes reachable.
"""
from __future__ import annotations

import csv
import glob
import io
import json
import os
import shutil
import sys

# The counters, by what they say. Each kernel row of ncu's raw CSV page has
# one column per metric, in the units of the second row (--print-units base).
METRICS = {
    "gpu__time_duration.sum": "time",
    "dram__bytes_read.sum": "dram_read",
    "dram__bytes_write.sum": "dram_write",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "launch__registers_per_thread": "registers",
}
MAX_KERNELS = 64  # kernels profiled per call at most (--launch-count)

_SCALE = {
    # bytes
    "byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
    "kibyte": 1024.0, "mibyte": 1024.0 ** 2, "gibyte": 1024.0 ** 3,
    # times, to milliseconds
    "nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3,
    "ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3,
    # plain numbers
    "%": 1.0, "": 1.0, "register/thread": 1.0, "register": 1.0,
}


def find_ncu() -> str | None:
    """The ncu executable: $MKEVOLVE_NCU, PATH, then CUDA's usual places."""
    env = os.environ.get("MKEVOLVE_NCU")
    if env:
        return env if os.access(env, os.X_OK) else None
    found = shutil.which("ncu")
    if found:
        return found
    for pat in ("/usr/local/cuda/bin/ncu", "/usr/local/cuda-*/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu"):
        for p in sorted(glob.glob(pat), reverse=True):
            if os.access(p, os.X_OK):
                return p
    return None


def command(ncu: str, log_file: str, python: str, job_file: str) -> list[str]:
    """The command line that profiles one call of the candidate."""
    return [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
            "--csv", "--page", "raw", "--print-units", "base", "--launch-count", str(MAX_KERNELS),
            "--metrics", ",".join(METRICS), "--log-file", log_file,
            python, "-m", "mkevolve_worker.ncu", "target", job_file]


def _number(text: str) -> float | None:
    t = (text or "").strip().replace(",", "")
    if not t or t.lower() in ("n/a", "nan"):
        return None
    try:
        return float(t)
    except ValueError:
        return None


def parse_csv(text: str) -> list[dict]:
    """Kernel rows of ncu's `--csv --page raw` output: [{name, grid, block,
    time_ms, dram_bytes, dram_read_bytes, dram_write_bytes, sm_pct,
    memory_pct, achieved_occupancy_pct, registers}], in launch order. Lines
    before the header ("==PROF==" notes) are skipped; a metric ncu could not
    read is None. Units come from the units row, so a scaled unit
    (Kbyte, usecond) is read right too."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if '"Kernel Name"' in ln or ln.startswith("ID,")), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    if len(rows) < 2:
        return []
    header = rows[0]
    units = rows[1] if len(rows) > 1 and not _is_data_row(rows[1], header) else [""] * len(header)
    body = rows[2:] if units is rows[1] else rows[1:]
    col = {name: i for i, name in enumerate(header)}
    out = []
    for r in body:
        if len(r) != len(header):
            continue

        def get(name):
            return r[col[name]] if name in col else ""

        k = {"name": get("Kernel Name") or get("Function Name") or "?",
             "grid": get("Grid Size"), "block": get("Block Size")}
        vals = {}
        for metric, key in METRICS.items():
            if metric not in col:
                vals[key] = None
                continue
            v = _number(r[col[metric]])
            unit = (units[col[metric]] if col[metric] < len(units) else "").strip().lower()
            scale = _SCALE.get(unit)
            vals[key] = None if v is None or scale is None else v * scale
        rd, wr = vals["dram_read"], vals["dram_write"]
        k.update(time_ms=vals["time"], dram_read_bytes=rd, dram_write_bytes=wr,
                 dram_bytes=None if rd is None or wr is None else rd + wr,
                 sm_pct=vals["sm_pct"], memory_pct=vals["memory_pct"],
                 achieved_occupancy_pct=vals["achieved_occupancy_pct"],
                 registers=None if vals["registers"] is None else int(vals["registers"]))
        out.append(k)
    return out


def _is_data_row(row: list[str], header: list[str]) -> bool:
    """The units row has no kernel name; a data row does."""
    if "Kernel Name" in header:
        i = header.index("Kernel Name")
        return i < len(row) and bool(row[i].strip())
    return False


def summarize(kernels: list[dict], version: str | None) -> dict:
    """checks.ncu: the kernels and one call's totals."""
    def total(key):
        vals = [k[key] for k in kernels if k.get(key) is not None]
        return sum(vals) if vals else None
    t = total("time_ms")
    b = total("dram_bytes")
    return {"source": "Nsight Compute" + (f" {version}" if version else "")
                      + " hardware counters: one call, caches flushed before each kernel, clocks as found",
            "kernels": kernels[:16], "n_kernels": len(kernels),
            "time_ms": t, "dram_bytes": b,
            "dram_gb_s": (b / (t * 1e-3) / 1e9) if t and b is not None else None}


def version(ncu: str) -> str | None:
    import subprocess
    try:
        p = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    for ln in p.stdout.splitlines():
        if ln.strip().startswith("Version"):
            return ln.split()[1]
    return None


def loopback_up() -> bool:
    """Brings `lo` up in this process's network namespace (a fresh, empty one
    in the sandbox): ncu's front end and the profiled process talk over it."""
    import fcntl
    import socket
    import struct
    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            req = struct.pack("16sH22x", b"lo", 0)
            flags = struct.unpack("16sH22x", fcntl.ioctl(s, SIOCGIFFLAGS, req))[1]
            if not flags & IFF_UP:
                fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))
            return True
        finally:
            s.close()
    except OSError:
        return False


def child_body(ctx, job: dict) -> int:
    """In the sandboxed child: writes the job and execs ncu on the target."""
    job_file = os.path.join(ctx.dir, "ncu_job.json")
    with open(job_file, "w") as f:
        json.dump(job, f)
    loopback_up()
    # The same kernels as the timed candidate compiled: fp32 tl.dot as IEEE (spares.Launcher).
    from .spares import TRITON_F32_DEFAULT
    os.environ["TRITON_F32_DEFAULT"] = TRITON_F32_DEFAULT
    args = command(job["ncu"], os.path.join(ctx.dir, "ncu.csv"), sys.executable, job_file)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(args[0], args)
    return 70  # not reached


def target(job_file: str) -> int:
    """The profiled process: two untimed calls, then one call that ncu sees."""
    with open(job_file) as f:
        job = json.load(f)
    import torch
    from . import correctness as C
    from . import loader
    C.disable_tf32()
    prob = loader.load_problem(job["problem"])
    cfg = loader.problem_configs(prob)[0]
    seed = int(job.get("seed", 42))
    C.seed_all(seed)
    init = list(cfg["get_init_inputs"]())
    mod = loader.import_candidate(job["kernel"])
    C.seed_all(seed)
    model = mod.ModelNew(*init).to("cuda")
    xs = C.generate_inputs(cfg, {"seed": seed + 7, "alt": False}, "cuda")
    with torch.no_grad():
        for _ in range(2):
            model(*xs)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        model(*xs)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "target":
        sys.exit(target(sys.argv[2]))
    print("usage: python -m mkevolve_worker.ncu target JOB.json", file=sys.stderr)
    sys.exit(2)
