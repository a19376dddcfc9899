"""The reference kept on the GPU (device_epilogue.py) is the host's (verify.py), and D is
still judged by it as the host judges it.

The two DGEMM products are read back here before the epilogue kernel turns them into the
expected D and its bound, and verify.reference is handed those very products (``products=``):
both sides then start from the same float64 values, so the expected values and the bounds
must be equal bit for bit (the same correctly rounded float64 operations in the same order),
except under GELU. GELU's pow and tanh are correctly rounded neither in CUDA nor in NumPy
(libm, or SVML on AVX-512 hosts): a few ulp each, on either side. Carried through
0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))) that stays within a handful of units of
2^-52 |v| (v the value before GELU: the tanh term's error is absolute, and 0.5 v scales it),
and the test allows GELU_ULPS of them. The norm is a sum of squares in
another order: any order of n non-negative terms errs by at most n * 2^-53 of the sum. The
products themselves are held to NumPy's within float64's rounding, and to float64_matmul's
(the products the host path reads back) bit for bit.

Then a wrong D, NaN and guard writes are caught through the device reference with the host
check's Verification, directly and through PreparedCase.verify, and a PreparedCase that keeps
its reference on the GPU passes cuBLASLt's D without ever computing the host's reference.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemm_driver import precision as precisions
from gemm_driver.case import PreparedCase, run_case
from gemm_driver.device_check import OutputChecker, ReferenceOnDevice
from gemm_driver.device_epilogue import apply_epilogue, device_products
from gemm_driver.device_reference import GpuProducts, float64_matmul
from gemm_driver.operands import read_output, stored_shapes
from gemm_driver.problem import EPILOGUES, LAYOUTS, OUT_DTYPES, GemmProblem
from gemm_driver.strategies import GemmCase, Variants, gemm_cases
from gemm_driver.verify import check, output_bound, reference

pytestmark = pytest.mark.gpu

GELU_ULPS = 16  # units of 2^-52 |v| a GELU value may differ by (a handful expected: see the module docstring)


def _read(buffer, problem: GemmProblem) -> np.ndarray:
    return buffer.download(np.empty((problem.m, problem.n), np.float64))


def _prepared(case: GemmCase, precision: str) -> PreparedCase:
    """The drawn case's operands in ``precision``, C padded and misaligned as drawn (its
    input values on the device: the kernel reads C as stored)."""
    lds = tuple(cols + pad for (_, cols), pad in zip(stored_shapes(case.problem), case.pads))
    return PreparedCase.random(case.problem, precision, case.data_seed, guard=1, lds=lds, misalign=case.misalign,
                               scale_draw=case.scale_draw)


def _reference_on_device(session, prepared: PreparedCase):
    """(the device's expected D and bound as a ReferenceOnDevice, its norm, the two products read
    back before the epilogue kernel overwrote them)."""
    problem = prepared.problem
    c = prepared.device()[2]
    value, magnitude = device_products(session, problem, prepared.a_host, prepared.b_host)
    on_device = ReferenceOnDevice((problem.m, problem.n), value, magnitude)
    try:
        products = [_read(value, problem), _read(magnitude, problem)]
        norm = apply_epilogue(session, problem, prepared.precision.name, value, magnitude,
                              None if prepared.c_host is None else c, prepared.bias_host)
    except BaseException:
        on_device.close()
        raise
    return on_device, norm, products


def _replayed(products: list[np.ndarray]):
    """verify.reference's ``products``: the device's two, in the order it asks for them
    (op(A) op(B), then |op(A)| |op(B)|), each first held to NumPy's product of what it is given."""
    queue = list(products)

    def matmul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        got = queue.pop(0)
        scale = np.abs(x) @ np.abs(y)
        assert np.all(np.abs(got - x @ y) <= 4 * (x.shape[1] + 2) * 2.0**-53 * scale)
        return got.copy()

    return matmul


def _host_reference(prepared: PreparedCase, products: list[np.ndarray]):
    return reference(prepared.problem, prepared.a_host, prepared.b_host, prepared.c_host, prepared.bias_host,
                     _replayed(products))


def _assert_same_reference(problem: GemmProblem, precision: str, expected: np.ndarray, bound: np.ndarray,
                           norm: float, host) -> None:
    host_bound = output_bound(problem, host, precision)
    apart = np.zeros_like(expected)  # how far each expected value may be from the host's
    if problem.epilogue == "bias_gelu":
        apart = GELU_ULPS * 2.0**-52 * np.abs(host.pre)
        assert np.all(np.abs(expected - host.value) <= apart)
        rounding = precisions.OUTPUT_ROUNDING[problem.out_dtype]  # the bound reads |value| through it
        assert np.all(np.abs(bound - host_bound) <= rounding * apart + 4 * np.spacing(host_bound))
    else:
        np.testing.assert_array_equal(expected, host.value)
        np.testing.assert_array_equal(bound, host_bound)
    # the sums of squares in two orders (each within size * 2^-53 of the exact sum), and the values' own distance
    assert abs(norm - host.norm) <= 2 * expected.size * 2.0**-53 * host.norm + float(np.linalg.norm(apart))


