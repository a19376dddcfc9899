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
// Measured before TMA stores (H100, bf16, FP32 C, against torch.mm with FP32 output = cuBLAS, same runs):
//  4093x4091x4099 (A and B packed, 51 us of the total): 416 TFLOP/s with float2/scalar stores,
//   494-497 with the staged epilogue (ldc = 4091 is odd): 3.2x cuBLAS (154), above the 460 target.
//  1024x1024x16384: 128 x 256 tiles, 4 splits: 547-552; 128 x 128, 2 x 1 cluster, 2 splits: 569
//   (0.97x of 587); 1024^3: 64-wide tiles, no split: 291-304 (0.87x of 340; a K = 64 probe takes
//   4.2 us against cuBLAS's 3.0-3.5: our fixed cost per launch, not the k loop, is the gap);
//   split-K only added reduction time there (140-177). 16384x128x4096: 128 x 128 tiles: 321
//   (1.02x of 314).
// EPILOGUE 3 (the registered entries): C leaves by TMA stores. Each consumer writes 64 x 32
// chunks of alpha * acc (+ beta * C, read in the fragment layout) into swizzled staging buffers
// (two per consumer, one with CONSUMERS = 1) and one thread hands each chunk to the copy engine,
// which writes whole 128-byte lines and clips at M and N; the warpgroup goes on to its next tile
// without waiting. The host passes C's map where TMA can write C (16-byte aligned base, ldc and
// N multiples of 4: a store clips a row at a 16-byte granule, so with N = 7 it wrote column 7;
// seen on the H200), else c_tma = 0 and the stores of EPILOGUE 1 run (tunable STORE=0 forces them).
// Why: with C's stores removed from the kernel (a probe, wrong answers) the H100 ran 1024^3 in
// 6.17 us against 7.26, 2048^3 in 22.6 against 27.0, 4096^3 in 174 against 187 (graph replays):
// the stores are most of the fixed cost cuBLAS does not pay. TMA stores recovered little of it.
// Measured (H200, one run each, TMA stores against STORE=0, float2 stores from registers):
//  graph replays (short, clock near 1980 MHz): 1024^3 (64 x 128, one buffer) 7.46 against 7.10
//   us, so choose() keeps registers there; 2048^3 27.9 against 29.4 (swapped entry 27.2); 4096^3
//   in 2 x 1 clusters 218 against 215 (swapped 213); 1024x1024x16384 (split-K) 52.2 both.
//  sustained (2.5 s a config, two interleaved rounds, the 700 W cap holding ~1440-1500 MHz):
//   4096^3 620-621 TFLOP/s against 609-612 (swapped 613-615; cuBLASLt 633); 8192^3 652 against
//   648-649 (swapped 646-647; cuBLASLt 661-662). choose() takes TMA stores for full grids.
// An earlier fallback that always staged C through shared memory (store_staged) lost 5-10% to
// both; the fallback is EPILOGUE 1's.
// PDL (the host launches with programmatic stream serialization; persistent_body.cuh waits for
// the grid ahead after the prologue): the next launch's set-up overlaps this one's tail. H100,
// back-to-back calls on a held stream: 1024^3 7.23 us against 8.27 (cuBLAS 7.00-7.38), 2048^3
// 27.3 against 28.6, 16384x128x4096 53.0 against 55.2; with split-K it lost (58.2 against 56.5
// at 1024x1024x16384), so choose() leaves it off there.
// Later (H100, autotune-hopper-small-grids*.txt): on small grids 128 x 64 tiles (BN = 64, two
// consumers of m64n64, 8 stages) ran 1024^3 at 306-311 TFLOP/s against 292-296 for the 64 x 128
// tiles of one consumer, two CTAs an SM (cuBLAS 297-318). Tried and dropped: one consumer with
// the SM to itself (behind both), and split-K slices inside a cluster adding partials through
// DSMEM (4-CTA clusters: only 30 resident, a second wave; 2-CTA: 474 against 575 TFLOP/s at
// 1024x1024x16384 for the workspace split). See reduce_splits for the lighter hand-over.
#include "persistent_body.cuh"
#include "pack.cuh"

// As hopper_persistent, plus: splits (1 = none); workspace: tiles * splits * 64 * CONSUMERS * BN
// floats (unused when splits = 1);
// counters: two ints per tile (including a cluster's tiles past the edge), zero before the first
// launch, left zero by every launch. c_map: C as FP32 rows (box 32 columns x 64 rows, 128-byte
// swizzle), read only when c_tma != 0 and EPILOGUE == 3 (TMA stores; else any valid map will do).
// CONSUMERS = 1: 64 x BN tiles, 256 threads, two CTAs per SM.
template <class Elem, int BN, int STAGES, int CONSUMERS, int EPILOGUE>
__global__ void __launch_bounds__(128 * (CONSUMERS + 1), CONSUMERS == 1 ? 2 : 1)
    hopper_any_shape(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
                     const __grid_constant__ hopper::TensorMap b_map, float beta, float* __restrict__ C, int ldc,
                     int group_m, int splits, float* __restrict__ workspace, int* __restrict__ counters,
                     const __grid_constant__ hopper::TensorMap c_map, int c_tma) {
    hopper_pws::run<Elem, BN, STAGES, 1, 1, true, EPILOGUE, CONSUMERS>(M, N, K, alpha, &a_map, &b_map, beta, C, ldc,
                                                                       group_m, splits, workspace, counters, &c_map,
                                                                       c_tma);
}

// The same with CM x CN clusters (boxes sliced as for hopper_cluster_multicast).
template <class Elem, int BN, int STAGES, int CONSUMERS, int CM, int CN, int EPILOGUE>
__global__ void __cluster_dims__(CM * CN, 1, 1) __launch_bounds__(128 * (CONSUMERS + 1), CONSUMERS == 1 ? 2 : 1)
    hopper_any_shape_cluster(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
                             const __grid_constant__ hopper::TensorMap b_map, float beta, float* __restrict__ C,
                             int ldc, int group_m, int splits, float* __restrict__ workspace,
                             int* __restrict__ counters, const __grid_constant__ hopper::TensorMap c_map, int c_tma) {
    hopper_pws::run<Elem, BN, STAGES, CM, CN, true, EPILOGUE, CONSUMERS>(M, N, K, alpha, &a_map, &b_map, beta, C, ldc,
                                                                         group_m, splits, workspace, counters, &c_map,
                                                                         c_tma);
}

// The last rung (kernels/hopper/rungs.py, hopper_bf16 / hopper_fp16) launches these kernels, or,
// with SWAPPED=1, hopper_cluster_swapped (swapped wgmma roles, faster than any_shape with stores
// from registers, slower than with TMA stores): one module holds all of them.
#include "cluster_multicast.cu"
