// persistent_body.cuh -- the persistent, warp-specialised wgmma GEMM that rungs 3, 4 and 5 build:
// rung 3 (persistent.cu) uses it as is, rung 4 (cluster_multicast.cu) with CLUSTER = 2, rung 5
// (any_shape.cu) with split-K. Each rung's file says what its setting changes and what it did.
//
// Roles as in rung 2: warpgroup 0 produces (one thread issues TMA), warpgroups 1 and 2 consume
// (64 x BN rows each of a 128 x BN tile). What is new is the loop around them: a CTA stays
// resident and walks the work units u = cluster, cluster + clusters, ... in a grouped order
// (GROUP_M tile rows at a time, so the ~132 tiles in flight share rows of A and columns of B in
// L2). The stage ring and its phases continue from one unit to the next, so the producer loads
// the next tile's first k tiles while the consumers run the epilogue of the last one.
#pragma once
#include "hopper_common.cuh"
#include "wgmma.cuh"
#include "hopper_epilogue.cuh"

namespace hopper_pws {
using namespace hopper;

template <class Elem, int BN_, int STAGES_, int CLUSTER_>
struct Config {
    static constexpr int BM = 128, BN = BN_, STAGES = STAGES_, CLUSTER = CLUSTER_;
    static constexpr int CONSUMERS = 2, THREADS = 128 * (CONSUMERS + 1);
    static constexpr int BK = KTile<Elem>::BK;
    static constexpr bool B_N_MAJOR = Elem::bytes == 2;  // tf32: B arrives transposed (K-major)
    static constexpr int A_BYTES = BM * 128, B_BYTES = BN * 128, STAGE_BYTES = A_BYTES + B_BYTES;
    // With a cluster, each CTA loads 1/CLUSTER of the B tile and multicasts it to all CTAs of the
    // cluster (they share the tile column): B_N_MAJOR as BN/64/CLUSTER boxes of 64 n, K-major as
    // one box of BN/CLUSTER rows.
    static constexpr int B_SLICE_BYTES = B_BYTES / CLUSTER;
    static constexpr int BARRIER_BYTES = 2 * STAGES * 8 + 16;  // full, empty, the split-K flag
    static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + BARRIER_BYTES + 1024;
    static constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
    static_assert(BN == 64 || BN == 128 || BN == 256, "BN is a wgmma N");
    static_assert(CLUSTER == 1 || CLUSTER == 2, "clusters of 1 or 2 CTAs along M");
    static_assert(!B_N_MAJOR || (BN / 64) % CLUSTER == 0, "each CTA multicasts whole 64-wide boxes of B");
    static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per block on sm_90");
};

// The work of one unit: a tile (m0, n0) and a k-tile range [kt0, kt1) of it.
struct Unit {
    int m0, n0, kt0, kt1, tile, split;
};

// Units: super tiles (CLUSTER tile rows x 1 tile column) x splits, super tiles in grouped
// order, splits of one tile adjacent (so they run at the same time and the last one to finish
// reduces soon after the others wrote).
struct Schedule {
    int tiles_m, tiles_n, super_m, k_tiles, splits, group_m, units;

    __device__ __forceinline__ Schedule(int M, int N, int K, int BM, int BN, int BK, int cluster, int splits_,
                                        int group_m_) {
        tiles_m = ceil_div(M, BM);
        tiles_n = ceil_div(N, BN);
        super_m = ceil_div(tiles_m, cluster);
        k_tiles = ceil_div(K, BK);
        splits = max(1, min(splits_, k_tiles));  // every unit keeps at least one k tile
        group_m = group_m_ < 1 ? 1 : group_m_;
        units = super_m * tiles_n * splits;
    }

