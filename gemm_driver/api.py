"""``gemm()`` and ``plan()``: products of NumPy arrays on the host or of device arrays in place.

Both compute D = act(alpha * op(A) @ op(B) + beta * C + bias) (a linear layer is
``gemm(x, W.t(), bias=b, activation="gelu", out=y)``): transposed views of A and B are read
as they are stored (the problem's trans_a/trans_b, no copy), out may be bfloat16/float16
where the kernel declares that output type, and bias/activation are the kernel's fused
epilogue. Device arrays (torch, CuPy, JAX, Numba: anything with ``__cuda_array_interface__``
or ``__dlpack__``) are read in place and run through a ``Plan`` (plans.py) on the caller's
stream; ``gemm()`` keeps the last ``PLANS_KEPT`` plans, keyed on everything that matters, so
a loop of calls resolves, loads and packs once. NumPy arrays are copied into device buffers
the session keeps (grown, never shrunk), run through the same plans on the session's
stream and copied back: the copies and the kernel, nothing more (host_path.py).
"""

from __future__ import annotations

import atexit
from collections import OrderedDict

from . import arrays, fp8_scales, kernels
from .arrays import product_shape
from .cuda.driver import ExternalStream, copy_2d_async
from .call import dtype_name, epilogue_of
from .plans import Plan, ensure_current
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
         lda: int | None = None, ldb: int | None = None, ldc: int | None = None, out_dtype="float32",
         bias=False, activation: str | None = None, scaling: str | None = None, pdl: bool | None = None,
         session: Session | None = None, **tunables: int) -> Plan:
    """A Plan for act(alpha * op(A) @ op(B) + beta * out + bias) with op(A) m x k, op(B) k x n
    in ``dtype`` (float32, bfloat16, float16; names, NumPy and torch dtypes are taken), out
    m x n in ``out_dtype``, run by ``kernel`` (default: the dtype's cuBLAS, or the first
    baseline that takes the output type and epilogue). Call it as ``p(A, B, out=None,
    bias=None, stream=None)``. ``trans_*``: that operand is a transposed view; ``ld*``: pin a
    leading dimension; ``bias``: True (or the vector) to add one; ``activation``: None,
    "relu" or "gelu" (tanh form). FP8 (``dtype="float8_e4m3fn"`` or ``"float8_e5m2"``, or
    A's and B's as a pair such as ``("float8_e5m2", "float8_e4m3fn")``; B a transposed view):
    ``scaling`` "tensor", "row" or "block", and each call passes ``scales=(A's, B's)``.
    ``pdl=False`` launches without programmatic dependent launch where the kernel's choice
    has it (gemm_driver.torch's routes do, for CUDA-graph steps: torch/routes.py says why),
    ``True`` with it; None as the choice says."""
    return Plan(session or default_session(), m, n, k, dtype=dtype, kernel=kernel, alpha=alpha, beta=beta,
                trans_a=trans_a, trans_b=trans_b, trans_c=trans_c, lda=lda, ldb=ldb, ldc=ldc, out_dtype=out_dtype,
                bias=bias, activation=activation, tunables=tunables, scaling=scaling, pdl=pdl)


def gemm(A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0, kernel: str | None = None, out=None,
         stream=None, bias=None, activation: str | None = None, out_dtype=None, scales=None,
         scaling: str | None = None, **tunables: int):
    """act(alpha * A @ B + beta * C + bias) computed by ``kernel`` (default: cuBLAS in the
    inputs' dtype, or the first baseline that takes the output type and epilogue).

    A (M x K) and B (K x N): float32, bfloat16 or float16, row-major or transposed views
    (``x``, ``W.t()``), read as stored. The result is ``out_dtype`` (default: out's dtype, else
    float32; bfloat16/float16 where the kernel declares it); ``bias`` is a vector of N in
    that dtype, ``activation`` None, "relu" or "gelu" (tanh form). As in cuBLAS, M or N = 0
    gives an empty result, K = 0 gives beta * C, and C is not read when beta == 0.

    NumPy arrays: returns a new array (or fills ``out``) and leaves C unchanged; a kernel of a
    2-byte precision rounds float32 inputs to it (nearest even); ``kernel="numpy"`` runs on
    the CPU. Device arrays (torch, CuPy, JAX, Numba, ...): on the session's GPU; the result
    goes into ``out`` or a new array of A's kind (torch, CuPy); C, when given, is copied into
    out first, else out itself is C when beta != 0. Work is queued on ``stream`` (a handle,
    ``__cuda_stream__``, a torch/CuPy stream; None: the current stream of A's library) and
    not waited for.

    FP8 (device arrays of float8_e4m3fn or float8_e5m2 codes, A and B in either: ``gemm(x8,
    w8.t(), scales=(sa, sb), out_dtype=torch.bfloat16)``): A row-major, B a transposed view,
    float32 ``scales`` of A and B in the layout of ``scaling`` ("tensor", "row" or "block";
    default: what their sizes say), fp8_scales.py.
    """
    kind = arrays.kind_of(A)
    if kind in ("torch", "cupy", "array"):
        return _device_gemm(kind, A, B, C, alpha, beta, kernel, out, stream, bias, activation, out_dtype, tunables,
                            scales, scaling)
    if stream is not None:
        raise ValueError("stream= orders device work; NumPy arrays are copied to and from the GPU synchronously")
    if scales is not None or scaling is not None:
        raise ValueError("scales= and scaling= go with FP8 device arrays (torch float8_e4m3fn or float8_e5m2 "
                         "tensors); NumPy arrays take float32, bfloat16 or float16")
    from .host_path import host_gemm

    return host_gemm(A, B, C, alpha, beta, kernel, out, bias, activation, out_dtype, tunables,
                     session_of=default_session, plan_of=cached_plan)


