"""The warptiled rung (cu/simt/warptiled.cu) and its autotuned configuration.

The tiling hierarchy is block (BM x BN) -> warp (WM x WN) -> lane (TM x TN), with a
STAGES-deep cp.async pipeline over k tiles of BK. The rules below are the kernel's
static_asserts and resource limits in words, so a configuration that cannot work is
refused before NVRTC sees it.
"""

from __future__ import annotations

from .. import tuned
from ..spec import SGEMM_SIGNATURE, KernelSpec, Tunable, ceil_div

MAX_SHARED_PER_BLOCK = 227 * 1024  # sm_90 opt-in limit; smaller GPUs refuse at load with the driver's error
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


TUNABLES = (
    Tunable("BM", 128, (32, 64, 128, 256), "block tile rows"),
    Tunable("BN", 256, (32, 64, 128, 256), "block tile columns"),
    Tunable("BK", 16, (8, 16, 32), "k tile depth"),
    Tunable("WM", 64, (16, 32, 64, 128), "warp tile rows"),
    Tunable("WN", 64, (16, 32, 64, 128), "warp tile columns"),
    Tunable("TM", 8, (4, 8, 16), "rows per lane (groups of 4)"),
    Tunable("TN", 16, (4, 8, 16), "columns per lane (groups of 4)"),
    Tunable("STAGES", 3, (2, 3, 4, 5), "cp.async pipeline depth"),
    Tunable("SPLITK", 1, (1, 2, 3, 4), "blocks sharing the k loop of one C tile (grid z)"),
)


def scratch_bytes(p, t) -> tuple[int, int]:
    """Split-K's device scratch: the partial sums of every slice over whole tiles, and one
    counter per C tile (zeroed once; the last block of a tile resets its counter)."""
    if t["SPLITK"] == 1:
        return 0, 0
    rows, cols = ceil_div(p.m, t["BM"]) * t["BM"], ceil_div(p.n, t["BN"]) * t["BN"]
    return 4 * t["SPLITK"] * rows * cols, 4 * ceil_div(p.m, t["BM"]) * ceil_div(p.n, t["BN"])

warptiled = KernelSpec(
    name="warptiled",
    description="block -> warp -> lane tiling, conflict-free LDS.128 fragments, cp.async multi-stage pipeline",
    source="cu/simt/warptiled.cu",
    entry="sgemm_warptiled<{BM}, {BN}, {BK}, {WM}, {WN}, {TM}, {TN}, {STAGES}, {SPLITK}>",
    tunables=TUNABLES,
    rules=(_warp_tiles_fit, _lanes_fill_the_warp, _tiles_split_evenly, _fits_registers, _fits_shared_memory),
    block=lambda t: (threads(t), 1, 1),
    grid=lambda p, t: (ceil_div(p.n, t["BN"]), ceil_div(p.m, t["BM"]), t["SPLITK"]),
    dynamic_smem=shared_bytes,
    signature=(*SGEMM_SIGNATURE, "ptr", "ptr"),  # + split-K workspace and tile counters
    scratch=scratch_bytes,
    min_cc=(8, 0),
    # What the CPU tests compile (the spill gate on sm_80 and sm_90): one of each block shape.
    checked=(
        {"BM": 128, "BN": 128, "BK": 16, "WM": 64, "WN": 32, "TM": 8, "TN": 8, "STAGES": 4, "SPLITK": 2},
        {"BM": 64, "BN": 64, "BK": 16, "WM": 32, "WN": 32, "TM": 8, "TN": 4, "STAGES": 3, "SPLITK": 4},
        {"BM": 64, "BN": 32, "BK": 16, "WM": 32, "WN": 16, "TM": 4, "TN": 4, "STAGES": 2},
    ),
)

# The sweep behind `autotuned`, narrowed by earlier sweeps on an H100 (BK=32, 16x8 lanes and
# 16-warp blocks never placed): 128x256 tiles with 8x16 lanes win from 2048^3 up, 128x128
# with split-K at 1000-1024^3, 64x64 with split-K at 512^3. Each tiling is tried with the
# pipeline depths that were close, and with split-K for problems with too few C tiles.
TILINGS = (
    # (BM, BN, WM, WN, TM, TN), BK choices, STAGES choices, SPLITK choices
    ((128, 256, 64, 64, 8, 16), (16,), (2, 3), (1, 2, 4)),  # 8 warps, 128 accumulators a lane
    ((128, 128, 64, 64, 8, 16), (16,), (2, 3, 4), (1, 2, 4)),  # 4 warps
    ((128, 128, 64, 32, 8, 8), (16,), (3, 4), (1, 2, 3, 4)),  # 8 warps, 64 accumulators a lane
    ((128, 128, 32, 64, 8, 8), (16,), (3, 4), (1, 2, 4)),
    ((64, 128, 32, 64, 8, 8), (8, 16), (2, 3), (1, 2, 4)),
    ((64, 64, 32, 32, 8, 4), (16,), (3,), (1, 2, 4)),
    ((64, 32, 32, 16, 4, 4), (16,), (3,), (1, 2, 4)),
)
_PRODUCT = (
    {"BM": bm, "BN": bn, "BK": bk, "WM": wm, "WN": wn, "TM": tm, "TN": tn, "STAGES": stages, "SPLITK": split}
    for (bm, bn, wm, wn, tm, tn), bks, stage_choices, splits in TILINGS
    for bk in bks for stages in stage_choices for split in splits
)
TUNE_SPACE = tuple(_PRODUCT)  # tests/test_autotune.py: the rules accept every entry

autotuned = KernelSpec(
    name="autotuned",
    description="warptiled with the configuration tuned on this GPU for the nearest shape (gemm_driver/tuned/)",
    source=warptiled.source,
    entry=warptiled.entry,
    tunables=TUNABLES,
    rules=warptiled.rules,
    block=warptiled.block,
    grid=warptiled.grid,
    dynamic_smem=shared_bytes,
    signature=warptiled.signature,
    scratch=scratch_bytes,
    min_cc=warptiled.min_cc,
    checked=({},),  # the same kernel as warptiled, which the tests build in several shapes
    choose=lambda problem, gpu_name: tuned.pick(tuned.load_table(gpu_name), problem),
)

SPECS = (warptiled, autotuned)
