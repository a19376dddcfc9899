"""Launch recipes of the Hopper kernels: packing, tensor maps, grid, arguments, once per problem.

One recipe serves every rung: the spec hands it ``select(tunables) -> (entry name, Geometry)``
(which loaded entry runs, and its host contract). Called once per (problem, operands), it

1. decides per operand whether TMA can read it in place (``geometry.pack_for``); if not, it
   reserves Session scratch and queues a packing pass (pack.cuh) that runs before the GEMM
   on *every* launch, since the operands' contents change between launches;
2. encodes the two tensor maps (128-byte swizzle, zero fill outside the matrix) over the
   operands as stored: A as M x K, or K x M when stored transposed; B as K x N, or N x K;
3. sizes the grid: one CTA per tile for rungs 1-2; for persistent kernels whole clusters, at
   most what can be resident at once (asked of the driver: cuOccupancyMaxActiveClusters /
   ...BlocksPerMultiprocessor) and at most the work units;
4. reserves split-K scratch (partials, and counters zeroed once: the kernel leaves them zero);
5. for any_shape's TMA-store epilogue, encodes C's map in the output type where TMA can write
   C (else the kernel stores from registers, told so by c_tma = 0), and passes the bias.

M = 0 or N = 0 writes nothing, so it enqueues nothing.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ...cuda.driver import api
from ...cuda.errors import CudaError, check
from ...cuda.tensor_map import encode_tiled_2d, tma_layout_problem
from . import geometry as geo

Select = Callable[[str, Mapping[str, int]], "tuple[str, geo.Geometry]"]
Resident = Callable[[Any, Any, geo.Geometry], int]

# Session scratch, by name (shared by every Hopper launch of a Session; see Session.workspace).
PACKED = {"a": "hopper_packed_a", "b": "hopper_packed_b"}
PARTIALS = "hopper_splitk_partials"
COUNTERS = "hopper_splitk_counters"
DEFAULT_GROUP_M = 8


def resident_clusters(ctx, kernel, g: geo.Geometry) -> int:
    """Clusters (CTAs when the cluster is one CTA) of ``kernel`` that fit on the GPU at once,
    as the driver computes them; the SM-count rule when the driver cannot say. Asked once per
    launch shape of a loaded kernel (kept on it): a Launch is made for every new set of
    operand addresses, and the answer does not depend on them."""
    key = (g.cluster, g.threads, g.smem)
    known = kernel.resident.get(key)
    if known is None:
        try:
            known = _driver_resident(kernel, g, ctx.stream, ctx.device.sm_count)
        except CudaError:
            known = geo.fallback_resident_clusters(ctx.device.sm_count, g.ctas_per_sm, g.cluster)
        kernel.resident[key] = known
    return known


def _driver_resident(kernel, g: geo.Geometry, stream, sm_count: int) -> int:
    d = api()
    if g.cluster == 1:
        per_sm = check(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(kernel.handle, g.threads, g.smem),
                       f"cuOccupancyMaxActiveBlocksPerMultiprocessor({kernel.entry})")
        return int(per_sm) * sm_count
    config = d.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = g.cluster, 1, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = g.threads, 1, 1
    config.sharedMemBytes = g.smem
    config.hStream = stream.handle
    config.numAttrs = 0  # the cluster shape is compiled in (__cluster_dims__)
    return int(check(d.cuOccupancyMaxActiveClusters(kernel.handle, config),
                     f"cuOccupancyMaxActiveClusters({kernel.entry})"))


def make_recipe(select: Select, resident: Resident = resident_clusters):
    """The ``launch_recipe`` of a Hopper spec whose entries ``select`` picks from."""

    def hopper_recipe(ctx):
        return recipe(ctx, select, resident)

    return hopper_recipe


def recipe(ctx, select: Select, resident: Resident = resident_clusters) -> Callable[[], None]:
    p, t, precision = ctx.problem, ctx.tunables, ctx.spec.precision
    if p.m == 0 or p.n == 0:
        return _nothing
    entry, g = select(precision, t)
    kernel = ctx.kernels[entry]
    passes: list[Callable[[], None]] = []
    a_rows, a_cols = (p.k, p.m) if g.trans_a else (p.m, p.k)  # as stored
    a_ptr, a_ld = _readable(ctx, passes, "a", ctx.a, a_rows, a_cols, precision, transpose=False)
    if g.b_transposed:  # B^T: N x K
        b_ptr, b_ld = _readable(ctx, passes, "b", ctx.b, p.k, p.n, precision, transpose=True)
        b_rows, b_cols = p.n, p.k
    else:
        b_rows, b_cols = (p.n, p.k) if g.trans_b else (p.k, p.n)  # as stored
        b_ptr, b_ld = _readable(ctx, passes, "b", ctx.b, b_rows, b_cols, precision, transpose=False)
    a_map = encode_tiled_2d(a_ptr, precision, a_rows, a_cols, a_ld, *g.a_box, geo.SWIZZLE)
    b_map = encode_tiled_2d(b_ptr, precision, b_rows, b_cols, b_ld, *g.b_box, geo.SWIZZLE)
    args: list[Any] = [p.m, p.n, p.k, p.alpha, a_map, b_map, p.beta, ctx.c.ptr, ctx.c.ld]
    splits = t.get("SPLITS", 1) if g.arguments == "split" else 1
    if g.arguments in ("group", "split"):
        args.append(t.get("GROUP_M", DEFAULT_GROUP_M))
    if g.arguments == "split":
        partial_bytes, counter_bytes = geo.split_scratch(p, g, splits)
        args += [splits, ctx.workspace(PARTIALS, partial_bytes) if partial_bytes else 0,
                 ctx.workspace(COUNTERS, counter_bytes, zeroed=True) if counter_bytes else 0]
    if g.tma_store:
        args += c_store_arguments(ctx.c.ptr, ctx.c.ld, p.m, p.n, a_map, g.out_dtype, enabled=bool(t.get("STORE", 1)))
        args.append(ctx.bias)
    if g.persistent:
        grid = (geo.persistent_grid(geo.work_units(p, g, splits), resident(ctx, kernel, g), g.cluster), 1, 1)
    else:
        grid = geo.tile_grid(p, g)
    packed, block, stream = kernel.pack(*args), (g.threads, 1, 1), ctx.stream
    programmatic = bool(t.get("PDL", 0))

    def enqueue() -> None:
        for run_pass in passes:
            run_pass()
        kernel.launch(grid, block, packed, stream, programmatic=programmatic)

    return enqueue


def c_store_arguments(address: int, ldc: int, m: int, n: int, spare_map: bytes, out_dtype: str = "fp32", *,
                      enabled: bool = True) -> list:
    """(c_map, c_tma) of any_shape's TMA-store epilogue: C's map (``out_dtype`` elements, 64 x 32
    boxes, geo.store_swizzle) and 1 where TMA can write C's rows and ``enabled`` (tunable STORE);
    else ``spare_map`` (never read) and 0, and the kernel stores from registers or through
    store_staged, as before.

    TMA's rules for the address and row stride are not enough: a store clips the row at a
    16-byte granule, not at the element. Measured on the H200 (any_shape, N = 3, 7, 127, ldc a
    multiple of 4): every row's element N was written too. So N must be whole 16 bytes."""
    if (not enabled or tma_layout_problem(address, ldc, out_dtype) is not None
            or n * geo.OUT_ITEMSIZE[out_dtype] % 16):
        return [spare_map, 0]
    rows, cols = geo.STORE_CHUNK
    return [encode_tiled_2d(address, out_dtype, m, n, ldc, rows, cols, geo.store_swizzle(out_dtype)), 1]


def _readable(ctx, passes: list, name: str, operand, rows: int, cols: int, precision: str, *,
              transpose: bool) -> tuple[int, int]:
    """(address, leading dimension) TMA reads the operand from: in place, or a packed copy
    whose packing pass is appended to ``passes``."""
    pack = geo.pack_for(operand.ptr, operand.ld, rows, cols, precision, transpose=transpose)
    if pack is None:
        return operand.ptr, operand.ld
    scratch = ctx.workspace(PACKED[name], pack.nbytes)
    kernel = ctx.kernels[pack.kernel]
    args, grid, stream = kernel.pack(operand.ptr, operand.ld, rows, cols, scratch, pack.ld), pack.grid, ctx.stream
    passes.append(lambda: kernel.launch(grid, (geo.PACK_THREADS, 1, 1), args, stream))
    return scratch, pack.ld


def _nothing() -> None:
    """M = 0 or N = 0: C has no element to write."""
