// mma_sync.cu -- tensor-core rung 3: inline-PTX mma.sync with ldmatrix, an XOR-swizzled
// shared layout, a multi-stage cp.async pipeline and warp tiling; BF16, FP16 and TF32.
//
// Against rung 2 (wmma_smem): the fragments are no longer opaque. Each warp loads A with
// ldmatrix.x4 (four 8x8 matrices, one instruction per 16 x 16 of A) and B with
// ldmatrix.x4.trans straight from the row-major (k x n) tile, and issues
// mma.sync.m16n8k16 itself, so the accumulators have a known layout and the epilogue
// writes them from registers (no staging, no wmma.store). The shared tiles are unpadded
// and XOR-swizzled at 16-byte granularity, so neither the cp.async writes nor the ldmatrix
// reads conflict on banks and no shared memory is spent on padding; the fragments of
// k-step s + 1 are loaded while the mma of step s run (double-buffered in registers, across
// the k-tile boundary too); the block order is grouped (GROUP_M tile rows at a time) so
// that consecutive blocks share A and B tiles in L2. A thread's copy sizes are worked out
// once: the partial k-tile is consumed first, so every later tile is whole in k (4096^3
// BF16, 128x256x64: 405 -> 445 TFLOP/s), and the k loop is compiled separately for blocks
// inside M x N, with no bound at all (main loop 280 -> 223 instructions per 128 HMMA;
// 445 -> 462, and 128x256x32: 428 -> 478). TF32 runs m16n8k8 on FP32 tiles: A still
// comes by ldmatrix (a 16-byte row of an 8x8 "b16" matrix is four floats, exactly the TF32
// A fragment), B by 32-bit shared loads under its own swizzle, and every element is rounded
// once by cvt.rna.tf32.f32 in shared memory when its tile lands, not once per fragment
// register of every warp that reads it (the first version: 108 TFLOP/s at 4096^3).
// Any alignment: ASYNC = true needs rows_chunk_aligned A and B (16-byte base, ld a multiple
// of 8 elements, 4 for float); ASYNC = false loads each chunk element by element into
// registers at the top of a k-tile and stores it to shared memory at its end. The other
// slow path is pack_rows (below): copy A and/or B into aligned scratch, then run the ASYNC
// kernel. Measured at 4093x4091x4099 (tight, odd leading dimensions): packing + ASYNC 322
// TFLOP/s BF16, the register path 108: the launcher should pack.
// Measurements (ncu: no bank conflicts on shared loads, stores or cp.async), and why the rung
// stops at ~0.6x cuBLAS: docs/tensor-cores.md.
//
// Launch: block = WARPS_M * WARPS_N * 32 threads; grid = (ceil(N / BN), ceil(M / BM)) blocks
// (the kernel takes the block's place in launch order, y * gridDim.x + x, and maps it to a
// tile in grouped order, so x and y only count tiles); dynamic shared memory =
// mma_sync_smem_bytes<T, BM, BN, BK, STAGES>() = STAGES * (BM * BK + BK * BN) * sizeof(T)
// (above 48 KiB: opt in with cuFuncSetAttribute).
// Layouts: the kernel reads row-major A and B; an operand stored transposed is first copied
// transposed into scratch by pack_transpose (gemm_driver/kernels/transposing.py).
#include "tensor_common.cuh"
#include "mma_ptx.cuh"
#include "common/epilogue.cuh"
#include "common/pack_transpose.cuh"

template <typename T, int BM, int BN, int BK, int STAGES>
__host__ __device__ constexpr int mma_sync_smem_bytes() {
    return STAGES * (BM * BK + BK * BN) * int(sizeof(T));
}

