// blocktile_2d.cu -- rung 4: a TM x TN register tile per thread (2-D blocktiling).
//
// Change against blocktile_1d: each thread now computes TM rows x TN columns of C. Per
// step of the inner loop it loads TM values of A and TN values of B into registers and
// does TM*TN multiply-adds with them (an outer product), so shared-memory loads per FMA
// fall from about 1 + 1/TM to (TM + TN) / (TM*TN) = 1/4 for 8 x 8. A block of
// (BM/TM)*(BN/TN) threads (256 for 128 x 128 with 8 x 8) covers a BM x BN tile of C, so
// each global element is also reused BN (resp. BM) times from shared memory.
// Loads, edges and the K loop are as in blocktile_1d (zeros outside A and B, loop-
// invariant row/column predicates, a k check only in the last partial tile).
// Expected: about 1.7x over blocktile_1d (the worklog's A6000 figure); B fragments read
// eight consecutive floats per thread, which the compiler turns into two LDS.128, while
// the A column is eight scalar LDS from rows BK floats apart (the next rung transposes A).
// Measured (H100, default BM=64, BN=128, BK=8: 128 threads, 167 registers, 3 blocks/SM):
// 29.8 TFLOP/s at 4096^3, 1.37x over blocktile_1d; 1.02x at 1024^3. BM=128 (256 threads,
// one block per SM at 130 registers) was slower: 21.6.
#include "gemm_common.cuh"

namespace blocktile_2d {

template <int BM, int BN, int BK, int NT, bool CHECK_K>
__device__ __forceinline__ void load_tiles(float* As, float* Bs, const float* A, int lda, const float* B, int ldb,
                                           int M, int N, int K, int row0, int col0, int k0, int tid) {
    constexpr int A_TOTAL = BM * BK, B_TOTAL = BK * BN;
#pragma unroll
    for (int i = 0; i < (A_TOTAL + NT - 1) / NT; ++i) {
        const int s = tid + i * NT;
        if (A_TOTAL % NT == 0 || s < A_TOTAL) {
            const int row = row0 + s / BK, k = k0 + s % BK;
            As[s] = (row < M && (!CHECK_K || k < K)) ? A[row * lda + k] : 0.0f;
        }
    }
#pragma unroll
    for (int i = 0; i < (B_TOTAL + NT - 1) / NT; ++i) {
        const int s = tid + i * NT;
        if (B_TOTAL % NT == 0 || s < B_TOTAL) {
            const int k = k0 + s / BN, col = col0 + s % BN;
            Bs[s] = (col < N && (!CHECK_K || k < K)) ? B[k * ldb + col] : 0.0f;
        }
    }
}

// The outer products of one staged tile: TM values of A's column and TN of B's row per k.
template <int BN, int BK, int TM, int TN>
__device__ __forceinline__ void multiply_tile(const float* As, const float* Bs, float (&acc)[TM][TN],
                                              int trow, int tcol) {
#pragma unroll
    for (int dot = 0; dot < BK; ++dot) {
        float a[TM], b[TN];
#pragma unroll
        for (int i = 0; i < TM; ++i) a[i] = As[(trow + i) * BK + dot];
#pragma unroll
        for (int j = 0; j < TN; ++j) b[j] = Bs[dot * BN + tcol + j];
#pragma unroll
        for (int i = 0; i < TM; ++i) {
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    }
}

}  // namespace blocktile_2d

// No register cap: the compiler reads A's column for four k at once (four LDS.128 per
// row = 32 registers), and capped at 128 registers (two 256-thread blocks per SM) it
// spills. Uncapped it takes ~130, i.e. one block per SM; vectorized removes the cause.
template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
sgemm_blocktile_2d(int M, int N, int K, float alpha,
                   const float* __restrict__ A, int lda,
                   const float* __restrict__ B, int ldb, float beta,
                   float* __restrict__ C, int ldc) {
    constexpr int NT = (BM / TM) * (BN / TN);
    static_assert(BM % TM == 0 && BN % TN == 0, "the thread tile must divide the block tile");
    __shared__ __align__(16) float As[BM * BK];  // row-major, as in A
    __shared__ __align__(16) float Bs[BK * BN];

    const int tid = threadIdx.x;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int trow = tid / (BN / TN) * TM;  // this thread's first row and column in the tile
    const int tcol = tid % (BN / TN) * TN;

    float acc[TM][TN] = {};
    const int k_full = K - K % BK;
    for (int k0 = 0; k0 < k_full; k0 += BK) {
        blocktile_2d::load_tiles<BM, BN, BK, NT, false>(As, Bs, A, lda, B, ldb, M, N, K, row0, col0, k0, tid);
        __syncthreads();
        blocktile_2d::multiply_tile<BN, BK, TM, TN>(As, Bs, acc, trow, tcol);
        __syncthreads();
    }
    if (k_full < K) {
        blocktile_2d::load_tiles<BM, BN, BK, NT, true>(As, Bs, A, lda, B, ldb, M, N, K, row0, col0, k_full, tid);
        __syncthreads();
        blocktile_2d::multiply_tile<BN, BK, TM, TN>(As, Bs, acc, trow, tcol);
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + trow + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = col0 + tcol + j;
            if (row < M && col < N) {
                C[row * ldc + col] = gemm_epilogue(acc[i][j], alpha, beta, &C[row * ldc + col]);
            }
        }
    }
}
