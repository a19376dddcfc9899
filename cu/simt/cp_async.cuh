// cp_async.cuh -- asynchronous global -> shared copies (sm_80+), as inline PTX.
//
// cp.async copies without passing through registers, so a tile can be in flight while the
// threads compute on another one. The src-size operand makes every copy a predicated one:
// the first `src_bytes` bytes are read and the rest of the destination is zero-filled, so
// src_bytes = 0 writes zeros and reads nothing. That is how the kernels handle edges:
// rows past M, columns past N and k past K become zeros in shared memory, and the math
// needs no bounds checks at all.
#pragma once

__device__ __forceinline__ unsigned shared_address(const void* pointer) {
    return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

// One float. `.ca` (through L1) is the only cache mode allowed for 4-byte copies.
// `dst` is a shared-memory address (shared_address()), computed once by the caller. Below
// sm_80 the copies compile to nothing: kernels whose cp.async path is refused there (by a
// static_assert or a rule) still build their other paths for older GPUs.
__device__ __forceinline__ void cp_async_4(unsigned dst, const float* src, int src_bytes) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
#endif
}

// Four floats; both addresses 16-byte aligned. `.cg` bypasses L1: each tile is used once.
__device__ __forceinline__ void cp_async_16(unsigned dst, const float* src, int src_bytes) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
#endif
}

// The same, with the destination given as a pointer into shared memory.
__device__ __forceinline__ void cp_async_4(float* dst, const float* src, int src_bytes) {
    cp_async_4(shared_address(dst), src, src_bytes);
}
__device__ __forceinline__ void cp_async_16(float* dst, const float* src, int src_bytes) {
    cp_async_16(shared_address(dst), src, src_bytes);
}

__device__ __forceinline__ void cp_async_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Wait until at most PENDING committed groups are still in flight.
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" :: "n"(PENDING) : "memory");
#endif
}
