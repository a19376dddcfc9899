"""FP8 operands: formats, scaling modes, their scale shapes, host quantization and the bound.

An FP8 GEMM reads A and B as 1-byte codes plus FP32 *dequantization* scales, and computes

    D = alpha * (sa . A_q) @ (sb . B_q)^T + beta * C      (A stored M x K, B stored N x K)

where ``.`` applies each scale to the elements it covers. The scaling mode says which:

- ``tensor``: one scale for A, one for B (shapes (1, 1) each);
- ``row``: one per row of A (M, 1) and one per row of stored B, i.e. per column of op(B) (N, 1);
- ``block``: DeepSeek-V3's recipe: A by 1 x 128 tiles along K (M, ceil(K/128)), B by
  128 x 128 blocks (ceil(N/128), ceil(K/128)).

Each operand is in one of two ``FORMATS`` (the problem's ``fp8_types`` says which for A and
for B): ``e4m3`` (4 significant bits, largest 448, no infinity: ml_dtypes' and torch's
``float8_e4m3fn``), the usual format of weights and activations, or ``e5m2`` (3 significant
bits, largest 57344, with infinities: ``float8_e5m2``), the range that FP8 training gives
gradients. Host rounding uses ml_dtypes (round to nearest even) after *saturating* to the
format's largest value: ml_dtypes and torch's ``.to(float8_e4m3fn)`` turn an out-of-range value
into NaN (e5m2: into infinity), while quantization recipes (Transformer Engine, DeepGEMM's
casts) pick the scale so that amax maps to the largest value and clamp; saturation makes the
rare value that still lands past it (a rounding of amax / scale) the largest code rather than a
NaN. NaN stays NaN. The reference is computed in float64 from the dequantized values
``scale * FP8 value`` (exact: a 4-bit significand times an FP32 scale fits in float64).

The accumulation bound (``bound_factor``): products of two FP8 values (at most 4 x 4
significant bits, exponents within FP32's normal range) are exact in FP32, in either format.
Hopper's FP8 tensor core adds them in an accumulator of about 14 significant bits
(DeepSeek-V3 report, section 3.3.2): charged ``ACCUMULATOR_U`` = 2^-13 per add (truncation
of a 14-bit sum). Promoting the partial sum into FP32 registers every ``P`` = 128 of K
limits that to P adds per chunk; the chunks are then added in FP32. See docs/correctness.md.
"""

from __future__ import annotations

import math

import numpy as np

from .problem import parse_choices

SCALINGS = ("tensor", "row", "block")
BLOCK = 128  # the K extent of A's tiles and the N and K extent of B's blocks in "block" mode
FORMATS = {"e4m3": ("float8_e4m3fn", 448.0), "e5m2": ("float8_e5m2", 57344.0)}  # ml_dtypes name, largest
# Hopper's FP8 accumulator keeps about 14 significant bits: a truncating add errs by 2^-13.
ACCUMULATOR_U = 2.0**-13
PROMOTION_INTERVAL = 128  # K elements accumulated in the tensor core before an FP32 add
U32 = 2.0**-24
# Scales cost FP32 roundings: sa * sb, its product with the (partial) sum, and alpha.
SCALE_ROUNDINGS = 3


def check_scaling(scaling: str) -> str:
    if scaling not in SCALINGS:
        raise ValueError(f"scaling {scaling!r} is not one of {', '.join(SCALINGS)}")
    return scaling


def parse_scalings(text: str | None) -> list[str]:
    """'tensor,row' -> ['tensor', 'row'] (None: ['tensor']); ValueError naming the bad value."""
    return parse_choices("--scaling", text, SCALINGS, "tensor")


