"""``gemm()``: one product of NumPy arrays on the GPU, through the same prepared case and
Launch the bench and the verify command use.
"""

from __future__ import annotations

import atexit

import numpy as np

from . import kernels
from .case import PreparedCase
from .kernels.providers import host_gemm
from .kernels.spec import KernelSpec
from .problem import GemmProblem
from .session import Session

_default: Session | None = None


def default_session() -> Session:
    """The process-wide Session ``gemm()`` uses, created on first use."""
    global _default
    if _default is None:
        _default = Session()
        atexit.register(_default.close)
    return _default


def _check_matrix(name: str, x, shape_hint: str) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if x.dtype != np.float32:
        raise TypeError(f"{name} must have dtype float32, got {x.dtype}")
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D ({shape_hint}), got {x.ndim}-D")
    if not x.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous (row-major); use numpy.ascontiguousarray({name})")
    return x


def gemm(A: np.ndarray, B: np.ndarray, C: np.ndarray | None = None, *, alpha: float = 1.0, beta: float = 0.0,
         kernel: str = "cublas", **tunables: int) -> np.ndarray:
    """Return alpha * A @ B + beta * C computed by ``kernel`` (C itself is left unchanged).

    A is M x K, B is K x N, C (needed when beta != 0) is M x N, all float32 and
    C-contiguous. As in cuBLAS, M or N = 0 gives an empty result, K = 0 gives beta * C,
    and C is not read when beta == 0. A kernel of a 2-byte precision (e.g. cublas_bf16)
    multiplies A and B rounded to it (round to nearest even); C stays float32.
    """
    _check_matrix("A", A, "M x K")
    _check_matrix("B", B, "K x N")
    (m, k), (k2, n) = A.shape, B.shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: A is {m}x{k}, B is {k2}x{n}")
    if C is not None:
        _check_matrix("C", C, "M x N")
        if C.shape != (m, n):
            raise ValueError(f"C must be {m}x{n} for A {m}x{k} @ B {k}x{n}, got {C.shape[0]}x{C.shape[1]}")
    elif beta != 0:
        raise ValueError(f"beta={beta} scales C, but no C was given")
    problem = GemmProblem(m, n, k, float(alpha), float(beta))
    target = kernels.get(kernel)
    # Refuse bad tunables before anything needs a GPU; the launcher validates for the run.
    if isinstance(target, KernelSpec):
        target.resolve(tunables)
    elif tunables:
        raise ValueError(f"{kernel} takes no tunables, got {sorted(tunables)}")
    c_in = C if beta != 0 else None
    if problem.is_empty:
        return host_gemm(problem, A, B, c_in)
    if getattr(target, "host_gemm", None) is not None:  # a CPU provider (NumPy)
        return target.host_gemm(problem, A, B, c_in)
    session = default_session()
    with PreparedCase(problem, target.precision, A, B, c_in) as case:
        out, _ = case.run(session.launcher(kernel, problem, *case.device(), tunables))
    return out
