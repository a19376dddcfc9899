// fp8_body.cuh -- the persistent, warp-specialised wgmma GEMM of persistent_body.cuh on FP8
// operands (e4m3 or e5m2 each) with FP32 scales: the body of fp8.cu (hopper_fp8).
//
// What is reused unchanged from persistent_body.cuh: the Config (an FP8 k tile is 128 codes, one
// 128-byte swizzle row, so the stage layout, the TMA boxes and the descriptors are the BF16
// kernel's K-major ones), the schedule of work units (tiles x split-K slices, grouped order,
// clusters), the producer's load_stage, mma_stage (four k32 steps of 32 bytes a k tile; wgmma.cuh
// dispatches FP8 by the element type's pair of formats), the split-K hand-over (reduce_splits)
// and every store path of C (hopper_epilogue.cuh). What is new is the consumer's loop and where
// the scales enter:
//
// Promotion (PROMOTE = 1). Hopper's FP8 tensor core keeps about 14 significant bits in its
// accumulator (DeepSeek-V3 report, 3.3.2), so a long K summed there loses precision. Each k
// tile (128 of K) is instead summed by the tensor core into fresh registers (`part`: scale-d = 0
// on its first k32 step), and after wgmma.wait_group the consumer adds it into FP32 registers
// (`acc`): acc += part, or, with block scales, acc = fma(part, sa[row, kb] * sb[nb, kb], acc).
// That bounds the 14-bit sums to 128 products (fp8.bound_factor's promoted bound) and applies the
// block scales where they change, at the cost of a second accumulator (BN/2 more registers a
// thread: BN = 64 or 128) and of the warpgroup waiting for its own k tile before it promotes (the
// other consumer warpgroup keeps the tensor cores busy meanwhile; DeepGEMM's Hopper kernel does the
// same). PROMOTE = 0 keeps the BF16 kernel's loop (one accumulator, one k tile of wgmma in
// flight): the unpromoted variant, tensor and row scaling only, for the bound's demonstration.
//
// Scales (SCALING; fp8.device_scales' layouts, read from global memory, never on the host):
//   0 tensor: one float each; alpha * (sa * sb) becomes the epilogue's alpha.
//   1 row:    sa[i] (M floats), sb[j] (N floats); the finished tile is multiplied by
//             (alpha * sa[i]) * sb[j] in registers before split-K and the epilogue (alpha 1).
//   2 block:  sa[kb * sa_ld + i] (ceil(K/128) rows of M), sb[nb * sb_ld + kb] (ceil(N/128) rows
//             of ceil(K/128)); applied at each promotion, so the tiles must not straddle a
//             128-column block of B (BN <= 128); alpha in the epilogue.
//             RING = 1: A's BM scales of each k tile are loaded by TMA into a ring slot beside the
//             stage's tiles, on the same full barrier, and read from shared memory after the
//             wait the consumers make anyway, where the host made their map (sa_tma = 1: in
//             place, or over a copy in rows of 16-byte multiples: fp8.py's ring_scales); else,
//             and with RING = 0, each thread reads its two from global memory a k tile ahead of
//             its promotion. B's one scale a k tile is read from
//             global memory in both (one address for the whole CTA: L1 serves it).
// Each mode costs three FP32 roundings of scale arithmetic, as fp8.SCALE_ROUNDINGS charges.
// Scales of rows past M and columns past N are never read (0 instead): their results are clipped.
//
// Formats (TYPES: bit 0 set where A is e5m2, bit 1 where B is; problem.py's FP8_TYPES): the
// element type fp8_t<TYPES> (hopper_common.cuh) carries them to the wgmma instruction, the only
// place they change: codes of either are one byte, and every product is exact in FP32.
//
// Small M (run_decode, at the end): decode_body.cuh's tiles with wgmma's roles swapped, through
// the same promoted k loops (each takes the tile's wgmma and the way scales enter as arguments).
#pragma once
#include "persistent_body.cuh"
#include "decode_body.cuh"

namespace fp8_gemm {
using namespace hopper;
using hopper_pws::Schedule;
using hopper_pws::Unit;

enum ScalingId { SCALE_TENSOR = 0, SCALE_ROW = 1, SCALE_BLOCK = 2 };

// A's and B's dequantization scales as the host laid them out; a_ld and b_ld are the row strides
// of the scale matrices (fp8.device_scales: block A is ceil(K/128) x M, block B ceil(N/128) x
// ceil(K/128), the vectors M x 1 and N x 1).
struct Scales {
    const float* __restrict__ a;
    int a_ld;
    const float* __restrict__ b;
    int b_ld;

