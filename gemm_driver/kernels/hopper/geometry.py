"""The host contract of the Hopper kernels (cu/hopper/), as numbers: pure, no GPU needed.

Each .cu file's header states what its kernel needs from the host: tile shape, threads, dynamic
shared memory (the Config structs' SMEM_BYTES), the TMA box of each operand, the grid, the
extra arguments, split-K scratch. ``Geometry`` holds that for one entry point; the functions
below size grids, scratch and packing passes from it. The launch recipes (recipe.py) and the
rules (rungs.py) use only these, so the tests can check every number without a GPU.

Terms: BM x BN is a CTA's tile of C, BK the k extent of one 128-byte swizzle row (64 2-byte
elements, 32 tf32, 128 fp8). A persistent kernel walks *work units* (a tile, or a cluster's CM x CN
block of tiles, times the split-K slices of its k range); every CTA of its grid must be
resident at once, because split-K slices of one tile may wait for each other.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...cuda.arch_limits import limits
from ...cuda.tensor_map import tma_layout_problem
from ...problem import GemmProblem
from .. import linear, transposing
from ..spec import MAX_GRID, Dims, ceil_div

BM = 128  # tile rows of rungs 1-4 (two consumer warpgroups of 64)
SWIZZLE = 128  # bytes: every tensor map, as the wgmma descriptors assume
SM_90 = limits("sm_90")  # these kernels run on sm_90a only
SMEM_LIMIT = SM_90.max_shared_per_block  # opt-in dynamic shared memory per block (227 KiB)
SMEM_PER_SM = SM_90.shared_per_sm  # of which the system reserves 1 KiB per resident block
STAGING_BYTES = 64 * 40 * 4  # one consumer's epilogue staging (store_staged: 64 rows x 40 floats)
STORE_CHUNK = (64, 32)  # rows x columns of C in one TMA store (store_tma): one 8 KiB staging buffer
STORE_CHUNK_BYTES = STORE_CHUNK[0] * STORE_CHUNK[1] * 4  # FP32; a 16-bit C uses half of it
MAX_GRID_Y = MAX_GRID[1]
PACK_THREADS = 256  # pack_rows and pack_transpose are __launch_bounds__(256)
TRANSPOSE_TILE = transposing.TILE  # pack_transpose's tiles (cu/common/pack_transpose.cuh)

ITEMSIZE = {"bf16": 2, "fp16": 2, "tf32": 4, "fp8": 1}  # A and B in memory (tf32 is FP32 storage, fp8 e4m3 codes)
ELEMENT = {"bf16": "hopper::bf16_t", "fp16": "hopper::fp16_t", "tf32": "hopper::tf32_t",
           "fp8": "hopper::e4m3_t"}  # hopper_common.cuh
STORAGE = {"bf16": "unsigned short", "fp16": "unsigned short", "tf32": "float",
           "fp8": "unsigned char"}  # pack kernels' T
# any_shape's template arguments for D's type and the epilogue (common/epilogue.cuh's codes)
OUT_CODE, EPILOGUE_CODE, OUT_DTYPE = linear.OUT_CODE, linear.EPILOGUE_CODE, linear.OUT_DTYPE
OUT_ITEMSIZE = {"fp32": 4, "bf16": 2, "fp16": 2}


def store_swizzle(out_dtype: str) -> int:
    """The swizzle of C's TMA-store map: a 64 x 32 chunk's rows are 32 elements, 128 bytes of
    FP32 (128-byte swizzle) or 64 bytes of a 16-bit type (64-byte swizzle; chunk_offset in
    hopper_epilogue.cuh writes the staging buffer in the same pattern)."""
    return 32 * OUT_ITEMSIZE[out_dtype]


def k_tile(precision: str) -> int:
    """BK: the elements of one 128-byte swizzle row (KTile<Elem>::BK)."""
    return 128 // ITEMSIZE[precision]


# ---------------------------------------------------------------- shared memory (SMEM_BYTES)
def ring_smem(stages: int, bn: int, barriers_per_stage: int) -> int:
    """Rungs 1 (one full barrier a stage) and 2 (full + empty): 128 x BN tiles + 1 KiB alignment."""
    return stages * (BM * 128 + bn * 128) + 8 * barriers_per_stage * stages + 1024


def ctas_per_sm_of(consumers: int) -> int:
    """Resident CTAs an SM a persistent kernel is built for: two with one consumer warpgroup."""
    return 2 if consumers == 1 else 1


def store_buffers(consumers: int) -> int:
    """TMA-store staging buffers a consumer cycles through (Config::STORE_BUFFERS)."""
    return 2 if consumers == 2 else 1


def persistent_ring(stages: int, bn: int, consumers: int, nsplit: int = 1) -> int:
    """persistent_body.cuh's ring: STAGES x (BM = 64 * CONSUMERS / NSPLIT rows of A + BN of B,
    128 bytes each)."""
    return stages * (64 * consumers // nsplit * 128 + bn * 128)


def persistent_smem(stages: int, bn: int, consumers: int, tma_store: bool = False, nsplit: int = 1) -> int:
    """persistent_body.cuh: the ring, the barriers (in 256 bytes, or 1024 so that TMA-store
    buffers are 1024-byte aligned), each consumer's staging, alignment."""
    staging = STAGING_BYTES
    if tma_store:
        staging = max(staging, store_buffers(consumers) * STORE_CHUNK_BYTES)
    return persistent_ring(stages, bn, consumers, nsplit) + (1024 if tma_store else 256) + consumers * staging + 1024


