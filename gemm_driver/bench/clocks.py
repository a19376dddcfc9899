"""SM and memory clocks, temperature, power, clock-event (throttle) reasons and the energy
counter, via NVML.

Read, never set: this module only queries. NVML comes from nvidia-ml-py (``pynvml``),
an optional import: without it, or without a driver, every record says why clocks are
missing instead of failing the benchmark.

Clocks are read while a timed batch runs on the GPU (the timer calls ``sample()`` right
after releasing its stream hold), at most every ``min_interval_s``: reads taken between
cases would see an idle GPU whose clocks have legitimately dropped. A case is flagged
``sagged`` when, during its batches, the SM clock fell below ``SAG_FRACTION`` of the
reference clock (the application clock the driver targets under load, else the maximum
SM clock), or a power, thermal or hardware-slowdown reason was active.

The energy counter (``energy_mj``) is read by the timer's energy window (energy.py);
``energy_unavailable`` says why it cannot be, on a GPU or driver without it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Sequence

SAG_FRACTION = 0.9

# NVML clock-event ("throttle") reason bits. The first group lowers clocks below what the
# workload would get; the second is informational (idle, a user setting, sync boost).
THROTTLING = {0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal_slowdown",
              0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown"}
INFORMATIONAL = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x10: "sync_boost",
                 0x100: "display_clock_setting"}


@dataclass(frozen=True)
class ClockRead:
    sm_mhz: int
    mem_mhz: int
    temperature_c: int | None
    power_w: float | None
    reasons: int  # bitmask of NVML clock-event reasons


def reason_names(mask: int) -> list[str]:
    names = {**THROTTLING, **INFORMATIONAL}
    return [name for bit, name in sorted(names.items()) if mask & bit]


def _why_sagged(sm_min: int | None, reference_sm_mhz: int | None, reasons: Sequence[str]) -> list[str]:
    """The sag verdict's reasons: the SM clock below SAG_FRACTION of the reference first, then
    each throttling reason among ``reasons`` (names), in bit order; empty: no sag."""
    why = [f"throttle reason {name}" for name in THROTTLING.values() if name in reasons]
    if reference_sm_mhz and sm_min is not None and sm_min < SAG_FRACTION * reference_sm_mhz:
        why.insert(0, f"SM clock {sm_min} MHz < {SAG_FRACTION:.0%} of {reference_sm_mhz} MHz")
    return why


def assess(reads: Sequence[ClockRead], reference_sm_mhz: int | None) -> dict:
    """Summarise the reads of one case and decide whether its clocks sagged (pure: unit-tested)."""
    if not reads:
        return {"available": True, "reads": 0, "sagged": None, "why": ["no clock read during the case"]}
    mask = 0
    for r in reads:
        mask |= r.reasons
    sm_min = min(r.sm_mhz for r in reads)
    why = _why_sagged(sm_min, reference_sm_mhz, reason_names(mask))
    temps = [r.temperature_c for r in reads if r.temperature_c is not None]
    powers = [r.power_w for r in reads if r.power_w is not None]
    return {
        "available": True, "reads": len(reads),
        "sm_mhz_min": sm_min, "sm_mhz_max": max(r.sm_mhz for r in reads),
        "mem_mhz_min": min(r.mem_mhz for r in reads), "mem_mhz_max": max(r.mem_mhz for r in reads),
        "temperature_c_max": max(temps) if temps else None, "power_w_max": max(powers) if powers else None,
        "reasons": reason_names(mask), "reference_sm_mhz": reference_sm_mhz,
        "sagged": bool(why), "why": why,
    }


def merge(assessed: Sequence[dict | None]) -> dict | None:
    """Several cases' ``assess`` results as one (bench --rounds: one kernel's rounds on a shape):
    the widest ranges, every reason, and the verdict ``assess`` would give them together; None
    when none of them had a monitor."""
    present = [a for a in assessed if a is not None]
    read = [a for a in present if a.get("reads")]
    if not read:
        return present[0] if present else None
    extreme = lambda key, pick: pick([a[key] for a in read if a.get(key) is not None], default=None)  # noqa: E731
    reasons = list(dict.fromkeys(r for a in read for r in a.get("reasons", [])))
    sm_min, reference = extreme("sm_mhz_min", min), read[0].get("reference_sm_mhz")
    why = _why_sagged(sm_min, reference, reasons)
    return {
        "available": True, "reads": sum(a["reads"] for a in read),
        "sm_mhz_min": sm_min, "sm_mhz_max": extreme("sm_mhz_max", max),
        "mem_mhz_min": extreme("mem_mhz_min", min), "mem_mhz_max": extreme("mem_mhz_max", max),
        "temperature_c_max": extreme("temperature_c_max", max), "power_w_max": extreme("power_w_max", max),
        "reasons": reasons, "reference_sm_mhz": reference, "sagged": bool(why), "why": why,
    }


def _attempt(fn, *args):
    try:
        return fn(*args)
    except Exception:  # one unsupported query (e.g. power on some boards) must not lose the rest
        return None


def _pci_tuple(bus_id) -> tuple[int, ...]:
    """'0000:1B:00.0' and '00000000:1b:00.0' alike -> (0, 27, 0, 0)."""
    text = bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)
    domain, bus, rest = text.strip().split(":")
    device, function = rest.split(".")
    return tuple(int(part, 16) for part in (domain, bus, device, function))


def _find_handle(pynvml, pci_bus_id: str | None):
    """NVML's handle of the GPU CUDA calls ``pci_bus_id`` (NVML's own numbering may differ)."""
    if not pci_bus_id:
        return pynvml.nvmlDeviceGetHandleByIndex(0)
    try:
        return pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode())
    except Exception:  # spelling of the domain differs between versions: compare as numbers
        wanted = _pci_tuple(pci_bus_id)
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            if _pci_tuple(pynvml.nvmlDeviceGetPciInfo(handle).busId) == wanted:
                return handle
        raise


class ClockMonitor:
    """NVML for one GPU; ``available`` is False (with ``unavailable`` saying why) when it cannot be read."""

    def __init__(self, pci_bus_id: str | None = None, min_interval_s: float = 0.02):
        self.min_interval_s = min_interval_s
        self.unavailable: str | None = None
        self.reference_sm_mhz: int | None = None
        self._nvml = self._handle = None
        self._energy_unavailable: str | None = None
        self._reads: list[ClockRead] = []
        self._last = 0.0
        try:
            import pynvml
        except ImportError:
            self.unavailable = "nvidia-ml-py (pynvml) is not installed"
            return
        try:
            pynvml.nvmlInit()
        except Exception as exc:
            self.unavailable = f"NVML could not start: {exc}"
            return
        self._nvml = pynvml
        try:
            self._handle = _find_handle(pynvml, pci_bus_id)
        except Exception as exc:
            self.unavailable = f"NVML does not know GPU {pci_bus_id or 0}: {exc}"
            self.close()
            return
        self.reference_sm_mhz = self._reference_clock()
        try:
            pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
        except Exception as exc:  # Volta and later have it; a driver or board may still refuse
            self._energy_unavailable = f"this GPU does not report its energy counter (NVML: {exc})"

    @property
    def available(self) -> bool:
        return self._handle is not None

    @property
    def energy_unavailable(self) -> str | None:
        """Why ``energy_mj`` cannot be read here; None when it can."""
        return self.unavailable if not self.available else self._energy_unavailable

    def energy_mj(self) -> int:
        """NVML's total energy counter of this GPU: millijoules since the driver loaded."""
        return self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)

    def _reference_clock(self) -> int | None:
        n, h = self._nvml, self._handle
        return (_attempt(n.nvmlDeviceGetApplicationsClock, h, n.NVML_CLOCK_SM)
                or _attempt(n.nvmlDeviceGetMaxClockInfo, h, n.NVML_CLOCK_SM))

    def read(self) -> ClockRead:
        n, h = self._nvml, self._handle
        reasons_fn = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            n.nvmlDeviceGetCurrentClocksThrottleReasons
        power_mw = _attempt(n.nvmlDeviceGetPowerUsage, h)
        return ClockRead(
            sm_mhz=n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
            mem_mhz=n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM),
            temperature_c=_attempt(n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU),
            power_w=power_mw / 1000 if power_mw is not None else None,
            reasons=_attempt(reasons_fn, h) or 0,
        )

    # -- per case -----------------------------------------------------------------------
    def start_case(self) -> None:
        self._reads, self._last = [], 0.0

    def sample(self) -> None:
        """Read now, unless the last read of this case was less than ``min_interval_s`` ago."""
        if not self.available or time.perf_counter() - self._last < self.min_interval_s:
            return
        self._last = time.perf_counter()
        read = _attempt(self.read)
        if read is not None:
            self._reads.append(read)

    def end_case(self) -> dict:
        if not self.available:
            return {"available": False, "unavailable": self.unavailable}
        return assess(self._reads, self.reference_sm_mhz)

    # -- for the environment record ---------------------------------------------------
    def snapshot(self) -> dict:
        """Clock limits and the current state, for the JSON's environment."""
        if not self.available:
            return {"available": False, "unavailable": self.unavailable}
        n, h = self._nvml, self._handle
        limit_mw = _attempt(n.nvmlDeviceGetEnforcedPowerLimit, h)
        now = _attempt(self.read)
        return {
            "available": True,
            "nvml_driver_version": _attempt(n.nvmlSystemGetDriverVersion),
            "sm_mhz_max": _attempt(n.nvmlDeviceGetMaxClockInfo, h, n.NVML_CLOCK_SM),
            "mem_mhz_max": _attempt(n.nvmlDeviceGetMaxClockInfo, h, n.NVML_CLOCK_MEM),
            "sm_mhz_application": _attempt(n.nvmlDeviceGetApplicationsClock, h, n.NVML_CLOCK_SM),
            "mem_mhz_application": _attempt(n.nvmlDeviceGetApplicationsClock, h, n.NVML_CLOCK_MEM),
            "reference_sm_mhz": self.reference_sm_mhz,
            "power_limit_w": limit_mw / 1000 if limit_mw is not None else None,
            "persistence_mode": _attempt(n.nvmlDeviceGetPersistenceMode, h),
            "now": {**asdict(now), "reasons": reason_names(now.reasons)} if now else None,
        }

    def close(self) -> None:
        if self._nvml is not None:
            _attempt(self._nvml.nvmlShutdown)
            self._nvml = self._handle = None

    def __enter__(self) -> "ClockMonitor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
