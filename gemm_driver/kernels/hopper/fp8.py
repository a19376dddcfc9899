"""hopper_fp8: the FP8 Hopper kernel (cu/hopper/fp8.cu) as a KernelSpec.

The BF16 any-shape kernel's schedule (persistent, warp-specialised, split-K, clusters, TMA
stores, packing; rungs.py) on FP8 codes with FP32 scales, partial sums promoted to FP32
registers every 128 of K; at small M the BF16 kernel's decode tiles (DECODE: wgmma's roles
swapped) on the same codes. One spec serves the three scaling modes of fp8.py: the mode changes
the kernel's code, so it is a template argument carried as the tunable SCALING, set by the
problem's ``scaling`` as OUT (D's type) and EPI (the epilogue) are (``Fp8Spec.validate``), one
build per combination that runs. So are the operands' formats (the problem's ``fp8_types``: A
and B each e4m3 or e5m2), as TYPES: they change only the wgmma instruction's type names, which
are part of the code. The scales reach the kernel as the cuBLASLt FP8 baselines get them:
``Session.launcher(..., scales=(A's, B's))`` in fp8.device_scales' layouts, read on the GPU.

Layout nt only (A stored M x K, B stored N x K: FP8 wgmma reads both operands K-major), D in
FP32 or BF16, batch 1 (problem.fp8_rule).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, NamedTuple

from ... import fp8 as _fp8
from ...cuda.errors import UnsupportedProblem
from ...problem import FP8_TYPES, GemmProblem, fp8_rule
from ..linear import LinearSpec
from ..spec import Entry, Tunable, ceil_div
from ..target import check_capabilities
from . import geometry as geo
from . import recipe as _recipe
from . import rungs

NAME = "hopper_fp8"
PRECISION = "fp8"
SOURCE = "cu/hopper/fp8.cu"
# any_shape's arguments, then A's scales and their row stride, B's scales and theirs, then the map
# of A's block scales and whether TMA reads them (RING; the decode entries take and ignore both)
SIGNATURE = (*rungs.STORE_SIGNATURE, "ptr", "int", "ptr", "int", "tensormap", "int")
SCALING_CODE = {scaling: code for code, scaling in enumerate(_fp8.SCALINGS)}  # tensor 0, row 1, block 2
SCALING_NAME = dict(enumerate(_fp8.SCALINGS))
OUT_DTYPES = ("fp32", "bf16")
BLOCK_SCALING = SCALING_CODE["block"]
STAGES_DEFAULT = 6  # STAGES' default; the decode tiles leave it so (their ring is as deep as fits)
# The template arguments a problem sets: never chosen.
PROBLEM_SET = ("SCALING", "OUT", "EPI", "TYPES")

TUNABLES = (
    Tunable("BN", 128, (64, 128, 256), "tile columns (wgmma N); 256 only without promotion (PROMOTE=0)"),
    rungs.STAGES(STAGES_DEFAULT, (2, 3, 4, 5, 6, 8)),
    Tunable("CONSUMERS", 2, (1, 2), "consumer warpgroups: 2 = 128-row tiles, 1 = 64-row tiles, two CTAs per SM"),
    Tunable("CM", 1, (1, 2), "cluster rows: CTAs sharing a B tile"),
    Tunable("CN", 1, (1, 2), "cluster columns: CTAs sharing an A tile"),
    rungs.SPLITS,
    rungs.TAIL,
    rungs.GROUP_M,
    rungs.PDL,
    Tunable("STORE", 1, (0, 1), "C's stores: 1 = TMA stores of staged chunks where C's rows allow, 0 = from registers"),
    Tunable("PROMOTE", 1, (0, 1, 2), "1: each 128 of K summed by the tensor core, then added in FP32 registers; "
            "2: as 1, the next 128 of K in the tensor core meanwhile (a third accumulator); "
            "0: the whole K in the tensor core's ~14-bit accumulator (tensor and row scaling)"),
    Tunable("DECODE", 0, (0, *rungs.DECODE_ROWS), "> 0: hopper_fp8_decode (small M): tiles of DECODE rows of A x "
            "64 * CONSUMERS columns of B, wgmma's roles swapped, the deepest ring that fits"),
    Tunable("SCALING", 0, (0, 1, 2), "set by the problem's scaling: 0 tensor, 1 row, 2 block (fp8.py)"),
    Tunable("OUT", 0, (0, 1), "D's type, set by the problem's out_dtype: 0 FP32, 1 BF16"),
    Tunable("EPI", 0, (0, 1, 2, 3), "epilogue, set by the problem: 0 none, 1 bias, 2 bias + ReLU, 3 bias + GELU"),
    Tunable("TYPES", 0, tuple(range(len(FP8_TYPES))), "set by the problem's fp8_types: bit 0 A is e5m2, bit 1 B is "
            "(else e4m3); the wgmma instruction names both formats"),
    Tunable("RING", 0, (0, 1), "block scaling: 1 = A's scales of each k tile loaded by TMA beside the stage's tiles "
            "and read from shared memory (in place, or on full grids from a copy where TMA cannot read them; "
            "else read as with 0); 0 = each thread reads its own from global memory a k tile ahead"),
)


def problem_tunables(problem: GemmProblem) -> dict[str, int]:
    """The template arguments ``problem`` fixes: scaling mode, D's type, epilogue, FP8 formats."""
    return {"SCALING": SCALING_CODE[problem.scaling], "OUT": geo.OUT_CODE[problem.out_dtype],
            "EPI": geo.EPILOGUE_CODE[problem.epilogue], "TYPES": FP8_TYPES.index(problem.fp8_types)}


