// tf32_register_a.cu -- Hopper TF32 without a transposed copy of B: wgmma with A from registers.
//
// Problem: wgmma reads 32-bit (tf32) operands from shared memory only K-major, and a row-major B
// (K x N) is N-major; the other rungs therefore transpose B into scratch first (pack_transpose),
// a memory-bound pass of ~2 x 4 bytes x K x N (49 us at 4096^3, ~10% of the GEMM).
// Change: compute C^T = B^T A^T. The wgmma B operand is then A^T, whose K-major form is A as it
// is (row-major M x K): a TMA box of 256 rows of A feeds wgmma's N = 256 directly. The wgmma A
// operand is B^T (64 rows of n per consumer warpgroup x 8 k), taken from registers: the consumer
// loads it from B's N-major tile in shared memory (as TMA wrote it, 128-byte swizzled) with
// 64-bit loads. Which n a fragment row stands for is ours to choose, as long as the epilogue
// agrees: row R = 16w + q + 8h (warp w, q = lane/4) is n = 2p + h with
// p = 16(w/2) + 4(w%2) + 8(q%2) + q/2, so a thread's two rows are adjacent n (one LDS.64 per k
// column) and the 16 lanes of each half warp hit 16 different 8-byte bank pairs of the swizzled
// tile: no bank conflicts. Fragments are double-buffered in registers: the next k tile's loads
// go to the other buffer while the tensor cores still read this one.
// Tile: 256 (m) x 128 (n), two consumer warpgroups of 64 n; persistent, grouped order, 4 stages
// of 32 KiB (A) + 16 KiB (B). Epilogue: a thread holds C[m][n], C[m][n+1] pairs: float2 stores.
// Small grids: BM = 128, CONSUMERS = 1 gives 128 x 64 tiles (wgmma m64n128k8, two CTAs an SM);
// BM = 64 gives 64 x 128 tiles (wgmma m64n64k8 in each of two consumers).
// Clusters of CM x CN CTAs (CM tile rows of m, CN tile columns of n) multicast slices as in
// persistent_body.cuh: A rows among a cluster row, B k rows among a cluster column. With one
// consumer, CM = 2 is refused: its multicast code spills at that register count.
// Split-K (SPLITS, and TAIL's cut of a last, partial wave: the first `whole` tiles unsplit)
// reuses persistent_body.cuh's reduce_splits on the accumulator registers; PDL as in any_shape.cu.
// B stored N x K (layouts nt, tt) is K-major already, as TF32 wgmma reads it: those problems run
// any_shape.cu's kernels (included below) over B as stored, with no copy and no register-A
// operand; the host picks the entry (TRANS_B, gemm_driver/kernels/hopper/rungs.py).
// Tunables: BM (64, 128, 256), CONSUMERS, STAGES, CM, CN, GROUP_M, SPLITS, TAIL, PDL, TRANS_B; which
// runs for a shape is choose_register_a's rule (gemm_driver/kernels/hopper/rungs.py).
// Measurements (the same design as cuBLAS's TF32 kernel, and as fast per clock), and what was
// tried and not kept: docs/hopper.md, docs/findings.md.
#include "persistent_body.cuh"
#include "pack.cuh"
#include "any_shape.cu"

