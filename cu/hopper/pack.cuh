// pack.cuh -- copies an operand TMA cannot describe into aligned scratch that it can.
//
// TMA needs the base address 16-byte aligned and every row stride a multiple of 16 bytes. A
// row-major bf16 matrix with K = 4099 columns has a 8198-byte stride, so its tensor map cannot
// exist. The launcher then runs one of these kernels first (a memory-bound copy, ~2 x the
// operand's bytes of traffic) and builds the tensor map over the scratch copy instead.
//   pack_rows:      dst = src with leading dimension ld_dst (a multiple of 16 bytes; the host
//                   pads to 128, geometry.packed_ld);
//   pack_transpose: dst = src^T (cols x rows), for tf32, whose wgmma reads B only K-major
//                   (cu/common/pack_transpose.cuh, outside this namespace).
// Columns between `cols` and ld_dst are written as zeros, so the scratch holds no stale data
// (TMA never reads them: the tensor map's width is `cols`).
#pragma once

#include "common/pack_transpose.cuh"  // pack_transpose, shared with the kernels that take layouts by a copy

namespace hopper {

// Each thread writes 16 bytes of one dst row and reads its elements one at a time (the source
// may be misaligned by any number of elements); a warp reads 512 contiguous bytes.
template <class T>
__global__ void __launch_bounds__(256) pack_rows(const T* __restrict__ src, long long ld_src, int rows, int cols,
                                                 T* __restrict__ dst, long long ld_dst) {
    constexpr int V = 16 / sizeof(T);
    union Chunk {
        uint4 vec;
        T e[V];
    };
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v * V >= ld_dst) return;
    for (int row = blockIdx.y; row < rows; row += gridDim.y) {
        const T* in = src + row * ld_src;
        Chunk chunk;
#pragma unroll
        for (int i = 0; i < V; ++i) {
            const int col = v * V + i;
            chunk.e[i] = col < cols ? in[col] : T(0);
        }
        reinterpret_cast<uint4*>(dst + row * ld_dst)[v] = chunk.vec;
    }
}

}  // namespace hopper