    __device__ __forceinline__ float a_at(int row, int kb, int M) const {
        return row < M ? __ldg(a + static_cast<long long>(kb) * a_ld + row) : 0.0f;
    }
    __device__ __forceinline__ float row_a(int row, int M) const {
        return row < M ? __ldg(a + static_cast<long long>(row) * a_ld) : 0.0f;
    }
    __device__ __forceinline__ float row_b(int col, int N) const {
        return col < N ? __ldg(b + static_cast<long long>(col) * b_ld) : 0.0f;
    }
    // Block scaling: k tile kb's scale of B's block nb (of 128 columns).
    __device__ __forceinline__ float b_block(int nb, int kb) const {
        return __ldg(b + static_cast<long long>(nb) * b_ld + kb);
    }
    // ... and with it those of A's rows `row` and row + 8.
    __device__ __forceinline__ float3 block(int row, int kb, int nb, int M) const {
        return make_float3(a_at(row, kb, M), a_at(row + 8, kb, M), b_block(nb, kb));
    }
};

// acc (+)= part, or with block scales acc = fma(part, s[h], acc) for the thread's two rows
// (h = 0: row 16 warp + lane/4, h = 1: 8 rows below). FIRST: acc is not yet set (the unit's first
// k tile), so no zeroing pass is needed.
template <int R, bool SCALED, bool FIRST>
__device__ __forceinline__ void promote(float (&acc)[R], const float (&part)[R], float s0, float s1) {
#pragma unroll
    for (int i = 0; i < R; ++i) {
        const float s = (i & 2) ? s1 : s0;  // i = 4j + 2h + e
        if constexpr (SCALED) acc[i] = FIRST ? part[i] * s : fmaf(part[i], s, acc[i]);
        else acc[i] = FIRST ? part[i] : acc[i] + part[i];
    }
}

// How a finished k tile's part sum enters acc, for the promoted loops below: `load(kt)` fetches
// the k tile's scales when its wgmma is issued (their latency hides under the wgmma), before the
// wait for its ring slot; `arrived(tile, slot)` reads what came with the slot, after that wait;
// `add<FIRST>` promotes it once it is done. Unscaled: tensor and row scaling (their scales apply
// to the finished tile). RowBlocks: any_shape's tiles with block scales, A's scale a row of the
// fragment.
struct Unscaled {
    struct Tile {};
    __device__ __forceinline__ Tile load(int) const { return {}; }
    __device__ __forceinline__ void arrived(Tile&, int) const {}
    template <bool FIRST, int R>
    __device__ __forceinline__ void add(float (&acc)[R], const float (&part)[R], const Tile&) const {
        promote<R, false, FIRST>(acc, part, 1.0f, 1.0f);
    }
};

// row: the thread's first row; nb: the unit's 128-column block of B. RING_BM > 0: the tile's rows
// (BM), A's scales in `ring` (shared memory, RING_BM floats a slot; nullptr where TMA could not
// read them: then in place), at the thread's row `ring_row` of the tile and 8 below.
template <int RING_BM>
struct RowBlocks {
    using Tile = float3;  // A's scales of the thread's two rows, B's of the block
    const Scales& scales;
    int M, row, nb;
    const float* ring;
    int ring_row;
    __device__ __forceinline__ Tile load(int kt) const {
        if (RING_BM > 0 && ring != nullptr) return make_float3(0.0f, 0.0f, scales.b_block(nb, kt));
        return scales.block(row, kt, nb, M);
    }
    __device__ __forceinline__ void arrived(Tile& f, int slot) const {
        if (RING_BM > 0 && ring != nullptr) {
            const float* r = ring + slot * RING_BM + ring_row;
            f.x = r[0];
            f.y = r[8];
        }
    }
    template <bool FIRST, int R>
    __device__ __forceinline__ void add(float (&acc)[R], const float (&part)[R], const Tile& f) const {
        promote<R, true, FIRST>(acc, part, f.x * f.z, f.y * f.z);
    }
};

// The decode tiles with block scales (wgmma's roles swapped: d[4j + 2h + e] is C[m0 + 8j +
// 2(lane%4) + e][n + 8h], decode_body.cuh): A's scale varies along the fragment's columns, MT/4
// of them a thread; B's is one for the tile (its 64 * CONSUMERS columns lie in one 128-block).
template <int MT>
struct ColumnBlocks {
    struct Tile {
        float a[MT / 4];  // A's scale of row m0 + 8j + 2(lane%4) + e at 2j + e
        float b;
    };
    const Scales& scales;
    int M, m0, lane, nb;
    __device__ __forceinline__ Tile load(int kt) const {
        Tile tile;
#pragma unroll
        for (int j = 0; j < MT / 8; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e)
                tile.a[2 * j + e] = scales.a_at(hopper_small_m::fragment_row(m0, j, e, lane), kt, M);
        tile.b = scales.b_block(nb, kt);
        return tile;
    }
    __device__ __forceinline__ void arrived(Tile&, int) const {}
    template <bool FIRST, int R>
    __device__ __forceinline__ void add(float (&acc)[R], const float (&part)[R], const Tile& tile) const {
#pragma unroll
        for (int i = 0; i < R; ++i) {
            const float s = tile.a[2 * (i / 4) + (i & 1)] * tile.b;  // i = 4j + 2h + e
            acc[i] = FIRST ? part[i] * s : fmaf(part[i], s, acc[i]);
        }
    }
};

// The promotion of any_shape's tiles and of the decode tiles for a scaling mode.
template <int SCALING, int RING_BM>
__device__ __forceinline__ auto tile_promotion(const Scales& scales, int M, int row, int nb, const float* ring,
                                               int ring_row) {
    if constexpr (SCALING == SCALE_BLOCK) return RowBlocks<RING_BM>{scales, M, row, nb, ring, ring_row};
    else return Unscaled{};
}
template <int MT, int SCALING>
__device__ __forceinline__ auto decode_promotion(const Scales& scales, int M, int m0, int lane, int nb) {
    if constexpr (SCALING == SCALE_BLOCK) return ColumnBlocks<MT>{scales, M, m0, lane, nb};
    else return Unscaled{};
}

// One unit's k tiles, promoted every k tile (see the file's opening comment). s, phase: the
// ring's position, carried from unit to unit. promotion: Unscaled, RowBlocks or ColumnBlocks.
// mma(into, slot): ring slot `slot`'s k tile into `into`, starting it at zero (the tile's wgmma:
// any_shape's tiles or the decode tiles).
template <class Cfg, int R, class Promotion, class Mma>
__device__ __forceinline__ void k_loop_promoted(float (&acc)[R], hopper::Barrier* full, hopper::Barrier* empty,
                                                const Unit& w, int t, int& s, int& phase,
                                                const Promotion& promotion, Mma&& mma) {
    float part[R];
    for (int kt = w.kt0; kt < w.kt1; ++kt) {
        // the scales of this k tile, loaded before the wait so that their latency hides under it
        typename Promotion::Tile scale = promotion.load(kt);
        barrier_wait(&full[s], phase);
        promotion.arrived(scale, s);
        wgmma_fence();  // part was read by the last promotion
        mma(part, s);
        wgmma_commit();
        wgmma_wait<0>();
        fence_accumulators(part);
        if (t == 0) hopper_pws::release_slot<Cfg>(&empty[s]);  // the tensor cores are done with the slot
        if (kt == w.kt0) promotion.template add<true>(acc, part, scale);
        else promotion.template add<false>(acc, part, scale);
        if (++s == Cfg::STAGES) s = 0, phase ^= 1;
    }
}

// The same promotion with the next k tile's wgmma in flight while the last one is promoted
// (PROMOTE = 2): two part buffers, used in turn. k_loop_promoted waits for its own k tile before it
// adds it in, and the tensor cores idle for that wait unless the other consumer warpgroup fills it
// (45.9% tensor-pipe activity at 4096^3 block-scaled on the H100, against cuBLASLt's 72.5%). Here
// the wait is wgmma_wait<1>: only the k tile issued one step earlier must be done, and it is added
// in while the tensor cores work on the one just issued. Costs a third BN/2-register array: 192
// accumulator registers a thread at BN = 128, within the 224 the consumers get with two of them.
template <class Cfg, int R, class Promotion, class Mma>
__device__ __forceinline__ void k_loop_overlapped(float (&acc)[R], hopper::Barrier* full, hopper::Barrier* empty,
                                                  const Unit& w, int t, int& s, int& phase,
                                                  const Promotion& promotion, Mma&& mma) {
    using Scale = typename Promotion::Tile;
    // The part sums of the unit's even and odd k tiles (counted from kt0), each with its block
    // scales. Two named arrays and a loop unrolled by two, never one chosen at run time: that would
    // put them in local memory. acc starts at zero (promote's FIRST form would double the code).
    float even[R], odd[R];
    Scale even_scales{}, odd_scales{};
#pragma unroll
    for (int i = 0; i < R; ++i) acc[i] = 0.0f;
    // k tile kt into `into`, from ring slot s. Its block scales are loaded here and multiplied only
    // where the tile is promoted, a k tile later: a product taken here made the thread wait for the
    // loads (global latency) before it issued the wgmma, every k tile. (Loading them a k tile
    // earlier still, for the long-scoreboard stall ncu puts on that product, ran 2-6% slower:
    // results/h200/fp8-block-scales-ahead-before-after.txt.)
    auto issue = [&](float (&into)[R], int kt, Scale& scale) {
        scale = promotion.load(kt);
        barrier_wait(&full[s], phase);
        promotion.arrived(scale, s);
        wgmma_fence();  // `into` was read by the promotion before
        mma(into, s);
        wgmma_commit();
        if (++s == Cfg::STAGES) s = 0, phase ^= 1;
    };
    // a finished k tile (the wait before says so) from ring slot `slot`: the slot goes back to
    // the producer and the part sum into acc
    auto retire = [&](float (&done)[R], const Scale& scale, int slot) {
        fence_accumulators(done);
        if (t == 0) hopper_pws::release_slot<Cfg>(&empty[slot]);
        promotion.template add<false>(acc, done, scale);
    };
    int kt = w.kt0, older = s;  // older: the slot of the k tile issued first of the two in flight
    issue(even, kt++, even_scales);
    while (true) {
        if (kt == w.kt1) {
            wgmma_wait<0>();
            retire(even, even_scales, older);
            return;
        }
        int newer = s;
        issue(odd, kt++, odd_scales);
        wgmma_wait<1>();  // the even k tile is done; the odd one may still run
        retire(even, even_scales, older);
        older = newer;
        if (kt == w.kt1) {
            wgmma_wait<0>();
            retire(odd, odd_scales, older);
            return;
        }
        newer = s;
        issue(even, kt++, even_scales);
        wgmma_wait<1>();
        retire(odd, odd_scales, older);
        older = newer;
    }
}

// One unit's k tiles summed by the tensor core alone, one k tile of wgmma in flight (the BF16
// kernel's loop): no promotion.
template <class Elem, class Cfg>
__device__ __forceinline__ void k_loop_unpromoted(float (&acc)[Cfg::BN / 2], hopper::Barrier* full,
                                                  hopper::Barrier* empty, const Unit& w,
                                                  const hopper_pws::TileDescriptors<Cfg>& desc, int t, int& s,
                                                  int& phase) {
    hopper_pws::consume_unit<Cfg>(acc, w, full, empty, t, s, phase, [&](int slot, bool first) {
        hopper_pws::mma_stage<Elem, Cfg>(acc, desc, slot, first);
    });
}

// Row scaling of a finished tile: d[4j + 2h + e] *= (alpha * sa[row + 8h]) * sb[col + 8j + e].
template <int BN>
__device__ __forceinline__ void scale_rows_and_columns(float (&d)[BN / 2], const Scales& scales, float alpha, int M,
                                                       int N, int row, int col) {
    const float a0 = alpha * scales.row_a(row, M), a1 = alpha * scales.row_a(row + 8, M);
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const float b = scales.row_b(col + 8 * j + e, N);
            d[4 * j + e] *= a0 * b;
            d[4 * j + 2 + e] *= a1 * b;
        }
    }
}

