// hopper_epilogue.cuh -- D = act(alpha * acc + beta * C + bias) from a warpgroup's wgmma accumulators.
//
// A thread holds, for each 8-column block j of its warpgroup's 64 x BN tile, two adjacent
// columns in two rows 8 apart: d[4j + 2h + e] is row row0 + 8h, column col0 + 8j + e, with
// row0 = tile row + 16*warp + lane/4 and col0 = tile column + 2*(lane%4). Stores go straight
// from registers as pairs (4 lanes write one 32-byte sector per row of FP32, so no sector is
// written twice). C is read only when beta != 0: with beta == 0 it may hold NaN.
// store_staged takes the long way for C that pair stores cannot serve (rows not pair-aligned,
// e.g. ldc odd, or the ragged last tile column): the fragment goes to shared memory 32 columns
// at a time, and the warpgroup writes it back row by row, a warp covering 32 contiguous elements
// of a row per instruction. store_tma (any_shape's EPILOGUE 3) hands the staged chunks to the
// TMA engine instead and goes on without waiting for them.
//
// The output type and the epilogue (OUT, EPI) come from common/epilogue.cuh, shared with the
// mma_sync kernels. Split-K partials stay FP32 in the workspace: the epilogue runs once, on the
// reduced tile.
#pragma once
#include "hopper_common.cuh"
#include "common/epilogue.cuh"

namespace hopper {

using namespace output;  // OutType, Epilogue, OUT_* and EPI_* (common/epilogue.cuh)

// A thread's pairs of rows row0 and row0 + 8, with whole pairs inside N and aligned: no
// per-element test. READ_C: beta != 0.
template <int BN, bool READ_C, class Epi>
__device__ __forceinline__ void store_pairs(const float (&d)[BN / 2], int M, int row0, int col0, const Epi& epi,
                                            typename Epi::T* __restrict__ C, int ldc, int j_begin, int j_end) {
    using Out = typename Epi::Out;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        if (j < j_begin || j >= j_end) continue;
        const int col = col0 + 8 * j;
        const float b0 = epi.bias_at(col), b1 = epi.bias_at(col + 1);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = row0 + 8 * h;
            if (row >= M) continue;
            typename Epi::T* out = C + static_cast<long long>(row) * ldc + col;
            float x = epi.alpha * d[4 * j + 2 * h], y = epi.alpha * d[4 * j + 2 * h + 1];
            if (READ_C) {
                const float2 old = Out::load2(out);
                x = fmaf(epi.beta, old.x, x), y = fmaf(epi.beta, old.y, y);
            }
            Out::store2(out, epi.finish(x, b0), epi.finish(y, b1));
        }
    }
}

// Only the 8-column blocks j in [j_begin, j_end) are stored (split-K slices); all by default.
template <int BN, class Epi>
__device__ __forceinline__ void store_accumulators(const float (&d)[BN / 2], int M, int tile_col, int row0, int col0,
                                                   const Epi& epi, typename Epi::T* __restrict__ C, int ldc,
                                                   int j_begin = 0, int j_end = BN / 8) {
    using Out = typename Epi::Out;
    // The whole tile's columns are inside C and pairs are aligned: pair stores, no per-element test.
    if (c_pairs_aligned(C, ldc) && tile_col + BN <= epi.N) {
        if (epi.beta == 0.0f) store_pairs<BN, false>(d, M, row0, col0, epi, C, ldc, j_begin, j_end);
        else store_pairs<BN, true>(d, M, row0, col0, epi, C, ldc, j_begin, j_end);
        return;
    }
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        if (j < j_begin || j >= j_end) continue;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int col = col0 + 8 * j + e;
            if (col >= epi.N) continue;
            const float b = epi.bias_at(col);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = row0 + 8 * h;
                if (row >= M) continue;
                typename Epi::T* out = C + static_cast<long long>(row) * ldc + col;
                float v = epi.alpha * d[4 * j + 2 * h + e];
                if (epi.beta != 0.0f) v = fmaf(epi.beta, Out::load(out), v);
                Out::store(out, epi.finish(v, b));
            }
        }
    }
}

