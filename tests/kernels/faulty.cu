// faulty.cu -- kernels that break the run rather than the answer: one faults (an illegal
// address, which leaves the CUDA context in a sticky error) and one never returns. The
// fault-isolation tests register them (tests/kernels/faulty_specs.py, through
// GEMM_DRIVER_EXTRA_KERNELS) and bench them between good kernels: the good kernels'
// results must survive, these must be FAILED under their own names.

#define GEMM_ARGS int M, int N, int K, float alpha, const float* A, int lda, \
                  const float* B, int ldb, float beta, float* C, int ldc

// A store far outside any allocation: CUDA_ERROR_ILLEGAL_ADDRESS, sticky for the context.
extern "C" __global__ void sgemm_illegal_address(GEMM_ARGS) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        volatile float* wild = reinterpret_cast<volatile float*>(C) + (1ull << 40);
        *wild = alpha;
    }
}

// Never returns: the watchdog must report it and stop its worker.
extern "C" __global__ void sgemm_spins_forever(GEMM_ARGS) {
    for (;;) {
        asm volatile("nanosleep.u32 1000;");  // a side effect the compiler must keep
    }
}
