// mma_ptx.cuh -- the warp-level tensor-core instructions of the mma_sync rung, as PTX:
// ldmatrix (x4, and .trans for B), mma.sync m16n8k16 (BF16, FP16) and m16n8k8 (TF32), and
// the FP32 -> TF32 rounding.
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16 / m16n8k8"), with
// g = lane / 4 and t = lane % 4:
//   A (16 x k): a0 = (row g, k-half 0), a1 = (row g + 8, k-half 0), a2 = (row g, k-half 1),
//               a3 = (row g + 8, k-half 1), each a 32-bit register (two 16-bit values, or one
//               TF32 value at column t of its half);
//   B (k x 8):  b0 = (k-half 0, column g), b1 = (k-half 1, column g);
//   C (16 x 8): c0, c1 = row g, columns 2t, 2t + 1; c2, c3 = row g + 8, the same columns.
// One ldmatrix.x4 fills a0..a3 when lanes 0-15 point at rows 0-15 of k-half 0 and lanes
// 16-31 at rows 0-15 of k-half 1; with .trans on a row-major (k x n) B tile, lanes 0-15
// pointing at k rows 0-15 of an 8-column chunk and lanes 16-31 at the next chunk give b0, b1
// of two adjacent n8 tiles.
#pragma once

namespace tc {

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(address));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(address));
}

__device__ __forceinline__ unsigned lds_32(unsigned address) {
    unsigned v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(address));
    return v;
}

// FP32 bits -> TF32 bits, rounded to nearest with ties away from zero (what cuBLAS's TF32
// mode does); the tensor core would otherwise just ignore the low 13 mantissa bits.
// TC_TF32_SKIP_ROUNDING (a test build's -D option, never a product build) hands the raw
// FP32 bits to the mma instead, to show that the TF32 check catches a kernel that skips it.
__device__ __forceinline__ unsigned to_tf32(unsigned fp32_bits) {
#ifdef TC_TF32_SKIP_ROUNDING
    return fp32_bits;
#else
    unsigned out;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(out) : "f"(__uint_as_float(fp32_bits)));
    return out;
#endif
}

template <typename T> struct Mma;

template <> struct Mma<__nv_bfloat16> {
    static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
};

template <> struct Mma<__half> {
    static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
};

// FP32 operands, already rounded to TF32 by to_tf32.
template <> struct Mma<float> {
    static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
};

}  // namespace tc
