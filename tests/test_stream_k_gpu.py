"""Stream-K on the GPU: the same bits every run, odd shapes, every grid size, back-to-back launches.

Every case goes through the project's traps (checking.check_case / PreparedCase): C poisoned
with NaN when it is output only, a guard band around every matrix, padded leading dimensions
and misaligned pointers where given, a float64 reference with the rigorous bound. The grid
tests hand the launch recipe smaller "resident" counts than the GPU's, so the device-side split
(all stream-K, the hybrid with data-parallel waves, all data-parallel) runs with grids the
occupancy alone would never pick; they never exceed the real occupancy (a larger grid could
deadlock: finishers wait on peers that would never be scheduled).
"""

from __future__ import annotations

import numpy as np
import pytest

from gemm_driver import kernels
from gemm_driver.case import PreparedCase
from gemm_driver.checking import check_case, verify_kernel
from gemm_driver.cuda.driver import api
from gemm_driver.cuda.errors import check
from gemm_driver.kernels.launch import Launch, LaunchContext
from gemm_driver.kernels.simt import stream_k
from gemm_driver.kernels.simt.warptiling import TUNE_SPACE
from gemm_driver.problem import GemmProblem
from gemm_driver.strategies import GemmCase
from helpers import assert_same_bits

pytestmark = pytest.mark.gpu

# (m, n, k): one element; K below one BK step; ragged edges with a deep K; the 1000^3;
# 64 x 64 with a very deep K (one tile, every CTA a sliver of it); tall-skinny, scaled down.
SHAPES = [(1, 1, 1), (7, 9, 3), (127, 129, 1000), (1000, 1000, 1000), (64, 64, 16384), (4096, 128, 2048)]
SCALARS = [(1.0, 0.0), (-1.25, 0.5), (0.0, 2.0), (2.0, 1.0)]
# pads of (lda, ldb, ldc) and misalignments: aligned (B by float4) and the 4-byte paths
LAYOUTS = [((0, 0, 0), (0, 0, 0)), ((1, 3, 2), (1, 2, 3))]


def _capacity(session, tunables) -> int:
    """CTAs of the stream_k rung (with ``tunables``) resident at once on this GPU."""
    spec = kernels.KERNELS["stream_k"]
    t = spec.resolve(tunables)
    kernel = session.load(spec, t).kernels["main"]
    return stream_k.resident_ctas(kernel, spec.block(t)[0], spec.dynamic_smem(t), session.device.sm_count)


def _flags(session, count: int) -> np.ndarray:
    """The first ``count`` stream-K flags of the session's scratch, read back (asking for no
    more than the launches used, so the buffer is the one they used, not a fresh zeroed one)."""
    out = np.empty(count, np.uint32)
    session.synchronize()
    ptr = session.workspace(stream_k.FLAGS, 4 * count, zeroed=True)
    check(api().cuMemcpyDtoH(out.ctypes.data, ptr, out.nbytes), "cuMemcpyDtoH")
    return out


def _forced_grid_launch(session, problem, case, tunables, grid: int) -> Launch:
    """The stream_k rung's Launch with its grid capped at ``grid`` instead of the occupancy."""
    spec = kernels.KERNELS["stream_k"]
    t = spec.validate(problem, tunables)
    assert grid <= _capacity(session, t), "a grid larger than the resident CTAs could deadlock"
    ctx = LaunchContext(spec, session.load(spec, t).kernels, problem, *case.device(), t, session.stream,
                      session.workspace, session.device)
    return Launch("stream_k", stream_k.make_recipe(lambda *args: grid)(ctx), session.stream, t)


def test_stream_k_gives_the_same_bits_ten_times(session):
    """1024^3 with 128 x 128 tiles: 64 tiles for 264 CTAs, every tile added up from 4-5 partials."""
    problem = GemmProblem(1024, 1024, 1024, 1.0, 0.0)
    with PreparedCase.random(problem, "fp32", 14) as case:
        launch = session.launcher("stream_k", problem, *case.device())

        def run():
            out, guard = case.run(launch)
            verification = case.check(out, guard)
            assert verification.ok, verification.message
            return out

        assert_same_bits(run, 10, "stream_k 1024^3")


