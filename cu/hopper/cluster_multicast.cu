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
// Kept only where measured to pay (H100, bf16, FP32 C, 128 x 256 tiles, 4 stages, interleaved
// rounds): 2 x 1 pays a little at 4096^3 (642-664 against 643-650 without clusters) and is even at
// 8192^3 (658 against 659); 1 x 2 (584-594) and 2 x 2 (559) lose, as do all clusters at 2048^3
// (541 against 564) and on small grids, where the cluster launch and barrier cost more than the
// traffic saved. The kernels are clock/power-bound (see persistent.cu), so halving B's L2 reads
// buys little.
// A first version arrived with .release.cluster semantics: the compiler put MEMBAR.ALL.GPU before
// each remote arrive, and the 2 x 1 cluster ran at 341 TFLOP/s.
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
                                                        nullptr, nullptr);
}
