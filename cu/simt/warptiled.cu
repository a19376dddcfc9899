// warptiled.cu -- rung 6: block -> warp -> thread tiling, fed by a cp.async pipeline.
//
// Change against double_buffered: the warp becomes an explicit level of the tiling. A block
// tile (BM x BN) is split into warp tiles (WM x WN); inside a warp, the 32 lanes form a
// LANES_M x LANES_N grid and each lane owns TM x TN results, taken as groups of 4 rows and
// 4 columns spread across the warp tile (rows lm*4 + g*4*LANES_M + i). Two things follow:
//  * every shared-memory fragment load is an LDS.128 in which a warp touches only
//    LANES_M (or LANES_N) consecutive float4s, i.e. at most 128 bytes: one wavefront, no
//    bank conflicts, the rest broadcast;
//  * each warp reads a compact WM x WN footprint of the tiles, so per k step it loads
//    (WM + WN) values for WM * WN FMAs, the best ratio a warp can get from shared memory.
// Tiles arrive through STAGES-deep cp.async pipelining: global memory is copied straight
// into shared memory (no staging registers, which are given to the accumulators) while the
// threads compute on an older stage; one __syncthreads per k tile.
// Edges cost nothing in the main loop: every copy is predicated through cp.async's
// src-size (rows >= M, columns >= N and k >= K arrive as zeros), and the K remainder is
// processed FIRST, as a partial tile, so all later tiles are full. B is copied 16 bytes at a
// time when B and ldb allow it, else 4 bytes at a time (the 4093x4091x4099 case); A is always
// copied 4 bytes at a time because it is transposed on the way into shared memory.
// SPLITK > 1 splits the k tiles among SPLITK blocks per C tile (grid z) for problems with
// too few C tiles to fill the GPU (1024^3 is 64 tiles of 128x128 for 132 SMs); the partial
// sums meet in a workspace and the last block to finish adds them up (reduce_split_k).
// STREAMK = 1 replaces the tile grid by stream-K (stream_k.cuh): a persistent grid of one CTA
// per resident slot (or at most PER_SM per SM), sized on the launch side from the occupancy,
// each CTA taking an equal share of all the k steps across tile boundaries, with the
// "data-parallel waves + one stream-K wave" hybrid for grids of many tiles. It reuses k_loop
// and store_tile unchanged: a unit of work is a k range of one tile.
// Expected: the FMA pipe busy most cycles; close to cuBLAS at large sizes.
// Measured (H100, default 128x256 tile, 64x64 warps, 8x16 lanes, BK=16, 3 stages): 50.3
// TFLOP/s at 4096^3, 97% of cuBLAS, 1.09x over double_buffered. With 8x8 lanes it was 92%:
// a k step then issues 4 LDS.128 per 64 FMAs, few enough FMAs per shared-memory wavefront
// that (by this arithmetic, not yet by counters) the shared-memory pipe sets the pace;
// 8x16 lanes issue 6 per 128. Small problems leave SMs idle with these
// tiles (30% of cuBLAS at 1024^3): `autotuned` picks smaller tiles, split-K or stream-K there.
// Measurements, and what was tried and not kept (a grouped tile order among them):
// docs/fp32-ladder.md, docs/findings.md.
// Layouts: the kernel reads row-major A and B; an operand stored transposed is first copied
// transposed into scratch by pack_transpose (gemm_driver/kernels/transposing.py).
#include "gemm_common.cuh"
#include "cp_async.cuh"
#include "stream_k.cuh"
#include "common/pack_transpose.cuh"

