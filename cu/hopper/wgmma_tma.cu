// wgmma_tma.cu -- Hopper rung 1: wgmma from shared memory, fed by TMA through an mbarrier ring.
//
// Change against the mma.sync kernels (sm_80 ladder): operands no longer pass through registers.
// One thread asks the copy engine (TMA, cp.async.bulk.tensor) for each k tile of A (128 x 64) and
// B (64 x BN, bf16/fp16); the tiles land in shared memory in the 128-byte swizzled layout that
// wgmma reads directly through matrix descriptors, and each stage's mbarrier completes when its
// bytes have arrived (arrive.expect_tx + complete_tx). One warpgroup (128 threads) issues
// wgmma.mma_async m64nBNk16 for both 64-row halves of the 128 x BN tile, FP32 accumulators in
// registers. B stays row-major (N-major): wgmma reads it transposed (imm-trans-b = 1), so no copy
// of B is made. tf32 takes B already transposed (K-major), which wgmma requires for 32-bit types.
// The pipeline is plain: STAGES-1 tiles in flight, and the warpgroup waits for its own wgmmas
// (wait_group 0) before the slot is refilled, so the tensor cores idle while a CTA waits; two
// CTAs per SM (STAGES=3, 96 KiB each) cover part of that.
// Ragged M, N, K: TMA fills out-of-bounds box elements with zeros; the epilogue predicates.
// Tunables: BN (64, 128), STAGES. Measurements: docs/hopper.md.
#include "hopper_common.cuh"
#include "wgmma.cuh"
#include "hopper_epilogue.cuh"
#include "pack.cuh"

namespace hopper_rung1 {
using namespace hopper;

template <class Elem, int BN_, int STAGES_>
struct Config {
    static constexpr int BM = 128, BN = BN_, STAGES = STAGES_, THREADS = 128;
    static constexpr int BK = KTile<Elem>::BK;
    static constexpr bool B_N_MAJOR = Elem::bytes == 2;  // tf32: B is given transposed (K-major)
    static constexpr int A_BYTES = BM * 128;             // BM rows of one 128-byte swizzle row
    static constexpr int B_BYTES = BN * 128;             // BK x BN elements either way
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
    static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + STAGES * 8 + 1024;  // + barriers + alignment
    static_assert(BN == 64 || BN == 128 || BN == 256, "BN is a wgmma N");
    static_assert(STAGES >= 2, "one stage computes while the next loads");
};

// The TMA copies of k tile kt into a stage: A is one box (BK x BM); B is BN/64 boxes of 64 n x BK k
// when N-major (a swizzle row holds 64 n), or one box (BK x BN) when K-major.
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

// Descriptors of wgmma k step `step` in a stage: A rows [64*half, 64*half + 64).
template <class Cfg>
__device__ __forceinline__ unsigned long long a_desc(unsigned stage, int half, int step) {
    return smem_desc(stage + half * 64 * 128 + step * 32, 16, 1024);
}
template <class Cfg>
__device__ __forceinline__ unsigned long long b_desc(unsigned stage, int step) {
    const unsigned b = stage + Cfg::A_BYTES;
    if constexpr (Cfg::B_N_MAJOR) return smem_desc(b + step * 16 * 128, 64 * 128, 1024);  // 16 k rows per step
    else return smem_desc(b + step * 32, 16, 1024);
}

}  // namespace hopper_rung1

// C (M x N, ldc) = alpha * A @ B + beta * C. a_map: A (M x K, row-major), box {BK, 128};
// b_map: B (K x N, row-major), box {64, BK}, for bf16/fp16; B^T (N x K, row-major), box {BK, BN},
// for tf32. 128-byte swizzle, zero out-of-bounds fill. Grid (ceil(N/BN), ceil(M/128)), 128 threads.
template <class Elem, int BN, int STAGES>
__global__ void __launch_bounds__(128) hopper_wgmma_tma(int M, int N, int K, float alpha,
                                                        const __grid_constant__ hopper::TensorMap a_map,
                                                        const __grid_constant__ hopper::TensorMap b_map, float beta,
                                                        float* __restrict__ C, int ldc) {
    using namespace hopper;
    using Cfg = hopper_rung1::Config<Elem, BN, STAGES>;
    unsigned char* smem = aligned_dynamic_smem();
    Barrier* full = reinterpret_cast<Barrier*>(smem + STAGES * Cfg::STAGE_BYTES);
    const int m0 = blockIdx.y * Cfg::BM, n0 = blockIdx.x * BN;
    const int k_tiles = ceil_div(K, Cfg::BK);
    const bool leader = threadIdx.x == 0;

    if (leader) {
        tma_prefetch_map(&a_map);
        tma_prefetch_map(&b_map);
        for (int s = 0; s < STAGES; ++s) barrier_init(&full[s], 1);
        fence_barrier_init();
    }
    __syncthreads();
    if (leader)
        for (int kt = 0; kt < STAGES - 1 && kt < k_tiles; ++kt)
            hopper_rung1::load_stage<Cfg>(smem + kt * Cfg::STAGE_BYTES, &full[kt], &a_map, &b_map, kt, m0, n0);

    float d[2][BN / 2];
    for (int kt = 0; kt < k_tiles; ++kt) {
        // Slot (kt-1) % STAGES was released by the __syncthreads that ended iteration kt-1.
        const int next = kt + STAGES - 1;
        if (leader && next < k_tiles)
            hopper_rung1::load_stage<Cfg>(smem + (next % STAGES) * Cfg::STAGE_BYTES, &full[next % STAGES], &a_map,
                                          &b_map, next, m0, n0);
        const int s = kt % STAGES;
        barrier_wait(&full[s], (kt / STAGES) & 1);
        const unsigned stage = smem_u32(smem + s * Cfg::STAGE_BYTES);
        wgmma_fence();
#pragma unroll
        for (int step = 0; step < KTile<Elem>::STEPS; ++step) {
            const int accumulate = kt > 0 || step > 0;
#pragma unroll
            for (int half = 0; half < 2; ++half)
                mma_ss<Elem, BN, Cfg::B_N_MAJOR ? 1 : 0>(d[half], hopper_rung1::a_desc<Cfg>(stage, half, step),
                                                         hopper_rung1::b_desc<Cfg>(stage, step), accumulate);
        }
        wgmma_commit();
        wgmma_wait<0>();
        fence_accumulators(d[0]);
        fence_accumulators(d[1]);
        __syncthreads();
    }

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int half = 0; half < 2; ++half)
        store_accumulators<BN>(d[half], M, n0, m0 + 64 * half + 16 * warp + lane / 4, n0 + 2 * (lane % 4),
                               Epilogue<OUT_FP32, EPI_NONE>{alpha, beta, nullptr, N}, C, ldc);
}
