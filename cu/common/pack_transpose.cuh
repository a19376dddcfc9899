// common/pack_transpose.cuh -- writes a matrix as its row-major transpose, for kernels that read
// row-major operands only.
//
// Used before a GEMM whose loads assume row-major A (M x K) and B (K x N): an operand stored
// transposed (A as K x M, B as N x K) is copied transposed into scratch first
// (gemm_driver/kernels/transposing.py), and the tf32 wgmma rungs write B^T for their K-major B
// (cu/hopper/pack.cuh). T is a storage type of the element's size (float, unsigned short): the
// copy moves bits and never converts. Columns of dst between `rows` and ld_dst are written as
// zeros, so the scratch holds no stale data.
#pragma once

// 32 x 32 tiles through shared memory (one column of padding: no bank conflicts), 32 x 8
// threads; dst is cols x rows with leading dimension ld_dst.
template <class T>
__global__ void __launch_bounds__(256) pack_transpose(const T* __restrict__ src, long long ld_src, int rows,
                                                      int cols, T* __restrict__ dst, long long ld_dst) {
    __shared__ T tile[32][33];
    const int col0 = blockIdx.x * 32, row0 = blockIdx.y * 32;
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int r = row0 + ty + 8 * i, c = col0 + tx;
        tile[ty + 8 * i][tx] = (r < rows && c < cols) ? src[r * ld_src + c] : T(0);
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int out_row = col0 + ty + 8 * i, out_col = row0 + tx;  // out_row indexes src columns
        if (out_row < cols && out_col < ld_dst) dst[out_row * ld_dst + out_col] = out_col < rows ? tile[tx][ty + 8 * i] : T(0);
    }
}
