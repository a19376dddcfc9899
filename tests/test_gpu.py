"""GPU tests: every kernel against the float64 reference, the driver layer, cuBLAS, timing.

All carry the ``gpu`` marker and are skipped on machines without a GPU (see conftest).
"""

from __future__ import annotations

import secrets
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import gemm_driver
from gemm_driver import kernels
from gemm_driver import precision as precisions
from gemm_driver.bench.runner import run_sweep, sweep_steps
from gemm_driver.case import PreparedCase
from gemm_driver.bench.timing import Budget, GpuTimer
from gemm_driver.checking import check_case, verify_kernel
from gemm_driver.cuda import cublas
from gemm_driver.cuda.driver import DeviceBuffer, Event, Module
from gemm_driver.cuda.errors import CudaError
from gemm_driver.kernels.sources import read_source
from gemm_driver.kernels.spec import KernelSpec, ceil_div
from gemm_driver.operands import random_operands, upload_operands
from gemm_driver.problem import GemmProblem
from gemm_driver.strategies import GemmCase, gemm_cases
from gemm_driver.verify import check, reference
from helpers import FP32_DEFAULT_MATH, assert_same_bits, sgemm, sgemm_strided_batched

pytestmark = pytest.mark.gpu

# Every kernel of an unscaled precision (FP8 kernels take scaled nt problems only: their cases
# are tests/test_hopper_fp8_gpu.py's) and the cuBLAS baseline, plus the non-default tunables.
UNSCALED = [name for name, spec in kernels.KERNELS.items() if not precisions.get(spec.precision).scaled]
CONFIGS = [(name, {}) for name in ["cublas", *UNSCALED]] + [
    ("coalesced", {"BLOCK": 8}),
    ("coalesced", {"BLOCK": 16}),
    ("smem_tiled", {"TILE": 16, "PAD": 0}),
    ("smem_tiled", {"TILE": 16, "PAD": 1}),
    ("smem_tiled", {"TILE": 32, "PAD": 1}),
    ("blocktile_1d", {"BM": 128, "TM": 16}),
    ("vectorized", {"BM": 128, "BK": 8}),
    ("bank_conflict_free", {"BM": 64, "BK": 8}),
    ("double_buffered", {"ASYNC": 1, "STAGES": 3}),
    ("double_buffered", {"ASYNC": 1, "STAGES": 2, "BM": 64}),
    ("double_buffered", {"ASYNC": 1, "STAGES": 4}),
    ("warptiled", {"SPLITK": 2}),
    ("warptiled", {"BM": 64, "BN": 32, "WM": 32, "WN": 16, "TM": 4, "TN": 4, "SPLITK": 4}),
    ("warptiled", {"BM": 64, "BN": 128, "BK": 8, "WM": 32, "WN": 64, "TM": 8, "TN": 8, "STAGES": 2, "SPLITK": 3}),
    ("warptiled", {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 32, "TM": 8, "TN": 8, "STAGES": 4}),
]


@pytest.mark.parametrize("name,tunables", CONFIGS, ids=[f"{n}{t or ''}" for n, t in CONFIGS])
def test_kernel_matches_reference_on_drawn_cases(session, name, tunables):
    @settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=gemm_cases())
    def holds(case: GemmCase):
        verification = check_case(session, name, case, tunables)
        assert verification.ok, f"{case.describe()}: {verification.message}"

    holds()


@pytest.mark.parametrize("name", UNSCALED)
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (1, 513, 1), (513, 1, 1), (1, 1, 1000), (257, 1, 129), (1000, 1000, 7)])
def test_degenerate_and_large_shapes(session, name, m, n, k):
    for alpha, beta in ((1.0, 0.0), (-0.75, 1.5)):
        case = GemmCase(GemmProblem(m, n, k, alpha, beta), (0, 2, 1), (0, 1, 3), data_seed=m * 7 + n * 5 + k)
        verification = check_case(session, name, case)
        assert verification.ok, f"{case.describe()}: {verification.message}"


BROKEN = ["writes_past_row", "reads_c_always", "skips_last_row", "reads_past_a_row", "low_precision"]