namespace hopper_tf32ra {
using namespace hopper;

// BM_ rows of m (wgmma's N: 256, 128 or 64) x 64 n per consumer warpgroup (CONSUMERS_: 1 or 2).
template <int BM_, int CONSUMERS_, int STAGES_, int CM_, int CN_>
struct Config {
    static constexpr int BM = BM_, CONSUMERS = CONSUMERS_, BN = 64 * CONSUMERS_, STAGES = STAGES_;
    static constexpr int THREADS = 128 * (CONSUMERS + 1);
    static constexpr int CTAS_PER_SM = CONSUMERS == 1 ? 2 : 1;  // one consumer: two CTAs share an SM
    static constexpr int CM = CM_, CN = CN_, CLUSTER = CM_ * CN_;
    static constexpr int A_SLICE_ROWS = BM / CN;  // A map box rows
    static constexpr int B_SLICE_ROWS = 32 / CM;  // B map box rows (k) of each 32-wide n box
    static constexpr int BK = 32;                          // one 128-byte swizzle row of floats
    static constexpr int A_BYTES = BM * 128;               // BM rows of A: wgmma's B operand
    static constexpr int B_BYTES = BN * 128;               // 32 k rows of BN/32 boxes of 32 n
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
    static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 2 * STAGES * 8 + 16 + 1024;  // + split-K's flag
    // The register file split among the warpgroups: 128*56 + 256*224 = 65536 with two consumers;
    // with one, two CTAs an SM: 128*40 + 128*216 = 32768 each.
    static constexpr int PRODUCER_REGS = CONSUMERS == 2 ? 56 : 40, CONSUMER_REGS = CONSUMERS == 2 ? 224 : 216;
    static_assert(BM == 256 || BM == 128 || BM == 64, "wgmma N of 256, 128 or 64");
    static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one or two consumer warpgroups");
    static_assert(CTAS_PER_SM * (SMEM_BYTES + 1024) <= 228 * 1024, "shared memory per SM on sm_90");
    static_assert(A_SLICE_ROWS % 8 == 0 && B_SLICE_ROWS % 8 == 0, "slices are whole 8-row swizzle atoms");
};

// Fragment row (warp w, q = lane/4, h) -> n within the warpgroup's 64: 2 * p + h.
__device__ __forceinline__ int fragment_pair(int w, int q) {
    return 16 * (w / 2) + 4 * (w % 2) + 8 * (q % 2) + q / 2;
}

// Byte offset in the B stage of (k, n) for n in [0, 128): box n/32, row k, swizzled 16-byte chunk.
__device__ __forceinline__ unsigned b_offset(int k, int n) {
    const int box = n / 32, nn = n % 32;
    return box * 32 * 128 + k * 128 + ((((nn / 4) ^ (k % 8)) * 16) | ((nn % 4) * 4));
}

// The A fragments (B^T) of one k tile: 4 wgmma k steps x {a0..a3}; a0/a1 = rows n, n+1 at
// column k, a2/a3 at k+4.
__device__ __forceinline__ void load_fragments(unsigned (&f)[4][4], unsigned b_stage, int n_pair, int lane) {
    const int j = lane % 4;
#pragma unroll
    for (int step = 0; step < 4; ++step) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int k = 8 * step + j + 4 * half;
            asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];"
                         : "=r"(f[step][2 * half]), "=r"(f[step][2 * half + 1])
                         : "r"(b_stage + b_offset(k, n_pair)));
        }
    }
}

template <int R>
__device__ __forceinline__ void fence_fragments(unsigned (&f)[R][4]) {
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(f[i][e])::"memory");
}

template <class Cfg>
__device__ __forceinline__ void load_stage(unsigned char* stage, Barrier* full, const TensorMap* a_map,
                                           const TensorMap* b_map, int kt, int m0, int n0, int rm, int rn) {
    barrier_arrive_expect_tx(full, Cfg::STAGE_BYTES);  // whole tiles: our slices and the peers'
    const int k = kt * Cfg::BK;
    unsigned char* a = stage + rn * Cfg::A_SLICE_ROWS * 128;
    if constexpr (Cfg::CN == 1) tma_load_2d(a, a_map, full, k, m0);
    else tma_load_2d_multicast(a, a_map, full, k, m0 + rn * Cfg::A_SLICE_ROWS, hopper_pws::row_mask<Cfg>(rm));
    unsigned char* b = stage + Cfg::A_BYTES + rm * Cfg::B_SLICE_ROWS * 128;
#pragma unroll
    for (int box = 0; box < Cfg::BN / 32; ++box) {
        if constexpr (Cfg::CM == 1) tma_load_2d(b + box * 32 * 128, b_map, full, n0 + 32 * box, k);
        else
            tma_load_2d_multicast(b + box * 32 * 128, b_map, full, n0 + 32 * box, k + rm * Cfg::B_SLICE_ROWS,
                                  hopper_pws::column_mask<Cfg>(rn));
    }
}