namespace mma_detail {

// The physical 16-byte chunk of (row, chunk) in a tile of CHUNKS chunks a row: the chunk
// index is XORed with the row's position among the rows that share a 128-byte span of the
// 32 banks, so 8 consecutive rows at one logical chunk -- what one 8x8 ldmatrix matrix
// reads, normal or transposed -- land in 8 different bank groups, and a row's chunks stay
// a permutation of themselves (8 lanes writing 8 consecutive chunks never collide either).
template <int CHUNKS>
__device__ __forceinline__ int swizzle(int row, int chunk) {
    constexpr int ROWS_PER_SPAN = CHUNKS >= 8 ? 1 : 8 / CHUNKS;
    constexpr int MASK = (CHUNKS >= 8 ? 8 : CHUNKS) - 1;
    return chunk ^ ((row / ROWS_PER_SPAN) & MASK);
}

// The TF32 B tile is read by 32-bit loads, lane (g, t) reading row t (t = lane % 4) at
// column g (8 consecutive floats = 2 chunks): XOR by 2t puts the 4 rows' chunk pairs in 8
// different bank groups.
__device__ __forceinline__ int swizzle_tf32_b(int row, int chunk) { return chunk ^ ((row & 3) << 1); }

template <typename T, int CHUNKS>
__device__ __forceinline__ int swizzle_b(int row, int chunk) {
    if constexpr (sizeof(T) == 4) return swizzle_tf32_b(row, chunk);
    else return swizzle<CHUNKS>(row, chunk);
}

// Each thread's share of one k-tile: A_ITERS chunks of A, A_ROWS rows apart, and B_ITERS
// chunks of B, B_ROWS rows apart, at fixed places in the tile. ASYNC copies with cp.async;
// otherwise the chunks are read into registers by the issue and written to shared memory
// by store() later. The partial k-tile (K % BK != 0) is consumed first (issue_edge, every
// bound checked); after it every tile is whole in k, and a thread's bounds in m and n never
// change, so issue_full() is a pointer add and one cp.async a chunk.
template <typename T, int BM, int BN, int BK, int THREADS, bool ASYNC>
struct TileLoader {
    static constexpr int PC = tc::Operand<T>::PER_CHUNK;
    static constexpr int A_CH = BK / PC, B_CH = BN / PC;
    static constexpr int A_ITERS = BM * A_CH / THREADS, B_ITERS = BK * B_CH / THREADS;
    static constexpr int A_ROWS = THREADS / A_CH, B_ROWS = THREADS / B_CH;
    static constexpr int B_PERIOD = sizeof(T) == 4 ? 4 : 8;  // rows after which swizzle_b repeats
    static_assert(THREADS % A_CH == 0 && THREADS % B_CH == 0 && BM % A_ROWS == 0 && BK % B_ROWS == 0,
                  "tile chunks must divide among threads");
    static_assert(A_ROWS % 8 == 0 && B_ROWS % B_PERIOD == 0,
                  "a thread's chunks must sit at the same swizzle phase (one offset + multiples of rows)");

    const T* a_next;  // this thread's first A chunk of the next whole tile to issue
    const T* b_next;
    long long a_rows_step, b_rows_step, b_tile_step;  // elements between rows / tiles
    int a_row, a_col, b_row;
    int b_remaining;  // elements of B's row left from this thread's column: the same in every tile
    unsigned a_off, b_off;  // byte offset of the first chunk inside a stage
    uint4 held[ASYNC ? 1 : A_ITERS + B_ITERS];

    __device__ __forceinline__ TileLoader(const T* A, int lda, const T* B, int ldb, int N, int m0, int n0) {
        a_row = m0 + threadIdx.x / A_CH, a_col = (threadIdx.x % A_CH) * PC;
        b_row = threadIdx.x / B_CH;
        const int b_col = n0 + (threadIdx.x % B_CH) * PC;
        a_next = A + (long long)a_row * lda + a_col;
        b_next = B + (long long)b_row * ldb + b_col;
        a_rows_step = (long long)A_ROWS * lda;
        b_rows_step = (long long)B_ROWS * ldb;
        b_tile_step = (long long)BK * ldb;
        b_remaining = N - b_col;
        const int ar = threadIdx.x / A_CH, ac = threadIdx.x % A_CH;
        const int br = threadIdx.x / B_CH, bc = threadIdx.x % B_CH;
        a_off = (ar * A_CH + swizzle<A_CH>(ar, ac)) * tc::CHUNK_BYTES;
        b_off = (br * B_CH + swizzle_b<T, B_CH>(br, bc)) * tc::CHUNK_BYTES;
    }

    __device__ __forceinline__ unsigned a_dst(unsigned stage, int j) const { return stage + a_off + j * A_ROWS * BK * sizeof(T); }
    __device__ __forceinline__ unsigned b_dst(unsigned stage, int j) const { return stage + b_off + j * B_ROWS * BN * sizeof(T); }