# ---------------------------------------------------------------- rules
def _promotion_fits(p: GemmProblem, t) -> str | None:
    if t["PROMOTE"] and t["BN"] > 128:
        more = "a second accumulator" if t["PROMOTE"] == 1 else "two more accumulators"
        return (f"PROMOTE={t['PROMOTE']} keeps {more} beside the first (BN/2 registers each a thread): "
                "BN must be 64 or 128")
    if t["PROMOTE"] == 2 and t["BN"] == 128 and t["CONSUMERS"] == 1:
        return ("PROMOTE=2 with one consumer warpgroup (200 registers a thread) spills three 64-register "
                "accumulators: BN must be 64 there")
    if not t["PROMOTE"] and t["BN"] == 256 and t["CONSUMERS"] == 1:
        return "BN=256 takes two consumer warpgroups (m64n256's 128 accumulators in a one-consumer CTA's registers)"
    return None


def _block_scales_promote(p: GemmProblem, t) -> str | None:
    if t["SCALING"] == BLOCK_SCALING and not t["PROMOTE"]:
        return "block scaling is applied where each 128 of K is promoted: it needs PROMOTE=1"
    return None


def _ring_of_block_scales(p: GemmProblem, t) -> str | None:
    if not t["RING"]:
        return None
    if t["SCALING"] != BLOCK_SCALING:
        return f"RING=1 holds block scales; scaling {SCALING_NAME[t['SCALING']]} has none to ring (RING=0)"
    if t["DECODE"]:
        return f"RING=1 is for hopper_fp8's own tiles; DECODE={t['DECODE']} reads its scales in place (RING=0)"
    return None


def _decode_shape(p: GemmProblem, t) -> str | None:
    if not t["DECODE"]:
        return None
    if (why := rungs.decode_tile_refusal(t, "hopper_fp8_decode", STAGES_DEFAULT)) is not None:
        return why
    if t["CN"] > 1:
        return f"DECODE={t['DECODE']} runs hopper_fp8_decode: clusters of tile rows sharing B only (CM=1 or 2, CN=1)"
    return None


# ---------------------------------------------------------------- entries and geometry
def select(precision: str, t: Mapping[str, int]) -> tuple[str, geo.Geometry]:
    """The entry a launch runs (hopper_fp8, hopper_fp8_cluster for CM x CN > 1, hopper_fp8_decode
    for DECODE > 0) and its geometry: any_shape's or the decode tiles', with 1-byte elements
    (BK = 128) and B stored N x K."""
    if (entry := rungs.decode_entry(t)) is not None:
        return entry, geo.decode(precision, t["DECODE"], t["CONSUMERS"], trans_b=True,
                                 out_dtype=geo.OUT_DTYPE[t["OUT"]], cm=t["CM"])
    entry = "cluster" if rungs.clustered(t) else "main"
    g = geo.persistent(precision, t["BN"], t["STAGES"], t["CM"], t["CN"], t["CONSUMERS"], "split",
                       tma_store=True, trans_b=True, out_dtype=geo.OUT_DTYPE[t["OUT"]])
    return entry, replace(g, smem=g.smem + geo.fp8_scale_ring_bytes(t["STAGES"], g.bm, t["RING"]))


def _geometry(t: Mapping[str, int]) -> geo.Geometry:
    return select(PRECISION, t)[1]


TEMPLATE = "{SCALING}, {PROMOTE}, {OUT}, {EPI}, {TYPES}"
ENTRIES = (
    Entry("cluster", f"hopper_fp8_cluster<{{BN}}, {{STAGES}}, {{CONSUMERS}}, {{CM}}, {{CN}}, {TEMPLATE}, {{RING}}>",
          SIGNATURE,
          lambda t: _geometry(t).smem, needed=rungs.clustered),  # only builds that run it
    Entry("decode", f"hopper_fp8_decode<{{DECODE}}, {{CONSUMERS}}, {TEMPLATE}>", SIGNATURE,
          lambda t: _geometry(t).smem, needed=lambda t: rungs.decode_entry(t) == "decode"),
    Entry("decode_cluster", f"hopper_fp8_decode_cluster<{{DECODE}}, {{CONSUMERS}}, {{CM}}, {TEMPLATE}>", SIGNATURE,
          lambda t: _geometry(t).smem, needed=lambda t: rungs.decode_entry(t) == "decode_cluster"),
    Entry("pack_rows", f"hopper::pack_rows<{geo.STORAGE[PRECISION]}>", rungs.PACK_PAIR_SIGNATURE),
)


