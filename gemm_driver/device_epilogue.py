"""The float64 reference kept on the GPU, for a large case whose D is checked there.

A large case's reference used to go round PCIe: cuBLAS's DGEMM computed op(A) @ op(B) and
|op(A)| @ |op(B)| on the GPU (device_reference.py), both came down as float64 (8 bytes an
element of D, up to 4.3 GB each on a validation shape), the host applied alpha, beta C, the
bias and the activation (verify.reference) and the bound (verify.output_bound) in float64,
and the expected values and the bound went up again for the check of D on the GPU
(device_check.py). On the H100 a BF16 validation run of 131 shapes spent 160 s of its 341 s
verifying, most of it there; with the reference kept on the GPU the same run spent 52 s of
165 (results/h100-80gb-hbm3/phases-corpus-validate-bf16.txt). Here the two products stay in
device memory and cu/harness/reference_epilogue.cu turns them, in place, into the expected
values and the bound, with the formulas of verify.py
in the host's order (the same bits, given the same products; GELU within a few ulp, its pow
and tanh not being correctly rounded); the reference's norm is summed there too. What
crosses PCIe is op(A) and op(B) (as float64, once each: their absolute values are made on the
GPU), the bias (N values) and a word per block of the norm's sum.

It serves a case when ``keeps_reference_on_device``: its D is checked on the GPU, its
products come from the GPU (device_reference.GpuProducts: batch 1 from HOST_FLOPS up, FP8's
dequantized operands included) and it is not empty. Batched and small cases keep the host's
reference; PreparedCase.reference still computes it on the host for whoever asks.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import astuple, dataclass, fields

import numpy as np

from . import precision as _precision
from . import verify
from .cuda.memory import DeviceBuffer
from .device_check import STORAGE, THREADS, ReferenceOnDevice, grid_blocks
from .device_reference import GpuProducts, dgemm
from .problem import GemmProblem

SOURCE = "cu/harness/reference_epilogue.cu"
EPILOGUE_ENTRY, ABSOLUTE_ENTRY = "reference_epilogue", "absolute_values"
ACTIVATION = {"none": 0, "bias": 0, "bias_relu": 1, "bias_gelu": 2}  # reference_epilogue.cu's Activation
ABSOLUTE_SIGNATURE = ("ptr", "long long")


def keeps_reference_on_device(problem: GemmProblem, products, checks_on_device: bool) -> bool:
    """Whether a case computes its reference where D is checked: D checked on the GPU, its
    products from the GPU (``GpuProducts``), one GEMM (the kernel reads one matrix) with a product."""
    return checks_on_device and isinstance(products, GpuProducts) and problem.batch == 1 and not problem.is_empty


@dataclass(frozen=True)
class EpilogueScalars:
    """reference_epilogue.cu's float64 arguments, in its order: the values verify.py uses."""

    alpha: float
    abs_alpha: float
    beta: float
    abs_beta: float
    bound_factor: float  # the precision's factor for K terms (K + 1 with a bias): verify.error_bound
    slack: float
    tiny: float  # FP32's smallest normal, added to every bound
    rounding: float  # the output type's half ulp, relative (0 for FP32)
    output_floor: float
    gelu_slope: float
    gelu_evaluation: float
    gelu_cubic: float
    gelu_scale: float


# value, magnitude, rows, cols, C (pointer, ld, storage), bias, activation, the EpilogueScalars, squares
EPILOGUE_SIGNATURE = ("ptr", "ptr", "long long", "long long", "ptr", "long long", "int", "ptr", "int",
                      *("double",) * len(fields(EpilogueScalars)), "ptr")


def epilogue_scalars(problem: GemmProblem, precision: str) -> EpilogueScalars:
    """The constants of ``problem``'s reference and bound in ``precision``, as verify.py takes them."""
    return EpilogueScalars(
        alpha=float(problem.alpha), abs_alpha=float(abs(problem.alpha)),
        beta=float(problem.beta), abs_beta=float(abs(problem.beta)),
        bound_factor=float(_precision.get(precision).bound_factor(problem.k + int(problem.has_bias))),
        slack=float(verify.SLACK), tiny=float(np.finfo(np.float32).tiny),
        rounding=float(_precision.OUTPUT_ROUNDING[problem.out_dtype]),
        output_floor=float(_precision.OUTPUT_FLOOR[problem.out_dtype]),
        gelu_slope=float(_precision.GELU_SLOPE), gelu_evaluation=float(_precision.GELU_EVALUATION),
        gelu_cubic=float(verify.GELU_CUBIC), gelu_scale=float(verify.GELU_TANH_SCALE))