def fp8_scale_ring_bytes(stages: int, bm: int, ring: int) -> int:
    """fp8_body.cuh's ScaleRing: with RING = 1, BM floats of A's block scales a ring slot, past the
    Config's shared memory."""
    return stages * bm * 4 if ring else 0


def register_a_smem(stages: int, bm: int = 256, consumers: int = 2) -> int:
    """tf32_register_a.cu: BM rows of A + 32 k x 64 n per consumer of B, 128 bytes a row, a stage
    (256 x 128 tiles: 32 + 16 KiB)."""
    return stages * (bm * 128 + 64 * consumers * 128) + 16 * stages + 16 + 1024  # + barriers, split-K flag


# decode_body.cuh's ring: as many stages of MT x BK of A and BK x 64*CONSUMERS of B as the SM's
# shared memory holds for its CTAs, at most DECODE_MAX_STAGES (the deepest ring measured).
DECODE_MAX_STAGES = 12
DECODE_OVERHEAD = 256 + 1024  # barriers, alignment


def decode_stages(mt: int, consumers: int) -> int:
    """Config::STAGES of decode_body.cuh."""
    budget = SMEM_PER_SM // ctas_per_sm_of(consumers) - 1024
    return min(DECODE_MAX_STAGES, (budget - DECODE_OVERHEAD) // ((mt + 64 * consumers) * 128))


def decode_smem(mt: int, consumers: int) -> int:
    """Config::SMEM_BYTES of decode_body.cuh."""
    return decode_stages(mt, consumers) * (mt + 64 * consumers) * 128 + DECODE_OVERHEAD


def smem_fits(smem: int, ctas_per_sm: int) -> str | None:
    """Why ``ctas_per_sm`` CTAs of ``smem`` bytes cannot be resident on one SM, or None."""
    if smem > SMEM_LIMIT:
        return f"{smem} bytes of shared memory per block; sm_90 allows at most {SMEM_LIMIT} ({SMEM_LIMIT // 1024} KiB)"
    if ctas_per_sm * (smem + 1024) > SMEM_PER_SM:
        return (f"{ctas_per_sm} CTAs per SM of {smem} bytes (+ 1 KiB reserved each) exceed the "
                f"{SMEM_PER_SM} bytes of shared memory an SM has")
    return None


# ---------------------------------------------------------------- one entry point
@dataclass(frozen=True)
class Geometry:
    """What the host must know of one entry point. Boxes are (rows, cols) in elements of the
    operand's tensor map: A is M x K; B is K x N, or N x K when ``b_transposed`` (tf32 rungs
    1-4, whose wgmma reads 32-bit B only K-major, take B^T from a transposed scratch copy).
    ``trans_a`` / ``trans_b`` (any_shape's layouts): the operand is stored transposed and its
    map is over the stored matrix, A as K x M, B as N x K. ``out_dtype``: C's element type."""

    bm: int
    bn: int
    bk: int
    threads: int
    smem: int
    a_box: tuple[int, int]
    b_box: tuple[int, int]
    cm: int = 1
    cn: int = 1
    b_transposed: bool = False
    persistent: bool = False
    ctas_per_sm: int = 1
    arguments: str = "plain"  # "plain", "group" (+ group_m) or "split" (+ group_m, splits, workspace, counters)
    tma_store: bool = False  # + c_map, c_tma, bias: C stored by TMA where its rows allow (any_shape's EPILOGUE 3)
    trans_a: bool = False
    trans_b: bool = False
    out_dtype: str = "fp32"
    ck: int = 1  # CTAs of a cluster that split each tile's K among them (any_shape's cluster entry)
    pingpong: bool = False  # any_shape's PINGPONG: the two consumers take turns on whole tiles, none split
    nsplit: int = 1  # any_shape's NSPLIT: 2 = the two consumers split a 64-row tile's columns, none split over K
    # the decode tiles' SWAP_MN: the entry computes the problem with M and N exchanged (kernel_problem),
    # reading B's map as its A and A's as its B; trans_a and trans_b are then that problem's
    swap_mn: bool = False

    @property
    def cluster(self) -> int:
        """CTAs a cluster launches: CM x CN sharing tiles by multicast, or CK splitting K."""
        return self.cm * self.cn * self.ck


def tiled(precision: str, bn: int, stages: int, *, warp_specialized: bool) -> Geometry:
    """Rungs 1 (wgmma_tma.cu, one warpgroup) and 2 (warp_specialized.cu, 3 warpgroups): one CTA
    per 128 x BN tile; A box {BK, 128}; B box {64, BK} (N-major) or B^T box {BK, BN} (tf32)."""
    bk, tf32 = k_tile(precision), precision == "tf32"
    return Geometry(bm=BM, bn=bn, bk=bk, threads=384 if warp_specialized else 128,
                    smem=ring_smem(stages, bn, 2 if warp_specialized else 1), a_box=(BM, bk),
                    b_box=(bn, bk) if tf32 else (bk, 64), b_transposed=tf32)


def persistent(precision: str, bn: int, stages: int, cm: int = 1, cn: int = 1, consumers: int = 2,
               arguments: str = "group", tma_store: bool = False, *, trans_a: bool = False,
               trans_b: bool = False, out_dtype: str = "fp32", ck: int = 1, pingpong: bool = False,
               nsplit: int = 1) -> Geometry:
    """Rungs 3-5 (persistent_body.cuh): 64*CONSUMERS x BN tiles; with a CM x CN cluster each CTA
    loads 1/CN of the A tile and 1/CM of the B tile and multicasts them; with CK > 1 the CK CTAs
    of a cluster compute k ranges of one tile (a unit is a tile; the grid launches CK CTAs a
    unit, no workspace). Boxes, as (rows, cols)
    of the stored matrix: A {BM/CN m, BK} K-major, or {BK/CN k, 64 m} (BM/64 of them) when A is
    stored K x M; B {BK/CM k, 64 n} (BN/64 of them) N-major, or {BN/CM n, BK} when B is stored
    N x K. TF32's wgmma reads B only K-major: B stored K x N is copied transposed first
    (``b_transposed``); B stored N x K is read as it is. ``pingpong``: the same tiles and ring,
    each consumer computing whole tiles in turn (BM = 128 rows a consumer). ``nsplit`` = 2: 64 x BN
    tiles, the two consumers each BN/2 of the columns."""
    bk, tf32, bm = k_tile(precision), precision == "tf32", 64 * consumers // nsplit
    return Geometry(bm=bm, bn=bn, bk=bk, threads=128 * (consumers + 1),
                    smem=persistent_smem(stages, bn, consumers, tma_store, nsplit),
                    a_box=(bk // cn, 64) if trans_a else (bm // cn, bk),
                    b_box=(bn // cm, bk) if tf32 or trans_b else (bk // cm, 64), cm=cm, cn=cn,
                    b_transposed=tf32 and not trans_b,
                    persistent=True, ctas_per_sm=ctas_per_sm_of(consumers), arguments=arguments,
                    tma_store=tma_store, trans_a=trans_a, trans_b=trans_b, out_dtype=out_dtype, ck=ck,
                    pingpong=pingpong, nsplit=nsplit)


def cluster_split_bytes(bn: int, consumers: int, ck: int) -> int:
    """Shared memory a CTA of a CK-cluster receives partials in (ClusterSplit::BYTES): a slot
    per other CTA, each holding the CTA's own share of the tile's 32-column chunks (at most
    ceil(BN/32 / CK) of them) of FP32; the kernel puts it in the ring (``persistent_ring``),
    which must hold it."""
    return (ck - 1) * consumers * 64 * 32 * ceil_div(bn // 32, ck) * 4


def decode(precision: str, mt: int, consumers: int, *, trans_a: bool = False, trans_b: bool = False,
           out_dtype: str = "fp32", cm: int = 1, cn: int = 1, pingpong: bool = False,
           swap_mn: bool = False) -> Geometry:
    """decode_body.cuh: MT (m) x 64*CONSUMERS (n) tiles of C, computed as C^T (wgmma's A = the B
    tile); A box {MT/CN m, BK} (A stored K x M, MT = 64: {BK k, 64 m}), B boxes as
    ``persistent``'s for BN = 64*CONSUMERS (with CM = 2 tile rows in a cluster each CTA loads half
    the B tile and multicasts it, with CN = 2 tile columns half the A tile); any_shape's arguments
    (split-K, the tail), C stored from registers. ``pingpong``: each of the two consumers computes
    whole tiles in turn (none split). ``swap_mn``: of the problem with M and N exchanged
    (``kernel_problem``), whose layouts ``trans_a`` and ``trans_b`` are."""
    bk, bn = k_tile(precision), 64 * consumers
    return Geometry(bm=mt, bn=bn, bk=bk, threads=128 * (consumers + 1), smem=decode_smem(mt, consumers),
                    a_box=(bk // cn, 64) if trans_a else (mt // cn, bk),
                    b_box=(bn // cm, bk) if trans_b else (bk // cm, 64), cm=cm, cn=cn,
                    persistent=True, ctas_per_sm=ctas_per_sm_of(consumers), arguments="split", tma_store=True,
                    trans_a=trans_a, trans_b=trans_b, out_dtype=out_dtype, pingpong=pingpong, swap_mn=swap_mn)


def exchanged(problem: GemmProblem) -> GemmProblem:
    """The problem with M and N exchanged, D^T = op(B)^T op(A)^T: op(B)^T is its A, stored
    transposed where B is not, and op(A)^T its B, likewise. The bias stays D's (along the
    exchanged problem's rows)."""
    return replace(problem, m=problem.n, n=problem.m, trans_a=not problem.trans_b, trans_b=not problem.trans_a)


def kernel_problem(problem: GemmProblem, g: Geometry) -> GemmProblem:
    """The problem ``g``'s entry computes: ``problem``, or with ``swap_mn`` its exchange."""
    return exchanged(problem) if g.swap_mn else problem


def register_a(stages: int, cm: int = 1, cn: int = 1, bm: int = 256, consumers: int = 2) -> Geometry:
    """tf32_register_a.cu: BM (m) x 64 * CONSUMERS (n) tiles over B as it is; A box {32, BM/CN},
    B box {32 n, 32/CM k} (BN/32 boxes of 32 n a stage); one consumer: two CTAs an SM."""
    return Geometry(bm=bm, bn=64 * consumers, bk=32, threads=128 * (consumers + 1),
                    smem=register_a_smem(stages, bm, consumers), a_box=(bm // cn, 32), b_box=(32 // cm, 32), cm=cm,
                    cn=cn, persistent=True, ctas_per_sm=ctas_per_sm_of(consumers), arguments="split")


# ---------------------------------------------------------------- grids
def tile_grid(problem: GemmProblem, g: Geometry) -> Dims:
    """Rungs 1 and 2: (ceil(N/BN), ceil(M/BM)), blockIdx.x along N."""
    return ceil_div(problem.n, g.bn), ceil_div(problem.m, g.bm), 1


def effective_splits(k: int, bk: int, splits: int) -> int:
    """The kernel keeps at least one k tile per slice: max(1, min(splits, ceil(K/BK)))."""
    return max(1, min(splits, ceil_div(k, bk)))


def super_tiles(problem: GemmProblem, g: Geometry) -> int:
    """Cluster blocks of tiles (CM tile rows x CN tile columns) a persistent kernel walks."""
    return ceil_div(ceil_div(problem.m, g.bm), g.cm) * ceil_div(ceil_div(problem.n, g.bn), g.cn)


def work_units(problem: GemmProblem, g: Geometry, splits: int = 1) -> int:
    """Units of a persistent kernel (hopper_pws::Schedule) when every tile is cut into
    ``splits`` slices: cluster blocks of tiles x slices. (A tail split, ``split_plan``, adds
    units only where the grid already holds more super tiles than can be resident.)"""
    return super_tiles(problem, g) * effective_splits(problem.k, g.bk, splits)


def persistent_grid(units: int, resident_clusters: int, cluster: int) -> int:
    """CTAs to launch: whole clusters, no more than can be resident at once (split-K slices of a
    tile that all run at once wait for each other, so an unscheduled peer would hang them) and
    no more than there are units (a CTA without a unit would only exit)."""
    return cluster * max(1, min(resident_clusters, units))


def fallback_resident_clusters(sm_count: int, ctas_per_sm: int, cluster: int) -> int:
    """Resident clusters when the driver cannot be asked: exact on the H100 for clusters of 1
    and 2 (132 SMs, 66 two-CTA clusters, as measured), an upper bound for larger ones."""
    return max(1, sm_count * ctas_per_sm // cluster)


# ---------------------------------------------------------------- split-K
TAIL_MIN_K_TILES = 8  # the fewest k tiles a tail range keeps: a shorter one saves less than its hand-over costs


@dataclass(frozen=True)
class Split:
    """How a persistent kernel cuts its ``tiles`` super tiles into units (hopper_pws::Schedule's
    arguments): the first ``whole`` of the grouped order one unit each, every later one
    ``splits`` k ranges."""

    tiles: int
    splits: int = 1
    whole: int = 0

    @property
    def units(self) -> int:
        return self.whole + (self.tiles - self.whole) * self.splits


def split_plan(problem: GemmProblem, g: Geometry, splits: int, tail: int, resident_clusters: int) -> Split:
    """SPLITS > 1 cuts every tile (whole = 0: split-K on a small grid). Else, with TAIL >= 2 and
    more super tiles than resident clusters, the last wave's tiles (tiles mod resident, when
    that wave is partial) are cut into as many ranges as that wave's idle clusters can run, at
    most TAIL, each keeping >= TAIL_MIN_K_TILES k tiles; the full waves before them run whole.
    The last wave then takes about 1/ranges of a tile's time instead of a whole tile's."""
    tiles = super_tiles(problem, g)
    s = effective_splits(problem.k, g.bk, splits)
    if s > 1:
        return Split(tiles, s)
    resident_clusters = max(1, resident_clusters)  # as persistent_grid (0: a kernel that fits nowhere)
    rest = tiles % resident_clusters
    if tail < 2 or tiles <= resident_clusters or rest == 0:
        return Split(tiles)
    s = min(tail, resident_clusters // rest, ceil_div(problem.k, g.bk) // TAIL_MIN_K_TILES)
    return Split(tiles, s, tiles - rest) if s >= 2 else Split(tiles)


def split_scratch(g: Geometry, split: Split) -> tuple[int, int]:
    """(partial-sum workspace bytes, zeroed counter bytes) of a persistent kernel's split-K;
    (0, 0) when it will not split. Each split tile (counting a cluster's tiles past the edge)
    stores ``splits`` whole BM x BN FP32 partials; every tile has two int counters (count,
    generation), indexed by its position in the padded grid."""
    if split.splits == 1:
        return 0, 0
    padded = split.tiles * g.cluster  # the super tiles' CTAs' tiles, past the edge included
    return (split.tiles - split.whole) * g.cluster * split.splits * g.bm * g.bn * 4, padded * 2 * 4


# ---------------------------------------------------------------- packing
@dataclass(frozen=True)
class Pack:
    """One packing pass (pack.cuh) of a rows x cols row-major source with leading dimension
    ``ld_src`` into scratch with leading dimension ``ld`` (packed_ld: a multiple of 128 bytes):
    ``pack_rows`` keeps the layout, ``pack_transpose`` writes the cols x rows transpose."""

    kernel: str
    rows: int
    cols: int
    ld_src: int
    ld: int
    itemsize: int
    reason: str

    @property
    def out_rows(self) -> int:
        return self.cols if self.kernel == "pack_transpose" else self.rows

    @property
    def out_cols(self) -> int:
        return self.rows if self.kernel == "pack_transpose" else self.cols

    @property
    def nbytes(self) -> int:
        return self.out_rows * self.ld * self.itemsize

    @property
    def grid(self) -> Dims:
        if self.kernel == "pack_transpose":  # 32 x 32 tiles of the source
            return ceil_div(self.cols, TRANSPOSE_TILE), ceil_div(self.rows, TRANSPOSE_TILE), 1
        chunks = self.rows * (self.ld * self.itemsize // 16)  # 16-byte chunks of the packed rows: a thread each
        return ceil_div(chunks, PACK_THREADS), 1, 1


PACKED_ROW_BYTES = 128  # a packed row's pitch: L2's line, not only TMA's 16 bytes


def packed_ld(cols: int, itemsize: int) -> int:
    """The smallest leading dimension >= cols whose rows are whole PACKED_ROW_BYTES multiples.
    TMA needs 16; rows 16 bytes off a 32-byte multiple read slowly (``rungs.unaligned_rows``).
    H100, chosen tiles, shapes of neither corpus set (tools/probes/packed_pitch.py,
    results/h100-80gb-hbm3/probe-packed-pitch.txt): 1.14-1.32x faster than at a 16-byte pitch
    where that left A or B off a 32-byte multiple (6007x2501x3001 192.1 us against 252.9),
    within the probe's 4% elsewhere; a 32-byte pitch gained less (207.7 us)."""
    per = PACKED_ROW_BYTES // itemsize
    return ceil_div(cols, per) * per


def pack_for(address: int, ld: int, rows: int, cols: int, precision: str, *, transpose: bool = False) -> Pack | None:
    """The packing pass an operand needs before TMA can read it, or None. A transposed operand
    (tf32 B for rungs 1-4) is always copied; any other only when ``tma_layout_problem`` says
    its base or row stride breaks TMA's 16-byte rules."""
    itemsize = ITEMSIZE[precision]
    if transpose:
        return Pack("pack_transpose", rows, cols, ld, packed_ld(rows, itemsize), itemsize,
                    "tf32 wgmma reads B only K-major: B^T is written to scratch")
    reason = tma_layout_problem(address, ld, precision)
    if reason is None:
        return None
    return Pack("pack_rows", rows, cols, ld, packed_ld(cols, itemsize), itemsize, reason)
