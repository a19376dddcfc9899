"""cuBLAS through ctypes: the baseline every kernel in this project is measured against.

cuda-bindings has no cuBLAS module, so the few entry points we need are declared in one
table (``SIGNATURES``) and bound once. Every status-returning call gets an ``errcheck``
that raises :class:`CublasError`, so no call site inspects a status itself.

The project stores matrices row-major; cuBLAS is column-major. The translation lives in
exactly one pure function, :func:`column_major_call`, which the tests check against a
NumPy model of the BLAS reference semantics. Every public GEMM routes through it.
The module is one library's binding (its enums, table, handle and calls); cuBLASLt
(cublaslt_binding.py) shares its loader and error check.
"""

from __future__ import annotations

import ctypes
import functools
import weakref
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Callable

from .errors import CublasError, GemmDriverError, LibraryNotFoundError

# cublasStatus_t (cublas_api.h). Kept here so errors carry a name even when the library's
# own text cannot be reached (e.g. a synthetic status in a test).
STATUS_NAMES = {v: "CUBLAS_STATUS_" + n for v, n in (
    (0, "SUCCESS"), (1, "NOT_INITIALIZED"), (3, "ALLOC_FAILED"), (7, "INVALID_VALUE"),
    (8, "ARCH_MISMATCH"), (11, "MAPPING_ERROR"), (13, "EXECUTION_FAILED"),
    (14, "INTERNAL_ERROR"), (15, "NOT_SUPPORTED"), (16, "LICENSE_ERROR"))}


class DataType(IntEnum):
    """cudaDataType_t (library_types.h)."""
    CUDA_R_32F = 0
    CUDA_R_16F = 2
    CUDA_R_16BF = 14


class ComputeType(IntEnum):
    """cublasComputeType_t (cublas_api.h)."""
    CUBLAS_COMPUTE_32F = 68
    CUBLAS_COMPUTE_32F_PEDANTIC = 69
    CUBLAS_COMPUTE_32F_FAST_16F = 74
    CUBLAS_COMPUTE_32F_FAST_16BF = 75
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77


class MathMode(IntEnum):
    """cublasMath_t: CUBLAS_DEFAULT_MATH, CUBLAS_PEDANTIC_MATH, CUBLAS_TF32_TENSOR_OP_MATH."""
    DEFAULT = 0
    PEDANTIC = 2
    TF32_TENSOR_OP = 3


class Operation(IntEnum):
    """cublasOperation_t: CUBLAS_OP_N, CUBLAS_OP_T."""
    N = 0
    T = 1


CUBLAS_GEMM_DEFAULT = -1  # cublasGemmAlgo_t: let cuBLAS's heuristics choose.
_INT32_MAX = 2**31 - 1  # ctypes silently truncates ints that overflow c_int.


@dataclass(frozen=True)
class GemmTypes:
    """One explicit cublasGemmEx configuration: storage types, compute type and the math mode
    that goes with it. Spelled out so that no TF32 ever sneaks into an "fp32" number. The
    project's one precision table (gemm_driver/precision.py) holds one of these per precision."""

    ab_type: DataType
    c_type: DataType
    compute: ComputeType
    math_mode: MathMode

    @property
    def ab_bytes(self) -> int:
        return 2 if self.ab_type in (DataType.CUDA_R_16F, DataType.CUDA_R_16BF) else 4

    @property
    def c_bytes(self) -> int:
        return 2 if self.c_type in (DataType.CUDA_R_16F, DataType.CUDA_R_16BF) else 4


# --- the binding ---------------------------------------------------------------------
_i, _ll, _p = ctypes.c_int, ctypes.c_longlong, ctypes.c_void_p
_fp, _dp, _ip = ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_int)
_GEMM = (_p, _i, _i, _i, _i, _i)  # handle, transa, transb, m, n, k

