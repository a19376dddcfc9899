// bank_conflict_free.cu -- rung 6: vectorized with its shared-memory bank conflicts removed.
//
// Shared memory has 32 banks of 4 bytes; a warp's access takes one pass (wavefront) per
// distinct 128-byte line a bank is asked for. vectorized has two conflicts:
// (1) the transposed stores of A: the 8 (scalar path) or 2 (float4 path) threads that
//     load one row of A write one COLUMN of As[k][BM], BM = 128 floats apart: all one
//     bank, 8-way (2-way) conflicts. Fix: pad each As row to BM + 4 floats. Element
//     (k, m) then sits in bank (4k + m) % 32, so the 8 k x 4 m (2 x 16) elements a warp
//     writes hit 32 different banks; BM + 4 keeps rows 16-byte aligned for LDS.128.
// (2) the B fragment reads: each thread read TN = 8 consecutive floats, so the 16
//     column-threads of a warp read float4s 32 bytes apart, which use only half of the
//     banks: 4 wavefronts where 2 suffice. Fix: a thread now takes TN/4 groups of 4
//     columns, BN/(TN/4) apart (columns 4*tx.. and BN/2 + 4*tx.. for TN = 8), so the
//     warp reads 256 contiguous bytes per LDS.128. The C stores become wider runs too.
// Checked with ncu's l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st} counters
// (tools/bank_conflicts.sh, results/h100-80gb-hbm3/bank-conflicts.txt), not assumed.
// A's slot order (a_vec_slot / a_scalar_slot) keeps the stores conflict-free for BK = 16.
// Expected: fewer shared-memory wavefronts per FMA; a modest gain where shared memory
// bandwidth, not FMA issue, was the limit.
// Measured (H100): ncu load conflicts per shared load 2.0 -> 0, store conflicts per shared
// store 0.71 -> 0 (float4 path) and 2.39 -> 0 (scalar path) at BK = 16. Default BM=64,
// BN=128, BK=16 (128 threads, 4 blocks/SM): 43.4 TFLOP/s at 4096^3 (1.14x over vectorized),
// 37.7 at 4093x4091x4099 (1.22x), 28.7 at 1024^3 (1.35x).
#include "a_tile_slots.cuh"
#include "gemm_common.cuh"

