"""Stream-K for the warptiled kernel (STREAMK = 1): the work split, the grid, the launch recipe.

The kernel (cu/simt/stream_k.cuh, ``stream_k::Schedule``) computes its split on the device
from (M, N, K, tile, gridDim.x); ``Schedule`` here is the same arithmetic, line for line, so
the tests can check on the CPU that every (tile, k step) is covered exactly once, that each
CTA stores at most one partial and that a finisher only waits on higher CTAs.

The launch side sizes the persistent grid: never more CTAs than can be resident at once
(the driver's occupancy for this kernel, block and shared memory, times the SM count; a
finisher spins on its peers' flags, so an unscheduled peer would hang it), at most PER_SM
an SM when that tunable is set, and no more than one CTA per ``MIN_STEPS`` k steps of work,
so tiny problems are not cut into one-step slivers that cost more to add up than to compute.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ...cuda.driver import api
from ...cuda.errors import CudaError, check
from ...problem import GemmProblem
from ..launch import LaunchContext, standard_recipe
from ..spec import ceil_div

MIN_STEPS = 4  # k steps of work per CTA at least (when the problem is that small)
PARTIALS = "stream_k_partials"  # Session scratch names (one partial tile per CTA, one flag per CTA)
FLAGS = "stream_k_flags"


@dataclass(frozen=True)
class Unit:
    """A k range [k0, k1) of one tile, in k steps; ``role`` says what the CTA does with it."""

    tile: int
    k0: int
    k1: int
    role: str  # "whole" (stores C), "partial" (stores to its slot), "finish" (adds peers, stores C)


@dataclass(frozen=True)
class Schedule:
    """stream_k::Schedule of cu/simt/stream_k.cuh."""

    m: int
    n: int
    k: int
    bm: int
    bn: int
    bk: int
    grid: int

    def __post_init__(self):
        if self.grid < 1:
            raise ValueError(f"a stream-K grid needs at least one CTA, got {self.grid}")

    @property
    def tiles_n(self) -> int:
        return ceil_div(self.n, self.bn)

    @property
    def tiles(self) -> int:
        return ceil_div(self.m, self.bm) * self.tiles_n

    @property
    def iters(self) -> int:
        """k steps per tile; K = 0 is one empty step (the tile is still stored: beta * C)."""
        return max(1, ceil_div(self.k, self.bk))

    @property
    def sk_tiles(self) -> int:
        """Tiles shared out by k step: all when they do not outnumber the CTAs; else the last
        partial wave plus one full one (1 to 2 tiles per CTA), none when G divides T."""
        tiles, grid = self.tiles, self.grid
        if tiles <= grid:
            return tiles
        return 0 if tiles % grid == 0 else tiles % grid + grid

    @property
    def base(self) -> int:
        return self.sk_tiles * self.iters // self.grid

    @property
    def extra(self) -> int:
        return self.sk_tiles * self.iters % self.grid

    def begin(self, cta: int) -> int:
        """First stream-K step of ``cta``; begin(cta + 1) is one past its last."""
        return cta * self.base + min(cta, self.extra)

    def unit(self, cta: int, u: int) -> Unit | None:
        """Unit ``u`` of ``cta`` as the kernel computes it (Schedule::unit in stream_k.cuh, the
        same arithmetic): the tiles its stream-K steps touch, then its whole tiles; None past the
        last."""
        first, end, iters = self.begin(cta), self.begin(cta + 1), self.iters
        if first < end:
            first_tile = first // iters
            touched = (end - 1) // iters - first_tile + 1
            if u < touched:
                tile = first_tile + u
                k0, k1 = max(first - tile * iters, 0), min(end - tile * iters, iters)
                return Unit(tile, k0, k1, _role(k0, k1, iters))
            u -= touched
        tile = self.sk_tiles + cta + u * self.grid
        return Unit(tile, 0, iters, "whole") if tile < self.tiles else None

    def units(self, cta: int) -> list[Unit]:
        """What ``cta`` computes, in order: its stream-K steps walked tile by tile, then its whole
        tiles (written as a walk, apart from ``unit``, so the tests can hold one against the other)."""
        out, step, end, iters = [], self.begin(cta), self.begin(cta + 1), self.iters
        while step < end:
            tile = step // iters
            k0, k1 = step - tile * iters, min(end - tile * iters, iters)
            out.append(Unit(tile, k0, k1, _role(k0, k1, iters)))
            step = tile * iters + k1
        out += [Unit(t, 0, iters, "whole") for t in range(self.sk_tiles + cta, self.tiles, self.grid)]
        return out

    def peers(self, cta: int, tile: int) -> range:
        """The CTAs whose partials the finisher ``cta`` of ``tile`` adds, in order."""
        last, tile_end = cta + 1, (tile + 1) * self.iters
        while last < self.grid and self.begin(last) < tile_end:
            last += 1
        return range(cta + 1, last)


def _role(k0: int, k1: int, iters: int) -> str:
    return "partial" if k0 > 0 else ("finish" if k1 < iters else "whole")


def grid_size(problem: GemmProblem, tunables, resident: int) -> int:
    """CTAs to launch: at most ``resident`` (all of them must run at once) and at most one per
    MIN_STEPS k steps of the whole problem; at least one."""
    tiles = ceil_div(problem.m, tunables["BM"]) * ceil_div(problem.n, tunables["BN"])
    steps = tiles * max(1, ceil_div(problem.k, tunables["BK"]))
    return max(1, min(resident, ceil_div(steps, MIN_STEPS)))


def scratch_bytes(grid: int, tunables) -> tuple[int, int]:
    """(partials, flags) in bytes: one BM x BN FP32 tile and one 4-byte flag per CTA."""
    return 4 * grid * tunables["BM"] * tunables["BN"], 4 * grid


def resident_ctas(kernel, threads: int, smem: int, sm_count: int) -> int:
    """CTAs of ``kernel`` that fit on the GPU at once, as the driver computes them (registers,
    shared memory, threads); one per SM when the driver cannot say, which always fits a
    kernel that launches at all."""
    try:
        per_sm = check(api().cuOccupancyMaxActiveBlocksPerMultiprocessor(kernel.handle, threads, smem),
                       f"cuOccupancyMaxActiveBlocksPerMultiprocessor({kernel.entry})")
    except CudaError:
        return sm_count
    return max(1, int(per_sm)) * sm_count


Resident = Callable[[Any, int, int, int], int]


def make_recipe(resident: Resident = resident_ctas):
    """The launch recipe of warptiled and its variants: the tile grid for STREAMK = 0 (one launch
    through launch.standard_recipe, split-K included); the persistent stream-K grid otherwise.
    ``resident`` is the occupancy query (tests hand in smaller grids)."""

    def warptiled_recipe(ctx: LaunchContext) -> Callable[[], None]:
        if not ctx.tunables.get("STREAMK", 0):
            return standard_recipe(ctx)
        return stream_k_recipe(ctx, resident)

    return warptiled_recipe


def stream_k_recipe(ctx: LaunchContext, resident: Resident = resident_ctas) -> Callable[[], None]:
    p, t, spec = ctx.problem, ctx.tunables, ctx.spec
    if p.m == 0 or p.n == 0:
        return _nothing
    if ctx.device is None:
        raise ValueError(f"{spec.name}: stream-K sizes its grid from the device's SMs; no device was given")
    kernel, block, sm_count = ctx.kernels["main"], spec.block(t), ctx.device.sm_count
    slots = resident(kernel, block[0], spec.dynamic_smem(t), sm_count)
    if t.get("PER_SM"):
        slots = min(slots, t["PER_SM"] * sm_count)
    grid = grid_size(p, t, slots)
    partial_bytes, flag_bytes = scratch_bytes(grid, t)
    partials = ctx.workspace(PARTIALS, partial_bytes)
    flags = ctx.workspace(FLAGS, flag_bytes, zeroed=True)  # the kernel leaves them zero
    packed = kernel.pack(p.m, p.n, p.k, p.alpha, ctx.a.ptr, ctx.a.ld, ctx.b.ptr, ctx.b.ld, p.beta,
                         ctx.c.ptr, ctx.c.ld, partials, flags)
    stream = ctx.stream

    def enqueue() -> None:
        kernel.launch((grid, 1, 1), block, packed, stream)

    return enqueue


def _nothing() -> None:
    """M = 0 or N = 0: C has no element to write."""
