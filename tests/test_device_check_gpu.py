"""The check of D on the GPU (device_check.py) gives the host check's verdict.

D is written straight into C's guarded buffer (the reference rounded to the output type: a
correct kernel's answer), then broken the ways a kernel breaks it: a wrong element, NaN
(an unwritten one), a write into the guard rows, into the padding between the row and the
leading dimension, and before the first row. Each time both checks see the same buffer
and must agree on everything but the order of the sum of squares.
"""

from __future__ import annotations

import numpy as np
import pytest

from gemm_driver import precision as precisions
from gemm_driver.case import PreparedCase, run_case
from gemm_driver.device_check import OutputChecker, ReferenceOnDevice
from gemm_driver.operands import read_output
from gemm_driver.problem import GemmProblem

pytestmark = pytest.mark.gpu


def _poke(matrix, index: int, value) -> None:
    """Overwrite element ``index`` of the whole buffer (0: the first guard element)."""
    bits = np.array([value], dtype=np.uint32 if matrix.itemsize == 4 else np.uint16)
    matrix.buffer.upload(bits, offset=matrix.itemsize * index)


def _both(case: PreparedCase, checker: OutputChecker, on_device: ReferenceOnDevice):
    c = case.device()[2]
    host = case.check(*read_output(c, case.problem))
    device = checker.check(c, case.problem.out_dtype, on_device, case.reference.norm)
    return host, device


def _same(host, device) -> None:
    assert (device.ok, device.wrong, device.nan, device.guard_violations, device.message) == \
           (host.ok, host.wrong, host.nan, host.guard_violations, host.message)
    assert device.max_error_ratio == host.max_error_ratio  # the same float64 operations, any order
    if np.isfinite(host.relative_error):
        assert device.relative_error == pytest.approx(host.relative_error, rel=1e-9, abs=1e-300)
    else:
        assert device.relative_error == host.relative_error


@pytest.mark.parametrize("out_dtype", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("ld_pad,batch", [(0, 1), (5, 1), (3, 2)])
def test_the_device_check_gives_the_host_checks_verdict(session, out_dtype, ld_pad, batch):
    problem = GemmProblem(67, 45, 33, 0.5, 0.0, out_dtype=out_dtype, batch=batch)
    case = PreparedCase.random(problem, "bf16", [67, ld_pad, batch], guard=2, lds=(None, None, 45 + ld_pad))
    with case:
        c = case.device()[2]
        on_device = ReferenceOnDevice.uploaded(case.reference.value,
                                              np.broadcast_to(case.bound, case.reference.value.shape))
        checker = OutputChecker(session)
        try:
            correct = precisions.to_storage(precisions.representable(case.reference.value.astype(np.float32),
                                                                     out_dtype), out_dtype)
            c.fill(correct)  # a correct kernel's D inside, the guard pattern around it
            host, device = _both(case, checker, on_device)
            assert host.ok, host.message
            _same(host, device)
            rows = batch * problem.m
            breaks = [(c.offset + 7 * c.ld + 11, 0x3F800000 if c.itemsize == 4 else 0x3F80),  # a wrong value (1.0)
                      (c.offset + (rows - 1) * c.ld + problem.n - 1, 0x7FC00000 if c.itemsize == 4 else 0x7FC0),
                      (c.offset + rows * c.ld + 3, 0),  # the guard rows after D
                      (c.offset - 1, 0)]  # the lead before it
            if ld_pad:
                breaks.append((c.offset + 2 * c.ld + problem.n + 1, 0))  # the padding of row 2
            for index, value in breaks:
                _poke(c, index, value)
                host, device = _both(case, checker, on_device)
                assert not host.ok
                _same(host, device)
        finally:
            checker.close()
            on_device.close()


def test_run_case_checks_a_large_d_on_the_gpu_with_the_same_verdict(session):
    """Through run_case: cuBLAS's D of a shape past the threshold, checked on the GPU (the
    default there) and on the host, passes both with the same worst error."""
    problem = GemmProblem(1031, 1029, 257, 1.0, 0.5)
    verdicts = []
    for on_device in (True, False):
        with PreparedCase.random(problem, "fp32", [5], guard=1, check_on_device=on_device) as case:
            assert case.checks_on_device == on_device
            outcome = run_case(session, "cublas", case)
            assert outcome.ok, outcome.message
            verdicts.append(outcome.verification)
    assert verdicts[0].max_error_ratio == verdicts[1].max_error_ratio
    assert PreparedCase.random(problem, "fp32", [5]).checks_on_device  # over 2^20 elements: on the GPU by default