def test_the_device_reference_is_the_hosts_on_drawn_cases(session):
    @settings(max_examples=80, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=gemm_cases(variants=Variants(LAYOUTS, OUT_DTYPES, EPILOGUES)),
           precision=st.sampled_from(["fp32", "tf32", "bf16", "fp16"]))
    def holds(case: GemmCase, precision: str):
        with _prepared(case, precision) as prepared:
            on_device, norm, products = _reference_on_device(session, prepared)
            with on_device:
                expected, bound = _read(on_device.expected, case.problem), _read(on_device.bound, case.problem)
            _assert_same_reference(case.problem, precision, expected, bound, norm, _host_reference(prepared, products))

    holds()


@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
@pytest.mark.parametrize("out_dtype, epilogue", [("fp32", "none"), ("bf16", "bias")])
def test_fp8_cases_get_the_same_reference(session, scaling, out_dtype, epilogue):
    """FP8's dequantized operands (float64 values, scale times code) take the same path."""
    problem = GemmProblem(96, 80, 300, 1.0, 0.5, trans_b=True, out_dtype=out_dtype, epilogue=epilogue,
                          scaling=scaling)
    with PreparedCase.random(problem, "fp8", [96, len(scaling)], guard=1, scale_draw=(4, 0)) as prepared:
        on_device, norm, products = _reference_on_device(session, prepared)
        with on_device:
            expected, bound = _read(on_device.expected, problem), _read(on_device.bound, problem)
        _assert_same_reference(problem, "fp8", expected, bound, norm, _host_reference(prepared, products))


@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (True, True)])
def test_the_kept_products_are_float64_matmuls_bit_for_bit(session, trans_a, trans_b):
    """The same DGEMM on the same contiguous float64 operands as the products read back today
    (cuBLAS gives the same bits run after run on one GPU with one stream)."""
    problem = GemmProblem(301, 257, 129, trans_a=trans_a, trans_b=trans_b)
    with PreparedCase.random(problem, "bf16", [301]) as prepared:
        value, magnitude = device_products(session, problem, prepared.a_host, prepared.b_host)
        with value, magnitude:
            kept = [_read(value, problem), _read(magnitude, problem)]
    op_a, op_b = (x.T if t else x for x, t in ((prepared.a_host, trans_a), (prepared.b_host, trans_b)))
    np.testing.assert_array_equal(kept[0], float64_matmul(session, op_a, op_b))
    np.testing.assert_array_equal(kept[1], float64_matmul(session, np.abs(op_a), np.abs(op_b)))


def _poke(matrix, index: int, bits: int) -> None:
    """Overwrite element ``index`` of the whole buffer (0: the first guard element)."""
    word = np.array([bits], dtype=np.uint32 if matrix.itemsize == 4 else np.uint16)
    matrix.buffer.upload(word, offset=matrix.itemsize * index)


def _bits(value: float, out_dtype: str) -> int:
    stored = precisions.to_storage(np.array([value], np.float32), out_dtype)
    return int(stored.view(np.uint32 if stored.itemsize == 4 else np.uint16)[0])


def _correct_d(expected: np.ndarray, out_dtype: str) -> np.ndarray:
    """A correct kernel's D: the reference rounded to the output type, as C's fill takes it."""
    return precisions.to_storage(precisions.representable(expected.astype(np.float32), out_dtype), out_dtype)


def _breaks(c, problem: GemmProblem) -> list[tuple[int, int]]:
    """(element of C's buffer, bits) that make D wrong: a wrong value, a NaN, a write into the
    guard rows after D, before it, and into the padding of a row."""
    return [(c.offset + 7 * c.ld + 11, _bits(1000.0, problem.out_dtype)),
            (c.offset + (problem.m - 1) * c.ld + problem.n - 1, _bits(float("nan"), problem.out_dtype)),
            (c.offset + problem.m * c.ld + 3, 0),
            (c.offset - 1, 0),
            (c.offset + 2 * c.ld + problem.n + 1, 0)]


_NUMBER = re.compile(r"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")


def _same_message(host: str, device: str) -> None:
    """The same words, and the same numbers within 1e-12 (counts and indices exactly): under
    GELU, or with the host's products from another DGEMM call, the expected value a message
    names may differ in its last bits."""
    assert _NUMBER.sub("#", device) == _NUMBER.sub("#", host)
    assert [float(x) for x in _NUMBER.findall(device)] == \
           pytest.approx([float(x) for x in _NUMBER.findall(host)], rel=1e-12, abs=0)


