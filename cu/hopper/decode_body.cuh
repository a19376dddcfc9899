// decode_body.cuh -- small M (decode: a few rows of activations A against a large weight B):
// wgmma's roles swapped, C^T = B^T A^T, and a ring as deep as shared memory holds.
//
// At small M the read of B sets the time: a 16 x 4096 x 4096 GEMM is 32 MiB of B against 0.1
// GFLOP. any_shape's tiles put M on wgmma's M side, which is 64 rows whatever M is, so at M = 16
// three quarters of each A stage is zero fill, and a 64 x 64 tile's 16 KiB stage leaves room for
// 6 stages, 48 KiB of B in flight a CTA. Here a tile is 64 * CONSUMERS columns of n (wgmma's M,
// read from the B tile) by MT rows of m (wgmma's N = MT: 8, 16, 32 or 64, from the A tile), and
// the ring is as deep as fits: at MT = 16 and one consumer a stage is 8 KiB of B and 2 KiB of
// A, 11 stages, two CTAs an SM (176 KiB of B in flight an SM). cuBLAS runs the same form on
// these shapes (the profile command on the H100: nvjet_sm90_tss_64x16_64x16 at 32x4096x4096, a
// 64 x 16 tile, 16 stages; results/h100-80gb-hbm3/profile-hopper-bf16-32x4096x4096-any-shape.txt).
// The FP8 kernel runs the same tiles on FP8 codes (fp8_body.cuh's run_decode: B stored N x K,
// a k tile of 128 codes in the same 128-byte rows, its own promoted k loop through run_with, and
// its element type's pair of formats exchanged, B's being wgmma's A operand here).
//
// Everything else is any_shape's (persistent_body.cuh): the persistent schedule (tiles of the
// swapped problem in grouped order, split-K when SPLITS > 1, the tail split), the TMA loads
// (load_stage, with A's box MT rows and B's 64 * CONSUMERS columns), the serial split-K
// hand-over (reduce_splits: the last split to finish sums the partials in split order, so
// results are bitwise reproducible), PDL, and with CM = 2 clusters of two tile rows that share
// each B tile by multicast (between 64 and 128 rows of A, where B would otherwise be read once
// per tile row; docs/hopper.md), and with CN = 2 or 4 tile columns sharing each A tile. A stored
// row-major is K-major (wgmma's B operand as it is);
// stored K x M (TA = 1, a weight gradient dW = dY^T X) it is M-major (imm-trans-b = 1), which
// takes MT = 64: then a k row of the A tile is 64 elements, 128 bytes, one swizzle atom wide as
// any_shape's M-major A tiles are (a narrower tile would need the 32- and 64-byte swizzles). B
// stored K x N is N-major (wgmma's A operand transposed, imm-trans-a = 1), stored N x K (TB = 1,
// a linear layer's weight) K-major.
//
// Epilogue: d[4j + 2h + e] of a consumer is C^T[16 warp + lane/4 + 8h][8j + 2(lane%4) + e] of
// its 64 x MT block, i.e. C[m0 + 8j + 2(lane%4) + e][n0 + 64 consumer + 16 warp + lane/4 + 8h].
// Each element is stored from registers (a warp's store covers 4 rows x 8 consecutive columns):
// C is M x N, small beside B's K x N, so its store pattern costs little.
//
// Small N (MN = 1): the host hands over the problem with M and N exchanged, D^T = op(B)^T op(A)^T,
// so that N's few columns are the tiles' few rows (a classifier head, a router, a LoRA down
// projection: x @ W^T with W of 8-64 rows). op(B)^T is op(A)'s role and stored transposed where B
// is not, and the same for op(A)^T: the kernel reads A and B with the layouts exchanged and
// flipped (run does it). Its product P = D^T goes to D as D's rows (store_exchanged): P[r][c] is
// D[c][r], the bias indexed by r.
#pragma once
#include "persistent_body.cuh"

