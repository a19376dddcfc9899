"""Precisions without a GPU: BF16/FP16/TF32 rounding bit for bit, the --dtype names, and
each precision's error bound accepting the right answer and rejecting wrong ones."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_driver import kernels, precision
from gemm_driver.cuda import cublas
from gemm_driver.problem import GemmProblem
from gemm_driver.verify import check, error_bound, reference


def f32(bits: int) -> np.float32:
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


# --- BF16 rounding ---------------------------------------------------------------------
@pytest.mark.parametrize("bits, expected", [
    (0x3F800000, 0x3F80),  # 1.0 exactly
    (0x3F807FFF, 0x3F80),  # just below half an ulp: down
    (0x3F808000, 0x3F80),  # tie, kept bit even (0): stays
    (0x3F818000, 0x3F82),  # tie, kept bit odd (1): up to even
    (0x3F808001, 0x3F81),  # just above half: up
    (0xBF808001, 0xBF81),  # negative, same magnitude rule
    (0x80000000, 0x8000),  # -0 keeps its sign
    (0x00000001, 0x0000),  # smallest subnormal rounds to +0
    (0x7F7FFFFF, 0x7F80),  # FLT_MAX overflows to +inf under RNE
    (0xFF7FFFFF, 0xFF80),  # -FLT_MAX: the largest pattern rounded, no 32-bit wrap
    (0x7F800000, 0x7F80),  # +inf
    (0xFF800000, 0xFF80),  # -inf
])
def test_bf16_round_to_nearest_even(bits, expected):
    assert int(precision.bf16_bits(np.array([f32(bits)]))[0]) == expected


@pytest.mark.parametrize("bits", [0x7FC00000, 0x7F800001, 0x7F80FFFF, 0xFFC00001, 0xFFFFFFFF])
def test_bf16_nan_stays_a_quiet_nan_with_its_sign(bits):
    out = int(precision.bf16_bits(np.array([f32(bits)]))[0])
    assert out & 0x7F80 == 0x7F80 and out & 0x7F != 0, hex(out)  # a NaN, not infinity
    assert out & 0x0040  # quiet
    assert out >> 15 == bits >> 31  # sign kept


@settings(max_examples=300, deadline=None)
@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_bf16_is_the_nearest_bf16_value(x):
    """Against an independent model: the nearer of the two bf16 neighbours (truncations)."""
    value = np.float32(x)
    bits = int(np.array([value]).view(np.uint32)[0])
    down = bits & 0xFFFF0000
    up = down + 0x10000
    got = int(precision.bf16_bits(np.array([value]))[0]) << 16
    candidates = [down, up]
    dist = [abs(float(f32(c)) - float(value)) if (c >> 23) & 0xFF != 0xFF or c & 0x7FFFFF == 0 else np.inf
            for c in candidates]
    if np.isinf(float(f32(got))):  # overflow only from the largest finite bf16
        assert abs(float(value)) >= float(f32(0x7F7F8000))
        return
    assert abs(float(f32(got)) - float(value)) == min(dist)
    if dist[0] == dist[1]:
        assert (got >> 16) & 1 == 0, "ties go to the even pattern"


def test_bf16_round_trip_is_exact_for_bf16_values():
    bits = np.arange(0, 0x7F80, 7, dtype=np.uint16)  # positive finite patterns
    values = precision.bf16_to_float32(bits)
    assert np.array_equal(precision.bf16_bits(values), bits)
    assert np.array_equal(precision.bf16_bits(-values), bits | 0x8000)


def test_bf16_bits_of_many_chunks_match_ml_dtypes():
    """Past one rounding chunk, with ties, overflow, NaN and infinity in a later chunk and a
    2-D shape: the same patterns as ml_dtypes' bfloat16 cast (an independent rounding)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, size=(3, 2**17 + 5), dtype=np.uint32)
    special = [0x3F808000, 0x3F818000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0x7FC00001, 0xFFFFFFFF]
    bits.reshape(-1)[-len(special):] = special
    values = bits.view(np.float32)
    got = precision.bf16_bits(values)
    with np.errstate(invalid="ignore", over="ignore"):  # NaN and overflow are drawn on purpose
        want = values.astype(ml_dtypes.bfloat16).view(np.uint16)
    nan = np.isnan(values)
    assert got.shape == values.shape
    assert np.array_equal(got[~nan], want[~nan])
    assert np.all(got[nan] & 0x7FC0 == 0x7FC0) and np.array_equal(got[nan] >> 15, want[nan] >> 15)


