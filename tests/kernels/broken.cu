// broken.cu -- deliberately wrong GEMM kernels. The test suite runs them to prove that
// the verification harness catches each class of bug; none of them is registered.
#include "simt/gemm_common.cuh"

#define GEMM_ARGS int M, int N, int K, float alpha, const float* A, int lda, \
                  const float* B, int ldb, float beta, float* C, int ldc

__device__ float dot_row_col(int row, int col, int K, const float* A, int lda, const float* B, int ldb) {
    float acc = 0.0f;
    for (int i = 0; i < K; ++i) acc += A[row * lda + i] * B[i * ldb + col];
    return acc;
}

// Correct values, plus one extra store just past the end of each row of C.
extern "C" __global__ void writes_past_row(GEMM_ARGS) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    C[row * ldc + col] = gemm_epilogue(dot_row_col(row, col, K, A, lda, B, ldb), alpha, beta, &C[row * ldc + col]);
    if (col == N - 1) C[row * ldc + N] = 0.0f;
}

// Reads C even when beta == 0 (0 * NaN poison = NaN).
extern "C" __global__ void reads_c_always(GEMM_ARGS) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    C[row * ldc + col] = alpha * dot_row_col(row, col, K, A, lda, B, ldb) + beta * C[row * ldc + col];
}

// Forgets the last row of C.
extern "C" __global__ void skips_last_row(GEMM_ARGS) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M - 1 || col >= N) return;
    C[row * ldc + col] = gemm_epilogue(dot_row_col(row, col, K, A, lda, B, ldb), alpha, beta, &C[row * ldc + col]);
}

// Reads one element past the end of each row of A (lda > K exposes it: the padding is NaN).
extern "C" __global__ void reads_past_a_row(GEMM_ARGS) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int i = 0; i <= K; ++i) acc += A[row * lda + i] * (i < K ? B[i * ldb + col] : 1.0f);
    C[row * ldc + col] = gemm_epilogue(acc, alpha, beta, &C[row * ldc + col]);
}

// Truncates the running sum to bfloat16 after each step: right to about 1e-2, far
// outside the float32 bound, though no NaN and no stray write.
extern "C" __global__ void low_precision(GEMM_ARGS) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int i = 0; i < K; ++i) acc = __uint_as_float(__float_as_uint(acc + A[row * lda + i] * B[i * ldb + col]) & 0xFFFF0000u);
    C[row * ldc + col] = gemm_epilogue(acc, alpha, beta, &C[row * ldc + col]);
}
