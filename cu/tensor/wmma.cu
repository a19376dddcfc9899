// wmma.cu -- tensor-core rung 1, the tutorial's WMMA rung: 16x16x16 fragments loaded
// straight from global memory, FP16 or BF16 in, FP32 accumulate.
//
// Against the FP32 SIMT ladder (best ~52 TFLOP/s, the FFMA ceiling): the multiply-adds move
// to the tensor cores (HMMA); there is no shared-memory tiling at all: each warp owns
// FRAGS_M x FRAGS_N accumulator fragments and reads its A and B fragments from global memory
// every k-step, relying on L1/L2 for reuse, exactly as the tutorial does; the fragments of
// step k + 16 are requested before the mma of step k. What the tutorial lacks and this adds:
// bounds. A warp tile wholly inside the matrices with WMMA-loadable operands runs the
// tutorial's loop; every other fragment (ragged M, N, K, or a leading dimension that is not
// a multiple of 8 elements / a pointer not 32-byte aligned) is staged through a per-warp
// 16x16 tile in shared memory with zero fill.
// Measured on the H100 (cuBLAS with FP32 C in the same run): BF16 4096^3 105-109 TFLOP/s
// (0.14-0.15x cuBLAS, 2x the FP32 SIMT ceiling), FP16 106-107, 1024^3 42 (0.18x); best of
// 2x2 warps x 4x4 fragments (64x64 per warp) over 2x4 x 2x4 (69) and 4x2 x 4x2 (72). The
// prefetch of the next step changed nothing (108 -> 105): the rung is bound by L1, not by
// latency. Each 32-bit load of a row-major fragment touches 8 rows (8 L1 wavefronts for 128
// useful bytes) and every B fragment is transposed in registers (MOVM), so the loads, not
// the HMMA, set the pace. Misses the >= 25% target; the next rung is the fix (shared memory).
//
// Launch: block = WARPS_M * WARPS_N * 32 threads; grid = (ceil(N / (WARPS_N * FRAGS_N * 16)),
// ceil(M / (WARPS_M * FRAGS_M * 16))); no dynamic shared memory (1 KiB static per warp).
#include "wmma_ptx.cuh"

template <typename T, int WARPS_M, int WARPS_N, int FRAGS_M, int FRAGS_N>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32)
wmma_gemm(int M, int N, int K, float alpha, const T* __restrict__ A, int lda, const T* __restrict__ B,
          int ldb, float beta, float* __restrict__ C, int ldc) {
    using W = tc::Wmma<T>;
    constexpr int R = W::REGS;
    // One 16x16 FP32 tile a warp: an edge fragment of A or B (16x16 T) or an edge C tile.
    __shared__ __align__(32) float staging[WARPS_M * WARPS_N][256];

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = (blockIdx.y * WARPS_M + warp / WARPS_N) * FRAGS_M * 16;
    const int col0 = (blockIdx.x * WARPS_N + warp % WARPS_N) * FRAGS_N * 16;
    if (row0 >= M || col0 >= N) return;  // an empty warp tile; no block-wide barrier follows
    T* stage = reinterpret_cast<T*>(staging[warp]);

    const bool a_loadable = tc::wmma_loadable(A, lda), b_loadable = tc::wmma_loadable(B, ldb);
    float acc[FRAGS_M][FRAGS_N][8];
#pragma unroll
    for (int i = 0; i < FRAGS_M; ++i)
#pragma unroll
        for (int j = 0; j < FRAGS_N; ++j)
#pragma unroll
            for (int e = 0; e < 8; ++e) acc[i][j][e] = 0.0f;

    int k = 0;
    // The tutorial's loop: every fragment loaded in place from global memory.
    if (a_loadable && b_loadable && row0 + FRAGS_M * 16 <= M && col0 + FRAGS_N * 16 <= N) {
        const T* a_tile = A + (long long)row0 * lda;
        const T* b_tile = B + col0;
        // The fragments of step k + 16 are requested before the mma of step k run, so one
        // step's global-memory latency hides behind the previous step's math.
        unsigned a[2][FRAGS_M][R], b[2][FRAGS_N][R];
        auto load = [&](int buf, int kk) {
#pragma unroll
            for (int i = 0; i < FRAGS_M; ++i) W::load_a(a[buf][i], a_tile + (long long)i * 16 * lda + kk, lda);
#pragma unroll
            for (int j = 0; j < FRAGS_N; ++j) W::load_b(b[buf][j], b_tile + (long long)kk * ldb + j * 16, ldb);
        };
        auto multiply = [&](int buf) {
#pragma unroll
            for (int i = 0; i < FRAGS_M; ++i)
#pragma unroll
                for (int j = 0; j < FRAGS_N; ++j) W::mma(acc[i][j], a[buf][i], b[buf][j]);
        };
        const int k_end = K / 16 * 16;
        if (k_end > 0) load(0, 0);
        for (; k + 32 <= k_end; k += 32) {
            load(1, k + 16);
            multiply(0);
            if (k + 32 < k_end) load(0, k + 32);
            multiply(1);
        }
        if (k < k_end) {  // an odd number of steps: the last one is loaded already
            multiply(0);
            k += 16;
        }
    }
    // Everything else (edge tiles, the K tail, unaligned operands): per fragment, in place
    // where it can be, else staged with zero fill.
    for (; k < K; k += 16) {
        unsigned a[FRAGS_M][R], b[FRAGS_N][R];
#pragma unroll
        for (int i = 0; i < FRAGS_M; ++i) {
            const int r = row0 + i * 16;
            if (a_loadable && r + 16 <= M && k + 16 <= K) {
                W::load_a(a[i], A + (long long)r * lda + k, lda);
            } else {
                tc::stage_tile(stage, A, lda, r, k, M, K, lane);
                __syncwarp();
                W::load_a(a[i], stage, 16);
                __syncwarp();
            }
        }
#pragma unroll
        for (int j = 0; j < FRAGS_N; ++j) {
            const int c = col0 + j * 16;
            if (b_loadable && c + 16 <= N && k + 16 <= K) {
                W::load_b(b[j], B + (long long)k * ldb + c, ldb);
            } else {
                tc::stage_tile(stage, B, ldb, k, c, K, N, lane);
                __syncwarp();
                W::load_b(b[j], stage, 16);
                __syncwarp();
            }
        }
#pragma unroll
        for (int i = 0; i < FRAGS_M; ++i)
#pragma unroll
            for (int j = 0; j < FRAGS_N; ++j) W::mma(acc[i][j], a[i], b[j]);
    }

    const bool c_loadable = tc::aligned_to(C, 32) && ldc % 4 == 0;
#pragma unroll
    for (int i = 0; i < FRAGS_M; ++i)
#pragma unroll
        for (int j = 0; j < FRAGS_N; ++j)
            tc::wmma_epilogue(acc[i][j], C, ldc, row0 + i * 16, col0 + j * 16, M, N, alpha, beta, c_loadable,
                              staging[warp], lane);
}