def reference_on_device(session, problem: GemmProblem, precision: str, a: np.ndarray, b: np.ndarray,
                        c=None, bias: np.ndarray | None = None) -> tuple[ReferenceOnDevice, float]:
    """The expected D and its bound in device memory, and the reference's norm (||value||_2),
    from the host's ``a`` and ``b`` in their stored shapes (as verify.reference takes them), C
    as the device holds it (``c``: its DeviceMatrix holding C's input values, read when
    beta != 0; None: no C term) and the host's ``bias``."""
    value, magnitude = device_products(session, problem, a, b)
    try:
        norm = apply_epilogue(session, problem, precision, value, magnitude, c, bias)
    except BaseException:
        value.close()
        magnitude.close()
        raise
    return ReferenceOnDevice((problem.m, problem.n), value, magnitude), norm


def device_products(session, problem: GemmProblem, a: np.ndarray, b: np.ndarray) -> tuple[DeviceBuffer, DeviceBuffer]:
    """op(A) @ op(B) and |op(A)| @ |op(B)| (M x N float64) in device memory, by the DGEMM that
    float64_matmul runs on the same contiguous float64 operands; op(A) and op(B) go up once and
    are made |op(A)| and |op(B)| where they are between the two products."""
    if problem.batch != 1 or problem.is_empty:
        raise ValueError(f"the reference's products on the device take one non-empty GEMM, not {problem}")
    m, n, k = problem.m, problem.n, problem.k
    session.context.make_current()
    products: list[DeviceBuffer] = []
    try:
        with DeviceBuffer.from_array(_op64(a, problem.trans_a)) as x, \
                DeviceBuffer.from_array(_op64(b, problem.trans_b)) as y:
            products.append(DeviceBuffer(8 * m * n))
            dgemm(session, m, n, k, x, y, products[0])
            _absolute(session, x, m * k)
            _absolute(session, y, k * n)
            products.append(DeviceBuffer(8 * m * n))
            dgemm(session, m, n, k, x, y, products[1])
            session.stream.synchronize()  # x and y are freed on leaving: the products must be done with them
    except BaseException:
        for buffer in products:
            buffer.close()
        raise
    return products[0], products[1]


def apply_epilogue(session, problem: GemmProblem, precision: str, value: DeviceBuffer, magnitude: DeviceBuffer,
                   c=None, bias: np.ndarray | None = None) -> float:
    """Turn the products ``value`` and ``magnitude`` into the expected D and its bound, in place
    (reference_epilogue.cu), and give the reference's norm. ``c``: C's DeviceMatrix holding its
    input values in the out_dtype (read when beta != 0; None: no C term, as the host's None);
    ``bias``: the host's bias vector (N values of the out_dtype; needed with an epilogue)."""
    m, n = problem.m, problem.n
    if problem.has_bias and (bias is None or bias.shape != (n,)):
        raise ValueError(f"epilogue {problem.epilogue!r} needs a bias of shape ({n},), "
                         f"got {None if bias is None else bias.shape}")
    with_c = problem.beta != 0 and c is not None
    if with_c and ((c.rows, c.cols) != (m, n) or c.itemsize != _precision.get(problem.out_dtype).itemsize):
        raise ValueError(f"C is a {c.rows}x{c.cols} matrix of {c.itemsize}-byte elements, not {m}x{n} of "
                         f"{problem.out_dtype}")
    session.context.make_current()
    kernel = session.harness_kernel(SOURCE, EPILOGUE_ENTRY, EPILOGUE_SIGNATURE)
    blocks = grid_blocks(session, m * n)
    with contextlib.ExitStack() as owned:
        squares = owned.enter_context(DeviceBuffer(8 * blocks))
        bias_ptr = 0  # the kernel's nullptr: no bias
        if problem.has_bias:  # N float64 values, exact (the out_dtype's)
            bias_ptr = owned.enter_context(DeviceBuffer.from_array(np.ascontiguousarray(bias, np.float64))).ptr
        args = kernel.pack(value.ptr, magnitude.ptr, m, n, c.ptr if with_c else 0, c.ld if with_c else 0,
                           STORAGE[problem.out_dtype], bias_ptr, ACTIVATION[problem.epilogue],
                           *astuple(epilogue_scalars(problem, precision)), squares.ptr)
        kernel.launch((blocks, 1, 1), (THREADS, 1, 1), args, session.stream)
        session.stream.synchronize()  # the download below is not ordered after the non-blocking stream
        sums = squares.download(np.empty(blocks, np.float64))
    return math.sqrt(math.fsum(sums))


def _op64(x: np.ndarray, trans: bool) -> np.ndarray:
    """op(X) as a contiguous float64 array, the copy float64_matmul makes of verify's operand."""
    return np.ascontiguousarray(x.T if trans else x, dtype=np.float64)


def _absolute(session, buffer: DeviceBuffer, count: int) -> None:
    kernel = session.harness_kernel(SOURCE, ABSOLUTE_ENTRY, ABSOLUTE_SIGNATURE)
    kernel.launch((grid_blocks(session, count), 1, 1), (THREADS, 1, 1), kernel.pack(buffer.ptr, count), session.stream)

