// hopper_epilogue.cuh -- C = alpha * acc + beta * C from a warpgroup's wgmma accumulators.
//
// A thread holds, for each 8-column block j of its warpgroup's 64 x BN tile, two adjacent
// columns in two rows 8 apart: d[4j + 2h + e] is row row0 + 8h, column col0 + 8j + e, with
// row0 = tile row + 16*warp + lane/4 and col0 = tile column + 2*(lane%4). Stores go straight
// from registers as float2 (4 lanes write one 32-byte sector per row, so no sector is written
// twice). C is read only when beta != 0: with beta == 0 it may hold NaN.
#pragma once
#include "hopper_common.cuh"

namespace hopper {

// Whether C's rows can take float2 stores: the base 8-byte aligned and ldc even.
__device__ __forceinline__ bool c_pairs_aligned(const float* C, int ldc) {
    return (ldc & 1) == 0 && (reinterpret_cast<unsigned long long>(C) & 7ull) == 0;
}

template <int BN>
__device__ __forceinline__ void store_accumulators(const float (&d)[BN / 2], int M, int N, int tile_col, int row0,
                                                   int col0, float alpha, float beta, float* __restrict__ C,
                                                   int ldc) {
    // The whole tile's columns are inside C and pairs are aligned: no per-element test.
    const bool fast = c_pairs_aligned(C, ldc) && tile_col + BN <= N;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int row = row0 + 8 * h;
        if (row >= M) continue;
        float* out = C + static_cast<long long>(row) * ldc + col0;
        if (fast) {
            if (beta == 0.0f) {
#pragma unroll
                for (int j = 0; j < BN / 8; ++j)
                    *reinterpret_cast<float2*>(out + 8 * j) =
                        make_float2(alpha * d[4 * j + 2 * h], alpha * d[4 * j + 2 * h + 1]);
            } else {
#pragma unroll
                for (int j = 0; j < BN / 8; ++j) {
                    const float2 old = *reinterpret_cast<const float2*>(out + 8 * j);
                    *reinterpret_cast<float2*>(out + 8 * j) =
                        make_float2(fmaf(beta, old.x, alpha * d[4 * j + 2 * h]),
                                    fmaf(beta, old.y, alpha * d[4 * j + 2 * h + 1]));
                }
            }
        } else {
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    if (col0 + 8 * j + e < N) {
                        float v = alpha * d[4 * j + 2 * h + e];
                        if (beta != 0.0f) v = fmaf(beta, out[8 * j + e], v);
                        out[8 * j + e] = v;
                    }
                }
            }
        }
    }
}

}  // namespace hopper