    // One chunk: 16 bytes in flight (cp.async) or in registers; `remaining` elements of the
    // row are left from its start (fewer than a chunk: the rest is zero). A copy that reads
    // nothing is still given a valid address, the matrix's start.
    __device__ __forceinline__ void chunk(int slot, unsigned dst, const T* src, int remaining, const T* base) {
        if constexpr (ASYNC) tc::cp_async_16(dst, remaining > 0 ? src : base, tc::chunk_src_bytes<T>(remaining));
        else held[slot] = remaining > 0 ? tc::load_chunk_any_alignment(src, remaining) : make_uint4(0, 0, 0, 0);
    }

    // The partial tile k0 = (K / BK) * BK .. K, with every bound.
    __device__ __forceinline__ void issue_edge(unsigned a_stage, unsigned b_stage, const T* A, const T* B, int M,
                                               int K) {
        const int k0 = K / BK * BK;
#pragma unroll
        for (int j = 0; j < A_ITERS; ++j) {
            const int remaining = a_row + j * A_ROWS < M ? K - k0 - a_col : 0;
            chunk(j, a_dst(a_stage, j), a_next + j * a_rows_step + k0, remaining, A);
        }
#pragma unroll
        for (int j = 0; j < B_ITERS; ++j) {
            const int remaining = k0 + b_row + j * B_ROWS < K ? b_remaining : 0;
            chunk(A_ITERS + j, b_dst(b_stage, j), b_next + j * b_rows_step + (K / BK) * b_tile_step, remaining, B);
        }
    }

    // The next whole tile (k from 0 up), towards the stage at (a_stage, b_stage). INSIDE: the
    // block's tile lies inside M x N, so every chunk is whole and needs no check at all.
    template <bool INSIDE>
    __device__ __forceinline__ void issue_full(unsigned a_stage, unsigned b_stage, const T* A, const T* B, int M) {
#pragma unroll
        for (int j = 0; j < A_ITERS; ++j) {
            const T* src = a_next + j * a_rows_step;
            if constexpr (INSIDE && ASYNC) tc::cp_async_16(a_dst(a_stage, j), src, tc::CHUNK_BYTES);
            else chunk(j, a_dst(a_stage, j), src, a_row + j * A_ROWS < M ? PC : 0, A);
        }
#pragma unroll
        for (int j = 0; j < B_ITERS; ++j) {
            const T* src = b_next + j * b_rows_step;
            if constexpr (INSIDE && ASYNC) tc::cp_async_16(b_dst(b_stage, j), src, tc::CHUNK_BYTES);
            else chunk(A_ITERS + j, b_dst(b_stage, j), src, INSIDE ? PC : b_remaining, B);
        }
        a_next += BK;
        b_next += b_tile_step;
    }

    // Finish the tile an issue started: the register path stores it (TF32: rounded first).
    __device__ __forceinline__ void store(unsigned a_stage, unsigned b_stage) {
        if constexpr (!ASYNC) {
#pragma unroll
            for (int j = 0; j < A_ITERS + B_ITERS; ++j) {
                uint4 v = held[j];
                if constexpr (sizeof(T) == 4) v = round_tf32(v);
                tc::st_shared_16(j < A_ITERS ? a_dst(a_stage, j) : b_dst(b_stage, j - A_ITERS), v);
            }
        }
    }

    // TF32 only, cp.async path: once this thread's copies of a tile have landed (its own
    // cp.async writes are visible to it after the group wait), round them in place, so each
    // element is rounded once, not once per warp that reads it. The barrier that follows
    // publishes the rounded values.
    __device__ __forceinline__ void round_landed(unsigned a_stage, unsigned b_stage) {
        if constexpr (ASYNC && sizeof(T) == 4) {
#pragma unroll
            for (int j = 0; j < A_ITERS + B_ITERS; ++j) {
                const unsigned p = j < A_ITERS ? a_dst(a_stage, j) : b_dst(b_stage, j - A_ITERS);
                tc::st_shared_16(p, round_tf32(tc::ld_shared_16(p)));
            }
        }
    }

