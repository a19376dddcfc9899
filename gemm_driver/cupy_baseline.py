"""CuPy's matmul as an extra FP32 baseline, when CuPy is installed.

CuPy runs on the CUDA runtime, which shares the device's primary context with our
driver-API Session, so its arrays can view our guarded device matrices in place and its
work can be queued on our stream: what is verified and timed is exactly what the other
baselines get (same operands, same stream, same stream-hold timing). CuPy keeps TF32
off unless CUPY_TF32=1 is set, and that setting is recorded with the result.
"""

from __future__ import annotations

import os
from typing import Callable

from .cuda.errors import GemmDriverError
from .operands import DeviceMatrix
from .problem import GemmProblem


def unavailable_reason() -> str | None:
    """None when CuPy imports and sees a GPU, else why it cannot serve as a baseline."""
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # ImportError, or a CUDA error from a broken install
        return f"CuPy is not usable here ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    return None


def tf32_enabled() -> bool:
    return os.environ.get("CUPY_TF32", "0") == "1"


def _view(matrix: DeviceMatrix, rows: int, cols: int):
    """A CuPy array over our rows x cols matrix (leading dimension ld), without copying."""
    import cupy

    extent = max((rows - 1) * matrix.ld + cols, 1) * 4
    memory = cupy.cuda.UnownedMemory(matrix.ptr, extent, owner=matrix)
    return cupy.ndarray((rows, cols), cupy.float32, cupy.cuda.MemoryPointer(memory, 0),
                        strides=(matrix.ld * 4, 4))


def launcher(stream_handle: int, problem: GemmProblem, a: DeviceMatrix, b: DeviceMatrix,
             c: DeviceMatrix) -> Callable[[], None]:
    """C = alpha A B + beta C with cupy.matmul on our stream; C is not read when beta == 0."""
    if (reason := unavailable_reason()) is not None:
        raise ValueError(reason)
    if tf32_enabled():
        raise ValueError("CUPY_TF32=1 is set: CuPy would use TF32, which is not an FP32 baseline")
    import cupy

    m, n, k = problem.m, problem.n, problem.k
    A, B, C = _view(a, m, k), _view(b, k, n), _view(c, m, n)
    stream = cupy.cuda.ExternalStream(stream_handle)
    alpha, beta = problem.alpha, problem.beta

    def launch() -> None:
        try:
            with stream:
                if beta == 0:
                    cupy.matmul(A, B, out=C)
                    if alpha != 1:
                        cupy.multiply(C, alpha, out=C)
                else:
                    product = cupy.matmul(A, B)
                    cupy.multiply(C, beta, out=C)
                    cupy.add(C, cupy.multiply(product, alpha), out=C)
        except Exception as exc:  # a CuPy error is this baseline's failure, not the sweep's
            raise GemmDriverError(f"CuPy failed: {type(exc).__name__}: {exc}") from exc

    return launch
