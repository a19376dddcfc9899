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