    static __device__ __forceinline__ uint4 round_tf32(uint4 v) {
        return make_uint4(tc::to_tf32(v.x), tc::to_tf32(v.y), tc::to_tf32(v.z), tc::to_tf32(v.w));
    }
};

// The block's tile in grouped order: blocks walk GROUP_M tile rows down a column of tiles
// before moving right, so the blocks resident at one time share A rows and B columns in L2.
// `block` is the block's place in launch order (x fastest).
template <int GROUP_M>
__device__ __forceinline__ void grouped_tile(int block, int tiles_m, int tiles_n, int& tile_m, int& tile_n) {
    const int per_group = GROUP_M * tiles_n;
    const int group = block / per_group, first_m = group * GROUP_M;
    const int rows = min(tiles_m - first_m, GROUP_M);
    const int in_group = block % per_group;
    tile_m = first_m + in_group % rows;
    tile_n = in_group / rows;
}

// Columns col and col + 1 of one row of a linear layer's D (``row`` points at the row): one
// pair store where both are inside N and the row takes pairs, else one element at a time. C
// is read only when beta != 0 (it may hold NaN otherwise).
template <class Epi>
__device__ __forceinline__ void store_pair(const Epi& epi, typename Epi::T* row, int col, float v0, float v1,
                                           bool pairs_aligned) {
    using Out = typename Epi::Out;
    typename Epi::T* p = row + col;
    const float b0 = epi.bias_at(col), b1 = epi.bias_at(col + 1);
    float x = epi.alpha * v0, y = epi.alpha * v1;
    if (pairs_aligned && col + 1 < epi.N) {
        if (epi.beta != 0.0f) {
            const float2 old = Out::load2(p);
            x = fmaf(epi.beta, old.x, x), y = fmaf(epi.beta, old.y, y);
        }
        Out::store2(p, epi.finish(x, b0), epi.finish(y, b1));
        return;
    }
    if (col < epi.N) {
        if (epi.beta != 0.0f) x = fmaf(epi.beta, Out::load(p), x);
        Out::store(p, epi.finish(x, b0));
    }
    if (col + 1 < epi.N) {
        if (epi.beta != 0.0f) y = fmaf(epi.beta, Out::load(p + 1), y);
        Out::store(p + 1, epi.finish(y, b1));
    }
}

}  // namespace mma_detail

// OUT, EPI: D's type and the fused epilogue (common/epilogue.cuh); C and bias (N elements,
// read when EPI != EPI_NONE) are of D's type.
template <typename T, int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, int GROUP_M, bool ASYNC,
          int OUT, int EPI>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32, WARPS_M * WARPS_N * 32 >= 256 ? 1 : 2)
mma_sync_gemm(int M, int N, int K, float alpha, const T* __restrict__ A, int lda, const T* __restrict__ B,
              int ldb, float beta, typename output::OutType<OUT>::T* __restrict__ C, int ldc,
              const typename output::OutType<OUT>::T* __restrict__ bias) {
    using Op = tc::Operand<T>;
    constexpr bool TF32 = sizeof(T) == 4;
    constexpr int THREADS = WARPS_M * WARPS_N * 32, PC = Op::PER_CHUNK;
    constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N;  // the warp tile
    constexpr int MT = WTM / 16, NT = WTN / 8;              // m16 and n8 tiles in it
    constexpr int KSTEPS = BK / Op::MMA_K;
    constexpr int A_CH = BK / PC, B_CH = BN / PC;
    constexpr unsigned A_STAGE = BM * BK * sizeof(T), B_STAGE = BK * BN * sizeof(T);
    constexpr unsigned A_ROW = BK * sizeof(T), B_ROW = BN * sizeof(T);
    static_assert(WTM % 16 == 0 && WTN % 16 == 0, "warp tile: multiples of 16");
    static_assert(KSTEPS % 2 == 0, "BK: an even number of mma k-steps (register double buffer)");
    static_assert(B_CH >= 8, "B rows of at least 128 bytes (the swizzles span 8 chunks)");
    static_assert(STAGES >= 2, "a pipeline needs two stages");
    using Loader = mma_detail::TileLoader<T, BM, BN, BK, THREADS, ASYNC>;

    extern __shared__ __align__(128) unsigned char smem[];
    const unsigned a_smem = tc::smem_address(smem), b_smem = a_smem + STAGES * A_STAGE;

    int tile_m, tile_n;
    mma_detail::grouped_tile<GROUP_M>(blockIdx.y * gridDim.x + blockIdx.x, (M + BM - 1) / BM, (N + BN - 1) / BN,
                                      tile_m, tile_n);
    const int m0 = tile_m * BM, n0 = tile_n * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;

    Loader loader(A, lda, B, ldb, N, m0, n0);
    const bool block_inside = m0 + BM <= M && n0 + BN <= N;

    // Per-lane fragment addresses (byte offsets inside a stage). A: lane l reads row l % 16
    // of each m16 tile at k-half l / 16. The swizzle term depends on the lane alone, since
    // tile rows start at multiples of 16.
    const int a_lane_row = wm * WTM + (lane & 15);
    unsigned a_frag_off[KSTEPS];
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks)
        a_frag_off[ks] = a_lane_row * A_ROW + mma_detail::swizzle<A_CH>(a_lane_row, ks * 2 + (lane >> 4)) * 16;
    // B (16-bit): lane l reads k row l % 16 of the step at chunk (n8 tile pair) + l / 16.
    // B (TF32): lane (g, t) reads k rows t and t + 4, column g of each n8 tile.
    constexpr int B_FRAGS = TF32 ? NT : NT / 2;
    unsigned b_frag_off[B_FRAGS];
