// common/epilogue.cuh -- a linear layer's D = act(alpha * acc + beta * C + bias), rounded once to
// D's type: the output types and the fused epilogue every family that writes such a D shares
// (the Hopper kernels' hopper_epilogue.cuh, mma_sync.cu).
//
// The output type (OUT: FP32, BF16 or FP16; D, C and the bias share it) and the epilogue (EPI:
// none, + bias, + bias then ReLU, + bias then GELU) are template arguments, so each combination
// is its own build and the FP32, no-bias path compiles to what it was. Values stay FP32 until
// the store, which rounds once to nearest even (cvt.rn.bf16x2.f32 and .f16x2: sm_80 and later).
#pragma once

namespace output {

// ---------------------------------------------------------------- output types
enum OutId { OUT_FP32 = 0, OUT_BF16 = 1, OUT_FP16 = 2 };

// 16-bit conversions in PTX (cvt.rn: round to nearest even, what __float2bfloat16_rn and
// __float2half_rn do), on the values' bits: no CUDA header is needed.
struct Bf16Cvt {
    static __device__ __forceinline__ float to_float(unsigned short h) {
        return __uint_as_float(static_cast<unsigned>(h) << 16);
    }
    static __device__ __forceinline__ unsigned short round(float v) {
        unsigned short h;
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
        return h;
    }
    // x in the low half (the lower address), y in the high half
    static __device__ __forceinline__ unsigned round2(float x, float y) {
        unsigned r;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(y), "f"(x));
        return r;
    }
};
struct Fp16Cvt {
    static __device__ __forceinline__ float to_float(unsigned short h) {
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
        return f;
    }
    static __device__ __forceinline__ unsigned short round(float v) {
        unsigned short h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
        return h;
    }
    static __device__ __forceinline__ unsigned round2(float x, float y) {
        unsigned r;
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(y), "f"(x));
        return r;
    }
};

// Loads and stores of 1, 2 and 4 consecutive elements of the output type, as FP32 values.
// Callers align pairs to 2 and quads to 4 elements.
template <int OUT> struct OutType {
    using T = float;
    static __device__ __forceinline__ float value(T bits) { return bits; }
    static __device__ __forceinline__ float load(const T* p) { return *p; }
    static __device__ __forceinline__ float2 load2(const T* p) { return *reinterpret_cast<const float2*>(p); }
    static __device__ __forceinline__ float4 load4(const T* p) { return *reinterpret_cast<const float4*>(p); }
    static __device__ __forceinline__ void store(T* p, float v) { *p = v; }
    static __device__ __forceinline__ void store2(T* p, float x, float y) {
        *reinterpret_cast<float2*>(p) = make_float2(x, y);
    }
    static __device__ __forceinline__ void store4(T* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
};

template <class Cvt> struct Out16 {
    using T = unsigned short;
    static __device__ __forceinline__ float value(T bits) { return Cvt::to_float(bits); }
    static __device__ __forceinline__ float load(const T* p) { return Cvt::to_float(*p); }
    static __device__ __forceinline__ float2 unpack(unsigned w) {
        return make_float2(Cvt::to_float(static_cast<unsigned short>(w & 0xFFFFu)),
                           Cvt::to_float(static_cast<unsigned short>(w >> 16)));
    }
    static __device__ __forceinline__ float2 load2(const T* p) { return unpack(*reinterpret_cast<const unsigned*>(p)); }
    static __device__ __forceinline__ float4 load4(const T* p) {
        const uint2 w = *reinterpret_cast<const uint2*>(p);
        const float2 lo = unpack(w.x), hi = unpack(w.y);
        return make_float4(lo.x, lo.y, hi.x, hi.y);
    }
    static __device__ __forceinline__ void store(T* p, float v) { *p = Cvt::round(v); }
    static __device__ __forceinline__ void store2(T* p, float x, float y) {
        *reinterpret_cast<unsigned*>(p) = Cvt::round2(x, y);
    }
    static __device__ __forceinline__ void store4(T* p, float4 v) {
        *reinterpret_cast<uint2*>(p) = make_uint2(Cvt::round2(v.x, v.y), Cvt::round2(v.z, v.w));
    }
};
template <> struct OutType<OUT_BF16> : Out16<Bf16Cvt> {};
template <> struct OutType<OUT_FP16> : Out16<Fp16Cvt> {};

// ---------------------------------------------------------------- the epilogue
enum EpiId { EPI_NONE = 0, EPI_BIAS = 1, EPI_BIAS_RELU = 2, EPI_BIAS_GELU = 3 };

// GELU, tanh form: 0.5 v (1 + tanh(u)) with u = sqrt(2/pi) (v + 0.044715 v^3), with the tensor
// core's neighbour, the MUFU unit, doing tanh in one instruction (tanh.approx.f32, sm_75 and later:
// about 2^-11 relative error, which precision.py's GELU_EVALUATION charges). MUFU gives 16 results
// per clock and SM against 128 FMAs, so its count sets the epilogue's pace: one here, where the
// exp and reciprocal form (v / (1 + exp(-2u))) took two. 0.5 v + 0.5 v tanh(u) is one FMA.
__device__ __forceinline__ float gelu_tanh(float v) {
    const float u = v * fmaf(0.0356774081363f * v, v, 0.7978845608028f);
    float t;
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(u));
    const float half = 0.5f * v;
    return fmaf(half, t, half);
}

