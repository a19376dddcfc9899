"""The two WMMA rungs (cu/tensor/wmma.cu, wmma_smem.cu), in BF16 and FP16.

WMMA has no TF32 rung here: the m16n16k8 TF32 fragments would be a third fragment type for
a rung that exists to be overtaken; TF32 starts at mma_sync. Both rungs handle every edge,
leading dimension and alignment inside the kernel (staged fragments, element-wise copies),
so they launch as one kernel with the standard SGEMM arguments.
"""

from __future__ import annotations

from ..spec import KernelSpec, Tunable, ceil_div
from .common import MIN_CC, STORAGE, fits_shared_memory, itemsize, threads, warps

WARP_CHOICES = (1, 2, 4)


# --- rung 1: fragments straight from global memory --------------------------------------
def _wmma_fragments_fit(p, t):
    fragments = t["FRAGS_M"] * t["FRAGS_N"]
    if fragments > 16:
        return (f"FRAGS_M*FRAGS_N = {fragments} accumulator fragments a warp ({8 * fragments} FP32 a lane); "
                f"at most 16 fit in registers without spilling")
    return None


WMMA_TUNABLES = (
    Tunable("WARPS_M", 2, WARP_CHOICES, "warps along M in a block"),
    Tunable("WARPS_N", 2, WARP_CHOICES, "warps along N in a block"),
    Tunable("FRAGS_M", 4, (1, 2, 4), "16-row fragments a warp owns along M"),
    Tunable("FRAGS_N", 4, (1, 2, 4), "16-column fragments a warp owns along N"),
)


def _wmma_block_tile(t) -> tuple[int, int]:
    return t["WARPS_M"] * t["FRAGS_M"] * 16, t["WARPS_N"] * t["FRAGS_N"] * 16


def wmma(precision: str) -> KernelSpec:
    return KernelSpec(
        name=f"wmma_{precision}",
        description=("tensor cores through WMMA 16x16x16 fragments loaded from global memory "
                     "(the tutorial's loop, plus staged edge fragments)"),
        source="cu/tensor/wmma.cu",
        entry=f"wmma_gemm<{STORAGE[precision]}, {{WARPS_M}}, {{WARPS_N}}, {{FRAGS_M}}, {{FRAGS_N}}>",
        tunables=WMMA_TUNABLES,
        rules=(_wmma_fragments_fit,),
        block=lambda t: (threads(t), 1, 1),
        grid=lambda p, t: (ceil_div(p.n, _wmma_block_tile(t)[1]), ceil_div(p.m, _wmma_block_tile(t)[0]), 1),
        min_cc=MIN_CC,
        precision=precision,
        # Measured on the H100: 2x2 warps of 4x4 fragments best (105-109 TFLOP/s BF16 at
        # 4096^3); 2x4 warps of 2x4 and 4x2 of 4x2 behind it (69, 72).
        checked=({"WARPS_M": 2, "WARPS_N": 4, "FRAGS_M": 2, "FRAGS_N": 4},),
    )


# --- rung 2: shared-memory tiles and a cp.async pipeline --------------------------------
def wmma_smem_bytes(precision: str):
    """STAGES * (BM * (BK + 8) + BK * (BN + 8)) * sizeof(T): the padded rows of wmma_smem.cu."""
    size = itemsize(precision)
    return lambda t: t["STAGES"] * (t["BM"] * (t["BK"] + 8) + t["BK"] * (t["BN"] + 8)) * size


def _smem_warp_tiles(p, t):
    if t["BM"] % (t["WARPS_M"] * 16) or t["BN"] % (t["WARPS_N"] * 16):
        return (f"the {t['WARPS_M']}x{t['WARPS_N']} warps must split the block tile {t['BM']}x{t['BN']} "
                f"into whole 16x16 fragments (BM a multiple of 16*WARPS_M, BN of 16*WARPS_N)")
    fragments = (t["BM"] // t["WARPS_M"] // 16) * (t["BN"] // t["WARPS_N"] // 16)
    if fragments > 16:
        return (f"warp tile {t['BM'] // t['WARPS_M']}x{t['BN'] // t['WARPS_N']} is {fragments} accumulator "
                f"fragments ({8 * fragments} FP32 a lane); at most 16 fit in registers without spilling")
    return None


def _smem_chunks_divide(p, t):
    n = threads(t)
    a_chunks, b_chunks = t["BM"] * t["BK"] // 8, t["BK"] * t["BN"] // 8
    if a_chunks % n or b_chunks % n:
        return (f"the {n} threads must split the A tile ({a_chunks} chunks of 16 bytes) and the B tile "
                f"({b_chunks}) evenly")
    return None


def _smem_staging_fits(precision: str):
    bytes_of = wmma_smem_bytes(precision)

    def rule(p, t):
        if warps(t) * 1024 > bytes_of(t):
            return (f"the epilogue stages a 16x16 FP32 tile per warp ({warps(t) * 1024} bytes) in the "
                    f"pipeline's {bytes_of(t)} bytes of shared memory; more stages or bigger tiles")
        return None
    return rule


WMMA_SMEM_TUNABLES = (
    Tunable("BM", 128, (64, 128, 256), "block tile rows"),
    Tunable("BN", 128, (64, 128, 256), "block tile columns"),
    Tunable("BK", 32, (16, 32, 64), "k tile depth"),
    Tunable("WARPS_M", 2, WARP_CHOICES, "warps along M in a block"),
    Tunable("WARPS_N", 2, WARP_CHOICES, "warps along N in a block"),
    Tunable("STAGES", 3, (2, 3, 4), "cp.async pipeline depth"),
)


def wmma_smem(precision: str) -> KernelSpec:
    smem = wmma_smem_bytes(precision)
    return KernelSpec(
        name=f"wmma_smem_{precision}",
        description="WMMA fragments from padded shared-memory tiles, block and warp tiling, cp.async pipeline",
        source="cu/tensor/wmma_smem.cu",
        entry=(f"wmma_smem_gemm<{STORAGE[precision]}, {{BM}}, {{BN}}, {{BK}}, {{WARPS_M}}, {{WARPS_N}}, "
               "{STAGES}>"),
        tunables=WMMA_SMEM_TUNABLES,
        rules=(_smem_warp_tiles, _smem_chunks_divide, _smem_staging_fits(precision),
               fits_shared_memory(smem, "STAGES*(BM*(BK+8)+BK*(BN+8))*sizeof(T)")),
        block=lambda t: (threads(t), 1, 1),
        grid=lambda p, t: (ceil_div(p.n, t["BN"]), ceil_div(p.m, t["BM"]), 1),
        dynamic_smem=smem,
        min_cc=MIN_CC,
        precision=precision,
        # Measured on the H100: 128x128x32, 2x2 warps, 3 stages (206-213 TFLOP/s BF16 at
        # 4096^3); 128x256x32 with 2x4 warps the same.
        checked=({"BN": 256, "WARPS_N": 4},),
    )