def cached_plan(session, m: int, n: int, k: int, dtype, kernel, alpha, beta, layout: tuple, out_dtype: str,
                has_bias: bool, activation, tunables: dict, scaling: str | None = None) -> Plan:
    """gemm()'s plan for this configuration: made once, the last PLANS_KEPT kept (LRU)."""
    key = (id(session), m, n, k, dtype, kernel, alpha, beta, layout, out_dtype, has_bias, activation, scaling)
    if tunables:
        key += tuple(sorted(tunables.items()))
    p = _plans.get(key)
    if p is None:
        epilogue_of(has_bias, activation)  # a bad activation is refused before anything is made
        p = _plans[key] = Plan(session, m, n, k, dtype=dtype, kernel=kernel, alpha=alpha, beta=beta,
                               trans_a=layout[0], trans_b=layout[1], trans_c=layout[2], out_dtype=out_dtype,
                               bias=has_bias, activation=activation, tunables=tunables, scaling=scaling)
        if len(_plans) > PLANS_KEPT:
            _plans.popitem(last=False)
    else:
        _plans.move_to_end(key)
    return p


# --- device arrays --------------------------------------------------------------------------
def _device_gemm(kind, A, B, C, alpha, beta, kernel, out, stream, bias, activation, out_dtype, tunables, scales,
                 scaling):
    raw = arrays.stream_handle(stream) if stream is not None else None
    a = arrays.device_array("A", A, raw or 0, kind)
    if raw is None:
        raw = arrays.current_stream(a)
    b = arrays.device_array("B", B, raw)
    if a.dtype not in arrays.ITEMSIZE:
        raise TypeError(f"A has dtype {a.dtype}; allowed are float32, bfloat16, float16, float8_e4m3fn or "
                        "float8_e5m2 (FP8)")
    m, n, k = product_shape((a.rows, a.cols), a.dtype, (b.rows, b.cols), b.dtype)
    if a.dtype in arrays.FP8_FORMATS and scaling is None and scales is not None:
        scaling = fp8_scales.infer_scaling(scales, m, n)
    o = arrays.device_array("out", out, raw) if out is not None else None
    out_dtype = dtype_name(out_dtype) if out_dtype is not None else (o.dtype if o is not None else "float32")
    if o is not None:
        trans_c = o.trans
    else:  # transposed A and B on a kernel that reads row-major only: the swap needs a transposed out
        trans_c = a.trans and b.trans and kernel is not None and not kernels.get(kernel).transposes
    session = default_session()
    dtype = a.dtype if a.dtype == b.dtype else (a.dtype, b.dtype)  # FP8 A and B may differ
    p = cached_plan(session, m, n, k, dtype, kernel, alpha, beta, (a.trans, b.trans, trans_c), out_dtype,
                    bias is not None, activation, tunables, scaling)
    if C is not None and beta != 0:
        if out is None:
            out = arrays.allocate(a, m, n, trans=trans_c, stream=raw, dtype=out_dtype)
            o = arrays.device_array("out", out, raw)
        _copy_into(arrays.device_array("C", C, raw), o, m, n, raw)
    elif beta != 0 and out is None:
        raise ValueError(f"beta={beta} scales C, but neither C nor out= was given")
    return p.run(a, b, out, raw, o, bias, scales)


def _copy_into(c, o, m: int, n: int, raw: int) -> None:
    """C's values into out (device to device, on the caller's stream), unless C is out."""
    if (c.rows, c.cols) != (m, n):
        raise ValueError(f"C must be {m}x{n}, got {c.rows}x{c.cols}")
    if c.dtype != o.dtype:
        raise TypeError(f"C has dtype {c.dtype}; C has out's type ({o.dtype})")
    if c.trans != o.trans:
        raise ValueError(f"C is {c.layout} and out is {o.layout}: give them the same layout")
    if (c.ptr, c.ld) != (o.ptr, o.ld):
        ensure_current(default_session())
        width, height = (m, n) if c.trans else (n, m)
        size = o.itemsize
        copy_2d_async(o.ptr, o.ld * size, c.ptr, c.ld * size, width * size, height, ExternalStream(raw))
