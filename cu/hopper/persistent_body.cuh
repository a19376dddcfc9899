// persistent_body.cuh -- the persistent, warp-specialised wgmma GEMM that rungs 3, 4 and 5 build:
// rung 3 (persistent.cu) uses it as is, rung 4 (cluster_multicast.cu) with clusters, rung 5
// (any_shape.cu) with split-K, clusters and TMA stores of C (EPILOGUE 3). Each rung's file says
// what its setting changes and what that did.
//
// Roles as in rung 2: warpgroup 0 produces (one thread issues TMA; 56 registers, since the
// cluster and split-K bookkeeping spilled at 40), warpgroups 1 and 2 consume (224 registers; 64 x
// BN rows each of a 128 x BN tile, or with NSPLIT = 2 64 x BN/2 columns each of a 64 x BN
// tile). What is new is the loop around them: a CTA stays
// resident and walks the work units u = cluster, cluster + clusters, ... in a grouped order
// (GROUP_M tile rows at a time, so the ~132 tiles in flight share rows of A and columns of B in
// L2). The stage ring and its phases continue from one unit to the next, so the producer loads
// the next tile's first k tiles while the consumers run the epilogue of the last one.
//
// Clusters (CM x CN CTAs, CM tile rows by CN tile columns, cluster rank r = rn * CM + rm): the CM
// CTAs of a cluster column need the same B tile and the CN CTAs of a cluster row the same A tile.
// Each CTA loads 1/CM of the B tile and 1/CN of the A tile and multicasts its slices to the CTAs
// that share them, so L2 -> SM traffic falls by those factors. Slices are whole swizzle atoms
// (multiples of 8 rows of 128 bytes), so the layout wgmma reads is the one a single CTA would
// have loaded. A slot is refilled only when every consumer of every CTA of the cluster released
// it: empty barriers count 2 consumers (one with PINGPONG) x CM*CN CTAs.
#pragma once
#include "hopper_common.cuh"
#include "wgmma.cuh"
#include "hopper_epilogue.cuh"

namespace hopper_pws {
using namespace hopper;

template <class Elem, int BN_, int STAGES_, int CM_, int CN_, int CONSUMERS_ = 2, bool TMA_STORE_ = false,
          int TA_ = 0, int TB_ = 0, int CK_ = 1, bool PINGPONG_ = false, int NSPLIT_ = 1>
struct Config {
    // CONSUMERS = 2: a 128 x BN tile, one CTA per SM. CONSUMERS = 1: a 64 x BN tile and two CTAs
    // per SM (half the registers and at most half the shared memory each), for grids that would
    // otherwise leave SMs idle. NSPLIT = 2 (two consumers): a 64 x BN tile whose columns the two
    // consumers split, each a 64 x BN/2 half (WN columns), one CTA per SM: at small M two
    // warpgroups issue each tile's wgmma and store its C where one would.
    static constexpr int NSPLIT = NSPLIT_, CONSUMERS = CONSUMERS_, BM = 64 * CONSUMERS_ / NSPLIT_, BN = BN_;
    static constexpr int WN = BN_ / NSPLIT_, STAGES = STAGES_;
    static constexpr int CM = CM_, CN = CN_, CLUSTER = CM_ * CN_;
    // CK > 1: split-K inside a cluster of CK CTAs, the partials added through distributed shared
    // memory (ClusterSplit below). CLUSTER counts the CTAs that multicast to each other: none here.
    static constexpr int CK = CK_;
    // PINGPONG: the two consumers take turns on whole 128 x BN tiles, each its own (two m64
    // halves, BN accumulators a thread), so that one's epilogue runs while the other's k loop
    // keeps the tensor cores busy (run's PINGPONG branch). A slot is then read by one consumer a CTA.
    static constexpr bool PINGPONG = PINGPONG_;
    static constexpr int READERS = PINGPONG ? 1 : CONSUMERS;  // consumer warpgroups of a CTA that read each slot
    static constexpr int THREADS = 128 * (CONSUMERS + 1), CTAS_PER_SM = CONSUMERS == 1 ? 2 : 1;
    static constexpr int BK = KTile<Elem>::BK;
    // Operand majors in shared memory, as stored in global memory (TA, TB: the operand is stored
    // transposed). A: K-major (rows of m, 128 bytes of k each), or M-major when stored K x M
    // (BM/64 blocks of 64 m, one 128-byte row per k). B: N-major when stored K x N (16-bit), or
    // K-major when stored N x K, and for tf32, which arrives transposed (B^T).
    static constexpr bool A_M_MAJOR = TA_ != 0;
    static constexpr bool B_N_MAJOR = Elem::bytes == 2 && TB_ == 0;
    static_assert(!A_M_MAJOR || Elem::bytes == 2, "wgmma reads 32-bit A only K-major");
    static constexpr int A_BYTES = BM * 128, B_BYTES = BN * 128, STAGE_BYTES = A_BYTES + B_BYTES;
    // Rows of 128 bytes of A this CTA loads: m rows of the K-major tile, or k rows of each 64-wide
    // m box (M-major). This is the A map's box extent in its outer dimension.
    static constexpr int A_SLICE_ROWS = (A_M_MAJOR ? BK : BM) / CN;
    // Rows of 128 bytes of B this CTA loads: k rows of each 64-wide n box (N-major), or n rows
    // of the K-major tile. This is the B map's box extent in its outer dimension.
    static constexpr int B_SLICE_ROWS = (B_N_MAJOR ? BK : BN) / CM;
    // The consumers' epilogue staging, each: 64 rows x 32 columns (+8 padding) for store_staged;
    // with TMA stores (store_tma) STORE_BUFFERS swizzled 64 x 32 chunks, 1024-byte aligned (two
    // with two consumers; one with one, whose two CTAs per SM leave room for no more).
    static constexpr bool TMA_STORE = TMA_STORE_;
    static constexpr int STORE_BUFFERS = CONSUMERS == 2 ? 2 : 1;
    static constexpr int STAGING_FLOATS =
        TMA_STORE && STORE_BUFFERS * 64 * 32 > 64 * 40 ? STORE_BUFFERS * 64 * 32 : 64 * 40;
    // full, empty, the split-K flag; with PINGPONG the two consumers' turn barriers (run)
    static constexpr int BARRIER_BYTES = 2 * STAGES * 8 + 16 + (PINGPONG ? 16 : 0);
    // Barriers live in the gap before the staging (256 bytes, or 1024 to align TMA's buffers).
    static constexpr int STAGING_OFFSET = STAGES * STAGE_BYTES + (TMA_STORE ? 1024 : 256);
    static constexpr int SMEM_BYTES = STAGING_OFFSET + CONSUMERS * STAGING_FLOATS * 4 + 1024;
    // Register split: 65536 per SM, shared by CTAS_PER_SM CTAs.
    static constexpr int PRODUCER_REGS = 56;
    static constexpr int CONSUMER_REGS = CONSUMERS == 1 ? 200 : 224;
    static_assert(128 * (PRODUCER_REGS + CONSUMERS * CONSUMER_REGS) * CTAS_PER_SM <= 65536, "register file");
    static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one or two consumer warpgroups");
    static_assert(BN == 64 || BN == 128 || BN == 192 || BN == 256, "BN is a wgmma N (192 for 16-bit types)");
    static_assert(CM == 1 || CM == 2 || CM == 4, "cluster rows: 1, 2 or 4");
    static_assert(CN == 1 || CN == 2 || CN == 4, "cluster columns: 1, 2 or 4");
    static_assert(CK >= 1 && CK <= 4 && (CK == 1 || CLUSTER == 1), "split-K clusters: 1-4 CTAs, no multicast");
    static_assert(!PINGPONG || (CONSUMERS == 2 && BN <= 128 && CK == 1),
                  "ping-pong: two consumers, 128 x BN tiles of at most 128 accumulators a thread, no CK");
    static_assert(A_SLICE_ROWS % 8 == 0 && B_SLICE_ROWS % 8 == 0, "slices are whole 8-row swizzle atoms");
    static_assert(BARRIER_BYTES <= 256, "barriers fit before the staging area");
    static_assert(NSPLIT == 1 || (NSPLIT == 2 && CONSUMERS == 2 && !PINGPONG && CK == 1 && (WN == 64 || WN == 128)),
                  "column halves: two consumers, 64 or 128 columns each, no ping-pong, no CK");
    static_assert(SMEM_BYTES * CTAS_PER_SM <= 228 * 1024 - CTAS_PER_SM * 1024, "shared memory per SM");
    static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per block on sm_90");
};

// The work of one unit: a tile (m0, n0), a k-tile range [kt0, kt1) of it, and, where its tile
// is split, which of the tile's `splits` ranges it is and where the tile's partials start in the
// split-K workspace (`part`, in partial tiles).
struct Unit {
    int m0, n0, kt0, kt1, tile, split, splits, part;
};

// Units: super tiles (CM tile rows x CN tile columns, one per cluster) in grouped order; the
// first `whole` of them are one unit each, every later one is cut into `splits` k ranges, the
// ranges of a tile adjacent (they run at the same time, so the last one to finish reduces soon
// after the others wrote). whole = 0 splits every tile (split-K on a small grid); whole = the
// full waves of a larger grid splits only the last, partial wave's tiles (the tail), so that
// its ranges keep the SMs busy that the whole tiles of that wave would have left idle.
struct Schedule {
    int super_m, super_n, tiles_n, k_tiles, splits, whole, group_m, units;