@pytest.mark.parametrize("entry", BROKEN)
def test_harness_catches_broken_kernels(session, monkeypatch, entry):
    """Each class of bug the harness is meant to catch is caught; a test that cannot fail proves nothing."""
    spec = KernelSpec(name=f"broken_{entry}", description="deliberately wrong", source="tests/kernels/broken.cu",
                      entry=entry, block=lambda t: (16, 16, 1),
                      grid=lambda p, t: (ceil_div(p.n, 16), ceil_div(p.m, 16), 1))
    monkeypatch.setitem(kernels.ALL, spec.name, spec)
    outcome = verify_kernel(session, spec.name, examples=30)
    assert not outcome.ok
    assert outcome.failing_case is not None and outcome.message


def test_gemm_api_against_numpy(session):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((37, 53), dtype=np.float32)
    b = rng.standard_normal((53, 29), dtype=np.float32)
    c = rng.standard_normal((37, 29), dtype=np.float32)
    c_before = c.copy()
    expected = 0.5 * (a.astype(np.float64) @ b) - 2.0 * c
    problem = GemmProblem(37, 29, 53, 0.5, -2.0)
    for name in ["cublas", *UNSCALED]:  # gemm() takes no FP8 arrays
        out = gemm_driver.gemm(a, b, c, alpha=0.5, beta=-2.0, kernel=name)
        assert out.shape == (37, 29) and out.dtype == np.float32
        p = kernels.get(name).precision
        if p == "fp32":
            np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4, err_msg=name)
        else:  # A and B rounded to the precision's storage, held to its bound
            ref = reference(problem, precisions.representable(a, p), precisions.representable(b, p), c)
            verdict = check(problem, out, ref, 0, p)
            assert verdict.ok, f"{name}: {verdict.message}"
    np.testing.assert_array_equal(c, c_before)  # C is an input, never modified in place
    out = gemm_driver.gemm(a, b, kernel="smem_tiled", TILE=16)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_cuda_errors_do_not_break_the_session(session):
    with pytest.raises(MemoryError, match="GiB"):
        DeviceBuffer(session.device.total_memory * 2)
    with pytest.raises(ValueError, match="needs sm_"):
        future = KernelSpec(name="future", description="", source="cu/simt/naive.cu", entry="sgemm_naive",
                            block=lambda t: (32, 32, 1), grid=lambda p, t: (1, 1, 1), min_cc=(99, 0))
        future.check_device(session.device.compute_capability)
    a = np.ones((4, 4), np.float32)
    np.testing.assert_allclose(gemm_driver.gemm(a, a, kernel="naive"), np.full((4, 4), 4.0))


def test_ptx_jit_path_and_its_error_log(session):
    # A unique comment keeps the driver's JIT cache from answering (it then logs nothing).
    ptx = read_source("ptx/naive.ptx") + f"\n// {secrets.token_hex(8)}\n".encode()
    with Module(ptx, is_ptx=True, name="naive.ptx") as module:
        assert "Used 28 registers" in module.jit_log or "registers" in module.jit_log, module.jit_log
        module.kernel("sgemm_naive_ptx", kernels.get("ptx_naive").signature)
    broken = ptx.replace(b"fma.rn.f32", b"fma.rn.f33")
    with pytest.raises(CudaError) as info:
        Module(broken, is_ptx=True, name="broken.ptx")
    assert info.value.name == "CUDA_ERROR_INVALID_PTX"
    assert "f33" in info.value.log or "error" in info.value.log.lower(), info.value.log


def test_reported_resources_match_the_driver(session):
    for spec in kernels.KERNELS.values():
        if spec.kind == "ptx":
            continue
        loaded = session.load(spec, spec.resolve())
        assert loaded.kernel.attribute("NUM_REGS") == loaded.build.resources.registers, spec.name
        assert loaded.kernel.attribute("LOCAL_SIZE_BYTES") == 0, spec.name
        assert loaded.kernel.attribute("SHARED_SIZE_BYTES") == loaded.build.resources.shared_bytes, spec.name


def _device_problem(session, m, n, k, alpha=1.0, beta=0.0, seed=0):
    problem = GemmProblem(m, n, k, alpha, beta)
    a, b, c = random_operands(problem, np.random.default_rng(seed))
    return problem, (a, b, c), upload_operands(problem, a, b, c)


