// any_shape.cu -- Hopper rung 5: split-K on the persistent scheduler, for grids too small to
// fill the GPU; an epilogue for any C; the packing kernels for operands TMA cannot describe.
//
// Change against persistent and cluster_multicast (rungs 3, 4): a work unit is a (tile, k range)
// pair. With SPLITS > 1 a tile's k tiles are cut into SPLITS ranges that different CTAs compute
// at the same time; each stores its partial tile to a workspace. When all units run at once the
// splits of a tile meet at a barrier and each adds up one slice of the tile; otherwise the last
// to finish (an atomic counter per tile) adds them all. The sum order is fixed either way, so
// results are bitwise reproducible. Shapes that fill the GPU run with SPLITS = 1 (no workspace
// touched), except that a grid whose last wave is partial cuts that wave's tiles the same way
// (TAIL: hopper_pws::Schedule's `whole`, geometry.split_plan). CONSUMERS = 1 gives 64 x BN
// tiles and two CTAs per SM. EPILOGUE 1 sends tiles that float2 stores cannot serve well (C
// rows not 8-byte aligned, or the ragged last tile column) through shared memory, so that a
// warp writes 128 contiguous bytes of a row at a time.
// Operands TMA cannot describe (row stride not a multiple of 16 bytes, or a base address not
// 16-byte aligned) are first copied by hopper::pack_rows into aligned scratch (pack.cuh).
// EPILOGUE 3 (the registered entries): C leaves by TMA stores. Each consumer writes 64 x 32
// chunks of alpha * acc (+ beta * C, read in the fragment layout) into swizzled staging buffers
// (two per consumer, one with CONSUMERS = 1) and one thread hands each chunk to the copy engine,
// which writes whole 128-byte lines and clips at M and N; the warpgroup goes on to its next tile
// without waiting. The host passes C's map where TMA can write C (16-byte aligned base, ldc and
// N multiples of 4: a store clips a row at a 16-byte granule, so a smaller N would be written
// past), else c_tma = 0 and the stores of EPILOGUE 1 run (tunable STORE=0 forces them).
// PDL (the host launches with programmatic stream serialization; persistent_body.cuh waits for
// the grid ahead after the prologue): the next launch's set-up overlaps this one's tail.
// Tunables: BN (64, 128, 192, 256), STAGES, CONSUMERS, CM x CN clusters, SPLITS, CK (split-K in a
// cluster, hopper_any_shape_cluster below), TAIL, GROUP_M, PDL, PINGPONG (template argument PP),
// NSPLIT (NS: 64 x BN tiles whose columns the two consumers split, each 64 x BN/2; whole tiles),
// SWAPPED (wgmma's A = the B tile, 128 x 256, no split), DECODE (decode_body.cuh's swapped tiles
// of DECODE rows of A: few at small M, 128 or 160 with PINGPONG on full grids; entries
// hopper_decode and, in clusters, hopper_decode_cluster below), SWAP_MN (the decode tiles on the
// problem with M and N exchanged: small N), STORE;
// and, set by the problem, the output type, the epilogue and the layout (OUT, EPI, TRANS_A,
// TRANS_B: template arguments below).
// Constraints: SPLITS > 1 (and a tail split) needs
// the Session's workspace and zeroed counters (left zeroed at the end); the rules in
// gemm_driver/kernels/hopper/rungs.py refuse the rest, and choose_any_shape picks the
// configuration for a shape.
// Measurements, and what was tried and not kept: docs/hopper.md, docs/findings.md.
#include "persistent_body.cuh"
#include "pack.cuh"
#include "decode_body.cuh"

// As hopper_persistent, plus: splits (1 = none) and whole (hopper_pws::Schedule: the first `whole`
// super tiles of the grouped order unsplit, 0 = split every tile); workspace: (tiles - whole
// tiles) * splits * 64 * CONSUMERS * BN floats (unused when splits = 1);
// counters: two ints per tile (including a cluster's tiles past the edge), zero before the first
// launch, left zero by every launch. c_map: C's rows in the output type (box 32 columns x 64 rows;
// 128-byte swizzle for FP32, 64-byte for 16-bit), read only when c_tma != 0 and EPILOGUE == 3 (TMA
// stores; else any valid map will do). bias: N elements of the output type (read when EPI != 0).
// CONSUMERS = 1: 64 x BN tiles, 256 threads, two CTAs per SM.
// OUT (0 FP32, 1 BF16, 2 FP16): the type of C, D and bias; EPI (0 none, 1 bias, 2 bias + ReLU,
// 3 bias + GELU); TA = 1: A stored K x M (a_map over it, boxes {64 m, BK/CN k}); TB = 1: B stored
// N x K (b_map over it, box {BK, BN/CM}). PP = 1: ping-pong, the two consumers take turns on
// whole 128 x BN tiles (BN <= 128, no split-K; hopper_pws::Config). See hopper_epilogue.cuh and
// persistent_body.cuh.
template <class Elem, int BN, int STAGES, int CONSUMERS, int EPILOGUE, int OUT, int EPI, int TA, int TB, int PP = 0,
          int NS = 1>
