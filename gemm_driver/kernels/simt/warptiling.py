"""The warptiled rung (cu/simt/warptiled.cu), its stream-K rung and its autotuned configuration.

The tiling hierarchy is block (BM x BN) -> warp (WM x WN) -> lane (TM x TN), with a
STAGES-deep cp.async pipeline over k tiles of BK. The rules below are the kernel's
static_asserts and resource limits in words, so a configuration that cannot work is
refused before NVRTC sees it.

The schedule is a tunable of the same kernel, so the tuner can choose it per shape like a
tile: data-parallel (one CTA per C tile), split-K (SPLITK CTAs per C tile) or stream-K
(STREAMK: a persistent grid sharing out the k steps, stream_k.py). ``stream_k`` is the rung
that always runs stream-K, with the 128 x 128 tiling that small problems favour.
"""

from __future__ import annotations

import dataclasses

from ...cuda.arch_limits import MAX_SHARED_PER_BLOCK  # sm_90's opt-in; smaller GPUs refuse it at load
from ...problem import GemmProblem
from .. import tuned
from ..spec import SGEMM_SIGNATURE, KernelSpec, Tunable, ceil_div
from ..transposing import taking_layouts
from . import stream_k

MAX_ACCUMULATORS = 128  # TM * TN above this cannot fit in 255 registers