// One k tile: fragments from the B stage into f, then 4 wgmma m64n{BM}k8 against the A stage.
template <int BM>
__device__ __forceinline__ void mma_stage(float (&d)[BM / 2], unsigned (&f)[4][4], unsigned stage, int a_bytes,
                                          int n_pair, int lane, bool first) {
    load_fragments(f, stage + a_bytes, n_pair, lane);
    wgmma_fence();
#pragma unroll
    for (int step = 0; step < 4; ++step)
        mma_tf32_rs<BM>(d, f[step], smem_desc(stage + step * 32, 16, 1024), first && step == 0 ? 0 : 1);
    wgmma_commit();
}

}  // namespace hopper_tf32ra

// C (M x N, ldc) = alpha * A @ B + beta * C, tf32 operands (FP32 storage), FP32 accumulate.
// a_map: A (M x K, row-major) box {32, BM}; b_map: B (K x N, row-major) box {32, 32}; both
// FP32, 128-byte swizzle; with clusters the boxes are {32, BM/CN} and {32, 32/CM}. Grid: a
// multiple of CM*CN CTAs of 128 * (CONSUMERS + 1) threads, at most the resident CTAs and the
// number of units. Split-K (splits > 1; the first `whole` tiles unsplit, hopper_pws::Schedule):
// workspace holds a BM x BN partial per split tile and split, counters two zeroed ints per tile
// (persistent_body.cuh's reduce_splits).
template <int BM, int CONSUMERS, int STAGES, int CM, int CN>
__global__ void __cluster_dims__(CM * CN, 1, 1)
    __launch_bounds__(hopper_tf32ra::Config<BM, CONSUMERS, STAGES, CM, CN>::THREADS,
                      hopper_tf32ra::Config<BM, CONSUMERS, STAGES, CM, CN>::CTAS_PER_SM)
    hopper_tf32_register_a(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
                           const __grid_constant__ hopper::TensorMap b_map, float beta, float* __restrict__ C,
                           int ldc, int group_m, int splits, int whole, float* __restrict__ workspace,
                           int* __restrict__ counters) {
    using namespace hopper;
    using Cfg = hopper_tf32ra::Config<BM, CONSUMERS, STAGES, CM, CN>;
    unsigned char* smem = aligned_dynamic_smem();
    Barrier* full = reinterpret_cast<Barrier*>(smem + STAGES * Cfg::STAGE_BYTES);
    Barrier* empty = full + STAGES;
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    const int cluster_id = blockIdx.x / Cfg::CLUSTER, clusters = gridDim.x / Cfg::CLUSTER;
    volatile int* last_flag = reinterpret_cast<volatile int*>(empty + STAGES);
    auto schedule = [&] {
        return hopper_pws::Schedule(M, N, K, Cfg::BM, Cfg::BN, Cfg::BK, CM, CN, splits, whole, group_m);
    };
    auto cluster_rank = [] { return Cfg::CLUSTER == 1 ? 0 : static_cast<int>(cluster_cta_rank()); };

    if (threadIdx.x == 0) {
        tma_prefetch_map(&a_map);
        tma_prefetch_map(&b_map);
        for (int s = 0; s < STAGES; ++s) {
            barrier_init(&full[s], 1);
            barrier_init(&empty[s], Cfg::CONSUMERS * Cfg::CLUSTER);
        }
        fence_barrier_init();
    }
    if constexpr (Cfg::CLUSTER == 1) __syncthreads();
    else cluster_sync();
    take_over_from_previous_grid();  // with PDL: nothing global was touched before this

    if (wg == 0) {
        shrink_registers<Cfg::PRODUCER_REGS>();
        if (t == 0) {
            const hopper_pws::Schedule sched = schedule();
            const int rank = cluster_rank(), rm = rank % CM, rn = rank / CM;
            int s = 0, phase = 0;
            for (int u = cluster_id; u < sched.units; u += clusters) {
                const hopper_pws::Unit w = sched.unit(u, rm, rn, CM, CN, Cfg::BM, Cfg::BN);
                for (int kt = w.kt0; kt < w.kt1; ++kt) {
                    barrier_wait(&empty[s], phase ^ 1);
                    hopper_tf32ra::load_stage<Cfg>(smem + s * Cfg::STAGE_BYTES, &full[s], &a_map, &b_map, kt, w.m0,
                                                   w.n0, rm, rn);
                    if (++s == STAGES) s = 0, phase ^= 1;
                }
            }
        }
        __syncwarp();
    } else {
        grow_registers<Cfg::CONSUMER_REGS>();
        const hopper_pws::Schedule sched = schedule();
        const int rank = cluster_rank(), rm = rank % CM, rn = rank / CM;
        const int consumer = wg - 1, warp = t / 32, lane = t % 32;
        const int p = hopper_tf32ra::fragment_pair(warp, lane / 4);
        const int n_pair = 64 * consumer + 2 * p;  // this thread's fragment rows: n_pair, n_pair + 1
        float d[BM / 2];
        unsigned f0[4][4], f1[4][4];  // fragments of even and odd k tiles
        int s = 0, phase = 0;
        for (int u = cluster_id; u < sched.units; u += clusters) {
            const hopper_pws::Unit w = sched.unit(u, rm, rn, CM, CN, Cfg::BM, Cfg::BN);
            int prev = -1;
            for (int kt = w.kt0; kt < w.kt1; ++kt) {
                barrier_wait(&full[s], phase);
                const unsigned stage = smem_u32(smem + s * Cfg::STAGE_BYTES);
                // Even and odd k tiles use their own fragment registers; the fence after the wait
                // keeps the other buffer alive (unreused by the compiler) until its wgmmas finished.
                if (((kt - w.kt0) & 1) == 0) {
                    hopper_tf32ra::mma_stage<BM>(d, f0, stage, Cfg::A_BYTES, n_pair, lane, kt == w.kt0);
                    wgmma_wait<1>();
                    hopper_tf32ra::fence_fragments(f1);
                } else {
                    hopper_tf32ra::mma_stage<BM>(d, f1, stage, Cfg::A_BYTES, n_pair, lane, false);
                    wgmma_wait<1>();
                    hopper_tf32ra::fence_fragments(f0);
                }
                if (prev >= 0 && t == 0) hopper_pws::release_slot<Cfg>(&empty[prev]);
                prev = s;
                if (++s == STAGES) s = 0, phase ^= 1;
            }
            wgmma_wait<0>();
            fence_accumulators(d);
            hopper_tf32ra::fence_fragments(f0);
            hopper_tf32ra::fence_fragments(f1);
            if (t == 0) hopper_pws::release_slot<Cfg>(&empty[prev]);
            int2 chunks = make_int2(0, BM / 32);  // the 32-row chunks of m this CTA stores
            if (w.splits > 1) {
                chunks = hopper_pws::reduce_splits<hopper_pws::AccumulatorOfBM<Cfg>>(
                    d, w, sched.parallel(clusters), consumer, t, workspace, counters, last_flag);
                if (chunks.x >= chunks.y) continue;
            }
            // d[4j + 2h + e] = C^T[n_pair + h][8j + 2(lane%4) + e]: C[m][n_pair], C[m][n_pair + 1].
            const int n = w.n0 + n_pair;
            const bool pairs = c_pairs_aligned(C, ldc) && n + 1 < N;
#pragma unroll
            for (int j = 0; j < BM / 8; ++j) {
                if (j < 4 * chunks.x || j >= 4 * chunks.y) continue;
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int m = w.m0 + 8 * j + 2 * (lane % 4) + e;
                    if (m >= M) continue;
                    float* out = C + static_cast<long long>(m) * ldc + n;
                    float v0 = alpha * d[4 * j + e], v1 = alpha * d[4 * j + 2 + e];
                    if (pairs) {
                        if (beta != 0.0f) {
                            const float2 old = *reinterpret_cast<const float2*>(out);
                            v0 = fmaf(beta, old.x, v0), v1 = fmaf(beta, old.y, v1);
                        }
                        *reinterpret_cast<float2*>(out) = make_float2(v0, v1);
                    } else {
                        if (n < N) out[0] = beta != 0.0f ? fmaf(beta, out[0], v0) : v0;
                        if (n + 1 < N) out[1] = beta != 0.0f ? fmaf(beta, out[1], v1) : v1;
                    }
                }
            }
        }
    }
    if constexpr (Cfg::CLUSTER > 1) cluster_sync();  // no CTA leaves while a peer may still signal it
}

