"""% of the device's peak and the roofline position of each benchmark case.

Peaks come from a table of datasheet numbers (dense, no sparsity) for common GPUs,
each with the clock it assumes, and are scaled to the SM clock NVML measured during
the case (the highest read, so the peak is never understated and % of peak never
overstated); without a reading the datasheet clock is used and the case says so.
A GEMM must move A and B once, write C, and read C when beta != 0; that gives its
arithmetic intensity (FLOP per byte of DRAM traffic) and the attainable throughput
min(peak, intensity x bandwidth). An unknown GPU gets None with the reason, never a
guess. Everything here works on the bench JSON document, so a committed run can be
annotated and plotted again without a GPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import kernels
from .. import precision as _precision


@dataclass(frozen=True)
class GpuPeaks:
    """Datasheet peaks of one GPU model, TFLOP/s dense; None where the GPU has no such unit.

    NVIDIA quotes tensor-core peaks at a lower clock than the FP32 (CUDA core) peak on
    Hopper (H100 SXM: tensor 1830 MHz, FP32 1980 MHz), so each kind keeps its own clock;
    where a datasheet names no clock, it is peak / (SMs x FLOP per clock per SM).
    """

    key: str
    pattern: str  # regular expression the whole device name must match
    sm_count: int
    fp32: float  # CUDA cores, no tensor cores
    tf32: float | None
    bf16: float | None  # BF16 in, FP32 accumulate
    fp16: float | None  # FP16 in, FP32 accumulate (half the FP16-accumulate rate on GeForce)
    bandwidth_tbs: float  # DRAM, TB/s
    fp32_clock_mhz: int
    tensor_clock_mhz: int | None

    def peak(self, precision: str) -> tuple[float | None, int | None]:
        """(TFLOP/s, the clock it assumes) for a precision name; (None, None) if absent."""
        name = _precision.get(precision).name
        if name == "fp32":
            return self.fp32, self.fp32_clock_mhz
        value = getattr(self, name, None)  # no FP8 peak in the table yet: unknown, not guessed
        return (value, self.tensor_clock_mhz) if value is not None else (None, None)


_N = r"(?:NVIDIA )?"
# Sources: NVIDIA product datasheets and architecture whitepapers (Volta, Turing, Ampere
# GA100/GA102, Ada, Hopper). Patterns leave out variants with other numbers (H100 NVL,
# H200 NVL, RTX 3090 Ti, laptop parts): those are unknown rather than guessed.
PEAKS: tuple[GpuPeaks, ...] = (
    GpuPeaks("H100 SXM", _N + r"H100 (?:80GB HBM3|SXM5?[ -]?80GB)", 132, 66.9, 494.7, 989.4, 989.4, 3.35, 1980, 1830),
    GpuPeaks("H100 PCIe", _N + r"H100 PCIe", 114, 51.2, 378.0, 756.0, 756.0, 2.0, 1755, 1620),
    GpuPeaks("H200 SXM", _N + r"H200(?: 141GB HBM3e)?", 132, 66.9, 494.7, 989.4, 989.4, 4.8, 1980, 1830),
    GpuPeaks("A100 SXM4 80GB", _N + r"A100-SXM4-80GB", 108, 19.5, 156.0, 312.0, 312.0, 2.039, 1410, 1410),
    GpuPeaks("A100 SXM4 40GB", _N + r"A100-SXM4-40GB", 108, 19.5, 156.0, 312.0, 312.0, 1.555, 1410, 1410),
    GpuPeaks("A100 PCIe 80GB", _N + r"A100 80GB PCIe", 108, 19.5, 156.0, 312.0, 312.0, 1.935, 1410, 1410),
    GpuPeaks("A100 PCIe 40GB", _N + r"A100-PCIE-40GB", 108, 19.5, 156.0, 312.0, 312.0, 1.555, 1410, 1410),
    GpuPeaks("A10", _N + r"A10", 72, 31.2, 62.5, 125.0, 125.0, 0.6, 1695, 1695),
    GpuPeaks("L4", _N + r"L4", 58, 30.3, 60.0, 121.0, 121.0, 0.3, 2040, 2040),
    GpuPeaks("L40S", _N + r"L40S", 142, 91.6, 183.0, 362.05, 362.05, 0.864, 2520, 2490),
    GpuPeaks("RTX 4090", _N + r"GeForce RTX 4090", 128, 82.6, 82.6, 165.2, 165.2, 1.008, 2520, 2520),
    GpuPeaks("RTX 3090", _N + r"GeForce RTX 3090", 82, 35.6, 35.6, 71.0, 71.0, 0.936, 1695, 1695),
    GpuPeaks("V100 SXM2", r"(?:Tesla |NVIDIA )?V100-SXM2-(?:16|32)GB", 80, 15.7, None, None, 125.0, 0.9, 1530, 1530),
    GpuPeaks("V100 PCIe", r"(?:Tesla |NVIDIA )?V100-PCIE-(?:16|32)GB", 80, 14.0, None, None, 112.0, 0.9, 1380, 1380),
    GpuPeaks("T4", r"(?:Tesla |NVIDIA )?T4", 40, 8.1, None, None, 65.0, 0.32, 1590, 1590),
)


def lookup(device_name: str | None) -> GpuPeaks | None:
    """The table entry whose pattern matches the whole device name, else None."""
    name = " ".join((device_name or "").split())
    return next((g for g in PEAKS if re.fullmatch(g.pattern, name, flags=re.IGNORECASE)), None)


def gemm_bytes(m: int, n: int, k: int, precision: str = "fp32", beta: float = 0.0, batch: int = 1) -> int:
    """DRAM bytes a GEMM cannot avoid: A and B read once, C written, C read if beta != 0."""
    p = _precision.get(precision)
    c_passes = 2 if beta != 0 else 1
    return batch * ((m * k + k * n) * p.itemsize + c_passes * m * n * 4)


def intensity(m: int, n: int, k: int, precision: str = "fp32", beta: float = 0.0, batch: int = 1) -> float:
    """FLOP per byte of unavoidable DRAM traffic (2 M N K per GEMM)."""
    traffic = gemm_bytes(m, n, k, precision, beta, batch)
    return 2 * m * n * k * batch / traffic if traffic else 0.0


def attainable_tflops(peak_tflops: float, bandwidth_tbs: float, flop_per_byte: float) -> float:
    """The roofline: compute-bound at the peak, else bandwidth x intensity (TB/s x FLOP/B = TFLOP/s)."""
    return min(peak_tflops, bandwidth_tbs * flop_per_byte)


def case_precision(case: dict) -> str:
    """A result's precision: recorded by the runner ("dtype", older spellings mapped), else
    the registry's, else FP32 (runs from before precisions existed were all FP32)."""
    if case.get("dtype"):
        return _precision.from_record(case["dtype"])
    entry = kernels.ALL.get(case.get("kernel", ""))
    return entry.precision if entry is not None else "fp32"


