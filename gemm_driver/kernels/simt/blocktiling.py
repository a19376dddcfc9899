"""The register-blocking rungs of the FP32 ladder: 1-D and 2-D blocktiling, vectorised,
bank-conflict-free and double-buffered (one .cu file each under cu/simt/).

Every rung takes a BM x BN tile of C per block and walks K in steps of BK; edges are
the kernels' job (zero-filled tiles, guarded stores), so the only rules here are the
ones a template instantiation cannot satisfy. Choice lists stay small: the CPU spill
gate compiles every combination for sm_80 and sm_90.
"""

from __future__ import annotations

from ..spec import KernelSpec, Tunable, ceil_div

MAX_STATIC_SMEM = 48 * 1024


def _grid(p, t):
    """Blocks along x walk N, so neighbouring blocks share A's row panel in L2."""
    return (ceil_div(p.n, t["BN"]), ceil_div(p.m, t["BM"]), 1)


def _threads_2d(t) -> int:
    return (t["BM"] // t["TM"]) * (t["BN"] // t["TN"])


def _fits_static_smem(bytes_of):
    def rule(p, t):
        need = bytes_of(t)
        if need > MAX_STATIC_SMEM:
            return f"static shared memory of {need} bytes exceeds {MAX_STATIC_SMEM} (BK*(BM+BN)*4)"
        return None
    return rule


def _plain_smem(t) -> int:
    return 4 * t["BK"] * (t["BM"] + t["BN"])


def _at_most_512_threads(p, t):
    threads = t["BM"] * t["BN"] // t["TM"]
    if threads > 512:
        return (f"BM*BN/TM = {threads} threads per block; at most 512 (1024 threads leave 64 registers "
                f"each, and the kernel spills)")
    return None


blocktile_1d = KernelSpec(
    name="blocktile_1d",
    description="each thread computes a column of TM results of a BM x BN block tile",
    source="cu/simt/blocktile_1d.cu",
    entry="sgemm_blocktile_1d<{BM}, {BN}, {BK}, {TM}>",
    tunables=(
        Tunable("BM", 64, (64, 128), "rows of C per block"),
        Tunable("BN", 64, (64,), "columns of C per block"),
        Tunable("BK", 8, (8, 16), "k per shared-memory tile"),
        Tunable("TM", 16, (8, 16), "rows of C per thread; BM*BN/TM threads per block"),
    ),
    rules=(_at_most_512_threads, _fits_static_smem(_plain_smem)),
    block=lambda t: (t["BM"] * t["BN"] // t["TM"], 1, 1),
    grid=_grid,
)

def _tile_2d(bm: int, bk: int) -> tuple[Tunable, ...]:
    """The 2-D rungs' tunables, with defaults from tools/ladder_sweep.py on the H100."""
    return (
        Tunable("BM", bm, (64, 128), "rows of C per block"),
        Tunable("BN", 128, (128,), "columns of C per block"),
        Tunable("BK", bk, (8, 16), "k per shared-memory tile"),
        Tunable("TM", 8, (8,), "rows of C per thread"),
        Tunable("TN", 8, (8,), "columns of C per thread; (BM/TM)*(BN/TN) threads per block"),
    )

blocktile_2d = KernelSpec(
    name="blocktile_2d",
    description="a TM x TN register tile per thread: outer products out of shared memory",
    source="cu/simt/blocktile_2d.cu",
    entry="sgemm_blocktile_2d<{BM}, {BN}, {BK}, {TM}, {TN}>",
    tunables=_tile_2d(bm=64, bk=8),
    rules=(_fits_static_smem(_plain_smem),),
    block=lambda t: (_threads_2d(t), 1, 1),
    grid=_grid,
)


def _fits_the_register_cap(p, t):
    # 128 x 128 tiles with BK = 16 need 127-128 of the 128 registers these rungs' launch bounds
    # allow; NVRTC 12.9's ptxas spilled in clean CI builds (bank_conflict_free 8 bytes on sm_90,
    # vectorized 28 on sm_80) where other builds did not: its allocation at the cap varies from
    # build to build, so the configuration is refused.
    if t["BM"] * t["BN"] >= 128 * 128 and t["BK"] >= 16:
        return f"BM={t['BM']}, BN={t['BN']} with BK={t['BK']} sits at the 128-register cap and can spill; use BK=8"
    return None


vectorized = KernelSpec(
    name="vectorized",
    description="blocktile_2d with float4 global loads and A transposed for 128-bit shared loads",
    source="cu/simt/vectorized.cu",
    entry="sgemm_vectorized<{BM}, {BN}, {BK}, {TM}, {TN}>",
    tunables=_tile_2d(bm=64, bk=8),
    rules=(_fits_the_register_cap, _fits_static_smem(_plain_smem)),
    block=lambda t: (_threads_2d(t), 1, 1),
    grid=_grid,
)


def _whole_float4s_per_thread(p, t):
    threads = _threads_2d(t)
    for what, floats in (("BM*BK", t["BM"] * t["BK"]), ("BK*BN", t["BK"] * t["BN"])):
        if floats // 4 % threads:
            return f"{what}/4 = {floats // 4} must be a multiple of the {threads} threads (whole float4s per thread)"
    return None


def _padded_smem(t) -> int:
    return 4 * t["BK"] * (t["BM"] + 4 + t["BN"])


bank_conflict_free = KernelSpec(
    name="bank_conflict_free",
    description="vectorized with A's shared rows padded and B fragments interleaved: no bank conflicts",
    source="cu/simt/bank_conflict_free.cu",
    entry="sgemm_bank_conflict_free<{BM}, {BN}, {BK}, {TM}, {TN}>",
    tunables=_tile_2d(bm=64, bk=16),
    rules=(_whole_float4s_per_thread, _fits_the_register_cap, _fits_static_smem(_padded_smem)),
    block=lambda t: (_threads_2d(t), 1, 1),
    grid=_grid,
)



def _prefetch_has_two_stages(p, t):
    if t["ASYNC"] == 0 and t["STAGES"] != 2:
        return f"STAGES={t['STAGES']} needs ASYNC=1: register prefetch (ASYNC=0) uses exactly 2 stages"
    return None


double_buffered = KernelSpec(
    name="double_buffered",
    description="bank_conflict_free with the next tiles' loads overlapping the math: "
                "register prefetch (ASYNC=0) or a cp.async ring of STAGES buffers (ASYNC=1, sm_80+)",
    source="cu/simt/double_buffered.cu",
    entry="sgemm_double_buffered<{BM}, {BN}, {BK}, {TM}, {TN}, {ASYNC}, {STAGES}>",
    tunables=(
        Tunable("BM", 128, (64, 128), "rows of C per block"),
        Tunable("BN", 128, (128,), "columns of C per block"),
        Tunable("BK", 8, (8,), "k per shared-memory tile (16 spills at the 128-register cap)"),
        Tunable("TM", 8, (8,), "rows of C per thread"),
        Tunable("TN", 8, (8,), "columns of C per thread; (BM/TM)*(BN/TN) threads per block"),
        Tunable("ASYNC", 0, (0, 1), "1: cp.async multi-stage pipeline (needs sm_80); 0: register prefetch"),
        Tunable("STAGES", 2, (2, 3, 4), "shared-memory buffers in flight (ASYNC=1; ASYNC=0 uses 2)"),
    ),
    rules=(_prefetch_has_two_stages, _whole_float4s_per_thread),
    block=lambda t: (_threads_2d(t), 1, 1),
    grid=_grid,
    dynamic_smem=lambda t: t["STAGES"] * _padded_smem(t),
)

SPECS = (blocktile_1d, blocktile_2d, vectorized, bank_conflict_free, double_buffered)
