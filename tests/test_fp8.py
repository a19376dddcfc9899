"""FP8 on the host (gemm_driver/fp8.py, the fp8 precision, FP8 problems and operands).

No GPU: scale shapes per mode, e4m3 rounding (saturating, NaN kept), quantization and the
dequantized values the reference reads, drawn scales that reach e4m3's subnormals and its
saturation, the accumulation bound against a model of Hopper's 14-bit accumulator (with
promotion every 128 of K it holds; without, on same-signed data, it is exceeded), and the
argument rules, each refused in one line.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("ml_dtypes")

from gemm_driver import fp8, precision  # noqa: E402
from gemm_driver.operands import _as_bits, random_scaled_operands  # noqa: E402
from gemm_driver.problem import FP8_TYPES, GemmProblem, fp8_rule, fp8_types_of, parse_fp8_types  # noqa: E402
from gemm_driver.verify import check, reference  # noqa: E402


def nt(m, n, k, scaling="tensor", **kw):
    return GemmProblem(m, n, k, trans_b=True, scaling=scaling, **kw)


# --- scaling modes and their shapes ------------------------------------------------------
@pytest.mark.parametrize("scaling,expected", [
    ("tensor", ((1, 1), (1, 1))),
    ("row", ((130, 1), (257, 1))),
    ("block", ((130, 3), (3, 3))),  # A 1 x 128 along K, B 128 x 128
])
def test_scale_shapes(scaling, expected):
    assert fp8.scale_shapes(scaling, 130, 257, 300) == expected


def test_parse_scalings():
    assert fp8.parse_scalings("tensor, block,tensor") == ["tensor", "block"]
    assert fp8.parse_scalings(None) == ["tensor"]
    with pytest.raises(ValueError, match="--scaling 'col' is not one of tensor, row, block"):
        fp8.parse_scalings("tensor,col")


# --- e4m3 rounding --------------------------------------------------------------------------
def test_e4m3_rounding_saturates_and_keeps_nan():
    codes = fp8.fp8_codes([1.0, -0.3, 500.0, -1e9, 2.0**-9, 2.0**-11, np.nan])
    values = fp8.fp8_values(codes)
    assert list(values[:6]) == [1.0, -0.3125, 448.0, -448.0, 2.0**-9, 0.0]
    assert np.isnan(values[6]) and codes[0] == 0x38 and codes[2] == 0x7E


def test_every_finite_code_round_trips():
    codes = np.arange(256, dtype=np.uint8)
    values = fp8.fp8_values(codes)
    finite = ~np.isnan(values)
    assert finite.sum() == 254  # 0x7F and 0xFF are the NaNs (e4m3fn has no infinity)
    again = fp8.fp8_codes(values[finite])
    assert np.array_equal(fp8.fp8_values(again), values[finite])


def test_e5m2_rounding_saturates_and_keeps_nan():
    codes = fp8.fp8_codes([1.0, -0.3, 60000.0, -1e9, 2.0**-16, 2.0**-18, np.nan], "e5m2")
    values = fp8.fp8_values(codes, "e5m2")
    assert list(values[:6]) == [1.0, -0.3125, 57344.0, -57344.0, 2.0**-16, 0.0]  # 2 mantissa bits: 0.3 -> 0.3125
    assert np.isnan(values[6]) and codes[0] == 0x3C and codes[2] == 0x7B
    ties = fp8.fp8_values(fp8.fp8_codes([1.125, 1.375], "e5m2"), "e5m2")  # halfway: to the even significand
    assert list(ties) == [1.0, 1.5]
    with pytest.raises(ValueError, match="FP8 format 'e6m1' is not one of e4m3, e5m2"):
        fp8.fp8_codes([1.0], "e6m1")


def test_precision_row_stores_codes():
    p = precision.get("fp8")
    assert p.itemsize == 1 and p.storage == np.uint8 and p.scaled and p.cublas is None
    x = np.array([0.3, 1000.0], np.float32)
    assert list(precision.representable(x, "fp8")) == [0.3125, 448.0]
    with pytest.raises(ValueError, match="fp8 has no cublasGemmEx types"):
        precision.gemm_types("fp8")


def test_dtype_all_leaves_fp8_to_be_named():
    assert "fp8" not in precision.parse_dtypes(["all"]) and "fp8" not in precision.parse_dtypes(None)
    assert precision.parse_dtypes(["fp8,bf16"]) == ["bf16", "fp8"]


def test_one_byte_matrices_take_codes_only():
    assert _as_bits(np.array([[0x38]], np.uint8), 1).dtype == np.uint8
    with pytest.raises(ValueError, match="a 1-byte matrix takes uint8 FP8 codes"):
        _as_bits(np.array([[1.0]], np.float32), 1)


# --- quantization and drawn operands -----------------------------------------------------------
@pytest.mark.parametrize("scaling", fp8.SCALINGS)
def test_dequantized_values_are_codes_times_their_scales(scaling):
    p = nt(130, 257, 300, scaling)
    ops = random_scaled_operands(p, np.random.default_rng(3), spread=6)
    (sa, sb) = fp8.scale_shapes(scaling, 130, 257, 300)
    assert ops.scales_a.shape == sa and ops.scales_b.shape == sb and ops.scales_a.dtype == np.float32
    assert ops.codes_a.shape == (130, 300) and ops.codes_b.shape == (257, 300)  # B stored N x K
    ra, rb = fp8.row_blocks(scaling)
    expect_a = fp8.fp8_values(ops.codes_a) * fp8.expand(ops.scales_a, 130, 300, ra)
    expect_b = fp8.fp8_values(ops.codes_b) * fp8.expand(ops.scales_b, 257, 300, rb)
    assert np.array_equal(ops.a, expect_a) and np.array_equal(ops.b, expect_b)
    # amax / 448 scales: every group's largest value is stored as +-448 (or next to it)
    assert np.abs(fp8.fp8_values(ops.codes_a)).max() == 448.0


@pytest.mark.parametrize("fp8_types", ["e5m2_e4m3", "e4m3_e5m2", "e5m2"])
def test_each_operand_is_quantized_in_its_format(fp8_types):
    p = nt(130, 257, 300, "block", fp8_types=fp8_types)
    ops = random_scaled_operands(p, np.random.default_rng(5), spread=6)
    fmt_a, fmt_b = p.operand_formats
    for codes, scales, values, rows, row_block, fmt in ((ops.codes_a, ops.scales_a, ops.a, 130, 1, fmt_a),
                                                      (ops.codes_b, ops.scales_b, ops.b, 257, 128, fmt_b)):
        assert np.array_equal(values, fp8.fp8_values(codes, fmt) * fp8.expand(scales, rows, 300, row_block))
        assert np.abs(fp8.fp8_values(codes, fmt)).max() == fp8.largest(fmt)  # amax over the format's largest


def test_block_scales_cover_their_blocks():
    scales = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)  # B: 2 x 2 blocks of 128 x 128
    full = fp8.expand(scales, 200, 130, 128)
    assert full[127, 127] == 1.0 and full[127, 128] == 2.0 and full[128, 0] == 3.0 and full[199, 129] == 4.0


def test_scale_offsets_reach_subnormals_and_saturation():
    p = nt(64, 64, 256, "row")
    tiny = random_scaled_operands(p, np.random.default_rng(0), offset=10)  # values / 2^10: subnormal or 0
    exponent = (tiny.codes_a >> 3) & 0xF
    assert np.any((exponent == 0) & ((tiny.codes_a & 7) != 0)), "no e4m3 subnormal drawn"
    huge = random_scaled_operands(p, np.random.default_rng(0), offset=-3)  # values x 8: saturated
    assert np.mean(np.abs(fp8.fp8_values(huge.codes_a)) == 448.0) > 0.5


# --- the bound --------------------------------------------------------------------------------
def test_bound_factor_with_and_without_promotion():
    assert fp8.bound_factor(128) == pytest.approx(128 * 2.0**-13 + 7 * 2.0**-24)
    assert fp8.bound_factor(16384) == pytest.approx(128 * 2.0**-13 + (128 + 6) * 2.0**-24)
    assert fp8.bound_factor(16384, promotion=None) == pytest.approx(16384 * 2.0**-13 + 7 * 2.0**-24)
    assert fp8.bound_factor(64) < fp8.bound_factor(128)  # a short K has fewer adds in the accumulator
    assert precision.get("fp8").bound_factor(16384) == fp8.bound_factor(16384)


def _ratio(problem, out, a, b):
    return check(problem, out, reference(problem, a, b, None), precision="fp8")


@pytest.mark.parametrize("low", [0.0, -1.0])  # same-signed data (the hard case) and signed data
def test_promoted_14_bit_accumulation_is_within_the_bound(low):
    rng = np.random.default_rng(7)
    k = 16384
    a = fp8.fp8_values(fp8.fp8_codes(rng.uniform(low, 1, (4, k)))).astype(np.float64)
    b = fp8.fp8_values(fp8.fp8_codes(rng.uniform(low, 1, (3, k)))).astype(np.float64)
    p = nt(4, 3, k)
    result = _ratio(p, fp8.accumulate_14bit(a, b, promotion=128), a, b)
    assert result.ok, result.message


def test_unpromoted_14_bit_accumulation_exceeds_the_promoted_bound():
    """Where FP8 differs from FP32: kept in the 14-bit accumulator over K = 16384 same-signed
    terms, the sum drifts by ~25% (modelled), 16x the promoted bound; promoted, 0.07%."""
    rng = np.random.default_rng(7)
    k = 16384
    a = fp8.fp8_values(fp8.fp8_codes(rng.uniform(0, 1, (4, k)))).astype(np.float64)
    b = fp8.fp8_values(fp8.fp8_codes(rng.uniform(0, 1, (3, k)))).astype(np.float64)
    result = _ratio(nt(4, 3, k), fp8.accumulate_14bit(a, b, promotion=None), a, b)
    assert not result.ok and result.max_error_ratio > 5


def test_fp8_bound_rejects_one_wrong_element():
    p = nt(16, 24, 512, "block")
    ops = random_scaled_operands(p, np.random.default_rng(1))
    ref = reference(p, ops.a, ops.b, None)
    out = ref.value.astype(np.float32)
    assert check(p, out, ref, precision="fp8").ok
    out[3, 5] += 0.05 * ref.magnitude[3, 5]  # a missed block of 128 of K is about 25%
    result = check(p, out, ref, precision="fp8")
    assert not result.ok and result.wrong == 1 and "(3, 5)" in result.message


# --- argument rules ------------------------------------------------------------------------------
@pytest.mark.parametrize("problem,prec,fragment", [
    (GemmProblem(8, 8, 32, trans_b=True), "fp8", "fp8 needs a scaling of tensor, row or block"),
    (GemmProblem(8, 8, 32, scaling="row"), "fp8", "layout nt (A stored M x K, B stored N x K), not nn"),
    (nt(8, 8, 32, out_dtype="fp16"), "fp8", "fp8 writes D in fp32 or bf16, not fp16"),
    (nt(8, 8, 32, batch=2), "fp8", "batch 1"),
    (nt(8, 8, 32), "bf16", "scaling 'tensor' needs fp8 operands, not bf16"),
])
def test_fp8_rules(problem, prec, fragment):
    assert fragment in fp8_rule(problem, prec)
    assert fp8_rule(nt(8, 8, 32, "block", out_dtype="bf16"), "fp8") is None
    assert fp8_rule(GemmProblem(8, 8, 8), "bf16") is None


def test_fp8_types_name_each_operand_in_one_line():
    assert nt(8, 8, 32).operand_formats == ("e4m3", "e4m3")
    assert nt(8, 8, 32, fp8_types="e5m2_e4m3").operand_formats == ("e5m2", "e4m3")
    assert nt(8, 8, 32, fp8_types="e5m2").operand_formats == ("e5m2", "e5m2")
    assert [fp8_types_of(*nt(8, 8, 32, fp8_types=t).operand_formats) for t in FP8_TYPES] == list(FP8_TYPES)
    with pytest.raises(ValueError, match="fp8_types 'e5m3' is not one of e4m3, e5m2_e4m3, e4m3_e5m2, e5m2"):
        GemmProblem(8, 8, 8, fp8_types="e5m3")
    assert fp8_rule(GemmProblem(8, 8, 8, fp8_types="e5m2"), "bf16") == "fp8_types 'e5m2' needs fp8 operands, not bf16"
    assert parse_fp8_types("e4m3, e5m2_e4m3,e4m3") == ["e4m3", "e5m2_e4m3"] and parse_fp8_types(None) == ["e4m3"]
    with pytest.raises(ValueError, match="--fp8-types 'e4m3_e4m3' is not one of e4m3, e5m2_e4m3, e4m3_e5m2, e5m2"):
        parse_fp8_types("e4m3_e4m3")


def test_scaling_is_validated_in_one_line():
    with pytest.raises(ValueError, match="scaling 'col' is not one of none, tensor, row, block"):
        GemmProblem(8, 8, 8, scaling="col")
    with pytest.raises(ValueError, match="fp8 needs a scaling"):
        random_scaled_operands(GemmProblem(8, 8, 8, trans_b=True), np.random.default_rng(0))


# --- the FP8 baselines declare what they take -------------------------------------------------
def test_fp8_providers_declare_nt_and_one_scaling_each():
    from gemm_driver import kernels
    from gemm_driver.kernels.providers import Provider
    from gemm_driver.session import check_operands
    from gemm_driver.cuda.errors import UnsupportedProblem

    expected = {"cublaslt_fp8": ("tensor",), "cublaslt_fp8_row": ("row",), "cublaslt_fp8_block": ("block",),
                "torch_fp8": ("tensor", "row", "block")}
    for name, scalings in expected.items():
        provider = kernels.get(name)
        assert provider.precision == "fp8" and provider.layouts == ("nt",) and provider.scalings == scalings
        assert provider.out_dtypes == ("fp32", "bf16")
    one = (SimpleNamespace(ptr=0, ld=64, itemsize=1), SimpleNamespace(ptr=0, ld=64, itemsize=1))
    check_operands(kernels.get("cublaslt_fp8_block"), nt(64, 64, 64, "block"), *one)  # accepted
    with pytest.raises(UnsupportedProblem, match="cublaslt_fp8 does not take scaling 'row'; it takes tensor"):
        check_operands(kernels.get("cublaslt_fp8"), nt(64, 64, 64, "row"), *one)
    with pytest.raises(UnsupportedProblem, match="does not take layout 'nn'; it takes nt"):
        check_operands(kernels.get("cublaslt_fp8"), GemmProblem(64, 64, 64, scaling="tensor"), *one)
    with pytest.raises(UnsupportedProblem, match="cublas_bf16 does not take scaling 'tensor'"):
        check_operands(kernels.get("cublas_bf16"), nt(64, 64, 64), *(SimpleNamespace(ptr=0, ld=64, itemsize=2),) * 2)
    with pytest.raises(ValueError, match="scalings must be a non-empty tuple of none, tensor, row, block"):
        Provider("x", "x", scalings=("col",))


# --- surfaces: drawn cases, the prepared case, the sweep, the JSON, the CLI ---------------------
def test_drawn_fp8_cases_cover_modes_odd_k_and_scale_extremes():
    from hypothesis import HealthCheck, given, settings

    from gemm_driver import kernels
    from gemm_driver.case import PreparedCase
    from gemm_driver.strategies import gemm_cases, variants_of

    seen = []

    @settings(max_examples=150, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(gemm_cases(200, variants_of(kernels.get("torch_fp8"))))
    def collect(case):
        seen.append(case)

    collect()
    problems = [case.problem for case in seen]
    assert {p.scaling for p in problems} == set(fp8.SCALINGS) and {p.layout for p in problems} == {"nt"}
    assert any(p.k % 16 for p in problems) and any(case.scale_draw[1] == 8 for case in seen)
    assert any(case.scale_draw == (20, -2) or case.scale_draw[0] == 20 for case in seen)
    case = next(c for c in seen if c.problem.scaling == "block" and c.problem.k > 128)
    with PreparedCase.random(case.problem, "fp8", case.data_seed, scale_draw=case.scale_draw) as prepared:
        assert prepared.scaled.codes_a.dtype == np.uint8 and "scaling=block" in case.describe()
        assert prepared.reference.value.shape == (case.problem.m, case.problem.n)  # host only, no GPU
    with pytest.raises(ValueError, match="a fp8 case needs its scaled operands"):
        PreparedCase(case.problem, "fp8", prepared.a_host, prepared.b_host, None)


def test_sweep_runs_fp8_in_nt_per_scaling_and_records_it():
    from gemm_driver.bench.runner import CaseResult, sweep_steps
    from gemm_driver.bench import results_schema
    from gemm_driver.bench.writers import record_variant_label

    steps = sweep_steps(["cublaslt_fp8", "cublaslt_fp8_block", "cublas_bf16"], [(256, 256, 256)],
                        scalings=("tensor", "block"))
    fp8_steps = [(s.problem.layout, s.problem.scaling, s.kernels) for s in steps if s.precision == "fp8"]
    assert fp8_steps == [("nt", "tensor", ["cublaslt_fp8"]), ("nt", "block", ["cublaslt_fp8_block"])]
    assert [s.problem.scaling for s in steps if s.precision == "bf16"] == ["none"]
    record = CaseResult("cublaslt_fp8_block", steps[-1].problem, "skipped", precision="fp8").as_dict()
    assert record["scaling"] == "block" and record_variant_label(record) == "nt fp32 none block"
    plain = CaseResult("cublas_bf16", steps[0].problem, "skipped", precision="bf16").as_dict()
    assert "scaling" not in plain  # optional on read: older files have none
    for rec in (record, plain):
        results_schema.check({"results": [rec]})


@pytest.mark.parametrize("argv,fragment", [
    (["--scaling", "tensor,col"], "--scaling 'col' is not one of tensor, row, block"),
    (["--scaling", "row"], "--scaling applies to fp8 cases; add --dtype fp8"),
])
def test_bench_scaling_argument_rules(argv, fragment, capsys):
    from gemm_driver.cli import main

    code = main(["bench", "--shapes", "64x64x64", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and fragment in err[0]
