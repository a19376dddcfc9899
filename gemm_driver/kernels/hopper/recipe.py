"""Launch recipes of the Hopper kernels: packing, tensor maps, grid, arguments, once per problem.

One recipe serves every rung: the spec hands it ``select(tunables) -> (entry name, Geometry)``
(which loaded entry runs, and its host contract). Called once per (problem, operands), it

1. decides per operand whether TMA can read it in place (``geometry.pack_for``); if not, it
   reserves Session scratch and queues a packing pass (pack.cuh: A and B in one launch) that
   runs before the GEMM on *every* launch, since the operands' contents change between
   launches;
2. encodes the two tensor maps (128-byte swizzle, zero fill outside the matrix) over the
   operands as stored: A as M x K, or K x M when stored transposed; B as K x N, or N x K;
3. sizes the grid: one CTA per tile for rungs 1-2; for persistent kernels whole clusters, at
   most what can be resident at once (asked of the driver: cuOccupancyMaxActiveClusters /
   ...BlocksPerMultiprocessor) and at most the work units;
4. cuts the work into units (geometry.split_plan: split-K of every tile, or of the last
   partial wave's tiles only) and reserves split-K scratch (partials, and counters zeroed
   once: the kernel leaves them zero);
5. for any_shape's TMA-store epilogue, encodes C's map in the output type where TMA can write
   C (else the kernel stores from registers, told so by c_tma = 0), and passes the bias.

M = 0 or N = 0 writes nothing, so it enqueues nothing. With the decode tiles' SWAP_MN (small N)
all of this is done for the problem with M and N exchanged (``geometry.kernel_problem``): B's
memory is the kernel's A and A's its B, and the kernel writes D's rows itself.

The launch it returns can be re-pointed (``Launch.repoint``): the same GEMM at other operand
addresses, made from it by copying its packed arguments and encoding again only the tensor
maps whose operand moved (H100, tools/probes/launch_cost.py: a plan call at new addresses
took 245 us of host time with a Launch made from scratch, 86 us re-pointed). A launch that
packs an operand, or addresses that change a decision (packing, C by TMA stores), are made
from scratch.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple

from ...cuda.driver import api
from ...cuda.errors import CudaError, check
from ...cuda.tensor_map import encode_tiled_2d, tma_layout_problem
from . import geometry as geo

Select = Callable[[str, Mapping[str, int]], "tuple[str, geo.Geometry]"]
Resident = Callable[[Any, Any, geo.Geometry], int]

# Session scratch, by name (shared by every Hopper launch of a Session; see Session.workspace).
PACKED = {"a": "hopper_packed_a", "b": "hopper_packed_b", "scales_a": "hopper_packed_scales_a"}
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
    t, precision = ctx.tunables, ctx.spec.precision
    if ctx.problem.m == 0 or ctx.problem.n == 0:
        return _nothing
    entry, g = select(precision, t)
    p = geo.kernel_problem(ctx.problem, g)
    kernel = ctx.kernels[entry]
    split = geo.Split(1)  # rungs 1-2: one CTA a tile, no units
    if g.persistent:
        clusters = resident(ctx, kernel, g)
        # a CK-cluster splits every tile already; ping-pong tiles and column halves run whole
        tail = t.get("TAIL", 0) if g.ck == 1 and not g.pingpong and g.nsplit == 1 else 0
        split = (geo.split_plan(p, g, t.get("SPLITS", 1), tail, clusters) if g.arguments == "split"
                 else geo.Split(geo.super_tiles(p, g)))
        grid = (geo.persistent_grid(split.units, clusters, g.cluster), 1, 1)
    else:
        grid = geo.tile_grid(p, g)
    return _Shape(ctx, g, p, kernel, grid, split).enqueue_at(ctx.a, ctx.b, ctx.c, ctx.bias)


class _Shape:
    """What a Hopper GEMM's launches share whatever the operands' addresses: the problem, the
    entry and its geometry, the grid, the stream. ``enqueue_at`` makes the launch at given
    addresses (an ``_Enqueue``)."""

    def __init__(self, ctx, g: geo.Geometry, p, kernel, grid, split: geo.Split):
        # p: the problem the entry computes (geometry.kernel_problem: with SWAP_MN, M and N exchanged)
        self.ctx, self.g, self.problem, self.kernel, self.grid, self.split = ctx, g, p, kernel, grid, split
        self.block = (g.threads, 1, 1)
        self.a_stored = (p.k, p.m) if g.trans_a else (p.m, p.k)
        # B as its map reads it: N x K when stored so, or as the transposed copy of a K x N B
        self.b_stored = (p.n, p.k) if g.trans_b or g.b_transposed else (p.k, p.n)
        self.store_enabled = bool(ctx.tunables.get("STORE", 1))
        # a TMA-store entry's last three arguments are C's map, c_tma and the bias (rungs.STORE_SIGNATURE)
        self.store_at = len(kernel.signature) - 3 if g.tma_store else None
        self.programmatic = bool(ctx.tunables.get("PDL", 0))

    def _map(self, address: int, stored: tuple[int, int], ld: int, box: tuple[int, int]) -> bytes:
        return encode_tiled_2d(address, self.ctx.spec.precision, *stored, ld, *box, geo.SWIZZLE)

    def enqueue_at(self, a, b, c, bias: int, previous: "_Enqueue | None" = None) -> "_Enqueue":
        """The launch on operands ``a``, ``b``, ``c`` (ptr, ld) and ``bias`` (an address, 0 for
        none). With ``previous`` (a launch of this shape at other addresses, packing nothing
        and deciding C's stores alike) its arguments are copied and only the tensor maps and
        pointers that moved are made again."""
        ctx, g, p, precision = self.ctx, self.g, self.problem, self.ctx.spec.precision
        if g.swap_mn:
            a, b = b, a  # the exchanged problem's A is op(B)^T, read from B's memory, and its B op(A)^T
        copies: list[_Copy] = []
        a_ptr, a_ld = _readable(ctx, copies, "a", a, *self.a_stored, precision, transpose=False)
        if g.b_transposed:
            b_ptr, b_ld = _readable(ctx, copies, "b", b, p.k, p.n, precision, transpose=True)
        else:
            b_ptr, b_ld = _readable(ctx, copies, "b", b, *self.b_stored, precision, transpose=False)
        passes = packing_passes(ctx, copies)
        # with SWAP_MN the kernel's C is D transposed, which no map describes (the decode tiles store
        # from registers; their entries take a spare map)
        c_tma = g.tma_store and not g.swap_mn and c_tma_possible(c.ptr, c.ld, p.n, g.out_dtype,
                                                                  enabled=self.store_enabled)
        at = _At(a_ptr, a_ld, b_ptr, b_ld, c.ptr, c.ld, c_tma, bias)
        before = previous.at if previous is not None else None
        if (before is not None and not passes and not previous.passes
                and (a_ld, b_ld, c.ld, c_tma) == (before.a_ld, before.b_ld, before.c_ld, before.c_tma)):
            return _Enqueue(self, at, passes, previous.packed.replaced(*self._moved(before, at)))
        a_map = self._map(a_ptr, self.a_stored, a_ld, g.a_box)
        b_map = self._map(b_ptr, self.b_stored, b_ld, g.b_box)
        args: list[Any] = [p.m, p.n, p.k, p.alpha, a_map, b_map, p.beta, c.ptr, c.ld]
        if g.arguments in ("group", "split"):
            args.append(ctx.tunables.get("GROUP_M", DEFAULT_GROUP_M))
        if g.arguments == "split":
            args += split_arguments(ctx, g, self.split)
        if g.tma_store:
            args += [self._c_map(c.ptr, c.ld) if c_tma else a_map, int(c_tma), bias]
        return _Enqueue(self, at, passes, self.kernel.pack(*args))

    def _c_map(self, address: int, ldc: int) -> bytes:
        return c_map(address, ldc, self.problem.m, self.problem.n, self.g.out_dtype)

    def _moved(self, before: "_At", now: "_At") -> tuple[dict[int, Any], dict[int, int]]:
        """(the pointer arguments that differ between two sets of addresses, by position; the
        tensor maps to point at a new address, by position: their shapes and boxes are the same)."""
        changes, readdressed = {}, {}
        if now.a_ptr != before.a_ptr:
            readdressed[A_MAP] = now.a_ptr
        if now.b_ptr != before.b_ptr:
            readdressed[B_MAP] = now.b_ptr
        if now.c_ptr != before.c_ptr:
            changes[C_POINTER] = now.c_ptr
            if now.c_tma:
                readdressed[self.store_at] = now.c_ptr
        if self.g.tma_store and now.bias != before.bias:
            changes[self.store_at + 2] = now.bias
        return changes, readdressed


class _At(NamedTuple):
    """The addresses (and leading dimensions) a launch was packed for, as the kernel reads them."""

    a_ptr: int
    a_ld: int
    b_ptr: int
    b_ld: int
    c_ptr: int
    c_ld: int
    c_tma: bool
    bias: int


# positions of A's and B's maps and of C in every entry's arguments (rungs.SIGNATURE)
A_MAP, B_MAP, C_POINTER = 4, 5, 7


class _Enqueue:
    """One Hopper GEMM at fixed addresses: calling it enqueues the packing passes (if any) and
    the kernel; ``repoint`` makes the same GEMM at other addresses (Launch.repoint)."""

    def __init__(self, shape: _Shape, at: _At, passes: list, packed):
        self.shape, self.at, self.passes, self.packed = shape, at, passes, packed
        # Session scratch (split-K's partials and counters, packed operands): the Plan orders
        # launches on two streams around it; a launch that touches none skips that (two driver
        # calls a call)
        self.uses_scratch = shape.split.splits > 1 or bool(passes)

    def __call__(self) -> None:
        for run_pass in self.passes:
            run_pass()
        s = self.shape
        s.kernel.launch(s.grid, s.block, self.packed, s.ctx.stream, programmatic=s.programmatic)

    def repoint(self, a, b, c, bias: int) -> "_Enqueue":
        return self.shape.enqueue_at(a, b, c, bias, previous=self)


def split_arguments(ctx, g: geo.Geometry, split: geo.Split) -> list:
    """splits, whole, workspace, counters (hopper_pws::Schedule's split and its scratch): the
    Session's partial-sum workspace and zeroed counters where the kernel splits, else 0 for both."""
    partial_bytes, counter_bytes = geo.split_scratch(g, split)
    return [split.splits, split.whole, ctx.workspace(PARTIALS, partial_bytes) if partial_bytes else 0,
            ctx.workspace(COUNTERS, counter_bytes, zeroed=True) if counter_bytes else 0]


def c_tma_possible(address: int, ldc: int, n: int, out_dtype: str = "fp32", *, enabled: bool = True) -> bool:
    """Whether any_shape's TMA-store epilogue can write C: tunable STORE on, TMA's rules for the
    address and row stride met, and N whole 16 bytes. TMA's rules are not enough: a store clips
    the row at a 16-byte granule, not at the element. Measured on the H200 (any_shape, N = 3, 7,
    127, ldc a multiple of 4): every row's element N was written too."""
    return (enabled and tma_layout_problem(address, ldc, out_dtype) is None
            and n * geo.OUT_ITEMSIZE[out_dtype] % 16 == 0)


def c_store_arguments(address: int, ldc: int, m: int, n: int, spare_map: bytes, out_dtype: str = "fp32", *,
                      enabled: bool = True) -> list:
    """(c_map, c_tma) of any_shape's TMA-store epilogue: C's map (``out_dtype`` elements, 64 x 32
    boxes, geo.store_swizzle) and 1 where TMA can write C (``c_tma_possible``); else
    ``spare_map`` (never read) and 0, and the kernel stores from registers or through
    store_staged, as before."""
    if not c_tma_possible(address, ldc, n, out_dtype, enabled=enabled):
        return [spare_map, 0]
    return [c_map(address, ldc, m, n, out_dtype), 1]


def c_map(address: int, ldc: int, m: int, n: int, out_dtype: str) -> bytes:
    """C's tensor map for the TMA-store epilogue: ``out_dtype`` elements, 64 x 32 boxes
    (geo.STORE_CHUNK), the output type's swizzle (geo.store_swizzle)."""
    rows, cols = geo.STORE_CHUNK
    return encode_tiled_2d(address, out_dtype, m, n, ldc, rows, cols, geo.store_swizzle(out_dtype))


class _Copy(NamedTuple):
    """One operand's packing pass: what it does (geometry.Pack), from where, into which scratch."""

    pack: geo.Pack
    src: int
    dst: int

    @property
    def arguments(self) -> list:  # rungs.PACK_SIGNATURE
        return [self.src, self.pack.ld_src, self.pack.rows, self.pack.cols, self.dst, self.pack.ld]


def _readable(ctx, copies: list[_Copy], name: str, operand, rows: int, cols: int, precision: str, *,
              transpose: bool) -> tuple[int, int]:
    """(address, leading dimension) TMA reads the operand from: in place, or a packed copy in
    Session scratch, whose pass is appended to ``copies`` (``packing_passes`` launches them)."""
    pack = geo.pack_for(operand.ptr, operand.ld, rows, cols, precision, transpose=transpose)
    if pack is None:
        return operand.ptr, operand.ld
    scratch = ctx.workspace(PACKED[name], pack.nbytes)
    copies.append(_Copy(pack, operand.ptr, scratch))
    return scratch, pack.ld


def packing_passes(ctx, copies: list[_Copy]) -> list[Callable[[], None]]:
    """The launches that make ``copies`` before the GEMM: the row copies two to a launch of
    pack_rows (A and B, or either; FP8 block scaling's A scales in a second launch), its first
    blocks copying the first operand, and each transposing copy in its own; with the GEMM's PDL,
    pack_rows is launched with PDL too (it waits at entry for the grid before it). On small odd
    shapes the packing sets the time: H100, six shapes of neither corpus set
    (tools/probes/odd_small.py), 1.26-1.50x faster than one launch per operand with a block per
    row (results/h100-80gb-hbm3/probe-odd-small.txt against probe-odd-small-before.txt;
    docs/hopper.md#rows-that-are-not-128-byte-multiples)."""
    passes = []
    rows = [c for c in copies if c.pack.kernel == "pack_rows"]
    for pair in (rows[i:i + 2] for i in range(0, len(rows), 2)):
        blocks = [c.pack.grid[0] for c in pair]  # a thread a 16-byte chunk
        second = pair[1].arguments if len(pair) > 1 else [0] * len(pair[0].arguments)  # never read alone
        passes.append(_pass(ctx, "pack_rows", (sum(blocks), 1, 1), [*pair[0].arguments, *second, blocks[0]]))
    passes += [_pass(ctx, c.pack.kernel, c.pack.grid, c.arguments) for c in copies if c.pack.kernel != "pack_rows"]
    return passes


def _pass(ctx, entry: str, grid, arguments: list) -> Callable[[], None]:
    """One packing launch of ``entry`` (pack.cuh), its arguments packed once."""
    kernel, stream = ctx.kernels[entry], ctx.stream
    packed = kernel.pack(*arguments)
    programmatic = entry == "pack_rows" and bool(ctx.tunables.get("PDL", 0))  # waits at entry (pack.cuh)
    return lambda: kernel.launch(grid, (geo.PACK_THREADS, 1, 1), packed, stream, programmatic=programmatic)


def _nothing() -> None:
    """M = 0 or N = 0: C has no element to write."""