namespace hopper_small_m {
using namespace hopper;

// Shared memory a CTA may use: the SM's 228 KiB, less 1 KiB reserved a CTA, over the CTAs an SM
// holds (two with one consumer, so that one CTA's epilogue and hand-over overlap the other's loads).
constexpr int SM_SHARED = 228 * 1024;

// CM = 2: clusters of two tile rows (2 MT rows of A) over the same 64 * CONSUMERS columns of B;
// each CTA loads half of the B tile and multicasts it to both (persistent_body.cuh's load_stage),
// so B, the operand that sets the time, crosses L2 once for the two. CN = 2 or 4: tile columns
// over the same MT rows of A, each CTA loading its 1/CN of the A tile (whole 8-row swizzle atoms:
// MT of 16 rows or more with CN = 2, 32 or more with CN = 4); CM = 2 with CN = 4 is cuBLASLt's
// 4 x 2 cluster at M = 128 in its column-major terms (docs/hopper.md, M = 128).
// PINGPONG (two consumers, MT of 128 or 160): each consumer computes whole MT x 128 tiles (both
// 64-column blocks, MT accumulators a thread), in turns with the other (persistent_body.cuh's
// take_turns), so that one's epilogue runs while the other's k loop keeps the tensor cores busy:
// cuBLASLt's form on full grids of short K (the profile command on the H100, 6144x8192x1024:
// nvjet_sm90_tss_128x160_64x5_2x1, a 160-row tile in its terms' transpose, 5 stages).
template <class Elem, int MT, int CONSUMERS_, int TB_, int CM_ = 1, int CN_ = 1, bool PINGPONG_ = false, int TA_ = 0>
struct Config {
    static constexpr int CONSUMERS = CONSUMERS_, CTAS_PER_SM = CONSUMERS == 1 ? 2 : 1;
    static constexpr int THREADS = 128 * (CONSUMERS + 1);
    // load_stage's names (persistent_body.cuh): A is the MT x BK tile of A, B the BK x BN tile of B.
    static constexpr int BM = MT, BN = 64 * CONSUMERS, BK = KTile<Elem>::BK;
    static constexpr int CM = CM_, CN = CN_, CLUSTER = CM_ * CN_;
    static constexpr bool PINGPONG = PINGPONG_;
    static constexpr int READERS = PINGPONG ? 1 : CONSUMERS;  // consumer warpgroups of a CTA that read each slot
    static constexpr bool A_M_MAJOR = TA_ != 0, B_N_MAJOR = TB_ == 0;
    static constexpr int A_BYTES = MT * 128, B_BYTES = BN * 128, STAGE_BYTES = A_BYTES + B_BYTES;
    static constexpr int A_SLICE_ROWS = (A_M_MAJOR ? BK : BM) / CN, B_SLICE_ROWS = (B_N_MAJOR ? BK : BN) / CM;
    // the barriers in 256 bytes after the ring, 1024 for aligning the dynamic shared memory
    static constexpr int OVERHEAD = 256 + 1024;
    static constexpr int BUDGET = SM_SHARED / CTAS_PER_SM - 1024;
    static constexpr int FIT = (BUDGET - OVERHEAD) / STAGE_BYTES;
    // at most 12, the deepest ring measured (the barriers' 256 bytes would hold 15)
    static constexpr int STAGES = FIT < 12 ? FIT : 12;
    static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + OVERHEAD;
    static constexpr int PRODUCER_REGS = 56;
    static constexpr int CONSUMER_REGS = CONSUMERS == 1 ? 200 : 224;
    static_assert(Elem::bytes == 2 || TB_ == 1, "e4m3 B is read K-major (stored N x K) only");
    static_assert(!A_M_MAJOR || (Elem::bytes == 2 && MT == 64 && CN_ == 1 && !PINGPONG_),
                  "A stored K x M: 16-bit, MT = 64 (a k row of the tile one 128-byte swizzle atom), CN = 1");
    static_assert(MT == 8 || MT == 16 || MT == 32 || MT == 64 || MT == 128 || MT == 160,
                  "MT is a wgmma N: 8 to 64, or 128 or 160");
    static_assert(!PINGPONG || (CONSUMERS == 2 && MT >= 128 && Elem::bytes == 2),
                  "ping-pong: two consumers of 16-bit MT x 128 tiles, MT of 128 or 160");
    static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one or two consumer warpgroups");
    static_assert(A_BYTES % 1024 == 0, "each stage's B tile starts on a 1024-byte swizzle atom");
    static_assert((CM == 1 || CM == 2) && (CN == 1 || CN == 2 || CN == 4),
                  "clusters of one or two tile rows by one, two or four tile columns");
    static_assert(A_SLICE_ROWS % 8 == 0, "A slices are whole 8-row swizzle atoms");
    static_assert(STAGES >= 4, "a ring of at least 4 stages");
    static_assert(2 * STAGES * 8 + 16 + (PINGPONG ? 16 : 0) <= 256, "barriers fit in their 256 bytes");
};

// Ring slot `slot`'s k tile: consumer c's 64 columns of n (wgmma's A) times the MT rows of A
// (wgmma's B). Either tile is MN-major (64 k rows of 128 bytes per 64 columns, one 8 KiB block;
// a k step of 16 is 16 rows) or K-major (rows of 128 bytes; a k step is 32 bytes).
// The descriptors are those of slot 0, k step 0, moved on by addition (persistent_body.cuh's
// Descriptor): the slot-0 ones do not change over the k loop, so they leave it.
template <class Elem, class Cfg>
__device__ __forceinline__ void mma_stage(float (&d)[Cfg::BM / 2], const unsigned char* smem, int slot, int consumer,
                                          bool first) {
    const unsigned a = smem_u32(smem), b = a + Cfg::A_BYTES + consumer * 64 * 128;
    const hopper_pws::Descriptor a_desc(Cfg::A_M_MAJOR ? smem_desc(a, 64 * 128, 1024) : smem_desc(a, 16, 1024)),
        b_desc(Cfg::B_N_MAJOR ? smem_desc(b, 64 * 128, 1024) : smem_desc(b, 16, 1024));
    static_assert(Cfg::STAGE_BYTES % 16 == 0, "stages start on 16-byte units");
    const unsigned stage = slot * (Cfg::STAGE_BYTES / 16);
#pragma unroll
    for (int step = 0; step < KTile<Elem>::STEPS; ++step) {
        const unsigned b_step = Cfg::B_N_MAJOR ? step * 16 * 128 / 16 : step * 32 / 16;
        const unsigned a_step = Cfg::A_M_MAJOR ? step * 16 * 128 / 16 : step * 32 / 16;
        mma_ss<Elem, Cfg::BM, Cfg::A_M_MAJOR ? 1 : 0, Cfg::B_N_MAJOR ? 1 : 0>(
            d, b_desc.at(stage + b_step), a_desc.at(stage + a_step), first && step == 0 ? 0 : 1);
    }
}

// A unit's k tiles summed by the tensor cores alone (consume_unit): the 16-bit kernels' loop, and
// the FP8 kernel's without promotion.
template <class Elem, class Cfg>
__device__ __forceinline__ void k_loop_whole(float (&d)[Cfg::BM / 2], const hopper_pws::Unit& w, Barrier* full,
                                             Barrier* empty, const unsigned char* smem, int consumer, int t, int& s,
                                             int& phase) {
    hopper_pws::consume_unit<Cfg>(d, w, full, empty, t, s, phase,
                                  [&](int slot, bool first) { mma_stage<Elem, Cfg>(d, smem, slot, consumer, first); });
}

// The row of C that a consumer's d[4j + 2h + e] belongs to (the file's opening comment).
__device__ __forceinline__ int fragment_row(int m0, int j, int e, int lane) { return m0 + 8 * j + 2 * (lane % 4) + e; }

// C[m][n] = act(alpha * acc + beta * C + bias[n]) for the consumer's 64 x MT block of C^T.
// Where the block lies inside C with beta = 0 (a full grid's tiles) the addresses step from one
// row pointer by constant multiples of ldc: per element index arithmetic, bounds checks and the
// beta test took 20 instructions a store (ncu's source counters at 6144x24576x512), which the
// ping-pong tiles' epilogue, 160 stores a thread, could not hide behind the other's k loop.
// held: the bias at columns n and n + 8 as stored (hold_bias).
template <int MT, class Epi>
__device__ __forceinline__ void store_transposed(const float (&d)[MT / 2], int M, int m0, int n, const Epi& epi,
                                                 const typename Epi::T (&held)[2], typename Epi::T* __restrict__ C,
                                                 int ldc, int lane) {
    using Out = typename Epi::Out;
    const float b[2] = {Out::value(held[0]), Out::value(held[1])};
    if (m0 + MT <= M && n + 8 < epi.N && epi.beta == 0.0f) {
        typename Epi::T* row = C + static_cast<long long>(fragment_row(m0, 0, 0, lane)) * ldc + n;
        const long long rows8 = 8LL * ldc;
#pragma unroll
        for (int j = 0; j < MT / 8; ++j, row += rows8)
#pragma unroll
            for (int e = 0; e < 2; ++e)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    Out::store(row + e * ldc + 8 * h, epi.finish(epi.alpha * d[4 * j + 2 * h + e], b[h]));
        return;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int col = n + 8 * h;
        if (col >= epi.N) continue;
#pragma unroll
        for (int j = 0; j < MT / 8; ++j) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int row = fragment_row(m0, j, e, lane);
                if (row >= M) continue;
                typename Epi::T* out = C + static_cast<long long>(row) * ldc + col;
                float v = epi.alpha * d[4 * j + 2 * h + e];
                if (epi.beta != 0.0f) v = fmaf(epi.beta, Out::load(out), v);
                Out::store(out, epi.finish(v, b[h]));
            }
        }
    }
}

