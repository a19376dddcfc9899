"""Precisions: the one table of what each stores, how cuBLAS computes it, and its error model.

Four precisions, all with FP32 accumulation; D (and C) are FP32 unless the problem asks for
BF16/FP16 output (``out_dtype``, whose storage and rounding are the bf16/fp16 rows here):

- ``fp32``: FP32 inputs, FP32 products (no TF32 anywhere).
- ``tf32``: FP32 inputs in memory, rounded to TF32 (10-bit mantissa) *inside* the GEMM by
  the tensor cores; the reference therefore uses the FP32 inputs and the bound gains an
  input-rounding term.
- ``bf16`` / ``fp16``: 2-byte inputs in memory. The host rounds the FP32 data once
  (round to nearest even) and the reference uses the *rounded* values, which are exact
  in float32/float64; products of two 8- or 11-bit mantissas are exact in FP32, so only
  the accumulation rounds.

- ``fp8``: e4m3 A and B (1-byte codes) with FP32 dequantization scales in one of the
  scaling modes of fp8.py (``tensor``, ``row``, ``block``), FP32 accumulation, D in FP32
  or BF16. It has no cublasGemmEx types (``cublas`` is None: cuBLASLt is its library) and
  its bound is fp8.bound_factor's (a 14-bit tensor-core accumulator promoted to FP32 every
  128 of K). Its own kernel is ``hopper_fp8`` (kernels/hopper/fp8.py; measured in
  docs/fp8.md). ``--dtype all`` and the quick bench leave FP8 out (``in_all``): it is asked
  for by name.

One spelling everywhere (registry, CLI, JSON, plots): ``fp32``, ``tf32``, ``bf16``,
``fp16``, ``fp8``.
``from_record`` maps the spellings older results files used ("float32", "bfloat16",
"float16") when such a file is read.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from . import fp8 as _fp8
from .cuda.cublas import ComputeType, DataType, GemmTypes, MathMode

# Unit roundoff of FP32 with round to nearest.
U32 = 2.0**-24
# Tensor cores are not documented to round to nearest when they accumulate: Fasi, Higham,
# Mikaitis and Pranesh (2021, "Numerical behavior of NVIDIA tensor cores") found V100,
# T4 and A100 align the addends of each block FMA to the largest one and truncate. A
# truncating add errs by up to 2u, and the alignment of up to ~8 addends per block can
# double that again in the worst case, so tensor-core precisions use 4u per add. Random
# data stays far below either bound; a real bug (wrong index, BF16 accumulation) does not.
U_TENSOR = 4 * U32
# Rounding FP32 to TF32 (10 explicit mantissa bits): 2^-11 relative if rounded to nearest,
# up to 2^-10 if truncated, which is what an mma fed raw FP32 bits does. The bound must
# hold for both, so it takes 2^-10.
TF32_INPUT_ROUNDING = 2.0**-10

# Storing D in the output type (one rounding to nearest even) errs by half an ulp, relative:
# BF16 keeps 8 significant bits (2^-8), FP16 11 (2^-11). FP32 output's own rounding is already
# in the accumulation bound's (K + 3) u.
OUTPUT_ROUNDING = {"fp32": 0.0, "bf16": 2.0**-8, "fp16": 2.0**-11}
# Below FP16's normal range (2^-14) its spacing is fixed at 2^-24, so rounding there errs by up
# to 2^-25 absolute, whatever the value; BF16 shares FP32's range (the float32 floor covers it).
OUTPUT_FLOOR = {"fp32": 0.0, "bf16": 0.0, "fp16": 2.0**-25}
# GELU (tanh form) changes by at most 1.13 |dv| for a change dv of its argument: its steepest
# slope is 1.1289 (near v = 1.5), so the error before the activation grows by that factor.
GELU_SLOPE = 1.13
# A kernel evaluates GELU in FP32 with a fast tanh (tanh.approx.f32, common/epilogue.cuh): the
# tanh term 0.5 v tanh(.) is charged a tanh relative error of 2^-10, i.e. 2^-11 |v| in all, which
# covers tanh.approx.f32 (about 2^-11 relative) with FP32's roundings.
GELU_EVALUATION = 2.0**-11


@dataclass(frozen=True)
class Precision:
    name: str  # the one spelling: fp32, tf32, bf16, fp16, fp8
    itemsize: int  # bytes per A or B element in device memory (4, 2, or 1 for FP8 codes)
    input_rounding: float  # relative error of each factor rounded inside the GEMM
    accumulation_u: float  # unit roundoff charged per add of the K-term sum
    baseline: str  # the cuBLAS provider every kernel of this precision is compared with
    cublas: GemmTypes | None  # cublasGemmEx storage, compute type and math mode (None: FP8 has none)
    description: str
    batched_baseline: str | None = None  # the provider batched shapes are compared with
    # Further baselines of single GEMMs: "% of cuBLAS" is against the fastest of these and
    # ``baseline`` (cuBLASLt with its measured algorithm, for the tensor-core precisions).
    other_baselines: tuple[str, ...] = ()
    in_all: bool = True  # part of `--dtype all` and the quick bench (False: asked for by name, as FP8)
    scaled: bool = False  # A and B come with dequantization scales (fp8.py's scaling modes)

    @property
    def storage(self) -> np.dtype:
        """How the host hands A and B to the device: float32 values, 16-bit patterns or FP8 codes."""
        return np.dtype({4: np.float32, 2: np.uint16, 1: np.uint8}[self.itemsize])

    def bound_factor(self, k: int) -> float:
        """Per-element error bound as a multiple of |alpha| |A| @ |B| + |beta| |C|.

        (K + 3) u for the sum (as in FP32), scaled by (1 + r)^2 because the products are
        of rounded factors, plus (1 + r)^2 - 1 for the rounding of the factors itself.
        Charging the C term with the input rounding too only loosens the bound slightly.
        FP8 has its own (fp8.bound_factor: the 14-bit accumulator promoted every 128 of K).
        """
        if self.scaled:
            return _fp8.bound_factor(k)
        r = self.input_rounding
        return (k + 3) * self.accumulation_u * (1 + r) ** 2 + (2 * r + r * r)


_F32, _F16, _BF16 = DataType.CUDA_R_32F, DataType.CUDA_R_16F, DataType.CUDA_R_16BF
_C32 = ComputeType.CUBLAS_COMPUTE_32F
PRECISIONS: dict[str, Precision] = {p.name: p for p in (
    Precision("fp32", 4, 0.0, U32, "cublas", GemmTypes(_F32, _F32, _C32, MathMode.PEDANTIC),
              "FP32 in, FP32 compute, no TF32", batched_baseline="cublas_batched"),
    Precision("tf32", 4, TF32_INPUT_ROUNDING, U_TENSOR, "cublas_tf32",
              GemmTypes(_F32, _F32, ComputeType.CUBLAS_COMPUTE_32F_FAST_TF32, MathMode.TF32_TENSOR_OP),
              "FP32 in memory, TF32 tensor-core products, FP32 accumulation", other_baselines=("cublaslt_tf32",)),
    # Half-width inputs always use tensor cores; DEFAULT math keeps them allowed.
    Precision("bf16", 2, 0.0, U_TENSOR, "cublas_bf16", GemmTypes(_BF16, _F32, _C32, MathMode.DEFAULT),
              "BF16 A and B, FP32 accumulation and C", other_baselines=("cublaslt_bf16",)),
    Precision("fp16", 2, 0.0, U_TENSOR, "cublas_fp16", GemmTypes(_F16, _F32, _C32, MathMode.DEFAULT),
              "FP16 A and B, FP32 accumulation and C", other_baselines=("cublaslt_fp16",)),
    # Input rounding 0: the reference reads the dequantized values as stored; U_TENSOR is
    # unused (bound_factor is fp8's).
    Precision("fp8", 1, 0.0, _fp8.ACCUMULATOR_U, "cublaslt_fp8", None,
              "e4m3 A and B with FP32 scales (tensor, row or block), FP32 accumulation, FP32 or BF16 D",
              other_baselines=("cublaslt_fp8_row", "cublaslt_fp8_block"), in_all=False, scaled=True),
)}
NAMES = tuple(PRECISIONS)
ALL_NAMES = tuple(name for name, p in PRECISIONS.items() if p.in_all)  # what `--dtype all` means
# The spellings of results files written before the one table existed (registry dtypes).
OLD_SPELLINGS = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def get(name: str | Precision) -> Precision:
    """The Precision called ``name`` (fp32, tf32, bf16, fp16, fp8)."""
    if isinstance(name, Precision):
        return name
    found = PRECISIONS.get(name)
    if found is None:
        raise ValueError(f"unknown precision {name!r}; choose from {', '.join(NAMES)}")
    return found


def from_record(name: str) -> str:
    """The precision name of a value read from a results file, old spellings mapped."""
    return get(OLD_SPELLINGS.get(name, name)).name


def parse_dtypes(values: Iterable[str] | None) -> list[str]:
    """``--dtype`` values (repeatable, comma lists, or 'all') as precision names in the
    canonical order; an empty selection means all of them but those asked for by name (fp8)."""
    items = [item.strip().lower() for value in values or () for item in value.split(",") if item.strip()]
    if not items or "all" in items:
        if items and items != ["all"]:
            raise ValueError(f"--dtype 'all' cannot be combined with other names; got {','.join(items)}")
        return list(ALL_NAMES)
    unknown = [item for item in items if item not in PRECISIONS]
    if unknown:
        raise ValueError(f"--dtype {unknown[0]!r} is not a precision; choose from {', '.join(NAMES)} or all")
    return [name for name in NAMES if name in items]


def gemm_types(precision: str | Precision, out_dtype: str = "fp32") -> GemmTypes:
    """The precision's cublasGemmEx types with C and D stored in ``out_dtype`` (its storage
    type: CUDA_R_32F, CUDA_R_16BF or CUDA_R_16F)."""
    p = get(precision)
    if p.cublas is None:
        raise ValueError(f"{p.name} has no cublasGemmEx types; cuBLASLt ({p.baseline}) runs it")
    return dataclasses.replace(p.cublas, c_type=get(out_dtype).cublas.ab_type)


def baseline(precision: str | Precision, batch: int = 1) -> str:
    """The cuBLAS provider of a precision (its first baseline)."""
    p = get(precision)
    return p.batched_baseline if batch > 1 and p.batched_baseline else p.baseline


def baselines(precision: str | Precision, batch: int = 1) -> tuple[str, ...]:
    """The providers a case's "% of cuBLAS" may be measured against: the fastest of these."""
    p = get(precision)
    return (baseline(p, batch),) if batch > 1 else (p.baseline, *p.other_baselines)


