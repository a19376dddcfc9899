"""verify.check and the float64 reference: the verdict on a kernel's output, on the CPU."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from gemm_driver.problem import GemmProblem
from gemm_driver import verify
from gemm_driver.verify import SLACK, check, reference
from helpers import UNIT_ROUNDOFF

U = UNIT_ROUNDOFF["fp32"]


def operands(m, n, k, beta=0.0, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    c = rng.uniform(-1, 1, (m, n)).astype(np.float32) if beta else None
    return a, b, c


def sequential_float32(problem, a, b, c):
    """A kernel's arithmetic: one float32 accumulator per element, K steps in order."""
    acc = np.cumsum(a[:, :, None] * b[None, :, :], axis=1, dtype=np.float32)[:, -1, :]
    out = np.float32(problem.alpha) * acc
    if problem.beta:
        out = out + np.float32(problem.beta) * c
    return out.astype(np.float32)


def test_reference_is_float64_and_includes_beta_c():
    p = GemmProblem(3, 4, 5, alpha=2.0, beta=-0.5)
    a, b, c = operands(3, 4, 5, beta=1)
    ref = reference(p, a, b, c)
    assert ref.value.dtype == np.float64 and ref.magnitude.dtype == np.float64
    expected = 2.0 * (a.astype(np.float64) @ b) - 0.5 * c.astype(np.float64)
    np.testing.assert_allclose(ref.value, expected, rtol=1e-15)
    np.testing.assert_allclose(ref.magnitude, 2.0 * (np.abs(a.astype(np.float64)) @ np.abs(b)) + 0.5 * np.abs(c),
                               rtol=1e-15)
    # beta == 0: C is neither added nor part of the scale, even when given
    ref0 = reference(GemmProblem(3, 4, 5), a, b, c)
    np.testing.assert_allclose(ref0.value, a.astype(np.float64) @ b, rtol=1e-15)


@pytest.mark.parametrize("m, n, k, alpha, beta", [
    (1, 1, 1, 1.0, 0.0), (17, 33, 65, 1.0, 0.0), (64, 64, 1000, -2.5, 0.5), (31, 7, 300, 0.5, -1.0),
    (5, 5, 4099, 1.0, 1.0),
])
def test_correct_float32_results_pass(m, n, k, alpha, beta):
    p = GemmProblem(m, n, k, alpha, beta)
    a, b, c = operands(m, n, k, beta)
    ref = reference(p, a, b, c)
    for out in (sequential_float32(p, a, b, c),
                (np.float32(alpha) * (a @ b) + (np.float32(beta) * c if beta else 0)).astype(np.float32)):
        v = check(p, out, ref)
        assert v.ok, v.message
        assert v.message == "ok" and v.wrong == v.nan == v.guard_violations == 0
        assert 0 <= v.max_error_ratio <= 1
        assert v.relative_error < 1e-5


def test_single_perturbed_element_fails_and_is_located():
    p = GemmProblem(40, 30, 50)
    a, b, _ = operands(40, 30, 50)
    ref = reference(p, a, b, None)
    out = (a @ b).astype(np.float32)
    out[17, 23] += np.float32(1e-3)
    v = check(p, out, ref)
    assert not v.ok
    assert v.wrong == 1 and v.nan == 0
    assert v.max_error_ratio > 1
    assert "1 of 1200 elements wrong, first at (17, 23)" in v.message
    assert f"expected {ref.value[17, 23]!r}" in v.message


def test_off_by_one_ulp_passes_but_off_by_many_fails():
    p = GemmProblem(1, 1, 100)
    a, b, _ = operands(1, 1, 100)
    ref = reference(p, a, b, None)
    exact = np.float32(ref.value[0, 0])
    assert check(p, np.array([[np.nextafter(exact, np.float32(np.inf))]]), ref).ok
    assert not check(p, np.array([[exact + np.float32(0.1)]], dtype=np.float32), ref).ok


