// double_buffered.cu -- rung 7: the next tile's loads overlap the current tile's math.
//
// Change against bank_conflict_free (same padded, conflict-free shared layout and thread
// mapping): until now a block loaded a tile, synced, computed, synced, so each warp
// waited out a full global-memory latency per K step, covered only by other warps. Now
// the loads of tile t+1 (or t+STAGES-1) are in flight while tile t is multiplied, and
// one __syncthreads per tile suffices (the tile being written is not the one being read).
// Two paths, chosen by the ASYNC tunable:
//  ASYNC=0  register prefetch (any GPU): global -> registers at the top of the step,
//           multiply the current shared buffer, then registers -> the other buffer.
//           Float4 loads as in vectorized for interior blocks with aligned A and B.
//  ASYNC=1  cp.async (sm_80+): STAGES shared buffers in a ring, filled straight from
//           global memory by the copy engine (LDGSTS) without passing through registers.
//           A goes element by element with 4-byte cp.async.ca (it is stored transposed);
//           B with 16-byte cp.async.cg when B and ldb are 16-byte aligned, else 4-byte.
//           The src-size operand zero-fills what lies outside A or B (0 bytes read), and
//           a partial float4 at the right edge of B copies only its in-range floats.
// Expected: a gain where latency, not issue, limited the previous rung; small when two
// blocks per SM already hid most of it.
// Measured (H100, default BM=BN=128, BK=8, ASYNC=0): 46.0 TFLOP/s at 4096^3, 1.06x over
// bank_conflict_free and 89% of cuBLAS; but 36.3 at 4093x4091x4099 (0.96x) and 20.4 at
// 1024^3, where 64 blocks of 128 x 128 leave half of the 132 SMs idle (BM=64 with
// cp.async reaches 29.1 there). The cp.async path: 42.3 at 4096^3, 38.0 at 4093x4091x4099
// (STAGES=4): four 4-byte LDGSTS per thread and tile for the transposed A cost issue
// slots, and BK=16, which helped bank_conflict_free, spills at the 128-register cap.
#include "a_tile_slots.cuh"
#include "cp_async.cuh"
#include "gemm_common.cuh"

