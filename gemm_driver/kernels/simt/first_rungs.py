"""The first FP32 rungs: naive, coalesced, shared-memory tiled, and naive in hand-written PTX."""

from __future__ import annotations

from ..spec import KernelSpec, Tunable, ceil_div

NAIVE_BLOCK = 32  # 32 x 32 threads, as in the worklogs' first kernel

naive = KernelSpec(
    name="naive",
    description="one thread per C element; threads of a warp walk rows (uncoalesced)",
    source="cu/simt/naive.cu",
    entry="sgemm_naive",
    block=lambda t: (NAIVE_BLOCK, NAIVE_BLOCK, 1),
    grid=lambda p, t: (ceil_div(p.m, NAIVE_BLOCK), ceil_div(p.n, NAIVE_BLOCK), 1),
)

ptx_naive = KernelSpec(
    name="ptx_naive",
    description="naive written by hand in PTX, loaded through the driver JIT",
    source="ptx/naive.ptx",
    entry="sgemm_naive_ptx",
    block=naive.block,
    grid=naive.grid,
    in_ladder=False,  # a side branch of the first rung: no "x prev rung" along the ladder
)

coalesced = KernelSpec(
    name="coalesced",
    description="naive with threads remapped so a warp reads B and writes C contiguously",
    source="cu/simt/coalesced.cu",
    entry="sgemm_coalesced<{BLOCK}>",
    tunables=(Tunable("BLOCK", 32, (8, 16, 32), "C tile edge; BLOCK*BLOCK threads per block"),),
    block=lambda t: (t["BLOCK"] * t["BLOCK"], 1, 1),
    grid=lambda p, t: (ceil_div(p.n, t["BLOCK"]), ceil_div(p.m, t["BLOCK"]), 1),
)

smem_tiled = KernelSpec(
    name="smem_tiled",
    description="TILE x TILE tiles of A and B staged in shared memory",
    source="cu/simt/smem_tiled.cu",
    entry="sgemm_smem_tiled<{TILE}, {PAD}>",
    tunables=(
        Tunable("TILE", 32, (16, 32), "tile edge; TILE*TILE threads per block"),
        Tunable("PAD", 0, (0, 1), "extra floats per shared-memory row (bank-conflict experiment)"),
    ),
    block=lambda t: (t["TILE"], t["TILE"], 1),
    grid=lambda p, t: (ceil_div(p.n, t["TILE"]), ceil_div(p.m, t["TILE"]), 1),
)

FIRST_RUNGS = (naive, coalesced, smem_tiled)
SIDE_BRANCHES = (ptx_naive,)
