"""How a corpus run went, per precision: the project's best kernel against the best baseline.

For every shape of a bench document, the ratio is the TFLOP/s of the fastest own kernel
(a registered KernelSpec that verified) over that of the fastest GPU baseline (cuBLAS,
cuBLASLt, torch: every library provider that ran). A summary gives, per precision, the
geometric mean of the ratios, their minimum (with its shape) and the share of shapes at
1.0 or better, over all shapes and again without the odd ones (``kind`` "odd" in the
corpus: where this project's packing path is far ahead, so the mean is shown both ways).
Small-M shapes (M <= 128: decode, bound by reading W) are also set against the memory
roofline: the unavoidable bytes (roofline.gemm_bytes) over the time, as a share of the
bandwidth the run measured (``environment.copy_bandwidth_tbs``) or, without a reading, of
the datasheet's, which the summary then names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .. import corpus as _corpus
from .. import kernels
from . import roofline


@dataclass(frozen=True)
class ShapeRatio:
    precision: str
    m: int
    n: int
    k: int
    kind: str  # corpus kind of the shape: model, sized, odd (or "other" off the corpus)
    own: str  # the fastest own kernel
    baseline: str  # the fastest baseline
    ratio: float  # own TFLOP/s / baseline TFLOP/s
    own_ms: float
    bandwidth_share: float | None  # small M: achieved unavoidable bytes/s over the bandwidth


@dataclass
class PrecisionSummary:
    precision: str
    ratios: list[ShapeRatio] = field(default_factory=list)

    @staticmethod
    def stats(ratios: list[ShapeRatio]) -> dict:
        """Shapes, geometric mean, minimum (and its shape) and the share at >= 1.0 of ``ratios``."""
        if not ratios:
            return {"shapes": 0, "geomean": None, "min": None, "min_shape": None, "share_at_least_1": None}
        worst = min(ratios, key=lambda r: r.ratio)
        return {"shapes": len(ratios),
                "geomean": math.exp(sum(math.log(r.ratio) for r in ratios) / len(ratios)),
                "min": worst.ratio, "min_shape": f"{worst.m}x{worst.n}x{worst.k}",
                "share_at_least_1": sum(r.ratio >= 1.0 for r in ratios) / len(ratios)}

    @staticmethod
    def median_bandwidth_share(ratios: list[ShapeRatio]) -> float | None:
        """The median (upper, of an even count) of ``ratios``' bandwidth shares, None without any."""
        shares = sorted(r.bandwidth_share for r in ratios if r.bandwidth_share is not None)
        return shares[len(shares) // 2] if shares else None

    def as_dict(self) -> dict:
        small = [r for r in self.ratios if r.m <= 128]
        return {"precision": self.precision, "all": self.stats(self.ratios),
                "without_odd": self.stats([r for r in self.ratios if r.kind != "odd"]),
                "small_m": {**self.stats(small), "median_bandwidth_share": self.median_bandwidth_share(small)}}


def _is_own(name: str) -> bool:
    return isinstance(kernels.ALL.get(name), kernels.KernelSpec)


def _is_baseline(name: str) -> bool:
    entry = kernels.ALL.get(name)
    return entry is not None and not isinstance(entry, kernels.KernelSpec) and entry.kind != "cpu"


def bandwidth_tbs(document: dict) -> tuple[float | None, str]:
    """The DRAM bandwidth small-M shapes are judged against, and where it comes from."""
    env = document.get("environment") or {}
    measured = env.get("copy_bandwidth_tbs")
    if isinstance(measured, (int, float)) and measured > 0:
        return float(measured), "measured device-to-device copy"
    gpu = env.get("gpu") or {}
    entry = roofline.lookup(gpu.get("name") if isinstance(gpu, dict) else None)
    return (entry.bandwidth_tbs, f"datasheet ({entry.key})") if entry else (None, "unknown GPU")


def shape_ratios(document: dict) -> list[ShapeRatio]:
    """One ShapeRatio per (precision, shape) where an own kernel and a baseline both ran OK."""
    kinds = {(s.m, s.n, s.k): s.kind for s in _corpus.split()}
    bandwidth, _ = bandwidth_tbs(document)
    best: dict[tuple, dict[str, dict]] = {}
    for case in document.get("results", []):
        if case.get("status") != "ok" or not case.get("tflops") or case.get("batch", 1) != 1:
            continue
        side = "own" if _is_own(case["kernel"]) else "baseline" if _is_baseline(case["kernel"]) else None
        if side is None:
            continue
        key = (roofline.case_precision(case), case["m"], case["n"], case["k"])
        held = best.setdefault(key, {}).get(side)
        if held is None or case["tflops"] > held["tflops"]:
            best[key][side] = case
    out = []
    for (prec, m, n, k), sides in best.items():
        if "own" not in sides or "baseline" not in sides:
            continue
        own = sides["own"]
        ms = own["timing"]["median_ms"]
        share = None
        if m <= 128 and bandwidth:
            share = roofline.gemm_bytes(m, n, k, prec) / (ms * 1e-3) / (bandwidth * 1e12)
        out.append(ShapeRatio(prec, m, n, k, kinds.get((m, n, k), "other"), own["kernel"],
                              sides["baseline"]["kernel"], own["tflops"] / sides["baseline"]["tflops"], ms, share))
    return out


def summarize(document: dict) -> list[PrecisionSummary]:
    """Per precision present in the document, in the precision table's order."""
    by_precision: dict[str, PrecisionSummary] = {}
    for ratio in shape_ratios(document):
        by_precision.setdefault(ratio.precision, PrecisionSummary(ratio.precision)).ratios.append(ratio)
    return list(by_precision.values())


def _fmt(value: float | None, pattern: str = "{:.3f}") -> str:
    return "-" if value is None else pattern.format(value)


def summary_lines(document: dict) -> list[str]:
    """The corpus table as printed under the bench table (fits 100 columns)."""
    _, source = bandwidth_tbs(document)
    lines = ["corpus: own best / best baseline per shape (geometric mean, minimum, share >= 1.0)",
             f"{'precision':<10}{'shapes':>7}{'geomean':>9}{'min':>8}  {'at min':<16}{'>=1.0':>7}"
             f"{'geo w/o odd':>12}{'small-M geo':>12}{'BW share':>9}"]
    for summary in summarize(document):
        d = summary.as_dict()
        a, w, s = d["all"], d["without_odd"], d["small_m"]
        lines.append(f"{summary.precision:<10}{a['shapes']:>7}{_fmt(a['geomean']):>9}{_fmt(a['min']):>8}  "
                     f"{a['min_shape'] or '-':<16}{_fmt(a['share_at_least_1'], '{:.0%}'):>7}"
                     f"{_fmt(w['geomean']):>12}{_fmt(s['geomean']):>12}"
                     f"{_fmt(s['median_bandwidth_share'], '{:.0%}'):>9}")
    lines.append("BW share: median over small-M shapes (M <= 128) of unavoidable bytes / time,")
    lines.append(f"          as a share of the {source} bandwidth")
    return lines