namespace warptiled {

template <int BM_, int BN_, int BK_, int WM_, int WN_, int TM_, int TN_, int STAGES_, int SPLITK_>
struct Tiling {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, TM = TM_, TN = TN_;
    static constexpr int STAGES = STAGES_, SPLITK = SPLITK_;
    static constexpr int WARPS_N = BN / WN;
    static constexpr int THREADS = 32 * (BM / WM) * WARPS_N;
    static constexpr int LANES_M = WM / TM;  // a warp's lanes along m ...
    static constexpr int LANES_N = WN / TN;  // ... and along n
    static constexpr int STEP_M = 4 * LANES_M;  // distance between a lane's groups of 4 rows
    static constexpr int STEP_N = 4 * LANES_N;
    // A is stored transposed, one row of BM values per k. The +4 skews consecutive k rows by
    // 4 banks, so a warp's 4-byte copies (4 rows x 8 k) land in 32 different banks.
    static constexpr int A_STRIDE = BM + 4;
    static constexpr int A_STAGE = BK * A_STRIDE;
    static constexpr int B_STAGE = BK * BN;
    static constexpr int A_COPIES = BM * BK / THREADS;
    static constexpr int B_COPIES = BN * BK / THREADS;          // 4-byte path
    static constexpr int B_VEC_COPIES = BN * BK / (4 * THREADS);  // 16-byte path
    // Aim for 16 resident warps per SM (256 threads: at most 128 registers each), or 8 when a
    // lane holds 128 accumulators and needs about 200 registers.
    static constexpr int WARPS_PER_SM = TM * TN >= 128 ? 8 : 16;
    static constexpr int MIN_BLOCKS = THREADS >= 32 * WARPS_PER_SM ? 1 : 32 * WARPS_PER_SM / THREADS;

    static_assert(LANES_M * LANES_N == 32, "the lanes of a warp must tile the warp tile");
    static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tiles are made of 4-wide groups");
    static_assert(BK % 8 == 0 && BM * 8 % THREADS == 0 && A_COPIES * THREADS == BM * BK,
                  "A tile must split evenly, 8-wide slices of it too");
    static_assert(B_VEC_COPIES * 4 * THREADS == BN * BK, "B tile must split into float4s");
};

// Copies k tiles of A and B into the shared-memory ring with cp.async. Everything that does
// not change from tile to tile (which rows and columns this thread copies, whether they are
// inside the matrix, its source pointers and shared-memory addresses) is worked out once, so
// a tile costs one address add per copy. A copy i of a thread sits at a compile-time offset
// from its copy 0 (the thread count and tile sizes are powers of two), see a_row/b_k below.
template <class T, bool B_VEC>
struct TileCopier {
    // A, transposed: consecutive threads take 8 consecutive k of a row (a warp reads 4 rows x
    // 32 bytes); copy i is a_row(i) rows and a_k(i) columns further on.
    __device__ static constexpr int a_row(int i) { return (T::THREADS * i % (T::BM * 8)) / 8; }
    __device__ static constexpr int a_k(int i) { return T::THREADS * i / (T::BM * 8) * 8; }
    // B, row by row: in units of float4 (VEC) or of floats.
    static constexpr int B_UNIT = B_VEC ? 4 : 1;
    static constexpr int B_ROW_UNITS = T::BN / B_UNIT;
    static constexpr int B_COPIES = B_VEC ? T::B_VEC_COPIES : T::B_COPIES;
    __device__ static constexpr int b_k(int i) { return T::THREADS * i / B_ROW_UNITS; }
    __device__ static constexpr int b_n(int i) { return T::THREADS * i % B_ROW_UNITS * B_UNIT; }

    const float* a;   // this thread's copy 0 at column k_a of a tile starting at k = 0 (row clamped into A)
    const float* b;   // this thread's copy 0 at row k_b of a tile starting at k = 0
    int lda, ldb;
    int k_a, k_b;     // k of copy 0 inside a tile
    unsigned a_dst, b_dst;  // shared-memory addresses of copy 0 in stage 0
    unsigned a_inside = 0, b_inside = 0;  // bit i: copy i's row (A) / column (B) exists
    int b_bytes = 0;  // VEC: bytes of the float4 before column N (0..16), the same for every copy

    __device__ __forceinline__ TileCopier(const float* A, int lda_, int M, const float* B, int ldb_, int N,
                                          int bm0, int bn0, int tid, unsigned as_ring, unsigned bs_ring)
        : lda(lda_), ldb(ldb_) {
        const int r = tid / 8;
        k_a = tid % 8;
        a = A + min(bm0 + r, M - 1) * lda + k_a;
#pragma unroll
        for (int i = 0; i < T::A_COPIES; ++i) a_inside |= unsigned(bm0 + r + a_row(i) < M) << i;
        a_dst = as_ring + 4 * (k_a * T::A_STRIDE + r);

        k_b = tid / B_ROW_UNITS;
        const int n = tid % B_ROW_UNITS * B_UNIT;
        b = B + k_b * ldb + (B_VEC ? bn0 + n : min(bn0 + n, N - 1));  // VEC: a copy past N reads 0 bytes
#pragma unroll
        for (int i = 0; i < B_COPIES; ++i) b_inside |= unsigned(bn0 + n + b_n(i) < N) << i;
        if (B_VEC) b_bytes = 4 * max(0, min(4, N - (bn0 + n)));
        b_dst = bs_ring + 4 * (k_b * T::BN + n);
    }