# ---------------------------------------------------------------- the launch recipe
def fp8_recipe(ctx, resident: Callable[[Any, Any, geo.Geometry], int] = _recipe.resident_clusters):
    """recipe.recipe's steps for this kernel (packing where TMA cannot read a row of codes, UINT8
    maps over A as M x K and B as N x K, split-K scratch, C's store map, the persistent grid),
    then the scale arguments: A's and B's pointers and row strides (fp8.device_scales), and with
    the ring (RING=1) the map of A's block scales (ring_scales: in place or packed)."""
    p, t = ctx.problem, ctx.tunables
    if p.m == 0 or p.n == 0:
        return _nothing
    if ctx.scales is None:
        raise ValueError(f"{NAME}: scaling {p.scaling!r} needs the scales of A and B (Session.launcher(scales=...))")
    entry, g = select(PRECISION, t)
    kernel = ctx.kernels[entry]
    copies: list = []
    a_ptr, a_ld = _recipe._readable(ctx, copies, "a", ctx.a, p.m, p.k, PRECISION, transpose=False)
    b_ptr, b_ld = _recipe._readable(ctx, copies, "b", ctx.b, p.n, p.k, PRECISION, transpose=False)
    scale_a, scale_b = ctx.scales
    ring = ring_scales(ctx, copies, scale_a, g)
    passes = _recipe.packing_passes(ctx, copies)
    a_map = _recipe.encode_tiled_2d(a_ptr, PRECISION, p.m, p.k, a_ld, *g.a_box, geo.SWIZZLE)
    b_map = _recipe.encode_tiled_2d(b_ptr, PRECISION, p.n, p.k, b_ld, *g.b_box, geo.SWIZZLE)
    clusters = resident(ctx, kernel, g)
    split = geo.split_plan(p, g, t["SPLITS"], t["TAIL"], clusters)
    args = [p.m, p.n, p.k, p.alpha, a_map, b_map, p.beta, ctx.c.ptr, ctx.c.ld, t["GROUP_M"],
            *_recipe.split_arguments(ctx, g, split),
            *_recipe.c_store_arguments(ctx.c.ptr, ctx.c.ld, p.m, p.n, a_map, g.out_dtype, enabled=bool(t["STORE"])),
            ctx.bias, scale_a.ptr, scale_a.ld, scale_b.ptr, scale_b.ld,
            *scale_ring_arguments(p, g, ring, a_map)]
    grid = (geo.persistent_grid(split.units, clusters, g.cluster), 1, 1)
    packed, block, stream = kernel.pack(*args), (g.threads, 1, 1), ctx.stream
    programmatic = bool(t["PDL"])

    def enqueue() -> None:
        for run_pass in passes:
            run_pass()
        kernel.launch(grid, block, packed, stream, programmatic=programmatic)

    return enqueue


class _Bytes(NamedTuple):
    """A's block scales as rows of bytes, for pack_rows (kernels.launch.Operand)."""

    ptr: int
    ld: int
    itemsize: int = 1


RING_PACKED_PROBE = "results/h200/probe-fp8-block-tma-scale-ring-packed.txt"


def ring_scales(ctx, copies: list, scale_a, g: geo.Geometry) -> tuple[int, int] | None:
    """Where TMA reads A's block scales for the ring (RING=1): (address, row stride in floats)
    in place; where their rows are not 16-byte multiples (M % 4 != 0) or start off a 16-byte
    boundary, on a full grid of tiles a copy that pack_rows makes of their bytes (appended to
    ``copies``, as A's and B's codes are); else None, and the kernel reads them in place, as
    without the ring. One H200, alternating rounds (RING_PACKED_PROBE): on three full grids of M
    % 4 != 0 the copy and the ring 1.04-1.10x the scales in place (4093x4091x4096 148.5 us
    against 162.8); on three grids of 15-56 tiles of 128 x 128 the copy's launch cost more than the
    ring saved (333x517x1024 8.2 us against 6.6, 190x3000x5000 level)."""
    p, t = ctx.problem, ctx.tunables
    if not t["RING"] or t["DECODE"]:
        return None
    rows = ceil_div(p.k, _fp8.BLOCK)
    in_place = _Bytes(scale_a.ptr, 4 * scale_a.ld)
    tiles = ceil_div(p.m, g.bm) * ceil_div(p.n, g.bn)
    if geo.pack_for(in_place.ptr, in_place.ld, rows, 4 * p.m, PRECISION) is not None and tiles < rungs.FULL_GRID:
        return None
    ptr, ld = _recipe._readable(ctx, copies, "scales_a", in_place, rows, 4 * p.m, PRECISION, transpose=False)
    return ptr, ld // 4


