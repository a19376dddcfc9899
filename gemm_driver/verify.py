"""The float64 reference and the verdict on a kernel's output.

Every output element is held to a rigorous bound rather than a tuned tolerance. With
unit roundoff u, a K-term dot product in any summation order (with or without FMA) is off
by at most about K*u times the sum of the magnitudes of its terms; alpha, beta and the
final add cost a few more u. So element (i, j) passes when

    |out - ref| <= (K + 3) * u * (|alpha| * (|A| @ |B|) + |beta| * |C|)   (x 1.05 slack)

which holds for every correct kernel on every input, and fails by orders of magnitude for
a wrong index, a missed tile, an unwritten element (NaN poison) or a read of C when
beta == 0 (NaN again).

Other precisions (precision.py) keep this shape: the reference is computed from the
inputs as stored (BF16/FP16 already rounded, so exact), and ``Precision.bound_factor``
replaces (K + 3) u: tensor-core accumulation is charged 4u per add (it may truncate),
and TF32, which rounds its FP32 inputs inside the GEMM, adds 2 * 2^-10 for that rounding.

The linear-layer variants (problem.py) extend it, all in float64 from the values as stored
(transposed operands read as op(X) = stored^T, C and bias in the out_dtype's values):

- bias: v = alpha op(A) op(B) + beta C + bias, one more add: the sum is charged K + 1
  terms and |bias| joins the magnitude.
- ReLU is exact and 1-Lipschitz: the bound before it holds after it.
- With a bias and a 2-byte output, the value may be rounded to the output type once before
  the bias or the activation (cuBLASLt's BIAS epilogue with a BF16 D rounds before adding
  the bias, measured on the H100; torch's linear then gelu rounds before the GELU): half an
  ulp of the larger of |v| before and after the bias (plus the error so far).
- GELU (tanh form): the error before it grows by its steepest slope (GELU_SLOPE, 1.13),
  plus the kernel's FP32 evaluation (GELU_EVALUATION |v|).
- BF16/FP16 output: the store rounds once, half an ulp relative (OUTPUT_ROUNDING: 2^-8,
  2^-11) of the value plus the error so far, and FP16 adds its subnormal floor (2^-25).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np

from . import precision as _precision
from .problem import GemmProblem

SLACK = 1.05
# GELU's tanh form, 0.5 v (1 + tanh(GELU_TANH_SCALE (v + GELU_CUBIC v^3))); named once for the
# host's activation and the GPU's (device_epilogue.py hands them to its kernel).
GELU_CUBIC = 0.044715
GELU_TANH_SCALE = float(np.sqrt(2.0 / np.pi))


@dataclass(frozen=True)
class Reference:
    value: np.ndarray  # float64 D: epilogue(alpha * op(A) @ op(B) + beta * C)
    magnitude: np.ndarray  # float64 |alpha| |op(A)| @ |op(B)| + |beta| |C| (+ |bias|), the scale of its error
    pre: np.ndarray | None = None  # float64 value before the activation (None: no activation, = value)
    product: np.ndarray | None = None  # float64 alpha op(A) op(B) + beta C, before the bias (None: no bias)

    @cached_property
    def norm(self) -> float:
        """||value||_2, once for every output checked against it (check's relative error)."""
        flat = self.value.ravel()
        return math.sqrt(float(flat @ flat))


def reference(problem: GemmProblem, a: np.ndarray, b: np.ndarray, c: np.ndarray | None,
              bias: np.ndarray | None = None, products: Callable | None = None) -> Reference:
    """float64 reference from the operands as stored (``a``/``b`` in their stored shapes,
    transposed per the problem); a batched problem's stacked operands give a stacked result.
    ``products``: the float64 matmul of two 2-D arrays to use (None: NumPy's; large cases
    pass the GPU's, device_reference.py). D-sized arrays are updated in place, in the order the
    formulas read (the same values bit for bit): a validation shape's D is up to 537 M elements,
    4.3 GB in float64, and each temporary of that size costs the host about a second."""
    a64 = _batched(a, problem.batch, problem.trans_a)  # fresh float64 copies: taken |.| in place below
    b64 = _batched(b, problem.batch, problem.trans_b)
    rows = problem.batch * problem.m
    matmul = np.matmul if products is None else products
    value = _scaled(matmul(a64, b64).reshape(rows, problem.n), problem.alpha)
    magnitude = _scaled(matmul(np.abs(a64, out=a64), np.abs(b64, out=b64)).reshape(rows, problem.n),
                        abs(problem.alpha))
    if problem.beta != 0 and c is not None:
        value += problem.beta * c.astype(np.float64)
        magnitude += abs(problem.beta) * np.abs(c.astype(np.float64))
    if problem.has_bias:
        if bias is None or bias.shape != (problem.n,):
            raise ValueError(f"epilogue {problem.epilogue!r} needs a bias of shape ({problem.n},), "
                             f"got {None if bias is None else bias.shape}")
        product = value.copy()
        value += bias.astype(np.float64)
        magnitude += np.abs(bias.astype(np.float64))
        pre = value if problem.epilogue in ("bias_relu", "bias_gelu") else None
        return Reference(activation(problem.epilogue, value), magnitude, pre, product)
    return Reference(value, magnitude)


def _scaled(x: np.ndarray, factor: float) -> np.ndarray:
    """factor * x, in place (a product times 1 is itself)."""
    if factor != 1:
        x *= factor
    return x


def activation(epilogue: str, v: np.ndarray) -> np.ndarray:
    """The epilogue's activation in float64: ReLU, or GELU's tanh form
    0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))), evaluated in that order in two arrays;
    identity otherwise."""
    if epilogue == "bias_relu":
        return np.maximum(v, 0.0)
    if epilogue == "bias_gelu":
        inner = v**3
        inner *= GELU_CUBIC
        inner += v
        inner *= GELU_TANH_SCALE
        np.tanh(inner, out=inner)
        inner += 1.0
        out = 0.5 * v
        out *= inner
        return out
    return v


def _batched(x: np.ndarray, batch: int, trans: bool = False) -> np.ndarray:
    """Stacked (batch*rows) x cols float32 -> batch x rows x cols float64 (a 2-D view for batch 1),
    each matrix transposed when it is stored transposed."""
    x64 = x.astype(np.float64)
    x64 = x64 if batch == 1 else x64.reshape(batch, x.shape[0] // batch, x.shape[1])
    return np.swapaxes(x64, -1, -2) if trans else x64


@dataclass(frozen=True)
class Verification:
    ok: bool
    max_error_ratio: float  # worst |out - ref| / bound; <= 1 passes
    relative_error: float  # ||out - ref||_F / ||ref||_F
    wrong: int  # elements over their bound (NaN included)
    nan: int  # NaN elements: unwritten (poison) or computed from a NaN read
    guard_violations: int  # elements outside C that changed
    message: str

    def as_dict(self) -> dict:
        return {
            "ok": self.ok,
            "max_error_ratio": self.max_error_ratio,
            "relative_error": self.relative_error,
            "wrong": self.wrong,
            "nan": self.nan,
            "guard_violations": self.guard_violations,
            "message": self.message,
        }


CHECK_BLOCK = 1 << 20  # elements of D compared at a time: a block's float64 temporaries stay in cache


def check(problem: GemmProblem, out: np.ndarray, ref: Reference, guard_violations: int = 0,
          precision: str = "fp32", bound: np.ndarray | None = None) -> Verification:
    """Compare ``out`` (D as stored, decoded to float32 values) with ``ref`` element by
    element against the bound of ``precision`` (fp32, tf32, bf16, fp16) and the problem's
    output type and epilogue (``output_bound``; pass it as ``bound`` where several outputs
    are checked against one reference: on a large case each pass over D takes a while).
    One pass over blocks of rows (CHECK_BLOCK elements), not whole-matrix float64
    temporaries: a large D's check was seconds of the host's memory traffic per kernel. The
    reference's norm is the Reference's own (computed once), and NaN is looked for only in
    blocks with wrong elements (NaN compares false with the bound). Even so it took most of
    a sweep's trial time on large shapes (tools/sweep_phases.py): from 2^20 elements of D up
    PreparedCase checks D on the GPU instead (device_check.py), to the same verdict."""
    if out.shape != ref.value.shape:
        raise ValueError(f"output shape {out.shape} differs from the reference's {ref.value.shape}")
    bound = output_bound(problem, ref, precision) if bound is None else bound
    rows, cols = out.shape if out.ndim == 2 else (out.shape[0], int(np.prod(out.shape[1:])))
    got, expected, limit = (x.reshape(rows, cols) for x in (out, ref.value, np.broadcast_to(bound, out.shape)))
    wrong = nan = 0
    worst = error_squares = 0.0
    first = None
    step = max(1, CHECK_BLOCK // max(cols, 1))
    for top in range(0, rows, step):
        block = slice(top, top + step)
        error = got[block].astype(np.float64)
        error -= expected[block]
        np.abs(error, out=error)
        bad = ~(error <= limit[block])  # NaN compares false, so NaN counts as wrong
        count = int(np.count_nonzero(bad))
        if count:  # a NaN is wrong too, so a block without wrong elements has none
            if first is None:
                i, j = np.argwhere(bad)[0]
                first = (top + int(i), int(j))
            nan += int(np.count_nonzero(np.isnan(got[block])))
        wrong += count
        flat = error.ravel()
        error_squares += float(flat @ flat)
        np.divide(error, limit[block], out=error)
        worst = max(worst, float(error.max())) if error.size else worst
    at = None if first is None else (*first, got[first], expected[first])
    return verdict(out.size, wrong, nan, worst, error_squares, ref.norm, at, guard_violations)


def verdict(size: int, wrong: int, nan: int, worst: float, error_squares: float, norm: float,
            first: tuple | None, guard_violations: int) -> Verification:
    """The Verification of a check's tallies (``check`` on the host, device_check.py on the
    GPU): ``size`` elements, ``wrong`` over their bound of which ``nan`` NaN, the ``worst``
    error / bound, the sum of squared errors, the reference's norm, ``first`` = (row, col,
    got, expected) of the first wrong element (None: none), and changed guard elements."""
    ratio = float("inf") if nan else worst
    rel = float("inf") if nan else math.sqrt(error_squares)  # |out - ref|, a NaN counted as infinite
    rel = rel / norm if norm > 0 else rel
    problems = []
    if wrong:
        i, j, got, expected = first
        problems.append(f"{wrong} of {size} elements wrong, first at ({i}, {j}): got {got!r}, expected {expected!r}")
    if nan:
        problems.append(f"{nan} NaN (unwritten, or computed from a read outside A/B or of C with beta=0)")
    if guard_violations:
        problems.append(f"{guard_violations} elements outside C were overwritten")
    ok = not problems
    return Verification(ok, ratio, rel, wrong, nan, guard_violations, "ok" if ok else "; ".join(problems))


def error_bound(k: int, magnitude: np.ndarray, precision: str = "fp32") -> np.ndarray:
    """Per-element bound: the precision's factor times each element's magnitude, with 5%
    slack, plus the smallest normal float so an exact zero may be off by an underflow."""
    factor = _precision.get(precision).bound_factor(k)
    bound = factor * magnitude  # then in place, in the same order (output_bound's D-sized arrays)
    bound *= SLACK
    bound += np.finfo(np.float32).tiny
    return bound


def output_bound(problem: GemmProblem, ref: Reference, precision: str = "fp32") -> np.ndarray:
    """Per-element bound on D: the accumulation's (``error_bound``, one more term with a bias),
    through the activation, plus the output type's rounding (see the module docstring).
    Row-major FP32 output without an epilogue gives ``error_bound`` exactly."""
    error = error_bound(problem.k + int(problem.has_bias), ref.magnitude, precision)
    rounding = _precision.OUTPUT_ROUNDING[problem.out_dtype]
    if problem.has_bias:  # one rounding to the output type before the bias or the activation
        before = np.maximum(np.abs(ref.product), np.abs(ref.pre if ref.pre is not None else ref.value))
        error += _scaled(_plus(before, error), rounding)  # error + rounding * (before + error)
    if problem.epilogue == "bias_gelu":  # GELU_SLOPE * error + GELU_EVALUATION * |pre|
        error *= _precision.GELU_SLOPE
        error += _scaled(np.abs(ref.pre), _precision.GELU_EVALUATION)
    # error + rounding * (|value| + error) + the floor, D-sized arrays updated in place
    bound = _scaled(_plus(np.abs(ref.value), error), rounding)
    bound += error
    bound += _precision.OUTPUT_FLOOR[problem.out_dtype]
    return bound


def _plus(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    x += y
    return x
