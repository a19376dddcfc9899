// smem_tiled.cu -- rung 2: stage TILE x TILE blocks of A and B in shared memory.
//
// Change against coalesced: each block walks K in steps of TILE. Per step, every thread
// loads one element of A and one of B into shared memory (coalesced), the block syncs,
// and each thread runs TILE multiply-adds out of shared memory. Every global element
// is now loaded once per block instead of once per thread: global traffic drops by a
// factor of TILE. Edges are handled by loading zeros outside A and B, so the inner loop
// has no bounds checks; only the final store is guarded.
// PAD adds one float to each shared row, the classic bank-conflict fix. Here there are no
// conflicts to remove (A is read as a warp-wide broadcast, B along a row), and the padding
// costs the vector loads: unpadded rows are 16-byte aligned, so the compiler reads four
// floats of A's row with one LDS.128; padded rows are not, and those become scalar LDS
// (see `python tools/inspect.py diff smem_tiled smem_tiled:PAD=1`). Expect PAD=1 slower.
// Expected: a modest gain over coalesced; the kernel is now bound by shared-memory
// bandwidth (two shared loads per FMA).
#include "gemm_common.cuh"

template <int TILE, int PAD>
__global__ void sgemm_smem_tiled(int M, int N, int K, float alpha,
                                 const float* __restrict__ A, int lda,
                                 const float* __restrict__ B, int ldb, float beta,
                                 float* __restrict__ C, int ldc) {
    __shared__ float As[TILE][TILE + PAD];
    __shared__ float Bs[TILE][TILE + PAD];

    const int tx = threadIdx.x;  // column inside the tile
    const int ty = threadIdx.y;  // row inside the tile
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * lda + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * ldb + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int i = 0; i < TILE; ++i) {
            acc += As[ty][i] * Bs[i][tx];
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        C[row * ldc + col] = gemm_epilogue(acc, alpha, beta, &C[row * ldc + col]);
    }
}
