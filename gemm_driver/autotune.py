"""A small autotuner: sweep a kernel's tuning space on this GPU, keep the best per shape.

For each shape, every candidate configuration is built (a configuration that fails to
compile, spills or uses local memory is dropped with the reason), verified once on fresh
random data against the float64 reference, and only then timed. The winners are written
to ``gemm_driver/tuned/<gpu>.json``, which the ``autotuned`` kernel reads: per problem it
takes the configuration tuned for the nearest shape (see ``pick``). The table is data
from a real run, committed per GPU; a GPU without one gets the warptiled defaults.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from .cuda.errors import CudaError, GemmDriverError
from .problem import GemmProblem, parse_shape, shape_label

TUNED_DIR = Path(__file__).resolve().parent / "tuned"
SCHEMA = "gemm_driver.tuned/1"


def gpu_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3': the per-GPU file and results folder name."""
    name = re.sub(r"^nvidia\s+", "", name.strip(), flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown-gpu"


def tuned_path(gpu_name: str, directory: Path = TUNED_DIR) -> Path:
    return directory / f"{gpu_slug(gpu_name)}.json"


def load_table(gpu_name: str, directory: Path = TUNED_DIR) -> dict | None:
    """The tuned table for this GPU, or None when it was never tuned here."""
    path = tuned_path(gpu_name, directory)
    if not path.is_file():
        return None
    document = json.loads(path.read_text())
    if document.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {document.get('schema')!r}, expected {SCHEMA!r}")
    return document


def shape_distance(a: Sequence[int], b: Sequence[int]) -> float:
    """Distance between two (M, N, K) shapes on a log scale: 2048 is as far from 1024 as 4096."""
    return math.sqrt(sum(math.log2(x / y) ** 2 for x, y in zip(a, b)))


def pick(table: Mapping | None, problem: GemmProblem) -> tuple[dict[str, int], str]:
    """(tunables, why) for ``problem``: the winner of the nearest tuned shape, or {} without a table."""
    if not table or not table.get("entries"):
        return {}, "no tuned table for this GPU; warptiled defaults"
    shape = (max(problem.m, 1), max(problem.n, 1), max(problem.k, 1))
    nearest = min(table["entries"], key=lambda e: shape_distance(shape, e["shape"]))
    label = "x".join(map(str, nearest["shape"]))
    return dict(nearest["best"]), f"tuned at {label}"


@dataclass
class Trial:
    tunables: dict
    status: str  # "ok", "spills", "compile error", "FAILED", "error"
    detail: str = ""
    median_ms: float | None = None
    tflops: float | None = None

    def as_dict(self) -> dict:
        return {"tunables": self.tunables, "status": self.status, "detail": self.detail,
                "median_ms": self.median_ms, "tflops": self.tflops}


@dataclass
class ShapeResult:
    shape: tuple[int, int, int]
    trials: list[Trial] = field(default_factory=list)
    baseline_tflops: float | None = None  # cuBLAS on the same operands

    @property
    def ranked(self) -> list[Trial]:
        return sorted((t for t in self.trials if t.tflops), key=lambda t: -t.tflops)

    def report_lines(self, top: int | None = None, title: str = "") -> list[str]:
        """The shape's ranking beside cuBLAS (the best ``top``, or all), then every rejected trial."""
        ranked = self.ranked
        lines = [f"{title}{shape_label(*self.shape)}: cuBLAS {self.baseline_tflops:.2f} TFLOP/s, "
                 f"{len(ranked)}/{len(self.trials)} configurations ran"]
        for t in ranked[:top]:
            lines.append(f"  {t.tflops:7.2f} TFLOP/s {100 * t.tflops / self.baseline_tflops:6.1f}%  "
                         f"{tunables_label(t.tunables)}")
        lines += [f"  {t.status}: {tunables_label(t.tunables)}: {t.detail}" for t in self.trials if t.status != "ok"]
        return lines


def tunables_label(tunables: Mapping[str, int]) -> str:
    return " ".join(f"{name}={value}" for name, value in tunables.items())


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """'512,4093x4091x4099' -> [(512, 512, 512), (4093, 4091, 4099)]: N for a square, or MxNxK."""
    return [parse_shape(s if "x" in s else f"{s}x{s}x{s}") for s in text.split(",") if s]


def tune(session, spec, shapes: Sequence[tuple[int, int, int]], space: Sequence[Mapping[str, int]], *,
         seconds: float = 0.15, seed: int = 0, on_trial: Callable[[tuple, Trial], None] = lambda s, t: None,
         ) -> list[ShapeResult]:
    """Verify and time every configuration of ``space`` on each shape (and cuBLAS beside them)."""
    from .bench.timing import Budget, GpuTimer
    from .gemm import verify_once
    from .operands import random_operands, upload_operands
    from .verify import reference

    budget = Budget(seconds=seconds)
    usable = _buildable(session, spec, space)
    timer = GpuTimer(session.stream, session.arch)
    results = []
    try:
        for index, shape in enumerate(shapes):
            problem = GemmProblem(*shape)
            a_host, b_host, _ = random_operands(problem, np.random.default_rng([seed, index]))
            ref = reference(problem, a_host, b_host, None)
            a, b, c = upload_operands(problem, a_host, b_host, None)
            result = ShapeResult(tuple(shape))
            try:
                base = timer.measure(session.launcher("cublas", problem, a, b, c), budget)
                result.baseline_tflops = problem.flops / base.median_ms / 1e9
                for tunables, refusal in usable:
                    trial = refusal or _trial(session, timer, spec, problem, (a, b, c), ref, tunables, budget,
                                              verify_once)
                    result.trials.append(trial)
                    on_trial(shape, trial)
            finally:
                for matrix in (a, b, c):
                    matrix.close()
            results.append(result)
    finally:
        timer.close()
    return results


def _buildable(session, spec, space) -> list[tuple[dict, Trial | None]]:
    """Each configuration with None, or with the Trial saying why it is out (no timing)."""
    out = []
    for tunables in space:
        resolved = spec.resolve(tunables)
        try:
            built = session.load(spec, resolved).build
        except (GemmDriverError, ValueError) as exc:
            out.append((resolved, Trial(resolved, "compile error", str(exc).splitlines()[0])))
            continue
        res = built.resources
        if res.stack_bytes or res.spill_store_bytes:
            out.append((resolved, Trial(resolved, "spills", f"{res.stack_bytes} B stack")))
        else:
            out.append((resolved, None))
    return out


def _trial(session, timer, spec, problem, operands, ref, tunables, budget, verify_once) -> Trial:
    a, b, c = operands
    try:
        launch = session.launcher(spec.name, problem, a, b, c, tunables)
    except ValueError as exc:
        return Trial(tunables, "error", str(exc))
    try:
        verification = verify_once(session, launch, problem, c, None, ref)
        if not verification.ok:
            return Trial(tunables, "FAILED", verification.message)
        stats = timer.measure(launch, budget)
    except (CudaError, GemmDriverError) as exc:
        return Trial(tunables, "error", str(exc).splitlines()[0])
    return Trial(tunables, "ok", "", stats.median_ms, problem.flops / stats.median_ms / 1e9)


def table_document(results: Sequence[ShapeResult], spec, environment: Mapping, keep: int = 5) -> dict:
    """The per-GPU tuned table: each shape's winner plus the runners-up, for the record."""
    entries = []
    for r in results:
        ranked = r.ranked
        if not ranked:
            continue
        entries.append({
            "shape": list(r.shape),
            "best": ranked[0].tunables,
            "tflops": round(ranked[0].tflops, 2),
            "cublas_tflops": round(r.baseline_tflops, 2) if r.baseline_tflops else None,
            "runners_up": [{"tunables": t.tunables, "tflops": round(t.tflops, 2)} for t in ranked[1:keep]],
            "trials": len(r.trials),
            "rejected": [t.as_dict() for t in r.trials if t.status != "ok"],
        })
    return {
        "schema": SCHEMA,
        "kernel": spec.name,
        "gpu": environment.get("gpu", {}).get("name"),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "environment": dict(environment),
        "entries": entries,
    }