// MN = 1 (the file's opening comment): the consumer's block of P = D^T, P[r][c] = act(alpha * acc
// + beta * D[c][r] + bias[r]) stored at D[c][r] = C[c * ldc + r]; epi.N is P's rows (D's columns,
// the bias's length). A thread's e = 0 and 1 are adjacent r, adjacent elements of a row of D: one
// pair store where C's rows allow it (a warp's store covers 8 rows of D x 4 pairs).
template <int MT, class Epi>
__device__ __forceinline__ void store_exchanged(const float (&d)[MT / 2], int N, int m0, int n, const Epi& epi,
                                                typename Epi::T* __restrict__ C, int ldc, int lane) {
    using Out = typename Epi::Out;
    const bool pairs = c_pairs_aligned(C, ldc);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int col = n + 8 * h;  // P's column: D's row
        if (col >= N) continue;
        typename Epi::T* row = C + static_cast<long long>(col) * ldc;
#pragma unroll
        for (int j = 0; j < MT / 8; ++j) {
            const int r = fragment_row(m0, j, 0, lane);  // even: m0 and 8j are, and 2 (lane % 4)
            if (r >= epi.N) continue;
            float v[2] = {epi.alpha * d[4 * j + 2 * h], epi.alpha * d[4 * j + 2 * h + 1]};
            if (pairs && r + 1 < epi.N) {
                if (epi.beta != 0.0f) {
                    const float2 c = Out::load2(row + r);
                    v[0] = fmaf(epi.beta, c.x, v[0]), v[1] = fmaf(epi.beta, c.y, v[1]);
                }
                Out::store2(row + r, epi.finish(v[0], epi.bias_at(r)), epi.finish(v[1], epi.bias_at(r + 1)));
                continue;
            }
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                if (r + e >= epi.N) continue;
                if (epi.beta != 0.0f) v[e] = fmaf(epi.beta, Out::load(row + r + e), v[e]);
                Out::store(row + r + e, epi.finish(v[e], epi.bias_at(r + e)));
            }
        }
    }
}

