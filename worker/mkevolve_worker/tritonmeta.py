"""Registers, spills and occupancy of a candidate's compiled Triton kernels.

After its profiled burst, the profiling process (children.profile_body) walks
the globals of the candidate's own modules for Triton JIT functions and reads
the compile metadata of every kernel they compiled: registers per thread,
spilled registers, shared memory, warps and pipeline stages, plus an
occupancy estimate from the GPU's per-SM limits. The optimize prompt reads
them from checks.runtime.triton_kernels ("spills and occupancy").

Everything is duck-typed and defensive: triton is never imported (the CPU
test machine has none), a broken or hostile object is skipped, and nothing
here can fail a candidate. Triton 3.x layout (3.2-3.6):
  JITFunction.device_caches: {device: (kernel_cache, ...)}, kernel_cache a
    dict {key: CompiledKernel};
  Autotuner / Heuristics: .fn is the wrapped JITFunction (or another wrapper);
  CompiledKernel: .metadata (namedtuple: name, num_warps, num_stages, shared),
    .name, and .n_regs / .n_spills, set by ._init_handles() (on first launch).
Triton 3.0/3.1's JITFunction.cache {device: {key: CompiledKernel}} and 2.x's
dict metadata are read too. Never touched: CompiledKernel.run (a property
that loads the binary) and anything that launches.
"""

from __future__ import annotations

import numbers
import os
import re
import sys
import types

MAX_KERNELS = 16
MAX_NAME = 90
MAX_WRAP_DEPTH = 8
SOURCE = "triton compile metadata"

# H100/H200 (sm_90): 64K registers, 2048 threads (64 warps), 228 KiB of shared
# memory and 32 resident blocks per SM, 1 KiB of shared memory reserved per
# block by the system (sm_80 and later).
DEFAULT_LIMITS = {"regs_per_sm": 65536, "max_warps_per_sm": 64, "smem_per_sm": 233472,
                  "max_blocks_per_sm": 32, "reserved_smem_per_block": 1024}
DEFAULTS_SOURCE = "defaults (H100/H200)"
DEVICE_SOURCE = "device properties"
LIMITED_BY = ("warps", "registers", "shared memory", "blocks per SM")


def _get(obj, name, default=None):
    """getattr that never raises (a property or __getattr__ may)."""
    try:
        return getattr(obj, name, default)
    except Exception:  # noqa: BLE001
        return default


def _int(x):
    """x as a non-negative int when it is an integer (not a bool), else None."""
    try:
        if isinstance(x, bool) or not isinstance(x, numbers.Integral):
            return None
        v = int(x)
    except Exception:  # noqa: BLE001
        return None
    return v if 0 <= v < 1 << 40 else None


def _meta(md, key):
    """metadata.key: a namedtuple (3.x) or a dict (2.x)."""
    if isinstance(md, dict):
        try:
            return md.get(key)
        except Exception:  # noqa: BLE001
            return None
    return _get(md, key)


def _dict_items(d) -> list:
    try:
        return list(d.items()) if isinstance(d, dict) else []
    except Exception:  # noqa: BLE001
        return []


def _jit_of(obj):
    """The JIT function behind obj (itself, or through Autotuner/Heuristics
    .fn wrappers, possibly nested), or None."""
    try:
        return _jit_of_unchecked(obj)
    except Exception:  # noqa: BLE001
        return None


def _jit_of_unchecked(obj):
    seen = 0
    while obj is not None and seen <= MAX_WRAP_DEPTH:
        if isinstance(obj, (type, types.ModuleType)):
            return None
        if isinstance(_get(obj, "device_caches"), dict):
            return obj
        cache = _get(obj, "cache")
        if isinstance(cache, dict) and _get(obj, "arg_names") is not None and \
                any(isinstance(v, dict) for _, v in _dict_items(cache)):
            return obj  # Triton 3.0/3.1: cache {device: {key: CompiledKernel}}
        obj = _get(obj, "fn")
        seen += 1
    return None


def _compiled_kernels(jit) -> list:
    caches = []
    dc = _get(jit, "device_caches")
    if isinstance(dc, dict):
        for _, entry in _dict_items(dc):
            try:
                first = entry[0] if isinstance(entry, (tuple, list)) and entry else entry
            except Exception:  # noqa: BLE001
                continue
            caches.append(first)
    else:
        caches += [v for _, v in _dict_items(_get(jit, "cache"))]
    out = []
    for c in caches:
        out += [k for _, k in _dict_items(c)]
    return out


