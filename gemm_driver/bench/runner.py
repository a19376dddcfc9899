"""The benchmark sweep: for each shape and kernel, verify first, then time.

Per shape the inputs are drawn once (fresh random data from a recorded seed), the float64
reference is computed once, and every kernel runs on the same device operands. A case is
timed only after its output passed verification on those very operands with C poisoned
and a guard band around it; a kernel that fails gets FAILED and its error, never a speed.

The sweep runs once per precision (fp32, tf32, bf16, fp16: precision.py), each with its
own kernels and its own cuBLAS baseline; every precision sees the same data for a shape
(BF16/FP16 rounded from it). A batched shape (B independent GEMMs) runs on the batched
cuBLAS baseline; kernels that compute one GEMM per launch are "skipped" with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from .. import kernels
from .. import precision as _precision
from ..cuda.errors import CudaError, GemmDriverError
from ..gemm import Session, host_gemm, verify_once
from ..operands import random_operands, upload_operands
from ..problem import GemmProblem
from ..verify import check as check_output
from ..verify import reference
from .clocks import ClockMonitor
from .timing import Budget, GpuTimer, TimingStats, measure_host

DEFAULT_SIZES = (256, 512, 1024, 2048, 4096)
# (M, N, K) or (M, N, K, batch): odd sizes (no tile divides them), tall-skinny (N far
# below a tile row of blocks: few output tiles, the grid barely fills the GPU), deep K
# (few output tiles, long inner loop: where split-K pays), and a batch of small GEMMs.
DEFAULT_SHAPES = ((4093, 4091, 4099), (16384, 128, 4096), (1024, 1024, 16384), (256, 256, 256, 64))
BASELINE = "cublas"


def default_kernels(dtypes: Sequence[str] | None = None) -> list[str]:
    """Per selected precision (default: all): its cuBLAS baseline first, then its kernels;
    the batched baseline (and CuPy, when installed) after FP32's kernels; the CPU (FP32) last."""
    names: list[str] = []
    selected = _precision.parse_dtypes(dtypes)
    for prec in selected:
        names.append(_precision.get(prec).baseline)
        names += [name for name, spec in kernels.KERNELS.items() if _precision.get(spec.dtype).name == prec]
        if prec == "fp32":
            names.append(_precision.BATCHED_BASELINE)
            if not absent_baselines():
                names.append("cupy")  # where CuPy is installed; else recorded as absent
    return names + (["numpy"] if "fp32" in selected else [])


def precision_of(name: str) -> str:
    """The precision a registered kernel or provider computes in."""
    return _precision.get(kernels.get(name).dtype).name


def plan(kernel_names: Sequence[str], shapes: Iterable[tuple[int, ...]], *, alpha: float = 1.0,
         beta: float = 0.0) -> list[tuple[GemmProblem, int, str, list[str]]]:
    """(problem, shape index, precision, kernels) in sweep order: per precision, per shape.

    A kernel runs in its own precision only; the batched baseline runs batched shapes
    only (with a batch of one it would repeat the cublas row)."""
    shapes = list(shapes)
    precisions = list(dict.fromkeys(precision_of(name) for name in kernel_names))
    steps = []
    for prec in (p for p in _precision.NAMES if p in precisions):
        for index, shape in enumerate(shapes):
            m, n, k, batch = (*shape, 1)[:4]
            problem = GemmProblem(m, n, k, alpha, beta, batch)
            names = [x for x in kernel_names if precision_of(x) == prec
                     and (batch > 1 or x != _precision.BATCHED_BASELINE)]
            if names:
                steps.append((problem, index, prec, names))
    return steps


def absent_baselines() -> dict[str, str]:
    """Baselines the issue names that this installation cannot offer, with the reason."""
    from ..cupy_baseline import unavailable_reason

    reason = unavailable_reason()
    return {} if reason is None else {"cupy": reason}