// Block scaling's ring of A's scales (RING = 1; see the file's opening comment): BM floats a ring
// slot, after the Config's shared memory (in its last 1024 bytes, the alignment's slack, and past
// them: the launch asks for SMEM_BYTES + BYTES, geometry.fp8_scale_ring_bytes).
template <class Cfg, int RING>
struct ScaleRing {
    static constexpr int OFFSET = Cfg::SMEM_BYTES - 1024;
    static constexpr int BYTES = RING ? Cfg::STAGES * Cfg::BM * 4 : 0;
    static_assert(OFFSET % 128 == 0, "TMA writes the ring's slots at 128-byte boundaries");
    static_assert(Cfg::SMEM_BYTES + BYTES <= 227 * 1024, "the scale ring fits a block's shared memory: fewer STAGES");
    static_assert((Cfg::SMEM_BYTES + BYTES) * Cfg::CTAS_PER_SM <= 228 * 1024 - Cfg::CTAS_PER_SM * 1024,
                  "the scale ring fits the SM's shared memory: fewer STAGES");
};

// As hopper_pws::run (persistent_body.cuh) with FP8 A and B and their scales; EPILOGUE 3 (TMA
// stores where c_tma, else from registers or staged), split-K on. SCALING, PROMOTE, TYPES and RING
// (sa_map and sa_tma: the map of A's block scales, and whether TMA reads them): see the file's
// opening comment.
template <int BN, int STAGES, int CM, int CN, int CONSUMERS, int SCALING, int PROMOTE, int OUT, int EPI,
          int TYPES, int RING>
