// vectorized.cu -- rung 5: 128-bit global loads, A transposed in shared memory.
//
// Change against blocktile_2d: (1) A is stored transposed (As[k][m]), so the TM values
// of A a thread needs at one k are consecutive: two LDS.128 instead of eight scalar LDS
// rows BK floats apart; B's row was already read with LDS.128. (2) Global loads of A and
// B use float4 (LDG.128): a quarter of the load instructions, and B's staging store is
// one STS.128. Expected: +10-15% over blocktile_2d (the worklog's A6000 figure).
// float4 loads need 16-byte aligned addresses that lie wholly inside the matrix, so the
// kernel decides per block, at run time, with one uniform flag: A and B 16-byte aligned,
// lda and ldb multiples of 4, and the block's tile wholly inside M x N. Such blocks run
// body<true> (no row/column checks at all; only the last, partial K tile tests k);
// every other block (edges, odd leading dimensions, misaligned pointers) runs
// body<false>: coalesced scalar loads with loop-invariant row/column predicates.
// The transposed stores are a known cost: threads that load one row of A write one
// COLUMN of As, BM floats apart, i.e. into the same bank (bank_conflict_free fixes it).
// Measured (H100, default BM=64, BN=128, BK=8; 128 registers, 4 blocks/SM): 38.2 TFLOP/s at
// 4096^3, 1.28x over blocktile_2d, but only 1.03x at 4093x4091x4099, whose odd leading
// dimensions take the scalar path, where ncu counts 2.4 store conflicts per shared store.
#include "gemm_common.cuh"

namespace vectorized {

// Stage A (transposed, As[k * BM + m]) and B (Bs[k * BN + n]) for the tile at k0.
template <int BM, int BN, int BK, int NT, bool VEC, bool CHECK_K>
__device__ __forceinline__ void load_tiles(float* As, float* Bs, const float* A, int lda, const float* B, int ldb,
                                           int M, int N, int K, int row0, int col0, int k0, int tid) {
    if constexpr (VEC) {  // the whole BM x BN tile is inside C: no row or column checks
        constexpr int A4 = BM * BK / 4, B4 = BK * BN / 4;
#pragma unroll
        for (int i = 0; i < (A4 + NT - 1) / NT; ++i) {
            const int s = tid + i * NT;
            if (A4 % NT == 0 || s < A4) {
                const int r = s / (BK / 4), c = s % (BK / 4) * 4;
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
                As[(c + 0) * BM + r] = v.x;
                As[(c + 1) * BM + r] = v.y;
                As[(c + 2) * BM + r] = v.z;
                As[(c + 3) * BM + r] = v.w;
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
                const int r = s / BK, c = s % BK;
                const int row = row0 + r, k = k0 + c;
                As[c * BM + r] = (row < M && (!CHECK_K || k < K)) ? A[row * lda + k] : 0.0f;
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

// Outer products of one staged tile; both fragments are read as float4 (LDS.128).
template <int BM, int BN, int BK, int TM, int TN>
__device__ __forceinline__ void multiply_tile(const float* As, const float* Bs, float (&acc)[TM][TN],
                                              int trow, int tcol) {
#pragma unroll
    for (int dot = 0; dot < BK; ++dot) {
        float a[TM], b[TN];
#pragma unroll
        for (int i = 0; i < TM; i += 4) {
            const float4 v = *reinterpret_cast<const float4*>(&As[dot * BM + trow + i]);
            a[i] = v.x, a[i + 1] = v.y, a[i + 2] = v.z, a[i + 3] = v.w;
        }
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const float4 v = *reinterpret_cast<const float4*>(&Bs[dot * BN + tcol + j]);
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

}  // namespace vectorized

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), min_blocks((BM / TM) * (BN / TN)))
sgemm_vectorized(int M, int N, int K, float alpha,
                 const float* __restrict__ A, int lda,
                 const float* __restrict__ B, int ldb, float beta,
                 float* __restrict__ C, int ldc) {
    static_assert(BM % TM == 0 && BN % TN == 0, "the thread tile must divide the block tile");
    static_assert(BK % 4 == 0 && TM % 4 == 0 && TN % 4 == 0, "float4 loads need multiples of 4");
    __shared__ __align__(16) float As[BK * BM];  // transposed: As[k * BM + m]
    __shared__ __align__(16) float Bs[BK * BN];

    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int trow = threadIdx.x / (BN / TN) * TM;
    const int tcol = threadIdx.x % (BN / TN) * TN;
    const bool vec = aligned16(A, lda) && aligned16(B, ldb) && row0 + BM <= M &&
                     col0 + BN <= N;  // the same for every thread of the block

    float acc[TM][TN] = {};
    if (vec) {
        vectorized::accumulate<BM, BN, BK, TM, TN, true>(As, Bs, acc, A, lda, B, ldb, M, N, K, row0, col0, trow, tcol);
    } else {
        vectorized::accumulate<BM, BN, BK, TM, TN, false>(As, Bs, acc, A, lda, B, ldb, M, N, K, row0, col0, trow, tcol);
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + trow + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = col0 + tcol + j;
            if (row < M && col < N) {
                C[row * ldc + col] = gemm_epilogue(acc[i][j], alpha, beta, &C[row * ldc + col]);
            }
        }
    }
}