def threads(t) -> int:
    return 32 * (t["BM"] // t["WM"]) * (t["BN"] // t["WN"])


def shared_bytes(t) -> int:
    """The cp.async ring: STAGES x (transposed A with its 4-float skew + B), in bytes."""
    return 4 * t["STAGES"] * t["BK"] * (t["BM"] + 4 + t["BN"])


def _warp_tiles_fit(p, t):
    if t["BM"] % t["WM"] or t["BN"] % t["WN"]:
        return f"the warp tile WM x WN = {t['WM']}x{t['WN']} must divide the block tile {t['BM']}x{t['BN']}"
    return None


def _lanes_fill_the_warp(p, t):
    lanes_m, lanes_n = t["WM"] // t["TM"], t["WN"] // t["TN"]
    if t["WM"] % t["TM"] or t["WN"] % t["TN"] or lanes_m * lanes_n != 32:
        return (f"(WM/TM) x (WN/TN) lanes must be exactly 32, one per lane of a warp; "
                f"got ({t['WM']}/{t['TM']}) x ({t['WN']}/{t['TN']})")
    if lanes_m > 8 or lanes_n > 8:
        return (f"at most 8 lanes along m and along n (WM/TM = {lanes_m}, WN/TN = {lanes_n}), so a warp's "
                f"fragment loads stay within 128 bytes, one shared-memory wavefront")
    return None


def _tiles_split_evenly(p, t):
    n = threads(t)
    if t["BM"] * 8 % n:
        return f"the {n} threads must divide BM*8 = {t['BM'] * 8}: each copies floats of an 8-wide slice of A"
    if t["BM"] * t["BK"] % n or t["BN"] * t["BK"] % (4 * n):
        return (f"the {n} threads must split the A tile BM*BK = {t['BM'] * t['BK']} into whole floats and "
                f"the B tile BN*BK = {t['BN'] * t['BK']} into whole float4s")
    return None


def _fits_registers(p, t):
    if t["TM"] * t["TN"] > MAX_ACCUMULATORS:
        return f"TM*TN = {t['TM'] * t['TN']} accumulators per thread; at most {MAX_ACCUMULATORS} fit without spilling"
    return None


def _fits_shared_memory(p, t):
    if shared_bytes(t) > MAX_SHARED_PER_BLOCK:
        return f"STAGES*BK*(BM+4+BN)*4 = {shared_bytes(t)} bytes of shared memory; at most {MAX_SHARED_PER_BLOCK}"
    return None


def _one_schedule(p, t):
    if t["STREAMK"] and t["SPLITK"] > 1:
        return f"stream-K (STREAMK=1) splits the k loop itself; it takes SPLITK=1, got {t['SPLITK']}"
    if t["PER_SM"] and not t["STREAMK"]:
        return f"PER_SM={t['PER_SM']} sizes a stream-K grid; it needs STREAMK=1"
    return None


TUNABLES = (
    Tunable("BM", 128, (32, 64, 128, 256), "block tile rows"),
    Tunable("BN", 256, (32, 64, 128, 256), "block tile columns"),
    Tunable("BK", 16, (8, 16, 32), "k tile depth"),
    Tunable("WM", 64, (16, 32, 64, 128), "warp tile rows"),
    Tunable("WN", 64, (16, 32, 64, 128), "warp tile columns"),
    Tunable("TM", 8, (4, 8, 16), "rows per lane (groups of 4)"),
    Tunable("TN", 16, (4, 8, 16), "columns per lane (groups of 4)"),
    Tunable("STAGES", 3, (2, 3, 4, 5), "cp.async pipeline depth"),
    Tunable("SPLITK", 1, (1, 2, 3, 4, 8), "blocks sharing the k loop of one C tile (grid z)"),
    Tunable("STREAMK", 0, (0, 1), "1: stream-K, a persistent grid sharing out all k steps; 0: a CTA per C tile"),
    Tunable("MIN_BLOCKS", 0, (0, 1), "CTAs an SM the registers are budgeted for (launch bounds): 0 aims for "
            "16 warps an SM, 1 lets a CTA take up to 255 registers a thread"),
    # Read by the launch recipe only (not a template argument): one build serves every value.
    Tunable("PER_SM", 0, (0, 1, 2), "stream-K CTAs per SM: 0 as many as are resident at once, else at most this"),
)
RULES = (_warp_tiles_fit, _lanes_fill_the_warp, _tiles_split_evenly, _fits_registers, _fits_shared_memory,
         _one_schedule)
ENTRY = "sgemm_warptiled<{BM}, {BN}, {BK}, {WM}, {WN}, {TM}, {TN}, {STAGES}, {SPLITK}, {STREAMK}, {MIN_BLOCKS}>"


def schedule_label(tunables) -> str:
    """How a configuration splits the work, for reports: 'data-parallel', 'split-K 4', 'stream-K',
    'stream-K 1/SM'; '' for tunables without a schedule (other kernels)."""
    if tunables.get("STREAMK"):
        return f"stream-K {tunables['PER_SM']}/SM" if tunables.get("PER_SM") else "stream-K"
    if "SPLITK" not in tunables:
        return ""
    return "data-parallel" if tunables["SPLITK"] == 1 else f"split-K {tunables['SPLITK']}"


def scratch_bytes(p, t) -> tuple[int, int]:
    """Split-K's device scratch: the partial sums of every slice over whole tiles, and one
    counter per C tile (zeroed once; the last block of a tile resets its counter). Stream-K's
    depends on the grid, known at launch: stream_k.scratch_bytes."""
    if t["SPLITK"] == 1:
        return 0, 0
    rows, cols = ceil_div(p.m, t["BM"]) * t["BM"], ceil_div(p.n, t["BN"]) * t["BN"]
    return 4 * t["SPLITK"] * rows * cols, 4 * ceil_div(p.m, t["BM"]) * ceil_div(p.n, t["BN"])

# Every layout: operands stored transposed are copied transposed first (transposing.py).
warptiled = taking_layouts(KernelSpec(
    name="warptiled",
    description="block -> warp -> lane tiling, conflict-free LDS.128 fragments, cp.async multi-stage pipeline",
    source="cu/simt/warptiled.cu",
    entry=ENTRY,
    tunables=TUNABLES,
    rules=RULES,
    block=lambda t: (threads(t), 1, 1),
    # The tile grid. Stream-K launches a 1-D persistent grid sized at launch (stream_k.py), never
    # more CTAs than this, so the grid limits checked against it hold for stream-K too.
    grid=lambda p, t: (ceil_div(p.n, t["BN"]), ceil_div(p.m, t["BM"]), t["SPLITK"]),
    dynamic_smem=shared_bytes,
    signature=(*SGEMM_SIGNATURE, "ptr", "ptr"),  # + split-K/stream-K workspace and counters/flags
    scratch=scratch_bytes,
    launch_recipe=stream_k.make_recipe(),
    min_cc=(8, 0),
    # What the CPU tests compile (the spill gate on sm_80 and sm_90): one of each block shape.
    checked=(
        {"BM": 128, "BN": 128, "BK": 16, "WM": 64, "WN": 32, "TM": 8, "TN": 8, "STAGES": 4, "SPLITK": 2},
        {"BM": 64, "BN": 64, "BK": 16, "WM": 32, "WN": 32, "TM": 8, "TN": 4, "STAGES": 3, "SPLITK": 4},
        {"BM": 64, "BN": 32, "BK": 16, "WM": 32, "WN": 16, "TM": 4, "TN": 4, "STAGES": 2},
        {"BM": 32, "BN": 128, "BK": 16, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "STAGES": 3, "SPLITK": 2},
    ),
), itemsize=4)

# The stream-K rung: warptiled with STREAMK=1 and the tiling that won at 1000-1024^3 with split-K
# (128x128, 32x64 warps, 8x8 lanes: two CTAs an SM, 64 tiles at 1024^3 for 264 resident slots).
STREAM_K_TILING = {"BM": 128, "BN": 128, "BK": 16, "WM": 32, "WN": 64, "TM": 8, "TN": 8, "STAGES": 3}

stream_k_rung = dataclasses.replace(  # the same kernel, build, launch recipe and layouts as warptiled
    warptiled,
    name="stream_k",
    description="warptiled with stream-K: a persistent grid sharing out all k steps, data-parallel waves first "
                "for large grids",
    tunables=tuple(Tunable(t.name, {**STREAM_K_TILING, "STREAMK": 1}.get(t.name, t.default), t.choices, t.help)
                   for t in TUNABLES),
    # The spill gate: the stream-K tilings of TUNE_SPACE (sm_80 and sm_90 each compile clean).
    checked=(
        {"BN": 256, "WM": 64, "WN": 64, "TN": 16},
        {"WM": 64, "WN": 64, "TN": 16},
        {"BM": 64, "BN": 64, "WM": 32, "WN": 32, "TN": 4},
        {"BM": 64, "BN": 128, "WM": 32, "WN": 64, "TN": 8, "MIN_BLOCKS": 1},
        {"BM": 32, "BN": 128, "WM": 32, "WN": 32, "TM": 4, "TN": 8},
    ),
)

# The sweep behind `autotuned`, narrowed by earlier sweeps on an H100 (BK=32, 16x8 lanes and
# 16-warp blocks never placed; BK=8, 2 stages and split-K 3 were never first): 128x256 tiles
# with 8x16 lanes won from 2048^3 up, 128x128 with split-K at 1000-1024^3, 64x64 with split-K at
# 512^3. Each tiling is tried with the schedules that can matter for it: data-parallel, split-K
# for grids with too few tiles, and stream-K, per resident slot and (where two CTAs fit an SM)
# one per SM. 64x128 tiles of 4 warps (cuBLAS's choice at 1024^3, per ncu) run stream-K only with
# MIN_BLOCKS=1: under the 128-register cap that stream-K tiling spills (40 bytes of stack); with
# 135 registers (3 CTAs an SM instead of 4) it was first at 1000^3 and 1024^3 in the H100 sweep
# (autotune-stream-k-min-blocks.txt); 4 stages, BK 8 or 32, 64x32 warps, 4x16 lanes, 128x64 and
# 64x256 tiles around it did not beat it (autotune-fp32-4warp-variants.txt). 32x128 tiles of 4
# warps (4x8 per lane) are for small M: at M = 16 every 64-row tile computes four times the rows
# there are, and the H200's validation run had its 25 shapes of M = 16 at 0.62-0.92x cuBLAS before
# the sweep had them, 1.00-1.66x after (docs/corpus.md). Split-K 8 over 64 x 64 tiles and split-K 4
# over 64 x 32 are for narrow N with a few hundred rows (554x57x1517: 9 tiles of 64 x 64), the
# lowest ratios of that run. 30 configurations a shape, so a sweep of the 9 default shapes
# (tools/autotune.py) stays near 5 minutes.
DP, SPLIT_2, SPLIT_4, SPLIT_8 = (1, 0, 0), (2, 0, 0), (4, 0, 0), (8, 0, 0)  # SPLITK, STREAMK, PER_SM
SK, SK_PER_SM = (1, 1, 0), (1, 1, 1)
TILINGS = (
    # (BM, BN, WM, WN, TM, TN), STAGES choices, schedules, MIN_BLOCKS choices
    ((128, 256, 64, 64, 8, 16), (3,), (DP, SPLIT_2, SPLIT_4, SK), (0,)),  # 8 warps, one CTA an SM
    ((128, 256, 64, 64, 8, 16), (2,), (SPLIT_4,), (0,)),  # deep K (1024x1024x16384)
    ((128, 128, 64, 64, 8, 16), (3,), (DP, SK), (0,)),  # 4 warps, two CTAs an SM
    ((128, 128, 32, 64, 8, 8), (3,), (DP, SPLIT_2, SPLIT_4, SK, SK_PER_SM), (0,)),  # 8 warps, two CTAs an SM
    ((128, 128, 32, 64, 8, 8), (4,), (DP, SPLIT_2), (0,)),  # 4093x4091x4099's and a close second at 1024^3
    ((64, 128, 32, 64, 8, 8), (3,), (DP, SPLIT_2), (0,)),
    ((64, 128, 32, 64, 8, 8), (3,), (SK,), (1,)),  # 4 warps, stream-K on small grids
    ((64, 64, 32, 32, 8, 4), (3,), (DP, SPLIT_2, SPLIT_4, SPLIT_8, SK, SK_PER_SM), (0,)),
    ((64, 32, 32, 16, 4, 4), (3,), (DP, SPLIT_4), (0,)),  # narrow N
    ((32, 128, 32, 32, 4, 8), (3,), (DP, SPLIT_2, SPLIT_4, SK, SK_PER_SM), (0,)),  # small M
)
_PRODUCT = (
    {"BM": bm, "BN": bn, "BK": 16, "WM": wm, "WN": wn, "TM": tm, "TN": tn, "STAGES": stages, "SPLITK": split,
     "STREAMK": streamk, "PER_SM": per_sm, "MIN_BLOCKS": min_blocks}
    for (bm, bn, wm, wn, tm, tn), stage_choices, schedules, min_blocks_choices in TILINGS
    for stages in stage_choices for split, streamk, per_sm in schedules for min_blocks in min_blocks_choices
)
TUNE_SPACE = tuple(_PRODUCT)  # tests/test_autotune.py: the rules accept every entry


def named(tunables) -> dict[str, int]:
    """A configuration by the tunables it sets away from warptiled's defaults: how a table names
    it (bench/autotune.table_document; tables written before that named every tunable)."""
    defaults = warptiled.resolve()
    return {k: v for k, v in warptiled.resolve(tunables).items() if defaults[k] != v}


def offered(problem: GemmProblem) -> list[dict[str, int]]:
    """The configurations of TUNE_SPACE that can run ``problem``, as a table names them."""
    return tuned.runnable(warptiled, problem, TUNE_SPACE, named)


def choose_autotuned(problem: GemmProblem, gpu_name: str) -> tuple[dict[str, int], str]:
    """The vote of this GPU's table (tuned.vote over ``offered``), warptiled's defaults without one."""
    table = tuned.load_table(gpu_name)
    if table is None:
        return {}, "no tuned table for this GPU; warptiled defaults"
    picked = tuned.vote(table["entries"], problem, offered, named)
    return picked if picked is not None else ({}, "the tuned table measured none of these configurations near "
                                                  "this shape; warptiled defaults")


autotuned = dataclasses.replace(  # the same kernel, build, launch recipe and layouts as warptiled
    warptiled,
    name="autotuned",
    description="warptiled with the configuration (tiles and schedule) the nearest shapes of this GPU's "
                "tuning-set sweep predict fastest (gemm_driver/tuned/)",
    checked=({},),  # the same kernel as warptiled, which the tests build in several shapes
    choose=choose_autotuned,
)

SPECS = (warptiled, stream_k_rung, autotuned)