def scale_ring_arguments(p: GemmProblem, g: geo.Geometry, ring: tuple[int, int] | None, spare_map: bytes) -> list:
    """(sa_map, sa_tma) of the block-scale ring: the map of A's scales at ``ring`` (ceil(K/128)
    rows of M floats; boxes of one row of BM) and 1; without the ring ``spare_map`` (never read)
    and 0, and the kernel reads A's scales in place."""
    if ring is None:
        return [spare_map, 0]
    ptr, ld = ring
    return [_recipe.encode_tiled_2d(ptr, "fp32", ceil_div(p.k, _fp8.BLOCK), p.m, ld, 1, g.bm, 0), 1]


def _nothing() -> None:
    """M = 0 or N = 0: D has no element to write."""


# ---------------------------------------------------------------- choose
DECODE_MAX_M = 64  # the largest M the decode tiles are chosen at
BLOCK_DECODE_MAX_M = 16  # ... with block scales
DECODE_SPLIT_MIN_M = 33  # split-K over the decode tiles from here (their 64-row form) on
DECODE_PROBE = "results/h200/probe-fp8-decode-*.txt"  # one file a GPU (--shard)
BLOCK_DECODE_PROBE = "results/h100-80gb-hbm3/probe-fp8-decode-block.txt"
DECODE_PDL_PROBE = "results/h100-80gb-hbm3/probe-fp8-decode-pdl.txt"  # the "+pdl" rows


def decode_choice(problem: GemmProblem) -> tuple[dict[str, int], str] | None:
    """hopper_fp8_decode's tunables for M <= DECODE_MAX_M in tensor or row scaling and M <=
    BLOCK_DECODE_MAX_M in block scaling, else None.

    Measured on an H200 on 12 shapes of M = 1 to 128 in tensor and row scaling, every configuration
    verified, beside cuBLASLt and torch._scaled_mm (tools/probes/fp8_decode.py, DECODE_PROBE):
    up to M = 32 the decode tiles beat the 64-row tiles on every shape (tensor scaling
    1x4096x4096 5.1 TFLOP/s against 2.6, 16x14336x4096 102 against 79, 32x7168x16384 232 against
    167); at M = 64 on both shapes (64x2048x8192 232 against 187, 64x4096x7168 343 against 328);
    at M = 48 they lost (48x8192x2048 229 against 246), and past M = 64, where a tile row of 64
    no longer holds M, on two shapes of three. The rule it showed:

    - the form of rungs.decode_form: the fewest rows >= M, one consumer, two where 64-column
      tiles outnumber what two CTAs an SM hold (8x28672x4096: the same speed either way);
    - split-K only over the 64-row tiles (M > 32), as rungs.decode_choice splits (every unit
      resident, each range >= TAIL_MIN_K_TILES k tiles): 64x2048x8192 4 ways 232 against 161
      unsplit, 64x4096x7168 2 ways 343 against 301; up to M = 32 every split lost (1x4096x4096
      2 ways 4.6 against 5.1, 32x4096x4096 135 against 148);
    - the overlapped promotion; PDL, split or not: with the split tiles it was faster in 30 of 40
      pairs on five shapes of M = 40-64 on the H100 (DECODE_PDL_PROBE), on the rule's two splits
      by 4-5% (64x4096x7168, 2 ways: 341 TFLOP/s against 326 in tensor scaling) and 11-13%
      (64x2048x8192, 4 ways: 255 against 229).

    With block scales (one H100, 8 shapes of M = 1 to 64, BLOCK_DECODE_PROBE) the decode tiles load
    M/4 of A's scales a thread each k tile: they won at M = 1 and 16 (1x4096x4096 4.4 TFLOP/s
    against 2.5, 16x14336x4096 75.2 against 74.1), won and lost at M = 32 (32x4096x4096 94 against
    85, 32x7168x16384 126 against 152) and lost on three of four shapes at M = 48-64."""
    if problem.m > (BLOCK_DECODE_MAX_M if problem.scaling == "block" else DECODE_MAX_M):
        return None
    rows, consumers, tiles = rungs.decode_form(problem)
    splits = 1
    if problem.m >= DECODE_SPLIT_MIN_M:
        splits = rungs._split_k(tiles, problem.k, geo.TAIL_MIN_K_TILES * geo.k_tile(PRECISION), 4)
    tunables = {"DECODE": rows, "BN": 64 * consumers, "CONSUMERS": consumers, "PROMOTE": 2,
                **({"SPLITS": splits} if splits > 1 else {}), "PDL": 1}
    return tunables, (f"M = {problem.m}: hopper_fp8_decode, {tiles} tiles of {rows} x {64 * consumers}"
                      + (f", {splits}-way split-K" if splits > 1 else "") + ", PDL")


