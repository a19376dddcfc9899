"""``gemm()`` and ``plan()``: products of NumPy arrays on the host or of device arrays in place.

NumPy arrays (float32, float16, or ml_dtypes.bfloat16) go through the same prepared case
and Launch the bench and the verify command use: uploaded, run, read back. Device arrays
(torch, CuPy, JAX, Numba: anything with ``__cuda_array_interface__`` or ``__dlpack__``)
are read in place and run through a ``Plan`` (plans.py) on the caller's stream, with no
host copy; ``gemm()`` keeps the last ``PLANS_KEPT`` plans, keyed on everything that
matters, so a loop of calls resolves, loads and packs once.
"""

from __future__ import annotations

import atexit
from collections import OrderedDict

import numpy as np

from . import arrays, kernels
from .case import PreparedCase
from .cuda.driver import ExternalStream, copy_2d_async
from .kernels.providers import host_gemm
from .plans import Plan, check_precision, ensure_current, plan_key
from .problem import GemmProblem
from .session import Session

PLANS_KEPT = 32
_default: Session | None = None
_plans: OrderedDict[tuple, Plan] = OrderedDict()


def default_session() -> Session:
    """The process-wide Session ``gemm()`` uses, created on first use."""
    global _default
    if _default is None:
        _default = Session()
        atexit.register(_default.close)
    return _default


def plan(m: int, n: int, k: int, *, dtype="float32", kernel: str | None = None, alpha: float = 1.0,
         beta: float = 0.0, trans_a: bool = False, trans_b: bool = False, trans_c: bool = False,
         lda: int | None = None, ldb: int | None = None, ldc: int | None = None, session: Session | None = None,
         **tunables: int) -> Plan:
    """A Plan for alpha * A @ B + beta * out with A m x k, B k x n in ``dtype`` (float32,
    bfloat16, float16; names, NumPy and torch dtypes are taken), out m x n float32, run by
    ``kernel`` (default: the dtype's cuBLAS). Call it as ``p(A, B, out=None, stream=None)``.
    ``trans_*``: that operand is a transposed view; ``ld*``: pin a leading dimension."""
    return Plan(session or default_session(), m, n, k, dtype=dtype, kernel=kernel, alpha=alpha, beta=beta,
                trans_a=trans_a, trans_b=trans_b, trans_c=trans_c, lda=lda, ldb=ldb, ldc=ldc, tunables=tunables)


def gemm(A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0, kernel: str | None = None, out=None,
         stream=None, **tunables: int):
    """alpha * A @ B + beta * C computed by ``kernel`` (default: cuBLAS in the inputs' dtype).

    NumPy arrays: A (M x K) and B (K x N) C-contiguous float32, float16 or bfloat16
    (ml_dtypes), C (M x N) float32; returns a new float32 array (or fills ``out``) and
    leaves C unchanged. A kernel of a 2-byte precision rounds float32 inputs to it (round
    to nearest even). As in cuBLAS, M or N = 0 gives an empty result, K = 0 gives beta * C,
    and C is not read when beta == 0.

    Device arrays (torch, CuPy, JAX, Numba, ...): float32, bfloat16 or float16 A and B,
    row-major with a leading dimension or transposed views, on the session's GPU; the
    result goes into ``out`` (float32) or a new array of A's kind (torch, CuPy); C, when
    given, is copied into out first, else out itself is C when beta != 0. Work is queued
    on ``stream`` (a handle, ``__cuda_stream__``, a torch/CuPy stream; None: the current
    stream of A's library) and not waited for.
    """
    kind = arrays.kind_of(A)
    if kind in ("torch", "cupy", "array"):
        return _device_gemm(kind, A, B, C, alpha, beta, kernel, out, stream, tunables)
    if stream is not None:
        raise ValueError("stream= orders device work; NumPy arrays are copied to and from the GPU synchronously")
    return _host_gemm(A, B, C, alpha, beta, kernel, out, tunables)


def _product_shape(a_shape, a_dtype: str, b_shape, b_dtype: str) -> tuple[int, int, int]:
    """(m, n, k) of A @ B once A and B agree: the same dtype, then the inner dimension. Host
    and device arrays alike; each path has checked A itself (2-D, an allowed dtype) first."""
    if b_dtype != a_dtype:
        raise TypeError(f"A is {a_dtype} and B is {b_dtype}: A and B must have the same dtype")
    (m, k), (k2, n) = a_shape, b_shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: A is {m}x{k}, B is {k2}x{n}")
    return m, n, k


