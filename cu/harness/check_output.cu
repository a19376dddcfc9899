// check_output.cu -- not a GEMM: the verdict on D, computed where D is.
//
// One pass over C's whole guarded buffer (gemm_driver/device_check.py). An element inside
// the matrix (rows x cols at leading dimension ld, starting `offset` elements in) is decoded
// to float (FP32, or BF16/FP16 bits) and held to the float64 reference and bound exactly as
// verify.check does on the host: error = |double(got) - expected|, wrong when it is not
// <= the bound (so NaN is wrong). An element outside it (guard rows, alignment lead, the
// padding between cols and ld) must still hold the guard pattern. The tally:
//   [0] wrong elements, [1] NaN among them, [2] the first wrong one (row * cols + col),
//   [3] the worst error / bound (double bits: non-negative doubles order as integers),
//   [4] guard elements changed, [5] the sum of squared errors (a double).
// The host sets it to {0, 0, ~0, 0, 0, 0.0} before the launch.

enum Storage { FP32 = 0, BF16 = 1, FP16 = 2 };

__device__ __forceinline__ float decode(unsigned bits, int storage) {
    if (storage == FP32) return __uint_as_float(bits);
    if (storage == BF16) return __uint_as_float(bits << 16);  // BF16 is FP32's upper half: exact
    float value;
    unsigned short half = static_cast<unsigned short>(bits);
    asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(half));  // exact: every FP16 value is an FP32 value
    return value;
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
    for (int lane = 16; lane; lane >>= 1) v += __shfl_down_sync(0xffffffffu, v, lane);
    return v;
}

extern "C" __global__ void check_output(const void* buffer, long long size, long long offset, long long rows,
                                        long long cols, long long ld, int storage, unsigned guard_bits,
                                        const double* expected, const double* bound, unsigned long long* tally) {
    unsigned long long wrong = 0, nan = 0, first = ~0ull, changed = 0;
    double worst = 0.0, squares = 0.0;
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long p = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; p < size; p += stride) {
        const unsigned bits = storage == FP32 ? static_cast<const unsigned*>(buffer)[p]
                                              : static_cast<const unsigned short*>(buffer)[p];
        const long long q = p - offset, row = q >= 0 ? q / ld : -1, col = q - row * ld;
        if (q < 0 || row >= rows || col >= cols) {
            changed += bits != guard_bits;
            continue;
        }
        const float got = decode(bits, storage);
        const long long element = row * cols + col;
        const double error = fabs(static_cast<double>(got) - expected[element]), limit = bound[element];
        if (!(error <= limit)) {
            ++wrong;
            nan += isnan(got) ? 1 : 0;
            first = min(first, static_cast<unsigned long long>(element));
        }
        squares += error * error;
        const double ratio = error / limit;
        if (ratio > worst) worst = ratio;  // a NaN ratio never compares greater: NaN is counted above
    }
    wrong = warp_sum(wrong);
    nan = warp_sum(nan);
    changed = warp_sum(changed);
    squares = warp_sum(squares);
    for (int lane = 16; lane; lane >>= 1) {
        first = min(first, __shfl_down_sync(0xffffffffu, first, lane));
        worst = fmax(worst, __shfl_down_sync(0xffffffffu, worst, lane));
    }
    if ((threadIdx.x & 31) == 0) {
        if (wrong) {
            atomicAdd(&tally[0], wrong);
            atomicAdd(&tally[1], nan);
            atomicMin(&tally[2], first);
        }
        if (worst > 0.0) atomicMax(&tally[3], static_cast<unsigned long long>(__double_as_longlong(worst)));
        if (changed) atomicAdd(&tally[4], changed);
        if (squares != 0.0) atomicAdd(reinterpret_cast<double*>(&tally[5]), squares);
    }
}
