// fp8.cu -- hopper_fp8: FP8 A (M x K) and B (stored N x K), each e4m3 or e5m2, FP32 scales per tensor,
// per row or per 128-block (DeepSeek-V3), FP32 accumulation promoted every 128 of K, D in FP32 or BF16.
//
// Change against the BF16 any-shape kernel (any_shape.cu, hopper_bf16): the same persistent,
// warp-specialised schedule, split-K, clusters, TMA stores, packing and epilogue, on one-byte
// codes. A 128-code k tile fills the same 128-byte swizzle row as 64 BF16 elements, and a k32 FP8
// wgmma step reads the same 32 bytes as a k16 BF16 one, so the shared-memory layout, the TMA
// boxes (in bytes; the tensor maps are UINT8) and the descriptors are the BF16 kernel's K-major
// ones. What changes is the consumer (fp8_body.cuh): each k tile is summed by the tensor core into
// fresh registers and promoted into FP32 registers, applying block scales there; row scales and
// the per-tensor scales are applied to the finished tile. FP8 wgmma reads both operands K-major
// only, so the layout is nt (what fp8.py's problems are).
//
// Tunables: BN (64, 128; 256 without promotion), STAGES, CONSUMERS (2: 128-row tiles; 1: 64-row
// tiles, two CTAs an SM, for small M), CM x CN clusters, SPLITS, GROUP_M, PDL, STORE (0: C's own
// stores instead of TMA stores), PROMOTE (0: the unpromoted variant, tensor and row scaling only;
// 2: promotion overlapped with the next k tile's wgmma), RING (block scaling: A's scales loaded by
// TMA into a ring slot beside each stage; hopper_fp8 and hopper_fp8_cluster only);
// set by the problem: SCALING (0 tensor, 1 row, 2 block), OUT (0 FP32, 1 BF16), EPI (0 none,
// 1 bias, 2 bias + ReLU, 3 bias + GELU) and TYPES (bit 0: A is e5m2, bit 1: B is; else e4m3), the
// template arguments below.
// Constraints: the rules in gemm_driver/kernels/hopper/fp8.py (promotion: BN <= 128; block
// scales: every tile inside one 128-column block of B). Rows of A or B that are not 16-byte
// multiples (K % 16 != 0, padded or misaligned operands) are packed first by pack_rows. Split-K as
// any_shape.cu (workspace, counters left zero).
// Small M: hopper_fp8_decode (DECODE > 0), decode_body.cuh's tiles.
// Measurements (H100, e4m3, docs/fp8.md, results/h100-80gb-hbm3/bench-fp8.json): 1183 TFLOP/s per-tensor
// at 4096^3, 0.84-0.98x the best baseline of the same scaling on large shapes in tensor and row
// scaling, 0.71-0.78x in block scaling (0.82-0.90x with the scale ring:
// results/h100-80gb-hbm3/bench-fp8-block-tma-scale-ring-final.json); at small M 0.77-1.06x in
// tensor scaling, 1.18-2.33x in row scaling; the odd shape 4093x4091x4099 at 700-824 TFLOP/s,
// where the baselines refuse it.
#include "fp8_body.cuh"
#include "pack.cuh"

// As hopper_any_shape (any_shape.cu), EPILOGUE 3, A and B FP8 codes read through UINT8 maps
// (A: box {128, BM/CN}; B stored N x K: box {128, BN/CM}), plus the scales: scale_a / scale_b with
// the row strides of their matrices (fp8.device_scales' layouts), and for RING the FP32 map of A's
// block scales (box {BM, 1}: one k tile's scales of the tile's rows) with sa_tma = 1 where it is
// made (0: the kernel reads them in place).
template <int BN, int STAGES, int CONSUMERS, int SCALING, int PROMOTE, int OUT, int EPI, int TYPES, int RING>
__global__ void __launch_bounds__(128 * (CONSUMERS + 1), CONSUMERS == 1 ? 2 : 1)
    hopper_fp8(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
               const __grid_constant__ hopper::TensorMap b_map, float beta,
               typename hopper::OutType<OUT>::T* __restrict__ C, int ldc, int group_m, int splits, int whole,
               float* __restrict__ workspace, int* __restrict__ counters,
               const __grid_constant__ hopper::TensorMap c_map, int c_tma,
               const typename hopper::OutType<OUT>::T* __restrict__ bias, const float* __restrict__ scale_a,
               int scale_a_ld, const float* __restrict__ scale_b, int scale_b_ld,
               const __grid_constant__ hopper::TensorMap sa_map, int sa_tma) {
    fp8_gemm::run<BN, STAGES, 1, 1, CONSUMERS, SCALING, PROMOTE, OUT, EPI, TYPES, RING>(
        M, N, K, alpha, &a_map, &b_map, beta, C, ldc, group_m, splits, whole, workspace, counters, &c_map, c_tma, bias,
        fp8_gemm::Scales{scale_a, scale_a_ld, scale_b, scale_b_ld}, &sa_map, sa_tma);
}

