// warp_specialized.cu -- Hopper rung 2: a producer warpgroup and two consumer warpgroups.
//
// Change against wgmma_tma (rung 1): the roles split. Warpgroup 0 only feeds the ring (one thread
// issues the TMA copies) and gives most of its registers away (setmaxnreg.dec to 40); warpgroups
// 1 and 2 only compute (setmaxnreg.inc to 232), each a 64 x BN half of a 128 x BN tile, so a
// 128 x 256 tile holds 128 FP32 accumulators per consumer thread. Slots are handed back through
// a second ring of `empty` mbarriers (one arrival per consumer warpgroup), so the producer runs
// up to STAGES k tiles ahead without any block-wide barrier, and a consumer keeps one k tile of
// wgmmas in flight (wait_group 1) while it waits for the next: the tensor cores are fed back to
// back. __launch_bounds__(384, 1) caps registers at entry (168), which setmaxnreg needs.
// Grid: one CTA per 128 x BN tile (not persistent yet), blockIdx.x along N.
// Tunables: BN (128, 256), STAGES. Measurements: docs/hopper.md.
#include "hopper_common.cuh"
#include "wgmma.cuh"
#include "hopper_epilogue.cuh"
#include "pack.cuh"

namespace hopper_rung2 {
using namespace hopper;

template <class Elem, int BN_, int STAGES_>
struct Config {
    static constexpr int BM = 128, BN = BN_, STAGES = STAGES_, CONSUMERS = 2, THREADS = 128 * (CONSUMERS + 1);
    static constexpr int BK = KTile<Elem>::BK;
    static constexpr bool B_N_MAJOR = Elem::bytes == 2;
    static constexpr int A_BYTES = BM * 128, B_BYTES = BN * 128, STAGE_BYTES = A_BYTES + B_BYTES;
    static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 2 * STAGES * 8 + 1024;
    static constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;  // 128*40 + 256*232 <= 65536
    static_assert(BN == 64 || BN == 128 || BN == 256, "BN is a wgmma N");
    static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per block on sm_90");
};

template <class Cfg>
__device__ __forceinline__ void load_stage(unsigned char* stage, Barrier* full, const TensorMap* a_map,
                                           const TensorMap* b_map, int kt, int m0, int n0) {
    barrier_arrive_expect_tx(full, Cfg::STAGE_BYTES);
    tma_load_2d(stage, a_map, full, kt * Cfg::BK, m0);
    unsigned char* b = stage + Cfg::A_BYTES;
    if constexpr (Cfg::B_N_MAJOR) {
#pragma unroll
        for (int j = 0; j < Cfg::BN / 64; ++j) tma_load_2d(b + j * 64 * 128, b_map, full, n0 + 64 * j, kt * Cfg::BK);
    } else {
        tma_load_2d(b, b_map, full, kt * Cfg::BK, n0);
    }
}

// One k tile of a consumer warpgroup: rows [64*wg, 64*wg + 64) of the stage's A times its B.
template <class Elem, class Cfg>
__device__ __forceinline__ void mma_stage(float (&d)[Cfg::BN / 2], unsigned stage, int wg, bool first) {
    const unsigned a = stage + wg * 64 * 128, b = stage + Cfg::A_BYTES;
#pragma unroll
    for (int step = 0; step < KTile<Elem>::STEPS; ++step) {
        const unsigned long long bd = Cfg::B_N_MAJOR ? smem_desc(b + step * 16 * 128, 64 * 128, 1024)
                                                     : smem_desc(b + step * 32, 16, 1024);
        mma_ss<Elem, Cfg::BN, Cfg::B_N_MAJOR ? 1 : 0>(d, smem_desc(a + step * 32, 16, 1024), bd,
                                                      first && step == 0 ? 0 : 1);
    }
}

}  // namespace hopper_rung2

// Same problem, maps and boxes as hopper_wgmma_tma (A box {BK, 128}); 384 threads;
// grid (ceil(N/BN), ceil(M/128)); dynamic smem Config::SMEM_BYTES.
template <class Elem, int BN, int STAGES>
__global__ void __launch_bounds__(384, 1)
    hopper_warp_specialized(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
                            const __grid_constant__ hopper::TensorMap b_map, float beta, float* __restrict__ C,
                            int ldc) {
    using namespace hopper;
    using Cfg = hopper_rung2::Config<Elem, BN, STAGES>;
    unsigned char* smem = aligned_dynamic_smem();
    Barrier* full = reinterpret_cast<Barrier*>(smem + STAGES * Cfg::STAGE_BYTES);
    Barrier* empty = full + STAGES;
    const int m0 = blockIdx.y * Cfg::BM, n0 = blockIdx.x * BN;
    const int k_tiles = ceil_div(K, Cfg::BK);
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;

    if (threadIdx.x == 0) {
        tma_prefetch_map(&a_map);
        tma_prefetch_map(&b_map);
        for (int s = 0; s < STAGES; ++s) {
            barrier_init(&full[s], 1);
            barrier_init(&empty[s], Cfg::CONSUMERS);
        }
        fence_barrier_init();
    }
    __syncthreads();

    if (wg == 0) {
        shrink_registers<Cfg::PRODUCER_REGS>();
        if (t == 0) {
            for (int kt = 0, s = 0, phase = 0; kt < k_tiles; ++kt) {
                barrier_wait(&empty[s], phase ^ 1);  // the consumers released this slot's last use
                hopper_rung2::load_stage<Cfg>(smem + s * Cfg::STAGE_BYTES, &full[s], &a_map, &b_map, kt, m0, n0);
                if (++s == STAGES) s = 0, phase ^= 1;
            }
        }
    } else {
        grow_registers<Cfg::CONSUMER_REGS>();
        const int consumer = wg - 1;
        float d[BN / 2];
        int prev = 0;
        for (int kt = 0, s = 0, phase = 0; kt < k_tiles; ++kt) {
            barrier_wait(&full[s], phase);
            wgmma_fence();
            hopper_rung2::mma_stage<Elem, Cfg>(d, smem_u32(smem + s * Cfg::STAGE_BYTES), consumer, kt == 0);
            wgmma_commit();
            wgmma_wait<1>();  // the previous k tile's wgmmas are done: its slot can be refilled
            if (kt > 0 && t == 0) barrier_arrive(&empty[prev]);
            prev = s;
            if (++s == STAGES) s = 0, phase ^= 1;
        }
        wgmma_wait<0>();
        fence_accumulators(d);
        const int warp = t / 32, lane = t % 32;
        store_accumulators<BN>(d, M, n0, m0 + 64 * consumer + 16 * warp + lane / 4, n0 + 2 * (lane % 4),
                               Epilogue<OUT_FP32, EPI_NONE>{alpha, beta, nullptr, N}, C, ldc);
    }
}
