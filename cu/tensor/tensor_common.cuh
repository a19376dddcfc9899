// tensor_common.cuh -- what the sm_80+ tensor-core kernels share: operand types, the
// asynchronous copies, and the epilogue of one C element.
//
// Contract of every kernel here: row-major A (M x K, lda), B (K x N, ldb), C (M x N, ldc);
// A and B are __nv_bfloat16 or __half (or float, rounded to TF32 inside the kernel); the
// products accumulate in FP32 and C = alpha * A B + beta * C in FP32. When beta == 0, C is
// output only and is NOT read (it may hold NaN). Offsets are 64-bit where a row index meets
// a leading dimension, so no product of the two can overflow.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace tc {

// One 16-byte chunk is the unit of every copy and of the shared-memory swizzles.
constexpr int CHUNK_BYTES = 16;

// What the kernels need to know about an operand type.
template <typename T> struct Operand;
template <> struct Operand<__nv_bfloat16> {
    static constexpr int PER_CHUNK = 8;  // elements in 16 bytes
    static constexpr int MMA_K = 16;     // k of one mma.sync (m16n8k16)
};
template <> struct Operand<__half> {
    static constexpr int PER_CHUNK = 8;
    static constexpr int MMA_K = 16;
};
template <> struct Operand<float> {  // FP32 in memory, TF32 in the tensor cores (m16n8k8)
    static constexpr int PER_CHUNK = 4;
    static constexpr int MMA_K = 8;
};

__device__ __forceinline__ unsigned smem_address(const void* pointer) {
    return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

__device__ __forceinline__ bool aligned_to(const void* pointer, unsigned bytes) {
    return (reinterpret_cast<unsigned long long>(pointer) & (bytes - 1)) == 0;
}

// Whether every row of a matrix can be copied in 16-byte chunks: the base pointer is 16-byte
// aligned and so is every row start (ld a multiple of a chunk's elements).
template <typename T>
__device__ __forceinline__ bool rows_chunk_aligned(const T* pointer, int ld) {
    return aligned_to(pointer, CHUNK_BYTES) && ld % Operand<T>::PER_CHUNK == 0;
}

// 16 bytes global -> shared without passing through registers. Only the first `src_bytes`
// (0..16) are read; the rest of the destination is zero-filled. This is how every edge is
// handled: rows past M, columns past N and k past K arrive as zeros and the math needs no
// bounds checks. `.cg` skips L1: each tile is used once per block.
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Wait until at most PENDING committed groups are still in flight.
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(PENDING) : "memory");
}

// The bytes of a chunk that lie inside a row: `remaining` elements are left in the row
// from the chunk's first element on (<= 0: none).
template <typename T>
__device__ __forceinline__ int chunk_src_bytes(int remaining) {
    constexpr int PC = Operand<T>::PER_CHUNK;
    return remaining >= PC ? CHUNK_BYTES : (remaining > 0 ? remaining * int(sizeof(T)) : 0);
}

// A 16-bit value as raw bits, and back (for staging any of the operand types as words).
__device__ __forceinline__ unsigned short bits16(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
__device__ __forceinline__ unsigned short bits16(__half v) { return __half_as_ushort(v); }

// One chunk of a row read element by element (any alignment), zero past `remaining`.
// This is the path for leading dimensions that are not a multiple of a chunk, where no
// wider load is legal; the result is four 32-bit words ready for one 16-byte store.
template <typename T>
__device__ __forceinline__ uint4 load_chunk_any_alignment(const T* src, int remaining) {
    unsigned w[4];
    if constexpr (sizeof(T) == 4) {
#pragma unroll
        for (int i = 0; i < 4; ++i) w[i] = i < remaining ? __float_as_uint(__ldg(src + i)) : 0u;
    } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            unsigned lo = 2 * i < remaining ? bits16(src[2 * i]) : 0u;
            unsigned hi = 2 * i + 1 < remaining ? bits16(src[2 * i + 1]) : 0u;
            w[i] = lo | (hi << 16);
        }
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ uint4 ld_shared_16(unsigned src) {
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(src) : "memory");
    return v;
}

__device__ __forceinline__ void st_shared_16(unsigned dst, uint4 v) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n"
                 :: "r"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

// The epilogue of one C element. beta == 0: C is not read (cuBLAS's rule).
__device__ __forceinline__ float epilogue(float acc, float alpha, float beta, const float* c) {
    return beta == 0.0f ? alpha * acc : fmaf(beta, *c, alpha * acc);
}

// Two adjacent C elements of one row (columns col, col+1), with every edge handled: a pair
// wholly inside and 8-byte aligned is one float2 access; otherwise each element on its own.
__device__ __forceinline__ void store_pair(float* C, long long row_offset, int col, int N,
                                           float v0, float v1, float alpha, float beta,
                                           bool pairs_aligned) {
    float* p = C + row_offset + col;
    if (pairs_aligned && col + 1 < N) {
        float2 out;
        if (beta == 0.0f) {
            out = make_float2(alpha * v0, alpha * v1);
        } else {
            float2 old = *reinterpret_cast<const float2*>(p);
            out = make_float2(fmaf(beta, old.x, alpha * v0), fmaf(beta, old.y, alpha * v1));
        }
        *reinterpret_cast<float2*>(p) = out;
    } else {
        if (col < N) p[0] = epilogue(v0, alpha, beta, p);
        if (col + 1 < N) p[1] = epilogue(v1, alpha, beta, p + 1);
    }
}

}  // namespace tc
