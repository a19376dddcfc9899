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

#include "harness.cuh"

extern "C" __global__ void check_output(const void* buffer, long long size, long long offset, long long rows,
                                        long long cols, long long ld, int storage, unsigned guard_bits,
                                        const double* expected, const double* bound, unsigned long long* tally) {
    unsigned long long wrong = 0, nan = 0, first = ~0ull, changed = 0;
    double worst = 0.0, squares = 0.0;
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long p = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; p < size; p += stride) {
        const unsigned bits = stored_bits(buffer, p, storage);
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
