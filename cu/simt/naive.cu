// naive.cu -- rung 0: one thread per element of C, straight from the definition.
//
// threadIdx.x walks down a column of C (consecutive threads own consecutive ROWS), so
// within a warp the 32 loads of A hit 32 different rows (32 separate memory transactions)
// and the 32 stores of C are strided by ldc. The data is re-read from global memory K
// times per element with no reuse. Expected: a few hundred GFLOP/s at best; every later
// rung is measured against this.
#include "gemm_common.cuh"

extern "C" __global__ void sgemm_naive(int M, int N, int K, float alpha,
                                       const float* __restrict__ A, int lda,
                                       const float* __restrict__ B, int ldb, float beta,
                                       float* __restrict__ C, int ldc) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    const int col = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;

    float acc = 0.0f;
    for (int i = 0; i < K; ++i) {
        acc += A[row * lda + i] * B[i * ldb + col];
    }
    C[row * ldc + col] = gemm_epilogue(acc, alpha, beta, &C[row * ldc + col]);
}