__global__ void __launch_bounds__(128 * (CONSUMERS + 1), CONSUMERS == 1 ? 2 : 1)
    hopper_any_shape(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
                     const __grid_constant__ hopper::TensorMap b_map, float beta,
                     typename hopper::OutType<OUT>::T* __restrict__ C, int ldc, int group_m, int splits, int whole,
                     float* __restrict__ workspace, int* __restrict__ counters,
                     const __grid_constant__ hopper::TensorMap c_map, int c_tma,
                     const typename hopper::OutType<OUT>::T* __restrict__ bias) {
    hopper_pws::run<Elem, BN, STAGES, 1, 1, true, EPILOGUE, CONSUMERS, false, OUT, EPI, TA, TB, 1, PP != 0, NS>(
        M, N, K, alpha, &a_map, &b_map, beta, C, ldc, group_m, splits, whole, workspace, counters, &c_map, c_tma, bias);
}

// The same with CM x CN clusters (boxes sliced as for hopper_cluster_multicast), or with split-K
// in clusters of CK CTAs (CK = 2-4, tunable CK; then CM = CN = 1): the CTAs of a cluster compute
// one tile's k ranges and add them up through distributed shared memory (persistent_body.cuh's
// ClusterSplit), with no workspace; splits, whole, workspace and counters are then not read.
template <class Elem, int BN, int STAGES, int CONSUMERS, int CM, int CN, int CK, int EPILOGUE, int OUT, int EPI, int TA,
          int TB, int PP = 0, int NS = 1>
__global__ void __cluster_dims__(CM * CN * CK, 1, 1) __launch_bounds__(128 * (CONSUMERS + 1), CONSUMERS == 1 ? 2 : 1)
    hopper_any_shape_cluster(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
                             const __grid_constant__ hopper::TensorMap b_map, float beta,
                             typename hopper::OutType<OUT>::T* __restrict__ C, int ldc, int group_m, int splits,
                             int whole, float* __restrict__ workspace, int* __restrict__ counters,
                             const __grid_constant__ hopper::TensorMap c_map, int c_tma,
                             const typename hopper::OutType<OUT>::T* __restrict__ bias) {
    hopper_pws::run<Elem, BN, STAGES, CM, CN, CK == 1, EPILOGUE, CONSUMERS, false, OUT, EPI, TA, TB, CK, PP != 0, NS>(
        M, N, K, alpha, &a_map, &b_map, beta, C, ldc, group_m, splits, whole, workspace, counters, &c_map, c_tma, bias);
}

// The last rung (kernels/hopper/rungs.py, hopper_bf16 / hopper_fp16) launches these kernels, or,
// with SWAPPED=1, hopper_cluster_swapped (swapped wgmma roles, faster than any_shape with stores
// from registers, slower than with TMA stores): one module holds all of them.
#include "cluster_multicast.cu"

// Small M (decode_body.cuh): MT rows of A x 64 * CONSUMERS columns of B a tile, wgmma's roles
// swapped, the deepest ring that fits. The arguments are any_shape's; c_map and c_tma are not read
// (C is stored from registers). TB = 1: B stored N x K; TA = 1: A stored K x M (MT = 64 only). PP = 1
// (MT of 128 or 160, two consumers): ping-pong, each consumer whole MT x 128 tiles in turn, no split-K.
// MN = 1 (small N): the host passes the problem with M and N exchanged, N, M, K, and B's map as a_map,
// A's as b_map; TA and TB stay the problem's layout (decode_body.cuh's run exchanges them) and the
// kernel stores its product D^T into D's rows (store_exchanged).
template <class Elem, int MT, int CONSUMERS, int OUT, int EPI, int TB, int PP = 0, int TA = 0, int MN = 0>
__global__ void __launch_bounds__(128 * (CONSUMERS + 1), CONSUMERS == 1 ? 2 : 1)
    hopper_decode(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
                  const __grid_constant__ hopper::TensorMap b_map, float beta,
                  typename hopper::OutType<OUT>::T* __restrict__ C, int ldc, int group_m, int splits, int whole,
                  float* __restrict__ workspace, int* __restrict__ counters,
                  const __grid_constant__ hopper::TensorMap c_map, int c_tma,
                  const typename hopper::OutType<OUT>::T* __restrict__ bias) {
    hopper_small_m::run<Elem, MT, CONSUMERS, OUT, EPI, TB, 1, 1, PP != 0, TA, MN != 0>(
        M, N, K, alpha, &a_map, &b_map, beta, C, ldc, group_m, splits, whole, workspace, counters, bias);
}

// The same in clusters of CM tile rows sharing each B tile and CN tile columns sharing each A
// tile by multicast (b_map's box: 1/CM of the B tile; a_map's: 1/CN of the A tile).
template <class Elem, int MT, int CONSUMERS, int CM, int OUT, int EPI, int TB, int CN = 1, int PP = 0, int TA = 0,
          int MN = 0>
__global__ void __cluster_dims__(CM * CN, 1, 1) __launch_bounds__(128 * (CONSUMERS + 1), CONSUMERS == 1 ? 2 : 1)
    hopper_decode_cluster(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
                          const __grid_constant__ hopper::TensorMap b_map, float beta,
                          typename hopper::OutType<OUT>::T* __restrict__ C, int ldc, int group_m, int splits,
                          int whole, float* __restrict__ workspace, int* __restrict__ counters,
                          const __grid_constant__ hopper::TensorMap c_map, int c_tma,
                          const typename hopper::OutType<OUT>::T* __restrict__ bias) {
    hopper_small_m::run<Elem, MT, CONSUMERS, OUT, EPI, TB, CM, CN, PP != 0, TA, MN != 0>(
        M, N, K, alpha, &a_map, &b_map, beta, C, ldc, group_m, splits, whole, workspace, counters, bias);
}
