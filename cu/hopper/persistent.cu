// persistent.cu -- Hopper rung 3: persistent CTAs, grouped tile order, epilogue under the loads.
//
// Change against warp_specialized (rung 2): the grid is one CTA per SM (read from the device),
// and each CTA loops over tiles t = blockIdx.x, + gridDim.x, ... in a grouped order: GROUP_M tile
// rows are finished column by column before the next rows start, so the ~132 tiles in flight
// read a compact block of A rows and B columns that stays in L2. The mbarrier ring and its
// phases carry over from tile to tile: while the consumers run the epilogue of one tile
// (alpha/beta, C read only when beta != 0, float2 stores from registers), the producer is
// already loading the next tile's first STAGES k tiles. No launch or prologue per tile.
// The kernel body is shared with rungs 4 and 5 (persistent_body.cuh).
// Tunables: BN (128, 256), STAGES, GROUP_M. Measurements (clock- and power-bound at the 700 W
// cap, not stalled): docs/hopper.md.
#include "persistent_body.cuh"
#include "pack.cuh"

// Maps and boxes as hopper_warp_specialized. Grid: min(#SMs, tiles) CTAs of 384 threads; dynamic
// smem Config::SMEM_BYTES. group_m: tile rows per group of the raster (>= 1).
template <class Elem, int BN, int STAGES>
__global__ void __launch_bounds__(384, 1)
    hopper_persistent(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
                      const __grid_constant__ hopper::TensorMap b_map, float beta, float* __restrict__ C, int ldc,
                      int group_m) {
    hopper_pws::run<Elem, BN, STAGES, 1, 1, false, 0>(M, N, K, alpha, &a_map, &b_map, beta, C, ldc, group_m, 1,
                                                      0, nullptr, nullptr);
}
