"""A cuBLASLt problem, validated, and its descriptors: host objects, no GPU needed.

Precisions (``LT_PRECISIONS``), all with FP32 compute, FP32 alpha/beta and an FP32 C:
fp32 (no TF32), tf32 (``CUBLAS_COMPUTE_32F_FAST_TF32``), bf16, fp16 and fp8 (e4m3 A and B).
cuBLASLt's FP8 kernels want the "TN" layout: both operands K-contiguous. In row-major
terms A is stored as usual (M x K) but B must be stored transposed, N x K row-major
(``b_k_major=True``); and k, lda, ldb must be multiples of 16 elements with 16-byte
aligned A and B. :func:`validate` refuses anything else with the rule it breaks. The
row-major swap is :func:`.cublas.column_major_call`, written once there.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from . import cublas
from .cublas import ComputeType, DataType, Operation
from .cublaslt_binding import _LAYOUT_ATTRIBUTES, _DESC_TRANSA, _DESC_TRANSB, _create, _get_int, _library, _Owned
from .errors import UnsupportedProblem

CUDA_R_8F_E4M3 = 28  # cudaDataType_t (library_types.h); not in cublas.DataType, which has no FP8
MAX_ALIGNMENT = 256  # cuBLASLt's default assumption for every pointer (MIN_ALIGNMENT_*_BYTES)
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class LtPrecision:
    """Storage and compute types of one precision; every one computes and scales in FP32."""

    name: str
    ab_type: int  # cudaDataType_t of A and B
    compute: int  # cublasComputeType_t
    ab_bytes: int
    needs_k_major_b: bool = False  # FP8: cuBLASLt runs only the "TN" layout
    k_multiple: int = 1  # k, lda and ldb must be multiples of this (elements)


LT_PRECISIONS: dict[str, LtPrecision] = {p.name: p for p in (
    LtPrecision("fp32", DataType.CUDA_R_32F, ComputeType.CUBLAS_COMPUTE_32F, 4),
    LtPrecision("tf32", DataType.CUDA_R_32F, ComputeType.CUBLAS_COMPUTE_32F_FAST_TF32, 4),
    LtPrecision("bf16", DataType.CUDA_R_16BF, ComputeType.CUBLAS_COMPUTE_32F, 2),
    LtPrecision("fp16", DataType.CUDA_R_16F, ComputeType.CUBLAS_COMPUTE_32F, 2),
    LtPrecision("fp8", CUDA_R_8F_E4M3, ComputeType.CUBLAS_COMPUTE_32F, 1, needs_k_major_b=True, k_multiple=16),
)}

# --- the problem, validated, and its descriptors (host only) ---------------------------
@dataclass(frozen=True)
class LtProblem:
    """Row-major C (m x n, ldc) = alpha * A (m x k, lda) @ B + beta * C in ``precision``.

    B is k x n row-major (ldb >= n), or with ``b_k_major`` stored transposed: n x k
    row-major (ldb >= k), i.e. column-major B, the only layout cuBLASLt's FP8 takes.
    """

    m: int
    n: int
    k: int
    precision: str
    lda: int
    ldb: int
    ldc: int
    b_k_major: bool = False

    @classmethod
    def packed(cls, m: int, n: int, k: int, precision: str, b_k_major: bool = False) -> "LtProblem":
        """The problem with the tightest leading dimensions."""
        return cls(m, n, k, precision, k, k if b_k_major else n, n, b_k_major)


def validate(problem: LtProblem) -> LtPrecision:
    """The problem's precision; UnsupportedProblem naming the first rule the problem breaks."""
    if problem.precision not in LT_PRECISIONS:
        raise ValueError(f"unknown precision {problem.precision!r}; choose from {', '.join(LT_PRECISIONS)}")
    p, q = LT_PRECISIONS[problem.precision], problem
    mult = p.k_multiple
    rules = (
        ("m, n, k >= 1 (callers short-cut empty problems before cuBLASLt)", min(q.m, q.n, q.k) >= 1),
        ("sizes < 2**31", max(q.m, q.n, q.k, q.lda, q.ldb, q.ldc) <= _INT32_MAX),
        (f"{p.name} B stored K-major (b_k_major=True: n x k row-major, cuBLASLt's FP8 'TN' layout)",
         q.b_k_major or not p.needs_k_major_b),
        (f"{p.name} k, lda and ldb multiples of {mult} elements (16 bytes)",
         q.k % mult == 0 and q.lda % mult == 0 and q.ldb % mult == 0),
        ("ldb >= k for a K-major B", not q.b_k_major or q.ldb >= q.k),
    )
    for rule, ok in rules:
        if not ok:
            raise UnsupportedProblem(f"cuBLASLt GEMM needs {rule}; got {_describe_problem(q)}")
    _swap(q)  # the row-major rules lda >= k, ldb >= n, ldc >= n
    return p