namespace dbuf {

template <int BM, int BN, int BK>
struct Layout {  // one stage: As[k][BM + 4] (transposed, padded; see bank_conflict_free.cu), Bs[k][BN]
    static constexpr int LD = BM + 4;
    static constexpr int A_FLOATS = BK * LD;
    static constexpr int STAGE_FLOATS = A_FLOATS + BK * BN;
};

// ---- cp.async (sm_80+): cu/cp_async.cuh ------------------------------------------------
// Queue the copies of one tile into one stage. Out-of-range elements copy 0 bytes from
// the matrix's first element (a valid address) and are zero-filled.
template <int BM, int BN, int BK, int NT, bool VEC_B, bool CHECK_K>
__device__ __forceinline__ void issue_tile(float* stage, const float* A, int lda, const float* B, int ldb,
                                           int M, int N, int K, int row0, int col0, int k0, int tid) {
    using L = Layout<BM, BN, BK>;
    float* As = stage;
    float* Bs = stage + L::A_FLOATS;
#pragma unroll
    for (int i = 0; i < BM * BK / NT; ++i) {  // consecutive threads: consecutive k (coalesced)
        const int2 rc = a_scalar_slot<BK, NT>(tid, i);
        const int r = rc.x, c = rc.y;
        const int row = row0 + r, k = k0 + c;
        const bool ok = row < M && (!CHECK_K || k < K);
        cp_async_4(&As[c * L::LD + r], ok ? A + row * lda + k : A, ok ? 4 : 0);
    }
    if constexpr (VEC_B) {
#pragma unroll
        for (int i = 0; i < BK * BN / 4 / NT; ++i) {
            const int s = tid + i * NT, r = s / (BN / 4), c = s % (BN / 4) * 4;
            const int k = k0 + r, col = col0 + c;
            const int floats = (!CHECK_K || k < K) ? max(0, min(4, N - col)) : 0;
            cp_async_16(&Bs[r * BN + c], floats > 0 ? B + k * ldb + col : B, 4 * floats);
        }
    } else {
#pragma unroll
        for (int i = 0; i < BK * BN / NT; ++i) {
            const int s = tid + i * NT, r = s / BN, c = s % BN;
            const int k = k0 + r, col = col0 + c;
            const bool ok = col < N && (!CHECK_K || k < K);
            cp_async_4(&Bs[s], ok ? B + k * ldb + col : B, ok ? 4 : 0);
        }
    }
}

// ---- register prefetch ----------------------------------------------------------------
template <int BM, int BN, int BK, int NT>
struct Staging {  // the tile's elements this thread carries from global to shared memory
    float a[BM * BK / NT];
    float b[BK * BN / NT];
};

// Global -> registers. VEC: float4 slots, the block's tile wholly inside C (no row or
// column checks). Scalar: consecutive threads take consecutive k of A / columns of B.
template <int BM, int BN, int BK, int NT, bool VEC, bool CHECK_K>
__device__ __forceinline__ void load_regs(Staging<BM, BN, BK, NT>& st, const float* A, int lda, const float* B,
                                          int ldb, int M, int N, int K, int row0, int col0, int k0, int tid) {
    if constexpr (VEC) {
#pragma unroll
        for (int i = 0; i < BM * BK / 4 / NT; ++i) {
            const int2 rc = a_vec_slot<BK, NT>(tid, i);
            const int r = rc.x, c = rc.y;
            const float* p = A + (row0 + r) * lda + k0 + c;
            if (!CHECK_K) {
                const float4 v = *reinterpret_cast<const float4*>(p);
                st.a[4 * i] = v.x, st.a[4 * i + 1] = v.y, st.a[4 * i + 2] = v.z, st.a[4 * i + 3] = v.w;
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) st.a[4 * i + j] = k0 + c + j < K ? p[j] : 0.0f;
            }
        }
#pragma unroll
        for (int i = 0; i < BK * BN / 4 / NT; ++i) {
            const int s = tid + i * NT, r = s / (BN / 4), c = s % (BN / 4) * 4;
            const float4 v = (!CHECK_K || k0 + r < K)
                                 ? *reinterpret_cast<const float4*>(B + (k0 + r) * ldb + col0 + c)
                                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            st.b[4 * i] = v.x, st.b[4 * i + 1] = v.y, st.b[4 * i + 2] = v.z, st.b[4 * i + 3] = v.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < BM * BK / NT; ++i) {
            const int2 rc = a_scalar_slot<BK, NT>(tid, i);
            const int row = row0 + rc.x, k = k0 + rc.y;
            st.a[i] = (row < M && (!CHECK_K || k < K)) ? A[row * lda + k] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < BK * BN / NT; ++i) {
            const int s = tid + i * NT, k = k0 + s / BN, col = col0 + s % BN;
            st.b[i] = (col < N && (!CHECK_K || k < K)) ? B[k * ldb + col] : 0.0f;
        }
    }
}

// Registers -> one stage, in the layout load_regs<VEC> gathered them in.
template <int BM, int BN, int BK, int NT, bool VEC>
__device__ __forceinline__ void store_regs(const Staging<BM, BN, BK, NT>& st, float* stage, int tid) {
    using L = Layout<BM, BN, BK>;
    float* As = stage;
    float* Bs = stage + L::A_FLOATS;
    if constexpr (VEC) {
#pragma unroll
        for (int i = 0; i < BM * BK / 4 / NT; ++i) {
            const int2 rc = a_vec_slot<BK, NT>(tid, i);
#pragma unroll
            for (int j = 0; j < 4; ++j) As[(rc.y + j) * L::LD + rc.x] = st.a[4 * i + j];
        }
#pragma unroll
        for (int i = 0; i < BK * BN / 4 / NT; ++i) {
            const int s = tid + i * NT, r = s / (BN / 4), c = s % (BN / 4) * 4;
            *reinterpret_cast<float4*>(&Bs[r * BN + c]) =
                make_float4(st.b[4 * i], st.b[4 * i + 1], st.b[4 * i + 2], st.b[4 * i + 3]);
        }
    } else {
#pragma unroll
        for (int i = 0; i < BM * BK / NT; ++i) {
            const int2 rc = a_scalar_slot<BK, NT>(tid, i);
            As[rc.y * L::LD + rc.x] = st.a[i];
        }
#pragma unroll
        for (int i = 0; i < BK * BN / NT; ++i) Bs[tid + i * NT] = st.b[i];
    }
}