# --- FP16 and TF32 ---------------------------------------------------------------------
@pytest.mark.parametrize("x, expected", [
    (1.0, 0x3C00), (1.0 + 2**-11, 0x3C00), (1.0 + 3 * 2**-11, 0x3C02),  # ties to even
    (65504.0, 0x7BFF), (65520.0, 0x7C00), (-np.inf, 0xFC00), (2**-24, 0x0001), (2**-26, 0x0000),
])
def test_fp16_round_to_nearest_even(x, expected):
    assert int(precision.fp16_bits(np.array([x], np.float32))[0]) == expected


def test_fp16_nan_is_nan():
    out = precision.fp16_to_float32(precision.fp16_bits(np.array([np.nan], np.float32)))
    assert np.isnan(out[0])


@pytest.mark.parametrize("bits, expected", [
    (0x3F800FFF, 0x3F800000), (0x3F801000, 0x3F800000), (0x3F803000, 0x3F804000), (0x3F801001, 0x3F802000),
])
def test_tf32_round_to_nearest_even(bits, expected):
    out = precision.tf32_round(np.array([f32(bits)]))
    assert int(out.view(np.uint32)[0]) == expected


def test_representable_rounds_only_two_byte_precisions():
    x = np.array([1 + 2**-20, 1 / 3], np.float32)
    assert np.array_equal(precision.representable(x, "fp32"), x)
    assert np.array_equal(precision.representable(x, "tf32"), x)  # TF32 rounds inside the GEMM
    assert precision.representable(x, "bf16")[0] == 1.0
    assert precision.representable(x, "fp16")[1] == np.float32(np.float16(1 / 3))


# --- names -----------------------------------------------------------------------------
@pytest.mark.parametrize("values, expected", [
    (None, ["fp32", "tf32", "bf16", "fp16"]), (["all"], ["fp32", "tf32", "bf16", "fp16"]),
    (["bf16,fp32"], ["fp32", "bf16"]), (["fp16", "TF32"], ["tf32", "fp16"]), (["fp32,fp32"], ["fp32"]),
])
def test_parse_dtypes(values, expected):
    assert precision.parse_dtypes(values) == expected


@pytest.mark.parametrize("values, fragment", [
    (["fp64"], "'fp64' is not a precision; choose from fp32, tf32, bf16, fp16, fp8 or all"),
    (["all,bf16"], "cannot be combined"),
])
def test_parse_dtypes_refuses(values, fragment):
    with pytest.raises(ValueError, match=fragment):
        precision.parse_dtypes(values)


def test_every_registered_entry_has_a_precision_and_baselines_exist():
    for entry in kernels.ALL.values():
        assert precision.get(entry.precision).name == entry.precision  # the one spelling, in the table
    for p in precision.PRECISIONS.values():
        provider = kernels.get(p.baseline)
        assert precision.get(provider.precision) is p and provider.kind == "library"
        if p.scaled:  # FP8: no cublasGemmEx; cuBLASLt is its library
            assert p.cublas is None and provider.name.startswith("cublaslt")
            continue
        assert isinstance(p.cublas, cublas.GemmTypes)  # the one table holds the cuBLAS types
        assert p.cublas.ab_bytes == p.itemsize and p.cublas.c_bytes == 4
    with pytest.raises(ValueError, match="unknown precision 'bfloat16'"):
        precision.get("bfloat16")  # one spelling: the registry's old names are gone ...
    assert [precision.from_record(n) for n in ("float32", "bfloat16", "float16", "tf32")] == [
        "fp32", "bf16", "fp16", "tf32"]  # ... and mapped only when an older results file is read
    with pytest.raises(ValueError, match="unknown precision"):
        dataclasses.replace(kernels.KERNELS["naive"], precision="bfloat16")  # a spec spelled otherwise is refused
    assert precision.baseline("fp32", batch=8) == "cublas_batched" == precision.get("fp32").batched_baseline
    assert precision.baseline("bf16", batch=8) == "cublas_bf16"
    with pytest.raises(ValueError, match="unknown precision 'int8'"):
        precision.get("int8")


# --- the bounds ------------------------------------------------------------------------
def operands(m, n, k, dtype="fp32", seed=0):
    rng = np.random.default_rng(seed)
    a = precision.representable(rng.uniform(-1, 1, (m, k)).astype(np.float32), dtype)
    b = precision.representable(rng.uniform(-1, 1, (k, n)).astype(np.float32), dtype)
    return a, b


def exact_fp32(a, b):
    """The answer a correct FP32-accumulating GEMM may give: the exact product, rounded once."""
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