    // empty_ranges (split-K in clusters): every tile keeps splits_ ranges, some empty where K has
    // fewer k tiles, since each CTA of the cluster computes one.
    __device__ __forceinline__ Schedule(int M, int N, int K, int BM, int BN, int BK, int cm, int cn, int splits_,
                                        int whole_, int group_m_, bool empty_ranges = false) {
        super_m = ceil_div(ceil_div(M, BM), cm);
        super_n = ceil_div(ceil_div(N, BN), cn);
        tiles_n = super_n * cn;
        k_tiles = ceil_div(K, BK);
        splits = empty_ranges ? max(1, splits_) : max(1, min(splits_, k_tiles));  // else each unit keeps a k tile
        whole = splits == 1 ? 0 : min(max(whole_, 0), super_m * super_n);
        group_m = group_m_ < 1 ? 1 : group_m_;
        units = whole + (super_m * super_n - whole) * splits;
    }

    // Whether the split tiles' ranges all run at once, each the last unit of its cluster, so
    // that they may wait for each other (reduce_splits' parallel hand-over) without deadlock.
    __device__ __forceinline__ bool parallel(int clusters) const {
        return whole % clusters == 0 && units - whole <= clusters;
    }

    __device__ __forceinline__ Unit unit(int u, int rm, int rn, int cm, int cn, int BM, int BN) const {
        const bool cut = u >= whole;
        const int n = cut ? splits : 1;
        const int split = cut ? (u - whole) % splits : 0, st = cut ? whole + (u - whole) / splits : u;
        const int per_group = group_m * super_n;
        const int group = st / per_group, first = group * group_m;
        const int rows = min(super_m - first, group_m);
        const int r = st - group * per_group;
        const int tm = (first + r % rows) * cm + rm, tn = (r / rows) * cn + rn;
        Unit w;
        w.m0 = tm * BM;
        w.n0 = tn * BN;
        w.kt0 = static_cast<int>(static_cast<long long>(split) * k_tiles / n);
        w.kt1 = static_cast<int>(static_cast<long long>(split + 1) * k_tiles / n);
        w.tile = tm * tiles_n + tn;
        w.split = split;
        w.splits = n;
        w.part = ((st - whole) * cm * cn + rn * cm + rm) * splits;
        return w;
    }
};

// Multicast masks: the CTAs of my cluster column (they share B) and of my cluster row (A).
template <class Cfg>
__device__ __forceinline__ unsigned short column_mask(int rn) {
    return static_cast<unsigned short>(((1 << Cfg::CM) - 1) << (rn * Cfg::CM));
}
template <class Cfg>
__device__ __forceinline__ unsigned short row_mask(int rm) {
    unsigned short mask = 0;
#pragma unroll
    for (int j = 0; j < Cfg::CN; ++j) mask |= 1 << (j * Cfg::CM + rm);
    return mask;
}

template <class Cfg>
__device__ __forceinline__ void load_stage(unsigned char* stage, Barrier* full, const TensorMap* a_map,
                                           const TensorMap* b_map, int kt, int m0, int n0, int rm, int rn) {
    barrier_arrive_expect_tx(full, Cfg::STAGE_BYTES);  // the whole tiles: our slices and the peers'
    const int k = kt * Cfg::BK;
    unsigned char* a = stage + rn * Cfg::A_SLICE_ROWS * 128;
    if constexpr (Cfg::A_M_MAJOR) {
#pragma unroll
        for (int i = 0; i < Cfg::BM / 64; ++i) {
            if constexpr (Cfg::CN == 1) tma_load_2d(a + i * 64 * 128, a_map, full, m0 + 64 * i, k);
            else
                tma_load_2d_multicast(a + i * 64 * 128, a_map, full, m0 + 64 * i, k + rn * Cfg::A_SLICE_ROWS,
                                      row_mask<Cfg>(rm));
        }
    } else {
        if constexpr (Cfg::CN == 1) tma_load_2d(a, a_map, full, k, m0);
        else tma_load_2d_multicast(a, a_map, full, k, m0 + rn * Cfg::A_SLICE_ROWS, row_mask<Cfg>(rm));
    }
    unsigned char* b = stage + Cfg::A_BYTES + rm * Cfg::B_SLICE_ROWS * 128;
    if constexpr (Cfg::B_N_MAJOR) {
#pragma unroll
        for (int j = 0; j < Cfg::BN / 64; ++j) {
            if constexpr (Cfg::CM == 1) tma_load_2d(b + j * 64 * 128, b_map, full, n0 + 64 * j, k);
            else
                tma_load_2d_multicast(b + j * 64 * 128, b_map, full, n0 + 64 * j, k + rm * Cfg::B_SLICE_ROWS,
                                      column_mask<Cfg>(rn));
        }
    } else {
        if constexpr (Cfg::CM == 1) tma_load_2d(b, b_map, full, k, n0);
        else tma_load_2d_multicast(b, b_map, full, k, n0 + rm * Cfg::B_SLICE_ROWS, column_mask<Cfg>(rn));
    }
}

// What a kernel loads into a ring slot beside the operands' tiles: nothing here. A kernel that
// loads more (fp8_body.cuh's block scales) passes its own, called as extra(slot, full barrier, kt,
// unit) before the stage's arrival, so that the bytes it expects on that barrier are counted
// before the phase can complete.
struct NoStageExtra {
    __device__ __forceinline__ void operator()(int, Barrier*, int, const Unit&) const {}
};

// The producer's work on one unit (one thread): each k tile loaded into the next ring slot once
// its consumers released it (the ring position s and its phase run on from one unit to the next).
// rm, rn: this CTA's place in its cluster.
template <class Cfg, class Extra = NoStageExtra>
__device__ __forceinline__ void produce_unit(const Unit& w, unsigned char* smem, Barrier* full, Barrier* empty,
                                             const TensorMap* a_map, const TensorMap* b_map, int rm, int rn, int& s,
                                             int& phase, const Extra& extra = {}) {
    for (int kt = w.kt0; kt < w.kt1; ++kt) {
        barrier_wait(&empty[s], phase ^ 1);
        extra(s, &full[s], kt, w);
        load_stage<Cfg>(smem + s * Cfg::STAGE_BYTES, &full[s], a_map, b_map, kt, w.m0, w.n0, rm, rn);
        if (++s == Cfg::STAGES) s = 0, phase ^= 1;
    }
}

// The producer's loop (one thread): the units u = first, first + stride, ... of the schedule.
template <class Cfg, class Extra = NoStageExtra>
__device__ __forceinline__ void produce(const Schedule& sched, unsigned char* smem, Barrier* full, Barrier* empty,
                                        const TensorMap* a_map, const TensorMap* b_map, int first, int stride, int rm,
                                        int rn, const Extra& extra = {}) {
    int s = 0, phase = 0;
    for (int u = first; u < sched.units; u += stride)
        produce_unit<Cfg>(sched.unit(u, rm, rn, Cfg::CM, Cfg::CN, Cfg::BM, Cfg::BN), smem, full, empty, a_map, b_map,
                          rm, rn, s, phase, extra);
}

// Descriptors (smem_desc in hopper_common.cuh), per k step of 16 (32 bytes of a 128-byte row):
//   K-major: the step moves 32 bytes along the row; SBO = 1024 (the next 8 rows of m or n).
//   M- or N-major: the step moves 16 k rows (16 x 128 bytes); SBO = 1024 (the next 8 k rows),
//     LBO = 8 KiB (the next 64-wide block of m or n); transpose bit set.
// A consumer's 64 rows of m are one 8 KiB block in either major.
//
// They are made by addition. A descriptor's high word (SBO, the swizzle) is the same in every
// stage and k step, and its low word holds the start address >> 4 below the LBO field, so the
// descriptor of another stage or step is the first one plus (offset >> 4) in the low word: one
// 32-bit add where smem_desc spends a mask, a shift and an or on each (the SASS of the 128 x 256
// tile: 87 instructions a k tile and warp, 13 around each wgmma). Shared addresses stay below
// 256 KiB, so the add never carries out of the 14-bit address field.
// With `wg` uniform (run) the descriptors stay in uniform registers: the loop went from 87 to 47
// instructions a k tile and warp, the GEMM from 29.4 M to 19.0 M at 4096^3 (cuBLAS 16.6 M), and
// the joules per GEMM fell 1-5% (results/h200/descriptors-by-addition-before-after.txt). An earlier
// form, 64-bit steps from a warpgroup index the compiler took as varying, ran slower on the H100
// (h100-80gb-hbm3/descriptor-stepping-before-after.txt).
struct Descriptor {
    unsigned lo, hi;
    __device__ __forceinline__ explicit Descriptor(unsigned long long d)
        : lo(static_cast<unsigned>(d)), hi(static_cast<unsigned>(d >> 32)) {}
    // The descriptor `units` x 16 bytes further on.
    __device__ __forceinline__ unsigned long long at(unsigned units) const {
        return static_cast<unsigned long long>(hi) << 32 | (lo + units);
    }
};

// A consumer's descriptors of its 64 rows of A and of its columns of the B tile (all of them,
// or with NSPLIT = 2 its half: WN columns further on, WN x 128 bytes in either major, since an
// N-major tile is 64-column blocks of BK k rows = 64 x 128 bytes) in ring slot 0, k step 0.
template <class Cfg>
struct TileDescriptors {
    Descriptor a, b;
    __device__ __forceinline__ TileDescriptors(unsigned smem, int consumer)
        : a(smem_desc(smem + (Cfg::NSPLIT == 1 ? consumer * 64 * 128 : 0), Cfg::A_M_MAJOR ? 64 * 128 : 16, 1024)),
          b(smem_desc(smem + Cfg::A_BYTES + (Cfg::NSPLIT == 2 ? consumer * Cfg::WN * 128 : 0),
                      Cfg::B_N_MAJOR ? 64 * 128 : 16, 1024)) {}
};

// The wgmma of ring slot `slot`'s k tile into d (first: d starts at zero).
template <class Elem, class Cfg>
__device__ __forceinline__ void mma_stage(float (&d)[Cfg::WN / 2], const TileDescriptors<Cfg>& desc, int slot,
                                          bool first) {
    static_assert(Cfg::STAGE_BYTES % 16 == 0, "stages start on 16-byte units");
    const unsigned stage = slot * (Cfg::STAGE_BYTES / 16);
#pragma unroll
    for (int step = 0; step < KTile<Elem>::STEPS; ++step) {
        const unsigned a_step = Cfg::A_M_MAJOR ? step * 16 * 128 / 16 : step * 32 / 16;
        const unsigned b_step = Cfg::B_N_MAJOR ? step * 16 * 128 / 16 : step * 32 / 16;
        mma_ss<Elem, Cfg::WN, Cfg::B_N_MAJOR ? 1 : 0, Cfg::A_M_MAJOR ? 1 : 0>(
            d, desc.a.at(stage + a_step), desc.b.at(stage + b_step), first && step == 0 ? 0 : 1);
    }
}

// Swapped roles (C^T = B^T A^T, as cuBLAS computes a row-major product): wgmma's A operand is a
// 64-wide block of B's N-major tile (imm-trans-a = 1, one swizzle atom wide) and its B operand is
// the whole K-major A tile (N = 128 rows of A). Consumer c owns n columns [128c, 128c + 128) of
// the 128 x 256 tile as two m64n128 products; d holds C^T: d[64 i + 4j + 2h + e] is
// C[m0 + 8j + 2(lane%4) + e][n0 + 128c + 64i + 16 warp + lane/4 + 8h].
template <class Elem, class Cfg>
__device__ __forceinline__ void mma_stage_swapped(float (&d)[128], unsigned stage, int consumer, bool first) {
    static_assert(Cfg::BN == 256 && Cfg::BM == 128 && Cfg::B_N_MAJOR, "swapped roles: 128 x 256 tiles, 16-bit");
    const unsigned a = stage, b = stage + Cfg::A_BYTES;
#pragma unroll
    for (int step = 0; step < KTile<Elem>::STEPS; ++step) {
#pragma unroll
        for (int i = 0; i < 2; ++i)
            mma_ss<Elem, 128, 0, 1>(*reinterpret_cast<float(*)[64]>(&d[64 * i]),
                                    smem_desc(b + (2 * consumer + i) * 64 * 128 + step * 16 * 128, 64 * 128, 1024),
                                    smem_desc(a + step * 32, 16, 1024), first && step == 0 ? 0 : 1);
    }
}

// The swapped tile's epilogue: a thread holds C[m][n] and C[m][n + 8]; one 4-byte store each (a
// warp's store covers 4 rows x 32 contiguous bytes).
__device__ __forceinline__ void store_swapped(const float (&d)[128], int M, int N, int m0, int n_base, int lane,
                                              float alpha, float beta, float* __restrict__ C, int ldc) {
#pragma unroll
    for (int j = 0; j < 16; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int m = m0 + 8 * j + 2 * (lane % 4) + e;
            if (m >= M) continue;
            float* row = C + static_cast<long long>(m) * ldc;
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int n = n_base + 64 * i + 8 * h;
                    if (n >= N) continue;
                    float v = alpha * d[64 * i + 4 * j + 2 * h + e];
                    if (beta != 0.0f) v = fmaf(beta, row[n], v);
                    row[n] = v;
                }
        }
    }
}