__device__ __forceinline__ void run(int M, int N, int K, float alpha, const TensorMap* a_map, const TensorMap* b_map,
                                    float beta, typename OutType<OUT>::T* __restrict__ C, int ldc, int group_m,
                                    int splits, int whole, float* __restrict__ workspace, int* __restrict__ counters,
                                    const TensorMap* c_map, int c_tma, const typename OutType<OUT>::T* __restrict__ bias,
                                    const Scales scales, const TensorMap* sa_map, int sa_tma) {
    using Elem = fp8_t<TYPES>;
    using Cfg = hopper_pws::Config<Elem, BN, STAGES, CM, CN, CONSUMERS, true>;
    using Ring = ScaleRing<Cfg, RING>;
    static_assert(!RING || SCALING == SCALE_BLOCK, "the scale ring holds block scales");
    static_assert(SCALING == SCALE_TENSOR || SCALING == SCALE_ROW || SCALING == SCALE_BLOCK, "scaling 0, 1 or 2");
    static_assert(PROMOTE || SCALING != SCALE_BLOCK, "block scales are applied at each promotion");
    static_assert(!PROMOTE || BN <= 128, "promotion keeps two or three accumulators: BN <= 128 (and a tile in "
                                         "one 128-column block of B's scales)");
    unsigned char* smem = aligned_dynamic_smem();
    Barrier* full = reinterpret_cast<Barrier*>(smem + STAGES * Cfg::STAGE_BYTES);
    Barrier* empty = full + STAGES;
    volatile int* last_flag = reinterpret_cast<volatile int*>(empty + STAGES);
    float* ring = RING && sa_tma ? reinterpret_cast<float*>(smem + Ring::OFFSET) : nullptr;
    const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0), t = threadIdx.x % 128;  // wg: uniform (run's)
    // Everything a role needs is computed inside it, after setmaxnreg: a value live across the
    // register hand-over (even blockIdx.x / CLUSTER) was spilled to local memory by ptxas.
    auto schedule = [&] { return Schedule(M, N, K, Cfg::BM, BN, Cfg::BK, CM, CN, splits, whole, group_m); };
    auto cluster_rank = [] { return Cfg::CLUSTER == 1 ? 0 : static_cast<int>(cluster_cta_rank()); };

    if (threadIdx.x < STAGES) {
        barrier_init(&full[threadIdx.x], 1);
        barrier_init(&empty[threadIdx.x], Cfg::CONSUMERS * Cfg::CLUSTER);
        fence_barrier_init();
    }
    if (threadIdx.x == 32) {
        tma_prefetch_map(a_map);
        tma_prefetch_map(b_map);
        if (c_tma) tma_prefetch_map(c_map);
        if (RING && sa_tma) tma_prefetch_map(sa_map);
    }
    if constexpr (Cfg::CLUSTER == 1) __syncthreads();
    else cluster_sync();
    take_over_from_previous_grid();  // with PDL: nothing global (the scales included) was read before this

    if (wg == 0) {  // the producer: persistent_body.cuh's, with A's block scales beside each stage on a ring
        shrink_registers<Cfg::PRODUCER_REGS>();
        if (t == 0) {
            const int cluster_id = blockIdx.x / Cfg::CLUSTER, clusters = gridDim.x / Cfg::CLUSTER;
            const int rank = cluster_rank();
            if (ring != nullptr) {
                // this CTA's own copy (never multicast): the tile's BM scales of A at k tile kt, counted on the
                // slot's full barrier before the stage's arrival (rows past M arrive as zeros)
                auto scales_of_stage = [&](int slot, Barrier* bar, int kt, const Unit& w) {
                    barrier_expect_tx(bar, Cfg::BM * 4);
                    tma_load_2d(ring + slot * Cfg::BM, sa_map, bar, w.m0, kt);
                };
                hopper_pws::produce<Cfg>(schedule(), smem, full, empty, a_map, b_map, cluster_id, clusters,
                                         rank % CM, rank / CM, scales_of_stage);
            } else {
                hopper_pws::produce<Cfg>(schedule(), smem, full, empty, a_map, b_map, cluster_id, clusters,
                                         rank % CM, rank / CM);
            }
        }
        __syncwarp();
    } else {
        grow_registers<Cfg::CONSUMER_REGS>();
        const int cluster_id = blockIdx.x / Cfg::CLUSTER, clusters = gridDim.x / Cfg::CLUSTER;
        const Schedule sched = schedule();
        const int rank = cluster_rank(), rm = rank % CM, rn = rank / CM;
        const int consumer = wg - 1, warp = t / 32, lane = t % 32;
        float* staging = reinterpret_cast<float*>(smem + Cfg::STAGING_OFFSET) + consumer * Cfg::STAGING_FLOATS;
        // tensor scaling: alpha * (sa * sb) is the epilogue's alpha; row scaling applies alpha with the
        // scales; block scaling leaves alpha to the epilogue
        const float epi_alpha = SCALING == SCALE_TENSOR ? alpha * (__ldg(scales.a) * __ldg(scales.b))
                                : SCALING == SCALE_ROW  ? 1.0f
                                                        : alpha;
        const hopper_pws::TileDescriptors<Cfg> desc(smem_u32(smem), consumer);
        float acc[BN / 2];
        int s = 0, phase = 0, stores = 0;
        for (int u = cluster_id; u < sched.units; u += clusters) {
            const Unit w = sched.unit(u, rm, rn, CM, CN, Cfg::BM, BN);
            const int row0 = w.m0 + 64 * consumer, row = row0 + 16 * warp + lane / 4;
            auto mma = [&](float (&into)[BN / 2], int slot) {
                hopper_pws::mma_stage<Elem, Cfg>(into, desc, slot, true);
            };
            const auto promotion = tile_promotion<SCALING, RING ? Cfg::BM : 0>(scales, M, row, w.n0 / 128, ring,
                                                                              row - w.m0);
            if constexpr (PROMOTE == 2) k_loop_overlapped<Cfg>(acc, full, empty, w, t, s, phase, promotion, mma);
            else if constexpr (PROMOTE == 1) k_loop_promoted<Cfg>(acc, full, empty, w, t, s, phase, promotion, mma);
            else k_loop_unpromoted<Elem, Cfg>(acc, full, empty, w, desc, t, s, phase);
            if constexpr (SCALING == SCALE_ROW)
                scale_rows_and_columns<BN>(acc, scales, alpha, M, N, row, w.n0 + 2 * (lane % 4));
            int2 chunks = make_int2(0, BN / 32);
            if (w.splits > 1) {
                chunks = hopper_pws::reduce_splits<Cfg>(acc, w, sched.parallel(clusters), consumer, t,
                                                        workspace, counters, last_flag);
                if (chunks.x >= chunks.y) continue;
            }
            const Epilogue<OUT, EPI> epi{epi_alpha, beta, bias, N};
            if (c_tma) {
                BiasPairs<BN, Epilogue<OUT, EPI>> held;
                held.load(epi, w.n0, lane);
                store_tma<BN, Cfg::STORE_BUFFERS>(acc, staging, M, row0, w.n0, epi, held, C, ldc, c_map,
                                                  2 + consumer, chunks.x, chunks.y, stores);
                continue;
            }
            if (c_pairs_aligned(C, ldc) && w.n0 + BN <= N)
                store_accumulators<BN>(acc, M, w.n0, row, w.n0 + 2 * (lane % 4), epi, C, ldc, 4 * chunks.x,
                                       4 * chunks.y);
            else store_staged<BN>(acc, staging, M, row0, w.n0, epi, C, ldc, 2 + consumer, chunks.x, chunks.y);
        }
        if (t == 0 && stores > 0) bulk_wait_all();  // the staging buffers outlive the stores reading them
    }
    if constexpr (Cfg::CLUSTER > 1) cluster_sync();
}