// The bias at a thread's columns n and n + 8 of C (store_transposed's) as stored, loaded as the
// tile's k loop starts so that the epilogue does not wait for them (hopper_epilogue.cuh's
// BiasPairs says what that saved). With MN the bias runs along P's rows, which store_exchanged
// reads itself.
template <bool MN, int OUT, int EPI>
__device__ __forceinline__ void hold_bias(typename OutType<OUT>::T (&held)[2],
                                          const typename OutType<OUT>::T* __restrict__ bias, int N, int n) {
    const Epilogue<OUT, EPI> epi{1.0f, 0.0f, bias, N};
    held[0] = MN ? 0 : epi.bias_bits(n);
    held[1] = MN ? 0 : epi.bias_bits(n + 8);
}

// Where a consumer's block of the kernel's product goes: C's rows (store_transposed, held from
// hold_bias), or with MN D's rows, P being D^T (store_exchanged, the bias along P's rows).
template <int MT, bool MN, int OUT, int EPI>
__device__ __forceinline__ void store_block(const float (&d)[MT / 2], int M, int N, int m0, int n, float alpha,
                                            float beta, const typename OutType<OUT>::T* __restrict__ bias,
                                            const typename OutType<OUT>::T (&held)[2],
                                            typename OutType<OUT>::T* __restrict__ C, int ldc, int lane) {
    if constexpr (MN) store_exchanged<MT>(d, N, m0, n, Epilogue<OUT, EPI>{alpha, beta, bias, M}, C, ldc, lane);
    else store_transposed<MT>(d, M, m0, n, Epilogue<OUT, EPI>{alpha, beta, bias, N}, held, C, ldc, lane);
}

