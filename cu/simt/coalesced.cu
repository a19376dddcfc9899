// coalesced.cu -- rung 1: the same arithmetic as naive, with the threads remapped.
//
// Change: consecutive threads of a warp now own consecutive COLUMNS of one row of C.
// The warp's loads of B[i][col..col+31] become one 128-byte transaction, its load of
// A[row][i] is a single broadcast, and its stores to C are contiguous. Only the memory
// access pattern changes; the instruction count is the same. Expected: close to 10x
// over naive, because naive was limited by the number of memory transactions.
#include "gemm_common.cuh"

// The block is BLOCK x BLOCK output elements computed by BLOCK*BLOCK threads in 1-D.
template <int BLOCK>
__global__ void sgemm_coalesced(int M, int N, int K, float alpha,
                                const float* __restrict__ A, int lda,
                                const float* __restrict__ B, int ldb, float beta,
                                float* __restrict__ C, int ldc) {
    const int row = blockIdx.y * BLOCK + threadIdx.x / BLOCK;
    const int col = blockIdx.x * BLOCK + threadIdx.x % BLOCK;
    if (row >= M || col >= N) return;

    float acc = 0.0f;
    for (int i = 0; i < K; ++i) {
        acc += A[row * lda + i] * B[i * ldb + col];
    }
    C[row * ldc + col] = gemm_epilogue(acc, alpha, beta, &C[row * ldc + col]);
}