// A warpgroup's 64 x BN tile through `staging` (64 x 40 floats: 32 columns + 8 of padding, so the
// float2 writes of a half warp, 4 rows x 8 columns, hit 32 different banks). `bar` is a named
// barrier id private to this warpgroup. Four-element vector accesses to C when its rows are
// aligned to 4 elements, else one element per lane (a warp = 32 consecutive elements of one
// row). Only the 32-column chunks in [chunk_begin, chunk_end) are stored (the same for the whole
// warpgroup).
template <int BN, class Epi>
__device__ __forceinline__ void store_staged(const float (&d)[BN / 2], float* staging, int M, int row0, int col0,
                                             const Epi& epi, typename Epi::T* __restrict__ C, int ldc, int bar,
                                             int chunk_begin = 0, int chunk_end = BN / 32) {
    using Out = typename Epi::Out;
    using T = typename Epi::T;
    constexpr int CHUNK = 32, STRIDE = 40;
    const int N = epi.N;
    const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
    const bool quads = (ldc & 3) == 0 && (reinterpret_cast<unsigned long long>(C) & (4 * sizeof(T) - 1)) == 0;
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
                T* out = C + static_cast<long long>(row) * ldc + col;
                if (col + 3 < N) {
                    float4 o = make_float4(epi.alpha * v.x, epi.alpha * v.y, epi.alpha * v.z, epi.alpha * v.w);
                    if (epi.beta != 0.0f) {
                        const float4 old = Out::load4(out);
                        o.x = fmaf(epi.beta, old.x, o.x), o.y = fmaf(epi.beta, old.y, o.y);
                        o.z = fmaf(epi.beta, old.z, o.z), o.w = fmaf(epi.beta, old.w, o.w);
                    }
                    o.x = epi.finish(o.x, epi.bias_at(col)), o.y = epi.finish(o.y, epi.bias_at(col + 1));
                    o.z = epi.finish(o.z, epi.bias_at(col + 2)), o.w = epi.finish(o.w, epi.bias_at(col + 3));
                    Out::store4(out, o);
                } else {
                    const float vs[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        if (col + e >= N) continue;
                        float o = epi.alpha * vs[e];
                        if (epi.beta != 0.0f) o = fmaf(epi.beta, Out::load(out + e), o);
                        Out::store(out + e, epi.finish(o, epi.bias_at(col + e)));
                    }
                }
            }
        } else {
#pragma unroll 4
            for (int i = 0; i < 64 * CHUNK / 128; ++i) {
                const int r = i * 4 + warp, row = row0 + r, col = c0 + lane;
                if (row >= M || col >= N) continue;
                T* out = C + static_cast<long long>(row) * ldc + col;
                float v = epi.alpha * staging[r * STRIDE + lane];
                if (epi.beta != 0.0f) v = fmaf(epi.beta, Out::load(out), v);
                Out::store(out, epi.finish(v, epi.bias_at(col)));
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

// Byte offset of element (r, c) in a staged 64 x 32 chunk of BYTES-byte elements, laid out as
// C's map swizzles it: rows of 32 * BYTES bytes (128 for FP32, with the 128-byte swizzle; 64 for
// 16-bit types, with the 64-byte swizzle), the 16-byte unit u of row r at u ^ (the row's phase:
// address bits 7-9 for 128 bytes, 7-8 for 64). A warp's 4-byte pair writes of 16-bit C (8 rows x
// 16 bytes) then spread over all 32 banks. FP32 pairs are 8-byte writes, which the banks serve a
// half warp (4 rows x 32 bytes) at a time; there rows r and r ^ 1 of one 8-column block land on
// the same two units, so store_tma has the rows of odd phase write their blocks in another order.
template <int BYTES>
__device__ __forceinline__ int chunk_offset(int r, int c) {
    constexpr int ROW = 32 * BYTES, PER_UNIT = 16 / BYTES;
    const int phase = (r * ROW / 128) % (ROW / 16);
    return r * ROW + ((c / PER_UNIT) ^ phase) * 16 + (c % PER_UNIT) * BYTES;
}

// A 16-bit bias's pairs for a thread's columns of a BN-column tile starting at col0 (col0 + 8j +
// 2 (lane % 4) and the next, one 32-bit register each), loaded as the tile's k loop starts so that
// their latency hides behind it: loaded at the epilogue, they held up every tile's first chunk, and
// with the short k loops of K <= 512 the epilogue is what sets the time (results/h100-80gb-hbm3/
// probe-bias-held.txt). Where the tile's columns lie inside N and the bias is 4-byte aligned, each
// pair is one plain 32-bit load that nothing waits for until the epilogue unpacks it (a select on
// it made the warp wait at the k loop's start, a test of it at the store cost the epilogue more:
// results/h100-80gb-hbm3/archive/probe-bias-held-earlier-forms.txt; hence the two loops below,
// not one with a select); else bias_pair_bits composes each. Nothing is held for FP32 or without
// a bias; only the 32-column chunks in [chunk_begin, chunk_end) (the ones store_tma stores).
template <int BN, class Epi>
struct BiasPairs {
    static constexpr bool HELD = Epi::HAS_BIAS && sizeof(typename Epi::T) == 2;
    unsigned bits[HELD ? BN / 8 : 1];

    __device__ __forceinline__ void load(const Epi& epi, int col0, int lane, int chunk_begin = 0,
                                         int chunk_end = BN / 32) {
        if constexpr (HELD) {
            const int first = col0 + 2 * (lane % 4);
            if (col0 + BN <= epi.N && (reinterpret_cast<unsigned long long>(epi.bias + col0) & 3ull) == 0) {
#pragma unroll
                for (int j = 0; j < BN / 8; ++j)
                    bits[j] = j / 4 >= chunk_begin && j / 4 < chunk_end
                                  ? *reinterpret_cast<const unsigned*>(epi.bias + first + 8 * j)
                                  : 0u;
            } else {
#pragma unroll
                for (int j = 0; j < BN / 8; ++j)
                    bits[j] = j / 4 >= chunk_begin && j / 4 < chunk_end ? epi.bias_pair_bits(first + 8 * j) : 0u;
            }
        }
    }
    // The bias at columns col0 + 8j + 2 (lane % 4) and the next, as FP32
    __device__ __forceinline__ float2 pair(int j) const { return Epi::Out::unpack(bits[j]); }
};

// A warpgroup's 64 x BN tile by TMA stores of 64 x 32 chunks (one 8 KiB staging buffer each,
// half of it used by a 16-bit C) through BUFFERS staging buffers in turn (each 1024-byte
// aligned, in the swizzle of the C map, chunk_offset). Thread 0 of the warpgroup issues and waits
// for the stores; `issued` counts its stores across tiles, so a buffer is rewritten only after
// the store that last read it has finished reading. The stores run on while the warpgroup goes
// on to its next tile; the copy engine writes whole 16-byte granules and clips rows >= M and
// columns >= N. C is read (in the fragment layout) only when beta != 0. Only the chunks in
// [chunk_begin, chunk_end) are stored (split-K slices). TURN: FP32 rows of odd phase write
// their blocks in the turned order below (false: every row in the plain order). held: the
// tile's bias pairs (BiasPairs), loaded by the caller before the tile's k loop.
template <int BN, int BUFFERS, bool TURN = true, class Epi>
__device__ __forceinline__ void store_tma(const float (&d)[BN / 2], float* staging, int M, int row0, int col0,
                                          const Epi& epi, const BiasPairs<BN, Epi>& held,
                                          const typename Epi::T* __restrict__ C, int ldc, const TensorMap* c_map,
                                          int bar, int chunk_begin, int chunk_end, int& issued) {
    using Out = typename Epi::Out;
    using T = typename Epi::T;
    constexpr int CHUNK = 32;
    constexpr bool HELD = BiasPairs<BN, Epi>::HELD;
    const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
#pragma unroll
    for (int chunk = 0; chunk < BN / CHUNK; ++chunk) {
        if (chunk < chunk_begin || chunk >= chunk_end) continue;
        unsigned char* buffer = reinterpret_cast<unsigned char*>(staging + (issued % BUFFERS) * (64 * CHUNK));
        if (t == 0) bulk_wait_read<BUFFERS - 1>();
        named_barrier(bar, 128);  // the buffer's last store has read it
#pragma unroll
        for (int jj = 0; jj < CHUNK / 8; ++jj) {
            // FP32: the rows of odd phase (lane / 4 odd) write the 8-column blocks in the order
            // 2, 3, 0, 1, so that a half warp's 8-byte writes cover 8 different units of its 4 rows
            // (chunk_offset; ncu counted 32,769 store conflicts per GEMM at 1024^3 in the plain order, 10 so)
            const bool turned = TURN && sizeof(T) == 4 && (lane / 4) % 2 == 1;
            const int j = chunk * (CHUNK / 8) + jj, jt = chunk * (CHUNK / 8) + (jj ^ 2);
            const int c = 8 * (turned ? jj ^ 2 : jj) + 2 * (lane % 4), col = col0 + chunk * CHUNK + c;
            float b0, b1;
            if constexpr (HELD) {
                const float2 b = held.pair(j);
                b0 = b.x, b1 = b.y;
            } else {
                b0 = epi.bias_at(col), b1 = epi.bias_at(col + 1);
            }
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = 16 * warp + lane / 4 + 8 * h;
                const float dx = turned ? d[4 * jt + 2 * h] : d[4 * j + 2 * h];
                const float dy = turned ? d[4 * jt + 2 * h + 1] : d[4 * j + 2 * h + 1];
                float x = epi.alpha * dx, y = epi.alpha * dy;
                if (epi.beta != 0.0f) {
                    const int row = row0 + r;
                    const T* old = C + static_cast<long long>(row) * ldc + col;
                    if (row < M && col < epi.N) x = fmaf(epi.beta, Out::load(old), x);
                    if (row < M && col + 1 < epi.N) y = fmaf(epi.beta, Out::load(old + 1), y);
                }
                Out::store2(reinterpret_cast<T*>(buffer + chunk_offset<sizeof(T)>(r, c)), epi.finish(x, b0),
                            epi.finish(y, b1));
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
