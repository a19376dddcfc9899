"""GemmProblem and parse_shape: what a problem may be, refused with a message naming why."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gemm_driver.problem import MAX_ELEMENTS, GemmProblem, parse_shape


def test_basic_properties():
    p = GemmProblem(4093, 4091, 4099, alpha=2.0, beta=-1.0)
    assert p.flops == 2 * 4093 * 4091 * 4099
    assert p.label == "4093x4091x4099"
    assert not p.is_empty
    assert (p.alpha, p.beta) == (2.0, -1.0)
    assert GemmProblem(1, 2, 3) == GemmProblem(1, 2, 3, 1.0, 0.0)  # defaults: C = A @ B


@pytest.mark.parametrize("shape", [(0, 5, 5), (5, 0, 5), (5, 5, 0), (0, 0, 0)])
def test_empty(shape):
    p = GemmProblem(*shape)
    assert p.is_empty and p.flops == 0


@pytest.mark.parametrize("dim", ["m", "n", "k"])
@pytest.mark.parametrize("bad", [-1, -(2**40), 2.0, 3.5, "3", None, True, np.float32(3)])
def test_dims_must_be_non_negative_ints(dim, bad):
    shape = {"m": 2, "n": 2, "k": 2, dim: bad}
    with pytest.raises(ValueError, match=rf"^{dim.upper()} must be a non-negative integer, got "):
        GemmProblem(**shape)


@pytest.mark.parametrize("name", ["alpha", "beta"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "1.0", None, 1j])
def test_scalars_must_be_finite_numbers(name, bad):
    with pytest.raises(ValueError, match=rf"^{name} must be a finite number, got "):
        GemmProblem(2, 2, 2, **{name: bad})


def test_scalars_may_be_ints_or_numpy_doubles():
    assert GemmProblem(1, 1, 1, alpha=2, beta=np.float64(0.5)).beta == 0.5


def test_element_limit_is_exact():
    assert MAX_ELEMENTS == 2**31 - 1
    GemmProblem(MAX_ELEMENTS, 1, 1)  # A, C have exactly 2^31 - 1 elements: allowed
    GemmProblem(1, MAX_ELEMENTS, 1)
    GemmProblem(1, 1, MAX_ELEMENTS)
    with pytest.raises(ValueError, match=r"^C \(M x N\) has 2147488281 elements; at most 2147483647 \(2\^31 - 1\)"):
        GemmProblem(46341, 46341, 1)  # 46341^2 = 2^31 + 4634
    with pytest.raises(ValueError, match=r"^A \(M x K\) has 2147483648 elements"):
        GemmProblem(2**16, 1, 2**15)
    with pytest.raises(ValueError, match=r"^B \(K x N\) has 2147483648 elements"):
        GemmProblem(1, 2**15, 2**16)


@pytest.mark.parametrize("text, shape", [
    ("4093x4091x4099", (4093, 4091, 4099)),
    ("1x1x1", (1, 1, 1)),
    (" 8X16x32 ", (8, 16, 32)),
    ("2 x 3 x 4", (2, 3, 4)),
    ("007x1x1", (7, 1, 1)),
])
def test_parse_shape(text, shape):
    assert parse_shape(text) == shape


@pytest.mark.parametrize("text", ["3x4", "1x2x3x4", "axbxc", "-1x2x3", "1.5x2x3", "", "x1x1", "1,2,3", "1x2x"])
def test_parse_shape_refuses_malformed(text):
    with pytest.raises(ValueError, match=r"is not of the form MxNxK \(e\.g\. 4093x4091x4099\)"):
        parse_shape(text)


@pytest.mark.parametrize("text", ["0x1x1", "1x0x1", "1x1x0"])
def test_parse_shape_refuses_zero(text):
    with pytest.raises(ValueError, match=r"M, N and K must each be at least 1"):
        parse_shape(text)
