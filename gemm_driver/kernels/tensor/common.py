"""What the tensor-core specs share: the C++ operand type of each precision, the shared
memory limit, and the rules every tiled rung states the same way."""

from __future__ import annotations

from ...cuda.arch_limits import MAX_SHARED_PER_BLOCK
from ...precision import get as get_precision

# The template argument T of every cu/tensor kernel: the type A and B are stored in. TF32
# kernels read FP32 and round to TF32 inside (mma_ptx.cuh, to_tf32).
STORAGE = {"bf16": "__nv_bfloat16", "fp16": "__half", "tf32": "float"}
# Elements in one 16-byte chunk, the unit of every cp.async copy (tensor_common.cuh).
CHUNK_BYTES = 16
# The rules check the most any GPU gives a block (sm_90's opt-in 227 KiB). An A100 (sm_80) allows
# 163 KiB and sm_86/89 99 KiB: a larger configuration is refused there when the Session loads it
# (the Device's own limit). The defaults and the tune spaces stay at or below 144 KiB (and the
# defaults at 96 KiB, which fits them all).
MIN_CC = (8, 0)  # cp.async, ldmatrix, mma.sync m16n8k16 and BF16/TF32 all need sm_80


def itemsize(precision: str) -> int:
    return get_precision(precision).itemsize


def per_chunk(precision: str) -> int:
    return CHUNK_BYTES // itemsize(precision)


def warps(t) -> int:
    return t["WARPS_M"] * t["WARPS_N"]


def threads(t) -> int:
    return 32 * warps(t)


def fits_shared_memory(bytes_of, formula: str):
    """A rule: the dynamic shared memory ``bytes_of(t)`` within the per-block limit."""
    def rule(p, t):
        used = bytes_of(t)
        if used > MAX_SHARED_PER_BLOCK:
            return f"{formula} = {used} bytes of shared memory; at most {MAX_SHARED_PER_BLOCK}"
        return None
    return rule