# (restype, name, argtypes). Status-returning (c_int) entries get the errcheck.
SIGNATURES: tuple[tuple[Any, str, tuple[Any, ...]], ...] = (
    (_i, "cublasCreate_v2", (ctypes.POINTER(_p),)),
    (_i, "cublasDestroy_v2", (_p,)),
    (_i, "cublasSetStream_v2", (_p, _p)),
    (_i, "cublasSetWorkspace_v2", (_p, _p, ctypes.c_size_t)),
    (_i, "cublasSetMathMode", (_p, _i)),
    (_i, "cublasGetMathMode", (_p, _ip)),
    (_i, "cublasGetProperty", (_i, _ip)),
    (_i, "cublasSgemm_v2", _GEMM + (_fp, _p, _i, _p, _i, _fp, _p, _i)),
    (_i, "cublasDgemm_v2", _GEMM + (_dp, _p, _i, _p, _i, _dp, _p, _i)),
    (_i, "cublasGemmEx", _GEMM + (_p, _p, _i, _i, _p, _i, _i, _p, _p, _i, _i, _i, _i)),
    (_i, "cublasSgemmStridedBatched",
     _GEMM + (_fp, _p, _i, _ll, _p, _i, _ll, _fp, _p, _i, _ll, _i)),
    (_i, "cublasGemmStridedBatchedEx",
     _GEMM + (_p, _p, _i, _i, _ll, _p, _i, _i, _ll, _p, _p, _i, _i, _ll, _i, _i, _i)),
    (ctypes.c_char_p, "cublasGetStatusString", (_i,)),
    (ctypes.c_char_p, "cublasGetStatusName", (_i,)),
)


# name -> declared argument types (CublasHandle.gemm_ex_call converts its arguments to them once)
ARGTYPES = {name: argtypes for _, name, argtypes in SIGNATURES}


def status_name(status: int) -> str:
    """The cublasStatus_t enum name of ``status``; never raises."""
    return STATUS_NAMES.get(int(status), f"CUBLAS_STATUS_UNKNOWN({int(status)})")


def status_message(status: int) -> str:
    """cuBLAS's own text for ``status`` (cublasGetStatusString), or '' if unavailable."""
    try:
        text = _library().cublasGetStatusString(int(status))
    except (GemmDriverError, AttributeError, OSError):
        return ""
    return text.decode(errors="replace") if text else ""


def _errcheck(status: int, func: Any, args: tuple) -> int:
    """ctypes errcheck hook: turn a non-zero cublasStatus_t into a CublasError."""
    if status != 0:
        raise CublasError(status_name(status), status_message(status), func.__name__)
    return status


