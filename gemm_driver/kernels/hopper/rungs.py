"""The Hopper rungs as KernelSpecs: tunables, rules, entries, geometry; one ladder per precision.

Each rung is one cu/hopper file (its opening comment says what it changes and what it measured
on the H100); the defaults are what measured best there. BF16 and FP16 share every kernel
(the element type is a template argument). TF32 rungs 1-4 are the same kernels reading B^T
from a transposed scratch copy; the TF32 ladder ends with tf32_register_a.cu, which needs no
copy of B. The last BF16/FP16 rung, ``hopper_*``, runs any_shape.cu, the swapped-roles
cluster kernel of cluster_multicast.cu and, at small M, decode_body.cuh's tiles (DECODE), and
its ``choose`` hook picks tiles, split-K and cluster per shape (``choose_any_shape``).

Runtime arguments that are tunables (GROUP_M, SPLITS, TAIL, STORE, PDL, and SWAPPED, which picks
the entry) do not appear in the name expression: they change no code, so they share one build.

The last BF16/FP16 rung also computes a linear layer: either operand stored transposed, D in
FP32 or the inputs' 16-bit type, bias then ReLU or GELU in the epilogue. Each of those changes
the kernel's code, so each is a template argument, carried as a tunable (OUT, EPI, TRANS_A,
TRANS_B) that the problem sets (``AnyShapeSpec``, a kernels/linear.py LinearSpec): a build per
combination that runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping

from ...cuda.arch_limits import MEASURED_SM_COUNT
from ...problem import GemmProblem
from ..spec import Entry, KernelSpec, Tunable, ceil_div
from ..linear import OUTPUT_TUNABLES, LinearSpec, output_tunables
from ..transposing import taking_layouts
from . import geometry as geo
from . import selection, tf32_selection
from .recipe import make_recipe

SIGNATURE = ("int", "int", "int", "float", "tensormap", "tensormap", "float", "ptr", "int")
GROUP_SIGNATURE = (*SIGNATURE, "int")  # + group_m
SPLIT_SIGNATURE = (*GROUP_SIGNATURE, "int", "int", "ptr", "ptr")  # + splits, whole, workspace, counters
STORE_SIGNATURE = (*SPLIT_SIGNATURE, "tensormap", "int", "ptr")  # + c_map, c_tma, bias (any_shape)
PACK_SIGNATURE = ("ptr", "long long", "int", "int", "ptr", "long long")  # src, ld_src, rows, cols, dst, ld_dst
PACK_PAIR_SIGNATURE = (*PACK_SIGNATURE * 2, "int")  # hopper::pack_rows: two operands, blocks0 (the first's blocks)
ARCH = dict(min_cc=(9, 0), arch_specific=True)
SMS = MEASURED_SM_COUNT  # ``choose`` sees a GPU's name, not its Device (cuda/arch_limits.py)
FULL_GRID = 0.9 * SMS  # ``choose``: enough tiles to call the grid full
TF32_WIDE_PROBE = "results/h100-80gb-hbm3/probe-tf32-small-m-wide-n.txt"  # tools/probes/tf32_small_m_choice.py --wide
TF32_MID_M_PROBE = "results/h100-80gb-hbm3/probe-tf32-mid-m.txt"  # tools/probes/tf32_mid_m.py
TF32_SPLIT_PDL_PROBE = "results/h100-80gb-hbm3/probe-split-pdl-tf32.txt"  # the "chosen+pdl" rows
# tools/probes/tf32_mid_m.py --two-a-sm: the split 64 x 128 tiles at 8 stages and at 4
TF32_SPLIT_STAGES_PROBES = ("results/h100-80gb-hbm3/probe-tf32-small-m-split-stages.txt",
                            "results/h100-80gb-hbm3/probe-tf32-small-m-split-stages-more.txt",
                            "results/h100-80gb-hbm3/probe-tf32-small-m-split-stages-check.txt",
                            "results/h100-80gb-hbm3/probe-tf32-small-m-split-stages-many.txt")
TF32_SMALL_M_SPLIT_CHECK = "results/h100-80gb-hbm3/probe-tf32-small-m-split-after.txt"

STAGES_DEFAULT = 4  # the last rung's
STAGES = lambda default, values=(2, 3, 4, 5, 6): Tunable("STAGES", default, values, "TMA ring depth (k tiles in flight)")
GROUP_M = Tunable("GROUP_M", 8, (1, 2, 4, 8, 16), "tile rows per group of the persistent raster (L2 reuse)")
SPLITS = Tunable("SPLITS", 1, (1, 2, 3, 4, 6, 8), "split-K slices per tile (summed in slice order: reproducible)")
CK = Tunable("CK", 1, (1, 2, 3, 4), "> 1: split-K inside clusters of CK CTAs, the partials added through "
             "distributed shared memory (no workspace, no tail split)")
TAIL = Tunable("TAIL", 4, (0, 2, 4), "with SPLITS=1 on a grid of more tiles than resident CTAs: split-K over the "
               "last, partial wave's tiles, at most TAIL ranges each (geometry.split_plan); 0: off; the swapped "
               "entry runs every tile whole")
PINGPONG = Tunable("PINGPONG", 0, (0, 1), "1: the two consumer warpgroups take turns on whole 128 x BN tiles "
                   "(BN <= 128; with DECODE, DECODE x 128 tiles), one's epilogue beside the other's k loop; 0: both "
                   "on each tile, 64 rows (columns with DECODE) each")
DECODE_ROWS = (8, 16, 32, 64)  # hopper_decode's tile rows at small M (DECODE's choices there)
DECODE_TRANSPOSED_ROWS = 64  # ... with A stored K x M: a k row of the tile one 128-byte swizzle atom
PINGPONG_ROWS = (128, 160)  # ... and its ping-pong tiles' on full grids (accumulators a thread: the rows)
DECODE_MIN_STAGES = 4  # decode_body.cuh's Config: the shallowest ring it runs
NSPLIT = Tunable("NSPLIT", 1, (1, 2), "2: 64 x BN tiles whose columns the two consumer warpgroups split, "
                 "each 64 x BN/2 (BN 128 or 256; whole tiles: SPLITS=1, no CK, no ping-pong); 1: as CONSUMERS says")
PDL = Tunable("PDL", 0, (0, 1), "1: programmatic dependent launch, the prologue overlapping the previous grid's tail")


# ---------------------------------------------------------------- rules
def _k_at_least_one(p: GemmProblem, t) -> str | None:
    if p.k == 0 and p.m and p.n:
        return "K = 0: the wgmma kernels need at least one k tile (C = beta * C is left to the host, as gemm() does)"
    return None


def _fits(geometry: Callable[[Mapping[str, int]], geo.Geometry]):
    def fits_shared_memory(p, t):
        g = geometry(t)
        return geo.smem_fits(g.smem, g.ctas_per_sm)

    return fits_shared_memory


def _transpose_grid(p: GemmProblem, t) -> str | None:
    rows = geo.MAX_GRID_Y * geo.TRANSPOSE_TILE
    if p.k > rows:
        return f"K = {p.k}: pack_transpose (B^T for tf32) covers at most {geo.MAX_GRID_Y} x 32 = {rows} rows of B"
    return None


def _swapped_shape(p: GemmProblem, t) -> str | None:
    if t["SWAPPED"] and (t["BN"], t["CONSUMERS"], t["STAGES"], t["SPLITS"]) != (256, 2, 4, 1):
        return ("SWAPPED=1 runs hopper_cluster_swapped: 128 x 256 tiles (BN=256, CONSUMERS=2), STAGES=4, "
                "no split-K (SPLITS=1)")
    if t["SWAPPED"] and any(t[name] for name in LINEAR):
        return "SWAPPED=1 (hopper_cluster_swapped) writes FP32 D from row-major A and B, with no epilogue"
    return None


def decode_tile_refusal(t, entry: str, stages_default: int) -> str | None:
    """Why ``t`` (DECODE > 0) asks decode_body.cuh's tiles (entry ``entry``) for a shape they do not
    have: their columns are 64 * CONSUMERS and their ring is as deep as fits. None: it does not."""
    if t["BN"] != 64 * t["CONSUMERS"] or t["STAGES"] != stages_default:
        return (f"DECODE={t['DECODE']} runs {entry}: tiles of 64 * CONSUMERS columns (BN=64 with "
                f"CONSUMERS=1, BN=128 with 2) and the deepest ring that fits (STAGES left at {stages_default})")
    return None


def decode_layout(t) -> tuple[int, int]:
    """(TRANS_A, TRANS_B) of the problem the decode tiles compute: the problem's, or with SWAP_MN
    those of its exchange (geometry.exchanged)."""
    if t.get("SWAP_MN"):
        return 1 - t["TRANS_B"], 1 - t["TRANS_A"]
    return t["TRANS_A"], t["TRANS_B"]


def decode_entry(t) -> str | None:
    """The decode tiles' entry a launch with ``t`` runs (hopper_decode and hopper_fp8_decode
    alike): "decode", "decode_cluster" in clusters (CM x CN > 1); None without DECODE."""
    if not t.get("DECODE"):
        return None
    return "decode_cluster" if t["CM"] * t["CN"] > 1 else "decode"


def _decode_shape(p: GemmProblem, t) -> str | None:
    if not t["DECODE"]:
        if t.get("SWAP_MN"):
            return "SWAP_MN=1 runs the decode tiles on the problem with M and N exchanged: it takes DECODE > 0"
        return None
    if (why := decode_tile_refusal(t, "hopper_decode", STAGES_DEFAULT)) is not None:
        return why
    if t["SWAPPED"] or t["DECODE"] < 8 * t["CN"]:
        return (f"DECODE={t['DECODE']} runs hopper_decode: clusters of CM=1 or 2 tile rows sharing B and CN=1, 2 or 4 "
                "tile columns sharing A, each CTA loading DECODE/CN rows of the A tile, a multiple of 8 (CN=2 with "
                "DECODE >= 16, CN=4 with DECODE >= 32), SWAPPED=0")
    if (stages := geo.decode_stages(t["DECODE"], t["CONSUMERS"])) < DECODE_MIN_STAGES:
        return (f"DECODE={t['DECODE']} with CONSUMERS={t['CONSUMERS']}: shared memory holds {stages} stages, "
                f"the decode tiles take at least {DECODE_MIN_STAGES}")
    if decode_layout(t)[0] and (t["DECODE"] != DECODE_TRANSPOSED_ROWS or t["CN"] > 1 or t.get("PINGPONG")):
        read = ("B stored K x N (layouts nn, tn) with SWAP_MN=1, as the exchanged problem's A"
                if t.get("SWAP_MN") else "A stored K x M (layouts tn, tt)")
        return (f"DECODE={t['DECODE']} (hopper_decode) reads {read} in tiles of "
                f"DECODE={DECODE_TRANSPOSED_ROWS} rows only, CN=1, PINGPONG=0: a k row of the tile one 128-byte "
                "swizzle atom")
    return None


def _cluster_split(p: GemmProblem, t) -> str | None:
    ck = t["CK"]
    if ck == 1:
        return None
    if t["CM"] * t["CN"] > 1 or t["SPLITS"] > 1 or t["SWAPPED"] or t["DECODE"]:
        return (f"CK={ck} splits K inside a cluster of CK CTAs: it takes CM=CN=1, SPLITS=1, "
                "SWAPPED=0 and DECODE=0")
    if t["BN"] > 192:
        return f"CK={ck} takes BN <= 192: beside 256 columns of accumulators the hand-over spills registers"
    received = geo.cluster_split_bytes(t["BN"], t["CONSUMERS"], ck)
    ring = geo.persistent_ring(t["STAGES"], t["BN"], t["CONSUMERS"])
    if received > ring:
        return (f"CK={ck}: the {received} bytes of partials a CTA receives exceed its ring ({t['STAGES']} stages, "
                f"{ring} bytes): more STAGES or a smaller CK")
    return None


def _pingpong(p: GemmProblem, t) -> str | None:
    if not t.get("PINGPONG"):
        return None
    if t["DECODE"]:
        if t["DECODE"] not in PINGPONG_ROWS or t["CONSUMERS"] != 2 or t["SPLITS"] > 1:
            return (f"PINGPONG=1 with DECODE gives each of the two consumers (CONSUMERS=2, BN=128) whole tiles of "
                    f"DECODE rows, {' or '.join(map(str, PINGPONG_ROWS))} (DECODE accumulators a thread), none "
                    "split (SPLITS=1)")
        return None
    if t["CONSUMERS"] != 2 or t["BN"] > 128:
        return ("PINGPONG=1 gives each of the two consumers (CONSUMERS=2) a whole 128 x BN tile: it takes "
                "BN <= 128 (BN accumulators a thread)")
    if t["SPLITS"] > 1 or t["CK"] > 1 or t["SWAPPED"] or t["DECODE"]:
        return "PINGPONG=1 runs every tile whole: it takes SPLITS=1, CK=1, SWAPPED=0 and DECODE=0 (TAIL is not used)"
    return None


def _column_halves(p: GemmProblem, t) -> str | None:
    if t.get("NSPLIT", 1) == 1:
        return None
    if t["CONSUMERS"] != 2 or t["BN"] not in (128, 256):
        return "NSPLIT=2 gives each of two consumers (CONSUMERS=2) half a tile's columns: it takes BN 128 or 256"
    if t["SPLITS"] > 1 or t["CK"] > 1 or t["PINGPONG"] or t["SWAPPED"] or t["DECODE"]:
        return "NSPLIT=2 runs every tile whole: it takes SPLITS=1, CK=1, PINGPONG=0, SWAPPED=0 and DECODE=0"
    return None


def _one_consumer_tiles(p: GemmProblem, t) -> str | None:
    if t["CONSUMERS"] == 1 and t["BM"] != 128:
        return ("CONSUMERS=1 runs two CTAs an SM, 128 registers a thread at launch: it takes BM=128 "
                "(BM=256: m64n256's 128 accumulators do not fit)")
    if t["CONSUMERS"] == 1 and t["CM"] != 1:
        return "CONSUMERS=1 takes CM=1: at its 128 registers a thread, CM=2's multicast code spills"
    return None


def _one_consumer_columns(p: GemmProblem, t) -> str | None:
    if t["CONSUMERS"] == 1 and t["BN"] == 256 and not t["DECODE"]:
        return ("CONSUMERS=1 runs two CTAs an SM, 128 registers a thread at launch: it takes BN <= 192 "
                "(BN=256: m64n256's 128 accumulators do not fit)")
    return None


# ---------------------------------------------------------------- entries
def _pack_entries(precision: str, transpose: bool = False) -> tuple[Entry, ...]:
    rows = Entry("pack_rows", f"hopper::pack_rows<{geo.STORAGE[precision]}>", PACK_PAIR_SIGNATURE)
    if not transpose:
        return (rows,)
    return rows, Entry("pack_transpose", "pack_transpose<float>", PACK_SIGNATURE)  # cu/common/pack_transpose.cuh


# spec name -> select(precision, tunables) -> (entry that runs, its Geometry)
SELECTORS: dict[str, Callable[[str, Mapping[str, int]], tuple[str, geo.Geometry]]] = {}


def entry_geometry(spec: KernelSpec, tunables: Mapping[str, int]) -> tuple[str, geo.Geometry]:
    """Which of ``spec``'s loaded entries a launch with ``tunables`` runs, and its geometry."""
    return SELECTORS[spec.name](spec.precision, tunables)