// The decode schedule with the consumer's work on a unit given (the FP8 kernel's promoted k loop
// and scales, fp8_body.cuh; `run` below for 16-bit A and B):
//   k_loop(d, w, full, empty, smem, consumer, t, s, phase): the unit's k tiles into d (wgmma's
//     fragment of the consumer's 64 x MT block of C^T), the ring position carried in s, phase;
//   epilogue_alpha(): the epilogue's alpha, read once a consumer (after PDL's take-over: it may
//     read global memory);
//   scale(d, w, consumer, warp, lane): the finished block before split-K and the epilogue.
// CN, PINGPONG: Config's (the ping-pong tiles run no k_loop or scale of the caller's: 16-bit only).
// MN: the product is D^T (the file's opening comment; TA and TB are then the exchanged problem's).
template <class Elem, int MT, int CONSUMERS, int OUT, int EPI, int TB, int CM, int CN = 1, bool PINGPONG = false,
          int TA = 0, bool MN = false, class KLoop, class Alpha, class Scale>
__device__ __forceinline__ void run_with(int M, int N, int K, const TensorMap* a_map, const TensorMap* b_map,
                                         float beta, typename OutType<OUT>::T* __restrict__ C, int ldc, int group_m,
                                         int splits, int whole, float* __restrict__ workspace,
                                         int* __restrict__ counters, const typename OutType<OUT>::T* __restrict__ bias,
                                         KLoop&& k_loop, Alpha&& epilogue_alpha, Scale&& scale) {
    using Cfg = Config<Elem, MT, CONSUMERS, TB, CM, CN, PINGPONG, TA>;
    constexpr int STAGES = Cfg::STAGES, CLUSTER = Cfg::CLUSTER;
    unsigned char* smem = aligned_dynamic_smem();
    Barrier* full = reinterpret_cast<Barrier*>(smem + STAGES * Cfg::STAGE_BYTES);
    Barrier* empty = full + STAGES;
    volatile int* last_flag = reinterpret_cast<volatile int*>(empty + STAGES);
    Barrier* turns = empty + STAGES + 2;  // PINGPONG: turns[c] completes a phase as consumer c ends a k loop
    const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0), t = threadIdx.x % 128;
    auto schedule = [&] { return hopper_pws::Schedule(M, N, K, MT, Cfg::BN, Cfg::BK, CM, CN, splits, whole, group_m); };
    // a cluster's CTAs take the same units, each its own tile of the unit's super tile; the roles
    // read their place after setmaxnreg (values live across it were spilled: fp8_body.cuh)
    auto cluster_rank = [] { return CLUSTER == 1 ? 0 : static_cast<int>(cluster_cta_rank()); };

    if (threadIdx.x < STAGES) {
        barrier_init(&full[threadIdx.x], 1);
        barrier_init(&empty[threadIdx.x], Cfg::READERS * CLUSTER);  // every reader of every CTA the slot reaches
        if (PINGPONG && threadIdx.x < 2) barrier_init(&turns[threadIdx.x], 1);
        fence_barrier_init();
    }
    if (threadIdx.x == 32) {
        tma_prefetch_map(a_map);
        tma_prefetch_map(b_map);
    }
    if constexpr (CLUSTER == 1) __syncthreads();
    else cluster_sync();  // the peer's barriers exist before anyone multicasts into them
    take_over_from_previous_grid();  // with PDL: nothing global was touched before this

    if (wg == 0) {
        shrink_registers<Cfg::PRODUCER_REGS>();
        if (t == 0) {
            const int rank = cluster_rank();
            hopper_pws::produce<Cfg>(schedule(), smem, full, empty, a_map, b_map, blockIdx.x / CLUSTER,
                                     gridDim.x / CLUSTER, rank % CM, rank / CM);
        }
        __syncwarp();
    } else {
        grow_registers<Cfg::CONSUMER_REGS>();
        const hopper_pws::Schedule sched = schedule();
        const int cluster_id = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER, rank = cluster_rank();
        const int rm = rank % CM, rn = rank / CM;
        const int consumer = wg - 1, warp = t / 32, lane = t % 32;
        const float alpha = epilogue_alpha();
        int s = 0, phase = 0;
        auto unit_of = [&](int u) { return sched.unit(u, rm, rn, CM, CN, MT, Cfg::BN); };
        if constexpr (PINGPONG) {
            // each consumer both 64-column blocks of its tiles, in turns (take_turns); no split-K
            float d_left[MT / 2], d_right[MT / 2];
            typename OutType<OUT>::T b_left[2], b_right[2];
            hopper_pws::take_turns<Cfg>(
                sched, cluster_id, clusters, consumer, t, turns, s, phase, unit_of,
                [&](const hopper_pws::Unit& w) {
                    const int n = w.n0 + 16 * warp + lane / 4;
                    hold_bias<MN, OUT, EPI>(b_left, bias, N, n);
                    hold_bias<MN, OUT, EPI>(b_right, bias, N, n + 64);
                    hopper_pws::consume_unit<Cfg>(d_left, w, full, empty, t, s, phase, [&](int slot, bool first) {
                        mma_stage<Elem, Cfg>(d_left, smem, slot, 0, first);
                        mma_stage<Elem, Cfg>(d_right, smem, slot, 1, first);
                    });
                    fence_accumulators(d_right);  // consume_unit waited for both blocks' wgmma
                },
                [&](const hopper_pws::Unit& w) {
                    const int n = w.n0 + 16 * warp + lane / 4;
                    store_block<MT, MN, OUT, EPI>(d_left, M, N, w.m0, n, alpha, beta, bias, b_left, C, ldc, lane);
                    store_block<MT, MN, OUT, EPI>(d_right, M, N, w.m0, n + 64, alpha, beta, bias, b_right, C, ldc,
                                                  lane);
                });
        } else {
            float d[MT / 2];
            typename OutType<OUT>::T b[2];
            for (int u = cluster_id; u < sched.units; u += clusters) {
                const hopper_pws::Unit w = unit_of(u);
                const int n = w.n0 + 64 * consumer + 16 * warp + lane / 4;
                hold_bias<MN, OUT, EPI>(b, bias, N, n);
                k_loop(d, w, full, empty, smem, consumer, t, s, phase);
                scale(d, w, consumer, warp, lane);
                if (w.splits > 1) {
                    // the serial hand-over (a split tile's units need not all be resident at once); the
                    // flag, set before reduce_splits' last barrier, says whether this CTA summed the tile
                    hopper_pws::reduce_splits<hopper_pws::AccumulatorOfBM<Cfg>>(d, w, false, consumer, t,
                                                                              workspace, counters, last_flag);
                    if (!*last_flag) continue;
                }
                store_block<MT, MN, OUT, EPI>(d, M, N, w.m0, n, alpha, beta, bias, b, C, ldc, lane);
            }
        }
    }
    if constexpr (CLUSTER > 1) cluster_sync();  // no CTA leaves while its peer may still multicast into it
}

