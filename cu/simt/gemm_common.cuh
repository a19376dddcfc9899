// gemm_common.cuh -- pieces every FP32 GEMM kernel shares.
//
// All kernels compute C = alpha * A * B + beta * C on row-major matrices:
// A is M x K (leading dimension lda), B is K x N (ldb), C is M x N (ldc).
// Offsets are 32-bit: the launcher refuses any matrix of 2^31 elements or more.
#pragma once

// The epilogue of one C element. When beta == 0, C is output only and is NOT read:
// it may hold garbage or NaN (cuBLAS has the same rule, and our tests poison C with NaN).
__device__ __forceinline__ float gemm_epilogue(float acc, float alpha, float beta, const float* c) {
    return beta == 0.0f ? alpha * acc : fmaf(beta, *c, alpha * acc);
}

// Whether rows of a matrix at p with leading dimension ld can be read as float4s: p is
// 16-byte aligned and so is every row start (ld a multiple of 4 floats).
__device__ __forceinline__ bool aligned16(const float* p, int ld) {
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0 && (ld & 3) == 0;
}

// Blocks per SM to ask __launch_bounds__ for: 16 resident warps (512 threads), which caps a
// 256-thread block at 128 registers a thread.
__host__ __device__ constexpr int min_blocks(int threads) { return threads >= 512 ? 1 : 512 / threads; }