def _spec(name: str, description: str, source: str, entry: str, precision: str, tunables, select, rules=(),
          spec_class: type[KernelSpec] = KernelSpec, **more) -> KernelSpec:
    """A Hopper spec: geometry, block, grid and shared memory all come from ``select``."""
    SELECTORS[name] = select
    geometry = lambda t: select(precision, t)[1]

    def grid(p: GemmProblem, t) -> tuple[int, int, int]:
        g = geometry(t)
        if not g.persistent:
            return geo.tile_grid(p, g)
        # the most CTAs that find work: the recipe launches min(this, what can be resident)
        return g.cluster * geo.work_units(geo.kernel_problem(p, g), g, t.get("SPLITS", 1)), 1, 1

    main = geometry({tn.name: tn.default for tn in tunables})  # the main entry's arguments and B layout
    return spec_class(
        name=name, description=description, source=source, entry=entry, precision=precision,
        tunables=tuple(tunables),
        rules=(_k_at_least_one, _fits(geometry), *rules, *((_transpose_grid,) if main.b_transposed else ())),
        block=lambda t: (geometry(t).threads, 1, 1), grid=grid, dynamic_smem=lambda t: geometry(t).smem,
        signature=STORE_SIGNATURE if main.tma_store else
        {"plain": SIGNATURE, "group": GROUP_SIGNATURE, "split": SPLIT_SIGNATURE}[main.arguments],
        launch_recipe=make_recipe(select), gemm_entry=lambda t: select(precision, t)[0], **ARCH, **more)


def wgmma_tma(precision: str) -> KernelSpec:
    select = lambda precision, t: ("main", geo.tiled(precision, t["BN"], t["STAGES"], warp_specialized=False))
    return _spec(
        f"wgmma_tma_{precision}",
        "rung 1: wgmma from shared memory fed by TMA through an mbarrier ring, one warpgroup per 128 x BN tile"
        + (" (B^T packed first)" if precision == "tf32" else ""),
        "cu/hopper/wgmma_tma.cu", f"hopper_wgmma_tma<{geo.ELEMENT[precision]}, {{BN}}, {{STAGES}}>", precision,
        (Tunable("BN", 128, (64, 128), "tile columns (wgmma N); 256 would need 256 accumulators a thread"),
         STAGES(3)),
        select, extra_entries=_pack_entries(precision, precision == "tf32"), checked=({"BN": 64, "STAGES": 4},))


def warp_specialized(precision: str) -> KernelSpec:
    select = lambda precision, t: ("main", geo.tiled(precision, t["BN"], t["STAGES"], warp_specialized=True))
    return _spec(
        f"warp_specialized_{precision}",
        "rung 2: a TMA producer warpgroup and two wgmma consumer warpgroups (setmaxnreg 40/232), empty/full "
        "mbarrier rings" + (" (B^T packed first)" if precision == "tf32" else ""),
        "cu/hopper/warp_specialized.cu", f"hopper_warp_specialized<{geo.ELEMENT[precision]}, {{BN}}, {{STAGES}}>",
        precision, (Tunable("BN", 256, (128, 256), "tile columns (wgmma N)"), STAGES(3)),
        select, extra_entries=_pack_entries(precision, precision == "tf32"), checked=({"BN": 128, "STAGES": 6},))


def persistent(precision: str) -> KernelSpec:
    select = lambda precision, t: ("main", geo.persistent(precision, t["BN"], t["STAGES"]))
    return _spec(
        f"persistent_{precision}",
        "rung 3: persistent CTAs (one per SM) over grouped tiles; the next tile's loads run under the epilogue"
        + (" (B^T packed first)" if precision == "tf32" else ""),
        "cu/hopper/persistent.cu", f"hopper_persistent<{geo.ELEMENT[precision]}, {{BN}}, {{STAGES}}>", precision,
        (Tunable("BN", 256, (128, 256), "tile columns (wgmma N)"), STAGES(4), GROUP_M),
        select, extra_entries=_pack_entries(precision, precision == "tf32"), checked=({"BN": 128, "STAGES": 6},))


def cluster(precision: str) -> KernelSpec:
    select = lambda precision, t: ("main", geo.persistent(precision, t["BN"], t["STAGES"], t["CM"], t["CN"]))
    return _spec(
        f"cluster_{precision}",
        "rung 4: CM x CN CTA clusters share A and B tiles by TMA multicast"
        + (" (B^T packed first)" if precision == "tf32" else ""),
        "cu/hopper/cluster_multicast.cu",
        f"hopper_cluster_multicast<{geo.ELEMENT[precision]}, {{BN}}, {{STAGES}}, {{CM}}, {{CN}}>", precision,
        (Tunable("BN", 256, (128, 256), "tile columns (wgmma N)"), STAGES(4),
         Tunable("CM", 2, (1, 2, 4), "cluster rows: CTAs sharing a B tile"),
         Tunable("CN", 1, (1, 2), "cluster columns: CTAs sharing an A tile"), GROUP_M),
        select, extra_entries=_pack_entries(precision, precision == "tf32"),
        checked=({"BN": 128, "STAGES": 6, "CM": 1, "CN": 2},))


# ---------------------------------------------------------------- the last rung
# The linear-layer template arguments: set from the problem, never chosen.
LINEAR = ("OUT", "EPI", "TRANS_A", "TRANS_B")
LINEAR_TUNABLES = (
    *OUTPUT_TUNABLES,
    Tunable("TRANS_A", 0, (0, 1), "1: A stored K x M (set by the problem's layout: tn, tt)"),
    Tunable("TRANS_B", 0, (0, 1), "1: B stored N x K (set by the problem's layout: nt, tt)"),
)


def linear_tunables(problem: GemmProblem) -> dict[str, int]:
    """The template arguments ``problem`` fixes: output type, epilogue, which operands are stored
    transposed."""
    return {**output_tunables(problem), "TRANS_A": int(problem.trans_a), "TRANS_B": int(problem.trans_b)}


@dataclass(frozen=True)
class AnyShapeSpec(LinearSpec):
    """A LinearSpec (kernels/linear.py) whose operand layouts are template arguments too."""

    def fixed_tunables(self, problem: GemmProblem) -> dict[str, int]:
        return linear_tunables(problem)

    def fixed_by(self, problem: GemmProblem) -> str:
        return f"layout {problem.layout}, out {problem.out_dtype}, epilogue {problem.epilogue}"


def clustered(t) -> bool:
    """Whether a launch with ``t`` runs a cluster entry (CM x CN > 1, or CK > 1 on any_shape)."""
    return t["CM"] * t["CN"] * t.get("CK", 1) > 1


def _any_shape_select(precision: str, t) -> tuple[str, geo.Geometry]:
    """SWAPPED=1: hopper_cluster_swapped (128 x 256, 4 stages); DECODE > 0: hopper_decode
    (DECODE x 64*CONSUMERS tiles; of the problem with M and N exchanged with SWAP_MN=1); else
    any_shape, its cluster form when CM x CN > 1 or CK > 1."""
    if t["SWAPPED"]:
        return "swapped", geo.persistent(precision, 256, 4, t["CM"], t["CN"], 2, "group")
    if (entry := decode_entry(t)) is not None:
        trans_a, trans_b = decode_layout(t)
        return entry, geo.decode(precision, t["DECODE"], t["CONSUMERS"], trans_a=bool(trans_a),
                                 trans_b=bool(trans_b), out_dtype=geo.OUT_DTYPE[t["OUT"]], cm=t["CM"], cn=t["CN"],
                                 pingpong=bool(t.get("PINGPONG")), swap_mn=bool(t.get("SWAP_MN")))
    entry = "cluster" if clustered(t) else "main"
    return entry, geo.persistent(precision, t["BN"], t["STAGES"], t["CM"], t["CN"], t["CONSUMERS"], "split",
                                 tma_store=True, trans_a=bool(t["TRANS_A"]), trans_b=bool(t["TRANS_B"]),
                                 out_dtype=geo.OUT_DTYPE[t["OUT"]], ck=t.get("CK", 1),
                                 pingpong=bool(t.get("PINGPONG")), nsplit=t.get("NSPLIT", 1))


def any_shape(precision: str) -> KernelSpec:
    elem = geo.ELEMENT[precision]
    any_geometry = lambda t: _any_shape_select(precision, {**t, "SWAPPED": 0, "DECODE": 0})[1]
    decode_geometry = lambda t: _any_shape_select(precision, {**t, "SWAPPED": 0})[1]
    swapped_smem = geo.persistent_smem(4, 256, 2)
    linear = "{OUT}, {EPI}, {TRANS_A}, {TRANS_B}"
    # each entry only in the builds whose launches run it (_any_shape_select): a build compiles
    # the 128 x 256 swapped kernel and the cluster form only where they are asked for
    entries = (
        Entry("cluster",
              f"hopper_any_shape_cluster<{elem}, {{BN}}, {{STAGES}}, {{CONSUMERS}}, {{CM}}, {{CN}}, {{CK}}, 3, "
              f"{linear}, {{PINGPONG}}, {{NSPLIT}}>", STORE_SIGNATURE, lambda t: any_geometry(t).smem,
              needed=clustered),
        Entry("swapped", f"hopper_cluster_swapped<{elem}, 4, {{CM}}, {{CN}}>", GROUP_SIGNATURE, lambda t: swapped_smem,
              needed=lambda t: bool(t.get("SWAPPED"))),
        Entry("decode",
              f"hopper_decode<{elem}, {{DECODE}}, {{CONSUMERS}}, {{OUT}}, {{EPI}}, {{TRANS_B}}, {{PINGPONG}}, "
              "{TRANS_A}, {SWAP_MN}>",
              STORE_SIGNATURE, lambda t: decode_geometry(t).smem, needed=lambda t: decode_entry(t) == "decode"),
        Entry("decode_cluster",
              f"hopper_decode_cluster<{elem}, {{DECODE}}, {{CONSUMERS}}, {{CM}}, {{OUT}}, {{EPI}}, {{TRANS_B}}, "
              "{CN}, {PINGPONG}, {TRANS_A}, {SWAP_MN}>",
              STORE_SIGNATURE, lambda t: decode_geometry(t).smem, needed=lambda t: decode_entry(t) == "decode_cluster"),
        *_pack_entries(precision),
    )
    return _spec(
        f"hopper_{precision}",
        "rung 5, any shape: TMA stores of C, split-K on small grids, packing where TMA cannot read an operand, "
        "2x1 clusters on large grids, swapped-roles decode tiles at small M (tunables chosen per shape; "
        "SWAPPED=1: swapped wgmma roles on 128 x 256 tiles)",
        "cu/hopper/any_shape.cu",
        f"hopper_any_shape<{elem}, {{BN}}, {{STAGES}}, {{CONSUMERS}}, 3, {linear}, {{PINGPONG}}, {{NSPLIT}}>",
        precision,
        (Tunable("BN", 256, (64, 128, 192, 256), "tile columns (wgmma N); 192 fits N = 192 j with no column "
                 "past the edge where 256 would waste up to a third"),
         STAGES(STAGES_DEFAULT, (2, 3, 4, 5, 6, 8)),
         Tunable("CONSUMERS", 2, (1, 2), "consumer warpgroups: 2 = 128-row tiles, 1 = 64-row tiles, two CTAs per SM"),
         Tunable("CM", 1, (1, 2), "cluster rows: CTAs sharing a B tile"),
         Tunable("CN", 1, (1, 2, 4), "cluster columns: CTAs sharing an A tile"),
         SPLITS,
         CK,
         TAIL,
         GROUP_M,
         PDL,
         PINGPONG,
         NSPLIT,
         Tunable("SWAPPED", 0, (0, 1), "1: hopper_cluster_swapped (wgmma's A = the B tile), 128 x 256, no split"),
         Tunable("DECODE", 0, (0, *DECODE_ROWS, *PINGPONG_ROWS),
                 "> 0: hopper_decode: tiles of DECODE rows of A x 64 * CONSUMERS columns, wgmma's A = the B tile, "
                 "the deepest ring that fits (8-64 rows at small M; 128 or 160 with PINGPONG=1 on full grids); "
                 "0: any_shape"),
         Tunable("SWAP_MN", 0, (0, 1), "1 (with DECODE): the decode tiles compute D^T = op(B)^T op(A)^T, the "
                 "problem with M and N exchanged, so that a small N is the tiles' DECODE rows; D is stored as it is"),
         Tunable("STORE", 1, (0, 1), "C's stores: 1 = TMA stores of staged chunks where C's rows allow, 0 = from "
                 "registers as the earlier rungs (the swapped entry always stores from registers)"),
         *LINEAR_TUNABLES),
        _any_shape_select, rules=(_swapped_shape, _decode_shape, _cluster_split, _pingpong, _column_halves,
                                  _one_consumer_columns),
        extra_entries=entries,
        choose=choose_any_shape, spec_class=AnyShapeSpec,
        layouts=("nn", "nt", "tn", "tt"), out_dtypes=("fp32", precision),
        epilogues=tuple(geo.EPILOGUE_CODE),
        # BF16 and FP16 are one template: bf16 builds the 128 x 64 tiles choose() takes on small
        # grids (with the split-K cluster entry beside them), the column halves in a 2 x 1
        # cluster and the small-M decode tiles, fp16 one-consumer 64 x 192 tiles split over K (the
        # most accumulators a one-consumer tile holds), the ping-pong tiles and the swapped
        # ping-pong tiles (160 accumulators a thread, the most of any entry), so the spill gate
        # sees all without more builds
        checked=({"SWAPPED": 1, "CM": 2}, {"BN": 128, "STAGES": 6, "CM": 2, "SPLITS": 2},
                 {"BN": 64, "STAGES": 8, "CK": 2} if precision == "bf16"
                 else {"BN": 192, "CONSUMERS": 1, "STAGES": 3, "SPLITS": 4},
                 {"BN": 128, "STAGES": 8, "NSPLIT": 2, "CM": 2} if precision == "bf16"
                 else {"BN": 128, "STAGES": 6, "CM": 2, "PINGPONG": 1},
                 {"DECODE": 16, "BN": 64, "CONSUMERS": 1, "SWAP_MN": 1, "TRANS_B": 1} if precision == "bf16"
                 else {"DECODE": 160, "BN": 128, "CONSUMERS": 2, "PINGPONG": 1, "CN": 2}))


@dataclass(frozen=True)
class RegisterASpec(LinearSpec):
    """``hopper_tf32``: B's layout is a template argument the problem sets (TRANS_B); FP32 D,
    no epilogue (no OUT or EPI tunables)."""

    def fixed_tunables(self, problem: GemmProblem) -> dict[str, int]:
        return {"TRANS_B": int(problem.trans_b)}

    def fixed_by(self, problem: GemmProblem) -> str:
        return f"layout {problem.layout}"