def bind_library(libname: str, title: str, signatures) -> ctypes.CDLL:
    """Find ``libname`` with cuda.pathfinder (wheel, conda or system), open it and declare
    ``signatures`` ((restype, name, argtypes) rows); status-returning calls raise CublasError.
    cuBLAS and cuBLASLt come from the same wheel, so the missing-library line is shared."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        lib = ctypes.CDLL(load_nvidia_dynamic_lib(libname).abs_path)
    except (ImportError, RuntimeError, OSError) as exc:  # DynamicLibNotFoundError: RuntimeError
        raise LibraryNotFoundError(
            f"{title} was not found; install it with `pip install nvidia-cublas-cu12` "
            "(CUDA 12) or `pip install nvidia-cublas` (CUDA 13)"
        ) from exc
    for restype, name, argtypes in signatures:
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
        if restype is _i:
            fn.errcheck = _errcheck
    return lib


@functools.lru_cache(maxsize=None)
def _library() -> ctypes.CDLL:
    """cuBLAS, opened once and bound."""
    return bind_library("cublas", "cuBLAS", SIGNATURES)


def _unchecked(name: str) -> Any:
    """cuBLAS's ``name`` as a function of its own with neither argtypes nor errcheck: given
    arguments that are C values already, ctypes converts nothing (0.9 us a call against 3.4
    with the declared types and the errcheck, on a development CPU, through a stand-in
    library of cublasGemmEx's signature)."""
    fn = _library()[name]
    fn.restype = _i
    return fn


def _as_c(ctype: Any, value: Any) -> Any:
    """``value`` as a ``ctype`` instance; a by-reference argument (alpha, beta) stays as it is."""
    return ctype(int(value)) if isinstance(value, int) else value


def library_path() -> str:
    """Absolute path of the cuBLAS shared library in use."""
    return _library()._name


def version() -> tuple[int, int, int]:
    """(major, minor, patch) of the loaded cuBLAS; needs no GPU or driver."""
    lib, value, parts = _library(), ctypes.c_int(), []
    for prop in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        lib.cublasGetProperty(prop, ctypes.byref(value))
        parts.append(value.value)
    return tuple(parts)  # type: ignore[return-value]


# --- handle --------------------------------------------------------------------------
def _stream_ptr(stream: Any) -> int:
    """Raw cudaStream_t: None is the default stream; project streams carry ``.handle``."""
    return 0 if stream is None else int(getattr(stream, "handle", stream))


def _destroy_quietly(lib: Any, raw: int) -> None:
    """Finalizer for a forgotten handle: runs inside GC, where raising helps no one."""
    try:
        lib.cublasDestroy_v2(raw)
    except CublasError:
        pass


class CublasHandle:
    """A cublasHandle_t bound to a stream.

    The caller guarantees a current CUDA context (cuBLAS uses the primary context, which
    the project retains). ``close()`` is idempotent; a ``weakref.finalize`` destroys the
    handle if the owner forgets, but explicit close (or ``with``) is the intended use.

    The stream and the math mode stay as the last call set them: each GEMM here sets its own
    through ``use_stream`` and ``use_math_mode``, which call cuBLAS only where the value
    differs from the one this object last set (a get, a set and a restore of the mode around
    every call cost about 10 us of a 24 us call on the H100's host:
    results/h100-80gb-hbm3/probe-cublas-call-cost.txt). So code that calls cuBLAS on a shared
    handle directly sets the mode it needs first: after a TF32 baseline a Session's handle
    stays in TF32 mode, and a plain cublasSgemm on it rounds its inputs to TF32.
    """

    def __init__(self, stream: Any = None):
        lib, raw = _library(), ctypes.c_void_p()
        lib.cublasCreate_v2(ctypes.byref(raw))
        self._lib, self._raw, self.stream = lib, int(raw.value or 0), None
        self._mode: int | None = None  # the mode this object last set (None: cuBLAS's default, unread)
        self._bound: int | None = None  # the raw stream this object last set
        self._finalizer = weakref.finalize(self, _destroy_quietly, lib, self._raw)
        # Not at interpreter exit: process teardown frees it, and the context may be gone.
        self._finalizer.atexit = False
        try:
            self.set_stream(stream)
        except BaseException:
            self.close()
            raise

    @property
    def ptr(self) -> int:
        """The raw cublasHandle_t; raises once the handle is closed."""
        if not self._finalizer.alive:
            raise GemmDriverError("cuBLAS handle is closed")
        return self._raw

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def set_stream(self, stream: Any) -> None:
        """Run subsequent calls on ``stream`` (None: the default stream)."""
        self._bound = None  # unknown should the call fail
        self._lib.cublasSetStream_v2(self.ptr, _stream_ptr(stream))
        # the raw stream, not the object: a project stream's handle can change under it
        self.stream, self._bound = stream, _stream_ptr(stream)

    def use_stream(self, stream: Any) -> None:
        """Make ``stream`` the stream of the next call: set only where this object bound another."""
        if self._bound != _stream_ptr(stream):
            self.set_stream(stream)

    def get_math_mode(self) -> int:
        """Current cublasMath_t; an int because it may carry flag bits beyond MathMode."""
        mode = ctypes.c_int()
        self._lib.cublasGetMathMode(self.ptr, ctypes.byref(mode))
        return mode.value

    def set_math_mode(self, mode: int) -> None:
        """Set cublasMath_t (a MathMode, possibly OR-ed with flag bits) for later calls."""
        self._mode = None  # unknown should the call fail
        self._lib.cublasSetMathMode(self.ptr, int(mode))
        self._mode = int(mode)

    def use_math_mode(self, mode: int) -> None:
        """Make ``mode`` the math mode of the next call: set only where this object last set another."""
        if self._mode != mode:
            self.set_math_mode(mode)

    def gemm_ex_call(self, arguments: tuple) -> Callable[[], None]:
        """cublasGemmEx on this handle with ``arguments`` (gemm_ex_arguments), converted to C
        values once: the call a launch makes every time (a non-zero status raises CublasError;
        a closed handle, GemmDriverError). The stream and math mode are the caller's to set."""
        raw = raw_gemm_ex(self.ptr, arguments)
        alive = self._finalizer

        def call() -> None:
            if not alive.alive:
                raise GemmDriverError("cuBLAS handle is closed")
            status = raw()
            if status:
                raise CublasError(status_name(status), status_message(status), "cublasGemmEx")

        return call

    def close(self) -> None:
        """Destroy the handle now (raising on failure); later calls do nothing."""
        if self._finalizer.detach() is not None:
            self._lib.cublasDestroy_v2(self._raw)

    def __enter__(self) -> CublasHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# --- the row-major swap --------------------------------------------------------------
@dataclass(frozen=True)
class ColumnMajorGemm:
    """Arguments of the column-major cuBLAS call equivalent to a row-major GEMM.

    ``first``/``second`` name the row-major operand ("a" or "b") cuBLAS sees as its A/B;
    ``op_first``/``op_second`` are the cublasOperation_t cuBLAS applies to each.
    """

    m: int
    n: int
    k: int
    first: str
    ld_first: int
    second: str
    ld_second: int
    ldc: int
    op_first: Operation = Operation.N
    op_second: Operation = Operation.N

    def operands(self, a: Any, b: Any) -> tuple[Any, Any]:
        """Order anything per-operand (pointers, strides, types) as cuBLAS wants it."""
        by_name = {"a": a, "b": b}
        return by_name[self.first], by_name[self.second]


def column_major_call(m: int, n: int, k: int, lda: int, ldb: int, ldc: int,
                      trans_a: bool = False, trans_b: bool = False) -> ColumnMajorGemm:
    """Row-major C(MxN) = op(A) op(B) as a column-major cuBLAS call, where op(X) is X
    stored row-major or, with ``trans_x``, X stored transposed (column-major: A as a K x M
    row-major buffer, B as N x K, ``ld`` the column stride).

    A row-major MxN buffer with leading dimension ld, read column-major, is the NxM
    transpose with the same ld. So C^T = B^T A^T is a column-major GEMM of shape (n, m, k)
    with B first (ldb), A second (lda) and C (ldc): no copies. A row-major operand read so
    is already the transpose cuBLAS needs (OP_N); one stored transposed reads as itself,
    so it takes OP_T, and its leading dimension spans the other side (lda >= m, ldb >= k).
    C stays row-major. Raises ValueError naming the rule a row-major argument breaks.
    """
    a_rule = ("lda >= max(1, m) for a transposed A", lda >= max(1, m)) if trans_a else \
        ("lda >= max(1, k)", lda >= max(1, k))
    b_rule = ("ldb >= max(1, k) for a transposed B", ldb >= max(1, k)) if trans_b else \
        ("ldb >= max(1, n)", ldb >= max(1, n))
    rules = (
        ("m >= 0", m >= 0), ("n >= 0", n >= 0), ("k >= 0", k >= 0), a_rule, b_rule,
        ("ldc >= max(1, n)", ldc >= max(1, n)),
        ("sizes < 2**31 (cuBLAS takes 32-bit ints)", max(m, n, k, lda, ldb, ldc) <= _INT32_MAX),
    )
    for rule, ok in rules:
        if not ok:
            raise ValueError(f"row-major GEMM needs {rule}; got m={m}, n={n}, k={k}, "
                             f"lda={lda}, ldb={ldb}, ldc={ldc}")
    return ColumnMajorGemm(n, m, k, "b", ldb, "a", lda, ldc, Operation.T if trans_b else Operation.N,
                           Operation.T if trans_a else Operation.N)


# --- public GEMMs (row-major semantics, device pointers as ints) ---------------------
def scalars(alpha: float, beta: float) -> tuple[ctypes.c_float, ctypes.c_float]:
    """alpha and beta as the host floats cuBLAS takes. A beta of -0.0 is passed as +0.0: to
    BLAS both are zero (C is not read), but a cuBLAS kernel that tests beta's bits reads C
    for -0.0, and a NaN in C (our poisoned output) then gives NaN * -0.0 = NaN."""
    return ctypes.c_float(alpha), ctypes.c_float(0.0 if beta == 0 else beta)


def raw_gemm_ex(handle: int, arguments: tuple) -> Callable[[], int]:
    """cublasGemmEx on the handle at address ``handle`` (any library's) with ``arguments``
    (gemm_ex_arguments) converted to C values once; calling it returns the cublasStatus_t
    unchecked (CublasHandle.gemm_ex_call checks it; tools/probes/cublas_call_cost.py times it)."""
    name = "cublasGemmEx"
    return functools.partial(_unchecked(name), ctypes.c_void_p(handle), *map(_as_c, ARGTYPES[name][1:], arguments))


def gemm_ex_arguments(m: int, n: int, k: int, alpha: float, a: int, lda: int, b: int, ldb: int, beta: float,
                      c: int, ldc: int, types: GemmTypes, trans_a: bool = False, trans_b: bool = False) -> tuple:
    """cublasGemmEx's arguments after the handle for row-major C = alpha op(A) op(B) + beta C
    (``column_major_call`` does the swap and picks the transpose flags; a ValueError names
    the leading-dimension rule broken). alpha and beta go by reference to host floats that the
    tuple keeps alive, so it can be built once and passed on every call."""
    cm = column_major_call(m, n, k, lda, ldb, ldc, trans_a, trans_b)
    first, second = cm.operands(int(a), int(b))
    al, be = scalars(alpha, beta)
    return (cm.op_first, cm.op_second, cm.m, cm.n, cm.k, ctypes.byref(al), first, types.ab_type, cm.ld_first,
            second, types.ab_type, cm.ld_second, ctypes.byref(be), int(c), types.c_type, cm.ldc, types.compute,
            CUBLAS_GEMM_DEFAULT)


def gemm_ex(handle: CublasHandle, m: int, n: int, k: int, alpha: float, a: int, lda: int,
            b: int, ldb: int, beta: float, c: int, ldc: int, types: GemmTypes) -> None:
    """C = alpha*A@B + beta*C with the explicit storage types, compute type and math mode of
    ``types`` (cublasGemmEx). Every configuration here computes in fp32, so alpha and beta
    are host floats."""
    arguments = gemm_ex_arguments(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, types)
    handle.use_math_mode(int(types.math_mode))
    handle._lib.cublasGemmEx(handle.ptr, *arguments)


def dgemm(handle: CublasHandle, m: int, n: int, k: int, a: int, b: int, c: int) -> None:
    """C = A @ B in float64 (cublasDgemm) for contiguous row-major A (m x k), B (k x n) and
    C (m x n): the float64 reference's products on the GPU (device_reference.py)."""
    cm = column_major_call(m, n, k, k, n, n)
    first, second = cm.operands(int(a), int(b))
    one, zero = ctypes.c_double(1.0), ctypes.c_double(0.0)
    handle._lib.cublasDgemm_v2(handle.ptr, cm.op_first, cm.op_second, cm.m, cm.n, cm.k, ctypes.byref(one), first,
                               cm.ld_first, second, cm.ld_second, ctypes.byref(zero), int(c), cm.ldc)


def gemm_strided_batched_ex(handle: CublasHandle, m: int, n: int, k: int, alpha: float,
                            a: int, lda: int, stride_a: int, b: int, ldb: int, stride_b: int,
                            beta: float, c: int, ldc: int, stride_c: int, batch: int,
                            types: GemmTypes) -> None:
    """``batch`` independent GEMMs (cublasGemmStridedBatchedEx) with the explicit types,
    compute type and math mode of ``types``, as :func:`gemm_ex` does for one; matrix i of X
    starts stride_x elements after matrix i - 1."""
    if not 0 <= batch <= _INT32_MAX:
        raise ValueError(f"gemm_strided_batched_ex needs 0 <= batch < 2**31; got batch={batch}")
    p = types
    cm = column_major_call(m, n, k, lda, ldb, ldc)
    (first, s_first), (second, s_second) = cm.operands((int(a), stride_a), (int(b), stride_b))
    al, be = scalars(alpha, beta)
    handle.use_math_mode(int(p.math_mode))
    handle._lib.cublasGemmStridedBatchedEx(
        handle.ptr, cm.op_first, cm.op_second, cm.m, cm.n, cm.k, ctypes.byref(al),
        first, p.ab_type, cm.ld_first, s_first, second, p.ab_type, cm.ld_second, s_second,
        ctypes.byref(be), int(c), p.c_type, cm.ldc, stride_c, batch, p.compute,
        CUBLAS_GEMM_DEFAULT)