// The same with CM x CN clusters sharing A and B tiles by multicast (persistent_body.cuh).
template <int BN, int STAGES, int CONSUMERS, int CM, int CN, int SCALING, int PROMOTE, int OUT, int EPI, int TYPES,
          int RING>
__global__ void __cluster_dims__(CM * CN, 1, 1) __launch_bounds__(128 * (CONSUMERS + 1), CONSUMERS == 1 ? 2 : 1)
    hopper_fp8_cluster(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
                       const __grid_constant__ hopper::TensorMap b_map, float beta,
                       typename hopper::OutType<OUT>::T* __restrict__ C, int ldc, int group_m, int splits, int whole,
                       float* __restrict__ workspace, int* __restrict__ counters,
                       const __grid_constant__ hopper::TensorMap c_map, int c_tma,
                       const typename hopper::OutType<OUT>::T* __restrict__ bias, const float* __restrict__ scale_a,
                       int scale_a_ld, const float* __restrict__ scale_b, int scale_b_ld,
                       const __grid_constant__ hopper::TensorMap sa_map, int sa_tma) {
    fp8_gemm::run<BN, STAGES, CM, CN, CONSUMERS, SCALING, PROMOTE, OUT, EPI, TYPES, RING>(
        M, N, K, alpha, &a_map, &b_map, beta, C, ldc, group_m, splits, whole, workspace, counters, &c_map, c_tma, bias,
        fp8_gemm::Scales{scale_a, scale_a_ld, scale_b, scale_b_ld}, &sa_map, sa_tma);
}

// Small M (fp8_body.cuh's run_decode): MT rows of A x 64 * CONSUMERS columns of B a tile, wgmma's
// roles swapped, the deepest ring that fits, every scaling mode. The arguments are
// hopper_fp8's; c_map and c_tma are not read (C is stored from registers).
template <int MT, int CONSUMERS, int SCALING, int PROMOTE, int OUT, int EPI, int TYPES>
__global__ void __launch_bounds__(128 * (CONSUMERS + 1), CONSUMERS == 1 ? 2 : 1)
    hopper_fp8_decode(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
                      const __grid_constant__ hopper::TensorMap b_map, float beta,
                      typename hopper::OutType<OUT>::T* __restrict__ C, int ldc, int group_m, int splits, int whole,
                      float* __restrict__ workspace, int* __restrict__ counters,
                      const __grid_constant__ hopper::TensorMap c_map, int c_tma,
                      const typename hopper::OutType<OUT>::T* __restrict__ bias, const float* __restrict__ scale_a,
                      int scale_a_ld, const float* __restrict__ scale_b, int scale_b_ld,
                      const __grid_constant__ hopper::TensorMap, int) {
    fp8_gemm::run_decode<MT, CONSUMERS, SCALING, PROMOTE, OUT, EPI, TYPES, 1>(
        M, N, K, alpha, &a_map, &b_map, beta, C, ldc, group_m, splits, whole, workspace, counters, bias,
        fp8_gemm::Scales{scale_a, scale_a_ld, scale_b, scale_b_ld});
}

// The same in clusters of CM = 2 tile rows sharing each B tile by multicast.
template <int MT, int CONSUMERS, int CM, int SCALING, int PROMOTE, int OUT, int EPI, int TYPES>
__global__ void __cluster_dims__(CM, 1, 1) __launch_bounds__(128 * (CONSUMERS + 1), CONSUMERS == 1 ? 2 : 1)
    hopper_fp8_decode_cluster(int M, int N, int K, float alpha, const __grid_constant__ hopper::TensorMap a_map,
                              const __grid_constant__ hopper::TensorMap b_map, float beta,
                              typename hopper::OutType<OUT>::T* __restrict__ C, int ldc, int group_m, int splits,
                              int whole, float* __restrict__ workspace, int* __restrict__ counters,
                              const __grid_constant__ hopper::TensorMap c_map, int c_tma,
                              const typename hopper::OutType<OUT>::T* __restrict__ bias,
                              const float* __restrict__ scale_a, int scale_a_ld, const float* __restrict__ scale_b,
                              int scale_b_ld, const __grid_constant__ hopper::TensorMap, int) {
    fp8_gemm::run_decode<MT, CONSUMERS, SCALING, PROMOTE, OUT, EPI, TYPES, CM>(
        M, N, K, alpha, &a_map, &b_map, beta, C, ldc, group_m, splits, whole, workspace, counters, bias,
        fp8_gemm::Scales{scale_a, scale_a_ld, scale_b, scale_b_ld});
}