// A slot is free again once every consumer warpgroup of every CTA it was multicast to is done.
// The arrive is a plain (release.cta) one: what must be ordered is the tensor cores' reads of the
// slot, which wgmma.wait_group already completed. (With .release.cluster the compiler put a
// MEMBAR.ALL.GPU before every arrive, and the 2-CTA rung ran at half speed.)
template <class Cfg>
__device__ __forceinline__ void release_slot(Barrier* empty) {
    if constexpr (Cfg::CLUSTER == 1) barrier_arrive(empty);
    else
#pragma unroll
        for (int c = 0; c < Cfg::CLUSTER; ++c) barrier_arrive_cluster(empty, c);
}

// A consumer's loop over one unit's k tiles (the ring position s, phase carries on from unit to
// unit): wait for each slot to fill, issue its wgmma (mma(slot, first): first starts d at zero),
// keep one k tile of wgmma in flight and release the slot before it; at the end wait for all
// and release the last. The persistent kernels, the FP8 kernel without promotion and the decode
// tiles each pass their own wgmma of a slot.
template <class Cfg, int R, class Mma>
__device__ __forceinline__ void consume_unit(float (&d)[R], const Unit& w, Barrier* full, Barrier* empty, int t,
                                             int& s, int& phase, Mma&& mma) {
    int prev = -1;
    for (int kt = w.kt0; kt < w.kt1; ++kt) {
        barrier_wait(&full[s], phase);
        wgmma_fence();
        mma(s, kt == w.kt0);
        wgmma_commit();
        wgmma_wait<1>();
        if (prev >= 0 && t == 0) release_slot<Cfg>(&empty[prev]);
        prev = s;
        if (++s == Cfg::STAGES) s = 0, phase ^= 1;
    }
    wgmma_wait<0>();
    fence_accumulators(d);
    if (t == 0) release_slot<Cfg>(&empty[prev]);
}

