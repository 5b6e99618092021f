"""The GPU's SM clock, temperature, power and clock-event reasons while
something is timed, read by the server (never by a candidate's process) from
NVML through ctypes: libnvidia-ml ships with the driver, so nothing to install.

A timed phase on a GPU that its neighbours kept busy a moment ago can run at a
lower clock (power or thermal limits), and a speedup is a ratio of two timed
phases taken at different moments. The record lets a reader tell a slower
kernel from a slower GPU. Diagnostics only: nothing here changes a verdict,
and where NVML is missing (test mode, no driver) the record says so.
"""
from __future__ import annotations

import ctypes
import os
import threading

_NVML_CLOCK_SM = 1
_NVML_TEMPERATURE_GPU = 0
# nvmlClocksEventReasons bits (nvml.h), the ones that slow the SM clock.
_REASONS = {0x2: "applications_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal",
            0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clocks"}

_lock = threading.Lock()
_state: dict = {}


def _handle():
    """(library, device handle) for this process's GPU, or (None, why)."""
    with _lock:
        if "lib" in _state:
            return _state["lib"], _state["handle"]
        lib, handle = None, "NVML unavailable"
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                raise OSError("nvmlInit failed")
            dev = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip()
            h = ctypes.c_void_p()
            if dev.startswith(("GPU-", "MIG-")):
                rc = lib.nvmlDeviceGetHandleByUUID(dev.encode(), ctypes.byref(h))
            else:
                rc = lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(int(dev)), ctypes.byref(h))
            if rc != 0:
                raise OSError(f"no NVML handle for CUDA_VISIBLE_DEVICES={dev} (error {rc})")
            handle = h
        except (OSError, ValueError, AttributeError) as e:
            lib, handle = None, f"NVML unavailable: {e}"
        _state["lib"], _state["handle"] = lib, handle
        return lib, handle


def sample() -> dict | None:
    """One reading: sm_mhz, max_sm_mhz, temp_c, power_w, reasons (bitmask)."""
    lib, h = _handle()
    if lib is None:
        return None
    u = ctypes.c_uint()
    out: dict = {}
    if lib.nvmlDeviceGetClockInfo(h, _NVML_CLOCK_SM, ctypes.byref(u)) == 0:
        out["sm_mhz"] = u.value
    if "max_sm_mhz" not in _state and lib.nvmlDeviceGetMaxClockInfo(h, _NVML_CLOCK_SM, ctypes.byref(u)) == 0:
        _state["max_sm_mhz"] = u.value
    out["max_sm_mhz"] = _state.get("max_sm_mhz")
    if lib.nvmlDeviceGetTemperature(h, _NVML_TEMPERATURE_GPU, ctypes.byref(u)) == 0:
        out["temp_c"] = u.value
    if lib.nvmlDeviceGetPowerUsage(h, ctypes.byref(u)) == 0:
        out["power_w"] = u.value / 1000.0
    r = ctypes.c_ulonglong()
    fn = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        getattr(lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
    if fn is not None and fn(h, ctypes.byref(r)) == 0:
        out["reasons"] = r.value
    return out


class Sampler:
    """Reads the GPU every `period_s` on a thread between start() and stop();
    stop() returns the summary record (or why there is none)."""

    def __init__(self, period_s: float = 0.05):
        self.period_s = period_s
        self._samples: list[dict] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "Sampler":
        if sample() is None:
            return self
        self._thread = threading.Thread(target=self._run, name="gpuclock", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set() and len(self._samples) < 20000:
            s = sample()
            if s:
                self._samples.append(s)
            self._stop.wait(self.period_s)

    def stop(self) -> dict:
        if self._thread is None:
            return {"available": False, "why": str(_handle()[1])}
        self._stop.set()
        self._thread.join(timeout=2)
        return summarize(self._samples)


def summarize(samples: list[dict]) -> dict:
    clocks = sorted(s["sm_mhz"] for s in samples if isinstance(s.get("sm_mhz"), int))
    if not clocks:
        return {"available": False, "why": "no readings"}
    bits = 0
    for s in samples:
        bits |= int(s.get("reasons") or 0)
    temps = [s["temp_c"] for s in samples if isinstance(s.get("temp_c"), int)]
    power = [s["power_w"] for s in samples if isinstance(s.get("power_w"), float)]
    maxc = next((s["max_sm_mhz"] for s in samples if s.get("max_sm_mhz")), None)
    return {"available": True, "samples": len(clocks), "sm_mhz_min": clocks[0],
            "sm_mhz_median": clocks[len(clocks) // 2], "sm_mhz_max": clocks[-1], "max_sm_mhz": maxc,
            "temp_c_max": max(temps) if temps else None, "power_w_max": max(power) if power else None,
            "reasons": [name for bit, name in _REASONS.items() if bits & bit]}

