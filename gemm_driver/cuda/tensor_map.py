"""TMA tensor maps: the 128 opaque bytes ``cuTensorMapEncodeTiled`` writes for a 2-D matrix.

A Hopper kernel takes a tensor map by value (``const __grid_constant__`` parameter) and hands
its address to ``cp.async.bulk.tensor``. The launcher passes it like any other argument:
cuLaunchKernel's ``kernelParams`` holds a pointer to each argument and the driver copies the
argument's bytes to the offset the cubin declares (64-byte aligned with CUDA 12 headers, 128
with CUDA 13), so a host copy of the 128 bytes is all a parameter needs (``as_kernel_param``).

The driver refuses a layout it cannot describe with a bare CUDA_ERROR_INVALID_VALUE. Every
rule is checked here first and refused with a one-line ValueError naming it, so a launcher can
tell "this operand must be packed into aligned scratch first" from a real error
(``tma_layout_problem`` answers that question without raising).

A launch at new addresses of the same shapes keeps its maps and changes only their global
address in place (``readdress``, cuTensorMapReplaceAddress), which costs far less host time
than encoding them again: a training step meets new activation addresses at most GEMMs.

Works with cuda-bindings 12.9 and 13.x (same enum names and calls); needs a driver only for
``encode_tiled_2d`` and ``readdress`` themselves.
"""

from __future__ import annotations

import ctypes
import struct

from .errors import check
from .stack import bindings

TENSOR_MAP_BYTES = 128
MAX_BOX = 256  # elements per box dimension
MAX_DIM = 2**32  # elements per tensor dimension
MAX_STRIDE = 2**40  # bytes
ALIGNMENT = 16  # bytes: global address and every row stride
SWIZZLES = (0, 32, 64, 128)  # bytes; 0 = no swizzle

# Storage of each precision the Hopper kernels read through TMA. tf32 operands are FP32 in
# memory (the tensor cores ignore the low mantissa bits), so they travel as FLOAT32; fp8 (e4m3)
# codes are bytes that TMA only copies, so they travel as UINT8 (zero fill is the code of +0).
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "tf32": 4, "fp8": 1}
_DRIVER_TYPE = {
    "bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
    "fp16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
    "fp32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
    "tf32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
    "fp8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
}
_DRIVER_SWIZZLE = {
    0: "CU_TENSOR_MAP_SWIZZLE_NONE",
    32: "CU_TENSOR_MAP_SWIZZLE_32B",
    64: "CU_TENSOR_MAP_SWIZZLE_64B",
    128: "CU_TENSOR_MAP_SWIZZLE_128B",
}


def element_bytes(dtype: str) -> int:
    try:
        return ELEMENT_BYTES[dtype]
    except KeyError:
        raise ValueError(f"tensor map element type {dtype!r} is not one of {', '.join(ELEMENT_BYTES)}") from None


def tma_layout_problem(address: int, ld: int, dtype: str) -> str | None:
    """Why TMA cannot read a row-major matrix at ``address`` with leading dimension ``ld``
    (elements), or None when it can. The answer decides whether an operand is packed first."""
    eb = element_bytes(dtype)
    if address % ALIGNMENT:
        return (
            f"TMA needs the global address {ALIGNMENT}-byte aligned; {address:#x} is "
            f"{address % ALIGNMENT} bytes past a {ALIGNMENT}-byte boundary"
        )
    if ld * eb % ALIGNMENT:
        return (
            f"TMA needs the row stride a multiple of {ALIGNMENT} bytes; leading dimension {ld} {dtype} "
            f"elements is {ld * eb} bytes (a multiple of {ALIGNMENT // eb} elements would do)"
        )
    if ld * eb >= MAX_STRIDE:
        return f"TMA needs the row stride below 2^40 bytes; {ld} {dtype} elements is {ld * eb} bytes"
    return None