def _register_a_select(precision: str, t) -> tuple[str, geo.Geometry]:
    """TRANS_B=0: tf32_register_a.cu. TRANS_B=1, B stored N x K, already K-major as TF32 wgmma
    reads it: any_shape.cu over B as stored, 64*CONSUMERS (m) x BM (n) tiles (the register-A
    tile of C^T = B^T A^T, transposed), the cluster entry when CM x CN > 1."""
    if t.get("TRANS_B"):
        entry = "stored_nk_cluster" if clustered(t) else "stored_nk"
        return entry, geo.persistent(precision, t["BM"], t["STAGES"], t["CM"], t["CN"], t["CONSUMERS"], "split",
                                     tma_store=True, trans_b=True)
    return "main", geo.register_a(t["STAGES"], t["CM"], t["CN"], t["BM"], t["CONSUMERS"])


def _stored_nk_entries(precision: str) -> tuple[Entry, ...]:
    """any_shape.cu's entries for B stored N x K (FP32 D, no epilogue, A row-major), built only
    into the TRANS_B=1 builds that run them."""
    elem, smem = geo.ELEMENT[precision], lambda t: _register_a_select(precision, {**t, "TRANS_B": 1})[1].smem
    return (
        Entry("stored_nk", f"hopper_any_shape<{elem}, {{BM}}, {{STAGES}}, {{CONSUMERS}}, 3, 0, 0, 0, 1>",
              STORE_SIGNATURE, smem, needed=lambda t: bool(t.get("TRANS_B")) and not clustered(t)),
        Entry("stored_nk_cluster",
              f"hopper_any_shape_cluster<{elem}, {{BM}}, {{STAGES}}, {{CONSUMERS}}, {{CM}}, {{CN}}, 1, 3, 0, 0, 0, 1>",
              STORE_SIGNATURE, smem, needed=lambda t: bool(t.get("TRANS_B")) and clustered(t)),
    )


def register_a(precision: str = "tf32") -> KernelSpec:
    """hopper_tf32; every layout: B stored N x K (nt, tt) read as it is by any_shape.cu's
    entries, A stored transposed (tn, tt) copied transposed first (transposing.py)."""
    return taking_layouts(_spec(
        "hopper_tf32",
        "rung 5 (TF32): C^T = B^T A^T, B^T fragments from registers and A as wgmma's K-major B operand, so no "
        "transposed copy of B; persistent BM x 64*CONSUMERS tiles (256 x 128, or smaller for small grids); "
        "B stored N x K (nt, tt): any_shape's 64*CONSUMERS x BM tiles over B as stored",
        "cu/hopper/tf32_register_a.cu", "hopper_tf32_register_a<{BM}, {CONSUMERS}, {STAGES}, {CM}, {CN}>", precision,
        (Tunable("BM", 256, (64, 128, 256), "tile rows of m (wgmma's N); with B stored N x K, tile columns of n"),
         Tunable("CONSUMERS", 2, (1, 2), "consumer warpgroups of 64 n each (B stored N x K: of 64 m); "
                 "1: two CTAs an SM"),
         Tunable("STAGES", 4, (2, 3, 4, 6, 8), "TMA ring depth (BM x 128 + 64 * CONSUMERS x 128 bytes a stage)"),
         Tunable("CM", 1, (1, 2), "cluster rows: CTAs sharing a B tile"),
         Tunable("CN", 1, (1, 2), "cluster columns: CTAs sharing an A tile"), GROUP_M, SPLITS, TAIL, PDL,
         Tunable("TRANS_B", 0, (0, 1), "1: B stored N x K, read as stored (set by the problem's layout: nt, tt)")),
        _register_a_select, rules=(_one_consumer_tiles,),
        extra_entries=(*_pack_entries(precision), *_stored_nk_entries(precision)), choose=choose_register_a,
        spec_class=RegisterASpec,
        checked=({"STAGES": 3, "CM": 2, "CN": 2}, {"BM": 64, "STAGES": 8}, {"BM": 128, "CONSUMERS": 1},
                 {"TRANS_B": 1}, {"TRANS_B": 1, "CM": 2})),
        geo.ITEMSIZE[precision], reads_transposed_b=True)