def choose_fp8(problem: GemmProblem, gpu_name: str) -> tuple[dict[str, int], str]:
    """Tunables of ``hopper_fp8`` for a shape: ``decode_choice`` at small M, else ``tile_choice``;
    then ``without_tail``."""
    return without_tail(problem, *(decode_choice(problem) or tile_choice(problem)))


TAIL_PROBE = "results/h100-80gb-hbm3/probe-fp8-tail.txt"  # tools/probes/fp8_full_grid.py --tail
TAIL_CHECK = "results/h100-80gb-hbm3/probe-fp8-tail-check.txt"
TAIL_CHECK_AFTER = "results/h100-80gb-hbm3/probe-fp8-tail-check-after.txt"
# tensor and row scaling keep the tail split from this K: below it the hand-over costs what the cut saves
TAIL_MIN_K_WHOLE_SCALES = 6144


def without_tail(problem: GemmProblem, tunables: dict[str, int], why: str) -> tuple[dict[str, int], str]:
    """The pick with the tail split (TAIL, default 4: the last, partial wave's tiles cut over K) for
    block scaling's own tiles, and for tensor and row scaling's from K = TAIL_MIN_K_WHOLE_SCALES;
    TAIL=0 for the others and the decode tiles. H100, the rule's pick with and without it,
    alternately, on grids of 1.2-2.5 waves of neither corpus set:

    - TAIL_PROBE, five grids: block scaling 1.03-1.26x faster with it on all five (2048x1280x8192
      53.4 us against 67.0, cuBLASLt 48.7); tensor scaling 1.08x and 1.15x at K = 6144 and 8192 but
      1.5-4.2% slower on the three of K = 3072-4096 (1280x2048x4096 28.1 against 26.9), where the
      hand-over costs what the cut saves: that set the K bound;
    - TAIL_CHECK, seven grids chosen after it, K = 3072-12288: block scaling 1.08-1.24x faster on
      three (1408x2304x12288 89.1 us against 110.6), level on four (0.4% slower at most); tensor
      scaling at K >= 6144 1.11x at 12288 and level (0.2% at most) on three, at K <= 5120 3.7%
      slower at 1536x1792x4096; row scaling, measured there first (so its bound was set after
      seeing it), 1.13x at 12288, 1.01x at 7168, level on the two others of K >= 6144 and 2.8%
      slower at 1536x1792x4096;
    - TAIL_CHECK_AFTER, six grids of K = 6144-16384 chosen after the bound: tensor scaling faster
      with it on five, 1.03-1.12x (1920x1536x8192 42.0 us against 47.2), level on one; row scaling
      faster on four, 1.04-1.11x, slower on two by 0.4% and 2.4% (1536x2560x16384 102.6 against
      100.2). At 8192^3 (4 of 4096 tiles cut) tensor scaling 0.8% faster with it."""
    if not tunables.get("DECODE") and (problem.scaling == "block" or problem.k >= TAIL_MIN_K_WHOLE_SCALES):
        return tunables, why
    return {**tunables, "TAIL": 0}, why


FULL_GRID_PROBE = "results/h100-80gb-hbm3/probe-fp8-full-grid.txt"
ONE_WAVE_PROBE = "results/h100-80gb-hbm3/probe-fp8-full-grid-one-wave.txt"
PART_GRID_PROBE = "results/h100-80gb-hbm3/probe-fp8-part-grid.txt"
PART_GRID_CHECK = "results/h100-80gb-hbm3/probe-fp8-part-grid-check.txt"
SMALL_GRID_PROBE = "results/h100-80gb-hbm3/probe-fp8-small-grid.txt"
HALF_GRID_CHECK = "results/h100-80gb-hbm3/probe-fp8-half-grid-check.txt"
BLOCK_PART_GRID_PROBE = "results/h100-80gb-hbm3/probe-fp8-block-part-grid.txt"
BLOCK_PART_GRID_MORE = "results/h100-80gb-hbm3/probe-fp8-block-part-grid-check.txt"
BLOCK_PART_GRID_CHECK = "results/h100-80gb-hbm3/probe-fp8-block-part-grid-after.txt"
# tensor and row scaling: 6 stages of 128 x 128 tiles on grids of more than half the SMs (where the
# split-K rule below cannot split: every unit resident)
SIX_STAGE_MIN_TILES = rungs.SMS // 2 + 1
# block scaling: A's scales on a ring beside the stages (RING=1), timed beside the in-place scales
RING_PROBE = "results/h200/probe-fp8-block-tma-scale-ring.txt"  # four full grids
RING_PART_GRID_PROBE = "results/h200/probe-fp8-block-tma-scale-ring-part-grid.txt"
RING_SMALL_PROBE = "results/h200/probe-fp8-block-tma-scale-ring-small.txt"  # M = 48-128
RING_CHECK = "results/h200/probe-fp8-block-tma-scale-ring-check.txt"
RING_H100_PROBE = "results/h100-80gb-hbm3/probe-fp8-block-tma-scale-ring-h100.txt"
RING_SPLIT_PROBE = "results/h100-80gb-hbm3/probe-fp8-block-tma-scale-ring-split.txt"


