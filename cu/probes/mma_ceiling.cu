// mma_ceiling.cu -- not a GEMM: the tensor-core ceilings that tools/mma_ceiling.py measures.
//
// What it measures: the most TFLOP/s one tensor-core instruction can deliver on this GPU
// when nothing else limits it, i.e. the roof a GEMM kernel built on that instruction can
// approach but not pass.
//   - mma_sync_probe<Op, CHAINS>: every warp issues CHAINS independent mma.sync chains
//     (m16n8k16 BF16 or FP16, m16n8k8 TF32; FP32 accumulators) on operands held in
//     registers: no memory traffic in the loop, and CHAINS accumulators so the pipe never
//     waits for a previous result.
//   - wgmma_probe<WARPGROUPS, PER_COMMIT> (sm_90a only): every warpgroup issues
//     wgmma.mma_async m64n256k16 BF16 with A and B read from shared memory (the Hopper
//     path: mma.sync cannot reach the datasheet rate), PER_COMMIT per commit group, one
//     group left in flight while the next is issued.
// Operand values come from a hash of a seed the host draws afresh each run; they are
// multiples of 1/16 below 1 in magnitude, so products and short sums are exact in FP32 and
// the host checks the results bit for bit before it believes any timing.
// Measured on the H100 80GB HBM3, driver 580, NVRTC 13.0 (results/h100-80gb-hbm3/mma-ceiling.json,
// median of 5 launches of ~0.14 s, data checked first):
//   mma.sync m16n8k16 BF16 659 TFLOP/s, FP16 659, m16n8k8 TF32 330 (4 chains; 8 chains
//   1% lower), with the SM clock at 1980 MHz throughout: 62% of the per-clock tensor peak
//   (4096 dense BF16 flop/clk/SM), so mma.sync alone cannot reach cuBLAS.
//   wgmma m64n256k16 BF16 927 TFLOP/s (one warpgroup per block, 1 or 2 blocks per SM;
//   2 or 3 warpgroups per block 912-916). Here the board hit its 700 W limit and NVML read
//   1665-1770 MHz: 927 is 99.5% of 132 SMs x 4096 flop/clk at ~1725 MHz. The wgmma
//   ceiling is power, not issue rate; the datasheet's 989 assumes 1830 MHz.
//
// No headers: inline PTX on 32-bit registers only.

// Element (row, col) of the probe's matrix `which` (0: A, 1: B): k/16 for k in -15..15.
// The host (tools/mma_ceiling.py, probe_value) computes the same numbers.
__device__ __forceinline__ float probe_value(unsigned seed, unsigned which, unsigned row, unsigned col) {
    unsigned h = seed + 1000003u * which + 97u * row + 31u * col;
    h ^= h >> 7;
    h *= 0x9E3779B1u;
    return (float)((int)((h >> 16) % 31u) - 15) * 0.0625f;
}

// Two floats as one register of two 16-bit values, `lo` in the low half (the lower column
// or k index, as the mma fragments want). cvt rounds to nearest; the values are exact anyway.
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

__device__ __forceinline__ unsigned pack_f16x2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// mma.sync.m16n8k16 with 16-bit A and B. Fragments (PTX ISA, "Matrix fragments for
// mma.m16n8k16"), g = lane / 4, t = lane % 4:
//   A (16x16, row): a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   B (16x8, col):  b0 = (k 2t..2t+1, n g), b1 = (k 2t+8.., n g)
template <bool BF16>
struct M16n8k16 {
    __device__ static unsigned pack(float lo, float hi) { return BF16 ? pack_bf16x2(lo, hi) : pack_f16x2(lo, hi); }

    __device__ static void load(unsigned (&a)[4], unsigned (&b)[2], unsigned seed, unsigned lane) {
        const unsigned g = lane / 4, t = lane % 4;
        for (int i = 0; i < 4; ++i) {
            const unsigned row = g + 8 * (i % 2), col = 2 * t + 8 * (i / 2);
            a[i] = pack(probe_value(seed, 0, row, col), probe_value(seed, 0, row, col + 1));
        }
        for (int i = 0; i < 2; ++i) {
            const unsigned k = 2 * t + 8 * i;
            b[i] = pack(probe_value(seed, 1, k, g), probe_value(seed, 1, k + 1, g));
        }
    }

    __device__ static void mma(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
        if (BF16) {
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                         "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                         : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
        } else {
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                         "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                         : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
        }
    }
};

// mma.sync.m16n8k8 TF32: one 32-bit element per register ("Matrix fragments for mma.m16n8k8", .tf32):
//   A (16x8, row): a0 = (g, t), a1 = (g+8, t), a2 = (g, t+4), a3 = (g+8, t+4)
//   B (8x8, col):  b0 = (k t, n g), b1 = (k t+4, n g)
// The values have 4 significant bits, so their FP32 bits are already TF32.
struct M16n8k8Tf32 {
    __device__ static void load(unsigned (&a)[4], unsigned (&b)[2], unsigned seed, unsigned lane) {
        const unsigned g = lane / 4, t = lane % 4;
        for (int i = 0; i < 4; ++i) a[i] = __float_as_uint(probe_value(seed, 0, g + 8 * (i % 2), t + 4 * (i / 2)));
        for (int i = 0; i < 2; ++i) b[i] = __float_as_uint(probe_value(seed, 1, t + 4 * i, g));
    }