// v = alpha * acc + beta * C (the caller's), then + bias[col], then the activation; the store
// rounds to the output type. bias holds N elements of the output type (read when EPI != NONE).
template <int OUT, int EPI>
struct Epilogue {
    using Out = OutType<OUT>;
    using T = typename Out::T;
    static constexpr bool HAS_BIAS = EPI != EPI_NONE;
    float alpha, beta;
    const T* __restrict__ bias;
    int N;

    // bias[col], 0 past N (columns a TMA store clips are computed all the same); no load for EPI_NONE
    __device__ __forceinline__ float bias_at(int col) const {
        if constexpr (EPI == EPI_NONE) return 0.0f;
        else return col < N ? Out::load(bias + col) : 0.0f;
    }
    // bias[col] as stored, 0 past N (or without a bias). Held across a k loop as it was loaded
    // (Out::value converts it at the epilogue), the load is one predicated instruction that nothing
    // waits for until then: converted at once, the first use made the warp wait for it there.
    __device__ __forceinline__ T bias_bits(int col) const {
        if constexpr (EPI == EPI_NONE) return T(0);
        else return col < N ? bias[col] : T(0);
    }
    // bias[col], bias[col + 1] (col even) as stored, 16-bit types: one 32-bit load where aligned
    __device__ __forceinline__ unsigned bias_pair_bits(int col) const {
        static_assert(sizeof(T) == 2, "16-bit output types");
        const T* p = bias + col;
        if (col + 1 < N && (reinterpret_cast<unsigned long long>(p) & 3ull) == 0)
            return *reinterpret_cast<const unsigned*>(p);
        return (col < N ? static_cast<unsigned>(p[0]) : 0u) | (col + 1 < N ? static_cast<unsigned>(p[1]) << 16 : 0u);
    }
    __device__ __forceinline__ float finish(float v, float b) const {
        if constexpr (EPI != EPI_NONE) v += b;
        if constexpr (EPI == EPI_BIAS_RELU) v = fmaxf(v, 0.0f);
        if constexpr (EPI == EPI_BIAS_GELU) v = gelu_tanh(v);
        return v;
    }
};

// Whether C's rows can take pair stores: the base aligned to two elements and ldc even.
template <class T>
__device__ __forceinline__ bool c_pairs_aligned(const T* C, int ldc) {
    return (ldc & 1) == 0 && (reinterpret_cast<unsigned long long>(C) & (2 * sizeof(T) - 1)) == 0;
}

}  // namespace output
