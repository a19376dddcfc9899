"""Operands, reference and bound of the linear-layer variants (transposed operands, BF16/FP16
output, bias/ReLU/GELU epilogues), on the CPU: stored shapes and guards, the float64
reference from the values as stored, and a bound that passes every correct rounding and
evaluation while a wrong element still fails."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_operands_cpu import HostBuffer

from gemm_driver import operands
from gemm_driver import precision as _precision
from gemm_driver.case import PreparedCase
from gemm_driver.operands import GUARD_BITS_16, POISON_BITS_16, random_bias, random_operands, stored_shapes, uniform
from gemm_driver.problem import EPILOGUES, LAYOUTS, GemmProblem, layout_flags
from gemm_driver.strategies import Variants, gemm_cases, variants_of
from gemm_driver.verify import activation, check, error_bound, output_bound, reference


@pytest.fixture(autouse=True)
def host_buffers(monkeypatch):
    monkeypatch.setattr(operands, "DeviceBuffer", HostBuffer)


def problem_in(layout="nn", **fields) -> GemmProblem:
    trans_a, trans_b = layout_flags(layout)
    return GemmProblem(fields.pop("m", 5), fields.pop("n", 7), fields.pop("k", 9), trans_a=trans_a, trans_b=trans_b,
                       **fields)


# --- operands -------------------------------------------------------------------------------
@pytest.mark.parametrize("layout, shape_a, shape_b", [("nn", (5, 9), (9, 7)), ("nt", (5, 9), (7, 9)),
                                                      ("tn", (9, 5), (9, 7)), ("tt", (9, 5), (7, 9))])
def test_operands_are_generated_in_their_stored_shapes(layout, shape_a, shape_b):
    p = problem_in(layout, beta=1.0)
    a, b, c = random_operands(p, np.random.default_rng(0), "bf16")
    assert (a.shape, b.shape, c.shape) == (shape_a, shape_b, (5, 7))
    assert stored_shapes(p) == (shape_a, shape_b, (5, 7))


def test_default_data_is_a_b_and_c_drawn_in_that_order_and_no_bias():
    """nn/fp32/none draws A, B and C in that order (operands.uniform) and no bias after them."""
    p = GemmProblem(3, 4, 5, beta=1.0)
    rng = np.random.default_rng(7)
    a, b, c = random_operands(p, np.random.default_rng(7), "fp32")
    for drawn, shape in ((a, (3, 5)), (b, (5, 4)), (c, (3, 4))):
        np.testing.assert_array_equal(drawn, uniform(rng, shape))
    assert random_bias(p, rng) is None


@pytest.mark.parametrize("out", ["bf16", "fp16"])
def test_c_and_bias_hold_values_of_the_output_type(out):
    p = problem_in(beta=0.5, out_dtype=out, epilogue="bias")
    rng = np.random.default_rng(3)
    _, _, c = random_operands(p, rng, "bf16")
    bias = random_bias(p, rng)
    for x in (c, bias):
        np.testing.assert_array_equal(x, _precision.representable(x, out))
    assert bias.shape == (7,)


def test_transposed_operand_is_guarded_with_its_own_padding():
    p = problem_in("nt")
    a, b, _ = random_operands(p, np.random.default_rng(1), "bf16")
    dev_a, dev_b, dev_c = operands.upload_operands(p, a, b, None, guard=2, lds=(10, 12, 8), precision="bf16")
    assert (dev_b.rows, dev_b.cols, dev_b.ld) == (7, 9, 12)  # N x K stored, its own ld
    np.testing.assert_array_equal(_precision.from_storage(dev_b.read()[0], "bf16"), b)
    outside = np.ones(dev_b.size, bool)
    dev_b.window(outside)[...] = False
    assert (dev_b.buffer.memory.view(np.uint16)[: dev_b.size][outside] == POISON_BITS_16).all()


@pytest.mark.parametrize("out", ["bf16", "fp16"])
def test_two_byte_output_is_poisoned_and_guarded_in_its_storage(out):
    p = problem_in(out_dtype=out)
    a, b, _ = random_operands(p, np.random.default_rng(1), "fp16")
    _, _, dev_c = operands.upload_operands(p, a, b, None, guard=1, precision="fp16")
    assert dev_c.itemsize == 2
    stored, changed = dev_c.read()
    assert stored.dtype == np.uint16 and (stored == POISON_BITS_16).all() and changed == 0
    values, _ = operands.read_output(dev_c, p)
    assert values.dtype == np.float32 and np.isnan(values).all()
    image = dev_c.buffer.memory.view(np.uint16)[: dev_c.size]
    outside = np.ones(dev_c.size, bool)
    dev_c.window(outside)[...] = False
    assert (image[outside] == GUARD_BITS_16).all()
    image[dev_c.offset - 1] = 0  # a write just before D
    assert dev_c.read()[1] == 1


def test_bias_vector_sits_in_a_nan_guard_band():
    p = problem_in(out_dtype="bf16", epilogue="bias_gelu")
    bias = random_bias(p, np.random.default_rng(2))
    vector = operands.upload_bias(p, bias, guard=1, misalign=1)
    assert (vector.rows, vector.cols, vector.itemsize) == (1, 7, 2)
    np.testing.assert_array_equal(_precision.from_storage(vector.read()[0][0], "bf16"), bias)
    image = vector.buffer.memory.view(np.uint16)[: vector.size]
    assert image[vector.offset - 1] == POISON_BITS_16 and image[vector.offset + 7] == POISON_BITS_16
    assert operands.upload_bias(GemmProblem(2, 2, 2), None) is None


def test_prepared_case_checks_the_output_as_stored(monkeypatch):
    p = problem_in("tn", beta=-1.0, out_dtype="bf16", epilogue="bias_relu")
    with PreparedCase.random(p, "bf16", 5, guard=1) as case:
        c = case.device()[2]
        assert case.device_bias().itemsize == 2
        exact = case.reference.value
        c.fill(_precision.to_storage(exact, "bf16"))  # what a correct kernel stores
        assert case.check(*operands.read_output(c, p)).ok
        wrong = exact.copy()
        wrong[1, 2] += 0.1
        c.fill(_precision.to_storage(wrong, "bf16"))
        verdict = case.check(*operands.read_output(c, p))
        assert not verdict.ok and "first at (1, 2)" in verdict.message


# --- reference ------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", LAYOUTS)
def test_reference_reads_transposed_operands_as_stored_transposed(layout):
    p = problem_in(layout, alpha=0.5, beta=2.0, batch=3)
    rng = np.random.default_rng(4)
    a, b, c = random_operands(p, rng, "fp32")
    unstack = lambda x, t: np.concatenate([blk.T if t else blk for blk in np.split(x, 3)])  # noqa: E731
    plain = reference(GemmProblem(5, 7, 9, 0.5, 2.0, 3), unstack(a, p.trans_a), unstack(b, p.trans_b), c)
    ref = reference(p, a, b, c)
    np.testing.assert_allclose(ref.value, plain.value, rtol=1e-14)
    np.testing.assert_allclose(ref.magnitude, plain.magnitude, rtol=1e-14)


@pytest.mark.parametrize("epilogue", EPILOGUES[1:])
def test_reference_applies_bias_then_the_activation_in_float64(epilogue):
    p = problem_in(beta=0.25, epilogue=epilogue)
    rng = np.random.default_rng(6)
    a, b, c = random_operands(p, rng, "fp32")
    bias = random_bias(p, rng)
    ref = reference(p, a, b, c, bias)
    a, b, c, bias = (x.astype(np.float64) for x in (a, b, c, bias))
    pre = a @ b + 0.25 * c + bias
    expected = {"bias": pre, "bias_relu": np.maximum(pre, 0),
                "bias_gelu": 0.5 * pre * (1 + np.tanh(np.sqrt(2 / np.pi) * (pre + 0.044715 * pre**3)))}[epilogue]
    np.testing.assert_allclose(ref.value, expected, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(ref.magnitude, np.abs(a) @ np.abs(b) + 0.25 * np.abs(c) + np.abs(bias), rtol=1e-14)


def test_an_epilogue_without_a_bias_is_refused():
    p = problem_in(epilogue="bias")
    a, b, _ = random_operands(p, np.random.default_rng(0), "fp32")
    with pytest.raises(ValueError, match=r"needs a bias of shape \(7,\)"):
        reference(p, a, b, None)


# --- the bound ------------------------------------------------------------------------------
def test_fp32_output_without_epilogue_keeps_the_old_bound():
    p = problem_in("nt", beta=1.0)
    a, b, c = random_operands(p, np.random.default_rng(0), "bf16")
    ref = reference(p, a, b, c)
    np.testing.assert_array_equal(output_bound(p, ref, "bf16"), error_bound(9, ref.magnitude, "bf16"))


@pytest.mark.parametrize("out, half_ulp", [("bf16", 2.0**-8), ("fp16", 2.0**-11)])
def test_output_rounding_is_half_an_ulp(out, half_ulp):
    assert _precision.OUTPUT_ROUNDING[out] == half_ulp
    p = problem_in(out_dtype=out)
    ref = reference(p, *random_operands(p, np.random.default_rng(1), "bf16")[:2], None)
    extra = output_bound(p, ref, "bf16") - error_bound(9, ref.magnitude, "bf16")
    assert (extra >= half_ulp * np.abs(ref.value)).all()
    assert (extra <= 1.01 * half_ulp * np.abs(ref.value) + 2.0**-24).all()


def test_gelu_slope_bounds_the_tanh_form():
    v = np.linspace(-12, 12, 2_000_001)
    slope = np.gradient(activation("bias_gelu", v), v)
    assert 1.12 < slope.max() <= _precision.GELU_SLOPE and slope.min() > -0.2


def kernel_like(pre32: np.ndarray, epilogue: str) -> np.ndarray:
    """What an FP32 epilogue computes (the Hopper kernels' GELU: v / (1 + exp(-2u)))."""
    if epilogue == "bias_relu":
        return np.maximum(pre32, np.float32(0))
    if epilogue == "bias_gelu":
        with np.errstate(over="ignore"):
            two_u = pre32 * (np.float32(0.0713548162726) * pre32 * pre32 + np.float32(1.5957691216057))
            return (pre32 / (np.float32(1) + np.exp(-two_u))).astype(np.float32)
    return pre32


@settings(max_examples=80, deadline=None)
@given(case=gemm_cases(40, Variants(("nn", "nt", "tn", "tt"), ("fp32", "bf16", "fp16"), EPILOGUES)),
       tanh_form=st.booleans(), round_early=st.sampled_from(["never", "before bias", "before activation"]))
def test_correct_fp32_epilogues_pass_and_a_wrong_element_fails(case, tanh_form, round_early):
    """FP32 accumulation, an FP32 epilogue (tanh or exp form; the value rounded to a 2-byte
    output once early: before the bias, as cuBLASLt's BIAS epilogue does, or before the
    activation, as torch's linear then gelu does, or not) and one rounding at the store pass
    the bound; an element off by 2% of the largest magnitude fails it."""
    p = case.problem
    rng = np.random.default_rng(case.data_seed)
    a, b, c = random_operands(p, rng, "bf16")
    bias = random_bias(p, rng)
    ref = reference(p, a, b, c, bias)
    pre32 = (ref.pre if ref.pre is not None else ref.value).astype(np.float32)
    if p.has_bias and p.out_dtype != "fp32" and round_early == "before bias":
        product = ((ref.pre if ref.pre is not None else ref.value) - bias).astype(np.float32)
        pre32 = (_precision.representable(product, p.out_dtype) + bias).astype(np.float32)
    if p.has_bias and p.out_dtype != "fp32" and round_early == "before activation":
        pre32 = _precision.representable(pre32, p.out_dtype)
    if p.epilogue == "bias_gelu" and tanh_form:
        with np.errstate(over="ignore"):
            out32 = (np.float32(0.5) * pre32 * (1 + np.tanh(np.float32(0.7978845608) *
                     (pre32 + np.float32(0.044715) * pre32**3)))).astype(np.float32)
    else:
        out32 = kernel_like(pre32, p.epilogue)
    out = _precision.representable(out32, p.out_dtype)
    assert check(p, out, ref, 0, "bf16").ok
    if out.size:
        wrong = out.copy()
        # 2% of the largest magnitude (the bound scales with it): off by 2% of the largest value
        # passed where ReLU had cut every value to 0 (1x1x9, bias_relu, BF16 D)
        wrong.flat[out.size // 2] += 0.02 * max(float(ref.magnitude.max()), 1.0)
        assert not check(p, wrong, ref, 0, "bf16").ok


def test_fp16_subnormal_results_pass_with_the_floor():
    p = problem_in(m=1, n=1, k=1, out_dtype="fp16")
    a, b = np.array([[2.0**-12]], np.float32), np.array([[2.0**-13 * 1.3]], np.float32)
    ref = reference(p, a, b, None)
    out = _precision.representable(ref.value.astype(np.float32), "fp16")
    assert out[0, 0] != ref.value[0, 0] and check(p, out, ref).ok


def test_strategies_draw_only_what_a_target_declares():
    from gemm_driver import kernels

    assert variants_of(kernels.get("numpy")) == Variants()
    drawn = set()

    @settings(max_examples=80, deadline=None)
    @given(case=gemm_cases(16, Variants(("nn", "nt"), ("fp32", "bf16"), ("none", "bias_gelu"))))
    def collect(case):
        p = case.problem
        drawn.add((p.layout, p.out_dtype, p.epilogue))

    collect()
    assert {x[0] for x in drawn} <= {"nn", "nt"} and {x[1] for x in drawn} <= {"fp32", "bf16"}
    assert {x[2] for x in drawn} <= {"none", "bias_gelu"} and len(drawn) > 3


def test_check_case_runs_a_drawn_case_end_to_end_on_the_host():
    """checking.check_case as verify runs it (the NumPy baseline needs no GPU), and a
    variant the target does not declare is skipped with why."""
    from gemm_driver.checking import check_case
    from gemm_driver.strategies import GemmCase

    case = GemmCase(GemmProblem(7, 5, 3, 0.5, -1.0), (1, 0, 2), (0, 1, 0), 9)
    assert check_case(None, "numpy", case).ok
    variant = GemmCase(GemmProblem(7, 5, 3, trans_b=True), (0, 0, 0), (0, 0, 0), 9)
    outcome = check_case(None, "numpy", variant)
    assert outcome.status == "skipped" and "does not take layout 'nt'" in outcome.detail
