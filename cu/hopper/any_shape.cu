// any_shape.cu -- Hopper rung 5: split-K on the persistent scheduler, for grids too small to
// fill the GPU; an epilogue for any C; the packing kernels for operands TMA cannot describe.
//
// Change against persistent and cluster_multicast (rungs 3, 4): a work unit is a (tile, k range)
// pair. With SPLITS > 1 a tile's k tiles are cut into SPLITS ranges that different CTAs compute
// at the same time; each stores its partial tile to a workspace. When all units run at once the
// splits of a tile meet at a barrier and each adds up one slice of the tile; otherwise the last
// to finish (an atomic counter per tile) adds them all. The sum order is fixed either way, so
// results are bitwise reproducible. Shapes that fill the GPU run with SPLITS = 1 (no workspace
// touched). CONSUMERS = 1 gives 64 x BN tiles and two CTAs per SM. EPILOGUE 1 sends tiles that
// float2 stores cannot serve well (C rows not 8-byte aligned, or the ragged last tile column)
// through shared memory, so that a warp writes 128 contiguous bytes of a row at a time.
// Operands TMA cannot describe (row stride not a multiple of 16 bytes, or a base address not
// 16-byte aligned) are first copied by hopper::pack_rows into aligned scratch (pack.cuh).
// Measured (H100, bf16, FP32 C, against torch.mm with FP32 output = cuBLAS, same runs):
//  4093x4091x4099 (A and B packed, 51 us of the total): 416 TFLOP/s with float2/scalar stores,
//   494-497 with the staged epilogue (ldc = 4091 is odd): 3.2x cuBLAS (154), above the 460 target.
//  1024x1024x16384: 128 x 256 tiles, 4 splits: 547-552; 128 x 128, 2 x 1 cluster, 2 splits: 569
//   (0.97x of 587); 1024^3: 64-wide tiles, no split: 291-304 (0.87x of 340; a K = 64 probe takes
//   4.2 us against cuBLAS's 3.0-3.5: our fixed cost per launch, not the k loop, is the gap);
//   split-K only added reduction time there (140-177). 16384x128x4096: 128 x 128 tiles: 321
//   (1.02x of 314).
#include "persistent_body.cuh"
#include "pack.cuh"

// As hopper_persistent, plus: splits (1 = none); workspace: tiles * splits * 64 * CONSUMERS * BN
// floats (unused when splits = 1);
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

// The last rung (kernels/hopper/rungs.py, hopper_bf16 / hopper_fp16) launches these kernels, or,
// on large grids, hopper_cluster_swapped (swapped wgmma roles, measured faster there): one module
// holds all of them.
#include "cluster_multicast.cu"