# --- rounding --------------------------------------------------------------------------
def _as_float32(x) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32)


def bf16_bits(x) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), round to nearest, ties to even.

    Rounded chunk by chunk (_round_bf16) in a scratch that stays in cache: the operands of a
    large case are hundreds of millions of values. NaN is handled apart (the carry could turn
    a NaN whose payload sits in the low bits into infinity, or wrap): it becomes the quiet NaN
    with its sign kept.
    """
    values = _as_float32(x)
    flat, out = values.reshape(-1), np.empty(values.shape, dtype=np.uint16)
    out_flat = out.reshape(-1)
    scratch = np.empty((2, min(flat.size, _ROUNDING_CHUNK)), dtype=np.uint32)
    for start in range(0, flat.size, _ROUNDING_CHUNK):
        part = flat[start:start + _ROUNDING_CHUNK]
        bits, carry = scratch[0, :part.size], scratch[1, :part.size]
        np.copyto(bits, part.view(np.uint32))
        _round_bf16(bits, carry)
        bits >>= 16
        kept = out_flat[start:start + part.size]
        np.copyto(kept, bits, casting="unsafe")
        nan = np.isnan(part)
        if nan.any():
            kept[nan] = ((part.view(np.uint32)[nan] >> 16) | 0x7FC0).astype(np.uint16)
    return out


def _round_bf16(bits: np.ndarray, carry: np.ndarray) -> None:
    """float32 bit patterns (uint32) rounded in place to their top 16 bits, to nearest, ties to
    even; the low half is left for the caller to clear or shift out. Adding 0x7FFF plus the
    lowest kept bit is RNE; an overflow carries into the exponent and gives infinity, as it
    should. No finite value wraps (the largest, 0xFF7FFFFF, stays below 2^32 after the add);
    NaN may, so callers handle it apart. ``carry`` is scratch of the same size."""
    np.right_shift(bits, 16, out=carry)
    carry &= 1
    carry += 0x7FFF
    bits += carry


def representable_in_place(values: np.ndarray, precision: str | Precision) -> np.ndarray:
    """Finite, contiguous float32 ``values`` rounded in place to what ``precision`` stores, and
    returned: the values of ``representable`` (BF16 and FP16 to nearest, ties to even), chunk by
    chunk, with no full-size 16-bit or 32-bit copy. For fresh random operands of hundreds of
    millions of values: at 470 M, about 1 ns a value for BF16 against 16 through the copies (NaN
    is not handled: none is drawn)."""
    p = get(precision)
    if p.itemsize == 4:
        return values
    if p.itemsize == 1:
        raise ValueError("FP8 operands are quantized with their scales (fp8.quantize), not rounded here")
    flat = values.reshape(-1)
    scratch = np.empty(min(flat.size, _ROUNDING_CHUNK), dtype=np.uint32 if p.name == "bf16" else np.float16)
    for start in range(0, flat.size, _ROUNDING_CHUNK):  # a chunk's scratch stays in cache, reused
        part = flat[start:start + _ROUNDING_CHUNK]
        kept = scratch[:part.size]
        if p.name == "bf16":
            bits = part.view(np.uint32)
            _round_bf16(bits, kept)
            bits &= np.uint32(0xFFFF0000)
        else:
            with np.errstate(over="ignore"):
                np.copyto(kept, part, casting="same_kind")
            np.copyto(part, kept)
    return values


_ROUNDING_CHUNK = 1 << 18


def bf16_to_float32(bits) -> np.ndarray:
    """bfloat16 bit patterns -> float32 values (exact: bf16 is the top half of float32)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def fp16_bits(x) -> np.ndarray:
    """float32 -> IEEE half bit patterns; NumPy's conversion rounds to nearest even (and
    overflows to infinity, as IEEE rounding does: no warning for that)."""
    with np.errstate(over="ignore"):
        return _as_float32(x).astype(np.float16).view(np.uint16)