# --- device arrays --------------------------------------------------------------------------
def _device_gemm(kind, A, B, C, alpha, beta, kernel, out, stream, tunables):
    raw = arrays.stream_handle(stream) if stream is not None else None
    a = arrays.device_array("A", A, raw or 0, kind)
    raw = arrays.current_stream(a) if raw is None else raw
    b = arrays.device_array("B", B, raw)
    if a.dtype not in arrays.ITEMSIZE:
        raise TypeError(f"A has dtype {a.dtype}; allowed are float32, bfloat16 or float16")
    m, n, k = _product_shape((a.rows, a.cols), a.dtype, (b.rows, b.cols), b.dtype)
    o = arrays.device_array("out", out, raw) if out is not None else None
    kernel = kernel or arrays.DEFAULT_KERNEL[a.dtype]
    if o is not None:
        trans_c = o.trans
    else:  # transposed A and B on a kernel that reads row-major only: the swap needs a transposed out
        trans_c = a.trans and b.trans and not kernels.get(kernel).transposes
    session = default_session()
    key = plan_key(session, m, n, k, a.dtype, kernel, alpha, beta, (a.trans, b.trans, trans_c), (), tunables)
    p = _plans.get(key)
    if p is None:
        p = _plans[key] = Plan(session, m, n, k, dtype=a.dtype, kernel=kernel, alpha=alpha, beta=beta,
                               trans_a=a.trans, trans_b=b.trans, trans_c=trans_c, tunables=tunables)
        if len(_plans) > PLANS_KEPT:
            _plans.popitem(last=False)
    else:
        _plans.move_to_end(key)
    if C is not None and beta != 0:
        if out is None:
            out = arrays.allocate(a, m, n, trans=trans_c, stream=raw)
            o = arrays.device_array("out", out, raw)
        _copy_into(arrays.device_array("C", C, raw), o, m, n, raw)
    elif beta != 0 and out is None:
        raise ValueError(f"beta={beta} scales C, but neither C nor out= was given")
    return p.run(a, b, out, raw, o)


def _copy_into(c, o, m: int, n: int, raw: int) -> None:
    """C's values into out (device to device, on the caller's stream), unless C is out."""
    if (c.rows, c.cols) != (m, n):
        raise ValueError(f"C must be {m}x{n}, got {c.rows}x{c.cols}")
    if c.dtype != "float32":
        raise TypeError(f"C has dtype {c.dtype}; C is float32 in every precision")
    if c.trans != o.trans:
        raise ValueError(f"C is {c.layout} and out is {o.layout}: give them the same layout")
    if (c.ptr, c.ld) != (o.ptr, o.ld):
        ensure_current(default_session())
        width, height = (m, n) if c.trans else (n, m)
        copy_2d_async(o.ptr, o.ld * 4, c.ptr, c.ld * 4, width * 4, height, ExternalStream(raw))


# --- NumPy arrays ---------------------------------------------------------------------------
def _check_matrix(name: str, x, shape_hint: str, dtypes=("float32", "bfloat16", "float16")) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a NumPy array or a device array with __cuda_array_interface__ or "
                        f"__dlpack__ (torch, CuPy, JAX, Numba), got {type(x).__name__}")
    if x.dtype.name not in dtypes:
        allowed = " or ".join(dtypes) if len(dtypes) < 3 else "float32, bfloat16 or float16"
        raise TypeError(f"{name} must have dtype {allowed}, got {x.dtype}")
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D ({shape_hint}), got {x.ndim}-D")
    if not x.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous (row-major); use numpy.ascontiguousarray({name})")
    return x


def _host_gemm(A, B, C, alpha, beta, kernel, out, tunables) -> np.ndarray:
    _check_matrix("A", A, "M x K")
    _check_matrix("B", B, "K x N")
    dtype = A.dtype.name
    m, n, k = _product_shape(A.shape, dtype, B.shape, B.dtype.name)
    if C is not None:
        _check_matrix("C", C, "M x N", ("float32",))
        if C.shape != (m, n):
            raise ValueError(f"C must be {m}x{n} for A {m}x{k} @ B {k}x{n}, got {C.shape[0]}x{C.shape[1]}")
    elif beta != 0:
        raise ValueError(f"beta={beta} scales C, but no C was given")
    if out is not None:
        _check_matrix("out", out, "M x N", ("float32",))
        if out.shape != (m, n):
            raise ValueError(f"out must be {m}x{n}, got {out.shape[0]}x{out.shape[1]}")
    problem = GemmProblem(m, n, k, float(alpha), float(beta))
    kernel = kernel or arrays.DEFAULT_KERNEL[dtype]
    target = kernels.get(kernel)
    target.check_tunables(tunables)  # bad tunables refused before anything needs a GPU
    if dtype != "float32" and not target.runs_on_host:
        check_precision(kernel, target, dtype)  # float32 data may be rounded to a 2-byte kernel's precision
    # 2-byte inputs as float32 values, exactly: the upload stores them in the kernel's format again.
    a, b = (A, B) if dtype == "float32" else (A.astype(np.float32), B.astype(np.float32))
    result = _host_result(problem, target, kernel, a, b, C if beta != 0 else None, tunables)
    if out is None:
        return result
    np.copyto(out, result)
    return out


def _host_result(problem, target, kernel, a, b, c_in, tunables) -> np.ndarray:
    if problem.is_empty:
        return host_gemm(problem, a, b, c_in)
    if target.runs_on_host:  # a CPU provider (NumPy)
        return target.host_gemm(problem, a, b, c_in)
    session = default_session()
    with PreparedCase(problem, target.precision, a, b, c_in) as case:
        out, _ = case.run(session.launcher(kernel, problem, *case.device(), tunables))
    return out