def _split_k(units: int, k: int, slice_k: int, most: int, cluster: int = 1, room: int = SMS) -> int:
    """``choose``'s split-K slices for ``units`` tiles (or cluster blocks of ``cluster`` CTAs):
    the most of SPLITS' choices up to ``most`` that keeps every slice >= ``slice_k`` of K and no
    more units than ``room`` CTAs hold, by default the clusters resident on the H100 (slices meet
    at a barrier only when all of them run at once); < 2: do not split."""
    limit = min(most, room // cluster // units, k // slice_k)
    return max((s for s in SPLITS.choices if s <= limit), default=1)


def _deep_k_splits(units: int, k: int, cluster: int = 1) -> int:
    """Split-K over full-size tiles: at most 4 slices, each >= 4096 of K."""
    return _split_k(units, k, 4096, 4, cluster)


def choose_register_a(problem: GemmProblem, gpu_name: str) -> tuple[dict[str, int], str]:
    """Tunables of ``hopper_tf32`` for a shape: past M = 128 on a GPU with a hopper_tf32 table
    of the tuning set, the vote of its nearest measured shapes (tf32_selection.py); else the
    rule below (at M of 65-128 and a narrow N first ``narrow_n_split``); then, past M = 128,
    tf32_selection.short_k_split. With B stored N x K, any_shape.cu's tiles are the register-A
    tiles of the transposed problem (C^T = B^T A^T) transposed: the rule below on the N x M
    problem, its cluster roles swapped with it (its CN, CTAs sharing its A = our B, is our CM)."""
    if not problem.trans_b:
        return tf32_selection.short_k_split(problem, *(tf32_selection.fitted(problem, gpu_name)
                                                       or narrow_n_split(problem) or _register_a_rule(problem)))
    tunables, why = _register_a_rule(replace(problem, m=problem.n, n=problem.m, trans_b=False))
    tunables = {**tunables, "CM": tunables.get("CN", 1), "CN": tunables.get("CM", 1)}
    return tunables, f"B stored N x K: any_shape's tiles, as the rule picks for {problem.n}x{problem.m}: {why}"


def _register_a_rule(problem: GemmProblem) -> tuple[dict[str, int], str]:
    """Tunables of ``hopper_tf32``'s register-A kernel for a shape, from measurements with cuBLAS TF32 beside
    (sustained: 2 s of launches, two rounds; sweeps: results/h100-80gb-hbm3/autotune-hopper-tf32.txt,
    results/h200/autotune-hopper-tf32-split-k.txt):

    - A full grid of 256 x 128 tiles (>= ~0.9 x #SMs) past M = 128: those tiles, in 1 x 2 clusters
      (two CTAs of neighbouring tile columns share their A tile by multicast) where the tile
      columns pair up. H100: 8192^3 345 TFLOP/s sustained against 315-320 without; 2048^3 342
      against 309 in the sweep; 4096^3 even (322-326 either way, sustained). At M <= 64 a wide N
      fills the grid too, but each 256-row tile computes 4x or more the rows it stores: those
      take the 64 x 128 tiles below (TF32_WIDE_PROBE: the tuning set's six such shapes).
    - Fewer, and deep K: split-K over 256 x 128 tiles, every slice keeping >= 4096 of K and every
      unit resident (H200: 1024x1024x16384 317 TFLOP/s with 4 splits, cuBLAS 294; 206 for the
      small tiles below). Not for M <= 64, where a 256-row tile computes 4x the rows a 64-row
      one does for nothing: those take the small tiles' split-K below. H200, the tuning set's six
      such shapes (results/h200/probe-tf32-deep-k-small-m-before-after.txt): 2.2-3.0x faster
      than split-K over 256-row tiles (32x4096x14336 66.8 us against 171.0); the validation
      set's seven (bench-tf32-deep-k-small-m-validate.txt): 0.85-0.92 of the faster of cuBLAS
      and cuBLASLt, against 0.30-0.41 before (bench-corpus-validate-tf32).
    - Else 64 x 128 tiles (BM=64: wgmma m64n64k8 in each of the two consumers), 8 stages, PDL.
      H100 (results/h100-80gb-hbm3/autotune-hopper-small-grids.txt): 1024^3 167 TFLOP/s against
      135 for the 128 x 64 tiles of one consumer, two CTAs an SM, chosen before (cuBLAS 146);
      16384x128x4096 even (170 against 171).
    - Where those tiles still leave SMs idle (small M: a row of tiles along N), split-K over them:
      the most slices that keep every unit resident and every slice >= 1024 of K, PDL; at M <= 64
      ``small_m_split`` decides the slices and the ring's depth (4 or 8 stages). H200,
      the 13 validation shapes it changes, against the faster of cuBLAS and cuBLASLt
      (results/h200/bench-tf32-small-m-split-k-validate.txt; before: bench-corpus-validate-tf32):
      geometric mean 0.86 against 0.50, e.g. 16x576x7168 18.9 us against 68.4 (cuBLAS 11.1),
      128x1536x7168 26.3 against 68.9 (25.5); one lost a little, 16x7168x2048 23.4 against 22.6.
    - M of 65-128 (first): 128 x 128 tiles (BM=128), split-K over them where they leave SMs idle
      (the most slices that keep every unit resident and every slice >= 1024 of K), PDL. H100,
      nine shapes of neither corpus set, every tile height whole, split and in 1 x 2 clusters
      (TF32_MID_M_PROBE): the fastest of ours, or within 0.5% of it, on eight (at
      80x12800x5120 1 x 2 clusters ran 10% faster); against the 256- or 64-row tiles taken
      before 1.12-1.78x faster, e.g. 128x20480x4096 151.5 us against 250.8, 112x7680x20480 220.3
      (2 slices) against 357.4, 128x9216x8192 138.2 against 169.0.
    - PDL (programmatic dependent launch) on full grids and the 64 x 128 tiles. H100, back-to-back
      calls on a held stream (pdl-graph-and-stream.txt): 2048^3 49.7 us against 51.6 without,
      4096^3 360 against 366; it lost with split-K (108 against 107 at 1024x1024x16384), and on
      the earlier 128 x 64 tiles at 16384x128x4096 (104.5 against 101.3); on the 64 x 128 tiles
      at 1024^3 it gave 167 TFLOP/s against 152 (back-to-back launches of the sweep). The split
      small tiles of the two rules above (M <= 128) take it too: on nine shapes of neither corpus
      set on the H100 (TF32_SPLIT_PDL_PROBE) their split picks ran faster with PDL on seven, by
      2.8-5.8% (1x4096x4096 32.3 us against 34.2, 128x4096x8192 57.8 against 59.8), even at
      64x6144x4096 and 0.8% slower at 8x8192x8192."""
    tiles_n = ceil_div(problem.n, 128)
    if 64 < problem.m <= 128:
        splits = _small_tile_splits(tiles_n, problem.k)
        return ({"BM": 128, **({"SPLITS": splits} if splits >= 2 else {}), "PDL": 1},
                f"M = {problem.m}: {tiles_n} tiles of 128x128" + (f", {splits}-way split-K" if splits >= 2 else "")
                + f", PDL (H100: 128x20480x4096 151.5 us against 250.8 for 256x128 tiles; {TF32_MID_M_PROBE})")
    tiles = ceil_div(problem.m, 256) * tiles_n
    if tiles >= FULL_GRID and problem.m > 64:
        if tiles_n % 2 == 0:
            return ({"CN": 2, "PDL": 1},
                    f"{tiles} tiles of 256x128, 1x2 cluster sharing A, PDL (H100: 345 TFLOP/s at 8192^3)")
        return {"PDL": 1}, f"{tiles} tiles of 256x128, an odd number of tile columns: no cluster; PDL"
    splits = _deep_k_splits(tiles, problem.k)
    if splits >= 2 and problem.m > 64:
        return ({"SPLITS": splits},
                f"{tiles} tiles of 256x128, deep K: {splits}-way split-K (H200: 317 TFLOP/s at 1024x1024x16384)")
    small = ceil_div(problem.m, 64) * tiles_n
    splits, stages = small_m_split(problem, small) if problem.m <= 64 else (_small_tile_splits(small, problem.k), 8)
    if splits >= 2:
        return ({"BM": 64, "STAGES": stages, "SPLITS": splits, "PDL": 1},
                f"{tiles} tiles of 256x128 leave SMs idle, and {small} of 64x128 too: {splits}-way split-K, "
                f"{stages} stages, PDL")
    if tiles >= FULL_GRID:  # M <= 64: a wide N alone fills the grid
        return ({"BM": 64, "STAGES": 8, "PDL": 1},
                f"M = {problem.m}: {small} tiles of 64x128, 8 stages, PDL, not 256x128 tiles computing "
                f"{256 / max(problem.m, 1):.0f}x the rows ({TF32_WIDE_PROBE})")
    return ({"BM": 64, "STAGES": 8, "PDL": 1},
            f"{tiles} tiles of 256x128 leave SMs idle: {small} of 64x128, 8 stages, PDL "
            "(H100: 167 TFLOP/s at 1024^3)")


# narrow_n_split: at most this many tile columns of 128, from this K
NARROW_N_MAX_TILES, NARROW_N_MIN_K = 8, 4096
TF32_NARROW_N_PROBE = "results/h100-80gb-hbm3/probe-tf32-narrow-n-short-slices.txt"  # tf32_mid_m.py --slice=256
TF32_NARROW_N_CHECK = "results/h100-80gb-hbm3/probe-tf32-narrow-n-check.txt"


def narrow_n_split(problem: GemmProblem) -> tuple[dict[str, int], str] | None:
    """At M of 65-128 with at most NARROW_N_MAX_TILES tile columns and K >= NARROW_N_MIN_K, B stored
    K x N (the register-A kernel): 128 x 64 tiles of one consumer (two CTAs an SM) split into the
    most slices, up to 8, of >= 256 of K that stay resident; else None. The 128 x 128 tiles split
    into slices of >= 1024 run 20-36 units there (128x576x7168: 5 tiles, 6 slices); these run 2-3x
    as many.

    H100, every tile form whole and split in slices down to 256, beside cuBLAS and cuBLASLt, on four
    such shapes of neither corpus set (TF32_NARROW_N_PROBE): 1.08-1.28x the 128 x 128 split
    (96x512x6144 15.2 us against 19.4, cuBLASLt 11.7), the fastest of ours on three and 5% behind
    64 x 128 tiles in 6 slices on one (128x768x14336); still 0.77-0.87 of the faster baseline.
    Looked for after the validation run showed 128x576x7168 at 0.68. Checked on six shapes chosen
    after (TF32_NARROW_N_CHECK): 1.05-1.23x the 128 x 128 split (geometric mean 1.15x; 120x896x6144
    16.3 us against 20.0, cuBLASLt 17.3), the fastest of ours on four, behind 64 x 128 tiles in 8
    slices on two at K >= 12288 (128x512x16384 32.2 against 28.2). Validation run: 128x576x7168 (seen
    before) 0.68 -> 0.88 (results/h100-80gb-hbm3/shift-validate-tf32-narrow-n.txt)."""
    if not 64 < problem.m <= 128 or ceil_div(problem.n, 128) > NARROW_N_MAX_TILES or problem.k < NARROW_N_MIN_K:
        return None
    tiles, splits = tf32_selection.short_sliced(problem)
    if splits < 2:
        return None
    return ({**tf32_selection.ONE_CONSUMER, "SPLITS": splits},
            f"M = {problem.m}: {tiles} tiles of 128x64, {splits}-way split-K, two CTAs an SM (H100: 96x512x6144 "
            f"15.2 us against 19.4 for 128x128 tiles; {TF32_NARROW_N_PROBE})")


# small_m_split: whole 64 x 128 tiles from this many of them at K up to SMALL_WHOLE_MAX_K, from
# M = SMALL_WHOLE_DEEP_M up to SMALL_WHOLE_DEEP_MAX_K
SMALL_WHOLE_MIN_TILES, SMALL_WHOLE_MAX_K, SMALL_WHOLE_DEEP_M, SMALL_WHOLE_DEEP_MAX_K = 48, 5120, 32, 8192
TF32_SMALL_M_WHOLE_PROBE = "results/h100-80gb-hbm3/probe-tf32-small-m-whole-k.txt"
TF32_SMALL_M_WHOLE_CHECK = "results/h100-80gb-hbm3/probe-tf32-small-m-whole-k-after.txt"


def small_m_split(problem: GemmProblem, tiles: int) -> tuple[int, int]:
    """(split-K slices, ring stages) for hopper_tf32's 64 x 128 tiles at M <= 64, where B's
    stream sets the time. Each slice keeps >= 1024 of K (tf32_selection.SLICE_K), and:

    - up to SMS / 4 tiles: the most slices that keep the units within half the SMs, 8 stages;
    - from SMALL_WHOLE_MIN_TILES tiles at K <= SMALL_WHOLE_MAX_K, or from M = SMALL_WHOLE_DEEP_M
      at K <= SMALL_WHOLE_DEEP_MAX_K: whole tiles, 8 stages;
    - else the most slices that keep every unit resident, 4 stages where they fill more than half
      the SMs (whole tiles past 66: 8 stages).

    H100, split 1-8 ways at 4 and 8 stages beside cuBLAS and cuBLASLt, alternately, 30 shapes of
    M = 8-64 of neither corpus set (TF32_SPLIT_STAGES_PROBES). About 52-64 units at 8 stages (each
    CTA a deep ring on its own SM) read B as fast as it goes; 92-132 at 4 stages about as fast;
    splitting past that, or to more than 64 units at 8 stages, adds hand-overs and slows it:

    - 8-30 tiles: the most slices within 66 units at 8 stages the fastest of ours on ten of eleven,
      0.5% behind on the other (16x1792x6144: 4 slices 22.8 us against 25.6 for 6 at 4 stages,
      cuBLASLt 22.8; 16x1024x8192: 8 slices 18.9 against 20.8 at 4 stages);
    - 34-46 tiles: the most resident slices at 4 stages the fastest of ours on all nine
      (16x4608x14336 95.4 us against 103.1 at 8 stages and 129.6 whole; cuBLAS 94.8);
    - 48-56 tiles at K <= 8192: whole tiles at 8 stages 3-9% faster than 2 slices at 4 on five of six
      (48x7168x4096 42.6 us against 46.2, cuBLASLt 46.8), level on one; past K = 8192 (50-62
      tiles) 2 slices at 4 stages 3-10% faster than whole (16x6400x16384 150.1 against 164.3).

    A first form (4 stages wherever the split fills more than half the SMs) was seen losing on the
    validation run at 16x1536x7168 (12 tiles, 6 slices: 0.96 -> 0.87 of the faster baseline); the
    few-tile and whole-tile branches were fitted after it, on probes of shapes of neither set.
    Checked on ten shapes of neither set chosen after (TF32_SMALL_M_SPLIT_CHECK), against the
    rule before it (8 stages, split as far as 132 units): 1.04x (geometric mean), faster on seven
    by 2-9% (32x2304x6144 27.2 us against 29.6), level on one, 0.5% and 1.7% slower on two; whole
    tiles at K = 7168 and 8192 lost 6.5-7.9% to 2 slices at 4 stages (16x6272x7168 73.9 against
    68.5). Validation run: its 15 shapes x1.045, M = 16 0.939 -> 0.961
    (results/h100-80gb-hbm3/shift-validate-tf32-small-m-split.txt).

    That bound was K <= 8192 at every M; six more shapes of 49-65 tiles at K = 6144-8192
    (TF32_SMALL_M_WHOLE_PROBE), with those of the probes and check above, set it by M: at M < 32
    2 slices at 4 stages beat whole tiles on all five of K = 6144-8192 by 5.5-12.9% (8x8320x8192
    94.9 us against 107.1) and lost on the two of K <= 5120 (3-5%); at M >= 32 whole tiles were
    within 0.4% or faster on all eight of K <= 8192 (by up to 8.6%). Fitted after the check above and
    after the validation run had shown 16x8192x8192 (0.97 -> 0.95) and 16x6144x6144 losing.
    Checked on eight shapes of 50-66 tiles chosen after (TF32_SMALL_M_WHOLE_CHECK): the three it
    changes (M < 32, K = 6144-8192) 1.05-1.11x faster split (8x7424x7168 76.6 us against 84.8);
    of the five it leaves whole, right on two, level on one, 1.8% slower than 2 slices on one and
    7.3% on one (16x8448x5120, 63.6 us split against 68.3: M < 32 at K <= 5120 stays mixed). On the
    validation run (its two seen shapes): 16x8192x8192 0.95 -> 1.02, 16x6144x6144 0.91 -> 0.95."""
    if tiles <= SMS // 4:
        return _split_k(tiles, problem.k, tf32_selection.SLICE_K, max(SPLITS.choices), room=SMS // 2), 8
    whole_max_k = SMALL_WHOLE_DEEP_MAX_K if problem.m >= SMALL_WHOLE_DEEP_M else SMALL_WHOLE_MAX_K
    if tiles >= SMALL_WHOLE_MIN_TILES and problem.k <= whole_max_k:
        return 1, 8
    splits = _small_tile_splits(tiles, problem.k)
    return splits, 4 if tiles * splits > SMS // 2 else 8


def _small_tile_splits(units: int, k: int) -> int:
    """Split-K over hopper_tf32's 64- or 128-row tiles of 128 columns (one CTA an SM): any of
    SPLITS' choices, each slice >= tf32_selection.SLICE_K (1024) of K."""
    return _split_k(units, k, tf32_selection.SLICE_K, max(SPLITS.choices))


# ---------------------------------------------------------------- choose (the last rung)
def choose_any_shape(problem: GemmProblem, gpu_name: str) -> tuple[dict[str, int], str]:
    """Tunables of ``hopper_bf16``/``hopper_fp16`` for a shape: ``decode_choice`` at small M,
    ``small_n_choice`` at small N (the decode tiles on the problem with M and N exchanged), then
    ``wide_choice``: ``grid_fill_choice`` on small grids, ``row_pair_choice`` between 64 and 128
    rows, ``short_k_choice`` on full grids of a short K; else, on a GPU with a table of the
    corpus's tuning set, the vote of its nearest measured shapes (selection.py), elsewhere
    the rule of ``analytic_choice``, the vote's 128 x 256 tiles without a 2 x 1 cluster where A
    is stored transposed (``transposed_unclustered``), either with 64-row tiles made 128-row
    ones where M needs two rows of them (``one_tile_row``), 128 x 256 tiles made 128 x 128
    where they would fill at most half the SMs, or three quarters at deep K
    (``underfilled_grid``), whole 128 x 128 tiles on at most half the SMs split in clusters of
    two (``half_grid_split``), 128 x 256 tiles made 128 x 192 where N asks for it (``ragged_n``)
    and clustered where A's or B's rows are not 128-byte multiples (``unaligned_rows``)."""
    for rule in (decode_choice, small_n_choice):
        chosen = rule(problem)
        if chosen is not None:
            return chosen
    return wide_choice(problem, gpu_name)


def wide_choice(problem: GemmProblem, gpu_name: str) -> tuple[dict[str, int], str]:
    """``choose_any_shape`` past the decode tiles' M: its rules from ``grid_fill_choice`` on."""
    for rule in (grid_fill_choice, row_pair_choice, short_k_choice):
        chosen = rule(problem)
        if chosen is not None:
            return chosen
    return voted_choice(problem, gpu_name)


def voted_choice(problem: GemmProblem, gpu_name: str) -> tuple[dict[str, int], str]:
    """``choose_any_shape`` past its rules: the vote (or the analytic rule) and the rules that
    adjust its pick."""
    voted = selection.fitted(problem, gpu_name)
    if voted is None:
        tunables, why = analytic_choice(problem, gpu_name)
        voted = tunables, f"{why}; no tuning-set table for this GPU"
    else:
        voted = transposed_unclustered(problem, *voted)
    return adjusted(problem, *voted)


def adjusted(problem: GemmProblem, tunables: dict[str, int], why: str) -> tuple[dict[str, int], str]:
    """A pick of the vote's tiles as the rules that adjust it leave it: 128 x 64 tiles where they
    make one full wave at K < ONE_WAVE_MAX_K (``one_wave``), 64-row tiles made 128-row
    (``one_tile_row``), 128 x 256 tiles made 128 x 128 on grids they underfill
    (``underfilled_grid``) and those split in clusters of two (``half_grid_split``), 128 x 192
    where N asks for it (``ragged_n``), clustered where rows are not 128-byte multiples
    (``unaligned_rows``), PDL off where it costs (``without_pdl``)."""
    picked = one_tile_row(problem, *one_wave(problem, tunables, why))
    picked = ragged_n(problem, *half_grid_split(problem, *underfilled_grid(problem, *picked)))
    return without_pdl(problem, *unaligned_rows(problem, *picked))


DECODE_PDL_PROBES = ("results/h100-80gb-hbm3/probe-small-m-deep-ring.txt",
                     "results/h100-80gb-hbm3/probe-small-m-clusters.txt")  # the "+pdl" rows
# the largest M of the tuning set it won on: at M = 256 64-row decode tiles lost to the vote's
# pick on 4 of 5 shapes (results/h100-80gb-hbm3/probe-small-m-256.txt)
DECODE_MAX_M = 32


def decode_form(problem: GemmProblem) -> tuple[int, int, int]:
    """The decode tiles' form for ``problem`` (hopper_decode and hopper_fp8_decode alike): the
    fewest tile rows >= M (M = 1: 8 rows); one consumer (64-column tiles, two CTAs an SM), two
    where those tiles outnumber what two CTAs an SM hold; and the tiles that makes.
    (rows, consumers, tiles)."""
    rows = min(r for r in DECODE_ROWS if r >= max(problem.m, 1))
    row_tiles = ceil_div(problem.m, rows)
    consumers = 2 if row_tiles * ceil_div(problem.n, 64) > 2 * SMS else 1
    return rows, consumers, row_tiles * ceil_div(problem.n, 64 * consumers)


def decode_choice(problem: GemmProblem) -> tuple[dict[str, int], str] | None:
    """hopper_decode's tunables for M <= DECODE_MAX_M (A stored K x M: transposed_decode_choice),
    else None.

    Measured on the H100 on seven of the tuning set's small-M shapes, every configuration
    verified, beside cuBLAS and cuBLASLt (tools/probes/small_m.py,
    results/h100-80gb-hbm3/probe-small-m.txt): it beat what the vote picked on all seven, e.g.
    1x3584x3584 9.5 us against 19.0 (cuBLAS 9.1), 32x6144x4096 20.2 against 22.4 (21.2),
    32x3584x18944 51.3 against 54.5 (53.1); at 32x4096x4096, whose B stays in L2, 11.5 against
    15.8 (cuBLAS 9.7). The rule it showed:

    - DECODE: the fewest rows >= M (M = 1: 8 rows);
    - one consumer (64-column tiles, two CTAs an SM), two where those tiles outnumber what two
      CTAs an SM hold (1x28672x4096: 82.2 us against 84.1);
    - split-K only up to one unit an SM: the most SPLITS that keeps tiles x splits <= the SMs,
      each range >= TAIL_MIN_K_TILES k tiles (1x3584x3584: 2 splits 9.5 us, 4 10.3, 8 13.9;
      32x4800x1600: none 6.4, 2 9.1);
    - PDL, split or not. In that first probe PDL with 2 splits won on 5 of the 7 shapes and lost
      14% at 32x4096x4096, and the rule left it off with split-K; two later probes on the same
      H100 model (DECODE_PDL_PROBES: the split configurations of five tuning-set shapes and
      three of neither set, each with and without PDL) found it faster with 2 splits in 11 of 12
      measurements (1x3584x3584 7.9 us against 9.5, 32x4096x4096 9.9 against 10.7, 8x4096x14336
      43.2 against 45.0; slower at 20x12288x5120, 55.1 against 52.9), and with 4 or 8 splits in
      19 of 24 (slower at 32x4096x4096, by 4-11%, whose B stays in L2).
    """
    if problem.m > DECODE_MAX_M:
        return None
    if problem.trans_a:
        return transposed_decode_choice(problem)
    tunables, form = decode_tiles(problem)
    return tunables, (f"M = {problem.m}: hopper_decode, {form}"
                      " (H100: 1x3584x3584 7.9 us against 19.0 for any_shape, cuBLAS 9.1)")


def decode_tiles(problem: GemmProblem) -> tuple[dict[str, int], str]:
    """``decode_choice``'s tunables for A row-major (``decode_form``, split-K up to one unit an
    SM, PDL), and their words ("56 tiles of 8 x 64, 2-way split-K, PDL")."""
    rows, consumers, tiles = decode_form(problem)
    splits = _split_k(tiles, problem.k, geo.TAIL_MIN_K_TILES * geo.k_tile("bf16"), max(SPLITS.choices))
    tunables = {"DECODE": rows, "BN": 64 * consumers, "CONSUMERS": consumers,
                **({"SPLITS": splits} if splits > 1 else {}), "PDL": 1}
    return tunables, (f"{tiles} tiles of {rows} x {64 * consumers}"
                      + (f", {splits}-way split-K" if splits > 1 else "") + ", PDL")


SMALL_N_PROBE = "results/h100-80gb-hbm3/probe-small-n.txt"
SMALL_N_CHECK = "results/h100-80gb-hbm3/probe-small-n-check.txt"
# small_n_choice: N up to SMALL_N_MAX (the decode tiles' most rows) with M from SMALL_N_MIN_M (the
# probe's least)
SMALL_N_MAX, SMALL_N_MIN_M = max(DECODE_ROWS), 1024


def small_n_choice(problem: GemmProblem) -> tuple[dict[str, int], str] | None:
    """The decode tiles on the problem with M and N exchanged (SWAP_MN: D^T = op(B)^T op(A)^T, N's
    few columns the tiles' rows) for N <= SMALL_N_MAX and M >= SMALL_N_MIN_M, in the form the
    small-M rules give the exchanged problem: ``decode_tiles`` (64 rows past 32), or, where the
    exchanged A is stored transposed (B stored K x N: nn, tn), ``transposed_decode_tiles``, which
    may decline (then None). x @ W^T with W of a few rows: a classifier head, an MoE router, a LoRA
    down projection. At this N the 128-row tiles of any_shape put M's rows on few CTAs (4096x16x2048:
    32), each reading its rows of A at what one SM draws.

    Fitted on ten shapes of neither corpus set (H100, BF16 D, every form verified, timed
    alternately beside cuBLAS and cuBLASLt: tools/probes/linear_configs.py --small-n, SMALL_N_PROBE):
    the form this rule gives was the fastest of the exchanged forms on eight and within 1% on one
    (1024x8x8192's 8-way split was not among them), and beat the pick without it on those nine,
    1.05-1.58x (8192x8x4096 nt 25.3 us against 39.9, cuBLAS 26.5; 8192x16x14336 nt 79.9 against
    117.4; 4096x16x2048 nt with bias 6.86 against 10.04, cuBLASLt 6.08; 4096x16x4096 nn 13.8
    against 16.1, cuBLAS 10.4). Checked on twelve shapes chosen after, every layout
    (SMALL_N_CHECK): faster than the pick without it on eleven, 1.12-1.70x (geometric mean 1.23x
    over all twelve; 3072x16x5120 nt with bias 9.67 us against 16.39, cuBLASLt 10.93), slower on
    2048x64x8192 by 1.5% (split-K in clusters of three before), at 0.86-1.13 of the faster baseline."""
    if problem.n > SMALL_N_MAX or problem.m < SMALL_N_MIN_M:
        return None
    exchanged = geo.exchanged(problem)
    chosen = transposed_decode_tiles(exchanged) if exchanged.trans_a else decode_tiles(exchanged)
    if chosen is None:
        return None
    tunables, form = chosen
    return {**tunables, "SWAP_MN": 1}, (f"N = {problem.n}: hopper_decode on the problem with M and N exchanged, "
                                         f"{form} (H100: 8192x16x14336 nt 79.9 us against 117.4; {SMALL_N_PROBE})")


TRANSPOSED_DECODE_PROBE = "results/h100-80gb-hbm3/probe-transposed-small-m-decode.txt"
TRANSPOSED_DECODE_FIRST_CHECK = "results/h100-80gb-hbm3/probe-transposed-small-m-check-first-form.txt"
TRANSPOSED_DECODE_CHECK = "results/h100-80gb-hbm3/probe-transposed-small-m-check.txt"
# transposed_decode_choice: K from TRANSPOSED_DECODE_MIN_K, at most TRANSPOSED_DECODE_MAX_TILES
# tiles of 64 x 128, split 2 ways up to TRANSPOSED_DECODE_SPLIT_TILES of them
TRANSPOSED_DECODE_MIN_K, TRANSPOSED_DECODE_MAX_TILES, TRANSPOSED_DECODE_SPLIT_TILES = 4096, SMS // 2, SMS // 4


def transposed_decode_choice(problem: GemmProblem) -> tuple[dict[str, int], str] | None:
    """M <= DECODE_MAX_M with A stored K x M (tn, tt: a weight gradient with few output rows),
    K >= TRANSPOSED_DECODE_MIN_K, at most TRANSPOSED_DECODE_MAX_TILES tiles: the decode tiles
    with A's tile M-major, 64 rows (DECODE_TRANSPOSED_ROWS) by 128 columns (two consumers), split
    2 ways up to TRANSPOSED_DECODE_SPLIT_TILES tiles, PDL; None elsewhere (a small grid goes to
    grid_fill_choice's clusters, the rest to the vote).

    H100, tn, BF16 D, every form verified and timed alternately, shapes of neither corpus set.
    Written first from ten shapes (TRANSPOSED_DECODE_PROBE) for every grid past the small-grid
    rule: the best two-consumer form beat the best one-consumer one on all five such grids, and
    the rule's form beat the vote's pick (any_shape's 64-row tiles) on four (8x4096x4096 18.1 us
    split 2 ways against 28.2, 24x3072x6144 19.9 against 25.7, 1x4096x4096 17.5 against 19.9,
    16x8192x4096 whole 28.0 against 29.7), level at 16x4096x2048. Checked on eight shapes chosen
    after (TRANSPOSED_DECODE_FIRST_CHECK) that form won on three, all of K >= 4096 and at most 48
    tiles (4x6144x4096 26.7 against 30.3, 20x4608x8192 45.2 against 53.7, 2x3584x7168 28.7
    against 32.4), and lost on four, by 3-17%: every one of K <= 3072 (12x5120x3072 18.2 against
    15.1, 32x6144x2048, 28x3072x3072) and the one of 80 tiles (16x10240x4096 39.1 against 36.0).
    Hence the bounds on K and the tiles. Checked again on eight shapes chosen after them
    (TRANSPOSED_DECODE_CHECK): faster than the vote's pick on all eight, 1.03-1.29x (geometric
    mean 1.12x; 24x7168x4096 29.7 us against 38.2), at 0.80-1.92 of the faster baseline."""
    chosen = transposed_decode_tiles(problem)
    if chosen is None:
        return None
    tunables, form = chosen
    return tunables, (f"M = {problem.m}, A stored K x M: hopper_decode, {form} (H100: 8x4096x4096 tn 18.1 us "
                      f"against 28.2 for the vote's pick; {TRANSPOSED_DECODE_PROBE})")


def transposed_decode_tiles(problem: GemmProblem) -> tuple[dict[str, int], str] | None:
    """``transposed_decode_choice``'s tunables, whatever M, and their words ("32 tiles of 64 x 128 (A's
    tile M-major), 2-way split-K, PDL"); None past its bounds (a small grid, K, the tiles)."""
    if fill_tiles(problem) <= FILL_TILES:
        return None  # grid_fill_choice's small grid
    tiles = ceil_div(problem.m, DECODE_TRANSPOSED_ROWS) * ceil_div(problem.n, 128)
    if problem.k < TRANSPOSED_DECODE_MIN_K or tiles > TRANSPOSED_DECODE_MAX_TILES:
        return None
    splits = 2 if tiles <= TRANSPOSED_DECODE_SPLIT_TILES else 1
    tunables = {"DECODE": DECODE_TRANSPOSED_ROWS, "BN": 128, "CONSUMERS": 2,
                **({"SPLITS": splits} if splits > 1 else {}), "PDL": 1}
    return tunables, (f"{tiles} tiles of {DECODE_TRANSPOSED_ROWS} x 128 (A's tile M-major)"
                      + (f", {splits}-way split-K" if splits > 1 else "") + ", PDL")


# row_pair_choice: M strictly between ROW_PAIR_M = (64, 128), K and N at least ROW_PAIR_MIN_K, _N
ROW_PAIR_M, ROW_PAIR_MIN_K, ROW_PAIR_MIN_N = (64, 128), 4096, 4096
ROW_PAIR_PROBES = ("results/h100-80gb-hbm3/probe-small-m-clusters.txt",
                   "results/h100-80gb-hbm3/probe-small-m-clusters-m80-128.txt")


def row_pair_choice(problem: GemmProblem) -> tuple[dict[str, int], str] | None:
    """hopper_decode's 64-row tiles in clusters of two tile rows sharing each B tile by multicast
    (CM=2, two consumers: 64 x 128 tiles, a cluster 128 rows) for 64 < M < 128 with A row-major,
    K >= ROW_PAIR_MIN_K and N >= ROW_PAIR_MIN_N, else None. B, which sets the time at this M, crosses
    L2 once for the two tile rows, as one 128-row tile reads it, with wgmma's roles swapped.

    The tuning set has no model shape between M = 32 and M = 256, so the vote reaches these shapes
    from far (80x10240x4096 took 64-row tiles that read B twice, 0.61 of the faster baseline).
    Measured on the H100 on shapes of neither corpus set, every configuration verified, beside
    cuBLAS and cuBLASLt (tools/probes/small_m.py, ROW_PAIR_PROBES): at M = 80-120 the clusters beat
    the vote's pick on five of six shapes (80x10240x4096 40.7 us against 56.6, 120x8192x8192 50.9
    against 56.7, 104x7168x6144 36.7 against 39.1, 112x5632x7168 36.4 against 39.2, 96x8192x4096
    28.9 against 29.1) and lost at K = 2048 (100x16384x2048 31.3 against 29.1); at M = 128, where a
    128-row tile holds the whole of A, they lost on seven of nine (128x3072x8192 32.1 against 27.8).
    The same tiles without the cluster were slower than with it on 9 of 12 shapes."""
    low, high = ROW_PAIR_M
    if not low < problem.m < high or problem.trans_a or problem.k < ROW_PAIR_MIN_K or problem.n < ROW_PAIR_MIN_N:
        return None
    tiles = ceil_div(problem.n, 128)
    return ({"DECODE": 64, "BN": 128, "CONSUMERS": 2, "CM": 2, "PDL": 1},
            f"M = {problem.m}: hopper_decode, {tiles} clusters of two 64 x 128 tiles sharing B "
            "(H100: 80x10240x4096 40.7 us against 56.6 for the vote's pick)")


# short_k_choice: past M = selection.SMALL_M, on grids of PINGPONG_MIN_WAVES waves of 128 x 128
# tiles or more (where the ping-pong tiles are offered), K from SHORT_K_MIN to SHORT_K_MAX
SHORT_K_MIN, SHORT_K_MAX = 32, 2048
SHORT_K_TILE = {"DECODE": 160, "BN": 128, "CONSUMERS": 2, "PINGPONG": 1, "CN": 2, "PDL": 1}
SHORT_K_PROBE = "results/h100-80gb-hbm3/probe-short-k-swapped.txt"
SHORT_K_SWEEP = "results/h200/autotune-hopper-bf16-tuning-set-swapped-pingpong.txt"
SHORT_K_CHECK = "results/h100-80gb-hbm3/probe-short-k-rule.txt"
# ... and the same tiles 128 rows high where the 160-row ones make fewer than SHORT_K_FEW_ROUNDS
# rounds of the SMs' consumers (two tiles an SM at a time)
SHORT_K_FEW_TILE = {**SHORT_K_TILE, "DECODE": 128}
SHORT_K_FEW_ROUNDS = 2.5
SHORT_K_SMALL_GRIDS = "results/h100-80gb-hbm3/probe-short-k-rule-small-grids.txt"
SHORT_K_ODD = "results/h100-80gb-hbm3/probe-short-k-rule-odd.txt"
# ... but at K <= SHORT_K_PINGPONG_K any_shape's own ping-pong tiles (128 x 128, unswapped), in a
# 2 x 1 cluster from SHORT_K_PINGPONG_CLUSTER_WAVES waves of them; within the few rounds from
# SHORT_K_FEW_PINGPONG_MIN_K (the K they were measured at there)
SHORT_K_PINGPONG_K, SHORT_K_PINGPONG_CLUSTER_WAVES, SHORT_K_FEW_PINGPONG_MIN_K = 512, 12, 256
SHORT_K_PINGPONG_PROBE = "results/h100-80gb-hbm3/probe-short-k-pingpong.txt"
SHORT_K_PINGPONG_CHECK = "results/h100-80gb-hbm3/probe-short-k-pingpong-check.txt"
SHORT_K_PINGPONG_FEW = "results/h100-80gb-hbm3/probe-short-k-few-rounds.txt"
SHORT_K_PINGPONG_FEW_CHECK = "results/h100-80gb-hbm3/probe-short-k-few-rounds-check.txt"
# ... and with 16-bit D the swapped tiles only up to SHORT_K_SWAPPED_16BIT_K: past it whole 128 x 256 tiles
SHORT_K_SWAPPED_16BIT_K = 1280
SHORT_K_WIDE_TILE = {"PDL": 1}
SHORT_K_16BIT_HOT = "results/h100-80gb-hbm3/probe-short-k-16bit-hot.txt"
SHORT_K_16BIT_COLD = "results/h100-80gb-hbm3/probe-short-k-16bit-cold.txt"
SHORT_K_16BIT_STEP = "results/h100-80gb-hbm3/probe-mlp-gemm-split.txt"
SHORT_K_16BIT_CHECK = "results/h100-80gb-hbm3/probe-short-k-16bit-check.txt"
SHORT_K_FP32_HOT = "results/h100-80gb-hbm3/probe-short-k-fp32-hot.txt"
SHORT_K_FP32_COLD = "results/h100-80gb-hbm3/probe-short-k-fp32-cold.txt"


def short_k_choice(problem: GemmProblem) -> tuple[dict[str, int], str] | None:
    """The swapped ping-pong tiles (160 rows of A x 128 columns, wgmma's A = the B tile, each
    consumer whole tiles in turn, in 1 x 2 clusters sharing the A tile: cuBLASLt's form there)
    on full grids of a short K with A row-major, else None. With a short K a tile's k loop is
    short beside its epilogue; a consumer's epilogue runs beside the other's k loop.

    The vote cannot find them: the tuning set has no full grid of K < 1536, and its nearest
    shapes of a short-K grid have a long K. Fitted on shapes of no validation set:

    - on the H100, on the five full grids of K <= 2048 of SHORT_K_PROBE (neither corpus set),
      these tiles beat the vote's pick on all five, e.g. 6144x8192x1024 164.9 us against 199.3
      (cuBLASLt 157.1), 6144x24576x512 308.3 against 363.3 (293.8), 12288x6144x2048 488.6
      against 511.5 (443.5); at K = 3072 and 4096 they were slower than it on two of three
      (768x8192x4096 0.79 of the faster baseline against 0.91) and level on one;
    - on the H200's tuning set (SHORT_K_SWEEP, whose table is the installed h200.hopper_bf16.json),
      the eight shapes of K <= 2048 where the ping-pong tiles are offered: within 7.4% of the
      fastest candidate on each, faster than the vote's pick made without the shape's own timings
      on seven (by 1.7-22%), 2.4% slower at 8192x1600x1600; at K = 3072 and up they lost to the
      best other candidate on 25 of 31 shapes, up to 26%.

    Checked on the H100 on nine full grids of neither set chosen after (SHORT_K_CHECK): 1.076x
    the vote's pick (geometric mean), slower on two (4096x4096x512 39.3 us against 36.6). On the
    validation set its 11 shapes moved x1.022 and the other 120 x1.018 between the runs before
    and after (docs/hopper.md, Swapped ping-pong tiles): about level there.

    Where the 160-row tiles make fewer than SHORT_K_FEW_ROUNDS rounds of 2 x 132 tiles, the same
    tiles 128 rows high (SHORT_K_FEW_TILE): a small grid's last round is a larger share of its
    time, and how full it is turns on the tile height. H100, alternately timed: on twelve grids of
    neither corpus set of 1.2-2.4 such rounds (SHORT_K_SMALL_GRIDS; the MLP training run's
    4096x2048 GEMMs among them, which ran slower under the 160-row tiles than under the vote's
    pick) the 128-row tiles were faster on nine, by up to 23% (4096x2048x2048 52.9 us against
    62.8, cuBLAS 52.4; 2304x4608x2048 66.9 against 80.0), slower on three by 1.4-5.4%; at
    2500x5000x2000 (2.4 rounds, SHORT_K_ODD) slower by 11%; past 2.5 rounds the 160-row tiles
    were faster on 12 of the 16 grids of K <= 2048 of SHORT_K_CHECK and SHORT_K_ODD (slower on
    the others by 1-7%). The H200's tuning-set table, which timed both, agrees on seven of its
    eight shapes of K <= 2048 (2048x6400x1600, 2.46 rounds: 3% the other way).

    Not below K = SHORT_K_MIN, half a k tile: there is no k loop for an epilogue to hide behind,
    and the swapped tiles' transposed epilogue is the whole time. H100, 4096x2048x16 (the MLP
    training run's dX of its last layer): alternately timed with FP32 D, the vote's pick 13.3 us,
    the 128-row tiles 13.9, the 160-row ones 16.4 (SHORT_K_SMALL_GRIDS); with BF16 D in bench
    runs (results/h100-80gb-hbm3/bench-mlp-gemms-dx*.txt), the vote's pick 9.3 us, the 128-row
    tiles 16.1, the 160-row ones 18.3. At K = 54 (the H200's tuning-set 2306x2731x54, FP32 D)
    they were the fastest candidate.

    At K <= SHORT_K_PINGPONG_K, any_shape's ping-pong tiles (128 x 128, unswapped, each consumer
    whole tiles in turn), in a 2 x 1 cluster from SHORT_K_PINGPONG_CLUSTER_WAVES waves of them.
    H100, BF16 D, alternately timed beside cuBLAS and cuBLASLt (SHORT_K_PINGPONG_PROBE, shapes of
    neither corpus set): on all ten grids of K = 256-512 past the few rounds, nn and nt, they beat
    the swapped tiles, 1.07-1.41x (3072x5120x512 31.2 us against 43.7, cuBLASLt 26.8;
    6144x24576x512 in the cluster 259.2 against 336.2, 223.7); unclustered faster on the five of
    512-1024 tiles (by 1-10%), clustered on four of the five of 2048-9216 (by 1-10%), level on the
    fifth. At 5120x3072x768 level with the swapped tiles (44.4 us against 45.1). Checked on ten
    shapes chosen after (SHORT_K_PINGPONG_CHECK): faster than the swapped tiles on all ten,
    1.03-1.95x (geometric mean 1.27x; 7168x7168x256 nt 55.6 us against 96.8, cuBLASLt 50.0), the
    cluster bound right on seven (wrong by up to 7% at 2560x10240x512, 1600 tiles), at 0.71-0.91
    of the faster baseline. Within the few rounds they once lost (4096x2048x512 nt with GELU, the
    MLP run's forward, 6% slower than the 128-row swapped tiles); since a BF16 bias is loaded as
    the k loop starts (hopper_epilogue.cuh's BiasPairs) they beat those tiles on all seven
    few-round grids of K = 256-512 of neither set where the rule took them (SHORT_K_PINGPONG_FEW),
    1.11-1.42x (2560x2560x512 nt 15.2 us against 21.7, cuBLASLt 13.7; 3072x2048x256 9.3 against
    13.4, 9.4), so they take the few rounds too from K = SHORT_K_FEW_PINGPONG_MIN_K, with 16-bit
    D, what the fit and the check (SHORT_K_PINGPONG_FEW_CHECK) measured. Below that K the swapped
    tiles stay (at K = 54 the fastest candidate of the H200's tuning set, above), and with FP32 D,
    whose swapped tiles store whole sectors from registers: the one validation shape the rule
    took with FP32 D, 1870x2811x295, ran 24.9 us against the swapped tiles' 21.9
    (results/h100-80gb-hbm3/bench-few-rounds-validation-bf16.txt), and FP32 D was then left out
    of the rule (a choice made after seeing a validation shape: said so in docs/hopper.md).

    With 16-bit D, past K = SHORT_K_SWAPPED_16BIT_K, whole 128 x 256 tiles with PDL instead
    (SHORT_K_WIDE_TILE, adjusted as the vote's pick is: on these full grids ragged_n and
    unaligned_rows are the adjustments that can apply). Found in the MLP
    training run (tools/probes/mlp_gemm_split.py, SHORT_K_16BIT_STEP): its two 4096x2048x2048 GEMMs
    in the 128-row swapped tiles made the step 2.9-3.4% longer each than on cuBLASLt, in 128 x 256
    tiles 1.0%, though timed alone and hot the two were 4% apart. H100, BF16 D, alternately timed
    on ten shapes of K = 1024-2048 of neither corpus set (SHORT_K_16BIT_HOT, SHORT_K_16BIT_COLD):
    at K = 1536-2048 the swapped tiles lost to the better 128 x 256 form on all seven, hot by
    1.3-8.4% and with L2 flushed before each launch by 1.8-25% (4096x2048x2048 62.9 us against
    50.5, cuBLASLt 48.4); at K = 1024-1280 they won hot by 3-9% and were level cold. Checked on
    seven shapes chosen after (SHORT_K_16BIT_CHECK and its -cold twin): cold 1.059x the swapped
    tiles (geometric mean), slower on one by 1.1%; hot level (0.999x), slower on four, by up to
    10% (2048x8192x1664 nt with GELU). The training run went from 0.93x to 0.962x torch's samples
    per second. FP32 D keeps the swapped tiles: the fit's shapes with FP32 D (SHORT_K_FP32_HOT,
    SHORT_K_FP32_COLD) had them faster hot on eight of ten and slower cold on five, by 5-16%, at K
    from 1536 to 2048 where they also won (12288x6144x2048): no bound on K splits them. The
    validation run, all FP32 D, had shown its K = 1536-2048 shapes moving both ways under them,
    seen before this change.
    """
    m, n, k = problem.m, problem.n, problem.k
    tiles = ceil_div(m, 128) * ceil_div(n, 128)
    if m <= selection.SMALL_M or not SHORT_K_MIN <= k <= SHORT_K_MAX or problem.trans_a or \
            tiles < selection.PINGPONG_MIN_WAVES * SMS:
        return None
    few = ceil_div(m, SHORT_K_TILE["DECODE"]) * ceil_div(n, 128) < SHORT_K_FEW_ROUNDS * 2 * SMS
    if k <= SHORT_K_PINGPONG_K and (not few or (k >= SHORT_K_FEW_PINGPONG_MIN_K and problem.out_dtype != "fp32")):
        clustered = tiles >= SHORT_K_PINGPONG_CLUSTER_WAVES * SMS
        return ({**selection.PINGPONG_TILE, **({"CM": 2} if clustered else {})},
                f"K = {k}: {tiles} ping-pong tiles of 128 x 128" + (" in 2 x 1 clusters" if clustered else "")
                + f" (H100: 3072x5120x512 31.2 us against 43.7 for the swapped tiles; {SHORT_K_PINGPONG_PROBE})")
    if k > SHORT_K_SWAPPED_16BIT_K and problem.out_dtype != "fp32":
        why = (f"K = {k} with 16-bit D: 128 x 256 tiles, not the swapped ones (H100, L2 flushed before each launch: "
               f"2304x8192x2048 112.5 us against 129.9; {SHORT_K_16BIT_COLD})")
        return adjusted(problem, dict(SHORT_K_WIDE_TILE), why)
    tile = SHORT_K_FEW_TILE if few else SHORT_K_TILE
    rows, swapped = tile["DECODE"], ceil_div(m, tile["DECODE"]) * ceil_div(n, 128)
    return (dict(tile),
            f"K = {k}: {swapped} swapped ping-pong tiles of {rows} x 128 in 1 x 2 clusters (H100: 6144x8192x1024 "
            f"164.9 us against 199.3 for the vote's pick; {SHORT_K_PROBE if rows == 160 else SHORT_K_SMALL_GRIDS})")


# grid_fill_choice: a grid of at most FILL_TILES 128 x 64 tiles (a third of the SMs) is filled
# by split-K up to FILL_UNITS units, each slice keeping >= FILL_SLICE_K of K
FILL_TILES, FILL_UNITS, FILL_SLICE_K = 44, 88, 1408
GRID_FILL_PROBE = "results/h100-80gb-hbm3/probe-grid-fill.txt"
# ... and first by split-K inside clusters of 64 x 64 tiles: at most CLUSTER_SPLIT_UNITS CTAs,
# each range >= TAIL_MIN_K_TILES k tiles
CLUSTER_SPLIT_UNITS = 112
CLUSTER_SPLIT_PROBE = "results/h100-80gb-hbm3/probe-grid-fill-cluster-split-small.txt"
TRANSPOSED_SMALL_M_PROBE = "results/h100-80gb-hbm3/probe-transposed-small-m.txt"  # tools/probes/transposed_small_m.py
RAGGED_SAVING = 0.08  # ragged_n: the share of computed columns 128 x 192 tiles must save
ROW_PROBE = "results/h100-80gb-hbm3/probe-grid-fill-rows.txt"
ROW_PROBE_A = "results/h100-80gb-hbm3/probe-grid-fill-rows-a.txt"
ROW_BYTES = 128  # unaligned_rows: stored rows in multiples of this read at the full rate
ROW_MIN_K = 1024  # unaligned_rows: the shallowest K it clusters at


def fill_tiles(problem: GemmProblem) -> int:
    """The 128 x 64 tiles that cover C: at most FILL_TILES make the small grid grid_fill_choice fills."""
    return ceil_div(problem.m, 128) * ceil_div(problem.n, 64)


def grid_fill_choice(problem: GemmProblem) -> tuple[dict[str, int], str] | None:
    """Split-K tiles for a small grid past the decode tiles' M, or at any M with A stored
    transposed (at most FILL_TILES 128 x 64 tiles), else None. The vote goes wrong there: the
    tuning set has few such shapes, and the neighbours it finds split 128 x 128 tiles, too few
    units to keep the SMs reading.

    First, split-K inside clusters (CK: the ranges of a tile add up through distributed shared
    memory, no workspace, so PDL too) over 64 x 64 tiles: the most CTAs of a cluster (2-4) that
    keep the grid at <= CLUSTER_SPLIT_UNITS CTAs and each range >= TAIL_MIN_K_TILES k tiles.
    Measured on the H100 on 12 small grids of neither corpus set, every form verified, beside
    cuBLAS and cuBLASLt (tools/probes/grid_fill.py --cluster-split, CLUSTER_SPLIT_PROBE): 1.15-1.62x
    faster than the workspace split-K below (geometric mean 1.38x), within 6.3% of the fastest
    form probed (64 x 128 tiles, or fewer ranges), e.g. 64x896x7168 7.88 us against 12.77
    (cuBLASLt 8.03), 200x300x5000 11.77 against 16.54 (cuBLAS 15.81), 256x448x7680 10.63 against
    14.38 (9.29). Past 112 CTAs the clusters ran up to 1.6x slower (384x384x4096: 4 ranges, 144
    CTAs, 11.66 us against 8.58 with 2; 96x1280x5120: 3 ranges, 120 CTAs, 16.97 against 11.51
    with 2), likely two CTAs of a cluster sharing an SM (not measured apart).

    Else (K too short to split so, or more than CLUSTER_SPLIT_UNITS / 2 tiles of 64 x 64), split-K
    through the workspace:

    Measured on the H100 on shapes of neither corpus set (tools/probes/grid_fill.py,
    GRID_FILL_PROBE: every tile form, whole and split 2-8 ways, beside cuBLAS and cuBLASLt); on
    the 10 small grids it covers the rule below picks the fastest configuration (one within 0.2%
    of it at 64x896x7168), 1.21-1.52x faster than the vote's pick: e.g. 256x320x8192 14.4 us
    against 20.1 (cuBLASLt 8.8), 64x896x7168 13.2 against 19.4 (8.3), 640x96x3000 10.6 against
    16.1 (7.9). The faster baseline stays ahead on every one (0.60-0.86 of it).

    - Tiles: 64 x 64 (one consumer, two CTAs an SM) where at most FILL_TILES of them cover C,
      else 128 x 64 (256x1344x8192: 18.3 us split 2 ways, 64 x 64 split 2 ways 20.8).
    - Split-K: the most slices that keep tiles x slices <= FILL_UNITS (two thirds of the SMs:
      more units, each with a shorter slice, lost, e.g. 128 x 64 split 4 at 256x1344x8192 35.0
      us) and each slice >= FILL_SLICE_K of K (480x200x2560 with 1280 a slice lost to whole
      tiles, 10.3 against 9.7 us; 640x96x3000 with 1500 won, 10.6 against 11.2). PDL only
      without split-K, as elsewhere.

    At M <= DECODE_MAX_M with A stored K x M (layouts tn and tt: a weight gradient with few
    output rows) only the vote picked before, from neighbours timed with A row-major; the
    decode tiles, read M-major there, lost to the clusters on these small grids
    (transposed_decode_choice: 16x2048x4096 CK=3 9.6 us against 9.9 at best). On the H100, on
    seven such shapes of neither corpus set, BF16 D (TRANSPOSED_SMALL_M_PROBE: every candidate
    and split form, verified, timed alternately), on the three small grids this rule covers it
    picks the fastest form probed, 1.13-1.85x the vote's pick: 16x2048x4096 9.49 us against
    12.91 (cuBLASLt 8.40), 32x1024x8192 9.20 against 16.98 (cuBLAS 7.77), 32x2048x2048 7.02
    against 7.95 (cuBLASLt 6.05). On the four larger grids (8x4096x4096, 24x3072x6144, ...) the
    vote stays, and every form probed ran at 0.49-0.92 of the faster baseline: any_shape's
    64-row tiles at a few rows of M, where the decode tiles would be the form.
    """
    large = fill_tiles(problem)
    if (problem.m <= DECODE_MAX_M and not problem.trans_a) or large > FILL_TILES:
        return None
    small = ceil_div(problem.m, 64) * ceil_div(problem.n, 64)
    ck = _split_k(small, problem.k, geo.TAIL_MIN_K_TILES * geo.k_tile("bf16"), max(CK.choices),
                  room=CLUSTER_SPLIT_UNITS)
    if ck > 1:
        evidence = (f"A stored transposed (H100: 16x2048x4096 tn 9.49 us against 12.91 for the "
                    f"vote's pick; {TRANSPOSED_SMALL_M_PROBE})" if problem.m <= DECODE_MAX_M else
                    f"H100: 64x896x7168 7.88 us against 12.77 for split-K through memory; {CLUSTER_SPLIT_PROBE}")
        return ({**selection.TILE_64x64, "CK": ck},
                f"{small} tiles of 64x64, split-K in clusters of {ck} to fill a small grid ({evidence})")
    tile, tiles, label = ((selection.TILE_64x64, small, "64x64") if small <= FILL_TILES
                          else (selection.TILE_128x64, large, "128x64"))
    splits = _split_k(tiles, problem.k, FILL_SLICE_K, max(SPLITS.choices), room=FILL_UNITS)
    return ({**selection.no_pdl(tile), "SPLITS": splits} if splits > 1 else dict(tile),
            f"{tiles} tiles of {label}" + (f", {splits}-way split-K" if splits > 1 else ", PDL")
            + f" to fill a small grid (H100: 256x320x8192 14.4 us against 20.1 for the vote's pick; {GRID_FILL_PROBE})")


def plain_tiles(t: Mapping[str, int]) -> bool:
    """Whether a pick (sparse tunables) runs any_shape's whole tiles on their own: no split-K
    (SPLITS, CK), not the decode or swapped entries, no ping-pong or column halves. The rules
    after the vote (one_tile_row, underfilled_grid, unaligned_rows, without_pdl) change only such picks."""
    get = t.get
    return (get("SPLITS", 1) == 1 and get("CK", 1) == 1 and not get("DECODE") and not get("SWAPPED")
            and not get("PINGPONG") and get("NSPLIT", 1) == 1)


def two_consumer_tiles(t: Mapping[str, int], widths: tuple[int, ...]) -> bool:
    """Whether a pick (sparse tunables) runs plain_tiles of 128 rows (two consumers) and one of
    ``widths`` columns: the picks each rule after the vote changes, by their width."""
    return t.get("BN", 256) in widths and t.get("CONSUMERS", 2) == 2 and plain_tiles(t)


def unclustered(t: Mapping[str, int]) -> bool:
    """Whether a pick (sparse tunables) runs without a CM x CN cluster."""
    return t.get("CM", 1) * t.get("CN", 1) == 1


ONE_WAVE_PROBE = "results/h100-80gb-hbm3/probe-vote-candidates-1024.txt"  # tools/probes/vote_candidates.py
ONE_WAVE_FIRST_CHECK = "results/h100-80gb-hbm3/probe-one-wave-128x64.txt"  # ... on shapes chosen after
ONE_WAVE_CHECKS = ("results/h100-80gb-hbm3/probe-one-wave-128x64-after.txt",  # ... after ONE_WAVE_MAX_K
                   "results/h100-80gb-hbm3/probe-one-wave-128x64-layouts.txt")  # linear_configs.py, BF16 D
ONE_WAVE_MAX_K = 4096  # at and past it 128 x 64 tiles lost (1024x1024x4096, 1152x896x6144)


def one_wave(problem: GemmProblem, tunables: dict[str, int], why: str) -> tuple[dict[str, int], str]:
    """128 x 64 tiles (two consumers, 8 stages, PDL) where they make one full wave, FULL_GRID to
    SMS tiles, past M = 128 and at K < ONE_WAVE_MAX_K: every SM one tile, where the vote's picks
    leave half the SMs idle (64 tiles of 128 x 128, which half_grid_split then splits in clusters
    of two) or run two CTAs of one consumer an SM. The vote measures a grid in 128 x 128 tiles,
    which puts these shapes beside grids that 128 x 64 tiles fill in two waves or more.

    The H100's table has two tuning shapes of such grids at K <= 4096, both won by these tiles
    (256x4096x4096, 256x3584x3584); at deep K split-K won (256x4096x14336, 256x3584x18944); at
    2642x325x1734 (odd N), the one tuning shape the rule changes, they measured 1.5% slower than
    the vote's pick there (64 x 128 tiles of one consumer) and 4.5% behind split-K in clusters of
    two. Measured on the H100, every candidate the vote offers verified and timed alternately
    beside cuBLAS and cuBLASLt, on shapes of neither corpus set: ONE_WAVE_PROBE
    (tools/probes/vote_candidates.py), 1024^3 6.92 us against 7.75 for the vote's pick (cuBLASLt
    7.15), and the fastest of ours at 960^3 and 896x1152x1024, where the vote took them; 1.17x
    and 1.32x slower than the fastest of ours at 1024x1280x896 and 1088^3 (two waves). First
    check, on shapes chosen after (ONE_WAVE_FIRST_CHECK): the fastest of ours on the four grids
    at K = 1024-2560 that the vote gave other tiles, 1.16-1.28x its pick (1024x960x2048 10.85 us
    against 13.91, cuBLAS 9.35); at K = 4096 and 6144 4% and 15% behind the vote's split
    (1024x1024x4096, 1152x896x6144), which set ONE_WAVE_MAX_K after that check. Checked again on
    nine calls chosen after the bound (ONE_WAVE_CHECKS: four with FP32 D, five nt and tn with BF16
    D): the fastest of ours on all nine, 1.06-1.26x the pick before (512x2048x3584 14.19 us against
    17.88, cuBLASLt 15.00; 1024x1024x2048 nt 10.70 against 12.35, 10.07), at 0.76-1.06 of the faster
    baseline. No validation shape has such a grid."""
    tiles = ceil_div(problem.m, 128) * ceil_div(problem.n, 64)
    one_wave_grid = problem.m > selection.SMALL_M and problem.k < ONE_WAVE_MAX_K and FULL_GRID < tiles <= SMS
    if not one_wave_grid or tunables == selection.TILE_128x64:
        return tunables, why
    return (dict(selection.TILE_128x64),
            f"{why}; {tiles} tiles of 128x64 make one full wave at K < {ONE_WAVE_MAX_K}: those tiles instead "
            f"(H100: 512x2048x3584 14.19 us against 17.88; {ONE_WAVE_CHECKS[0]})")


ONE_TILE_ROW_PROBE = "results/h100-80gb-hbm3/probe-short-k-m128.txt"


def one_tile_row(problem: GemmProblem, tunables: dict[str, int], why: str) -> tuple[dict[str, int], str]:
    """128 x 64 tiles (two consumers, 8 stages, PDL) instead of a pick of 64-row tiles (one
    consumer, unsplit, no cluster) for 64 < M <= 128: there two rows of 64-row tiles read every B
    tile twice where one row of 128-row tiles reads it once, at the same number of CTAs as 64 x 128
    tiles. The tuning set has no model shape between M = 32 and 256, and the vote took 64 x 128
    tiles of one consumer from its M = 256 neighbours on short-K shapes.

    Measured on the H100 on the six shapes of neither corpus set where the vote picked them
    (ONE_TILE_ROW_PROBE, every candidate of the vote timed): 128 x 64 tiles beat the pick on all
    six, 128x8192x2048 12.5 us against 15.6 (cuBLASLt 10.7), 128x6144x2048 11.0 against 12.1,
    128x4096x1024 6.0 against 7.0, 128x6144x1536 9.1 against 9.5, 128x5120x1536 9.0 against 9.3,
    112x7168x2048 12.7 against 12.8; they were the fastest candidate on three (64 x 64 tiles of
    one consumer were at 128x4096x1024, 5.6 us, 64-row decode tiles at 128x5120x1536 and
    128x6144x1536, 8.7-8.8 us)."""
    single_rows = tunables.get("CONSUMERS", 2) == 1 and plain_tiles(tunables) and unclustered(tunables)
    if not 64 < problem.m <= 128 or not single_rows:
        return tunables, why
    return ({**selection.TILE_128x64},
            f"{why}; M = {problem.m}: 128 x 64 tiles, one tile row reading B once "
            "(H100: 128x8192x2048 12.5 us against 15.6 for 64 x 128 tiles of one consumer)")


UNDERFILLED_PROBE = "results/h100-80gb-hbm3/probe-half-grid.txt"  # tools/probes/pdl_band.py
UNDERFILLED_WAVE_PROBES = ("results/h100-80gb-hbm3/probe-linear-configs-tn.txt",
                           "results/h100-80gb-hbm3/probe-linear-configs-wave.txt")  # linear_configs.py
UNDERFILLED_WAVE_CHECK = "results/h100-80gb-hbm3/probe-linear-configs-wave-check.txt"  # ... --check-wave
UNDERFILLED_MIN_K = 4096  # past half the SMs, the shallowest K measured


def underfilled_grid(problem: GemmProblem, tunables: dict[str, int], why: str) -> tuple[dict[str, int], str]:
    """128 x 128 tiles (6 stages, PDL, no cluster) instead of a pick of unsplit 128 x 256 tiles
    that fill at most half the SMs, or at most three quarters of them at K >= UNDERFILLED_MIN_K:
    twice the CTAs, and past a wave the tail split (TAIL) cuts the last one's tiles at least two
    ways. The vote measures a grid in 128 x 128 tiles, so it reaches such shapes from neighbours
    whose 128 x 256 grids were full.

    At most half the SMs. The H100's table (tuning shapes of M > 128): on all 20 whose grid holds
    at most 66 tiles of 128 x 256, the 128 x 128 tiles were faster than them, e.g. 1999x883x1170
    237 TFLOP/s against 168, 256x6144x4096 464 against 301; they were never the fastest candidate
    there. In tools/probes/pdl_band.py (PDL_PROBE) the vote's 128 x 256 pick at 1536x1024x4096 (48
    tiles) ran 41.3 us, 128 x 128 tiles 23.5; at 2048x1024x3072 (64) 32.6 against 21.4. Checked on
    eight shapes of neither set chosen after, where the vote picked such tiles (UNDERFILLED_PROBE,
    each tile form with and without PDL): the pick now 1.48-1.81x faster than the 128 x 256 tiles
    with PDL, e.g. 1152x1280x6144 34.4 us against 60.3, 2560x512x8192 43.7 against 79.0, at
    0.74-1.01 of the faster baseline; the 128 x 256 tiles without PDL were slower still (the
    tile, not PDL, loses there). At 2560x768x8192 the vote's pick had a 2 x 1 cluster, not timed:
    the unclustered 128 x 256 tiles stand for it.

    Up to three quarters, deep K. H100, BF16 D, alternately timed (UNDERFILLED_WAVE_PROBES, shapes
    of neither set, every candidate of the vote): on the four shapes of 70-72 tiles of 128 x 256
    at K = 6144-10240, six grids with the layouts, where the vote picked them (in a 2 x 1 cluster
    or not), the 128 x 128 tiles with PDL were 1.13-1.48x faster than the pick: 2304x896x6144
    40.9 us against 60.6 (cuBLASLt 34.9), 1792x1280x10240 83.7 against 99.0, 1536x1536x8192
    68.0 against 82.3 (tn 66.8 against 82.5), 3072x768x8192 69.6 against 84.8 (tn 71.8 against
    83.9); at 144 tiles of 128 x 128 the tail split runs the last 12 four ways. Checked on eight
    shapes of 72-98 tiles at K = 4096-12288 chosen after (UNDERFILLED_WAVE_CHECK), where the vote
    picked 128 x 256 tiles in a 2 x 1 cluster: the pick (128 x 128 tiles, no PDL past half the SMs
    at K >= 4096: without_pdl) faster on all eight, 1.05-1.87x (geometric mean 1.22x):
    3328x640x8192 48.5 us against 90.9 (cuBLASLt 46.4), 1408x1792x12288 96.9 against 125.3
    (81.7), 896x3584x8192 79.0 against 82.7 (cuBLAS 79.9); still 0.75-1.01 of the faster
    baseline. Past half the SMs not where N asks for 128 x 192 tiles (ragged_n), which the probes
    did not compare with these: the check's 2176x1152x6144 (N = 6 x 192) was measured before that
    bound and now takes ragged_n's 128 x 192 tiles; no validation shape changes pick."""
    wide = two_consumer_tiles(tunables, (256,))
    tiles = ceil_div(problem.m, 128) * ceil_div(problem.n, 256)
    most = SMS // 2 if problem.k < UNDERFILLED_MIN_K or ragged_columns(problem) else 3 * SMS // 4
    if not wide or problem.m <= 128 or tiles > most:
        return tunables, why
    measured = ("half", f"1536x1024x4096 23.5 us against 41.3; {UNDERFILLED_PROBE}") if tiles <= SMS // 2 else \
        ("three quarters", f"3328x640x8192 48.5 us against 90.9; {UNDERFILLED_WAVE_CHECK}")
    return (dict(selection.TILE_128x128),
            f"{why}; {tiles} tiles of 128x256 fill at most {measured[0]} of the SMs: 128 x 128 tiles, twice the CTAs "
            f"(H100: {measured[1]})")


HALF_GRID_SPLIT_PROBE = "results/h100-80gb-hbm3/probe-mid-grid.txt"
HALF_GRID_SPLIT_CHECK = "results/h100-80gb-hbm3/probe-mid-grid-check.txt"
HALF_GRID_SPLIT_MIN_K = 2048  # the probe's least K


def half_grid_split(problem: GemmProblem, tunables: dict[str, int], why: str) -> tuple[dict[str, int], str]:
    """Split-K inside clusters of two CTAs (CK=2) for a pick of whole, unclustered 128 x 128 tiles
    (two consumers) that fill at most half the SMs, at M > 128 and K >= HALF_GRID_SPLIT_MIN_K: twice
    the CTAs, each half of a tile's k range, the two partials added through distributed shared
    memory (no workspace). The vote reaches such grids from tuning shapes of M = 256 or of full
    grids, and its table has few of them (seven of 24-66 tiles, all at M = 256).

    H100, BF16 D, every form verified and timed alternately beside cuBLAS and cuBLASLt (tools/probes/
    linear_configs.py --mid-grid, HALF_GRID_SPLIT_PROBE: twelve grids of 24-66 tiles of 128 x 128
    of neither corpus set, K = 2048-12288, nn, nt and tn): the tiles split in clusters of two beat
    the same tiles whole on all twelve, 1.06-1.59x; on the four where the vote picked them whole,
    1.06-1.21x (1536x640x8192 33.7 us against 40.7, cuBLASLt 25.5; 2048x512x4096 tn 18.9 against
    21.8, 16.5; 1024x1024x4096 18.5 against 21.7, cuBLAS 16.0), though 64 x 128 tiles of one
    consumer ran faster still at 2048x384x2048 (10.7 us against 11.8). Where the vote picked
    otherwise (128 x 64 tiles, split-K through memory: eight shapes) its pick was within 4% of the
    fastest form probed. Checked on ten shapes chosen after, where the pick without it is the whole
    tiles (HALF_GRID_SPLIT_CHECK: nn, nt, tn, K = 2048-14336): faster than them on all ten, 1.07-1.34x
    (geometric mean 1.19x; 1536x384x5120 nt 19.5 us against 26.1), still 0.67-0.84 of the faster
    baseline (cuBLASLt 13.1 there); 64 x 128 tiles of one consumer ran faster at 3328x256x2048."""
    tiles = ceil_div(problem.m, 128) * ceil_div(problem.n, 128)
    if (not two_consumer_tiles(tunables, (128,)) or not unclustered(tunables) or problem.m <= 128
            or tiles > SMS // 2 or problem.k < HALF_GRID_SPLIT_MIN_K):
        return tunables, why
    return ({**tunables, "CK": 2},
            f"{why}; {tiles} tiles of 128x128 fill at most half the SMs: split-K in clusters of two (H100: "
            f"1536x640x8192 33.7 us against 40.7; {HALF_GRID_SPLIT_PROBE})")


def computed_columns(problem: GemmProblem, bn: int) -> int:
    """The columns tiles BN wide compute: N rounded up to whole tiles."""
    return ceil_div(problem.n, bn) * bn


def ragged_columns(problem: GemmProblem) -> bool:
    """Whether 128 x 192 tiles compute at least RAGGED_SAVING fewer columns than 128 x 256 ones."""
    return computed_columns(problem, 192) <= (1 - RAGGED_SAVING) * computed_columns(problem, 256)


def ragged_n(problem: GemmProblem, tunables: dict[str, int], why: str) -> tuple[dict[str, int], str]:
    """128 x 192 tiles instead of a pick of 128 x 256 ones (unsplit) where 192-column tiles
    compute at least RAGGED_SAVING fewer columns (N = 192 j, e.g. 1344: 1536 columns in
    256-column tiles, 12.5% more; the smallest saving measured, 2112, is 8.3%; a smaller one, as
    N = 4800's 1.3%, is left to the larger tile). Measured on the H100 on six full grids of
    neither corpus set (GRID_FILL_PROBE): it won on all six, without a cluster, against the
    vote's 128 x 256 pick (with or without a 2 x 1 cluster): 8192x320x4096 43.3 us against 78.8 (cuBLASLt 39.0), 2048x1344x4096 35.7 against
    46.7 (36.1), 8192x1152x3072 87.9 against 108.6 (83.3), 8192x2112x2048 121.1 against 125.5
    (108.6); with a 2 x 1 cluster they ran 0-8% slower than without."""
    if tunables.get("BN", 256) != 256 or tunables.get("SPLITS", 1) > 1 or tunables.get("SWAPPED") or \
            not ragged_columns(problem):
        return tunables, why
    kept = {name: value for name, value in tunables.items() if name not in ("CM", "CN")}
    return ({**kept, "BN": 192},
            f"{why}; N = {problem.n}: 128 x 192 tiles, {computed_columns(problem, 192)} columns computed against "
            f"{computed_columns(problem, 256)} "
            "(H100: 8192x320x4096 43.3 us against 78.8 for 128 x 256 tiles)")


TRANSPOSED_A_PROBE = "results/h100-80gb-hbm3/probe-linear-configs-tn.txt"  # tools/probes/linear_configs.py --tn
TRANSPOSED_A_CHECK = "results/h100-80gb-hbm3/probe-linear-configs-check-tn.txt"  # ... --check


def stored_row_bytes(problem: GemmProblem) -> dict[str, int]:
    """The bytes of a stored row of A and of B: K long (M where A is stored transposed), N long
    (K where B is stored transposed)."""
    itemsize = geo.ITEMSIZE["bf16"]
    return {"A": (problem.m if problem.trans_a else problem.k) * itemsize,
            "B": (problem.k if problem.trans_b else problem.n) * itemsize}


def transposed_unclustered(problem: GemmProblem, tunables: dict[str, int], why: str) -> tuple[dict[str, int], str]:
    """The same 128 x 256 tiles without their 2 x 1 cluster for a vote's pick of whole 128 x 256
    tiles in one (CM=2) where A is stored transposed (layouts tn, tt: a weight gradient dW =
    dY^T X) and A's and B's rows are 128-byte multiples. The vote's neighbours were timed with A
    row-major, where the sweep had the two within about 1% of each other on most shapes.

    H100, BF16 D, alternately timed (tools/probes/linear_configs.py, shapes of neither corpus
    set). Written from TRANSPOSED_A_PROBE (--tn) and the MLP training run's dW 2048x2048x4096:
    without the cluster the tiles were faster on all 7 tn shapes where the vote clustered them,
    by 0.8-9.8% (4096x1024x8192 89.0 us against 97.7, cuBLAS 93.3; 2048x2048x4096 47.3 against
    49.6, cuBLAS 48.4). Checked on 9 tn shapes chosen after (TRANSPOSED_A_CHECK): faster on 7,
    by 0.2-1.6% (8192x1024x4096 89.4 us against 90.8, 4608x1536x4096 86.7 against 88.1), slower
    on 2, by 0.3-0.9% (3072x3072x8192 206.9 against 205.0): a small gain, about 0.5%.

    Not for A row-major: the --tn run's row-major twins ran 0.8-5.1% faster unclustered, and so
    did 9 of 9 more in the first check's run, but on 8 shapes chosen after those the cluster won
    6, by up to 4.7% (6656x2560x3584 159.0 us against 166.5;
    results/h100-80gb-hbm3/probe-linear-configs-check-nn.txt): the difference moves with the
    visit. The ping-pong tiles in a cluster are left alone (at 2048x5632x2048 tn the cluster was
    the faster, 82.4 us against 87.2), as are packed operands and unaligned rows (unaligned_rows
    clusters those on its own measurements)."""
    wide_pair = two_consumer_tiles(tunables, (256,)) and tunables.get("CM", 1) == 2 and tunables.get("CN", 1) == 1
    aligned = all(size % ROW_BYTES == 0 for size in stored_row_bytes(problem).values())
    if not problem.trans_a or not wide_pair or not aligned:
        return tunables, why
    return ({name: value for name, value in tunables.items() if name != "CM"},
            f"{why}; A stored transposed: no 2 x 1 cluster (H100: 4096x1024x8192 tn 89.0 us against 97.7 "
            f"clustered; {TRANSPOSED_A_PROBE})")


def unaligned_rows(problem: GemmProblem, tunables: dict[str, int], why: str) -> tuple[dict[str, int], str]:
    """A 2 x 1 cluster (CM=2: two tile rows share each B tile by multicast) for a pick of
    unsplit, unclustered 128 x 256 or 128 x 192 tiles where A's or B's rows, stored dense, are
    16-byte (read in place) but not ROW_BYTES-byte multiples. Those tiles then read their
    operands slower than their loop hides, most where a row is 16 bytes off a 32-byte multiple
    (L2's sector: each 128-byte row of a box spans five sectors, not four), and most for B;
    the cluster halves the B reads. The tuning set holds one such full grid, 2000x3000x4000
    (583 TFLOP/s clustered against 418), too few for the vote to learn it.

    Measured on the H100 on full grids of neither corpus set (tools/probes/grid_fill.py,
    ROW_PROBE and ROW_PROBE_A), one operand's alignment changed at a time: 3328x5376x1792 (both
    aligned) 114.3 us unclustered, 113.3 clustered; 3300x5400x1792 (B's rows 10800 bytes) 160.4
    against 113.8; 3300x5400x1800 (both) 188.4 against 136.7 (cuBLASLt 107.3). Five shapes
    measured after the rule was written: 1.28-1.52x (4500x3704x3000 193.0 us against 276.8).
    B's rows a 32-byte but not a 128-byte multiple: 1.07-1.14x (3328x5408x1792 114.1 against
    129.8). Only A's rows unaligned: 1.02-1.09x on four shapes (3328x5376x1800 116.9 against
    127.7, 5120x3072x1800 98.3 against 100.5), where an aligned neighbour lost 1%
    (2560x6144x2176). Not applied at K < ROW_MIN_K (at K <= 465 the tuning table has the
    cluster 4-6% slower); rows TMA cannot read in place are packed first, at a 128-byte pitch
    (geometry.packed_ld)."""
    unaligned = {name: size for name, size in stored_row_bytes(problem).items() if size % 16 == 0 and size % ROW_BYTES}
    wide_single = two_consumer_tiles(tunables, (192, 256)) and unclustered(tunables)
    if not wide_single or not unaligned or problem.k < ROW_MIN_K:
        return tunables, why
    said = " and ".join(f"{name}'s rows are {size} bytes" for name, size in unaligned.items())
    return ({**tunables, "CM": 2},
            f"{why}; {said}, not a multiple of {ROW_BYTES}: a 2 x 1 cluster shares each B tile "
            "(H100: 3300x5400x1792 113.8 us against 160.4 unclustered)")


PDL_PROBE = "results/h100-80gb-hbm3/probe-pdl-band.txt"  # tools/probes/pdl_band.py
PDL_MIN_K = 4096  # without_pdl: the shallowest K it drops PDL at
PDL_CHECKS = ("results/h100-80gb-hbm3/probe-pdl-band-check.txt", "results/h100-80gb-hbm3/probe-pdl-band-check-2.txt")
PDL_ONE_ROW_PROBE = "results/h100-80gb-hbm3/probe-pdl-band-one-row.txt"
PDL_ONE_ROW_CHECK = "results/h100-80gb-hbm3/probe-pdl-band-one-row-check.txt"


def without_pdl(problem: GemmProblem, tunables: dict[str, int], why: str) -> tuple[dict[str, int], str]:
    """No PDL for a pick of whole 128 x 64 or 128 x 128 tiles (two consumers, no cluster, no
    split) where they are more than half the SMs' worth (one CTA an SM) and K >= PDL_MIN_K, but
    for 128 x 64 tiles over a single tile row (M <= 128).
    Launched back to back with PDL, such grids ran up to 1.4x slower than without; below half
    the SMs PDL won, and at shorter K it won about as often as it lost (its gain, the prologue
    under the previous grid's tail, is a larger share of a short GEMM). Why it loses is not
    measured apart; the 128 x 256 tiles, in the same probe, kept their gain from it.

    Measured on the H100 on ten shapes of neither corpus set, each tile form with and without
    PDL, verified, timed alternately (tools/probes/pdl_band.py, PDL_PROBE). Past half the SMs at
    K >= 4096 PDL off was faster in 10 of 11 pairs, e.g. 1024x704x6144 (88 tiles of 128 x 64)
    23.9 us against 30.3, 1280x640x4096 (100) 15.5 against 19.0, 2560x4608x4096 (720 of 128 x
    128) 147.4 against 168.1, and 4.6% slower at 1536x1024x4096 (96 of 128 x 128); at K = 2048
    and 3072 it won 2 of 4 pairs; at 36-66 tiles PDL won all six, by 4-8%. At 1024^3 (128 tiles
    of 128 x 64) PDL won, 7.2 us against 8.3 (results/h100-80gb-hbm3/pdl-graph-and-stream.txt).

    Checked on shapes chosen after, each pick both ways (PDL_CHECKS), in the rule's first form,
    which took 128 x 64 tiles over one tile row too: it was right in 15 of 20. Where it drops PDL
    it was right in 5 of 6, e.g. 1920x576x6656 (75 of 128 x 128) 36.5 us against 54.2,
    1152x640x5120 (90 of 128 x 64) 20.0 against 27.3; 2% slower at 128x5632x4096.
    Where it keeps PDL it was right in 10 of 14 (at 66 tiles, at 96x7680x3072, and on 8 of the 10
    shapes of K = 2048-3328 past half the SMs in the second check, by 2-6%) and missed four gains:
    128x8960x2048 (70 tiles) 16.9 us without it against 21.2, 1536x704x2560 16.6 against 18.8,
    112x9216x2304 21.4 against 23.2, 1664x896x3584 21.5 against 22.1. A bound of K >= 2048,
    fitted on the first check, lost the second: PDL won on 8 of its 10 shapes of K < 4096.

    A single tile row (M = 128), eight shapes of neither set past half the SMs at K >= 4096
    (PDL_ONE_ROW_PROBE): with 128 x 128 tiles PDL off won two (128x9728x4096 35.0 us against
    38.7) and tied two; with 128 x 64 tiles PDL won three of four (128x8704x4096 36.9 against
    39.0, 128x6400x4608 25.7 against 27.3), as at 128x5632x4096 in the first check. Checked on
    eleven more (PDL_ONE_ROW_CHECK): right on six (two within 0.3%), 1-8% slower on five
    (128x5120x9216, 128 x 64 tiles, 43.7 us with PDL against 40.5)."""
    get = tunables.get
    whole = two_consumer_tiles(tunables, (64, 128)) and unclustered(tunables)
    tiles = ceil_div(problem.m, 128) * ceil_div(problem.n, get("BN", 256))
    one_row_of_narrow = problem.m <= 128 and get("BN") == 64
    if not whole or not get("PDL") or tiles <= SMS // 2 or problem.k < PDL_MIN_K or one_row_of_narrow:
        return tunables, why
    return (selection.no_pdl(tunables),
            f"{why}; {tiles} tiles of 128x{get('BN')}, more than half the SMs, K >= {PDL_MIN_K}: no PDL "
            f"(H100: 1024x704x6144 23.9 us against 30.3 with it; {PDL_PROBE})")


def analytic_choice(problem: GemmProblem, gpu_name: str) -> tuple[dict[str, int], str]:
    """Tunables of ``hopper_bf16``/``hopper_fp16`` for a shape, from the measurements in
    cu/hopper/any_shape.cu and cluster_multicast.cu (H100, and H200 where marked; sized for
    132 SMs on any sm_90 GPU).

    - A full grid of 128 x 256 tiles (>= ~0.9 x #SMs): any_shape 128 x 256 with TMA stores of
      C, a 2 x 1 cluster from two waves up (H200, graph replays: 206 us at 4096^3 against 209
      for the swapped-roles entry, 26.8 at 2048^3 against 27.6); packing first where A or B
      rows are not 16-byte multiples (H100, before TMA stores: 504 TFLOP/s at 4093x4091x4099).
    - Narrow N (<= 128) or too few 128 x 256 tiles, but a full grid of 128 x 128: 128 x 128
      tiles, 6 stages (321 at 16384x128x4096).
    - Fewer tiles still: split-K where every slice keeps >= 4096 of K and all units stay
      resident (2 splits, 2 x 1 cluster over an even number of tile rows, 128 x 128 x 6: 579 at
      1024x1024x16384); else 128 x 64 tiles, 8 stages, TMA stores (H100, three sweeps with
      cuBLAS beside, results/h100-80gb-hbm3/autotune-hopper-small-grids.txt: 1024^3 306-311
      TFLOP/s against 292-296 for the 64 x 128 tiles of one consumer, two CTAs an SM, chosen
      before, and cuBLAS 297-309; split-K only added reduction time there).
    - PDL (programmatic dependent launch) everywhere but split-K and packed operands. H100,
      back-to-back calls on a held stream (results/h100-80gb-hbm3/pdl-graph-and-stream.txt):
      1024^3 7.23 us against 8.27 without (cuBLAS 7.00-7.38), 2048^3 27.2-27.4 against
      28.3-29.0, 16384x128x4096 53.0 against 55.2; with split-K it lost (58.2 against 56.5 at
      1024x1024x16384); behind a packing pass it has nothing to overlap."""
    m, n, k = problem.m, problem.n, problem.k
    tiles_256 = ceil_div(m, 128) * ceil_div(n, 256)
    tiles_128 = ceil_div(m, 128) * ceil_div(n, 128)
    if n > 128 and tiles_256 >= FULL_GRID:
        # the rows as stored: A's are K long (M when stored transposed), B's N (K when transposed)
        a_row, b_row = (m if problem.trans_a else k), (k if problem.trans_b else n)
        if a_row % 8 == 0 and b_row % 8 == 0:
            cm = 2 if tiles_256 >= 2 * SMS else 1
            return ({"CM": cm, "PDL": 1} if cm > 1 else {"PDL": 1},
                    f"{tiles_256} tiles of 128x256, TMA stores of C, {cm}x1 cluster, PDL "
                    f"(H200: {'206 us at 4096^3' if cm == 2 else '26.8 us at 2048^3'})")
        return ({}, f"{tiles_256} tiles of 128x256, A or B rows not 16-byte multiples: packed first "
                    "(H100, before TMA stores: 504 TFLOP/s at 4093x4091x4099)")
    if tiles_128 >= FULL_GRID:
        return ({"BN": 128, "STAGES": 6, "PDL": 1},
                f"{tiles_128} tiles of 128x128, 6 stages, PDL (H100: 324 TFLOP/s at 16384x128x4096)")
    cm = 2 if ceil_div(m, 128) % 2 == 0 else 1  # no cluster half past the edge
    splits = _deep_k_splits(ceil_div(ceil_div(m, 128), cm) * ceil_div(n, 128), k, cm)
    if splits >= 2:
        return ({"BN": 128, "STAGES": 6, "CM": cm, "SPLITS": splits},
                f"{tiles_128} tiles of 128x128, deep K: {splits}-way split-K, {cm}x1 cluster "
                "(H100: 579 TFLOP/s at 1024x1024x16384)")
    return ({"BN": 64, "STAGES": 8, "PDL": 1},
            f"{tiles_128} tiles of 128x128: {ceil_div(m, 128) * ceil_div(n, 64)} of 128x64, 8 stages, PDL "
            "(H100: 306-311 TFLOP/s at 1024^3)")


def ladder(precision: str) -> tuple[KernelSpec, ...]:
    last = register_a() if precision == "tf32" else any_shape(precision)
    return wgmma_tma(precision), warp_specialized(precision), persistent(precision), cluster(precision), last


SPECS = (*ladder("bf16"), *ladder("fp16"), *ladder("tf32"))