// Moves a consumer's ring position past n k tiles it does not read (the other consumer's unit,
// ping-pong): each wrap of the ring flips the phase.
template <class Cfg>
__device__ __forceinline__ void pass_k_tiles(int n, int& s, int& phase) {
    const int at = s + n;
    phase ^= (at / Cfg::STAGES) & 1;
    s = at % Cfg::STAGES;
}

// Ping-pong (Config::PINGPONG, here and in decode_body.cuh): consumer c computes every other unit
// of this CTA's, from its c-th, and stores it while the other consumer's unit runs on the tensor
// cores. The other's k tiles pass it by in the ring. A k loop starts only once the other
// consumer's k loop of the unit before has ended (turns[c] completes a phase as consumer c ends
// a k loop): the loops take turns on the tensor cores, and every fill of the ring before this
// unit's has landed, so that a slot's phase parity names the fill this consumer waits for (a wait
// on a slot whose previous fill had not landed yet would pass on that older phase's parity).
// unit_of(u): unit u of this CTA; k_loop(w): its k tiles (whole: the host splits none); store(w):
// its epilogue.
template <class Cfg, class UnitOf, class KLoop, class Store>
__device__ __forceinline__ void take_turns(const Schedule& sched, int first, int stride, int consumer, int t,
                                           Barrier* turns, int& s, int& phase, UnitOf&& unit_of, KLoop&& k_loop,
                                           Store&& store) {
    int turn = 0, mine = 0;  // mine: the units this consumer has computed
    for (int u = first; u < sched.units; u += stride, turn ^= 1) {
        if (turn != consumer) {
            pass_k_tiles<Cfg>(sched.k_tiles, s, phase);
            continue;
        }
        // consumer 1's j-th unit waits for consumer 0's j-th (phase j of turns[0]), consumer
        // 0's j-th for consumer 1's (j-1)-th (phase j - 1 of turns[1])
        if (u != first) barrier_wait(&turns[1 - consumer], (consumer == 1 ? mine : mine - 1) & 1);
        Unit w = unit_of(u);
        w.kt0 = 0, w.kt1 = sched.k_tiles;  // whole tiles (the host splits none): no 64-bit division
        k_loop(w);
        if (t == 0) barrier_arrive(&turns[consumer]);  // t == 0 waited on every fill of the unit
        ++mine;
        store(w);
    }
}

