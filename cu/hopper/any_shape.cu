// any_shape.cu -- Hopper rung 5: split-K on the persistent scheduler, for grids too small to
// fill the GPU; an epilogue for any C; the packing kernels for operands TMA cannot describe.
//
// Change against persistent and cluster_multicast (rungs 3, 4): a work unit is a (tile, k range)
// pair. With SPLITS > 1 a tile's k tiles are cut into SPLITS ranges that different CTAs compute
// at the same time; each stores its partial tile to a workspace and the last to finish (an
// atomic counter per tile) adds the partials in split order and runs the epilogue. The sum order
// is fixed, so results are bitwise reproducible. Shapes that fill the GPU run with SPLITS = 1 (no
// workspace touched). EPILOGUE 1 sends tiles that float2 stores cannot serve well (C rows not
// 8-byte aligned, or the ragged last tile column) through shared memory, so that a warp writes
// 128 contiguous bytes of a row at a time (store_staged).
// Operands TMA cannot describe (row stride not a multiple of 16 bytes, or a base address not
// 16-byte aligned) are first copied by hopper::pack_rows into aligned scratch (pack.cuh).
// Measured (H100): filled in from the harness run.
#include "persistent_body.cuh"
#include "pack.cuh"

// As hopper_persistent, plus: splits (1 = none); workspace: tiles * splits * 128 * BN floats;
// counters: two ints per tile (including a cluster's tiles past the edge), zero before the first
// launch, left zero by every launch.
// CONSUMERS = 1: 64 x BN tiles, 256 threads, two CTAs per SM.
template <class Elem, int BN, int STAGES, int CONSUMERS, int EPILOGUE>
__global__ void __launch_bounds__(128 * (CONSUMERS + 1), CONSUMERS == 1 ? 2 : 1)
    hopper_any_shape(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
                     const __grid_constant__ hopper::TensorMap b_map, float beta, float* __restrict__ C, int ldc,
                     int group_m, int splits, float* __restrict__ workspace, int* __restrict__ counters) {
    hopper_pws::run<Elem, BN, STAGES, 1, 1, true, EPILOGUE, CONSUMERS>(M, N, K, alpha, &a_map, &b_map, beta, C, ldc,
                                                                       group_m, splits, workspace, counters);
}

// The same with CM x CN clusters (boxes sliced as for hopper_cluster_multicast).
template <class Elem, int BN, int STAGES, int CONSUMERS, int CM, int CN, int EPILOGUE>
__global__ void __cluster_dims__(CM * CN, 1, 1) __launch_bounds__(128 * (CONSUMERS + 1), CONSUMERS == 1 ? 2 : 1)
    hopper_any_shape_cluster(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
                             const __grid_constant__ hopper::TensorMap b_map, float beta, float* __restrict__ C,
                             int ldc, int group_m, int splits, float* __restrict__ workspace,
                             int* __restrict__ counters) {
    hopper_pws::run<Elem, BN, STAGES, CM, CN, true, EPILOGUE, CONSUMERS>(M, N, K, alpha, &a_map, &b_map, beta, C, ldc,
                                                                         group_m, splits, workspace, counters);
}
