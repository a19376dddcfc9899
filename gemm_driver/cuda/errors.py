"""One place that turns CUDA, NVRTC and cuBLAS status codes into typed exceptions.

cuda-python returns ``(status, *values)`` tuples from every call. ``check`` unwraps them:
it returns the values on success and raises an exception that carries the enum *name*
and the library's own message otherwise, so no call site ever inspects a status itself.
"""

from __future__ import annotations

from typing import Any


class GemmDriverError(Exception):
    """Base of every error this package raises on purpose."""


class UnsupportedProblem(GemmDriverError, ValueError):
    """This kernel or provider does not take this problem here: its shape, alignment,
    layout, batch, precision, tunables, or the GPU's architecture. A sweep records it as
    "skipped" with the message; every other error from a launcher is a failure.

    Also a ValueError: for a caller of gemm(), plan() or the CLI it is bad input (the CLI
    exits 2 on ValueError), as it was before it had its own class."""


class GpuUnavailableError(GemmDriverError):
    """No usable NVIDIA driver or GPU on this machine."""


class LibraryNotFoundError(GemmDriverError):
    """A CUDA library (NVRTC, nvJitLink, cuBLAS) could not be located."""


class CudaError(GemmDriverError):
    """A CUDA driver call failed; ``name`` is the CUresult enum name."""

    def __init__(self, name: str, message: str, call: str = "", log: str = ""):
        self.name, self.message, self.call, self.log = name, message, call, log
        where = f" in {call}" if call else ""
        text = f"{name}{where}: {message}"
        if log.strip():
            text += "\n" + log.strip()
        super().__init__(text)


class NvrtcError(CudaError):
    """NVRTC failed; ``log`` holds the compiler's log when a program was given."""


class CublasError(CudaError):
    """cuBLAS returned a status other than CUBLAS_STATUS_SUCCESS."""


def _enum_name(status: Any) -> str:
    return getattr(status, "name", None) or str(status)


def _driver_message(status: Any) -> str:
    from cuda.bindings import driver

    err, text = driver.cuGetErrorString(status)
    if int(err) != 0 or text is None:
        return "unknown driver error"
    return text.decode() if isinstance(text, bytes) else str(text)


def _nvrtc_message(status: Any) -> str:
    from cuda.bindings import nvrtc

    err, text = nvrtc.nvrtcGetErrorString(status)
    return text.decode() if isinstance(text, bytes) else str(text)


def nvrtc_log(program: Any) -> str:
    """The compile log of an NVRTC program, or '' if it cannot be read."""
    from cuda.bindings import nvrtc

    err, size = nvrtc.nvrtcGetProgramLogSize(program)
    if int(err) != 0 or size <= 1:
        return ""
    buf = b" " * size
    (err,) = nvrtc.nvrtcGetProgramLog(program, buf)
    return buf.rstrip(b"\x00 ").decode(errors="replace") if int(err) == 0 else ""


def error_for(status: Any, call: str = "", log: str = "") -> CudaError:
    """The typed exception for a failed driver or NVRTC status."""
    if type(status).__name__ == "nvrtcResult":
        return NvrtcError(_enum_name(status), _nvrtc_message(status), call, log)
    return CudaError(_enum_name(status), _driver_message(status), call, log)


def check(result: Any, call: str = "", program: Any = None) -> Any:
    """Unwrap a cuda-python result tuple; raise CudaError / NvrtcError on failure.

    Returns None for a bare status, the single value for ``(status, value)``, and a
    tuple for more values. ``program`` (an nvrtcProgram) attaches the compile log.
    """
    if isinstance(result, tuple):
        status, values = result[0], result[1:]
    else:
        status, values = result, ()
    if int(status) != 0:
        raise error_for(status, call, nvrtc_log(program) if program is not None else "")
    if not values:
        return None
    return values[0] if len(values) == 1 else values
