"""The warptiled rung (cu/warptiled.cu) and its autotuned configuration.

The tiling hierarchy is block (BM x BN) -> warp (WM x WN) -> lane (TM x TN), with a
STAGES-deep cp.async pipeline over k tiles of BK. The rules below are the kernel's
static_asserts and resource limits in words, so a configuration that cannot work is
refused before NVRTC sees it.
"""

from __future__ import annotations

from .. import autotune
from .spec import KernelSpec, Tunable, ceil_div

MAX_SHARED_PER_BLOCK = 227 * 1024  # sm_90 opt-in limit; smaller GPUs refuse at load with the driver's error
MAX_ACCUMULATORS = 64  # TM * TN above this spills at 128 registers per thread


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
    Tunable("BN", 128, (32, 64, 128, 256), "block tile columns"),
    Tunable("BK", 8, (8, 16, 32), "k tile depth"),
    Tunable("WM", 64, (16, 32, 64, 128), "warp tile rows"),
    Tunable("WN", 32, (16, 32, 64, 128), "warp tile columns"),
    Tunable("TM", 8, (4, 8), "rows per lane (groups of 4)"),
    Tunable("TN", 8, (4, 8), "columns per lane (groups of 4)"),
    Tunable("STAGES", 3, (2, 3, 4, 5), "cp.async pipeline depth"),
)

warptiled = KernelSpec(
    name="warptiled",
    description="block -> warp -> lane tiling, conflict-free LDS.128 fragments, cp.async multi-stage pipeline",
    source="cu/warptiled.cu",
    entry="sgemm_warptiled<{BM}, {BN}, {BK}, {WM}, {WN}, {TM}, {TN}, {STAGES}>",
    tunables=TUNABLES,
    rules=(_warp_tiles_fit, _lanes_fill_the_warp, _tiles_split_evenly, _fits_registers, _fits_shared_memory),
    block=lambda t: (threads(t), 1, 1),
    grid=lambda p, t: (ceil_div(p.n, t["BN"]), ceil_div(p.m, t["BM"]), 1),
    dynamic_smem=shared_bytes,
    min_cc=(8, 0),
    # What the CPU tests compile (the spill gate on sm_80 and sm_90): one of each block shape.
    checked=(
        {"BM": 128, "BN": 256, "BK": 16, "WM": 64, "WN": 32, "STAGES": 3},
        {"BM": 64, "BN": 64, "WM": 32, "WN": 32, "TN": 4, "STAGES": 4},
        {"BM": 64, "BN": 32, "BK": 16, "WM": 32, "WN": 16, "TM": 4, "TN": 4, "STAGES": 2},
    ),
)

# The sweep behind `autotuned`: block/warp/lane tilings from 64x64 (enough blocks to fill
# 132 SMs at 512^3) to 256x128 (the most reuse per byte at 8192^3), each with two k depths
# and three pipeline depths. Every entry must pass the rules above (a CPU test checks).
TILINGS = (
    # BM, BN, WM, WN, TM, TN
    (128, 128, 64, 32, 8, 8),  # 8 warps
    (128, 128, 32, 64, 8, 8),
    (128, 128, 32, 32, 4, 8),  # 16 warps, 32 accumulators each
    (128, 256, 64, 32, 8, 8),  # 16 warps, one block per SM
    (256, 128, 64, 32, 8, 8),
    (128, 64, 64, 32, 8, 8),   # 4 warps
    (64, 128, 32, 64, 8, 8),
    (64, 64, 32, 32, 8, 4),
    (64, 64, 32, 32, 4, 8),
    (64, 32, 32, 16, 4, 4),
)
_PRODUCT = (
    {"BM": bm, "BN": bn, "BK": bk, "WM": wm, "WN": wn, "TM": tm, "TN": tn, "STAGES": stages}
    for bm, bn, wm, wn, tm, tn in TILINGS for bk in (8, 16) for stages in (2, 3, 4)
)
TUNE_SPACE = tuple(c for c in _PRODUCT if warptiled.accepts(c))  # 16-thread-rows tilings need BK=16

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
    min_cc=warptiled.min_cc,
    checked=({},),  # the same kernel as warptiled, which the tests build in several shapes
    choose=lambda problem, gpu_name: autotune.pick(autotune.load_table(gpu_name), problem),
)

SPECS = (warptiled, autotuned)