    // Tile starting at column k0 of A / row k0 of B into `stage`. Only the first tile is
    // partial (k_valid < BK); every later one skips the k test.
    template <bool PARTIAL>
    __device__ __forceinline__ void issue(int k0, int stage, int k_valid) const {
        const float* a_tile = a + k0;
        const unsigned a_stage = a_dst + 4 * stage * T::A_STAGE;
#pragma unroll
        for (int i = 0; i < T::A_COPIES; ++i) {
            bool inside = (a_inside >> i) & 1;
            if (PARTIAL) inside = inside && k_a + a_k(i) < k_valid;
            cp_async_4(a_stage + 4 * (a_k(i) * T::A_STRIDE + a_row(i)),
                       a_tile + a_row(i) * lda + a_k(i), inside ? 4 : 0);
        }
        const float* b_tile = b + k0 * ldb;
        const unsigned b_stage = b_dst + 4 * stage * T::B_STAGE;
#pragma unroll
        for (int i = 0; i < B_COPIES; ++i) {
            bool inside = B_VEC ? b_bytes > 0 : (b_inside >> i) & 1;
            if (PARTIAL) inside = inside && k_b + b_k(i) < k_valid;
            const unsigned dst = b_stage + 4 * (b_k(i) * T::BN + b_n(i));
            const float* src = b_tile + b_k(i) * ldb + b_n(i);
            if (B_VEC)
                cp_async_16(dst, src, inside ? b_bytes : 0);
            else
                cp_async_4(dst, src, inside ? 4 : 0);
        }
    }
};

// BK rank-1 updates of the lane's TM x TN accumulators from one shared-memory stage.
template <class T>
__device__ __forceinline__ void multiply_tile(float (&acc)[T::TM][T::TN], const float* as, const float* bs) {
#pragma unroll
    for (int k = 0; k < T::BK; ++k) {
        float a[T::TM], b[T::TN];
#pragma unroll
        for (int g = 0; g < T::TM / 4; ++g) {
            const float4 v = *reinterpret_cast<const float4*>(as + k * T::A_STRIDE + g * T::STEP_M);
            a[4 * g] = v.x, a[4 * g + 1] = v.y, a[4 * g + 2] = v.z, a[4 * g + 3] = v.w;
        }
#pragma unroll
        for (int g = 0; g < T::TN / 4; ++g) {
            const float4 v = *reinterpret_cast<const float4*>(bs + k * T::BN + g * T::STEP_N);
            b[4 * g] = v.x, b[4 * g + 1] = v.y, b[4 * g + 2] = v.z, b[4 * g + 3] = v.w;
        }
#pragma unroll
        for (int i = 0; i < T::TM; ++i)
#pragma unroll
            for (int j = 0; j < T::TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
}

// The k loop over tiles [first, last): a STAGES-deep ring of shared-memory tiles, filled by
// cp.async. Tile 0 holds the K % BK leftover k (all of BK when K divides), so only tile 0 is
// partial and every later tile skips the k test.
template <class T, bool B_VEC>
__device__ __forceinline__ void k_loop(float (&acc)[T::TM][T::TN], int M, int N, int K,
                                       const float* A, int lda, const float* B, int ldb,
                                       float* as_ring, float* bs_ring, int bm0, int bn0, int tid,
                                       int a_lane, int b_lane, int first, int last) {
    const TileCopier<T, B_VEC> copier(A, lda, M, B, ldb, N, bm0, bn0, tid, shared_address(as_ring),
                                      shared_address(bs_ring));
    const int tiles = (K + T::BK - 1) / T::BK;
    const int remainder = K - (tiles - 1) * T::BK;
    auto k_start = [&](int tile) { return tile == 0 ? 0 : remainder + (tile - 1) * T::BK; };

#pragma unroll
    for (int s = 0; s < T::STAGES - 1; ++s) {
        const int tile = first + s;
        if (tile < last) {
            if (tile == 0)
                copier.template issue<true>(0, s, remainder);
            else
                copier.template issue<false>(k_start(tile), s, T::BK);
        }
        cp_async_commit();  // empty groups keep the count of groups in flight uniform
    }
    int read_stage = 0, write_stage = T::STAGES - 1;
    for (int tile = first; tile < last; ++tile) {
        cp_async_wait<T::STAGES - 2>();  // this thread's copies of `tile` have landed ...
        __syncthreads();                 // ... everyone's have, and write_stage was consumed
        const int next = tile + T::STAGES - 1;
        if (next < last) copier.template issue<false>(k_start(next), write_stage, T::BK);
        cp_async_commit();
        multiply_tile<T>(acc, as_ring + read_stage * T::A_STAGE + a_lane,
                         bs_ring + read_stage * T::B_STAGE + b_lane);
        read_stage = read_stage == T::STAGES - 1 ? 0 : read_stage + 1;
        write_stage = write_stage == T::STAGES - 1 ? 0 : write_stage + 1;
    }
}

// acc += the product of k tiles [first, last) of the C tile at (bm0, bn0), B copied 16 bytes at
// a time when B and ldb allow it, else 4.
template <class T>
__device__ __forceinline__ void multiply_range(float (&acc)[T::TM][T::TN], int M, int N, int K, const float* A,
                                               int lda, const float* B, int ldb, bool b_vec, float* as_ring,
                                               float* bs_ring, int bm0, int bn0, int tid, int a_lane, int b_lane,
                                               int first, int last) {
    if (b_vec)
        k_loop<T, true>(acc, M, N, K, A, lda, B, ldb, as_ring, bs_ring, bm0, bn0, tid, a_lane, b_lane, first, last);
    else
        k_loop<T, false>(acc, M, N, K, A, lda, B, ldb, as_ring, bs_ring, bm0, bn0, tid, a_lane, b_lane, first, last);
}

// Split-K: the SPLITK blocks of one C tile each hold a partial sum over their share of the k
// tiles. Each writes it to its slice of the workspace and counts itself in; the block that
// arrives last adds the slices up in slice order (so the result does not depend on which
// block was last), leaves the total in `acc` and resets the counter for the next launch.
// Returns whether this block is the one that writes C.
template <class T>
__device__ __forceinline__ bool reduce_split_k(float (&acc)[T::TM][T::TN], float* workspace,
                                               unsigned* tile_counters, int row0, int col0) {
    const int ldw = gridDim.x * T::BN;  // the workspace covers whole tiles: no bounds checks
    const size_t slice = size_t(gridDim.y) * T::BM * ldw;
    float* mine = workspace + blockIdx.z * slice + row0 * ldw + col0;
#pragma unroll
    for (int i = 0; i < T::TM; ++i)
#pragma unroll
        for (int g = 0; g < T::TN / 4; ++g)
            __stcg(reinterpret_cast<float4*>(mine + ((i / 4) * T::STEP_M + i % 4) * ldw + g * T::STEP_N),
                   make_float4(acc[i][4 * g], acc[i][4 * g + 1], acc[i][4 * g + 2], acc[i][4 * g + 3]));
    __syncthreads();
    __shared__ bool is_last;
    unsigned* counter = tile_counters + blockIdx.y * gridDim.x + blockIdx.x;
    if (threadIdx.x == 0) {
        // One fence pair in thread 0, not one per thread: the release fence is cumulative over the
        // stores the barrier ordered before it; the acquire fence's view reaches the CTA through
        // the barrier below (as stream_k.cuh's hand-over).
        __threadfence();  // release: the partial is visible device-wide before the count
        is_last = atomicAdd(counter, 1u) == T::SPLITK - 1;
        if (is_last) __threadfence();  // acquire: the other slices' partials are visible
    }
    __syncthreads();
    if (!is_last) return false;
    const float* base = workspace + row0 * ldw + col0;
#pragma unroll
    for (int i = 0; i < T::TM; ++i)
#pragma unroll
        for (int g = 0; g < T::TN / 4; ++g) {
            const int offset = ((i / 4) * T::STEP_M + i % 4) * ldw + g * T::STEP_N;
            float4 total = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            for (int z = 0; z < T::SPLITK; ++z) {
                const float4 part = __ldcg(reinterpret_cast<const float4*>(base + z * slice + offset));
                total.x += part.x, total.y += part.y, total.z += part.z, total.w += part.w;
            }
            acc[i][4 * g] = total.x, acc[i][4 * g + 1] = total.y;
            acc[i][4 * g + 2] = total.z, acc[i][4 * g + 3] = total.w;
        }
    if (threadIdx.x == 0) *counter = 0;
    return true;
}

// C = alpha * acc + beta * C for the lane's groups: float4 when aligned and inside, else
// element by element with bounds checks (edge tiles, odd ldc, misaligned C).
template <class T>
__device__ __forceinline__ void store_tile(const float (&acc)[T::TM][T::TN], float alpha, float beta,
                                           float* C, int ldc, int M, int N, int row0, int col0) {
    const bool vec = ldc % 4 == 0 && (reinterpret_cast<unsigned long long>(C) & 15) == 0;
#pragma unroll
    for (int i = 0; i < T::TM; ++i) {
        const int row = row0 + (i / 4) * T::STEP_M + i % 4;
        if (row >= M) continue;
#pragma unroll
        for (int g = 0; g < T::TN / 4; ++g) {
            const int col = col0 + g * T::STEP_N;
            float* c = C + row * ldc + col;
            const float* v = &acc[i][4 * g];
            if (vec && col + 3 < N) {
                float4 out = make_float4(alpha * v[0], alpha * v[1], alpha * v[2], alpha * v[3]);
                if (beta != 0.0f) {
                    const float4 old = *reinterpret_cast<const float4*>(c);
                    out.x = fmaf(beta, old.x, out.x), out.y = fmaf(beta, old.y, out.y);
                    out.z = fmaf(beta, old.z, out.z), out.w = fmaf(beta, old.w, out.w);
                }
                *reinterpret_cast<float4*>(c) = out;
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (col + j < N) c[j] = gemm_epilogue(v[j], alpha, beta, c + j);
            }
        }
    }
}

// A thread's place in the block tile: its index, and the first row / column of its lane tile.
struct Lane {
    int tid, a_lane, b_lane;
};
template <class T>
__device__ __forceinline__ Lane lane_of(int tid) {
    const int warp = tid / 32, lane = tid % 32;
    const int wm0 = (warp / T::WARPS_N) * T::WM, wn0 = (warp % T::WARPS_N) * T::WN;
    return {tid, wm0 + lane / T::LANES_N * 4, wn0 + lane % T::LANES_N * 4};
}

// Stream-K (STREAMK = 1; stream_k.cuh): this CTA's units in order, its share of the stream-K
// steps (a k range of one tile each), then its whole tiles of the data-parallel waves. A unit
// that ends a tile another CTA started is stored as a partial; one that starts a tile that
// others end waits for them and adds their partials; a whole tile goes straight to C.
// Only the unit number u is carried from unit to unit, and across the k loop: the unit, the
// thread's lane offsets and the B copy width are worked out afresh from the arguments (through
// stream_k::fresh, so the compiler cannot hoist them out of the loop). Hoisted, they stayed live
// beside the accumulators and the 8x8-lane tilings, at their 128-register cap, spilled.
template <class T>
__device__ __forceinline__ void stream_k_units(int M, int N, int K, float alpha, const float* A, int lda,
                                               const float* B, int ldb, float beta, float* C, int ldc,
                                               float* partials, unsigned* flags, float* as_ring, float* bs_ring) {
    using stream_k::fresh;
    for (int u = 0;; ++u) {
        const stream_k::Unit w = stream_k::unit_of<T::BM, T::BN, T::BK>(M, N, K, u);
        if (w.k1 == 0) break;
        float acc[T::TM][T::TN];
#pragma unroll
        for (int i = 0; i < T::TM; ++i)
#pragma unroll
            for (int j = 0; j < T::TN; ++j) acc[i][j] = 0.0f;
        __syncthreads();  // every warp is done with the ring before this unit's prologue refills it
        {
            const Lane l = lane_of<T>(fresh(threadIdx.x));
            const int k_tiles = (fresh(K) + T::BK - 1) / T::BK;  // 0 when K = 0: each tile's one step is empty
            const bool b_vec = aligned16(B, fresh(ldb));
            multiply_range<T>(acc, M, N, K, A, lda, B, ldb, b_vec, as_ring, bs_ring, w.tile / w.tiles_n * T::BM,
                              w.tile % w.tiles_n * T::BN, l.tid, l.a_lane, l.b_lane, min(w.k0, k_tiles),
                              min(w.k1, k_tiles));
        }
        const stream_k::Unit v = stream_k::unit_of<T::BM, T::BN, T::BK>(M, N, K, u);  // == w
        const int cta = stream_k::cta_index();
        if (v.k0 > 0) {  // the end of a tile a lower CTA started: only ever this CTA's first unit
            stream_k::store_partial<T::THREADS>(acc, partials + static_cast<size_t>(cta) * T::BM * T::BN,
                                                flags + cta);
            continue;
        }
        if (v.k1 < v.iters) {  // the start of a tile that higher CTAs end: this CTA's last stream-K unit
            const int last = stream_k::schedule_of<T::BM, T::BN, T::BK>(M, N, K).peers_end(cta, v.tile);
            stream_k::wait_for_peers(flags, cta + 1, last);
            for (int p = cta + 1; p < last; ++p)
                stream_k::add_partial<T::THREADS>(acc, partials + static_cast<size_t>(p) * T::BM * T::BN);
        }
        const Lane l = lane_of<T>(fresh(threadIdx.x));
        store_tile<T>(acc, alpha, beta, C, ldc, M, N, v.tile / v.tiles_n * T::BM + l.a_lane,
                      v.tile % v.tiles_n * T::BN + l.b_lane);
    }
}

}  // namespace warptiled

// MIN_BLOCKS: the resident CTAs an SM the compiler budgets registers for; 0 keeps the Tiling's aim
// (16 warps an SM), 1 lets a CTA that fills an SM alone use up to 255 registers a thread.
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES, int SPLITK, int STREAMK, int MIN_BLOCKS>
__global__ void __launch_bounds__(warptiled::Tiling<BM, BN, BK, WM, WN, TM, TN, STAGES, SPLITK>::THREADS,
                                  MIN_BLOCKS > 0 ? MIN_BLOCKS
                                                 : warptiled::Tiling<BM, BN, BK, WM, WN, TM, TN, STAGES, SPLITK>::MIN_BLOCKS)
sgemm_warptiled(int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
                const float* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc,
                float* __restrict__ workspace, unsigned* __restrict__ tile_counters) {
    using T = warptiled::Tiling<BM, BN, BK, WM, WN, TM, TN, STAGES, SPLITK>;
    extern __shared__ float4 shared_ring[];  // float4: 16-byte alignment for cp.async
    float* as_ring = reinterpret_cast<float*>(shared_ring);
    float* bs_ring = as_ring + T::STAGES * T::A_STAGE;

    if constexpr (STREAMK > 0) {  // workspace: one partial tile per CTA; tile_counters: one flag per CTA
        static_assert(SPLITK == 1, "stream-K splits the k loop itself");
        warptiled::stream_k_units<T>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, workspace, tile_counters,
                                     as_ring, bs_ring);
    } else {  // one C tile per block (x along N, y along M), its k loop shared by SPLITK blocks (z)
        const int tid = threadIdx.x;
        const int warp = tid / 32, lane = tid % 32;
        const int bm0 = blockIdx.y * BM, bn0 = blockIdx.x * BN;
        const int wm0 = (warp / T::WARPS_N) * WM, wn0 = (warp % T::WARPS_N) * WN;
        const int lm = lane / T::LANES_N, ln = lane % T::LANES_N;
        const int a_lane = wm0 + lm * 4, b_lane = wn0 + ln * 4;  // the lane's first row / column

        float acc[TM][TN];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

        // This block's share of the k tiles (all of them without split-K).
        const int tiles = (K + BK - 1) / BK;
        const int first = int(blockIdx.z * (long long)tiles / SPLITK);
        const int last = int((blockIdx.z + 1) * (long long)tiles / SPLITK);
        const bool b_vec = ldb % 4 == 0 && (reinterpret_cast<unsigned long long>(B) & 15) == 0;
        warptiled::multiply_range<T>(acc, M, N, K, A, lda, B, ldb, b_vec, as_ring, bs_ring, bm0, bn0, tid, a_lane,
                                     b_lane, first, last);

        if constexpr (SPLITK > 1) {
            if (!warptiled::reduce_split_k<T>(acc, workspace, tile_counters, bm0 + a_lane, bn0 + b_lane)) return;
        }
        warptiled::store_tile<T>(acc, alpha, beta, C, ldc, M, N, bm0 + a_lane, bn0 + b_lane);
    }
}