// d[4q..4q+3] = (or +=) src[q * 128] for the quads q in [q_lo, q_hi), 8 float4 loads in flight at
// a time: hoisting all QUADS of them next to the 128 accumulators would spill (so would a separate
// sum beside them). The empty asm with a memory clobber keeps the groups apart.
template <int QUADS, bool ADD>
__device__ __forceinline__ void gather_quads(float (&d)[4 * QUADS], const float4* src, int q_lo, int q_hi) {
#pragma unroll
    for (int q0 = 0; q0 < QUADS; q0 += 8) {
        if (q0 + 8 <= q_lo || q0 >= q_hi) continue;
#pragma unroll
        for (int q = q0; q < q0 + 8 && q < QUADS; ++q) {
            if (q < q_lo || q >= q_hi) continue;
            const float4 p = __ldcg(src + q * 128);
            if (ADD) d[4 * q] += p.x, d[4 * q + 1] += p.y, d[4 * q + 2] += p.z, d[4 * q + 3] += p.w;
            else d[4 * q] = p.x, d[4 * q + 1] = p.y, d[4 * q + 2] = p.z, d[4 * q + 3] = p.w;
        }
        asm volatile("" ::: "memory");
    }
}

// reduce_splits' view of a kernel whose accumulator is 64 x BM a consumer (wgmma's N is the
// tile's m: tf32_register_a.cu, decode_body.cuh). The partials follow the accumulator registers,
// whatever they stand for; BM's 32-row chunks of m stand for the 32-column chunks.
template <class Cfg>
struct AccumulatorOfBM {
    static constexpr int BN = Cfg::BM, CONSUMERS = Cfg::CONSUMERS;
};

// Split-K. Each split stores its partial tile to the workspace (float4 per thread; a warp writes
// 512 contiguous bytes) and counts itself in at its tile's counters (count, generation). Then:
//  * serial (a CTA may run a split unit before others): the split that counts last adds all
//    partials in split order 0, 1, ... and stores the whole tile; it re-arms the count for the
//    next launch.
//  * parallel (Schedule::parallel: every split unit is the last unit of its CTA, so all of them
//    run at once and waiting cannot deadlock): the splits wait for each
//    other (a generation barrier: the last arrival resets the count and bumps the generation),
//    then split s adds up and stores its own 1/S of the tile's 32-column chunks. The reduction
//    reads spread over S CTAs instead of one. With two splits a split writes only the chunks the
//    other adds up: its own stay in registers (with more, the sum in split order would need
//    registers beside the accumulators, and spilled).
// Either way the partials are added in split order (a split's own in its place): results do not
// depend on which CTA was last. The hand-over is one release (the leader's fence after the CTA's
// barrier covers every thread's stores) and one acquire per split, with the generation read
// while the partials are still being stored. Measurements, and the hand-overs tried and not
// kept: docs/hopper.md, docs/findings.md.
// Cfg::BN: the accumulator's columns (each consumer's 64 x BN), any multiple of 8 (the parallel
// hand-over: of 32). Returns the range of 32-column chunks this CTA stores (empty: none).
template <class Cfg>
__device__ __forceinline__ int2 reduce_splits(float (&d)[Cfg::BN / 2], const Unit& w, bool parallel,
                                              int consumer, int t, float* __restrict__ workspace,
                                              int* __restrict__ counters, volatile int* flag) {
    constexpr int QUADS = Cfg::BN / 8;   // float4s per thread
    constexpr int CHUNKS = Cfg::BN / 32;  // 4 quads per chunk
    constexpr long long PART = static_cast<long long>(Cfg::CONSUMERS) * 128 * QUADS;  // float4s per partial
    const int splits = w.splits;
    const int c0 = parallel ? w.split * CHUNKS / splits : 0;
    const int c1 = parallel ? (w.split + 1) * CHUNKS / splits : CHUNKS;
    const int q1 = parallel ? 4 * c1 : QUADS;  // the serial hand-over sums every quad, a part chunk too
    int* count = counters + 2 * w.tile;
    int* generation = count + 1;
    const bool leader = consumer == 0 && t == 0;
    // Two splits in parallel: each keeps its own partial of the chunks it stores in registers.
    const bool keep = parallel && splits == 2;
    // The barrier's generation moves only once every split arrived, ours included: read it now,
    // its latency hidden behind the stores below.
    const int seen = parallel && leader ? load_relaxed_gpu(generation) : 0;
    float4* ws = reinterpret_cast<float4*>(workspace);
    float4* mine = ws + static_cast<long long>(w.part + w.split) * PART + consumer * 128 * QUADS;
#pragma unroll
    for (int q = 0; q < QUADS; ++q)
        if (!keep || q < 4 * c0 || q >= 4 * c1)
            __stcg(mine + q * 128 + t, make_float4(d[4 * q], d[4 * q + 1], d[4 * q + 2], d[4 * q + 3]));
    named_barrier(1, 128 * Cfg::CONSUMERS);
    if (leader) {
        __threadfence();  // cumulative: the stores the barrier ordered before it are visible first
        const bool last = atomic_add_acq_rel_gpu(count, 1) == splits - 1;
        if (last) store_relaxed_gpu(count, 0);  // re-armed for the next launch (ordered before the release)
        if (parallel) {
            if (last) add_release_gpu(generation, 1);
            else
                while (load_acquire_gpu(generation) == seen) __nanosleep(32);
        }
        *flag = parallel || last;
    }
    named_barrier(1, 128 * Cfg::CONSUMERS);
    if (!*flag) return make_int2(0, 0);
    const float4* parts = ws + static_cast<long long>(w.part) * PART + consumer * 128 * QUADS + t;
    if (keep) {  // d += the other split's partial: with two operands the order does not change the sum
        gather_quads<QUADS, true>(d, parts + (1 - w.split) * PART, 4 * c0, 4 * c1);
        return make_int2(c0, c1);
    }
    gather_quads<QUADS, false>(d, parts, 4 * c0, q1);
    for (int s = 1; s < splits; ++s) gather_quads<QUADS, true>(d, parts + s * PART, 4 * c0, q1);
    return make_int2(c0, c1);
}