def _same_verdict(host, device, exact: bool) -> None:
    assert (device.ok, device.wrong, device.nan, device.guard_violations) == \
           (host.ok, host.wrong, host.nan, host.guard_violations)
    if exact:
        assert device.message == host.message and device.max_error_ratio == host.max_error_ratio
    else:
        _same_message(host.message, device.message)
        assert device.max_error_ratio == pytest.approx(host.max_error_ratio, rel=1e-6)
    if np.isfinite(host.relative_error):
        assert device.relative_error == pytest.approx(host.relative_error, rel=1e-9, abs=1e-300)
    else:
        assert device.relative_error == host.relative_error


@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
@pytest.mark.parametrize("epilogue", EPILOGUES)
def test_a_wrong_d_is_caught_through_the_device_reference(session, out_dtype, epilogue):
    """The device check against the device's reference gives the host check's Verification
    against the host's reference (from the same products), on a correct D and on broken ones."""
    problem = GemmProblem(67, 45, 33, 0.5, -1.0, trans_a=True, out_dtype=out_dtype, epilogue=epilogue)
    with PreparedCase.random(problem, "bf16", [67, len(epilogue)], guard=2, lds=(None, None, 45 + 5)) as prepared:
        c = prepared.device()[2]
        on_device, norm, products = _reference_on_device(session, prepared)
        host = _host_reference(prepared, products)
        host_bound = output_bound(problem, host, "bf16")
        checker = OutputChecker(session)
        try:
            c.fill(_correct_d(host.value, out_dtype))  # D inside, the guard pattern around it
            for index, bits in [(None, None), *_breaks(c, problem)]:
                if index is not None:
                    _poke(c, index, bits)
                device = checker.check(c, out_dtype, on_device, norm)
                out, changed = read_output(c, problem)
                host_verdict = check(problem, out, host, changed, "bf16", host_bound)
                assert host_verdict.ok == (index is None), host_verdict.message
                _same_verdict(host_verdict, device, exact=epilogue != "bias_gelu")
        finally:
            checker.close()
            on_device.close()


class _WritesD:
    """Stands in for a kernel's Launch: stores ``d`` into C, then the ``pokes`` (index, bits)."""

    def __init__(self, c, d: np.ndarray, pokes: list[tuple[int, int]]):
        self.c, self.d, self.pokes = c, d, pokes

    def __call__(self) -> None:
        self.c.fill(self.d)
        for index, bits in self.pokes:
            _poke(self.c, index, bits)

    def synchronize(self) -> None:
        pass


@pytest.mark.parametrize("out_dtype, epilogue", [("fp32", "none"), ("bf16", "bias_relu"), ("fp16", "bias_gelu")])
def test_prepared_case_verify_catches_a_wrong_d_through_the_device_reference(session, out_dtype, epilogue):
    """PreparedCase.verify on the device path (its reference made on the GPU before the launch,
    from C's input values) gives the host check's verdict on each broken D."""
    problem = GemmProblem(67, 45, 33, 0.75, 0.5, trans_b=True, out_dtype=out_dtype, epilogue=epilogue)
    with PreparedCase.random(problem, "bf16", [45, len(epilogue)], guard=2, lds=(None, None, 45 + 3),
                             products=GpuProducts(session), check_on_device=True) as prepared:
        assert prepared.keeps_reference_on_device
        c = prepared.device()[2]
        correct = _correct_d(prepared.reference.value, out_dtype)  # the host's, computed for the test only
        breaks = _breaks(c, problem)
        for pokes in [[], *([poke] for poke in breaks), breaks]:
            device = prepared.verify(session, _WritesD(c, correct, pokes))
            host = prepared.check(*read_output(c, problem))
            assert host.ok == (not pokes), host.message
            _same_verdict(host, device, exact=False)  # the host's products here are float64_matmul's, not replayed


def test_a_case_keeps_its_reference_on_the_gpu_and_passes_hopper_bf16(session):
    """hopper_bf16's D of a large BF16 linear layer (bias and GELU, beta != 0, B transposed) passes
    through run_case with the reference made on the GPU, the host's never computed; checked
    again on the host afterwards, the same D gets the same verdict. (cuBLASLt's D of this case
    failed by either reference, host or device, while its heuristic could offer split-K that adds
    the slices in BF16: results/h100-80gb-hbm3/diag-cublaslt-odd-bf16.txt.)"""
    problem = GemmProblem(1031, 1029, 257, 0.75, 0.5, trans_b=True, out_dtype="bf16", epilogue="bias_gelu")
    with PreparedCase.random(problem, "bf16", [5], guard=1, products=GpuProducts(session)) as case:
        assert case.checks_on_device and case.keeps_reference_on_device  # over 2^20 elements of D
        outcome = run_case(session, "hopper_bf16", case)
        assert outcome.ok, outcome.message
        assert "reference" not in case.__dict__ and "bound" not in case.__dict__
        host = case.check(*read_output(case.device()[2], problem))  # D is still in C: nothing was timed
        assert host.ok, host.message
        _same_verdict(host, outcome.verification, exact=False)
