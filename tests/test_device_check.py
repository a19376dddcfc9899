"""The check of D on the GPU, what the CPU can hold it to: its kernel builds for every
architecture the project targets, without spills, and cases pick it from the threshold up
(tests/test_device_check_gpu.py holds its verdicts to the host check's)."""

from __future__ import annotations

import pytest

from gemm_driver import device_check
from gemm_driver.case import PreparedCase
from gemm_driver.cuda import nvrtc
from gemm_driver.kernels.sources import included_headers, read_source
from gemm_driver.problem import GemmProblem


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_check_kernel_builds_without_spills(arch):
    compiled = nvrtc.compile_cuda(read_source(device_check.SOURCE), "check_output.cu", arch,
                                  headers=included_headers(device_check.SOURCE))
    assert compiled.cubin
    # from the cubin (its frame) and the ptxas log where there is one: a compiler answering
    # from its cache prints none (nvrtc.cubin_resources)
    assert [(r.stack_bytes, r.spill_store_bytes) for r in compiled.resources.values()] == [(0, 0)]


def test_harness_grids_cover_the_elements_with_at_most_eight_blocks_an_sm():
    session = type("Session", (), {"device": type("Device", (), {"sm_count": 132})()})()
    threads = device_check.THREADS
    assert [device_check.grid_blocks(session, n) for n in (0, 1, threads, threads + 1)] == [1, 1, 1, 2]
    assert device_check.grid_blocks(session, 10**9) == device_check.BLOCKS_PER_SM * 132


def test_cases_check_on_the_gpu_from_the_threshold_up():
    side = 1 << 10  # 1024 x 1024 = 2^20 elements of D
    assert device_check.CHECK_ON_DEVICE_ELEMENTS == side * side
    assert PreparedCase.random(GemmProblem(side, side, 8), "fp32", [0]).checks_on_device
    assert not PreparedCase.random(GemmProblem(side - 1, side, 8), "fp32", [0]).checks_on_device
    assert PreparedCase.random(GemmProblem(side // 2, side, 8, batch=2), "fp32", [0]).checks_on_device
    assert PreparedCase.random(GemmProblem(8, 8, 8), "fp32", [0], check_on_device=True).checks_on_device
    assert not PreparedCase.random(GemmProblem(side, side, 8), "fp32", [0], check_on_device=False).checks_on_device
