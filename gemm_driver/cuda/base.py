"""The driver API's entry: the lazily imported bindings, cuInit, device counts, Resource.

Every other module of the CUDA layer's driver objects (device.py, streams.py, memory.py,
module.py) builds on these; none imports the others' objects back, so there is no circle.
"""

from __future__ import annotations

import weakref
from functools import lru_cache

from .errors import CudaError, GpuUnavailableError, check
from .stack import CudaStackMissingError, bindings


def api():
    """The cuda.bindings driver module (imported on first use: it needs no GPU to import)."""
    return bindings("driver")


@lru_cache(maxsize=1)
def init() -> None:
    """cuInit once; a missing driver or GPU becomes GpuUnavailableError."""
    try:
        check(api().cuInit(0), "cuInit")
    except CudaError as exc:
        raise GpuUnavailableError(f"no usable NVIDIA GPU: {exc.name} ({exc.message})") from None
    except CudaStackMissingError:
        raise
    except Exception as exc:  # pathfinder's DynamicLibNotFoundError when libcuda is absent
        raise GpuUnavailableError(f"no NVIDIA driver found (libcuda could not be loaded: {type(exc).__name__})") from None


def gpu_available() -> bool:
    """True when the driver loads and at least one device exists."""
    try:
        return device_count() > 0
    except GpuUnavailableError:
        return False


def device_count() -> int:
    init()
    return check(api().cuDeviceGetCount(), "cuDeviceGetCount")


def driver_version() -> tuple[int, int]:
    """The installed driver's CUDA version, e.g. (13, 0)."""
    init()
    v = check(api().cuDriverGetVersion(), "cuDriverGetVersion")
    return v // 1000, (v % 1000) // 10


class Resource:
    """Shared close()/context-manager plumbing; subclasses set ``self._finalizer``.

    Public so that other modules of the CUDA layer (graph.py) build their resources on it."""

    _finalizer: weakref.finalize | None = None

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()

    @property
    def closed(self) -> bool:
        return self._finalizer is None or not self._finalizer.alive

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
