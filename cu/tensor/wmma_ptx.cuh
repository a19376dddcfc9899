// wmma_ptx.cuh -- the WMMA m16n16k16 instructions (row-major A and B, FP32 accumulator),
// issued as PTX, and the warp epilogue both WMMA rungs share.
//
// Why PTX and not nvcuda::wmma: mma.h in the CUDA runtime wheel includes crt/mma.h, which
// only the nvcc wheel ships, so NVRTC cannot compile it from the runtime wheel alone. These
// are the same `wmma.*` instructions mma.h emits. A fragment's element-to-thread mapping is
// unspecified, so a fragment is only ever loaded, multiplied and stored whole, never indexed
// by position -- except element-wise with another fragment of the same kind (C and D).
//
// Addresses are generic (global or shared); each must be 32-byte aligned and the stride
// (ldm, in elements) a multiple of 16 bytes, as for load_matrix_sync.
#pragma once

#include "tensor_common.cuh"

namespace tc {

template <typename T> struct Wmma;

// BF16 operands: 8 elements per thread in 4 registers.
template <> struct Wmma<__nv_bfloat16> {
    static constexpr int REGS = 4;
    static __device__ __forceinline__ void load_a(unsigned (&a)[4], const __nv_bfloat16* p, int ldm) {
        asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.bf16 {%0, %1, %2, %3}, [%4], %5;\n"
                     : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "l"(p), "r"(ldm) : "memory");
    }
    static __device__ __forceinline__ void load_b(unsigned (&b)[4], const __nv_bfloat16* p, int ldm) {
        asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.bf16 {%0, %1, %2, %3}, [%4], %5;\n"
                     : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]) : "l"(p), "r"(ldm) : "memory");
    }
    static __device__ __forceinline__ void mma(float (&d)[8], const unsigned (&a)[4], const unsigned (&b)[4]) {
        asm volatile(
            "wmma.mma.sync.aligned.row.row.m16n16k16.f32.bf16.bf16.f32 "
            "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, {%12, %13, %14, %15}, "
            "{%0, %1, %2, %3, %4, %5, %6, %7};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]));
    }
};

// FP16 operands: the PTX fragment is 8 .f16x2 registers (the sm_70 layout, 16 halves a thread).
template <> struct Wmma<__half> {
    static constexpr int REGS = 8;
    static __device__ __forceinline__ void load_a(unsigned (&a)[8], const __half* p, int ldm) {
        asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;\n"
                     : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]), "=r"(a[4]), "=r"(a[5]), "=r"(a[6]), "=r"(a[7])
                     : "l"(p), "r"(ldm) : "memory");
    }
    static __device__ __forceinline__ void load_b(unsigned (&b)[8], const __half* p, int ldm) {
        asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;\n"
                     : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]), "=r"(b[4]), "=r"(b[5]), "=r"(b[6]), "=r"(b[7])
                     : "l"(p), "r"(ldm) : "memory");
    }
    static __device__ __forceinline__ void mma(float (&d)[8], const unsigned (&a)[8], const unsigned (&b)[8]) {
        asm volatile(
            "wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32 "
            "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11, %12, %13, %14, %15}, "
            "{%16, %17, %18, %19, %20, %21, %22, %23}, {%0, %1, %2, %3, %4, %5, %6, %7};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]), "r"(a[6]), "r"(a[7]),
              "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(b[4]), "r"(b[5]), "r"(b[6]), "r"(b[7]));
    }
};

// The FP32 accumulator (C / D) fragment: 8 floats a thread.
__device__ __forceinline__ void wmma_load_c(float (&c)[8], const float* p, int ldm) {
    asm volatile("wmma.load.c.sync.aligned.row.m16n16k16.f32 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;\n"
                 : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3]), "=f"(c[4]), "=f"(c[5]), "=f"(c[6]), "=f"(c[7])
                 : "l"(p), "r"(ldm) : "memory");
}

__device__ __forceinline__ void wmma_store_d(float* p, const float (&d)[8], int ldm) {
    asm volatile("wmma.store.d.sync.aligned.row.m16n16k16.f32 [%0], {%1, %2, %3, %4, %5, %6, %7, %8}, %9;\n"
                 :: "l"(p), "f"(d[0]), "f"(d[1]), "f"(d[2]), "f"(d[3]), "f"(d[4]), "f"(d[5]), "f"(d[6]), "f"(d[7]),
                    "r"(ldm) : "memory");
}

// Whether 16x16 WMMA tiles of this matrix can be loaded in place: 32-byte aligned base and a
// stride that keeps every tile start 32-byte aligned (16 rows x ld x 2 bytes always is, once
// ld is a multiple of 8 elements).
template <typename T>
__device__ __forceinline__ bool wmma_loadable(const T* pointer, int ld) {
    return aligned_to(pointer, 32) && ld % (16 / int(sizeof(T))) == 0;
}

// A 16x16 tile of a row-major matrix copied by one warp into `staging` (16 x 16, 32-byte
// aligned, shared), zeros outside rows x cols: the bounds the tutorial lacks. Each lane
// moves half a row (8 elements).
template <typename T>
__device__ __forceinline__ void stage_tile(T* staging, const T* M, int ld, int row0, int col0,
                                           int rows, int cols, int lane) {
    const int r = lane >> 1, c = (lane & 1) * 8;
    const int remaining = (row0 + r < rows) ? cols - (col0 + c) : 0;
    const T* src = M + (long long)min(row0 + r, rows - 1) * ld + col0 + c;
    uint4 v = load_chunk_any_alignment(src, remaining);
    *reinterpret_cast<uint4*>(staging + r * 16 + c) = v;
}

// One warp's 16x16 accumulator tile written to C at (row0, col0) with alpha/beta. Inside C
// and with a loadable C it goes in place (C is read only when beta != 0); at an edge or with
// an unaligned C it goes through `staging` (256 floats, 32-byte aligned, shared) and each
// lane writes its elements with bounds checks.
__device__ __forceinline__ void wmma_epilogue(float (&acc)[8], float* C, int ldc, int row0, int col0,
                                              int M, int N, float alpha, float beta, bool c_loadable,
                                              float* staging, int lane) {
    if (c_loadable && row0 + 16 <= M && col0 + 16 <= N) {
        float* p = C + (long long)row0 * ldc + col0;
        if (beta == 0.0f) {
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[i] *= alpha;
        } else {
            float old[8];
            wmma_load_c(old, p, ldc);
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[i] = fmaf(beta, old[i], alpha * acc[i]);
        }
        wmma_store_d(p, acc, ldc);
        return;
    }
    __syncwarp();
    wmma_store_d(staging, acc, 16);
    __syncwarp();
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int e = lane + 32 * i, r = row0 + e / 16, c = col0 + e % 16;
        if (r < M && c < N) {
            float* p = C + (long long)r * ldc + c;
            *p = epilogue(staging[e], alpha, beta, p);
        }
    }
    __syncwarp();
}

}  // namespace tc