def _kernel_record(k) -> dict | None:
    md = _get(k, "metadata")
    if md is None and _get(k, "n_regs") is None:
        return None  # not a compiled kernel
    n_regs = _int(_get(k, "n_regs"))
    if n_regs is None and callable(_get(k, "_init_handles")):
        try:
            k._init_handles()  # loads the binary; a kernel that ran has done it already
        except Exception:  # noqa: BLE001
            pass
        n_regs = _int(_get(k, "n_regs"))
    name = _meta(md, "name") if md is not None else None
    if not isinstance(name, str) or not name:
        name = _get(k, "name")
    if not isinstance(name, str) or not name:
        return None

    def field(key):
        v = _int(_meta(md, key)) if md is not None else None
        return v if v is not None else _int(_get(k, key))  # 2.x kept them on the kernel too
    return {"name": clean_name(name), "n_regs": n_regs, "n_spills": _int(_get(k, "n_spills")),
            "shared_bytes": field("shared"), "num_warps": field("num_warps"), "num_stages": field("num_stages")}


def clean_name(name: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.$]", "_", str(name))
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 3] + "..."


def own_modules(files, extra=()) -> list:
    """The loaded modules whose file is one of files (the candidate's own,
    loader.loaded_own_files), plus extra (the imported candidate module)."""
    wanted = set()
    for f in files or ():
        try:
            wanted.add(os.path.abspath(f))
        except Exception:  # noqa: BLE001
            pass
    extra = [m for m in extra or () if m is not None]
    extra_ids = {id(m) for m in extra}
    out, ids = [], set()
    for m in extra + list(sys.modules.values()):
        if m is None or id(m) in ids:
            continue
        f = _get(m, "__file__")
        if id(m) in extra_ids or (isinstance(f, str) and os.path.abspath(f) in wanted):
            out.append(m)
            ids.add(id(m))
    return out


def collect(modules, limits: dict | None = None) -> list[dict]:
    """The compiled kernels of the Triton JIT functions among the globals of
    modules: [{name, n_regs, n_spills, shared_bytes, num_warps, num_stages}]
    (a value Triton did not give is None), with occupancy, blocks_per_sm and
    limited_by when limits are given. Deduplicated, at most MAX_KERNELS.
    Never raises."""
    out: list[dict] = []
    try:
        seen_jit, seen = set(), set()
        for m in modules or ():
            try:
                ns = m if isinstance(m, dict) else vars(m)
            except Exception:  # noqa: BLE001
                continue
            for _, v in _dict_items(ns):
                jit = _jit_of(v)
                if jit is None or id(jit) in seen_jit:
                    continue
                seen_jit.add(id(jit))
                for k in _compiled_kernels(jit):
                    try:
                        rec = _kernel_record(k)
                    except Exception:  # noqa: BLE001
                        continue
                    if rec is None:
                        continue
                    key = (rec["name"], rec["n_regs"], rec["num_warps"], rec["num_stages"], rec["shared_bytes"])
                    if key in seen:
                        continue
                    seen.add(key)
                    if limits is not None:
                        rec.update(occupancy(rec["n_regs"], rec["num_warps"], rec["shared_bytes"], limits))
                    out.append(rec)
                    if len(out) >= MAX_KERNELS:
                        return out
    except Exception:  # noqa: BLE001
        pass
    return out


def occupancy(n_regs, num_warps, shared_bytes, limits: dict) -> dict:
    """Resident blocks per SM and the fraction of the SM's warp slots they
    fill, from registers (per thread, allocated in multiples of 8), shared
    memory (plus the per-block reservation) and warps: {"occupancy" (0..1),
    "blocks_per_sm", "limited_by"}; occupancy None when registers or warps are
    unknown. On a tie the first of warps, registers, shared memory, blocks
    per SM is named (full occupancy reads "warps")."""
    lim = {**DEFAULT_LIMITS, **{k: v for k, v in (limits or {}).items() if _int(v) is not None}}
    warps = _int(num_warps)
    regs = _int(n_regs)
    if not warps or regs is None:
        return {"occupancy": None, "blocks_per_sm": None, "limited_by": None}
    regs = (max(regs, 1) + 7) // 8 * 8
    by = {"warps": lim["max_warps_per_sm"] // warps,
          "registers": lim["regs_per_sm"] // (regs * 32 * warps),
          "blocks per SM": lim["max_blocks_per_sm"]}
    shared = _int(shared_bytes) or 0
    if shared > 0:
        by["shared memory"] = lim["smem_per_sm"] // (shared + lim["reserved_smem_per_block"])
    blocks = min(by.values())
    limited_by = next(r for r in LIMITED_BY if by.get(r) == blocks)
    occ = min(1.0, blocks * warps / lim["max_warps_per_sm"]) if lim["max_warps_per_sm"] > 0 else 0.0
    return {"occupancy": round(occ, 4), "blocks_per_sm": blocks, "limited_by": limited_by}


