// harness.cuh -- what the harness kernels that read C and D share (check_output.cu,
// reference_epilogue.cu): the output type's storage, decoded exactly, and a warp's sum.
//
// C and D are FP32, BF16 or FP16 (the problem's out_dtype; device_check.STORAGE numbers them
// as Storage does). Every value of the three is a float, so decoding is exact: the check of D
// and the reference's beta * C see the values as stored, as the host does.
#pragma once

enum Storage { FP32 = 0, BF16 = 1, FP16 = 2 };

// The bit pattern of element `index` of a buffer of `storage` elements (2-byte ones widened).
__device__ __forceinline__ unsigned stored_bits(const void* buffer, long long index, int storage) {
    return storage == FP32 ? static_cast<const unsigned*>(buffer)[index]
                           : static_cast<const unsigned short*>(buffer)[index];
}

__device__ __forceinline__ float decode(unsigned bits, int storage) {
    if (storage == FP32) return __uint_as_float(bits);
    if (storage == BF16) return __uint_as_float(bits << 16);  // BF16 is FP32's upper half: exact
    float value;
    unsigned short half = static_cast<unsigned short>(bits);
    asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(half));  // exact: every FP16 value is an FP32 value
    return value;
}

// The sum of v over the warp, in lane 0 (all 32 lanes must take part).
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
    for (int lane = 16; lane; lane >>= 1) v += __shfl_down_sync(0xffffffffu, v, lane);
    return v;
}