def tile_choice(problem: GemmProblem) -> tuple[dict[str, int], str]:
    """hopper_fp8's own tiles for a shape: the overlapped promotion (PROMOTE=2) everywhere, tiles
    by the rules below, measured on one H200 on six shapes x three scalings
    (tools/probes/fp8_configs.py; results/h200/probe-fp8-configs.txt):

    - M <= 64 (block scaling past BLOCK_DECODE_MAX_M, or a forced DECODE=0): 64 x 64 tiles of one
      consumer warpgroup, two CTAs an SM (at 64x4096x7168 1.3-1.5x the 64 x 128 tiles); split-K
      2 ways where the tiles leave SMs idle and each slice keeps >= 2048 of K (at 64x4096x7168
      1.1-1.35x unsplit, and 1.02-1.14x the 3 or 4 slices, in each scaling:
      results/h200/probe-fp8-small-splits.txt). In block scaling with A's scales on the ring:
      unsplit, 1.06x the in-place scales at 48x6144x4096 and 64x4096x7168 (RING_SMALL_PROBE),
      split 2 ways 1.01x at 40x8192x4096 (RING_CHECK).
    - In tensor and row scaling, on more than half the SMs' worth of 128 x 128 tiles: those tiles, 6
      stages, in 1 x 2 clusters (the two tiles of a cluster share each A tile by multicast) where
      the grid is more than one wave. Block scaling: its own rule below.
      Refitted on the H100, every form timed alternately (tools/probes/fp8_full_grid.py): on four
      grids of 8-9 waves outside the FP8 bench (FULL_GRID_PROBE) 6 stages in 1 x 2 clusters were
      the fastest of ours on seven of the eight tensor and row cases, 1.03-1.15x the 4 stages
      without a cluster (4608x4608x6144 row 211 us against 244, 0.98x cuBLASLt against 0.85x;
      6144x3072x8192 tensor 256 against 270, where 6 stages without the cluster ran 252); on five
      grids of 126-132 tiles (ONE_WAVE_PROBE) 6 stages without a cluster were the fastest on nine
      of ten, 1.05-1.17x the clusters (384x5632x4096 tensor 14.7 us against 17.5, 1.02x
      cuBLASLt); on six grids of 80-112 tiles, where the rule took 128 x 64 tiles at 8 stages
      before (PART_GRID_PROBE), 6 stages without a cluster were the fastest of ours in all twelve
      cases, 1.15-1.37x the 128 x 64 tiles (384x4096x6144 row 20.2 us against 27.5, 0.98x the
      faster baseline against 0.72x); checked on six more of 84-108 tiles (PART_GRID_CHECK): the
      fastest of ours, or within 0.5% of it, in eight of twelve cases, 2-5% behind 4 stages in
      the other four (320x4608x5120, 1280x1152x2048; the 128 x 64 tiles not timed there). That
      rule started at 80 tiles; on three grids of 72-78 tiles 6 stages had run 1.17-1.27x faster
      than the 128 x 64 tiles (the same file), and on five of 48-60 tiles the 128 x 64 tiles were
      the faster on four (SMALL_GRID_PROBE), so it starts past half the SMs, where split-K stops
      (SIX_STAGE_MIN_TILES). Checked on six grids of 70-76 tiles chosen after (HALF_GRID_CHECK): 6
      stages 1.12-1.27x the 128 x 64 tiles in all twelve cases, within 1.3% of the fastest of
      ours. In block scaling no form won on more than one of the four full grids (0.70-0.78x
      the faster baseline each), so it kept 4 stages without a cluster there. Past half the SMs'
      worth of tiles and short of a full grid the block-scaled tiles took 6 stages without a
      cluster before the ring (below): on the twelve grids of 70-112
      tiles of the probes above (BLOCK_PART_GRID_PROBE, BLOCK_PART_GRID_MORE; timed in block
      scaling after 256x5120x3072 had shown 128 x 128 tiles ahead of the rule's pick there,
      results/h100-80gb-hbm3/probe-fp8-block-scales-in-place.txt) 128 x 128 tiles ran 1.24-1.38x
      the 128 x 64 tiles at 8 stages taken before (384x4096x6144 26.2 us against 35.6, cuBLASLt
      20.4; 896x1280x6144 26.0 against 33.8), 6 stages faster than 4 on nine of them by up to
      2.2% and slower on three by up to 1.3%. Checked on six grids of 72-108 tiles chosen after
      (BLOCK_PART_GRID_CHECK): 1.27-1.63x the 128 x 64 tiles (320x4608x5120 24.7 us against 40.3,
      cuBLASLt 18.2), within 0.6% of 4 stages where those were faster (one shape). The first fit,
      on an H200 before the descriptors were built by addition, had every cluster and 6 stages
      within 5% of 4 stages without a cluster (results/h200/probe-fp8-configs.txt).
    - Block scaling past half the SMs' worth of 128 x 128 tiles, with A's scales loaded by TMA
      on a ring beside the stages (RING=1; 6 stages and the ring exceed the block's shared
      memory): 5 stages, no cluster. One H200, alternating rounds: on four full grids (RING_PROBE)
      1.11-1.22x the 4 stages in place that the rule took before (6144x3072x8192 287 us against
      351; 8192x4096x2048 140.6 against 156.7, 0.5% behind 4 stages in a 1 x 2 cluster with the
      ring), the fastest of ours on the other three; on three grids of 90-108 tiles
      (RING_PART_GRID_PROBE) 1.13-1.15x the 6 stages in place taken before (384x4096x6144 21.6 us
      against 24.9, cuBLASLt 20.4), 4 stages with the ring 1.4-3.2% behind. Checked on six shapes
      chosen after (RING_CHECK, the rule against the same tiles in place): faster on all six,
      1.09-1.15x on the three of 99-960 tiles, 1.01-1.02x on the three small ones; on the H100
      (RING_H100_PROBE) 1.12-1.20x the 4 stages in place on four grids.
    - Fewer tiles, deep K: split-K over 128 x 128 tiles, all units resident (not measured); in
      block scaling with A's scales on the ring at 5 stages: on the H100, alternating rounds, on
      four such grids of neither corpus set (RING_SPLIT_PROBE) 1.16-1.23x the same split in place
      at 6 stages (1024x1024x16384 35.3 us against 43.3, cuBLASLt 34.8).
    - Else 128 x 64 tiles, 8 stages (128x7168x2048: within 2% of the best configuration); in block
      scaling 6 stages with the ring (the 8 stages and the ring exceed the block's shared memory):
      1.05x and 1.16x the 8 stages in place at 96x5120x3072 and 128x6144x2560 (RING_SMALL_PROBE)."""
    m, n, k = problem.m, problem.n, problem.k
    packed = k % 16 != 0  # rows of codes TMA cannot read in place are packed first: nothing for PDL to overlap
    pdl = {} if packed else {"PDL": 1}
    overlapped = {"PROMOTE": 2}
    block = problem.scaling == "block"
    ring = {"RING": 1} if block else {}
    if m <= 64:
        small = {"BN": 64, "CONSUMERS": 1, "STAGES": 6, **overlapped, **ring}
        units = ceil_div(n, 64)
        splits = min(2, 2 * rungs.SMS // units, k // 2048)  # two one-consumer CTAs an SM
        if splits >= 2:
            return ({**small, "SPLITS": splits},
                    f"M = {m}: {units} tiles of 64x64 (one consumer), {splits}-way split-K")
        return {**small, **pdl}, f"M = {m}: {units} tiles of 64x64 (one consumer, two CTAs an SM)"
    tiles = ceil_div(m, 128) * ceil_div(n, 128)
    if block and tiles >= SIX_STAGE_MIN_TILES:
        return ({"STAGES": 5, **ring, **overlapped, **pdl},
                f"{tiles} tiles of 128x128, 5 stages, A's block scales on a ring"
                + (", PDL" if pdl else ", packed operands")
                + f" (H200: 6144x3072x8192 287 us against 351 for 4 stages in place; {RING_PROBE})")
    if tiles >= SIX_STAGE_MIN_TILES:
        waves = tiles > rungs.SMS  # past one wave: 1 x 2 clusters sharing A
        measured = (f"4608x4608x6144 row 211 us against 244 unclustered at 4 stages; {FULL_GRID_PROBE}" if waves
                    else f"384x4096x6144 row 20.2 us against 27.5 for 128x64 tiles; {PART_GRID_PROBE}")
        return ({"STAGES": 6, **({"CN": 2} if waves else {}), **overlapped, **pdl},
                f"{tiles} tiles of 128x128, 6 stages" + (", 1 x 2 clusters sharing A" if waves else "")
                + (", PDL" if pdl else ", packed operands") + f" (H100: {measured})")
    splits = min(4, rungs.SMS // tiles, k // 4096)  # every slice >= 4096 of K, every unit resident
    if splits >= 2:
        return ({"SPLITS": splits, **({"STAGES": 5} if block else {}), **ring, **overlapped},
                f"{tiles} tiles of 128x128, deep K: {splits}-way split-K"
                + (f", A's block scales on a ring (H100: 1024x1024x16384 35.3 us against 43.3 in place; "
                   f"{RING_SPLIT_PROBE})" if block else " (not measured)"))
    stages = 6 if block else 8  # 8 stages and the ring exceed the block's shared memory
    return ({"BN": 64, "STAGES": stages, **ring, **overlapped, **pdl},
            f"{tiles} tiles of 128x128: {ceil_div(m, 128) * ceil_div(n, 64)} of 128x64, {stages} stages"
            + (", A's block scales on a ring" if block else ""))


# ---------------------------------------------------------------- the spec
@dataclass(frozen=True)
class Fp8Spec(LinearSpec):
    """A KernelSpec of scaled FP8 problems: ``validate`` sets SCALING, OUT, EPI and TYPES from the
    problem (a given value that differs is refused, as kernels/linear.py's LinearSpec does), so the
    resolved tunables name the build that computes it; ``scalings`` and ``fp8_types`` are the
    modes and formats it takes (kernels/target.py), ``probe`` a problem it computes."""

    scalings: tuple[str, ...] = _fp8.SCALINGS
    fp8_types: tuple[str, ...] = FP8_TYPES

    def fixed_tunables(self, problem: GemmProblem) -> dict[str, int]:
        return problem_tunables(problem)

    def fixed_by(self, problem: GemmProblem) -> str:
        return (f"scaling {problem.scaling}, out {problem.out_dtype}, epilogue {problem.epilogue}, "
                f"fp8_types {problem.fp8_types}")

    def validate(self, problem: GemmProblem, overrides: Mapping[str, int] | None = None) -> dict[str, int]:
        check_capabilities(self, problem)
        if (why := fp8_rule(problem, self.precision)) is not None:
            raise UnsupportedProblem(f"{self.name}: {why}")
        return super().validate(problem, overrides)

    def probe(self, m: int, n: int, k: int, tunables: Mapping[str, int] | None = None) -> GemmProblem:
        t = {**{tn.name: tn.default for tn in self.tunables}, **(tunables or {})}
        return GemmProblem(m, n, k, trans_b=True, out_dtype=geo.OUT_DTYPE[t["OUT"]],
                           epilogue={code: name for name, code in geo.EPILOGUE_CODE.items()}[t["EPI"]],
                           scaling=SCALING_NAME[t["SCALING"]], fp8_types=FP8_TYPES[t["TYPES"]])


def _grid(p: GemmProblem, t) -> tuple[int, int, int]:
    g = _geometry(t)  # the most CTAs that find work: the recipe launches min(this, what can be resident)
    return g.cluster * geo.work_units(p, g, t["SPLITS"]), 1, 1


def hopper_fp8() -> Fp8Spec:
    rungs.SELECTORS[NAME] = select  # entry_geometry() answers for it as for the other Hopper rungs
    return Fp8Spec(
        name=NAME,
        description="FP8 (nt; e4m3 or e5m2 A and B), tensor/row/block FP32 scales, partial sums promoted to FP32 "
                    "every 128 of K; any_shape's schedule: split-K, packing, TMA stores, clusters; swapped-roles "
                    "decode tiles at small M (tunables chosen per shape)",
        source=SOURCE, entry=f"hopper_fp8<{{BN}}, {{STAGES}}, {{CONSUMERS}}, {TEMPLATE}, {{RING}}>",
        precision=PRECISION,
        tunables=TUNABLES,
        rules=(rungs._k_at_least_one, _promotion_fits, _block_scales_promote, _ring_of_block_scales, _decode_shape,
               rungs._fits(_geometry)),
        block=lambda t: (_geometry(t).threads, 1, 1), grid=_grid, dynamic_smem=lambda t: _geometry(t).smem,
        signature=SIGNATURE, extra_entries=ENTRIES, launch_recipe=fp8_recipe, choose=choose_fp8,
        gemm_entry=lambda t: select(PRECISION, t)[0],
        layouts=("nt",), out_dtypes=OUT_DTYPES, epilogues=tuple(geo.EPILOGUE_CODE),
        # block scaling (two accumulators), row scaling with BF16 D + GELU on 64-row tiles in a 1 x 2
        # cluster, the unpromoted 128 x 256 variant, the overlapped promotion (three accumulators) at
        # its largest, with the 1 x 2 clusters and 6 stages of choose's full grids: what the spill
        # gate sees beside the default
        checked=({"SCALING": 2}, {"SCALING": 1, "OUT": 1, "EPI": 3, "CONSUMERS": 1, "STAGES": 4, "CN": 2},
                 {"PROMOTE": 0, "BN": 256, "STAGES": 4},
                 {"PROMOTE": 2, "SCALING": 2, "OUT": 1, "EPI": 3, "STAGES": 6, "CN": 2},
                 {"PROMOTE": 2, "BN": 64, "CONSUMERS": 1, "STAGES": 6, "SCALING": 2}),
        **rungs.ARCH)


SPECS = (hopper_fp8(),)