def validate_tiled_2d(
    address: int, dtype: str, rows: int, cols: int, ld: int, box_rows: int, box_cols: int, swizzle: int
) -> None:
    """Raise ValueError naming the first TMA rule the 2-D layout breaks."""
    eb = element_bytes(dtype)
    for name, value in (("rows", rows), ("cols", cols)):
        if not 1 <= value <= MAX_DIM:
            raise ValueError(f"TMA needs every tensor dimension in [1, 2^32]; {name} = {value}")
    if ld < cols:
        raise ValueError(f"leading dimension {ld} is smaller than the row length cols = {cols}")
    problem = tma_layout_problem(address, ld, dtype)
    if problem:
        raise ValueError(problem)
    for name, value in (("box_rows", box_rows), ("box_cols", box_cols)):
        if not 1 <= value <= MAX_BOX:
            raise ValueError(f"TMA needs every box dimension in [1, {MAX_BOX}]; {name} = {value}")
    if box_cols * eb % ALIGNMENT:
        raise ValueError(
            f"TMA needs the box's inner extent a multiple of {ALIGNMENT} bytes; box_cols = {box_cols} {dtype} "
            f"elements is {box_cols * eb} bytes"
        )
    if swizzle not in SWIZZLES:
        raise ValueError(f"swizzle must be one of {SWIZZLES} bytes; got {swizzle}")
    if swizzle and box_cols * eb > swizzle:
        raise ValueError(
            f"a {swizzle}-byte swizzle needs the box's inner extent at most {swizzle} bytes; box_cols = "
            f"{box_cols} {dtype} elements is {box_cols * eb} bytes"
        )


def encode_tiled_2d(
    address: int,
    dtype: str,
    rows: int,
    cols: int,
    ld: int,
    box_rows: int,
    box_cols: int,
    swizzle: int = 128,
) -> bytes:
    """The tensor map of a row-major ``rows x cols`` matrix at device ``address`` with leading
    dimension ``ld`` (elements), read in boxes of ``box_rows x box_cols`` elements that land in
    shared memory with a ``swizzle``-byte swizzle. Out-of-bounds box elements read as zeros.
    Returns the 128 bytes to pass as the kernel's ``__grid_constant__`` argument."""
    validate_tiled_2d(address, dtype, rows, cols, ld, box_rows, box_cols, swizzle)
    driver = bindings("driver")
    eb = element_bytes(dtype)
    tensor_map = check(
        driver.cuTensorMapEncodeTiled(
            getattr(driver.CUtensorMapDataType, _DRIVER_TYPE[dtype]),
            2,
            address,
            [driver.cuuint64_t(cols), driver.cuuint64_t(rows)],  # innermost dimension first
            [driver.cuuint64_t(ld * eb)],  # byte strides of the outer dimensions
            [driver.cuuint32_t(box_cols), driver.cuuint32_t(box_rows)],
            [driver.cuuint32_t(1), driver.cuuint32_t(1)],
            driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            getattr(driver.CUtensorMapSwizzle, _DRIVER_SWIZZLE[swizzle]),
            driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        ),
        f"cuTensorMapEncodeTiled({dtype}, {rows}x{cols}, ld={ld}, box {box_rows}x{box_cols}, swizzle {swizzle})",
    )
    return opaque_bytes(tensor_map)


def readdress(map_address: int, address: int) -> None:
    """Point the tensor map stored at host address ``map_address`` at device ``address``, every
    other field kept. The caller has checked ``address`` against TMA's rules
    (``tma_layout_problem``); the driver refuses a misaligned one."""
    driver = bindings("driver")
    check(driver.cuTensorMapReplaceAddress(driver.CUtensorMap(_ptr=map_address), address),
          f"cuTensorMapReplaceAddress({address:#x})")


def opaque_bytes(tensor_map) -> bytes:
    """The 128 bytes of a cuda.bindings CUtensorMap (16 opaque 64-bit words)."""
    words = [int(w) for w in tensor_map.opaque]
    if len(words) != TENSOR_MAP_BYTES // 8:
        raise ValueError(f"a CUtensorMap holds {TENSOR_MAP_BYTES // 8} words; got {len(words)}")
    return struct.pack(f"<{len(words)}Q", *words)


class TensorMapParam(ctypes.Structure):
    """A kernel argument holding a tensor map: cuLaunchKernel copies its 128 bytes."""

    _fields_ = [("opaque", ctypes.c_uint64 * (TENSOR_MAP_BYTES // 8))]


def as_kernel_param(map_bytes: bytes) -> TensorMapParam:
    if len(map_bytes) != TENSOR_MAP_BYTES:
        raise ValueError(f"a tensor map is {TENSOR_MAP_BYTES} bytes; got {len(map_bytes)}")
    return TensorMapParam.from_buffer_copy(map_bytes)