def as_tf32_gemm(a, b, rounding=precision.tf32_round):
    return exact_fp32(rounding(a), rounding(b))


def tf32_truncate(x):
    return (np.ascontiguousarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def bf16_accumulating_gemm(a, b):
    """What a kernel that keeps its running sum in BF16 computes."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for kk in range(a.shape[1]):
        acc = precision.bf16_to_float32(precision.bf16_bits(acc + a[:, kk:kk + 1] * b[kk:kk + 1, :]))
    return acc


def verdict(out, a, b, dtype, beta=0.0):
    p = GemmProblem(a.shape[0], b.shape[1], a.shape[1], 1.0, beta)
    return check(p, out, reference(p, a, b, None), precision=dtype)


@pytest.mark.parametrize("dtype", precision.NAMES)
@pytest.mark.parametrize("k", [1, 16, 1000])
def test_each_bound_accepts_the_right_answer(dtype, k):
    a, b = operands(24, 20, k, dtype)
    out = as_tf32_gemm(a, b) if dtype == "tf32" else exact_fp32(a, b)
    result = verdict(out, a, b, dtype)
    assert result.ok and result.max_error_ratio < 1, result.message


@pytest.mark.parametrize("dtype", precision.NAMES)
def test_each_bound_rejects_a_single_wrong_element(dtype):
    a, b = operands(24, 20, 64, dtype)
    out = exact_fp32(a, b)
    scale = np.abs(a[3]) @ np.abs(b[:, 5])
    out[3, 5] += 0.01 * scale  # 1% of the element's scale (about a missed product): no rounding explains it
    result = verdict(out, a, b, dtype)
    assert not result.ok and result.wrong == 1 and "(3, 5)" in result.message


@pytest.mark.parametrize("k", [1, 16, 64])
def test_tf32_results_fail_the_fp32_bound_but_pass_their_own(k):
    a, b = operands(32, 32, k)
    out = as_tf32_gemm(a, b)
    assert not verdict(out, a, b, "fp32").ok
    assert verdict(out, a, b, "tf32").ok


def test_tf32_bound_covers_truncating_hardware_where_2_to_the_minus_11_would_not():
    """An mma fed raw FP32 bits truncates them to TF32 (relative error up to 2^-10): the bound
    takes 2^-10, and the test shows that the rounding-to-nearest figure would be too tight."""
    a, b = operands(64, 64, 1)
    out = as_tf32_gemm(a, b, rounding=tf32_truncate)
    assert verdict(out, a, b, "tf32").ok
    p = GemmProblem(64, 64, 1)
    ref = reference(p, a, b, None)
    r = 2.0**-11
    tight = ((1 + 3) * precision.U_TENSOR * (1 + r) ** 2 + 2 * r + r * r) * ref.magnitude * 1.05
    assert np.any(np.abs(out - ref.value) > tight)


@pytest.mark.parametrize("k", [1, 16])
def test_tf32_bound_rejects_bf16_rounded_inputs(k):
    a, b = operands(32, 32, k)
    out = exact_fp32(precision.representable(a, "bf16"), precision.representable(b, "bf16"))
    assert not verdict(out, a, b, "tf32").ok


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_two_byte_bounds_reject_bf16_accumulation(dtype):
    a, b = operands(32, 32, 64, dtype)
    assert verdict(exact_fp32(a, b), a, b, dtype).ok
    assert not verdict(bf16_accumulating_gemm(a, b), a, b, dtype).ok


def test_fp16_reference_is_of_the_rounded_inputs():
    """A kernel that multiplied the unrounded FP32 data would not match the FP16 reference."""
    rng = np.random.default_rng(5)
    a32 = rng.uniform(-1, 1, (32, 8)).astype(np.float32)
    b32 = rng.uniform(-1, 1, (8, 32)).astype(np.float32)
    a16, b16 = precision.representable(a32, "fp16"), precision.representable(b32, "fp16")
    assert verdict(exact_fp32(a16, b16), a16, b16, "fp16").ok
    assert not verdict(exact_fp32(a32, b32), a16, b16, "fp16").ok


def test_fp32_bound_is_unchanged():
    m = np.ones((2, 2))
    assert np.allclose(error_bound(100, m, "fp32"), 103 * 2.0**-24 * 1.05 + np.finfo(np.float32).tiny)
    assert np.allclose(error_bound(100, m, precision.from_record("float32")), error_bound(100, m, "fp32"))
    assert precision.get("bf16").bound_factor(100) == 103 * precision.U_TENSOR