// ---- the multiply (as in bank_conflict_free) -----------------------------------------
template <int BM, int BN, int BK, int TM, int TN>
__device__ __forceinline__ void multiply_tile(const float* stage, float (&acc)[TM][TN], int trow, int tcol) {
    using L = Layout<BM, BN, BK>;
    const float* As = stage;
    const float* Bs = stage + L::A_FLOATS;
    constexpr int GROUP_STRIDE = BN / (TN / 4);
#pragma unroll
    for (int dot = 0; dot < BK; ++dot) {
        float a[TM], b[TN];
#pragma unroll
        for (int i = 0; i < TM; i += 4) {
            const float4 v = *reinterpret_cast<const float4*>(&As[dot * L::LD + trow + i]);
            a[i] = v.x, a[i + 1] = v.y, a[i + 2] = v.z, a[i + 3] = v.w;
        }
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const float4 v = *reinterpret_cast<const float4*>(&Bs[dot * BN + tcol + j / 4 * GROUP_STRIDE]);
            b[j] = v.x, b[j + 1] = v.y, b[j + 2] = v.z, b[j + 3] = v.w;
        }
#pragma unroll
        for (int i = 0; i < TM; ++i) {
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    }
}

// ---- the two pipelines -----------------------------------------------------------------
struct Args {
    const float* A;
    int lda;
    const float* B;
    int ldb;
    int M, N, K, row0, col0, trow, tcol;
};

template <int BM, int BN, int BK, int TM, int TN, bool VEC>
__device__ __forceinline__ void prefetch_pipeline(float* smem, float (&acc)[TM][TN], const Args& g) {
    constexpr int NT = (BM / TM) * (BN / TN), STAGE = Layout<BM, BN, BK>::STAGE_FLOATS;
    const int tid = threadIdx.x;
    const int full = g.K / BK;  // whole tiles, pipelined; a partial last tile is done after them
    Staging<BM, BN, BK, NT> st;
    if (full > 0) {
        load_regs<BM, BN, BK, NT, VEC, false>(st, g.A, g.lda, g.B, g.ldb, g.M, g.N, g.K, g.row0, g.col0, 0, tid);
        store_regs<BM, BN, BK, NT, VEC>(st, smem, tid);
        __syncthreads();
    }
    for (int t = 0; t < full; ++t) {
        const bool more = t + 1 < full;
        if (more) {
            load_regs<BM, BN, BK, NT, VEC, false>(st, g.A, g.lda, g.B, g.ldb, g.M, g.N, g.K, g.row0, g.col0,
                                                  (t + 1) * BK, tid);
        }
        multiply_tile<BM, BN, BK, TM, TN>(smem + (t & 1) * STAGE, acc, g.trow, g.tcol);
        if (more) store_regs<BM, BN, BK, NT, VEC>(st, smem + ((t + 1) & 1) * STAGE, tid);
        __syncthreads();  // the other buffer is complete, and nobody still reads this one
    }
    if (full * BK < g.K) {  // the k tail: once per block, not worth overlapping
        load_regs<BM, BN, BK, NT, VEC, true>(st, g.A, g.lda, g.B, g.ldb, g.M, g.N, g.K, g.row0, g.col0,
                                             full * BK, tid);
        store_regs<BM, BN, BK, NT, VEC>(st, smem, tid);
        __syncthreads();
        multiply_tile<BM, BN, BK, TM, TN>(smem, acc, g.trow, g.tcol);
    }
}