@pytest.mark.parametrize("precision,rtol", [("fp32", 1e-5), ("fp32_default_math", 1e-5), ("tf32", 5e-3)])
def test_cublas_gemm_ex_precisions(session, precision, rtol):
    problem, (a, b, c), (da, db, dc) = _device_problem(session, 129, 67, 301, alpha=1.25, beta=-0.5)
    types = FP32_DEFAULT_MATH if precision == "fp32_default_math" else precisions.get(precision).cublas
    cublas.gemm_ex(session.cublas(), 129, 67, 301, 1.25, da.ptr, da.ld, db.ptr, db.ld, -0.5, dc.ptr, dc.ld,
                   types=types)
    session.synchronize()
    out, _ = dc.read()
    ref = reference(problem, a, b, c).value
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < rtol


def test_cublas_sgemm_and_strided_batched(session):
    m, n, k, batch = 33, 17, 65, 5
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (batch, m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (batch, k, n)).astype(np.float32)
    with DeviceBuffer.from_array(a) as da, DeviceBuffer.from_array(b) as db, DeviceBuffer(batch * m * n * 4) as dc:
        sgemm_strided_batched(session.cublas(), m, n, k, 2.0, da.ptr, k, m * k, db.ptr, n, k * n,
                              0.0, dc.ptr, n, m * n, batch)
        session.synchronize()
        out = dc.download(np.empty((batch, m, n), np.float32))
        np.testing.assert_allclose(out, 2.0 * (a.astype(np.float64) @ b), rtol=1e-5, atol=1e-5)
        sgemm(session.cublas(), m, n, k, 1.0, da.ptr, k, db.ptr, n, 0.0, dc.ptr, n)
        session.synchronize()
        first = dc.download(np.empty((m, n), np.float32))
        np.testing.assert_allclose(first, a[0].astype(np.float64) @ b[0], rtol=1e-5, atol=1e-5)


def test_stream_hold_blocks_until_released(session):
    timer = GpuTimer(session.stream, session.arch)
    try:
        done = Event()
        timer._flags[0], timer._flags[1] = 0, 0
        timer._hold.launch((1, 1, 1), (1, 1, 1), timer._hold_args, session.stream)
        done.record(session.stream)
        time.sleep(0.05)
        assert not done.query(), "the hold kernel let the stream run before release"
        timer._flags[0] = 1
        done.synchronize()
        assert done.query() and timer._flags[1] == 0
        done.close()
    finally:
        timer.close()


def test_timer_on_a_small_kernel(session):
    problem, _, (a, b, c) = _device_problem(session, 128, 128, 128)
    timer = GpuTimer(session.stream, session.arch)
    try:
        # a second: under xdist workers sharing the GPU and the host, 0.05 s gave three samples
        stats = timer.measure(session.launcher("smem_tiled", problem, a, b, c), Budget(seconds=1.0, energy=False))
    finally:
        timer.close()
    assert stats.launches_per_sample > 1 and len(stats.samples_ms) >= 5
    assert 0 < stats.min_ms <= stats.median_ms <= stats.quantile_ms(0.9)


def test_sweep_verifies_then_times(session):
    steps = sweep_steps(["cublas", "naive", "smem_tiled", "numpy"], [(67, 45, 33)], alpha=0.5, beta=2.0)
    results = run_sweep(session, steps, seed=1, budget=Budget(seconds=0.02))
    assert [r.status for r in results] == ["ok"] * 4
    assert all(r.verification["ok"] and r.timing is not None for r in results)
    cublas_result = results[0]
    assert cublas_result.pct_of_baseline == pytest.approx(100.0)
    assert all(r.pct_of_baseline > 0 for r in results)


def test_split_k_counters_reset_and_results_repeat_bit_for_bit(session):
    """The last block of each C tile resets its counter, so launch after launch is the same
    computation; and the slices are added in slice order, so the bits do not depend on which
    block finished last."""
    problem = GemmProblem(300, 200, 1000, 0.5, 0.0)
    case = PreparedCase.random(problem, "fp32", 0)
    launch = session.launcher("warptiled", problem, *case.device(), {"BM": 64, "BN": 64, "WM": 32, "WN": 32,
                                                                       "TN": 4, "SPLITK": 4})

    def run():
        out, guard = case.run(launch)
        verification = case.check(out, guard)
        assert verification.ok, verification.message
        return out

    assert_same_bits(run, 5, "warptiled SPLITK=4")
    case.close()