def fp16_to_float32(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint16).view(np.float16).astype(np.float32)


def tf32_round(x) -> np.ndarray:
    """float32 values rounded to TF32 (10 mantissa bits), to nearest even, as float32.

    Used by the tests to build an answer "as a TF32 GEMM would compute it"."""
    bits = _as_float32(x).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0xFFF + ((bits >> 13) & 1)) & ~np.uint64(0x1FFF)).astype(np.uint32)
    return np.where(np.isnan(_as_float32(x)), _as_float32(x), rounded.view(np.float32))


def to_storage(x, precision: str | Precision) -> np.ndarray:
    """The array uploaded for A or B: float32 as is, 16-bit patterns (rounded RNE), or e4m3
    codes (saturated, RNE; values already divided by their scales: fp8.quantize)."""
    p = get(precision)
    if p.itemsize == 4:
        return _as_float32(x)
    if p.itemsize == 1:
        return _fp8.fp8_codes(x)
    return bf16_bits(x) if p.name == "bf16" else fp16_bits(x)


def from_storage(stored, precision: str | Precision) -> np.ndarray:
    """float32 values of an array as a device buffer holds it: float32 as is, 16-bit
    patterns decoded (exact) for BF16/FP16."""
    p = get(precision)
    if p.itemsize == 4:
        return _as_float32(stored)
    if p.itemsize == 1:
        return _fp8.fp8_values(stored)
    return bf16_to_float32(stored) if p.name == "bf16" else fp16_to_float32(stored)


def representable(x, precision: str | Precision) -> np.ndarray:
    """float32 values of ``x`` as the GEMM's memory holds them: rounded to BF16/FP16 for
    those precisions, unchanged for FP32 and TF32 (TF32 rounds inside the GEMM)."""
    p = get(precision)
    if p.itemsize == 4:
        return _as_float32(x)
    return from_storage(to_storage(x, p), p)