namespace bcf {  // bank_conflict_free

// As rows are padded by 4 floats: (k, m) lands in bank (4k + m) % 32, rows stay 16-byte aligned.
template <int BM>
struct APad { static constexpr int LD = BM + 4; };

// Stage A (transposed and padded, As[k * (BM + 4) + m]) and B (Bs[k * BN + n]) for the tile at k0.
template <int BM, int BN, int BK, int NT, bool VEC, bool CHECK_K>
__device__ __forceinline__ void load_tiles(float* As, float* Bs, const float* A, int lda, const float* B, int ldb,
                                           int M, int N, int K, int row0, int col0, int k0, int tid) {
    constexpr int LD = APad<BM>::LD;
    if constexpr (VEC) {  // the whole BM x BN tile is inside C: no row or column checks
        constexpr int A4 = BM * BK / 4, B4 = BK * BN / 4;
#pragma unroll
        for (int i = 0; i < (A4 + NT - 1) / NT; ++i) {
            const int s = tid + i * NT;
            if (A4 % NT == 0 || s < A4) {
                const int2 rc = a_vec_slot<BK, NT>(tid, i);
                const int r = rc.x, c = rc.y;
                const float* p = A + (row0 + r) * lda + k0 + c;
                float4 v;
                if (!CHECK_K) {
                    v = *reinterpret_cast<const float4*>(p);
                } else {  // the last K tile: the float4 may straddle K, so element by element
                    const int left = K - (k0 + c);
                    v.x = left > 0 ? p[0] : 0.0f;
                    v.y = left > 1 ? p[1] : 0.0f;
                    v.z = left > 2 ? p[2] : 0.0f;
                    v.w = left > 3 ? p[3] : 0.0f;
                }
                As[(c + 0) * LD + r] = v.x;
                As[(c + 1) * LD + r] = v.y;
                As[(c + 2) * LD + r] = v.z;
                As[(c + 3) * LD + r] = v.w;
            }
        }
#pragma unroll
        for (int i = 0; i < (B4 + NT - 1) / NT; ++i) {
            const int s = tid + i * NT;
            if (B4 % NT == 0 || s < B4) {
                const int r = s / (BN / 4), c = s % (BN / 4) * 4;
                const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                const float4* p = reinterpret_cast<const float4*>(B + (k0 + r) * ldb + col0 + c);
                *reinterpret_cast<float4*>(&Bs[r * BN + c]) = (!CHECK_K || k0 + r < K) ? *p : zero;
            }
        }
    } else {  // scalar: consecutive threads take consecutive k of A and columns of B
        constexpr int A1 = BM * BK, B1 = BK * BN;
#pragma unroll
        for (int i = 0; i < (A1 + NT - 1) / NT; ++i) {
            const int s = tid + i * NT;
            if (A1 % NT == 0 || s < A1) {
                const int2 rc = a_scalar_slot<BK, NT>(tid, i);
                const int r = rc.x, c = rc.y;
                const int row = row0 + r, k = k0 + c;
                As[c * LD + r] = (row < M && (!CHECK_K || k < K)) ? A[row * lda + k] : 0.0f;
            }
        }
#pragma unroll
        for (int i = 0; i < (B1 + NT - 1) / NT; ++i) {
            const int s = tid + i * NT;
            if (B1 % NT == 0 || s < B1) {
                const int k = k0 + s / BN, col = col0 + s % BN;
                Bs[s] = (col < N && (!CHECK_K || k < K)) ? B[k * ldb + col] : 0.0f;
            }
        }
    }
}

// Outer products of one staged tile; both fragments are read as float4 (LDS.128). The
// thread's columns come in TN/4 groups of four, BN/(TN/4) apart, starting at tcol.
template <int BM, int BN, int BK, int TM, int TN>
__device__ __forceinline__ void multiply_tile(const float* As, const float* Bs, float (&acc)[TM][TN],
                                              int trow, int tcol) {
    constexpr int LD = APad<BM>::LD, GROUP_STRIDE = BN / (TN / 4);
#pragma unroll
    for (int dot = 0; dot < BK; ++dot) {
        float a[TM], b[TN];
#pragma unroll
        for (int i = 0; i < TM; i += 4) {
            const float4 v = *reinterpret_cast<const float4*>(&As[dot * LD + trow + i]);
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

template <int BM, int BN, int BK, int TM, int TN, bool VEC>
__device__ __forceinline__ void accumulate(float* As, float* Bs, float (&acc)[TM][TN], const float* A, int lda,
                                           const float* B, int ldb, int M, int N, int K, int row0, int col0,
                                           int trow, int tcol) {
    constexpr int NT = (BM / TM) * (BN / TN);
    const int tid = threadIdx.x;
    const int k_full = K - K % BK;  // tiles before k_full need no k check
    for (int k0 = 0; k0 < k_full; k0 += BK) {
        load_tiles<BM, BN, BK, NT, VEC, false>(As, Bs, A, lda, B, ldb, M, N, K, row0, col0, k0, tid);
        __syncthreads();
        multiply_tile<BM, BN, BK, TM, TN>(As, Bs, acc, trow, tcol);
        __syncthreads();
    }
    if (k_full < K) {
        load_tiles<BM, BN, BK, NT, VEC, true>(As, Bs, A, lda, B, ldb, M, N, K, row0, col0, k_full, tid);
        __syncthreads();
        multiply_tile<BM, BN, BK, TM, TN>(As, Bs, acc, trow, tcol);
    }
}

}  // namespace bcf

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), min_blocks((BM / TM) * (BN / TN)))
sgemm_bank_conflict_free(int M, int N, int K, float alpha,
                         const float* __restrict__ A, int lda,
                         const float* __restrict__ B, int ldb, float beta,
                         float* __restrict__ C, int ldc) {
    static_assert(BM % TM == 0 && BN % TN == 0, "the thread tile must divide the block tile");
    static_assert(BK % 8 == 0 && BM % 16 == 0, "A's slot order needs BK % 8 == 0 and BM % 16 == 0");
    static_assert(TM % 4 == 0 && TN % 4 == 0, "fragments are read as float4");
    static_assert((BM * BK / 4) % ((BM / TM) * (BN / TN)) == 0, "every thread copies whole float4s of A");
    __shared__ __align__(16) float As[BK * bcf::APad<BM>::LD];  // As[k * (BM + 4) + m]
    __shared__ __align__(16) float Bs[BK * BN];

    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int trow = threadIdx.x / (BN / TN) * TM;
    const int tcol = threadIdx.x % (BN / TN) * 4;  // first column of its first group of four
    const bool vec = aligned16(A, lda) && aligned16(B, ldb) && row0 + BM <= M && col0 + BN <= N;

    float acc[TM][TN] = {};
    if (vec) {
        bcf::accumulate<BM, BN, BK, TM, TN, true>(As, Bs, acc, A, lda, B, ldb, M, N, K, row0, col0, trow, tcol);
    } else {
        bcf::accumulate<BM, BN, BK, TM, TN, false>(As, Bs, acc, A, lda, B, ldb, M, N, K, row0, col0, trow, tcol);
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + trow + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = col0 + tcol + j / 4 * (BN / (TN / 4)) + j % 4;
            if (row < M && col < N) {
                C[row * ldc + col] = gemm_epilogue(acc[i][j], alpha, beta, &C[row * ldc + col]);
            }
        }
    }
}