def test_back_to_back_launches_need_no_rezeroing_and_leave_the_flags_zero(session):
    """50 launches queued without a sync or a refill (the flags are only reset by the kernel
    itself), then a verified launch: same bits as a lone launch, and every flag back at zero."""
    problem = GemmProblem(1000, 1000, 1000, 0.5, 0.0)
    with PreparedCase.random(problem, "fp32", 3) as case:
        launch = session.launcher("stream_k", problem, *case.device())
        lone, guard = case.run(launch)
        assert case.check(lone, guard).ok
        for _ in range(50):
            launch()
        out, guard = case.run(launch)
        assert case.check(out, guard).ok
        np.testing.assert_array_equal(out.view(np.uint32), lone.view(np.uint32))
    grid = stream_k.grid_size(problem, kernels.KERNELS["stream_k"].resolve(), _capacity(session, {}))
    assert grid > 64, "more CTAs than tiles: the fix-up ran"
    assert not _flags(session, grid).any(), "a finisher left a flag raised"


@pytest.mark.parametrize("m,n,k", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
def test_odd_shapes_against_the_reference(session, m, n, k):
    big = m * n * k > 10**8
    for index, (alpha, beta) in enumerate(SCALARS[:2] if big else SCALARS):
        for pads, misalign in LAYOUTS[:1] if big else LAYOUTS:
            case = GemmCase(GemmProblem(m, n, k, alpha, beta), pads, misalign, data_seed=m + n + k + index)
            outcome = check_case(session, "stream_k", case)
            assert outcome.ok, f"stream_k {case.describe()}: {outcome.message}"


@pytest.mark.parametrize("grid", [1, 2, 5, 7, 16, 33, 64, 100, 131])
def test_every_grid_size_computes_the_product(session, grid):
    """1000 x 1000 x 300, 128 x 128 tiles: 64 tiles of 19 k steps. Grids 1, 2 and 16 divide the
    64 tiles: all data-parallel; 5 and 7: the hybrid (data-parallel waves, then one stream-K wave
    of 1-2 tiles a CTA); 33: every tile in the stream-K share, 1-2 tiles a CTA; 64: one whole
    tile each; 100 and 131: every tile added up from 2-3 CTAs' partials."""
    for alpha, beta in ((1.0, 0.0), (-0.75, 1.5)):
        problem = GemmProblem(1000, 1000, 300, alpha, beta)
        with PreparedCase.random(problem, "fp32", grid, guard=2, lds=(301, 1003, 1001)) as case:
            launch = _forced_grid_launch(session, problem, case, {}, grid)
            out, guard = case.run(launch)
            verification = case.check(out, guard)
            assert verification.ok, f"grid {grid}, alpha {alpha}, beta {beta}: {verification.message}"


@pytest.mark.parametrize("tunables", [{}, {"PER_SM": 1},
                                      {"BM": 64, "BN": 64, "WM": 32, "WN": 32, "TN": 4, "PER_SM": 1},
                                      {"BN": 256, "WM": 64, "WN": 64, "TN": 16}])
def test_drawn_cases(session, tunables):
    outcome = verify_kernel(session, "stream_k", examples=40, max_dim=300, tunables=tunables)
    assert outcome.ok, f"{outcome.failing_case.describe() if outcome.failing_case else ''}: {outcome.message}"


def test_every_configuration_of_the_sweep_is_correct(session):
    """What the tuner may choose, data-parallel, split-K and stream-K alike, on one ragged
    shape with alpha and beta: the table can only hold a configuration that computes C."""
    case = GemmCase(GemmProblem(517, 389, 1031, -1.5, 0.25), (0, 1, 2), (0, 0, 0), data_seed=5)
    for tunables in TUNE_SPACE:
        outcome = check_case(session, "warptiled", case, tunables)
        assert outcome.ok, f"{tunables}: {outcome.message}"