    __device__ static void mma(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
};

// Each thread writes out[4 * thread + i] = sum over chains of accumulator i. Chain j starts
// at j, so the host expects CHAINS * (CHAINS - 1) / 2 + CHAINS * iters * D(i) with D the
// warp's 16x8 product: c0 = (g, 2t), c1 = (g, 2t+1), c2 = (g+8, 2t), c3 = (g+8, 2t+1).
template <class Op, int CHAINS>
__global__ void __launch_bounds__(256) mma_sync_probe(float* out, int iters, unsigned seed) {
    unsigned a[4], b[2];
    Op::load(a, b, seed, threadIdx.x % 32);
    float c[CHAINS][4];
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) {
#pragma unroll
        for (int i = 0; i < 4; ++i) c[j][i] = (float)j;
    }
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int j = 0; j < CHAINS; ++j) Op::mma(c[j], a, b);
    }
    float* mine = out + 4 * (blockIdx.x * blockDim.x + threadIdx.x);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < CHAINS; ++j) s += c[j][i];
        mine[i] = s;
    }
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Shared-memory layout for wgmma without swizzle, K-major: 8x8 "core matrices" (8 rows of
// 8 elements = 16 bytes, stored as 128 contiguous bytes), core (r/8, k/8) at
// ((r/8) * 2 + k/8) * 128 bytes for a 16-wide K. Two cores adjacent in K are 128 bytes apart
// (the descriptor's leading byte offset), two adjacent in M or N 256 bytes (stride offset).
__device__ __forceinline__ unsigned core_offset(unsigned row, unsigned k) {
    return ((row / 8) * 2 + k / 8) * 64 + (row % 8) * 8 + k % 8;  // in 16-bit elements
}

__device__ __forceinline__ unsigned long long smem_descriptor(const void* tile) {
    unsigned addr;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(addr) : "l"(tile));
    const unsigned long long leading = 128, stride = 256;  // bytes, see core_offset
    // bits 0-13 address >> 4, 16-29 leading >> 4, 32-45 stride >> 4, 62-63 swizzle (0: none)
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((leading >> 4) << 16) | ((stride >> 4) << 32);
}

__device__ __forceinline__ unsigned short bf16_bits(float v) {  // exact for the probe's values
    return (unsigned short)(__float_as_uint(v) >> 16);
}

#define WG_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
                 "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])

// D (64x256, FP32, 128 registers per thread) += A (64x16 from shared) * B (256x16 from shared)^T.
__device__ __forceinline__ void wgmma_m64n256k16_bf16(float (&d)[128], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
        : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24), WG_D8(32), WG_D8(40), WG_D8(48), WG_D8(56),
          WG_D8(64), WG_D8(72), WG_D8(80), WG_D8(88), WG_D8(96), WG_D8(104), WG_D8(112), WG_D8(120)
        : "l"(a), "l"(b), "r"(1));
}

// Block 0's first warpgroup writes its whole D to d_out (thread t, register r at 128 t + r);
// every thread writes the sum of its 128 registers to sums. The host expects
// D = iters * PER_COMMIT * A B^T, laid out as wgmma's accumulator fragment: warp w of the
// warpgroup, g = lane / 4, t = lane % 4, register r holds
// (row 16 w + g + 8 ((r / 2) % 2), column 8 (r / 4) + 2 t + r % 2).
template <int WARPGROUPS, int PER_COMMIT>
__global__ void __launch_bounds__(128 * WARPGROUPS) wgmma_probe(float* d_out, float* sums, int iters, unsigned seed) {
    __shared__ __align__(128) unsigned short a_tile[64 * 16];
    __shared__ __align__(128) unsigned short b_tile[256 * 16];
    for (unsigned i = threadIdx.x; i < 64 * 16; i += blockDim.x)
        a_tile[core_offset(i / 16, i % 16)] = bf16_bits(probe_value(seed, 0, i / 16, i % 16));
    for (unsigned i = threadIdx.x; i < 256 * 16; i += blockDim.x)
        b_tile[core_offset(i / 16, i % 16)] = bf16_bits(probe_value(seed, 1, i / 16, i % 16));
    // Ordinary stores, read next by the tensor cores (the async proxy): fence, then barrier.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    const unsigned long long a = smem_descriptor(a_tile), b = smem_descriptor(b_tile);

    float d[128];
#pragma unroll
    for (int r = 0; r < 128; ++r) d[r] = 0.0f;
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int j = 0; j < PER_COMMIT; ++j) wgmma_m64n256k16_bf16(d, a, b);
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");

    float s = 0.0f;
#pragma unroll
    for (int r = 0; r < 128; ++r) s += d[r];
    sums[blockIdx.x * blockDim.x + threadIdx.x] = s;
    if (blockIdx.x == 0 && threadIdx.x < 128) {
#pragma unroll
        for (int r = 0; r < 128; ++r) d_out[128 * threadIdx.x + r] = d[r];
    }
}
#endif
