// reference_epilogue.cu -- not a GEMM: the float64 reference's epilogue and bound, computed
// where the reference's two products are (gemm_driver/device_epilogue.py).
//
// cuBLAS's DGEMM leaves value = op(A) @ op(B) and magnitude = |op(A)| @ |op(B)| in device
// memory (rows x cols, row-major, contiguous float64). reference_epilogue turns them, in
// place, into the expected D and the bound on each element of D, so that neither crosses
// PCIe: value <- epilogue(alpha op(A) op(B) + beta C + bias), magnitude <- the bound.
//
// The formulas are verify.reference's and verify.output_bound's, element by element, in the
// order the host evaluates them (each NumPy pass over an array is one operation here), and
// every step is one correctly rounded float64 operation: __dmul_rn / __dadd_rn, which the
// compiler never contracts into an FMA (an FMA rounds once where NumPy rounds twice), fabs
// and comparisons. So the expected values and bounds are the host's bit for bit, given the
// same products, except under GELU: pow and tanh are not correctly rounded, neither in CUDA
// (within the few ulp the CUDA Math API documents) nor in NumPy (libm, or SVML on AVX-512), so
// a GELU value may differ from the host's by a few ulp of v (tests/test_device_epilogue_gpu.py
// bounds that difference).
//
// The constants (alpha, the precision's bound factor, the slack, the output rounding, GELU's)
// come from the host, from the very Python values verify.py uses (device_epilogue.py), so no
// number is written twice. C is read as the output type stores it (decoded exactly, as the
// host's C holds the same values), the bias as float64 (its out_dtype values, exact).
//
// squares[block]: the sum of the block's expected values squared, for the reference's norm;
// the host adds the blocks' sums (the order differs from the host's dot product: the norm
// only scales the relative error, which decides nothing).

#include "harness.cuh"

enum Activation { NONE = 0, RELU = 1, GELU = 2 };

// np.maximum(x, y): x where x >= y or x is NaN, else y (NaN propagates, as NumPy's does; fmax
// would drop it).
__device__ __forceinline__ double numpy_maximum(double x, double y) {
    return (x >= y || isnan(x)) ? x : y;
}

// verify.activation's GELU, the tanh form 0.5 v (1 + tanh(scale (v + cubic v^3))), in the
// order the host evaluates it. pow and tanh are not correctly rounded (see the header).
__device__ __forceinline__ double gelu(double v, double cubic, double scale) {
    double inner = pow(v, 3.0);      // inner = v**3
    inner = __dmul_rn(inner, cubic);  // inner *= 0.044715
    inner = __dadd_rn(inner, v);      // inner += v
    inner = __dmul_rn(inner, scale);  // inner *= sqrt(2 / pi)
    inner = tanh(inner);              // np.tanh(inner, out=inner)
    inner = __dadd_rn(inner, 1.0);    // inner += 1.0
    const double out = __dmul_rn(0.5, v);  // out = 0.5 * v
    return __dmul_rn(out, inner);     // out *= inner
}

extern "C" __global__ void reference_epilogue(
        double* value, double* magnitude, long long rows, long long cols,
        const void* c, long long ldc, int c_storage,  // c: nullptr without a C term (beta 0)
        const double* bias, int activation,           // bias: nullptr without an epilogue
        double alpha, double abs_alpha, double beta, double abs_beta,
        double bound_factor, double slack, double tiny, double rounding, double output_floor,
        double gelu_slope, double gelu_evaluation, double gelu_cubic, double gelu_scale,
        double* squares) {
    const long long size = rows * cols, stride = static_cast<long long>(gridDim.x) * blockDim.x;
    double sum = 0.0;
    for (long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; e < size; e += stride) {
        const long long row = e / cols, col = e - row * cols;
        // verify.reference: value = alpha * (op(A) @ op(B)), magnitude = |alpha| * (|op(A)| @ |op(B)|)
        // (the host skips a factor of 1; x * 1 is x, bit for bit)
        double v = __dmul_rn(value[e], alpha);
        double m = __dmul_rn(magnitude[e], abs_alpha);
        if (c != nullptr) {  // value += beta * C; magnitude += |beta| * |C|
            const double stored = static_cast<double>(decode(stored_bits(c, row * ldc + col, c_storage), c_storage));
            v = __dadd_rn(v, __dmul_rn(beta, stored));
            m = __dadd_rn(m, __dmul_rn(abs_beta, fabs(stored)));
        }
        const double product = v;  // Reference.product: before the bias
        if (bias != nullptr) {     // value += bias; magnitude += |bias|
            v = __dadd_rn(v, bias[col]);
            m = __dadd_rn(m, fabs(bias[col]));
        }
        const double pre = v;  // Reference.pre: before the activation
        const double expected = activation == RELU ? numpy_maximum(pre, 0.0)
                              : activation == GELU ? gelu(pre, gelu_cubic, gelu_scale) : pre;

        // verify.error_bound: factor * magnitude, times the slack, plus FP32's smallest normal
        double error = __dadd_rn(__dmul_rn(__dmul_rn(bound_factor, m), slack), tiny);
        if (bias != nullptr) {  // error += rounding * (max(|product|, |pre|) + error)
            const double before = numpy_maximum(fabs(product), fabs(pre));
            error = __dadd_rn(error, __dmul_rn(__dadd_rn(before, error), rounding));
        }
        if (activation == GELU) {  // error = GELU_SLOPE * error + GELU_EVALUATION * |pre|
            error = __dmul_rn(error, gelu_slope);
            error = __dadd_rn(error, __dmul_rn(fabs(pre), gelu_evaluation));
        }
        // bound = rounding * (|value| + error) + error + the output type's floor
        double bound = __dmul_rn(__dadd_rn(fabs(expected), error), rounding);
        bound = __dadd_rn(bound, error);
        bound = __dadd_rn(bound, output_floor);

        value[e] = expected;
        magnitude[e] = bound;
        sum += expected * expected;
    }
    // The block's sum, in a fixed order (lanes, then warps): one word per block, no atomics,
    // so the same grid gives the same norm on every run.
    __shared__ double warp_sums[32];
    sum = warp_sum(sum);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (unsigned w = 0; w < (blockDim.x + 31) / 32; ++w) total += warp_sums[w];
        squares[blockIdx.x] = total;
    }
}

// x[i] = |x[i]| for `count` float64 values: op(A) and op(B) made |op(A)| and |op(B)| where they
// are, between the two products (fabs is exact; the host's np.abs gives the same values).
extern "C" __global__ void absolute_values(double* x, long long count) {
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        x[i] = fabs(x[i]);
    }
}