def measured_clock(case: dict) -> int | None:
    """Highest SM clock NVML read during the case (bench/clocks.py), or None."""
    clocks = (case.get("timing") or {}).get("clocks") or {}
    value = clocks.get("sm_mhz_max")
    return int(value) if isinstance(value, (int, float)) and value > 0 else None


def case_roofline(case: dict, gpu_name: str | None) -> dict:
    """The roofline fields of one result dict (bench JSON), each None with a note when it
    cannot be known: a CPU case, an unknown GPU, a precision the GPU lacks, no timing."""
    prec = case_precision(case)
    flop_per_byte = intensity(case["m"], case["n"], case["k"], prec, case.get("beta", 0.0), case.get("batch", 1))
    out = {"intensity": flop_per_byte, "peak_tflops": None, "attainable_tflops": None,
           "pct_of_peak": None, "pct_of_attainable": None, "clock_mhz": None, "roofline_note": None}
    entry = lookup(gpu_name)
    if (case.get("timing") or {}).get("clock") == "host" or case.get("kernel") == "numpy":
        out["roofline_note"] = "runs on the CPU: GPU peaks do not apply"
        return out
    if entry is None:
        out["roofline_note"] = f"no datasheet peaks for GPU {gpu_name!r} in bench/roofline.py"
        return out
    peak, peak_clock = entry.peak(prec)
    if peak is None:
        out["roofline_note"] = f"{entry.key} has no {prec} tensor-core peak"
        return out
    clock = measured_clock(case)
    notes = []
    if clock is None:
        clock = peak_clock
        notes.append(f"not timed ({case.get('status')}): roof at the datasheet clock" if case.get("tflops") is None
                     else f"no NVML clock reading: peak at the datasheet clock {peak_clock} MHz")
    scaled = peak * clock / peak_clock
    out.update(peak_tflops=scaled, clock_mhz=clock,
               attainable_tflops=attainable_tflops(scaled, entry.bandwidth_tbs, flop_per_byte))
    if case.get("tflops") is not None and out["attainable_tflops"] > 0:
        out["pct_of_peak"] = 100.0 * case["tflops"] / scaled
        out["pct_of_attainable"] = 100.0 * case["tflops"] / out["attainable_tflops"]
    out["roofline_note"] = "; ".join(notes) or None
    return out


def device_summary(gpu_name: str | None) -> dict:
    """The table row used for a run, or why there is none (for the JSON document)."""
    entry = lookup(gpu_name)
    if entry is None:
        return {"gpu": gpu_name, "known": False,
                "reason": f"no datasheet peaks for {gpu_name!r}; % of peak and roofline fields are null"}
    return {"gpu": gpu_name, "known": True, "model": entry.key, "sm_count": entry.sm_count,
            "peaks_tflops": {p: entry.peak(p)[0] for p in _precision.NAMES},
            "bandwidth_tbs": entry.bandwidth_tbs, "fp32_clock_mhz": entry.fp32_clock_mhz,
            "tensor_clock_mhz": entry.tensor_clock_mhz}


def annotate_records(recs: list[dict], gpu_name: str | None) -> list[dict]:
    """Add the roofline fields to each result record (in place); returns them."""
    for case in recs:
        case.update(case_roofline(case, gpu_name))
    return recs


def annotate(document: dict) -> dict:
    """Add the roofline fields to every result of a bench JSON document (in place) and a
    ``roofline`` summary of the GPU's table row; returns the document."""
    gpu = (document.get("environment") or {}).get("gpu") or {}
    name = gpu.get("name") if isinstance(gpu, dict) else None
    document["roofline"] = device_summary(name)
    annotate_records(document.get("results", []), name)
    return document
