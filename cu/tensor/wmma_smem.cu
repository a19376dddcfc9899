// wmma_smem.cu -- tensor-core rung 2: WMMA fragments out of shared-memory tiles, block and
// warp tiling, a multi-stage cp.async pipeline.
//
// Against rung 1 (wmma): the block stages BM x BK of A and BK x BN of B in shared memory
// once per k-tile with 16-byte cp.async copies (zero-filled past the edges, so the inner
// loop has no bounds at all), STAGES tiles in flight; each warp computes a
// (BM / WARPS_M) x (BN / WARPS_N) tile from fragments it loads out of shared memory. Every
// A and B element now crosses from L2 once per block instead of once per warp, and the
// loads of tile k + STAGES - 1 overlap the math on tile k. Rows are padded by 16 bytes, which
// puts the eight 16-byte rows each WMMA load reads in eight different bank groups.
// Unaligned operands (a leading dimension not a multiple of 8 elements, or a pointer not
// 16-byte aligned) take a synchronous path: element loads through registers, same tiles.
// Measured on the H100: BF16 4096^3 206-213 TFLOP/s (0.27-0.28x cuBLAS, 2.0x rung 1), FP16
// 206-211, 1024^3 55 (0.24x); 128x128x32 tiles, 2x2 warps, 3 stages (128x256x32 with 2x4
// warps: the same). Odd leading dimensions (4093x4091x4099): 59 TFLOP/s on the synchronous
// path. ncu at 4096^3: the padded layout leaves 16.8 M bank conflicts on the cp.async
// writes (and 16 k on the fragment reads): the padding that suits the reads does not suit
// the 16-byte writes, which the next rung's swizzle fixes.
//
// Launch: block = WARPS_M * WARPS_N * 32 threads; grid = (ceil(N / BN), ceil(M / BM));
// dynamic shared memory = wmma_smem_bytes<T, BM, BN, BK, STAGES>() =
// STAGES * (BM * (BK + 8) + BK * (BN + 8)) * sizeof(T) (above 48 KiB: opt in with
// cuFuncSetAttribute).
#include "wmma_ptx.cuh"

template <typename T, int BM, int BN, int BK, int STAGES>
__host__ __device__ constexpr int wmma_smem_bytes() {
    return STAGES * (BM * (BK + 8) + BK * (BN + 8)) * int(sizeof(T));
}

// One k-tile of A (BM x BK) and B (BK x BN) into one pipeline stage. Aligned operands go by
// cp.async (asynchronous; the caller commits the group); the rest element by element.
template <typename T, int BM, int BN, int BK, int THREADS>
__device__ __forceinline__ void wmma_load_tile(T* a_stage, T* b_stage, const T* A, int lda, const T* B, int ldb,
                                               int M, int N, int K, int m0, int n0, int k0, bool a_fast,
                                               bool b_fast) {
    constexpr int PC = tc::Operand<T>::PER_CHUNK;
    constexpr int A_CHUNKS = BM * BK / PC, B_CHUNKS = BK * BN / PC;
    static_assert(A_CHUNKS % THREADS == 0 && B_CHUNKS % THREADS == 0, "tile chunks must divide among threads");
#pragma unroll
    for (int j = 0; j < A_CHUNKS / THREADS; ++j) {
        const int i = threadIdx.x + j * THREADS;
        const int r = i / (BK / PC), c = (i % (BK / PC)) * PC;
        const int row = m0 + r, remaining = row < M ? K - (k0 + c) : 0;
        const T* src = A + (long long)(row < M ? row : 0) * lda + k0 + c;
        T* dst = a_stage + r * (BK + 8) + c;
        if (a_fast) tc::cp_async_16(tc::smem_address(dst), remaining > 0 ? src : A, tc::chunk_src_bytes<T>(remaining));
        else *reinterpret_cast<uint4*>(dst) = tc::load_chunk_any_alignment(src, remaining);
    }
#pragma unroll
    for (int j = 0; j < B_CHUNKS / THREADS; ++j) {
        const int i = threadIdx.x + j * THREADS;
        const int r = i / (BN / PC), c = (i % (BN / PC)) * PC;
        const int k = k0 + r, remaining = k < K ? N - (n0 + c) : 0;
        const T* src = B + (long long)(k < K ? k : 0) * ldb + n0 + c;
        T* dst = b_stage + r * (BN + 8) + c;
        if (b_fast) tc::cp_async_16(tc::smem_address(dst), remaining > 0 ? src : B, tc::chunk_src_bytes<T>(remaining));
        else *reinterpret_cast<uint4*>(dst) = tc::load_chunk_any_alignment(src, remaining);
    }
}

