"""gemm() on NumPy arrays: the copies it must make and the kernel, nothing more.

A and B (row-major, or transposed views read as stored: the problem's trans_a/trans_b), C
and the bias are copied into device buffers the session keeps (grown, never shrunk: a
loop of calls allocates nothing), the product runs through gemm()'s cached Plan on the
session's stream (the same addresses each call, so its Launch is packed once), and the
result is copied back; one synchronise at the end. ``kernel="numpy"`` (a CPU provider)
computes the same function with NumPy, epilogue included.
"""

from __future__ import annotations

import threading

import numpy as np

from . import kernels
from .arrays import DeviceArray, DeviceVector, product_shape
from .cuda.driver import api as cuda_api
from .cuda.errors import check
from .call import check_precision, dtype_name, epilogue_of
from .plans import ensure_current
from .problem import GemmProblem

_DTYPES = ("float32", "bfloat16", "float16")
_LOCK = threading.Lock()  # the session's host buffers serve one call at a time


def numpy_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _check_matrix(name: str, x, shape_hint: str, dtypes=_DTYPES) -> bool:
    """Whether ``x`` is stored transposed (a transposed view of a C-contiguous array); one
    line naming what is wrong otherwise."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a NumPy array or a device array with __cuda_array_interface__ or "
                        f"__dlpack__ (torch, CuPy, JAX, Numba), got {type(x).__name__}")
    if x.dtype.name not in dtypes:
        allowed = " or ".join(dtypes) if len(dtypes) < 3 else "float32, bfloat16 or float16"
        raise TypeError(f"{name} must have dtype {allowed}, got {x.dtype}")
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D ({shape_hint}), got {x.ndim}-D")
    if x.flags.c_contiguous:
        return False
    if name in ("A", "B") and x.T.flags.c_contiguous:
        return True
    hint = " or a transposed view of one (x.T)" if name in ("A", "B") else ""
    raise ValueError(f"{name} must be C-contiguous (row-major){hint}; use numpy.ascontiguousarray({name})")


def host_gemm(A, B, C, alpha, beta, kernel, out, bias, activation, out_dtype, tunables, *, session_of,
              plan_of) -> np.ndarray:
    """``session_of()``: gemm()'s Session; ``plan_of(...)``: its cached Plan (api.py passes both,
    so this module needs nothing above it)."""
    trans_a, trans_b = _check_matrix("A", A, "M x K"), _check_matrix("B", B, "K x N")
    dtype = A.dtype.name
    m, n, k = product_shape(A.shape, dtype, B.shape, B.dtype.name)
    if out is not None:
        _check_matrix("out", out, "M x N")
    out_dtype = dtype_name(out_dtype) if out_dtype is not None else (out.dtype.name if out is not None else "float32")
    if out is not None and (out.shape != (m, n) or out.dtype.name != out_dtype):
        raise ValueError(f"out must be {m}x{n} {out_dtype}, got {out.shape[0]}x{out.shape[1]} {out.dtype}")
    if C is not None:
        _check_matrix("C", C, "M x N", (out_dtype,))
        if C.shape != (m, n):
            raise ValueError(f"C must be {m}x{n} for A {m}x{k} @ B {k}x{n}, got {C.shape[0]}x{C.shape[1]}")
    elif beta != 0:
        raise ValueError(f"beta={beta} scales C, but no C was given")
    if bias is not None and (not isinstance(bias, np.ndarray) or bias.shape != (n,) or bias.dtype.name != out_dtype):
        raise ValueError(f"bias must be a NumPy vector of {n} {out_dtype} elements (out's type), got "
                         f"{getattr(bias, 'shape', type(bias).__name__)} {getattr(bias, 'dtype', '')}")
    epilogue = epilogue_of(bias is not None, activation)
    problem = GemmProblem(m, n, k, float(alpha), float(beta), trans_a=trans_a, trans_b=trans_b,
                          out_dtype={"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}[out_dtype],
                          epilogue=epilogue)
    target = kernels.get(kernel) if kernel is not None else None
    if target is not None:
        target.check_tunables(tunables)  # bad tunables refused before anything needs a GPU
        if dtype != "float32" and not target.runs_on_host:
            check_precision(kernel, target, dtype)  # float32 data may be rounded to a 2-byte kernel's precision
    c_in = C if beta != 0 else None
    if (target is not None and target.runs_on_host) or problem.is_empty:
        result = on_host(problem, A, B, c_in, bias, activation, out_dtype)
    else:
        result = _on_gpu(problem, kernel, target, dtype, A, B, c_in, bias, activation, out_dtype, tunables,
                         session_of(), plan_of)
    if out is None:
        return result
    np.copyto(out, result)
    return out


def on_host(problem: GemmProblem, A, B, c, bias, activation, out_dtype: str) -> np.ndarray:
    """The whole function with NumPy in float32 (the CPU provider, and empty problems)."""
    v = np.zeros((problem.m, problem.n), np.float32)
    if problem.k:
        v = np.float32(problem.alpha) * (A.astype(np.float32) @ B.astype(np.float32))
    if c is not None:
        v = v + np.float32(problem.beta) * c.astype(np.float32)
    if bias is not None:
        v = v + bias.astype(np.float32)
    if activation == "relu":
        v = np.maximum(v, np.float32(0))
    elif activation == "gelu":
        v = np.float32(0.5) * v * (1 + np.tanh(np.float32(np.sqrt(2 / np.pi)) * (v + np.float32(0.044715) * v ** 3)))
    return np.ascontiguousarray(v.astype(numpy_dtype(out_dtype)))


def _on_gpu(problem, kernel, target, dtype, A, B, c, bias, activation, out_dtype, tunables, session,
            plan_of) -> np.ndarray:
    if target is not None and dtype == "float32" and target.precision in ("bf16", "fp16"):
        dtype = {"bf16": "bfloat16", "fp16": "float16"}[target.precision]  # rounded here, nearest even
        A, B = A.astype(numpy_dtype(dtype), order="K"), B.astype(numpy_dtype(dtype), order="K")
    m, n, k = problem.m, problem.n, problem.k
    result = np.empty((m, n), numpy_dtype(out_dtype))
    with _LOCK:
        p = plan_of(session, m, n, k, dtype, kernel, problem.alpha, problem.beta,
                    (problem.trans_a, problem.trans_b, False), out_dtype, bias is not None, activation, tunables)
        ensure_current(session)
        stream, ordinal = session.stream.handle, session.device.ordinal
        a = _upload(session, "host_a", A, problem.trans_a, stream, ordinal)
        b = _upload(session, "host_b", B, problem.trans_b, stream, ordinal)
        o = _upload(session, "host_out", c if c is not None else result, False, stream, ordinal, copy=c is not None)
        vector = None
        if bias is not None:
            ptr = _upload(session, "host_bias", bias.reshape(1, n), False, stream, ordinal).ptr
            vector = DeviceVector(ptr, n, out_dtype, ordinal)
        p.run(a, b, o, int(stream), o, vector)
        d = cuda_api()
        check(d.cuMemcpyDtoHAsync(result.ctypes.data, o.ptr, result.nbytes, stream), "cuMemcpyDtoHAsync")
        session.stream.synchronize()
    return result


def _upload(session, name: str, x: np.ndarray, trans: bool, stream, ordinal: int, copy: bool = True) -> DeviceArray:
    """``x`` as stored (a transposed view's C-contiguous base order) in the session's buffer
    ``name``, copied on ``stream`` when ``copy``."""
    stored = x.T if trans else x
    ptr = session.workspace(name, max(stored.nbytes, 4))
    if copy and stored.nbytes:
        check(cuda_api().cuMemcpyHtoDAsync(ptr, stored.ctypes.data, stored.nbytes, stream), "cuMemcpyHtoDAsync")
    rows, cols = x.shape
    return DeviceArray(x, "array", ptr, rows, cols, max(stored.shape[1], 1), trans, x.dtype.name, ordinal)