template <int BM, int BN, int BK, int TM, int TN, int STAGES, bool VEC_B>
__device__ __forceinline__ void async_pipeline(float* smem, float (&acc)[TM][TN], const Args& g) {
    constexpr int NT = (BM / TM) * (BN / TN), STAGE = Layout<BM, BN, BK>::STAGE_FLOATS;
    const int tid = threadIdx.x;
    const int tiles = (g.K + BK - 1) / BK, full = g.K / BK;
    // Every step commits one group, empty or not, so "tile t landed" is always
    // "all but the newest STAGES-2 groups are complete".
    auto issue = [&](int t, int slot) {
        float* stage = smem + slot * STAGE;
        if (t < full) {
            issue_tile<BM, BN, BK, NT, VEC_B, false>(stage, g.A, g.lda, g.B, g.ldb, g.M, g.N, g.K, g.row0, g.col0,
                                                     t * BK, tid);
        } else if (t < tiles) {
            issue_tile<BM, BN, BK, NT, VEC_B, true>(stage, g.A, g.lda, g.B, g.ldb, g.M, g.N, g.K, g.row0, g.col0,
                                                    t * BK, tid);
        }
        cp_async_commit();
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) issue(s, s);
    int read_slot = 0, write_slot = STAGES - 1;
    for (int t = 0; t < tiles; ++t) {
        cp_async_wait<STAGES - 2>();  // this thread's copies of tile t have landed
        __syncthreads();              // everyone's have, and everyone is done with tile t-1
        issue(t + STAGES - 1, write_slot);  // refills the slot tile t-1 was read from
        multiply_tile<BM, BN, BK, TM, TN>(smem + read_slot * STAGE, acc, g.trow, g.tcol);
        read_slot = read_slot == STAGES - 1 ? 0 : read_slot + 1;
        write_slot = write_slot == STAGES - 1 ? 0 : write_slot + 1;
    }
    cp_async_wait<0>();  // no copy may outlive the block (the trailing groups are empty)
}

}  // namespace dbuf

// ASYNC=0: register prefetch, two stages. ASYNC=1: cp.async ring of STAGES stages.
// Shared memory is dynamic: STAGES * BK * (BM + 4 + BN) floats (see ladder.py).
template <int BM, int BN, int BK, int TM, int TN, int ASYNC, int STAGES>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), min_blocks((BM / TM) * (BN / TN)))
sgemm_double_buffered(int M, int N, int K, float alpha,
                      const float* __restrict__ A, int lda,
                      const float* __restrict__ B, int ldb, float beta,
                      float* __restrict__ C, int ldc) {
    constexpr int NT = (BM / TM) * (BN / TN);
    static_assert(BM % TM == 0 && BN % TN == 0, "the thread tile must divide the block tile");
    static_assert(BK % 8 == 0 && BM % 16 == 0, "A's slot order needs BK % 8 == 0 and BM % 16 == 0");
    static_assert(TM % 4 == 0 && TN % 4 == 0, "fragments are read as float4");
    static_assert((BM * BK / 4) % NT == 0 && (BK * BN / 4) % NT == 0,
                  "every thread must carry whole float4s of both tiles");
    static_assert(ASYNC == 0 ? STAGES == 2 : STAGES >= 2, "register prefetch uses exactly two stages");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    static_assert(ASYNC == 0, "ASYNC=1 needs sm_80 or newer (cp.async)");
#endif
    extern __shared__ __align__(16) float smem[];

    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const dbuf::Args g{A, lda, B, ldb, M, N, K, row0, col0,
                       static_cast<int>(threadIdx.x / (BN / TN) * TM),
                       static_cast<int>(threadIdx.x % (BN / TN) * 4)};  // first of TN/4 groups of 4 columns

    float acc[TM][TN] = {};
    if constexpr (ASYNC) {
        if (aligned16(B, ldb)) {
            dbuf::async_pipeline<BM, BN, BK, TM, TN, STAGES, true>(smem, acc, g);
        } else {
            dbuf::async_pipeline<BM, BN, BK, TM, TN, STAGES, false>(smem, acc, g);
        }
    } else {
        if (aligned16(A, lda) && aligned16(B, ldb) && row0 + BM <= M && col0 + BN <= N) {
            dbuf::prefetch_pipeline<BM, BN, BK, TM, TN, true>(smem, acc, g);
        } else {
            dbuf::prefetch_pipeline<BM, BN, BK, TM, TN, false>(smem, acc, g);
        }
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + g.trow + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = col0 + g.tcol + j / 4 * (BN / (TN / 4)) + j % 4;
            if (row < M && col < N) {
                C[row * ldc + col] = gemm_epilogue(acc[i][j], alpha, beta, &C[row * ldc + col]);
            }
        }
    }
}
