"""On a GPU: the occupancy the inspection tools compute equals the driver's.

For every registered kernel and tunable combination, and for register-hungry probe
kernels (our ladder kernels all use about 32 registers, which would leave the register
arithmetic untested), ``cuOccupancyMaxActiveBlocksPerMultiprocessor`` is asked about a
spread of block sizes and dynamic shared-memory sizes chosen to land on either side of
the rounding and reservation rules.
"""

from __future__ import annotations

import itertools
from math import prod

import pytest

from gemm_driver import kernels
from gemm_driver.cuda.driver import Module
from gemm_driver.cuda.errors import check
from gemm_driver.cuda.nvrtc import compile_cuda
from gemm_driver.inspection.occupancy import occupancy

pytestmark = pytest.mark.gpu

BLOCK_SIZES = (32, 64, 96, 128, 256, 384, 640, 1024)
# 6272 + 1 KiB reserved = 7296 = 233472 / 32: 32 blocks on sm_90 with 128-byte allocation
# units, 31 with 256-byte ones; 28500 is one block fewer with the 1 KiB reservation than without.
DYNAMIC_SMEM = (0, 1000, 6272, 20000, 28500, 40000)

HOG = b"""
template <int N>
__global__ void hog(const float* __restrict__ in, float* __restrict__ out) {
    float v[N];
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = in[threadIdx.x + i * 1024];
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < N; ++i) s = s * v[N - 1 - i] + v[i];
    out[threadIdx.x] = s;
}
"""
HOG_SIZES = (8, 40, 56, 100, 160, 230)  # about 18, 47, 63, 107, 167 and 237 registers


def _configurations():
    for spec in kernels.KERNELS.values():
        for tunables in spec.configurations():
            yield pytest.param(spec, tunables, id="-".join([spec.name, *(f"{k}{v}" for k, v in tunables.items())]))


def _mismatches(arch, kernel, threads_choices, dynamic_choices, barriers: int = 0) -> list[str]:
    from cuda.bindings import driver

    regs, static = kernel.attribute("NUM_REGS"), kernel.attribute("SHARED_SIZE_BYTES")
    limit = kernel.attribute("MAX_THREADS_PER_BLOCK")
    found = []
    for threads, dynamic in itertools.product(threads_choices, dynamic_choices):
        if threads > limit or static + dynamic > 48 * 1024:
            continue
        want = check(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(kernel.handle, threads, dynamic),
                     "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        got = occupancy(arch, threads, regs, static, dynamic, barriers)
        if got.blocks_per_sm != want:
            found.append(f"{threads} threads, {regs} regs, {static}+{dynamic} B smem: "
                         f"driver {want}, ours {got.blocks_per_sm} ({got.limited_by})")
    return found


@pytest.mark.parametrize("spec, tunables", list(_configurations()))
def test_occupancy_matches_driver_for_registered_kernels(session, spec, tunables):
    loaded = session.load(spec, tunables)
    if loaded.build is not None:  # a cubin built here: the tool's inputs are what the driver sees
        r = loaded.build.resources
        assert (loaded.kernel.attribute("NUM_REGS"), loaded.kernel.attribute("SHARED_SIZE_BYTES")) == (
            r.registers, r.shared_bytes)
    threads = sorted({prod(spec.block(tunables)), *BLOCK_SIZES})
    barriers = loaded.build.resources.barriers if loaded.build is not None else 0
    assert _mismatches(session.arch, loaded.kernel, threads, DYNAMIC_SMEM, barriers) == []


def test_occupancy_matches_driver_for_register_hungry_kernels(session):
    names = [f"hog<{n}>" for n in HOG_SIZES]
    compiled = compile_cuda(HOG, "hog.cu", session.arch, name_expressions=names)
    session.context.make_current()
    with Module(compiled.cubin, name="hog.cu") as module:
        found = []
        for name in names:
            kernel = module.kernel(compiled.entry(name), ("ptr", "ptr"))
            found += _mismatches(session.arch, kernel, BLOCK_SIZES, (0, 6272))
    assert found == []