// 16-bit A and B: the tensor cores sum the unit's whole k range (consume_unit), alpha as given.
// TA, TB: the problem's layout; with MN the kernel reads op(B)^T as its A, stored transposed where B
// is not (1 - TB), and op(A)^T as its B (1 - TA): the file's opening comment.
template <class Elem, int MT, int CONSUMERS, int OUT, int EPI, int TB, int CM, int CN = 1, bool PINGPONG = false,
          int TA = 0, bool MN = false>
__device__ __forceinline__ void run(int M, int N, int K, float alpha, const TensorMap* a_map, const TensorMap* b_map,
                                    float beta, typename OutType<OUT>::T* __restrict__ C, int ldc, int group_m,
                                    int splits, int whole, float* __restrict__ workspace,
                                    int* __restrict__ counters, const typename OutType<OUT>::T* __restrict__ bias) {
    constexpr int KA = MN ? 1 - TB : TA, KB = MN ? 1 - TA : TB;  // the layout of the problem computed
    using Cfg = Config<Elem, MT, CONSUMERS, KB, CM, CN, PINGPONG, KA>;
    run_with<Elem, MT, CONSUMERS, OUT, EPI, KB, CM, CN, PINGPONG, KA, MN>(
        M, N, K, a_map, b_map, beta, C, ldc, group_m, splits, whole, workspace, counters, bias,
        [](float (&d)[MT / 2], const hopper_pws::Unit& w, Barrier* full, Barrier* empty, unsigned char* smem,
           int consumer, int t, int& s, int& phase) {
            k_loop_whole<Elem, Cfg>(d, w, full, empty, smem, consumer, t, s, phase);
        },
        [alpha] { return alpha; }, [](float (&)[MT / 2], const hopper_pws::Unit&, int, int, int) {});
}

}  // namespace hopper_small_m