def _describe_problem(q: LtProblem) -> str:
    return (f"{q.precision} m={q.m}, n={q.n}, k={q.k}, lda={q.lda}, ldb={q.ldb}, ldc={q.ldc}, "
            f"b_k_major={q.b_k_major}")


@dataclass(frozen=True)
class LtOperand:
    """One column-major layout cuBLASLt sees, and which row-major buffer it is."""

    source: str  # "a", "b" or "c"
    rows: int
    cols: int
    ld: int
    op: int  # cublasOperation_t applied to it


def _swap(q: LtProblem) -> tuple[LtOperand, LtOperand, LtOperand]:
    """cuBLASLt's (A, B, C) for the row-major problem: C^T = B^T A^T, column-major.

    cublas.column_major_call gives the (n, m, k) call with B first. A row-major K x N B
    read column-major is N x K (op N); a K-major B (n x k row-major) read column-major is
    K x N, so cuBLASLt transposes it (op T): that is the "TN" of FP8.
    """
    cm = cublas.column_major_call(q.m, q.n, q.k, q.lda, q.ldb, q.ldc, trans_b=q.b_k_major)
    assert cm.first == "b" and cm.second == "a"
    first_shape = (cm.k, cm.m) if q.b_k_major else (cm.m, cm.k)  # B as stored, read column-major
    first = LtOperand("b", *first_shape, cm.ld_first, cm.op_first)
    second = LtOperand("a", cm.k, cm.n, cm.ld_second, cm.op_second)
    return first, second, LtOperand("c", cm.m, cm.n, cm.ldc, Operation.N)


class _Layout(_Owned):
    def __init__(self, data_type: int, operand: LtOperand):
        lib = _library()
        raw = _create(lib.cublasLtMatrixLayoutCreate, data_type, operand.rows, operand.cols, operand.ld)
        self._own(raw, lib.cublasLtMatrixLayoutDestroy)
        self.operand = operand

    def attribute(self, name: str) -> int:
        """A layout attribute read back from cuBLASLt (type, order, rows, cols, ld)."""
        return _get_int(_library().cublasLtMatrixLayoutGetAttribute, self.ptr, _LAYOUT_ATTRIBUTES[name])


class _Desc(_Owned):
    def __init__(self, compute: int):
        lib = _library()
        self._own(_create(lib.cublasLtMatmulDescCreate, compute, DataType.CUDA_R_32F), lib.cublasLtMatmulDescDestroy)

    def set(self, attribute: int, value: ctypes._SimpleCData) -> None:
        _library().cublasLtMatmulDescSetAttribute(self.ptr, attribute, ctypes.byref(value), ctypes.sizeof(value))


class _Preference(_Owned):
    def __init__(self):
        lib = _library()
        self._own(_create(lib.cublasLtMatmulPreferenceCreate), lib.cublasLtMatmulPreferenceDestroy)

    def set(self, attribute: int, value: ctypes._SimpleCData) -> None:
        _library().cublasLtMatmulPreferenceSetAttribute(self.ptr, attribute, ctypes.byref(value),
                                                         ctypes.sizeof(value))


class MatmulDescriptors:
    """The matmul descriptor and the three layouts of one problem (C's serves D too).

    Host objects only: they can be built and read back without a GPU."""

    def __init__(self, problem: LtProblem):
        self.problem, self.precision = problem, validate(problem)
        first, second, c = _swap(problem)
        p = self.precision
        self._parts: list[_Owned] = []
        try:
            self.desc = self._keep(_Desc(p.compute))
            self.desc.set(_DESC_TRANSA, ctypes.c_int32(first.op))
            self.desc.set(_DESC_TRANSB, ctypes.c_int32(second.op))
            self.first = self._keep(_Layout(p.ab_type, first))
            self.second = self._keep(_Layout(p.ab_type, second))
            self.c = self._keep(_Layout(DataType.CUDA_R_32F, c))
        except BaseException:
            self.close()
            raise

    def _keep(self, part):
        self._parts.append(part)
        return part

    def close(self) -> None:
        for part in reversed(self._parts):
            part.close()

    def __enter__(self) -> "MatmulDescriptors":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def pointer_alignment(ptr: int) -> int:
    """The largest power of two (up to 256 bytes) dividing a device address."""
    ptr = int(ptr)
    return MAX_ALIGNMENT if ptr % MAX_ALIGNMENT == 0 else ptr & -ptr
