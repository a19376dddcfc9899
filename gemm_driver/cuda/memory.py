"""Device memory: buffers this process owns, pinned words a kernel and the host share, and
copies and fills of pitched matrices that live elsewhere (the callers' arrays)."""

from __future__ import annotations

import ctypes
import weakref
from typing import Any

import numpy as np

from .base import Resource, api, init
from .device import Context
from .errors import CudaError, check
from .streams import Stream


class DeviceBuffer(Resource):
    """Linear device memory of ``nbytes`` bytes; ``ptr`` is the raw device address."""

    def __init__(self, nbytes: int, context: Context | None = None):
        if nbytes <= 0:
            raise ValueError(f"buffer size must be positive, got {nbytes} bytes")
        d = api()
        free, total = check(d.cuMemGetInfo(), "cuMemGetInfo")
        if nbytes > free:
            raise MemoryError(
                f"cannot allocate {nbytes / 2**30:.2f} GiB on the GPU: "
                f"{free / 2**30:.2f} GiB free of {total / 2**30:.2f} GiB"
            )
        self.nbytes = nbytes
        try:
            self.handle = check(d.cuMemAlloc(nbytes), "cuMemAlloc")
        except CudaError as exc:
            if exc.name != "CUDA_ERROR_OUT_OF_MEMORY":
                raise
            raise MemoryError(f"cannot allocate {nbytes / 2**30:.2f} GiB on the GPU: out of memory") from None
        self.ptr = int(self.handle)
        self._finalizer = weakref.finalize(self, api().cuMemFree, self.handle)

    @classmethod
    def from_array(cls, array: np.ndarray) -> "DeviceBuffer":
        buf = cls(array.nbytes)
        buf.upload(array)
        return buf

    def _check_fits(self, array: np.ndarray, offset: int) -> None:
        if not array.flags.c_contiguous:
            raise ValueError("host array must be C-contiguous")
        if offset < 0 or offset + array.nbytes > self.nbytes:
            raise ValueError(
                f"{array.nbytes} bytes at offset {offset} do not fit a {self.nbytes}-byte buffer"
            )

    def upload(self, array: np.ndarray, offset: int = 0, stream: Stream | None = None) -> None:
        """Host -> device; asynchronous on ``stream`` when one is given (keep ``array`` alive).

        Without a stream the copy is complete on the device when this returns. cuMemcpyHtoD
        alone does not promise that: from pageable memory it returns once the data is staged,
        and our streams are non-blocking, so they do not wait for the legacy stream's DMA. On
        the H100 a kernel on the session stream then read C before its NaN poison (or its
        input values) had landed: flaky wrong answers for correct kernels under load."""
        self._check_fits(array, offset)
        d = api()
        if stream is None:
            check(d.cuMemcpyHtoD(self.ptr + offset, array.ctypes.data, array.nbytes), "cuMemcpyHtoD")
            check(d.cuCtxSynchronize(), "cuCtxSynchronize")
        else:
            check(
                d.cuMemcpyHtoDAsync(self.ptr + offset, array.ctypes.data, array.nbytes, stream.handle),
                "cuMemcpyHtoDAsync",
            )

    def download(self, array: np.ndarray, offset: int = 0, stream: Stream | None = None) -> np.ndarray:
        """Device -> host into ``array``; asynchronous on ``stream`` when one is given."""
        self._check_fits(array, offset)
        d = api()
        if stream is None:
            check(d.cuMemcpyDtoH(array.ctypes.data, self.ptr + offset, array.nbytes), "cuMemcpyDtoH")
        else:
            check(
                d.cuMemcpyDtoHAsync(array.ctypes.data, self.ptr + offset, array.nbytes, stream.handle),
                "cuMemcpyDtoHAsync",
            )
        return array

    def memset32(self, value: int, count: int | None = None, stream: Stream | None = None) -> None:
        """Fill ``count`` 32-bit words (default: the whole buffer) with ``value``; without a
        stream, done on the device when this returns (cuMemsetD32 is asynchronous to the host
        and unordered with non-blocking streams: see ``upload``)."""
        count = self.nbytes // 4 if count is None else count
        d = api()
        if stream is None:
            check(d.cuMemsetD32(self.ptr, value, count), "cuMemsetD32")
            check(d.cuCtxSynchronize(), "cuCtxSynchronize")
        else:
            check(d.cuMemsetD32Async(self.ptr, value, count, stream.handle), "cuMemsetD32Async")


class PinnedWords(Resource):
    """A few pinned, device-mapped 32-bit words: the host and a running kernel both see them."""

    def __init__(self, count: int = 1):
        d = api()
        flags = d.CU_MEMHOSTALLOC_DEVICEMAP | d.CU_MEMHOSTALLOC_PORTABLE
        self._host = check(d.cuMemHostAlloc(4 * count, flags), "cuMemHostAlloc")
        self._device = int(check(d.cuMemHostGetDevicePointer(self._host, 0), "cuMemHostGetDevicePointer"))
        self._words = (ctypes.c_int32 * count).from_address(int(self._host))
        for i in range(count):
            self._words[i] = 0
        self._finalizer = weakref.finalize(self, api().cuMemFreeHost, self._host)

    def device_ptr(self, index: int) -> int:
        return self._device + 4 * index

    def __getitem__(self, index: int) -> int:
        return self._words[index]

    def __setitem__(self, index: int, value: int) -> None:
        self._words[index] = value


def pointer_device(ptr: int) -> int | None:
    """The ordinal of the GPU that device pointer ``ptr`` lives on; None when the driver does
    not know it as device memory (a host pointer, or memory of no context)."""
    init()
    d = api()
    status, ordinal = d.cuPointerGetAttribute(d.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, int(ptr))
    return int(ordinal) if int(status) == 0 else None


def copy_2d_async(dst: int, dst_pitch: int, src: int, src_pitch: int, width_bytes: int, height: int,
                  stream: Any) -> None:
    """Device-to-device copy of ``height`` rows of ``width_bytes`` between two pitched
    matrices (pitches in bytes), queued on ``stream`` (anything with ``handle``)."""
    if width_bytes <= 0 or height <= 0:
        return
    d = api()
    copy = d.CUDA_MEMCPY2D()
    copy.srcMemoryType = copy.dstMemoryType = d.CUmemorytype.CU_MEMORYTYPE_DEVICE
    copy.srcDevice, copy.srcPitch = int(src), int(src_pitch)
    copy.dstDevice, copy.dstPitch = int(dst), int(dst_pitch)
    copy.WidthInBytes, copy.Height = int(width_bytes), int(height)
    check(d.cuMemcpy2DAsync(copy, stream.handle), "cuMemcpy2DAsync")


def memset_2d32_async(dst: int, pitch: int, value: int, width: int, height: int, stream: Any) -> None:
    """Fill ``height`` rows of ``width`` 32-bit words (rows ``pitch`` bytes apart) with
    ``value``, queued on ``stream`` (anything with ``handle``)."""
    if width <= 0 or height <= 0:
        return
    check(api().cuMemsetD2D32Async(int(dst), int(pitch), int(value), int(width), int(height), stream.handle),
          "cuMemsetD2D32Async")