// Split-K inside a cluster (Config::CK > 1). The CK CTAs of a cluster compute one tile, CTA r its
// r-th k range (the Schedule with splits = CK: CTA r of cluster c runs unit CK * c + r), and add
// their partials through distributed shared memory instead of the workspace: no global round
// trip, no flag. CTA r owns the 32-column chunks [first(r), first(r + 1)) of the tile. Once every
// CTA of the cluster has finished its k loop (a cluster barrier: no ring is read any more), each
// writes the quads of its partial that another CTA owns into that CTA's ring, in the slot of the
// writer's rank; after a second cluster barrier each CTA adds up its own chunks in split order,
// its own partial in its place: reduce_splits' order, so the bits are those of SPLITS = CK.
template <class Cfg>
struct ClusterSplit {
    static constexpr int CK = Cfg::CK, CHUNKS = Cfg::BN / 32, QUADS = Cfg::BN / 8;
    static constexpr int OWN_QUADS = 4 * ((CHUNKS + CK - 1) / CK);  // the most quads a CTA owns
    // the partials a CTA receives: a slot per other rank, OWN_QUADS float4s per consumer thread
    static constexpr int BYTES = (CK - 1) * Cfg::CONSUMERS * OWN_QUADS * 128 * 16;
    static_assert(CK == 1 || BYTES <= Cfg::STAGES * Cfg::STAGE_BYTES, "the received partials fit in the ring");
    static_assert(CK == 1 || (Cfg::BN % 32 == 0 && Cfg::BN <= 192), "chunks of 32 columns; 256 spilled");
    __host__ __device__ static constexpr int first(int rank) { return rank * CHUNKS / CK; }
    __host__ __device__ static constexpr int owner(int chunk) {
        int r = 0;
        while (r + 1 < CK && first(r + 1) <= chunk) ++r;
        return r;
    }
    // The float4 of slot `slot`, quad `i` of the owner's chunks, for thread t of `consumer`.
    __device__ static int at(int slot, int i, int consumer, int t) {
        return ((slot * Cfg::CONSUMERS + consumer) * OWN_QUADS + i) * 128 + t;
    }
};

// Writes v at the same shared-memory address in CTA `cta` of this cluster.
__device__ __forceinline__ void store_remote(unsigned addr, unsigned cta, float4 v) {
    asm volatile(
        "{\n.reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "st.shared::cluster.v4.f32 [remote], {%2, %3, %4, %5};\n}\n" ::"r"(addr),
        "r"(cta), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
        : "memory");
}

// ClusterSplit's hand-over, by every consumer thread; `ring`: this CTA's ring (the received
// partials' place). Returns the range of 32-column chunks this CTA stores.
template <class Cfg>
__device__ __forceinline__ int2 exchange_splits(float (&d)[Cfg::BN / 2], int rank, int consumer, int t,
                                                unsigned char* ring) {
    using X = ClusterSplit<Cfg>;
    cluster_sync();  // every CTA of the cluster is done reading its ring
#pragma unroll
    for (int q = 0; q < X::QUADS; ++q) {
        const int owner = X::owner(q / 4);
        if (owner == rank) continue;
        const int slot = rank < owner ? rank : rank - 1;
        store_remote(smem_u32(ring) + 16 * X::at(slot, q - 4 * X::first(owner), consumer, t), owner,
                     make_float4(d[4 * q], d[4 * q + 1], d[4 * q + 2], d[4 * q + 3]));
    }
    cluster_sync();  // every partial is in place
    const int c0 = X::first(rank), c1 = X::first(rank + 1);
    const float4* received = reinterpret_cast<const float4*>(ring);
#pragma unroll
    for (int q = 0; q < X::QUADS; ++q) {
        if (q < 4 * c0 || q >= 4 * c1) continue;
        float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int s = 0; s < X::CK; ++s) {
            const float4 p = s == rank ? make_float4(d[4 * q], d[4 * q + 1], d[4 * q + 2], d[4 * q + 3])
                                       : received[X::at(s < rank ? s : s - 1, q - 4 * c0, consumer, t)];
            if (s == 0) sum = p;
            else sum.x += p.x, sum.y += p.y, sum.z += p.z, sum.w += p.w;
        }
        d[4 * q] = sum.x, d[4 * q + 1] = sum.y, d[4 * q + 2] = sum.z, d[4 * q + 3] = sum.w;
    }
    return make_int2(c0, c1);
}