@dataclass
class CaseResult:
    kernel: str
    problem: GemmProblem
    status: str  # "ok", "FAILED" or "skipped"
    detail: str = ""
    verification: dict = field(default_factory=dict)
    timing: TimingStats | None = None
    tunables: dict = field(default_factory=dict)
    pct_of_baseline: float | None = None
    precision: str = "fp32"  # precision.py name; the baseline of pct_of_baseline has the same
    mode: str = "hot"  # the sweep's timing mode (timing.py); the CPU baseline is always timed as is

    @property
    def tflops(self) -> float | None:
        if self.timing is None:
            return None
        return self.problem.flops / (self.timing.median_ms * 1e-3) / 1e12

    def as_dict(self) -> dict:
        return {
            "kernel": self.kernel,
            "m": self.problem.m,
            "n": self.problem.n,
            "k": self.problem.k,
            "batch": self.problem.batch,
            "dtype": self.precision,  # the --dtype name: fp32, tf32, bf16 or fp16
            "alpha": self.problem.alpha,
            "beta": self.problem.beta,
            "status": self.status,
            "detail": self.detail,
            "tunables": self.tunables,
            "verification": self.verification,
            "timing": self.timing.as_dict() if self.timing else None,
            "tflops": self.tflops,
            "pct_of_cublas": self.pct_of_baseline,
            "mode": self.mode,
            "clocks_sagged": (self.timing.clocks or {}).get("sagged") if self.timing else None,
        }


def run_sweep(session: Session, kernel_names: Sequence[str], shapes: Iterable[tuple[int, ...]], *,
              alpha: float = 1.0, beta: float = 0.0, seed: int = 0, budget: Budget = Budget(), mode: str = "hot",
              monitor: ClockMonitor | None = None,
              on_case: Callable[[CaseResult], None] = lambda r: None) -> list[CaseResult]:
    """Verify then time every kernel on every shape in its precision (``plan``); shapes are
    (M, N, K) or (M, N, K, batch); ``monitor`` reads clocks during each case's batches."""
    timer = GpuTimer(session.stream, session.arch, session.device.l2_bytes, mode=mode, monitor=monitor)

    def record(result: CaseResult) -> None:
        result.mode = mode
        on_case(result)

    results: list[CaseResult] = []
    try:
        for problem, index, prec, names in plan(kernel_names, shapes, alpha=alpha, beta=beta):
            rng = np.random.default_rng([seed, index])  # same data for a shape in every precision
            shape_results = _run_shape(session, timer, names, problem, rng, budget, record, prec)
            _fill_baseline_ratio(shape_results, _precision.baseline(prec, problem.batch))
            results.extend(shape_results)
    finally:
        timer.close()
    return results


def _run_shape(session, timer, kernel_names, problem, rng, budget, on_case, prec="fp32") -> list[CaseResult]:
    a_host, b_host, c_host = random_operands(problem, rng, prec)
    ref = reference(problem, a_host, b_host, c_host)
    a, b, c = upload_operands(problem, a_host, b_host, c_host, guard=1, precision=prec)
    results = []
    try:
        for name in kernel_names:
            if name == "numpy":
                result = _run_numpy(problem, a_host, b_host, c_host, ref, budget)
            else:
                result = _run_gpu_case(session, timer, name, problem, (a, b, c), c_host, ref, budget, prec)
            result.precision = prec
            results.append(result)
            on_case(result)
    finally:
        for matrix in (a, b, c):
            matrix.close()
    return results


def _run_gpu_case(session, timer, name, problem, operands, c_host, ref, budget, prec="fp32") -> CaseResult:
    a, b, c = operands
    try:
        launch = session.launcher(name, problem, a, b, c)
    except ValueError as exc:  # the kernel cannot run this problem on this GPU: say why
        return CaseResult(name, problem, "skipped", str(exc))
    tunables = dict(getattr(launch, "tunables", {}))  # what ran: defaults, or chosen per problem
    try:
        verification = verify_once(session, launch, problem, c, c_host, ref, prec)
        if not verification.ok:
            return CaseResult(name, problem, "FAILED", verification.message, verification.as_dict(), None, tunables)
        timing = timer.measure(launch, budget)
    except (CudaError, GemmDriverError) as exc:
        return CaseResult(name, problem, "FAILED", str(exc).splitlines()[0], tunables=tunables)
    return CaseResult(name, problem, "ok", "", verification.as_dict(), timing, tunables)


def _run_numpy(problem, a_host, b_host, c_host, ref, budget) -> CaseResult:
    out = host_gemm(problem, a_host, b_host, c_host)
    verification = check_output(problem, out, ref)
    if not verification.ok:
        return CaseResult("numpy", problem, "FAILED", verification.message, verification.as_dict())
    timing = measure_host(lambda: host_gemm(problem, a_host, b_host, c_host), budget)
    return CaseResult("numpy", problem, "ok", "", verification.as_dict(), timing)


def _fill_baseline_ratio(results: list[CaseResult], baseline: str = BASELINE) -> None:
    base = next((r for r in results if r.kernel == baseline and r.timing), None)
    if base is None:
        return
    for r in results:
        if r.timing is not None:
            r.pct_of_baseline = 100.0 * base.timing.median_ms / r.timing.median_ms
