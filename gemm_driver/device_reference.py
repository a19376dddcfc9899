"""The float64 reference's products on the GPU, for cases too large for the host.

verify.reference needs two float64 products per case, op(A) @ op(B) and |op(A)| @ |op(B)|
(the scale of the bound). NumPy on a 16-core host does about 0.1 TFLOP/s in float64, so a
corpus shape of 2 TFLOP took some 20 s of the host per shape, against under 2 s of timing.
cuBLAS's DGEMM (``cublasDgemm``: float64 inputs, products and sums) does the same products
on the GPU in milliseconds; the operands travel as float64 copies of the values as stored.

It is the same reference: float64 throughout, only the summation order differs (the
error of either is ~K * 2^-53 of the magnitudes, far below any bound verify.py applies). It
runs in its own buffers through its own cuBLAS call, never through the kernels or launches
under test; a GPU test holds it to NumPy's products on drawn shapes
(tests/test_device_reference_gpu.py).

``products_for(session, problem)`` gives the function to hand PreparedCase (``products=``),
or None where the host is quick enough (under HOST_FLOPS) or the problem is batched. It is a
``GpuProducts``: a case whose D is checked on the GPU too keeps its whole reference there
(device_epilogue.py: the products stay in device memory and never come down).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from .cuda import cublas
from .cuda.memory import DeviceBuffer
from .problem import GemmProblem

Products = Callable[[np.ndarray, np.ndarray], np.ndarray]
HOST_FLOPS = 2 ** 32  # about 0.05 s of NumPy float64: below it the copies would cost more than they save


@dataclass(frozen=True)
class GpuProducts:
    """``float64_matmul`` on ``session``'s GPU as verify.reference's ``products``; its type says
    the products come from the GPU, where a case checked there keeps them (device_epilogue.py)."""

    session: Any

    def __call__(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return float64_matmul(self.session, x, y)


def products_for(session, problem: GemmProblem) -> Optional[GpuProducts]:
    """The GPU's float64 matmul for ``problem``'s reference, or None (NumPy's, on the host)."""
    if problem.batch != 1 or problem.is_empty or problem.flops < HOST_FLOPS:
        return None
    return GpuProducts(session)


def float64_matmul(session, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x @ y (m x k times k x n, any layout, cast to float64) by cuBLAS DGEMM on ``session``'s
    GPU: uploaded, multiplied on the session's stream and read back; the buffers are freed
    before it returns."""
    x, y = (np.ascontiguousarray(v, dtype=np.float64) for v in (x, y))
    (m, k), n = x.shape, y.shape[1]
    if y.shape[0] != k:
        raise ValueError(f"float64_matmul: {x.shape} @ {y.shape} do not conform")
    out = np.empty((m, n), np.float64)
    session.context.make_current()
    with DeviceBuffer(x.nbytes) as dx, DeviceBuffer(y.nbytes) as dy, DeviceBuffer(out.nbytes) as dout:
        dx.upload(x)
        dy.upload(y)
        dgemm(session, m, n, k, dx, dy, dout)
        session.stream.synchronize()
        dout.download(out)
    return out


def dgemm(session, m: int, n: int, k: int, x: DeviceBuffer, y: DeviceBuffer, out: DeviceBuffer) -> None:
    """out = x @ y in float64 on ``session``'s stream (cuBLAS DGEMM), for contiguous row-major
    x (m x k), y (k x n) and out (m x n) in device memory: the one call both the products read
    back (``float64_matmul``) and those kept on the GPU (device_epilogue.py) go through, so
    the same operands give the same bits either way (cuBLAS is deterministic on one GPU)."""
    if x.nbytes < 8 * m * k or y.nbytes < 8 * k * n or out.nbytes < 8 * m * n:
        raise ValueError(f"dgemm: buffers of {x.nbytes}, {y.nbytes}, {out.nbytes} bytes do not hold "
                         f"{m}x{k} @ {k}x{n} in float64")
    session.context.make_current()
    cublas.dgemm(session.cublas(), m, n, k, x.ptr, y.ptr, out.ptr)