    __device__ __forceinline__ Unit unit(int u, int rank, int cluster, int BM, int BN) const {
        const int split = u % splits, st = u / splits;
        const int per_group = group_m * tiles_n;
        const int group = st / per_group, first = group * group_m;
        const int rows = min(super_m - first, group_m);
        const int r = st - group * per_group;
        const int tm = (first + r % rows) * cluster + rank, tn = r / rows;
        Unit w;
        w.m0 = tm * BM;
        w.n0 = tn * BN;
        w.kt0 = static_cast<int>(static_cast<long long>(split) * k_tiles / splits);
        w.kt1 = static_cast<int>(static_cast<long long>(split + 1) * k_tiles / splits);
        w.tile = tm * tiles_n + tn;
        w.split = split;
        return w;
    }
};

template <class Cfg>
__device__ __forceinline__ void load_stage(unsigned char* stage, Barrier* full, const TensorMap* a_map,
                                           const TensorMap* b_map, int kt, int m0, int n0, unsigned rank) {
    barrier_arrive_expect_tx(full, Cfg::STAGE_BYTES);  // A plus the whole B: our slice and the peers'
    tma_load_2d(stage, a_map, full, kt * Cfg::BK, m0);
    unsigned char* b = stage + Cfg::A_BYTES + rank * Cfg::B_SLICE_BYTES;
    if constexpr (Cfg::B_N_MAJOR) {
        constexpr int BOXES = Cfg::BN / 64 / Cfg::CLUSTER;
        const int n = n0 + rank * BOXES * 64;
#pragma unroll
        for (int j = 0; j < BOXES; ++j) {
            if constexpr (Cfg::CLUSTER == 1) tma_load_2d(b + j * 64 * 128, b_map, full, n + 64 * j, kt * Cfg::BK);
            else tma_load_2d_multicast(b + j * 64 * 128, b_map, full, n + 64 * j, kt * Cfg::BK, (1 << Cfg::CLUSTER) - 1);
        }
    } else {
        const int n = n0 + rank * (Cfg::BN / Cfg::CLUSTER);
        if constexpr (Cfg::CLUSTER == 1) tma_load_2d(b, b_map, full, kt * Cfg::BK, n);
        else tma_load_2d_multicast(b, b_map, full, kt * Cfg::BK, n, (1 << Cfg::CLUSTER) - 1);
    }
}

template <class Elem, class Cfg>
__device__ __forceinline__ void mma_stage(float (&d)[Cfg::BN / 2], unsigned stage, int consumer, bool first) {
    const unsigned a = stage + consumer * 64 * 128, b = stage + Cfg::A_BYTES;
#pragma unroll
    for (int step = 0; step < KTile<Elem>::STEPS; ++step) {
        const unsigned long long bd = Cfg::B_N_MAJOR ? smem_desc(b + step * 16 * 128, 64 * 128, 1024)
                                                     : smem_desc(b + step * 32, 16, 1024);
        mma_ss<Elem, Cfg::BN, Cfg::B_N_MAJOR ? 1 : 0>(d, smem_desc(a + step * 32, 16, 1024), bd,
                                                      first && step == 0 ? 0 : 1);
    }
}

// A slot is free again once every consumer warpgroup of every CTA it was multicast to is done.
template <class Cfg>
__device__ __forceinline__ void release_slot(Barrier* empty) {
    if constexpr (Cfg::CLUSTER == 1) barrier_arrive(empty);
    else
#pragma unroll
        for (int c = 0; c < Cfg::CLUSTER; ++c) barrier_arrive_cluster(empty, c);
}

// Split-K: each split stores its partial tile to the workspace (float4 per thread, a warp
// writes 512 contiguous bytes), then counts itself in; the split that counts last adds all
// partials in split order 0, 1, ... (a fixed order, so the result does not depend on which CTA
// finished last) and writes C. It also re-arms the counter for the next launch.
// Returns false when this CTA is not the last: it has nothing more to do for the tile.
template <class Cfg>
__device__ __forceinline__ bool reduce_splits(float (&d)[Cfg::BN / 2], const Unit& w, int splits, int consumer,
                                              int t, float* __restrict__ workspace, int* __restrict__ counters,
                                              volatile int* last_flag) {
    constexpr int QUADS = Cfg::BN / 8;  // float4s per thread
    constexpr long long PART = static_cast<long long>(Cfg::CONSUMERS) * 128 * QUADS;  // float4s per partial
    float4* ws = reinterpret_cast<float4*>(workspace);
    float4* mine = ws + (static_cast<long long>(w.tile) * splits + w.split) * PART + consumer * 128 * QUADS;
#pragma unroll
    for (int q = 0; q < QUADS; ++q) __stcg(mine + q * 128 + t, make_float4(d[4 * q], d[4 * q + 1], d[4 * q + 2], d[4 * q + 3]));
    __threadfence();
    named_barrier(1, 128 * Cfg::CONSUMERS);
    if (consumer == 0 && t == 0) {
        const int before = atomicAdd(&counters[w.tile], 1);
        const bool last = before == splits - 1;
        if (last) counters[w.tile] = 0;
        *last_flag = last;
    }
    named_barrier(1, 128 * Cfg::CONSUMERS);
    if (!*last_flag) return false;
    __threadfence();
    const float4* parts = ws + static_cast<long long>(w.tile) * splits * PART + consumer * 128 * QUADS + t;
#pragma unroll
    for (int q = 0; q < QUADS; ++q) {
        const float4 p = __ldcg(parts + q * 128);
        d[4 * q] = p.x, d[4 * q + 1] = p.y, d[4 * q + 2] = p.z, d[4 * q + 3] = p.w;
    }
    for (int s = 1; s < splits; ++s) {
#pragma unroll
        for (int q = 0; q < QUADS; ++q) {
            const float4 p = __ldcg(parts + s * PART + q * 128);
            d[4 * q] += p.x, d[4 * q + 1] += p.y, d[4 * q + 2] += p.z, d[4 * q + 3] += p.w;
        }
    }
    return true;
}

template <class Elem, int BN, int STAGES, int CLUSTER, bool SPLIT_K>
__device__ __forceinline__ void run(int M, int N, int K, float alpha, const TensorMap* a_map, const TensorMap* b_map,
                                    float beta, float* __restrict__ C, int ldc, int group_m, int splits,
                                    float* __restrict__ workspace, int* __restrict__ counters) {
    using Cfg = Config<Elem, BN, STAGES, CLUSTER>;
    unsigned char* smem = aligned_dynamic_smem();
    Barrier* full = reinterpret_cast<Barrier*>(smem + STAGES * Cfg::STAGE_BYTES);
    Barrier* empty = full + STAGES;
    volatile int* last_flag = reinterpret_cast<volatile int*>(empty + STAGES);
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    const unsigned rank = CLUSTER == 1 ? 0u : cluster_cta_rank();
    const int cluster_id = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER;
    const Schedule sched(M, N, K, Cfg::BM, BN, Cfg::BK, CLUSTER, SPLIT_K ? splits : 1, group_m);

    if (threadIdx.x == 0) {
        tma_prefetch_map(a_map);
        tma_prefetch_map(b_map);
        for (int s = 0; s < STAGES; ++s) {
            barrier_init(&full[s], 1);
            barrier_init(&empty[s], Cfg::CONSUMERS * CLUSTER);
        }
        fence_barrier_init();
    }
    if constexpr (CLUSTER == 1) __syncthreads();
    else cluster_sync();  // the peers' barriers exist before anyone multicasts into them

    if (wg == 0) {
        shrink_registers<Cfg::PRODUCER_REGS>();
        if (t == 0) {
            int s = 0, phase = 0;
            for (int u = cluster_id; u < sched.units; u += clusters) {
                const Unit w = sched.unit(u, rank, CLUSTER, Cfg::BM, BN);
                for (int kt = w.kt0; kt < w.kt1; ++kt) {
                    barrier_wait(&empty[s], phase ^ 1);
                    load_stage<Cfg>(smem + s * Cfg::STAGE_BYTES, &full[s], a_map, b_map, kt, w.m0, w.n0, rank);
                    if (++s == STAGES) s = 0, phase ^= 1;
                }
            }
        }
    } else {
        grow_registers<Cfg::CONSUMER_REGS>();
        const int consumer = wg - 1, warp = t / 32, lane = t % 32;
        float d[BN / 2];
        int s = 0, phase = 0;
        for (int u = cluster_id; u < sched.units; u += clusters) {
            const Unit w = sched.unit(u, rank, CLUSTER, Cfg::BM, BN);
            int prev = -1;
            for (int kt = w.kt0; kt < w.kt1; ++kt) {
                barrier_wait(&full[s], phase);
                wgmma_fence();
                mma_stage<Elem, Cfg>(d, smem_u32(smem + s * Cfg::STAGE_BYTES), consumer, kt == w.kt0);
                wgmma_commit();
                wgmma_wait<1>();
                if (prev >= 0 && t == 0) release_slot<Cfg>(&empty[prev]);
                prev = s;
                if (++s == STAGES) s = 0, phase ^= 1;
            }
            wgmma_wait<0>();
            fence_accumulators(d);
            if (t == 0) release_slot<Cfg>(&empty[prev]);
            if constexpr (SPLIT_K) {
                if (sched.splits > 1 && !reduce_splits<Cfg>(d, w, sched.splits, consumer, t, workspace, counters, last_flag))
                    continue;
            }
            store_accumulators<BN>(d, M, N, w.n0, w.m0 + 64 * consumer + 16 * warp + lane / 4, w.n0 + 2 * (lane % 4),
                                   alpha, beta, C, ldc);
        }
    }
    if constexpr (CLUSTER > 1) cluster_sync();  // no CTA leaves while a peer may still signal it
}

}  // namespace hopper_pws
