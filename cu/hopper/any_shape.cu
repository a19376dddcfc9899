// any_shape.cu -- Hopper rung 5: split-K on the persistent scheduler, for grids too small to
// fill the GPU; plus the packing kernels for leading dimensions TMA cannot describe.
//
// Change against persistent (rung 3): a work unit is a (tile, k range) pair. With SPLITS > 1 a
// tile's k tiles are cut into SPLITS ranges that different CTAs compute at the same time; each
// stores its partial tile to a workspace and the last to finish (an atomic counter per tile)
// adds the partials in split order and runs the epilogue. The sum order is fixed, so results are
// bitwise reproducible. 1024^3 with 128 x 128 tiles is 64 tiles for 132 SMs: 2 splits make 128
// units. Shapes that fill the GPU run with SPLITS = 1 (no workspace touched).
// Operands TMA cannot describe (row stride not a multiple of 16 bytes, or a base address not
// 16-byte aligned) are first copied by hopper::pack_rows into aligned scratch (pack.cuh).
// Measured (H100): filled in from the harness run.
#include "persistent_body.cuh"
#include "pack.cuh"

// As hopper_persistent, plus: splits (1 = none); workspace: tiles * splits * 128 * BN floats;
// counters: one int per tile (super_m * CLUSTER * tiles_n), zero before the first launch, left
// zero by every launch.
template <class Elem, int BN, int STAGES>
__global__ void __launch_bounds__(384, 1)
    hopper_any_shape(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
                     const __grid_constant__ hopper::TensorMap b_map, float beta, float* __restrict__ C, int ldc,
                     int group_m, int splits, float* __restrict__ workspace, int* __restrict__ counters) {
    hopper_pws::run<Elem, BN, STAGES, 1, true>(M, N, K, alpha, &a_map, &b_map, beta, C, ldc, group_m, splits,
                                                      workspace, counters);
}
