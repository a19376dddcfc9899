"""The float64 reference's products on the GPU (device_reference.py) against NumPy's.

Both are float64 sums of exact products (every operand here is a float32, BF16 or FP16
value), so they may differ only by float64 rounding: a few K * 2^-53 of the magnitudes.
"""

from __future__ import annotations

import numpy as np
import pytest

from gemm_driver.device_reference import float64_matmul
from gemm_driver.operands import random_operands
from gemm_driver.problem import GemmProblem
from gemm_driver.verify import reference

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 300, 129), (257, 33, 1000), (64, 4093, 17)])
@pytest.mark.parametrize("trans_a", [False, True])
def test_gpu_products_are_numpys_in_float64(session, shape, trans_a):
    m, n, k = shape
    rng = np.random.default_rng([m, n, k, trans_a])
    a = rng.uniform(-1, 1, (k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    x = a.T.astype(np.float64) if trans_a else a.astype(np.float64)  # a transposed view, as verify passes it
    got, want = float64_matmul(session, x, b.astype(np.float64)), x @ b.astype(np.float64)
    scale = np.abs(x) @ np.abs(b.astype(np.float64))
    assert got.shape == (m, n)
    assert np.all(np.abs(got - want) <= 4 * (k + 2) * 2.0 ** -53 * scale)


def test_the_reference_is_the_same_either_way(session):
    """verify.reference with the GPU's products gives NumPy's reference (value, magnitude,
    and the epilogue's parts), on a BF16 linear-layer problem with a bias and GELU."""
    problem = GemmProblem(300, 200, 700, 1.0, 0.0, trans_b=True, out_dtype="bf16", epilogue="bias_gelu")
    rng = np.random.default_rng(7)
    a, b, c = random_operands(problem, rng, "bf16")
    bias = rng.uniform(-1, 1, problem.n).astype(np.float32)
    host = reference(problem, a, b, c, bias)
    gpu = reference(problem, a, b, c, bias, lambda x, y: float64_matmul(session, x, y))
    for field in ("value", "magnitude", "pre", "product"):
        h, g = getattr(host, field), getattr(gpu, field)
        np.testing.assert_allclose(g, h, rtol=1e-12, atol=1e-12 * float(np.max(np.abs(host.magnitude))))