def scale_shapes(scaling: str, m: int, n: int, k: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(shape of A's scales, shape of B's scales) in logical (row, K-block) order."""
    check_scaling(scaling)
    if scaling == "tensor":
        return (1, 1), (1, 1)
    if scaling == "row":
        return (m, 1), (n, 1)
    kb = -(-k // BLOCK)
    return (m, kb), (-(-n // BLOCK), kb)


def expand(scales: np.ndarray, rows: int, cols: int, row_block: int) -> np.ndarray:
    """A rows x cols float64 array holding, at (i, k), the scale that covers element (i, k):
    each of the (R, C) scales covers ``row_block`` rows (all of them when R == 1) and BLOCK
    columns of K (all of them when C == 1)."""
    r, c = scales.shape
    s = np.asarray(scales, np.float64)
    s = np.repeat(s, row_block if r > 1 else rows, axis=0)[:rows]
    return np.repeat(s, BLOCK if c > 1 else cols, axis=1)[:, :cols]


def row_blocks(scaling: str) -> tuple[int, int]:
    """How many rows one scale covers, for A and for stored B (1 per row, or B's 128)."""
    return (1, BLOCK) if scaling == "block" else (1, 1)


def device_scales(scaling: str, which: int, scales: np.ndarray) -> np.ndarray:
    """The FP32 scales as the device holds them (``which``: 0 for A, 1 for B), one layout for
    every FP8 target: a scalar; a vector of M or N; for "block", A's as ceil(K/128) rows of M
    (M contiguous, "outer-dimension major", as cuBLASLt's VEC128_32F and torch._scaled_mm
    want them and a TMA box of M scales can load) and B's as ceil(N/128) x ceil(K/128)
    row-major. To be confirmed against cuBLASLt on a GPU (tests/test_cublaslt.py's scaled
    FP8 test)."""
    s = np.asarray(scales, np.float32)
    return np.ascontiguousarray(s.T if scaling == "block" and which == 0 else s)


def largest(fmt: str) -> float:
    """The largest finite value of FP8 format ``fmt`` (e4m3 448, e5m2 57344)."""
    return FORMATS[_check_format(fmt)][1]


def _check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"FP8 format {fmt!r} is not one of {', '.join(FORMATS)}")
    return fmt


def _ml_dtype(fmt: str):
    try:
        import ml_dtypes
    except ImportError:
        raise ImportError("FP8 host rounding needs ml_dtypes: pip install ml_dtypes") from None
    return getattr(ml_dtypes, FORMATS[_check_format(fmt)][0])


def fp8_codes(x, fmt: str = "e4m3") -> np.ndarray:
    """float values -> codes (uint8) of format ``fmt``, saturated to its largest value, nearest
    even; NaN stays NaN."""
    x, top = np.asarray(x, np.float32), largest(fmt)
    with np.errstate(invalid="ignore"):
        clipped = np.where(np.isnan(x), x, np.clip(x, -top, top))
    return clipped.astype(_ml_dtype(fmt)).view(np.uint8)


def fp8_values(codes, fmt: str = "e4m3") -> np.ndarray:
    """codes of format ``fmt`` -> float32 values (exact)."""
    return np.asarray(codes, np.uint8).view(_ml_dtype(fmt)).astype(np.float32)


def quantize(x: np.ndarray, scales: np.ndarray, row_block: int, fmt: str = "e4m3") -> tuple[np.ndarray, np.ndarray]:
    """(codes, dequantized float64 values) of ``x`` (rows x K) in format ``fmt`` under ``scales``
    (dequantization scales: stored value = round(x / scale), its meaning = scale * stored value)."""
    s = expand(scales, *x.shape, row_block)
    codes = fp8_codes(np.asarray(x, np.float64) / s, fmt)
    return codes, fp8_values(codes, fmt).astype(np.float64) * s


def amax_scales(x: np.ndarray, scaling: str, row_block: int, which: int, fmt: str = "e4m3") -> np.ndarray:
    """The usual recipe: each group's amax over the format's largest value (e4m3 448, e5m2
    57344; 1 for an all-zero group), in FP32. ``which`` is 0 for A and 1 for B (their shapes
    from ``scale_shapes``)."""
    rows, k = x.shape
    shape = scale_shapes(scaling, rows, rows, k)[which]
    a = np.abs(np.asarray(x, np.float64))
    out = np.empty(shape, np.float64)
    rb = rows if shape[0] == 1 else row_block
    cb = k if shape[1] == 1 else BLOCK
    for i in range(shape[0]):
        for j in range(shape[1]):
            group = a[i * rb:(i + 1) * rb, j * cb:(j + 1) * cb]
            out[i, j] = group.max() if group.size else 0.0
    return np.where(out > 0, out / largest(fmt), 1.0).astype(np.float32)


def bound_factor(k: int, promotion: int | None = PROMOTION_INTERVAL) -> float:
    """Per-element bound on |D - ref| as a multiple of |alpha| |A_deq| @ |B_deq| (+ |beta| |C|).

    With promotion every P of K: each chunk of at most P products is summed in the tensor
    core (P adds at 2^-13 relative to the chunk's magnitude), the ceil(K / P) chunks are
    scaled and added in FP32 (one rounding each, plus a few for C, alpha and the scales).
    Without promotion P is K: the whole sum stays in the 14-bit accumulator.
    """
    if k <= 0:
        return (SCALE_ROUNDINGS + 3) * U32
    p = k if promotion is None else min(promotion, k)
    return p * ACCUMULATOR_U + (math.ceil(k / p) + 3 + SCALE_ROUNDINGS) * U32


def accumulate_14bit(a: np.ndarray, b_t: np.ndarray, promotion: int | None = PROMOTION_INTERVAL) -> np.ndarray:
    """A model of Hopper's FP8 accumulation, for tests: a @ b_t.T summed term by term in an
    accumulator truncated to 14 significant bits, promoted (added in FP32) every
    ``promotion`` terms (None: never). Slow (a loop over K); for small M and N."""
    a, b_t = np.asarray(a, np.float64), np.asarray(b_t, np.float64)
    k = a.shape[1]
    total = np.zeros((a.shape[0], b_t.shape[0]), np.float32)
    chunk = np.zeros_like(total, dtype=np.float64)
    for kk in range(k):
        chunk = _truncate(chunk + np.outer(a[:, kk], b_t[:, kk]), 14)
        if promotion is not None and (kk + 1) % promotion == 0:
            total, chunk = (total + chunk.astype(np.float32)).astype(np.float32), np.zeros_like(chunk)
    return (total + chunk.astype(np.float32)).astype(np.float32)


def _truncate(x: np.ndarray, bits: int) -> np.ndarray:
    """``x`` with its significand truncated (toward zero) to ``bits`` significant bits."""
    mantissa, exponent = np.frexp(x)  # x = mantissa * 2^exponent, 0.5 <= |mantissa| < 1
    return np.ldexp(np.trunc(mantissa * 2.0**bits) / 2.0**bits, exponent)
