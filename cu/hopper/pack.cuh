// pack.cuh -- copies operands TMA cannot describe into aligned scratch that it can.
//
// TMA needs the base address 16-byte aligned and every row stride a multiple of 16 bytes. A
// row-major bf16 matrix with K = 4099 columns has a 8198-byte stride, so its tensor map cannot
// exist. The launcher then runs one of these kernels first (a memory-bound copy, ~2 x the
// operand's bytes of traffic) and builds the tensor map over the scratch copy instead.
//   pack_rows:      dst = src with leading dimension ld_dst (a multiple of 16 bytes; the host
//                   pads to 128, geometry.packed_ld), for one operand or two in one launch
//                   (A and B of a small odd shape: one launch fewer before the GEMM);
//   pack_transpose: dst = src^T (cols x rows), for tf32, whose wgmma reads B only K-major
//                   (cu/common/pack_transpose.cuh, outside this namespace).
// Columns between `cols` and ld_dst are written as zeros, so the scratch holds no stale data
// (TMA never reads them: the tensor map's width is `cols`).
#pragma once

#include "common/pack_transpose.cuh"  // pack_transpose, shared with the kernels that take layouts by a copy
#include "hopper_common.cuh"          // wait_for_previous_grid

namespace hopper {

// One operand's copy: thread `index` of the operand's blocks writes the index-th 16-byte chunk
// of the packed rows, counting along each row and then down (a grid of one thread a chunk, as
// many blocks as the work needs: many short rows take as few blocks as a few long ones).
// It reads the chunk's elements one at a time (the source may be misaligned by any number of
// elements); a warp reads 512 contiguous bytes of a row.
template <class T>
__device__ __forceinline__ void pack_one(const T* __restrict__ src, long long ld_src, int rows, int cols,
                                         T* __restrict__ dst, long long ld_dst, long long index) {
    constexpr int V = 16 / sizeof(T);
    union Chunk {
        uint4 vec;
        T e[V];
    };
    const long long per_row = ld_dst / V;  // ld_dst is a whole number of chunks (geometry.packed_ld)
    const long long row = index / per_row, chunk = index - row * per_row;
    if (row >= rows) return;
    const T* in = src + row * ld_src;
    Chunk values;
#pragma unroll
    for (int e = 0; e < V; ++e) {
        const long long col = chunk * V + e;
        values.e[e] = col < cols ? in[col] : T(0);
    }
    reinterpret_cast<uint4*>(dst + row * ld_dst)[chunk] = values.vec;
}

// The first `blocks0` blocks copy the first operand, the rest the second (a launch of one operand
// has gridDim.x = blocks0 and leaves the second's arguments 0).
//
// With the GEMM's PDL it is launched with PDL too (recipe.packing_passes): it may start while the
// grid before it in the stream (the last GEMM, whose packed copies it overwrites) still runs,
// and waits for that grid at entry; its launch overlaps that grid's tail (H100, five of six
// small odd shapes 0.8-1.05 us faster, results/h100-80gb-hbm3/probe-odd-small-one-wave-pdl.txt
// against probe-odd-small-one-wave.txt). It sets no trigger (griddepcontrol.launch_dependents):
// the GEMM after it starts when this grid ends. Triggered at entry, the GEMM's CTAs took SMs
// while the copy still ran and four shapes ran 1.09-1.40x slower; triggered after each block's
// share, no faster than none (results/h100-80gb-hbm3/probe-odd-small-trigger-*.txt).
template <class T>
__global__ void __launch_bounds__(256) pack_rows(const T* __restrict__ src0, long long ld_src0, int rows0, int cols0,
                                                 T* __restrict__ dst0, long long ld_dst0,
                                                 const T* __restrict__ src1, long long ld_src1, int rows1, int cols1,
                                                 T* __restrict__ dst1, long long ld_dst1, int blocks0) {
    wait_for_previous_grid();  // a no-op unless launched with PDL
    const int block = blockIdx.x;
    if (block < blocks0)
        pack_one(src0, ld_src0, rows0, cols0, dst0, ld_dst0, (long long)block * blockDim.x + threadIdx.x);
    else
        pack_one(src1, ld_src1, rows1, cols1, dst1, ld_dst1, (long long)(block - blocks0) * blockDim.x + threadIdx.x);
}

}  // namespace hopper