// EPILOGUE: 0 = pair stores straight from registers (slow when C's rows are not pair-aligned:
// scalar, scattered stores); 1 = that where C allows it and the tile is whole, else through
// shared memory (store_staged); 2 = always through shared memory; 3 = TMA stores of staged
// chunks (store_tma) when the host could describe C (c_tma != 0: 16-byte aligned rows), else 1.
// OUT, EPI: D's type and the epilogue (hopper_epilogue.cuh); C and bias are of the output type.
// TA, TB: A stored K x M, B stored N x K (Config says what that changes in shared memory).
// CK > 1: split-K in clusters of CK CTAs (ClusterSplit; SPLIT_K off, splits and whole not read).
template <class Elem, int BN, int STAGES, int CM, int CN, bool SPLIT_K, int EPILOGUE, int CONSUMERS = 2,
          bool SWAPPED = false, int OUT = OUT_FP32, int EPI = EPI_NONE, int TA = 0, int TB = 0, int CK = 1,
          bool PINGPONG = false, int NSPLIT = 1>
__device__ __forceinline__ void run(int M, int N, int K, float alpha, const TensorMap* a_map, const TensorMap* b_map,
                                    float beta, typename OutType<OUT>::T* __restrict__ C, int ldc, int group_m,
                                    int splits, int whole, float* __restrict__ workspace,
                                    int* __restrict__ counters, const TensorMap* c_map = nullptr, int c_tma = 0,
                                    const typename OutType<OUT>::T* __restrict__ bias = nullptr) {
    using Cfg = Config<Elem, BN, STAGES, CM, CN, CONSUMERS, EPILOGUE == 3, TA, TB, CK, PINGPONG, NSPLIT>;
    constexpr int WN = Cfg::WN;  // a consumer's columns of the tile: BN, or BN / 2 with NSPLIT = 2
    static_assert(CK == 1 || (!SPLIT_K && !SWAPPED), "split-K in clusters replaces the workspace's");
    static_assert(!PINGPONG || !SWAPPED, "ping-pong tiles are unswapped");
    unsigned char* smem = aligned_dynamic_smem();
    Barrier* full = reinterpret_cast<Barrier*>(smem + STAGES * Cfg::STAGE_BYTES);
    Barrier* empty = full + STAGES;
    volatile int* last_flag = reinterpret_cast<volatile int*>(empty + STAGES);
    Barrier* turns = empty + STAGES + 2;  // PINGPONG: turns[c] completes a phase as consumer c ends a k loop
    // wg from lane 0: the compiler then knows it is the same in a warp and keeps what derives from it
    // (the consumer's descriptors) in uniform registers.
    const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0), t = threadIdx.x % 128;
    // The schedule is set up inside each role, after setmaxnreg: values computed before it would
    // be live across the producer's shrink to 40 registers, and ptxas spilled them.
    auto schedule = [&] {
        if constexpr (CK > 1) return Schedule(M, N, K, Cfg::BM, BN, Cfg::BK, 1, 1, CK, 0, group_m, true);
        return Schedule(M, N, K, Cfg::BM, BN, Cfg::BK, CM, CN, SPLIT_K ? splits : 1, whole, group_m);
    };
    auto cluster_rank = [] { return Cfg::CLUSTER == 1 ? 0 : static_cast<int>(cluster_cta_rank()); };
    const int cluster_id = blockIdx.x / Cfg::CLUSTER, clusters = gridDim.x / Cfg::CLUSTER;

    if (threadIdx.x < STAGES) {  // one barrier pair per thread: no serial chain of inits
        barrier_init(&full[threadIdx.x], 1);
        barrier_init(&empty[threadIdx.x], Cfg::READERS * Cfg::CLUSTER);
        if (PINGPONG && threadIdx.x < 2) barrier_init(&turns[threadIdx.x], 1);
        fence_barrier_init();
    }
    if (threadIdx.x == 32) {
        tma_prefetch_map(a_map);
        tma_prefetch_map(b_map);
        if constexpr (EPILOGUE == 3)
            if (c_tma) tma_prefetch_map(c_map);
    }
    if constexpr (Cfg::CLUSTER == 1) __syncthreads();
    else cluster_sync();  // the peers' barriers exist before anyone multicasts into them
    take_over_from_previous_grid();  // with PDL: nothing global was touched before this

    if (wg == 0) {
        shrink_registers<Cfg::PRODUCER_REGS>();
        if constexpr (CK > 1) {
            // the whole warpgroup takes part in each unit's cluster barriers (exchange_splits)
            const Schedule sched = schedule();
            int s = 0, phase = 0;
            for (int u = cluster_id; u < sched.units; u += clusters) {
                if (t == 0)
                    produce_unit<Cfg>(sched.unit(u, 0, 0, 1, 1, Cfg::BM, BN), smem, full, empty, a_map, b_map, 0, 0,
                                      s, phase);
                __syncwarp();
                cluster_sync();
                cluster_sync();
                named_barrier_across_roles(4, Cfg::THREADS);  // the consumers have read the partials out of the ring
                if (t == 0) fence_async_shared();  // ... before TMA writes it again
            }
        } else if (t == 0) {
            const int rank = cluster_rank();
            produce<Cfg>(schedule(), smem, full, empty, a_map, b_map, cluster_id, clusters, rank % CM, rank / CM);
        }
        __syncwarp();
    } else {
        grow_registers<Cfg::CONSUMER_REGS>();
        const Schedule sched = schedule();
        const int rank = cluster_rank(), rm = rank % CM, rn = rank / CM;
        const int consumer = wg - 1, warp = t / 32, lane = t % 32;
        float* staging = reinterpret_cast<float*>(smem + Cfg::STAGING_OFFSET) + consumer * Cfg::STAGING_FLOATS;
        int s = 0, phase = 0, stores = 0;  // stores: TMA stores this warpgroup issued (store_tma)
        // The TMA stores' bias of a tile, loaded as its k loop starts (whether or not c_tma: under that
        // test ptxas kept the pairs live around the loop, not knowing the store's test the same).
        BiasPairs<WN, Epilogue<OUT, EPI>> held;
        auto hold = [&](int n0, int2 chunks) {
            if constexpr (EPILOGUE == 3)
                held.load(Epilogue<OUT, EPI>{alpha, beta, bias, N}, n0, lane, chunks.x, chunks.y);
        };
        // The epilogue of 64 rows of a tile: alpha * acc (+ beta * C, bias, activation) into C,
        // the 32-column chunks [chunks.x, chunks.y) of it.
        auto store = [&](const float(&acc)[WN / 2], int row0, int n0, int2 chunks) {
            const Epilogue<OUT, EPI> epi{alpha, beta, bias, N};
            if constexpr (EPILOGUE == 3) {
                if (c_tma) {
                    // The split-K cluster entry keeps the plain store order past 128 columns: there
                    // the turned order's selects between accumulators made ptxas spill (40 B of
                    // stack at 128 x 192 in clusters of 3, 24 B in clusters of 4).
                    constexpr bool TURN = CK == 1 || WN <= 128;
                    store_tma<WN, Cfg::STORE_BUFFERS, TURN>(acc, staging, M, row0, n0, epi, held, C, ldc, c_map,
                                                            2 + consumer, chunks.x, chunks.y, stores);
                    return;
                }
            }
            const bool direct = EPILOGUE == 0 || ((EPILOGUE == 1 || EPILOGUE == 3) && c_pairs_aligned(C, ldc) &&
                                                  n0 + WN <= N);
            if (direct)
                store_accumulators<WN>(acc, M, n0, row0 + 16 * warp + lane / 4, n0 + 2 * (lane % 4), epi, C, ldc,
                                       4 * chunks.x, 4 * chunks.y);
            else
                store_staged<WN>(acc, staging, M, row0, n0, epi, C, ldc, 2 + consumer, chunks.x, chunks.y);
        };
        if constexpr (PINGPONG) {
            // each consumer both halves of its 128-row tiles, in turns (take_turns)
            const TileDescriptors<Cfg> top(smem_u32(smem), 0), bottom(smem_u32(smem), 1);
            float d_top[BN / 2], d_bottom[BN / 2];
            take_turns<Cfg>(
                sched, cluster_id, clusters, consumer, t, turns, s, phase,
                [&](int u) { return sched.unit(u, rm, rn, CM, CN, Cfg::BM, BN); },
                [&](const Unit& w) {
                    hold(w.n0, make_int2(0, BN / 32));
                    consume_unit<Cfg>(d_top, w, full, empty, t, s, phase, [&](int slot, bool first) {
                        mma_stage<Elem, Cfg>(d_top, top, slot, first);
                        mma_stage<Elem, Cfg>(d_bottom, bottom, slot, first);
                    });
                    fence_accumulators(d_bottom);  // consume_unit waited for both halves' wgmma
                },
                [&](const Unit& w) {
                    store(d_top, w.m0, w.n0, make_int2(0, BN / 32));
                    store(d_bottom, w.m0 + 64, w.n0, make_int2(0, BN / 32));
                });
        } else {
            const TileDescriptors<Cfg> desc(smem_u32(smem), consumer);
            float d[WN / 2];
            // the consumer's first column of a unit's tile: its half with NSPLIT = 2, else the tile's
            auto first_column = [&](const Unit& w) { return NSPLIT == 2 ? w.n0 + WN * consumer : w.n0; };
            for (int u = cluster_id; u < sched.units; u += clusters) {
                const Unit w = sched.unit(u, rm, rn, CM, CN, Cfg::BM, BN);
                // Split-K loads the bias at the epilogue: held across the hand-over of the partials, the
                // pairs made ptxas spill (16 B of stack at 128 x 256 split 2 ways with GELU, none so)
                constexpr bool AHEAD = CK == 1 && !SPLIT_K;
                if constexpr (AHEAD) hold(first_column(w), make_int2(0, WN / 32));
                if (CK > 1 && w.kt0 == w.kt1) {  // an empty k range (K shorter than CK k tiles): a zero partial
#pragma unroll
                    for (int i = 0; i < WN / 2; ++i) d[i] = 0.0f;
                } else {
                    consume_unit<Cfg>(d, w, full, empty, t, s, phase, [&](int slot, bool first) {
                        if constexpr (SWAPPED)
                            mma_stage_swapped<Elem, Cfg>(d, smem_u32(smem + slot * Cfg::STAGE_BYTES), consumer, first);
                        else
                            mma_stage<Elem, Cfg>(d, desc, slot, first);
                    });
                }
                if constexpr (SWAPPED) {
                    static_assert(!SPLIT_K, "split-K slices follow the unswapped fragment layout");
                    static_assert(OUT == OUT_FP32 && EPI == EPI_NONE && TA == 0 && TB == 0,
                                  "swapped roles: FP32 C, no epilogue, row-major operands");
                    store_swapped(d, M, N, w.m0, w.n0 + 128 * consumer + 16 * warp + lane / 4, lane, alpha, beta, C,
                                  ldc);
                    continue;
                }
                int2 chunks = make_int2(0, WN / 32);  // the 32-column chunks of the tile to store
                if constexpr (CK > 1) {
                    chunks = exchange_splits<Cfg>(d, w.split, consumer, t, smem);
                    named_barrier_across_roles(4, Cfg::THREADS);  // the producer may refill the ring
                    if (chunks.x >= chunks.y) continue;
                }
                if constexpr (SPLIT_K && NSPLIT == 1) {  // column halves run whole tiles (the host splits none)
                    if (w.splits > 1) {
                        chunks = reduce_splits<Cfg>(d, w, sched.parallel(clusters), consumer, t, workspace, counters,
                                                    last_flag);
                        if (chunks.x >= chunks.y) continue;
                    }
                }
                if constexpr (!AHEAD) hold(first_column(w), chunks);
                store(d, NSPLIT == 2 ? w.m0 : w.m0 + 64 * consumer, first_column(w), chunks);
            }
        }
        // The staging buffers must outlive the stores reading them; the writes finish before exit.
        if constexpr (EPILOGUE == 3)
            if (t == 0 && stores > 0) bulk_wait_all();
    }
    if constexpr (Cfg::CLUSTER > 1) cluster_sync();  // no CTA leaves while a peer may still signal it
}

}  // namespace hopper_pws
