"""One prepared case, and one way to verify it and then time it.

``PreparedCase``: (problem, precision, host operands) -> the float64 reference and the
guarded device operands in that precision's storage (2-byte A and B for bf16/fp16, FP32
for fp32/tf32; A and B in their stored shapes for a transposed layout; C, D and the
epilogue's bias vector in the problem's out_dtype), released as a context manager. ``PreparedCase.random``
draws fresh uniform data from a seed. The device operands are made on first use, so a
case that only runs on the host (NumPy, empty problems) needs no GPU, and the reference
is computed on first use, so ``gemm()`` never pays for one. A large case whose products
come from the GPU computes its reference there, and on the host only if asked
(device_epilogue.py).

``run_case``: verify a kernel or provider on a prepared case and, given a timer, time it on
the very operands it passed on; one ``Outcome`` (ok, FAILED or skipped, with the
verification, the timing and the Launch record) for the bench sweep, the autotune sweep and
``verify``; a large D is checked on the GPU (``PreparedCase.verify``). Errors are classified
here once: a target that cannot run this problem here (``UnsupportedProblem``: wrong
architecture, a batch it does not take, a tunable rule) is "skipped" with the reason; any
other error while its launcher is made (a bug in a launch recipe hides as a skip otherwise),
a wrong answer or a CUDA error during the run is "FAILED" with its first line.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping, Protocol

import numpy as np

from . import kernels
from . import precision as _precision
from .cuda.errors import CudaError, GemmDriverError, NvrtcError, UnsupportedProblem
from .kernels.launch import Launch
from .kernels.target import check_capabilities
from .operands import (DeviceMatrix, ScaledOperands, fill_output, random_bias, random_operands, random_scaled_operands,
                       read_output, upload_bias, upload_operands, upload_scales)
from .device_check import CHECK_ON_DEVICE_ELEMENTS, OutputChecker, ReferenceOnDevice
from .device_epilogue import keeps_reference_on_device, reference_on_device
from .device_reference import Products
from .problem import GemmProblem
from .verify import Reference, Verification, check, output_bound, reference


class PreparedCase:
    """Host operands, their reference and (on first use) guarded device operands of one
    problem in one precision. ``guard`` rows around each matrix, leading dimensions
    ``lds`` (the stored row strides; None: the stored row length) and ``misalign``
    elements off a 16-byte boundary (A, B, C; the bias vector takes C's); ``products``: the
    float64 matmul of its reference (device_reference.products_for; None: NumPy's);
    ``check_on_device``: where ``verify`` checks D (None: on the GPU from
    device_check.CHECK_ON_DEVICE_ELEMENTS elements up, on the host below). Where both are
    the GPU's (``keeps_reference_on_device``), ``verify`` computes the expected D, its bound
    and norm on the GPU from products that stay there (device_epilogue.py); ``reference``
    and ``bound`` are still the host's, computed only when something reads them. An FP8 case
    carries its ``scaled`` operands: e4m3 codes go to the device with their scales, and
    ``a``/``b`` are the dequantized values the reference reads."""

    def __init__(self, problem: GemmProblem, precision: str, a: np.ndarray, b: np.ndarray, c: np.ndarray | None,
                 *, bias: np.ndarray | None = None, guard: int = 0, lds=(None, None, None), misalign=(0, 0, 0),
                 scaled: ScaledOperands | None = None, products: Products | None = None,
                 check_on_device: bool | None = None):
        self.problem, self.precision = problem, _precision.get(precision)
        if self.precision.scaled != (scaled is not None):
            raise ValueError(f"a {self.precision.name} case " + ("needs its scaled operands (e4m3 codes and scales)"
                             if scaled is None else "takes no scaled operands"))
        self.a_host, self.b_host, self.c_host, self.bias_host, self.scaled = a, b, c, bias, scaled
        self.products = products  # the reference's float64 matmul (None: NumPy's; device_reference.py)
        self._scales: tuple[DeviceMatrix, DeviceMatrix] | None = None
        self._layout = {"guard": guard, "lds": tuple(lds), "misalign": tuple(misalign)}
        self._device: tuple[DeviceMatrix, DeviceMatrix, DeviceMatrix] | None = None
        self._bias: DeviceMatrix | None = None
        size = problem.batch * problem.m * problem.n
        self.checks_on_device = size >= CHECK_ON_DEVICE_ELEMENTS if check_on_device is None else check_on_device
        self.keeps_reference_on_device = keeps_reference_on_device(problem, products, self.checks_on_device)
        # (expected D and bound on the GPU, the reference's norm, the checker): made by the first verify on the GPU
        self._on_device: tuple[ReferenceOnDevice, float, OutputChecker] | None = None

    @classmethod
    def random(cls, problem: GemmProblem, precision: str, seed, *, scale_draw: tuple[int, int] = (0, 0),
               **options) -> "PreparedCase":
        """Fresh uniform(-1, 1) data from ``seed`` (anything numpy.random.default_rng takes),
        A and B rounded once to what the precision stores; C only when beta != 0, the bias
        only with an epilogue (both in the out_dtype's values). FP8: ``scale_draw`` is the
        (spread, offset) of operands.random_scaled_operands; ``options``: the constructor's
        keywords (guard, lds, misalign, products, check_on_device)."""
        rng = np.random.default_rng(seed)
        if _precision.get(precision).scaled:  # FP8: amax scales per group of the problem's scaling
            ops = random_scaled_operands(problem, rng, spread=scale_draw[0], offset=scale_draw[1])
            return cls(problem, precision, ops.a, ops.b, ops.c, bias=random_bias(problem, rng), scaled=ops, **options)
        a, b, c = random_operands(problem, rng, _precision.get(precision).name)
        return cls(problem, precision, a, b, c, bias=random_bias(problem, rng), **options)

    @cached_property
    def reference(self) -> Reference:
        return reference(self.problem, self.a_host, self.b_host, self.c_host, self.bias_host, self.products)

    def device(self) -> tuple[DeviceMatrix, DeviceMatrix, DeviceMatrix]:
        """Device A, B, C (made on the first call); C is NaN-poisoned when it is output only."""
        if self._device is None:
            a, b = (self.scaled.codes_a, self.scaled.codes_b) if self.scaled else (self.a_host, self.b_host)
            self._device = upload_operands(self.problem, a, b, self.c_host, precision=self.precision.name,
                                           **self._layout)
        return self._device

    def device_scales(self) -> tuple[DeviceMatrix, DeviceMatrix] | None:
        """A's and B's guarded device scales (made on the first call); None unless FP8."""
        if self._scales is None and self.scaled is not None:
            self._scales = upload_scales(self.problem.scaling, self.scaled.scales_a, self.scaled.scales_b)
        return self._scales

    def device_bias(self) -> DeviceMatrix | None:
        """The guarded device bias vector (made on the first call); None without an epilogue."""
        if self._bias is None and self.bias_host is not None:
            self._bias = upload_bias(self.problem, self.bias_host, guard=self._layout["guard"],
                                     misalign=self._layout["misalign"][2])
        return self._bias

    def launcher(self, session, name: str, tunables: Mapping[str, int] | None = None) -> Launch:
        """``session.launcher`` on this case's device operands and bias."""
        return session.launcher(name, self.problem, *self.device(), tunables, bias=self.device_bias(),
                                scales=self.device_scales())

    def run(self, launch: Launch) -> tuple[np.ndarray, int]:
        """Poison C (or restore its input values), run ``launch`` once, and read D back (as
        float32 values decoded from the out_dtype) with the number of guard elements around
        it that changed."""
        return read_output(self._launched_once(launch), self.problem)

    def _launched_once(self, launch: Launch) -> DeviceMatrix:
        """C poisoned (or its input values restored), ``launch`` run once and waited for: C's
        DeviceMatrix, holding D."""
        return _run_once(self._filled_output(), launch)

    def _filled_output(self) -> DeviceMatrix:
        """C's DeviceMatrix, NaN-poisoned (beta 0) or holding its input values again."""
        c = self.device()[2]
        fill_output(c, self.problem, self.c_host)
        return c

    def check(self, out: np.ndarray, guard_violations: int = 0) -> Verification:
        """The verdict on D read back to the host; guard elements changed around the bias
        vector and the scales (read, never written) count as violations too."""
        return check(self.problem, out, self.reference, guard_violations + self._read_only_changes(),
                     self.precision.name, self.bound)

    def verify(self, session, launch: Launch) -> Verification:
        """Run ``launch`` once on poisoned (or restored) C and give the verdict on D: read back
        and checked on the host (``run``, ``check``), or checked where it is
        (``checks_on_device``; device_check.py), against the reference made there
        (``keeps_reference_on_device``) or the host's, uploaded once."""
        if not self.checks_on_device:
            return self.check(*self.run(launch))
        c = self._filled_output()
        reference, norm, checker = self._on_device or self._prepare_device_check(session, c)  # reads C: before the run
        _run_once(c, launch)
        return checker.check(c, self.problem.out_dtype, reference, norm, self._read_only_changes())

    def _prepare_device_check(self, session, c: DeviceMatrix) -> tuple[ReferenceOnDevice, float, OutputChecker]:
        """The expected D and its bound in device memory, the reference's norm and the checker,
        made once: computed on the GPU from products kept there (C's input values read from
        ``c``, so before the launch overwrites them), or the host's reference uploaded."""
        if self.keeps_reference_on_device:
            reference, norm = reference_on_device(session, self.problem, self.precision.name, self.a_host,
                                                  self.b_host, None if self.c_host is None else c, self.bias_host)
        else:
            bound = np.broadcast_to(self.bound, self.reference.value.shape)
            reference, norm = ReferenceOnDevice.uploaded(self.reference.value, bound), self.reference.norm
        try:
            self._on_device = reference, norm, OutputChecker(session)
        except BaseException:
            reference.close()
            raise
        return self._on_device

    def _read_only_changes(self) -> int:
        """Guard elements changed around the bias vector and the scales."""
        read_only = (*((self._bias,) if self._bias is not None else ()), *(self._scales or ()))
        return sum(matrix.read()[1] for matrix in read_only)

    @cached_property
    def bound(self) -> np.ndarray:
        """The bound on each element of D (verify.output_bound), once for every kernel checked."""
        return output_bound(self.problem, self.reference, self.precision.name)

    def close(self) -> None:
        if self._on_device is not None:
            reference, _, checker = self._on_device
            reference.close()
            checker.close()
        self._on_device = None
        for matrix in (*(self._device or ()), *((self._bias,) if self._bias is not None else ()), *(self._scales or ())):
            matrix.close()
        self._device = self._bias = self._scales = None

    def __enter__(self) -> "PreparedCase":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _run_once(c: DeviceMatrix, launch: Launch) -> DeviceMatrix:
    """``launch`` run once and waited for: ``c``, C's DeviceMatrix, now holding D."""
    launch()
    launch.synchronize()
    return c


class Timer(Protocol):  # bench.timing.GpuTimer; a Protocol keeps timing out of this layer
    def measure(self, launch: Launch, budget: Any) -> Any: ...

    def measure_host(self, run: Any, budget: Any) -> Any: ...


@dataclass
class Outcome:
    status: str  # "ok", "FAILED" or "skipped"
    detail: str = ""
    verification: Verification | None = None
    timing: Any = None  # the timer's statistics (bench.timing.TimingStats); None unless timed
    launch: dict = field(default_factory=dict)  # Launch.record(): what ran
    verify_s: float | None = None  # seconds of the checked run (launch, read-back, check); None on the host path

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def message(self) -> str:
        return "ok" if self.ok else self.detail

    @property
    def tunables(self) -> dict:
        return dict(self.launch.get("tunables") or {})


def run_case(session, name: str, case: PreparedCase, *, tunables: Mapping[str, int] | None = None,
             timer: Timer | None = None, budget: Any = None) -> Outcome:
    """Verify ``name`` on ``case``; if it passed and a timer is given, time it on the same
    operands (``budget`` is handed to the timer)."""
    target = kernels.get(name)
    if target.runs_on_host:
        return _run_on_host(target, case, tunables, timer, budget)
    try:
        launch = case.launcher(session, name, tunables)
    except UnsupportedProblem as exc:  # the target does not take this problem here: say why
        return Outcome("skipped", str(exc))
    except NvrtcError:  # the callers name a build failure themselves ("compile failed: ...")
        raise
    except Exception as exc:  # noqa: BLE001 - anything else is a bug in the launcher, not a skip
        return Outcome("FAILED", _first_line(exc))
    record = launch.record()
    started = time.perf_counter()
    try:
        verification = case.verify(session, launch)
        verify_s = time.perf_counter() - started
        if not verification.ok:
            return Outcome("FAILED", verification.message, verification, launch=record, verify_s=verify_s)
        timing = timer.measure(launch, budget) if timer is not None else None
    except (CudaError, GemmDriverError) as exc:
        return Outcome("FAILED", _first_line(exc), launch=record)
    return Outcome("ok", "", verification, timing, record, verify_s)


def _run_on_host(target, case: PreparedCase, tunables, timer, budget) -> Outcome:
    try:
        target.check_tunables(tunables)
        check_capabilities(target, case.problem)
    except UnsupportedProblem as exc:
        return Outcome("skipped", str(exc))
    p, (a, b, c) = case.problem, (case.a_host, case.b_host, case.c_host)
    record = {"kernel": target.name, "tunables": {}, "note": "", "algorithm": {}}
    verification = case.check(target.host_gemm(p, a, b, c))
    if not verification.ok:
        return Outcome("FAILED", verification.message, verification, launch=record)
    timing = timer.measure_host(lambda: target.host_gemm(p, a, b, c), budget) if timer is not None else None
    return Outcome("ok", "", verification, timing, record)


def _first_line(exc: BaseException) -> str:
    """The exception's first line; its type too where it is not one of ours (a bug, named)."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return text if isinstance(exc, GemmDriverError) and text else f"{type(exc).__name__}: {text}"
