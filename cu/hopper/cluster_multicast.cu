// cluster_multicast.cu -- Hopper rung 4: clusters of CTAs share A and B tiles by TMA multicast.
//
// Change against persistent (rung 3): CTAs run in clusters of CM x CN (__cluster_dims__) that take
// a block of CM tile rows x CN tile columns. The CM CTAs of a cluster column need the same B tile:
// each loads 1/CM of it (whole 8-row swizzle atoms) and multicasts that slice into all of them
// (cp.async.bulk.tensor ... .multicast::cluster); likewise A along cluster rows. L2 -> SM traffic
// per CTA falls from A + B to A/CN + B/CM. A stage slot is refilled only when the consumers of
// every CTA of the cluster released it, so each consumer warpgroup arrives on the empty barrier
// of every CTA (mapa + mbarrier.arrive.shared::cluster). Grid: a multiple of CM*CN CTAs, at most
// what the GPCs can hold (cuOccupancyMaxActiveClusters: 66 pairs on the H100). Tiles past the
// matrix edge in a cluster compute on zero fill and store nothing.
// Tunables: BN (128, 256), STAGES, CM (1, 2, 4), CN (1, 2), GROUP_M. The remote arrives carry
// no .release.cluster qualifier on purpose: with it the compiler put MEMBAR.ALL.GPU before each
// of them. Measurements (clusters pay only on large grids): docs/hopper.md.
#include "persistent_body.cuh"
#include "pack.cuh"

// As hopper_persistent, with the maps' boxes sliced: A {BK, 128/CN}; B {64, BK/CM} (bf16/fp16)
// or, for tf32, B^T {BK, BN/CM}.
template <class Elem, int BN, int STAGES, int CM, int CN>
__global__ void __cluster_dims__(CM * CN, 1, 1) __launch_bounds__(384, 1)
    hopper_cluster_multicast(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
                             const __grid_constant__ hopper::TensorMap b_map, float beta, float* __restrict__ C,
                             int ldc, int group_m) {
    hopper_pws::run<Elem, BN, STAGES, CM, CN, false, 0>(M, N, K, alpha, &a_map, &b_map, beta, C, ldc, group_m, 1,
                                                        0, nullptr, nullptr);
}

// The same with swapped wgmma roles (mma_stage_swapped in persistent_body.cuh): wgmma's A operand
// is a 64-wide block of B (M-major, imm-trans-a) and its B operand the K-major A tile, as cuBLAS's
// kernel for this tile computes it (ncu at 2048^3: cuBLAS's nvjet_sm90_tss_256x128_64x4_1x2 coopA,
// the same tile and stage count, took ~10% fewer SM cycles than hopper_persistent). 128 x 256
// tiles only; the epilogue stores single floats (a thread holds C[m][n] and C[m][n + 8]). Launch like
// hopper_cluster_multicast (same maps and boxes). CM = CN = 1 is allowed (a cluster of one).
// Measured (H100, interleaved rounds, torch.mm FP32 output = cuBLAS): 2048^3 bf16 612 TFLOP/s with
// CM = CN = 1 against 566 unswapped (+8%; cuBLAS 619); 4096^3 643 with 2 x 1 against 620 (+4%;
// cuBLAS 661); fp16 4096^3 627 (cuBLAS 608); 8192^3 even (650 against 658, within the noise);
// without a cluster at 4096^3 and 8192^3 it lost (579, 565).
template <class Elem, int STAGES, int CM, int CN>
__global__ void __cluster_dims__(CM * CN, 1, 1) __launch_bounds__(384, 1)
    hopper_cluster_swapped(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
                           const __grid_constant__ hopper::TensorMap b_map, float beta, float* __restrict__ C, int ldc,
                           int group_m) {
    hopper_pws::run<Elem, 256, STAGES, CM, CN, false, 0, 2, true>(M, N, K, alpha, &a_map, &b_map, beta, C, ldc, group_m,
                                                                  1, 0, nullptr, nullptr);
}