def test_nan_counts_as_unwritten():
    p = GemmProblem(8, 8, 8)
    a, b, _ = operands(8, 8, 8)
    ref = reference(p, a, b, None)
    out = (a @ b).astype(np.float32)
    out[3, 5] = np.nan
    v = check(p, out, ref)
    assert not v.ok
    assert v.nan == 1 and v.wrong == 1
    assert v.max_error_ratio == float("inf")
    assert "first at (3, 5)" in v.message and "1 NaN (unwritten" in v.message


def test_all_nan_output_fails():
    p = GemmProblem(4, 4, 4)
    a, b, _ = operands(4, 4, 4)
    out = np.full((4, 4), np.nan, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nanmax of an all-NaN array warns
        v = check(p, out, reference(p, a, b, None))
    assert not v.ok and v.nan == 16 and v.wrong == 16


def test_guard_violations_fail_a_correct_result():
    p = GemmProblem(8, 8, 8)
    a, b, _ = operands(8, 8, 8)
    out = (a @ b).astype(np.float32)
    v = check(p, out, reference(p, a, b, None), guard_violations=3)
    assert not v.ok
    assert v.wrong == 0 and v.guard_violations == 3
    assert v.message == "3 elements outside C were overwritten"


def test_bound_scales_with_k():
    """The same error relative to the same magnitude passes at K=1000 and fails at K=10."""
    verdicts = {}
    for k in (10, 1000):
        a = np.zeros((1, k), np.float32)
        b = np.zeros((k, 1), np.float32)
        a[0, 0] = b[0, 0] = 1.0  # product exactly 1, magnitude exactly 1, whatever K is
        p = GemmProblem(1, 1, k)
        ref = reference(p, a, b, None)
        assert ref.value[0, 0] == 1.0 and ref.magnitude[0, 0] == 1.0
        out = np.array([[1.0 + 100 * U]], dtype=np.float32)  # 100 unit roundoffs off, exactly representable
        assert float(out[0, 0]) - 1.0 == 100 * U
        verdicts[k] = check(p, out, ref)
    assert verdicts[1000].ok, verdicts[1000].message
    assert not verdicts[10].ok
    # and the bound is the documented one: (K + 3) u |alpha| (|A| |B|) x SLACK
    assert verdicts[10].max_error_ratio == pytest.approx(100 / ((10 + 3) * SLACK), rel=1e-6)
    assert verdicts[1000].max_error_ratio == pytest.approx(100 / ((1000 + 3) * SLACK), rel=1e-6)


def test_bound_scales_with_magnitude_not_with_value():
    """Cancellation: a result near 0 from large terms is allowed the error of its terms."""
    a = np.array([[1e4, 1e4]], dtype=np.float32)
    b = np.array([[1.0], [-1.0]], dtype=np.float32)
    p = GemmProblem(1, 1, 2)
    ref = reference(p, a, b, None)
    assert ref.value[0, 0] == 0.0 and ref.magnitude[0, 0] == 2e4
    assert check(p, np.array([[2e4 * 4 * U]], dtype=np.float32), ref).ok
    assert not check(p, np.array([[2e4 * 6 * U]], dtype=np.float32), ref).ok


def test_reading_c_when_beta_is_zero_is_caught():
    """C is NaN-poisoned when beta == 0: a kernel computing alpha*AB + 0*C gets NaN."""
    p = GemmProblem(4, 4, 4, beta=0.0)
    a, b, _ = operands(4, 4, 4)
    poisoned_c = np.full((4, 4), np.nan, dtype=np.float32)
    out = (a @ b + np.float32(0) * poisoned_c).astype(np.float32)
    v = check(p, out, reference(p, a, b, None))
    assert not v.ok and v.nan == 16


def test_wrong_index_is_caught():
    p = GemmProblem(16, 16, 16)
    a, b, _ = operands(16, 16, 16)
    ref = reference(p, a, b, None)
    assert not check(p, (a @ b).T.copy(), ref).ok  # transposed output
    assert not check(p, (a[:, :-1] @ b[:-1]).astype(np.float32), ref).ok  # one K step missed


@pytest.mark.parametrize("mask", [0xFFFFE000, 0xFFFF0000], ids=["tf32", "bf16"])
def test_reduced_precision_inputs_are_caught_at_moderate_k(mask):
    """TF32 / BF16 rounding of A and B is far outside the FP32 bound at K=256."""
    p = GemmProblem(64, 64, 256)
    a, b, _ = operands(64, 64, 256, seed=1)
    cut = lambda x: (x.view(np.uint32) & np.uint32(mask)).view(np.float32)
    v = check(p, cut(a) @ cut(b), reference(p, a, b, None))
    assert not v.ok
    assert v.max_error_ratio > 5


def test_shape_mismatch_is_an_error():
    p = GemmProblem(2, 3, 4)
    a, b, _ = operands(2, 3, 4)
    with pytest.raises(ValueError, match=r"output shape \(3, 2\) differs from the reference's \(2, 3\)"):
        check(p, np.zeros((3, 2), np.float32), reference(p, a, b, None))


def test_empty_output_passes():
    p = GemmProblem(0, 5, 3)
    a, b = np.zeros((0, 3), np.float32), np.zeros((3, 5), np.float32)
    v = check(p, np.zeros((0, 5), np.float32), reference(p, a, b, None))
    assert v.ok and v.max_error_ratio == 0.0


def test_as_dict_round_trips_every_field():
    p = GemmProblem(2, 2, 2)
    a, b, _ = operands(2, 2, 2)
    d = check(p, (a @ b).astype(np.float32), reference(p, a, b, None)).as_dict()
    assert set(d) == {"ok", "max_error_ratio", "relative_error", "wrong", "nan", "guard_violations", "message"}
    assert d["ok"] is True


def test_a_bound_given_once_judges_as_the_bound_computed_each_time():
    rng = np.random.default_rng(7)
    problem = GemmProblem(40, 30, 20)
    a, b = rng.uniform(-1, 1, (40, 20)).astype(np.float32), rng.uniform(-1, 1, (20, 30)).astype(np.float32)
    ref = verify.reference(problem, a, b, None)
    out = (a.astype(np.float64) @ b).astype(np.float32)
    out[3, 4] += 1e-2  # one element far off
    bound = verify.output_bound(problem, ref)
    assert verify.check(problem, out, ref, bound=bound) == verify.check(problem, out, ref)
    v = verify.check(problem, out, ref, bound=bound)
    assert not v.ok and v.wrong == 1
    expected = np.linalg.norm(out.astype(np.float64) - ref.value) / np.linalg.norm(ref.value)
    assert v.relative_error == pytest.approx(expected)
    out[0, 0] = np.nan
    assert verify.check(problem, out, ref, bound=bound).relative_error == float("inf")


def test_the_check_in_blocks_of_rows_judges_as_one_pass_over_all_of_d(monkeypatch):
    rng = np.random.default_rng(11)
    problem = GemmProblem(50, 30, 20)
    a, b = rng.uniform(-1, 1, (50, 20)).astype(np.float32), rng.uniform(-1, 1, (20, 30)).astype(np.float32)
    ref = verify.reference(problem, a, b, None)
    out = (a.astype(np.float64) @ b).astype(np.float32)
    out[31, 4] += 1e-2  # wrong in the fourth block of 8 rows, then in the sixth
    out[47, 9] -= 1e-2
    whole = verify.check(problem, out, ref)
    monkeypatch.setattr(verify, "CHECK_BLOCK", 8 * 30 + 7)  # 8 rows a block, the last one short
    blocked = verify.check(problem, out, ref)
    assert not blocked.ok and blocked.wrong == whole.wrong == 2 and "first at (31, 4)" in blocked.message
    bound = verify.output_bound(problem, ref)
    error = np.abs(out.astype(np.float64) - ref.value)
    assert blocked.max_error_ratio == pytest.approx(float(np.max(error / bound)))
    assert blocked.relative_error == pytest.approx(np.linalg.norm(error) / np.linalg.norm(ref.value))
    assert blocked.max_error_ratio == pytest.approx(whole.max_error_ratio)


def test_only_large_single_problems_take_the_gpus_products():
    """device_reference.products_for: NumPy (None) below HOST_FLOPS, for batches and empty
    problems; the GPU's float64 matmul above (a function; no GPU is touched until it runs)."""
    from gemm_driver.device_reference import HOST_FLOPS, products_for

    side = round((HOST_FLOPS / 2) ** (1 / 3)) + 8  # 2 side^3 just over HOST_FLOPS
    assert products_for(None, GemmProblem(64, 64, 64)) is None
    assert products_for(None, GemmProblem(side, side, 0)) is None
    assert products_for(None, GemmProblem(side, side, side, batch=2)) is None
    assert callable(products_for(None, GemmProblem(side, side, side)))


@pytest.mark.parametrize("out_dtype, epilogue", [("fp32", "none"), ("bf16", "bias"), ("fp16", "bias_relu"),
                                                 ("bf16", "bias_gelu"), ("fp16", "bias_gelu")])
@pytest.mark.parametrize("layout, batch", [("nn", 1), ("tt", 1), ("nt", 3)])
def test_reference_and_bound_in_place_are_the_formulas_bit_for_bit(out_dtype, epilogue, layout, batch):
    """reference and output_bound update their D-sized arrays in place: the same values as the
    formulas written out (below, as the module's docstring gives them), and the caller's
    operands untouched (|A| and |B| are taken in place on reference's own float64 copies)."""
    from gemm_driver import precision

    problem = GemmProblem(13, 17, 29, alpha=-0.75, beta=0.5, batch=batch, trans_a=layout[0] == "t",
                          trans_b=layout[1] == "t", out_dtype=out_dtype, epilogue=epilogue)
    rng = np.random.default_rng(3)
    a = rng.uniform(-4, 4, (batch * 29, 13) if problem.trans_a else (batch * 13, 29)).astype(np.float32)
    b = rng.uniform(-4, 4, (batch * 17, 29) if problem.trans_b else (batch * 29, 17)).astype(np.float32)
    c = rng.uniform(-4, 4, (batch * 13, 17)).astype(np.float32)
    bias = rng.uniform(-4, 4, 17).astype(np.float32) if problem.has_bias else None
    kept = a.copy(), b.copy()
    ref = reference(problem, a, b, c, bias)
    assert np.array_equal(a, kept[0]) and np.array_equal(b, kept[1])

    def op(x, trans):  # the float64 operand (stacked when batched), each matrix transposed where stored so
        x64 = x.astype(np.float64)
        x64 = x64 if batch == 1 else x64.reshape(batch, -1, x.shape[1])
        return np.swapaxes(x64, -1, -2) if trans else x64

    a64, b64 = op(a, problem.trans_a), op(b, problem.trans_b)
    value = problem.alpha * np.matmul(a64, b64).reshape(batch * 13, 17)
    magnitude = abs(problem.alpha) * np.matmul(np.abs(a64), np.abs(b64)).reshape(batch * 13, 17)
    value += problem.beta * c.astype(np.float64)
    magnitude += abs(problem.beta) * np.abs(c.astype(np.float64))
    product = value.copy()
    if problem.has_bias:
        value += bias.astype(np.float64)
        magnitude += np.abs(bias.astype(np.float64))
    pre = value
    if epilogue == "bias_relu":
        value = np.maximum(pre, 0.0)
    elif epilogue == "bias_gelu":
        value = 0.5 * pre * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (pre + 0.044715 * pre**3)))
    assert np.array_equal(ref.value, value) and np.array_equal(ref.magnitude, magnitude)

    error = precision.get("bf16").bound_factor(problem.k + int(problem.has_bias)) * magnitude * SLACK \
        + np.finfo(np.float32).tiny
    rounding = precision.OUTPUT_ROUNDING[out_dtype]
    if problem.has_bias:
        error = error + rounding * (np.maximum(np.abs(product), np.abs(pre)) + error)
    if epilogue == "bias_gelu":
        error = precision.GELU_SLOPE * error + precision.GELU_EVALUATION * np.abs(pre)
    bound = error + rounding * (np.abs(value) + error) + precision.OUTPUT_FLOOR[out_dtype]
    assert np.array_equal(verify.output_bound(problem, ref, "bf16"), bound)