// Row scaling of a finished decode block (wgmma's roles swapped: d[4j + 2h + e] is C[m0 + 8j +
// 2(lane%4) + e][n + 8h], decode_body.cuh): d *= (alpha * sa[m]) * sb[n], the roundings of
// scale_rows_and_columns.
template <int MT>
__device__ __forceinline__ void scale_transposed(float (&d)[MT / 2], const Scales& scales, float alpha, int M, int N,
                                                 int m0, int n, int lane) {
    const float b0 = scales.row_b(n, N), b1 = scales.row_b(n + 8, N);
#pragma unroll
    for (int j = 0; j < MT / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const float a = alpha * scales.row_a(hopper_small_m::fragment_row(m0, j, e, lane), M);
            d[4 * j + e] *= a * b0;
            d[4 * j + 2 + e] *= a * b1;
        }
    }
}

// Small M: decode_body.cuh's tiles (MT rows of A x 64 * CONSUMERS columns of B, wgmma's roles
// swapped, C^T = B^T A^T, the deepest ring that fits) on FP8 codes, each 128 of K promoted as
// PROMOTE says (the promoted loops above, with the decode tile's wgmma). Block scales enter at
// promotion (ColumnBlocks: A's vary along the swapped fragment's columns), alpha in the epilogue.
// CM = 2: two tile rows in a cluster share each B tile by multicast (decode_body.cuh's Config).
// TYPES is the problem's (A's format in bit 0); wgmma reads the B tile as its A operand here.
template <int MT, int CONSUMERS, int SCALING, int PROMOTE, int OUT, int EPI, int TYPES, int CM>
__device__ __forceinline__ void run_decode(int M, int N, int K, float alpha, const TensorMap* a_map,
                                           const TensorMap* b_map, float beta, typename OutType<OUT>::T* __restrict__ C,
                                           int ldc, int group_m, int splits, int whole, float* __restrict__ workspace,
                                           int* __restrict__ counters,
                                           const typename OutType<OUT>::T* __restrict__ bias, const Scales scales) {
    static_assert(PROMOTE || SCALING != SCALE_BLOCK, "block scales are applied at each promotion");
    constexpr int R = MT / 2;
    // the roles swapped, B's format goes to wgmma's A operand and A's to its B: the pair exchanged
    using Elem = fp8_swapped_t<fp8_t<TYPES>>;
    using Cfg = hopper_small_m::Config<Elem, MT, CONSUMERS, 1, CM>;
    hopper_small_m::run_with<Elem, MT, CONSUMERS, OUT, EPI, 1, CM>(
        M, N, K, a_map, b_map, beta, C, ldc, group_m, splits, whole, workspace, counters, bias,
        [&](float (&d)[R], const Unit& w, Barrier* full, Barrier* empty, unsigned char* smem, int consumer, int t,
            int& s, int& phase) {
            auto mma = [&](float (&into)[R], int slot) {
                hopper_small_m::mma_stage<Elem, Cfg>(into, smem, slot, consumer, true);
            };
            const auto promotion = decode_promotion<MT, SCALING>(scales, M, w.m0, t % 32, w.n0 / 128);
            if constexpr (PROMOTE == 2) k_loop_overlapped<Cfg>(d, full, empty, w, t, s, phase, promotion, mma);
            else if constexpr (PROMOTE == 1) k_loop_promoted<Cfg>(d, full, empty, w, t, s, phase, promotion, mma);
            else hopper_small_m::k_loop_whole<Elem, Cfg>(d, w, full, empty, smem, consumer, t, s, phase);
        },
        // tensor scaling: alpha * (sa * sb) is the epilogue's alpha; row scaling applies alpha with the
        // scales; block scaling leaves alpha to the epilogue
        [&] {
            return SCALING == SCALE_TENSOR ? alpha * (__ldg(scales.a) * __ldg(scales.b))
                   : SCALING == SCALE_ROW  ? 1.0f
                                           : alpha;
        },
        [&](float (&d)[R], const Unit& w, int consumer, int warp, int lane) {
            if constexpr (SCALING == SCALE_ROW)
                scale_transposed<MT>(d, scales, alpha, M, N, w.m0, w.n0 + 64 * consumer + 16 * warp + lane / 4, lane);
        });
}

}  // namespace fp8_gemm
