// cluster_multicast.cu -- Hopper rung 4: clusters of two CTAs share each B tile by TMA multicast.
//
// Change against persistent (rung 3): CTAs run in clusters of 2 along M (__cluster_dims__). The
// two CTAs of a cluster take vertically adjacent tiles of the same tile column, so they need the
// same B tile: each loads half of it and multicasts that half into both CTAs' shared memory
// (cp.async.bulk.tensor ... .multicast::cluster), halving B's L2->SM traffic. A stage slot is
// refilled only when the consumers of both CTAs released it, so each consumer warpgroup arrives
// on the empty barrier of both CTAs (mapa + mbarrier.arrive.shared::cluster): empty barriers count
// 2 consumers x 2 CTAs. Grid: an even number of CTAs, at most #SMs (or fewer if the GPCs cannot
// hold that many pairs). If the tile rows are odd, the last cluster's second CTA computes an
// all-zero tile and stores nothing.
// Kept only if measured to pay: see the numbers below.
// Measured (H100): filled in from the harness run.
#include "persistent_body.cuh"
#include "pack.cuh"

// As hopper_persistent; for tf32 the B^T map's box is {BK, BN/2} (each CTA loads half the rows).
template <class Elem, int BN, int STAGES>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(384, 1)
    hopper_cluster_multicast(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
                             const __grid_constant__ hopper::TensorMap b_map, float beta, float* __restrict__ C,
                             int ldc, int group_m) {
    hopper_pws::run<Elem, BN, STAGES, 2, false>(M, N, K, alpha, &a_map, &b_map, beta, C, ldc, group_m, 1,
                                                       nullptr, nullptr);
}