def device_limits(device=None) -> tuple[dict, str]:
    """The current GPU's per-SM limits from torch.cuda.get_device_properties
    (registers, threads, shared memory; the block limit and the per-block
    shared memory reservation are not there and keep their sm_90 values), or
    the H100/H200 defaults: (limits, source)."""
    try:
        import torch
        p = torch.cuda.get_device_properties(torch.cuda.current_device() if device is None else device)
        regs = _int(_get(p, "regs_per_multiprocessor"))
        threads = _int(_get(p, "max_threads_per_multi_processor"))
        smem = _int(_get(p, "shared_memory_per_multiprocessor"))
        warp = _int(_get(p, "warp_size")) or 32
        if regs and threads and smem and threads // warp > 0:
            return ({**DEFAULT_LIMITS, "regs_per_sm": regs, "max_warps_per_sm": threads // warp,
                     "smem_per_sm": smem}, DEVICE_SOURCE)
    except Exception:  # noqa: BLE001
        pass
    return dict(DEFAULT_LIMITS), DEFAULTS_SOURCE


def candidate_kernels(files, mod) -> dict:
    """What the profiling process adds to runtime.json: {"triton_kernels",
    "triton_limits"}. Never raises."""
    try:
        limits, source = device_limits()
        return {"triton_kernels": collect(own_modules(files, [mod]), limits),
                "triton_limits": {**limits, "source": source}}
    except Exception:  # noqa: BLE001
        return {"triton_kernels": [], "triton_limits": None}


# -- the server's side: the record was written by the candidate's process ----


def _num_or_none(x, hi: int):
    v = _int(x)
    return v if v is not None and v <= hi else None


def runtime_fields(rt: dict) -> dict:
    """checks.runtime's fields from a runtime record (runtime.json, written by
    the candidate's own process, so every value is checked and bounded):
    {"triton_kernels": [...], "triton_kernels_source", "triton_limits"}; {}
    when the record has none."""
    raw = rt.get("triton_kernels") if isinstance(rt, dict) else None
    if not isinstance(raw, list):
        return {}
    kernels = []
    for e in raw[:MAX_KERNELS]:
        if not isinstance(e, dict) or not isinstance(e.get("name"), str) or not e["name"]:
            continue
        occ = e.get("occupancy")
        occ = round(float(occ), 4) if isinstance(occ, (int, float)) and not isinstance(occ, bool) \
            and 0.0 <= occ <= 1.0 else None
        kernels.append({"name": clean_name(e["name"]), "n_regs": _num_or_none(e.get("n_regs"), 1 << 16),
                        "n_spills": _num_or_none(e.get("n_spills"), 1 << 30),
                        "shared_bytes": _num_or_none(e.get("shared_bytes"), 1 << 30),
                        "num_warps": _num_or_none(e.get("num_warps"), 1 << 10),
                        "num_stages": _num_or_none(e.get("num_stages"), 1 << 10),
                        "occupancy": occ, "blocks_per_sm": _num_or_none(e.get("blocks_per_sm"), 1 << 16),
                        "limited_by": e.get("limited_by") if e.get("limited_by") in LIMITED_BY else None})
    out = {"triton_kernels": kernels, "triton_kernels_source": SOURCE}
    lim = rt.get("triton_limits")
    if isinstance(lim, dict):
        clean = {k: _num_or_none(lim.get(k), 1 << 40) for k in DEFAULT_LIMITS}
        src = lim.get("source")
        clean["source"] = src if src in (DEVICE_SOURCE, DEFAULTS_SOURCE) else None
        out["triton_limits"] = clean
    return out
