// hopper_epilogue.cuh -- C = alpha * acc + beta * C from a warpgroup's wgmma accumulators.
//
// A thread holds, for each 8-column block j of its warpgroup's 64 x BN tile, two adjacent
// columns in two rows 8 apart: d[4j + 2h + e] is row row0 + 8h, column col0 + 8j + e, with
// row0 = tile row + 16*warp + lane/4 and col0 = tile column + 2*(lane%4). Stores go straight
// from registers as float2 (4 lanes write one 32-byte sector per row, so no sector is written
// twice). C is read only when beta != 0: with beta == 0 it may hold NaN.
// store_staged takes the long way for C that float2 stores cannot serve (rows not 8-byte
// aligned, e.g. ldc odd, or the ragged last tile column): the fragment goes to shared memory
// 32 columns at a time, and the warpgroup writes it back row by row, a warp covering 128
// contiguous bytes of a row per instruction. store_tma (any_shape's EPILOGUE 3) hands the staged
// chunks to the TMA engine instead and goes on without waiting for them.
#pragma once
#include "hopper_common.cuh"

namespace hopper {

// Whether C's rows can take float2 stores: the base 8-byte aligned and ldc even.
__device__ __forceinline__ bool c_pairs_aligned(const float* C, int ldc) {
    return (ldc & 1) == 0 && (reinterpret_cast<unsigned long long>(C) & 7ull) == 0;
}

// Only the 8-column blocks j in [j_begin, j_end) are stored (split-K slices); all by default.
template <int BN>
__device__ __forceinline__ void store_accumulators(const float (&d)[BN / 2], int M, int N, int tile_col, int row0,
                                                   int col0, float alpha, float beta, float* __restrict__ C, int ldc,
                                                   int j_begin = 0, int j_end = BN / 8) {
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
                    if (j >= j_begin && j < j_end)
                        *reinterpret_cast<float2*>(out + 8 * j) =
                        make_float2(alpha * d[4 * j + 2 * h], alpha * d[4 * j + 2 * h + 1]);
            } else {
#pragma unroll
                for (int j = 0; j < BN / 8; ++j) {
                    if (j < j_begin || j >= j_end) continue;
                    const float2 old = *reinterpret_cast<const float2*>(out + 8 * j);
                    *reinterpret_cast<float2*>(out + 8 * j) =
                        make_float2(fmaf(beta, old.x, alpha * d[4 * j + 2 * h]),
                                    fmaf(beta, old.y, alpha * d[4 * j + 2 * h + 1]));
                }
            }
        } else {
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
                if (j < j_begin || j >= j_end) continue;
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


// A warpgroup's 64 x BN tile through `staging` (64 x 40 floats: 32 columns + 8 of padding, so the
// float2 writes of a half warp, 4 rows x 8 columns, hit 32 different banks). `bar` is a named
// barrier id private to this warpgroup. float4 global accesses when C's rows are 16-byte
// aligned, else one float per lane (a warp = 32 consecutive floats of one row). Only the 32-column
// chunks in [chunk_begin, chunk_end) are stored (the same for the whole warpgroup).
template <int BN>
__device__ __forceinline__ void store_staged(const float (&d)[BN / 2], float* staging, int M, int N, int row0,
                                             int col0, float alpha, float beta, float* __restrict__ C, int ldc,
                                             int bar, int chunk_begin = 0, int chunk_end = BN / 32) {
    constexpr int CHUNK = 32, STRIDE = 40;
    const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
    const bool quads = (ldc & 3) == 0 && (reinterpret_cast<unsigned long long>(C) & 15ull) == 0;
#pragma unroll
    for (int chunk = 0; chunk < BN / CHUNK; ++chunk) {
        if (chunk < chunk_begin || chunk >= chunk_end) continue;
        named_barrier(bar, 128);  // the previous chunk has been read back
#pragma unroll
        for (int jj = 0; jj < CHUNK / 8; ++jj) {
            const int j = chunk * (CHUNK / 8) + jj;
#pragma unroll
            for (int h = 0; h < 2; ++h)
                *reinterpret_cast<float2*>(staging + (16 * warp + lane / 4 + 8 * h) * STRIDE + 8 * jj + 2 * (lane % 4)) =
                    make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
        }
        named_barrier(bar, 128);
        const int c0 = col0 + chunk * CHUNK;
        if (quads) {
#pragma unroll
            for (int i = 0; i < 64 * CHUNK / 4 / 128; ++i) {
                const int idx = i * 128 + t, r = idx / (CHUNK / 4), c = 4 * (idx % (CHUNK / 4));
                const int row = row0 + r, col = c0 + c;
                if (row >= M || col >= N) continue;
                const float4 v = *reinterpret_cast<const float4*>(staging + r * STRIDE + c);
                float* out = C + static_cast<long long>(row) * ldc + col;
                if (col + 3 < N) {
                    float4 o = make_float4(alpha * v.x, alpha * v.y, alpha * v.z, alpha * v.w);
                    if (beta != 0.0f) {
                        const float4 old = *reinterpret_cast<const float4*>(out);
                        o.x = fmaf(beta, old.x, o.x), o.y = fmaf(beta, old.y, o.y);
                        o.z = fmaf(beta, old.z, o.z), o.w = fmaf(beta, old.w, o.w);
                    }
                    *reinterpret_cast<float4*>(out) = o;
                } else {
                    const float vs[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        if (col + e < N) out[e] = beta != 0.0f ? fmaf(beta, out[e], alpha * vs[e]) : alpha * vs[e];
                }
            }
        } else {
#pragma unroll 4
            for (int i = 0; i < 64 * CHUNK / 128; ++i) {
                const int r = i * 4 + warp, row = row0 + r, col = c0 + lane;
                if (row >= M || col >= N) continue;
                float* out = C + static_cast<long long>(row) * ldc + col;
                const float v = alpha * staging[r * STRIDE + lane];
                *out = beta != 0.0f ? fmaf(beta, *out, v) : v;
            }
        }
    }
}

// ---------------------------------------------------------------- TMA store (EPILOGUE 3)
// Generic-proxy writes to shared memory become visible to the TMA engine (the async proxy)
// only after this fence, in each writing thread, before the barrier that hands them over.
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Store the box at `src` (laid out as the map's swizzle says) at element coordinates (c0 =
// column, c1 = row); parts outside the matrix are not written.
__device__ __forceinline__ void tma_store_2d(const TensorMap* map, const void* src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                     reinterpret_cast<unsigned long long>(map)),
                 "r"(smem_u32(src)), "r"(c0), "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Wait until at most PENDING of this thread's bulk groups still read their shared memory.
template <int PENDING>
__device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(PENDING) : "memory");
}
// Wait until all of this thread's bulk groups are complete (their writes performed).
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// A warpgroup's 64 x BN tile by TMA stores of 64 x 32 chunks (8 KiB, one 128-byte row of 32
// floats per tile row) through BUFFERS staging buffers in turn (each 1024-byte aligned, in the
// 128-byte swizzle of the C map: the 16-byte unit u of row r sits at unit u ^ (r % 8), so the
// float2 writes of a warp, 8 rows x 32 bytes, spread over all 32 banks). Thread 0 of the
// warpgroup issues and waits for the stores; `issued` counts its stores across tiles, so a
// buffer is rewritten only after the store that last read it has finished reading. The stores
// run on while the warpgroup goes on to its next tile; the copy engine writes whole 128-byte
// lines and clips rows >= M and columns >= N. C is read (in the fragment layout) only when
// beta != 0. Only the chunks in [chunk_begin, chunk_end) are stored (split-K slices).
template <int BN, int BUFFERS>
__device__ __forceinline__ void store_tma(const float (&d)[BN / 2], float* staging, int M, int N, int row0, int col0,
                                          float alpha, float beta, const float* __restrict__ C, int ldc,
                                          const TensorMap* c_map, int bar, int chunk_begin, int chunk_end,
                                          int& issued) {
    constexpr int CHUNK = 32;
    const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
#pragma unroll
    for (int chunk = 0; chunk < BN / CHUNK; ++chunk) {
        if (chunk < chunk_begin || chunk >= chunk_end) continue;
        float* buffer = staging + (issued % BUFFERS) * (64 * CHUNK);
        if (t == 0) bulk_wait_read<BUFFERS - 1>();
        named_barrier(bar, 128);  // the buffer's last store has read it
#pragma unroll
        for (int jj = 0; jj < CHUNK / 8; ++jj) {
            const int j = chunk * (CHUNK / 8) + jj;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = 16 * warp + lane / 4 + 8 * h, c = 8 * jj + 2 * (lane % 4);
                float2 v = make_float2(alpha * d[4 * j + 2 * h], alpha * d[4 * j + 2 * h + 1]);
                if (beta != 0.0f) {
                    const int row = row0 + r, col = col0 + chunk * CHUNK + c;
                    const float* old = C + static_cast<long long>(row) * ldc + col;
                    if (row < M && col < N) v.x = fmaf(beta, old[0], v.x);
                    if (row < M && col + 1 < N) v.y = fmaf(beta, old[1], v.y);
                }
                *reinterpret_cast<float2*>(buffer + r * CHUNK + (((c / 4) ^ (r % 8)) * 4) + c % 4) = v;
            }
        }
        fence_async_shared();
        named_barrier(bar, 128);
        if (t == 0) {
            tma_store_2d(c_map, buffer, col0 + chunk * CHUNK, row0);
            bulk_commit();
        }
        ++issued;
    }
}

}  // namespace hopper