template <typename T, int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32)
wmma_smem_gemm(int M, int N, int K, float alpha, const T* __restrict__ A, int lda, const T* __restrict__ B,
               int ldb, float beta, float* __restrict__ C, int ldc) {
    using W = tc::Wmma<T>;
    constexpr int R = W::REGS, THREADS = WARPS_M * WARPS_N * 32;
    constexpr int FM = BM / WARPS_M / 16, FN = BN / WARPS_N / 16;
    constexpr int A_STAGE = BM * (BK + 8), B_STAGE = BK * (BN + 8);  // elements
    static_assert(BM % (WARPS_M * 16) == 0 && BN % (WARPS_N * 16) == 0 && BK % 16 == 0, "tile shapes");
    static_assert(STAGES >= 2, "a pipeline needs two stages");
    static_assert(WARPS_M * WARPS_N * 256 * 4 <= wmma_smem_bytes<T, BM, BN, BK, STAGES>(),
                  "the epilogue's per-warp staging reuses the pipeline's shared memory");
    extern __shared__ __align__(128) unsigned char smem[];
    T* a_smem = reinterpret_cast<T*>(smem);
    T* b_smem = a_smem + STAGES * A_STAGE;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const bool a_fast = tc::rows_chunk_aligned(A, lda), b_fast = tc::rows_chunk_aligned(B, ldb);

    float acc[FM][FN][8];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int e = 0; e < 8; ++e) acc[i][j][e] = 0.0f;

    const int k_tiles = (K + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < k_tiles)
            wmma_load_tile<T, BM, BN, BK, THREADS>(a_smem + s * A_STAGE, b_smem + s * B_STAGE, A, lda, B, ldb, M, N,
                                                   K, m0, n0, s * BK, a_fast, b_fast);
        tc::cp_async_commit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
        // Tile kt has landed (at most STAGES - 2 younger groups still in flight), and after
        // the barrier no warp still reads the stage that tile kt - 1 occupied: refill it.
        tc::cp_async_wait<STAGES - 2>();
        __syncthreads();
        const int next = kt + STAGES - 1;
        if (next < k_tiles)
            wmma_load_tile<T, BM, BN, BK, THREADS>(a_smem + (next % STAGES) * A_STAGE,
                                                   b_smem + (next % STAGES) * B_STAGE, A, lda, B, ldb, M, N, K, m0,
                                                   n0, next * BK, a_fast, b_fast);
        tc::cp_async_commit();

        const T* a_tile = a_smem + (kt % STAGES) * A_STAGE + wm * FM * 16 * (BK + 8);
        const T* b_tile = b_smem + (kt % STAGES) * B_STAGE + wn * FN * 16;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned a[FM][R], b[FN][R];
#pragma unroll
            for (int i = 0; i < FM; ++i) W::load_a(a[i], a_tile + i * 16 * (BK + 8) + kk, BK + 8);
#pragma unroll
            for (int j = 0; j < FN; ++j) W::load_b(b[j], b_tile + kk * (BN + 8) + j * 16, BN + 8);
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) W::mma(acc[i][j], a[i], b[j]);
        }
    }

    // The pipeline's shared memory becomes one 16x16 FP32 staging tile per warp.
    tc::cp_async_wait<0>();
    __syncthreads();
    float* staging = reinterpret_cast<float*>(smem) + warp * 256;
    const bool c_loadable = tc::aligned_to(C, 32) && ldc % 4 == 0;
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
            tc::wmma_epilogue(acc[i][j], C, ldc, m0 + (wm * FM + i) * 16, n0 + (wn * FN + j) * 16, M, N, alpha,
                              beta, c_loadable, staging, lane);
}