#pragma unroll
    for (int j = 0; j < B_FRAGS; ++j) {
        if constexpr (TF32) {
            const int t = lane & 3, g = lane >> 2, n = wn * WTN + j * 8 + g;
            b_frag_off[j] = t * B_ROW + mma_detail::swizzle_tf32_b(t, n / 4) * 16 + (n % 4) * 4;
        } else {
            const int row = lane & 15, chunk = (wn * WTN + j * 16) / 8 + (lane >> 4);
            b_frag_off[j] = row * B_ROW + mma_detail::swizzle<B_CH>(row, chunk) * 16;
        }
    }

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    unsigned af[2][MT][4], bf[2][NT][2];
    // The fragments of k-step ks of the stage at (a_stage, b_stage) into buffer `buf`.
    // (TF32 tiles were rounded in shared memory when they landed.)
    auto load_fragments = [&](int buf, unsigned a_stage, unsigned b_stage, int ks) {
#pragma unroll
        for (int i = 0; i < MT; ++i) tc::ldmatrix_x4(af[buf][i], a_stage + a_frag_off[ks] + i * 16 * A_ROW);
        if constexpr (TF32) {
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const unsigned p = b_stage + b_frag_off[j] + ks * 8 * B_ROW;
                bf[buf][j][0] = tc::lds_32(p);
                bf[buf][j][1] = tc::lds_32(p + 4 * B_ROW);
            }
        } else {
#pragma unroll
            for (int j = 0; j < NT / 2; ++j) {
                unsigned r[4];
                tc::ldmatrix_x4_trans(r, b_stage + b_frag_off[j] + ks * 16 * B_ROW);
                bf[buf][2 * j][0] = r[0], bf[buf][2 * j][1] = r[1];
                bf[buf][2 * j + 1][0] = r[2], bf[buf][2 * j + 1][1] = r[3];
            }
        }
    };

    // k-tiles in the order they are consumed: the partial one first (if K % BK != 0), then
    // the whole ones from k = 0. The order of the partial sums does not matter.
    const int k_tiles = (K + BK - 1) / BK;
    const bool has_edge = K % BK != 0;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < k_tiles) {
            if (s == 0 && has_edge) loader.issue_edge(a_smem, b_smem, A, B, M, K);
            else loader.template issue_full<false>(a_smem + s * A_STAGE, b_smem + s * B_STAGE, A, B, M);
            loader.store(a_smem + s * A_STAGE, b_smem + s * B_STAGE);
        }
        tc::cp_async_commit();
    }
    tc::cp_async_wait<STAGES - 2>();
    loader.round_landed(a_smem, b_smem);
    __syncthreads();

    int read_stage = 0, write_stage = STAGES - 1;
    load_fragments(0, a_smem, b_smem, 0);
    // The k loop, compiled twice (`inside` is a constant at each call): for blocks inside
    // M x N (no bound anywhere in it) and for edge blocks. The choice is made once per block.
    auto k_loop = [&](bool inside) {
        for (int kt = 0; kt < k_tiles; ++kt) {
            // Refill the stage tile kt - 1 used: every warp finished reading it before the
            // barrier that ended the previous k-tile.
            const bool refill = kt + STAGES - 1 < k_tiles;
            const unsigned a_write = a_smem + write_stage * A_STAGE, b_write = b_smem + write_stage * B_STAGE;
            if (refill) {
                if (inside) loader.template issue_full<true>(a_write, b_write, A, B, M);
                else loader.template issue_full<false>(a_write, b_write, A, B, M);
            }
            const unsigned a_read = a_smem + read_stage * A_STAGE, b_read = b_smem + read_stage * B_STAGE;
#pragma unroll
            for (int ks = 0; ks < KSTEPS; ++ks) {
                if (ks == KSTEPS - 1) {
                    // Before the last step's math: land tile kt + 1 (TF32: round it) and load
                    // its first fragments.
                    if (refill) loader.store(a_write, b_write);
                    tc::cp_async_commit();
                    tc::cp_async_wait<STAGES - 2>();
                    read_stage = read_stage == STAGES - 1 ? 0 : read_stage + 1;
                    write_stage = write_stage == STAGES - 1 ? 0 : write_stage + 1;
                    const unsigned a_next = a_smem + read_stage * A_STAGE, b_next = b_smem + read_stage * B_STAGE;
                    if (kt + 1 < k_tiles) loader.round_landed(a_next, b_next);
                    __syncthreads();
                    if (kt + 1 < k_tiles) load_fragments((ks + 1) & 1, a_next, b_next, 0);
                } else {
                    load_fragments((ks + 1) & 1, a_read, b_read, ks + 1);
                }
#pragma unroll
                for (int i = 0; i < MT; ++i)
#pragma unroll
                    for (int j = 0; j < NT; ++j) tc::Mma<T>::run(acc[i][j], af[ks & 1][i], bf[ks & 1][j]);
            }
        }
    };
    if (block_inside) k_loop(true);
    else k_loop(false);

    // Epilogue from registers: lane (g, t) holds rows g and g + 8, columns 2t and 2t + 1 of
    // each m16 x n8 tile; a row's four lanes write 32 contiguous bytes (FP32 D). FP32 D without
    // an epilogue keeps tc::store_pair, the code the rung was measured with; a linear layer's D
    // (another type, an epilogue) goes through common/epilogue.cuh, rounded once at the store.
    constexpr bool PLAIN = OUT == output::OUT_FP32 && EPI == output::EPI_NONE;
    const output::Epilogue<OUT, EPI> epi{alpha, beta, bias, N};
    const bool pairs_aligned = PLAIN ? tc::aligned_to(C, 8) && ldc % 2 == 0 : output::c_pairs_aligned(C, ldc);
    auto store = [&](int row, int col, float v0, float v1) {
        if constexpr (PLAIN) tc::store_pair(C, (long long)row * ldc, col, N, v0, v1, alpha, beta, pairs_aligned);
        else mma_detail::store_pair(epi, C + (long long)row * ldc, col, v0, v1, pairs_aligned);
    };
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        const int row = m0 + wm * WTM + i * 16 + g;
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const int col = n0 + wn * WTN + j * 8 + 2 * t;
            if (row < M) store(row, col, acc[i][j][0], acc[i][j][1]);
            if (row + 8 < M) store(row + 8, col, acc[i][j][2], acc[i][j][3]);
        }
    }
}

// The packing path for unaligned operands: copy a rows x cols row-major matrix (any ld, any
// alignment) into dst with leading dimension ld_dst (a multiple of 8 elements, 4 for float,
// dst 16-byte aligned), zero-filling columns cols..ld_dst-1. The launcher runs it on A and/or
// B into scratch and then the ASYNC kernel on the copies. Launch: any 1-D grid of any block
// size (grid-stride over rows * ld_dst / chunk 16-byte chunks; 256 threads and
// ceil(chunks / 256) blocks, capped, is the intent); no shared memory.
template <typename T>
__global__ void pack_rows(int rows, int cols, const T* __restrict__ src, int ld_src, T* __restrict__ dst,
                          int ld_dst) {
    constexpr int PC = tc::Operand<T>::PER_CHUNK;
    const int chunks_per_row = ld_dst / PC;
    const long long total = (long long)rows * chunks_per_row;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int r = int(i / chunks_per_row), col = int(i % chunks_per_row) * PC;
        const uint4 v = tc::load_chunk_any_alignment(src + (long long)r * ld_src + col, cols - col);
        *reinterpret_cast<uint4*>(dst + (long long)r * ld_dst + col) = v;
    }
}
