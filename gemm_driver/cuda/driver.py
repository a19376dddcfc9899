"""CUDA driver API objects: Device, Context, Stream, Event, DeviceBuffer, Module, Kernel.

Every resource is a context manager with an idempotent ``close()`` and a
``weakref.finalize`` fallback, so nothing leaks when a test fails half-way.
The context is the device's *primary* context, retained explicitly: cuBLAS (which uses
the runtime API) shares it, and it behaves the same on cuda-bindings 12.x and 13.x,
unlike ``cuCtxCreate`` whose signature changed between them.

These objects are the whole of the driver API the package touches, each short; they share
the lazily imported bindings and the primary context.
"""

from __future__ import annotations

import ctypes
import weakref
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from .errors import CudaError, GpuUnavailableError, check, error_for
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


@dataclass(frozen=True)
class Device:
    """One GPU and the facts about it that kernels and reports need."""

    ordinal: int
    handle: Any
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    l2_bytes: int
    max_shared_per_block_optin: int
    max_shared_per_sm: int
    max_threads_per_sm: int
    max_registers_per_sm: int
    clock_khz: int
    memory_clock_khz: int
    memory_bus_bits: int
    total_memory: int

    @classmethod
    def get(cls, ordinal: int = 0) -> "Device":
        init()
        d = api()
        count = device_count()
        if not 0 <= ordinal < count:
            raise GpuUnavailableError(f"GPU {ordinal} does not exist; this machine has {count}")
        handle = check(d.cuDeviceGet(ordinal), "cuDeviceGet")
        a = d.CUdevice_attribute

        def attr(name: str) -> int:
            return check(d.cuDeviceGetAttribute(getattr(a, name), handle), "cuDeviceGetAttribute")

        raw_name = check(d.cuDeviceGetName(256, handle), "cuDeviceGetName")
        return cls(
            ordinal=ordinal,
            handle=handle,
            name=raw_name.split(b"\x00")[0].decode(),
            compute_capability=(
                attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
                attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"),
            ),
            sm_count=attr("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
            l2_bytes=attr("CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"),
            max_shared_per_block_optin=attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
            max_shared_per_sm=attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
            max_threads_per_sm=attr("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR"),
            max_registers_per_sm=attr("CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR"),
            clock_khz=attr("CU_DEVICE_ATTRIBUTE_CLOCK_RATE"),
            memory_clock_khz=attr("CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE"),
            memory_bus_bits=attr("CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH"),
            total_memory=check(d.cuDeviceTotalMem(handle), "cuDeviceTotalMem"),
        )

    @property
    def arch(self) -> str:
        """The NVRTC target for this device, e.g. 'sm_90'."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    def pci_bus_id(self) -> str:
        """e.g. '0000:1B:00.0': how NVML knows this same GPU, whatever CUDA_VISIBLE_DEVICES says."""
        raw = check(api().cuDeviceGetPCIBusId(32, self.handle), "cuDeviceGetPCIBusId")
        raw = raw if isinstance(raw, bytes) else str(raw).encode()
        return raw.split(b"\x00")[0].decode()


class Context(Resource):
    """The device's primary context, retained for this object's lifetime.

    ``with Context(device):`` pushes it on this thread and pops it on exit; the
    constructor also makes it current so that plain, non-``with`` use works too.
    """

    def __init__(self, device: Device | int = 0):
        self.device = device if isinstance(device, Device) else Device.get(device)
        d = api()
        self.handle = check(d.cuDevicePrimaryCtxRetain(self.device.handle), "cuDevicePrimaryCtxRetain")
        self._finalizer = weakref.finalize(self, _release_primary, self.device.handle)
        self.make_current()

    def make_current(self) -> None:
        check(api().cuCtxSetCurrent(self.handle), "cuCtxSetCurrent")

    def __enter__(self) -> "Context":
        check(api().cuCtxPushCurrent(self.handle), "cuCtxPushCurrent")
        return self

    def __exit__(self, *exc) -> None:
        check(api().cuCtxPopCurrent(), "cuCtxPopCurrent")
        self.close()

    def synchronize(self) -> None:
        check(api().cuCtxSynchronize(), "cuCtxSynchronize")

    def mem_info(self) -> tuple[int, int]:
        """(free, total) bytes of device memory."""
        return check(api().cuMemGetInfo(), "cuMemGetInfo")


def _release_primary(device_handle) -> None:
    api().cuDevicePrimaryCtxRelease(device_handle)


class Stream(Resource):
    """A non-blocking stream: it never synchronises implicitly with the legacy stream."""

    def __init__(self):
        d = api()
        flags = d.CUstream_flags.CU_STREAM_NON_BLOCKING
        self.handle = check(d.cuStreamCreate(flags), "cuStreamCreate")
        self._finalizer = weakref.finalize(self, api().cuStreamDestroy, self.handle)

    def synchronize(self) -> None:
        check(api().cuStreamSynchronize(self.handle), "cuStreamSynchronize")


class Event(Resource):
    """A timing event; ``elapsed_ms(start, end)`` reads the GPU time between two."""

    def __init__(self):
        d = api()
        self.handle = check(d.cuEventCreate(d.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")
        self._finalizer = weakref.finalize(self, api().cuEventDestroy, self.handle)

    def record(self, stream: Stream) -> None:
        check(api().cuEventRecord(self.handle, stream.handle), "cuEventRecord")

    def synchronize(self) -> None:
        check(api().cuEventSynchronize(self.handle), "cuEventSynchronize")

    def query(self) -> bool:
        """True once the work before the event has completed (never blocks)."""
        d = api()
        (status,) = d.cuEventQuery(self.handle)
        if status == d.CUresult.CUDA_ERROR_NOT_READY:
            return False
        check(status, "cuEventQuery")
        return True

    @staticmethod
    def elapsed_ms(start: "Event", end: "Event") -> float:
        d = api()
        # CUDA 13 retired the v1 entry point; 12.x bindings have both.
        elapsed = getattr(d, "cuEventElapsedTime_v2", None) or d.cuEventElapsedTime
        return float(check(elapsed(start.handle, end.handle), "cuEventElapsedTime"))


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


# C type names a kernel may declare -> the ctypes type that packs them.
C_TYPES: dict[str, type] = {
    "int": ctypes.c_int32,
    "unsigned": ctypes.c_uint32,
    "long long": ctypes.c_int64,
    "unsigned long long": ctypes.c_uint64,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "ptr": ctypes.c_uint64,  # any device pointer
}


# A ``const __grid_constant__ CUtensorMap`` parameter: the 128 opaque bytes of an encoded
# tensor map, passed by value. cuLaunchKernel's kernelParams hold a pointer to each argument
# and the driver copies the argument's bytes to the offset the cubin declares; the host copy
# is kept 128-byte aligned, the alignment CUtensorMap has in CUDA 13 headers (64 in CUDA 12).
TENSOR_MAP = "tensormap"
TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 128
ARGUMENT_TYPES = (*C_TYPES, TENSOR_MAP)


class TensorMapArgument:
    """A 128-byte-aligned host copy of an encoded tensor map, for one kernel argument."""

    def __init__(self, value: Any):
        try:
            view = memoryview(value).cast("B")
        except TypeError:
            raise TypeError(f"a {TENSOR_MAP} argument takes the {TENSOR_MAP_BYTES} bytes of an encoded "
                            f"CUtensorMap (bytes-like), got {type(value).__name__}") from None
        if view.nbytes != TENSOR_MAP_BYTES:
            raise TypeError(f"a {TENSOR_MAP} argument is the {TENSOR_MAP_BYTES} bytes of an encoded CUtensorMap; "
                            f"got {view.nbytes} bytes")
        self._storage = (ctypes.c_uint8 * (TENSOR_MAP_BYTES + TENSOR_MAP_ALIGN))()
        start = ctypes.addressof(self._storage)
        self.address = start + (-start) % TENSOR_MAP_ALIGN
        ctypes.memmove(self.address, view.tobytes(), TENSOR_MAP_BYTES)


class PackedArgs:
    """Kernel arguments packed once into a ``void*[]``, reusable for many launches."""

    def __init__(self, signature: Sequence[str], values: Sequence[Any]):
        if len(signature) != len(values):
            raise TypeError(f"kernel takes {len(signature)} arguments, {len(values)} given")
        self._values = [TensorMapArgument(v) if t == TENSOR_MAP else C_TYPES[t](_as_c_value(t, v))
                        for t, v in zip(signature, values)]
        self._pointers = (ctypes.c_void_p * len(values))(
            *[v.address if isinstance(v, TensorMapArgument) else ctypes.addressof(v) for v in self._values]
        )

    @property
    def address(self) -> int:
        return ctypes.addressof(self._pointers)


def _as_c_value(ctype: str, value: Any) -> Any:
    if ctype == "ptr":
        return int(getattr(value, "ptr", value))
    if ctype in ("float", "double"):
        return float(value)
    if isinstance(value, (float, np.floating)):
        raise TypeError(f"argument of C type {ctype} got a float ({value!r})")
    return int(value)


class Module(Resource):
    """A loaded cubin, or PTX compiled by the driver's JIT with its logs captured."""

    LOG_BYTES = 1 << 16

    def __init__(self, image: bytes, *, is_ptx: bool = False, name: str = "module"):
        d = api()
        self.name = name
        self.jit_log = ""
        if is_ptx:
            self.handle = self._load_ptx(image, name)
        else:
            self.handle = check(d.cuModuleLoadData(image), f"cuModuleLoadData({name})")
        self._finalizer = weakref.finalize(self, api().cuModuleUnload, self.handle)

    def _load_ptx(self, ptx: bytes, name: str):
        d = api()
        opt = d.CUjit_option
        info, error = bytearray(self.LOG_BYTES), bytearray(self.LOG_BYTES)
        options = [
            opt.CU_JIT_INFO_LOG_BUFFER,
            opt.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            opt.CU_JIT_ERROR_LOG_BUFFER,
            opt.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            opt.CU_JIT_LOG_VERBOSE,
        ]
        values = [info, self.LOG_BYTES, error, self.LOG_BYTES, 1]
        image = ptx if ptx.endswith(b"\x00") else ptx + b"\x00"
        status, handle = d.cuModuleLoadDataEx(image, len(options), options, values)
        self.jit_log = _c_string(info)
        if int(status) != 0:
            raise error_for(status, f"PTX JIT of {name}", _c_string(error))
        return handle

    def kernel(self, entry: str, signature: Sequence[str], dynamic_smem: int = 0) -> "Kernel":
        return Kernel(self, entry, signature, dynamic_smem)


def _c_string(buf: bytearray) -> str:
    return bytes(buf).split(b"\x00", 1)[0].decode(errors="replace").strip()


class Kernel:
    """One entry point of a Module with its declared C signature.

    Dynamic shared memory above the 48 KiB default is opted into once, here at load.
    """

    def __init__(self, module: Module, entry: str, signature: Sequence[str], dynamic_smem: int = 0):
        d = api()
        unknown = [t for t in signature if t not in ARGUMENT_TYPES]
        if unknown:
            raise TypeError(f"unknown C types {unknown}; allowed: {sorted(ARGUMENT_TYPES)}")
        self.module, self.entry, self.signature = module, entry, tuple(signature)
        self.handle = check(d.cuModuleGetFunction(module.handle, entry.encode()), f"cuModuleGetFunction({entry})")
        self.dynamic_smem = dynamic_smem
        self._configs: dict = {}  # (grid, block) -> CUlaunchConfig of a PDL launch
        if dynamic_smem > 48 * 1024:
            attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check(d.cuFuncSetAttribute(self.handle, attr, dynamic_smem), "cuFuncSetAttribute")

    def attribute(self, name: str) -> int:
        """A CU_FUNC_ATTRIBUTE_* value, e.g. attribute('NUM_REGS')."""
        d = api()
        attr = getattr(d.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")
        return check(d.cuFuncGetAttribute(attr, self.handle), "cuFuncGetAttribute")

    def pack(self, *args: Any) -> PackedArgs:
        return PackedArgs(self.signature, args)

    def launch(self, grid: Sequence[int], block: Sequence[int], args: PackedArgs | Sequence[Any], stream: Stream,
               *, programmatic: bool = False) -> None:
        """Enqueue the kernel on ``stream``. ``programmatic``: with programmatic stream
        serialization (PDL, sm_90+), so it may start before the grid ahead of it in the stream
        has finished; the kernel must wait for that grid (griddepcontrol.wait) before it
        touches global memory."""
        packed = args if isinstance(args, PackedArgs) else self.pack(*args)
        gx, gy, gz = (tuple(grid) + (1, 1))[:3]
        bx, by, bz = (tuple(block) + (1, 1))[:3]
        if programmatic:
            config = self._programmatic_config((gx, gy, gz), (bx, by, bz))
            config.hStream = stream.handle
            check(api().cuLaunchKernelEx(config, self.handle, packed.address, 0), f"cuLaunchKernelEx({self.entry})")
            return
        check(
            api().cuLaunchKernel(
                self.handle, gx, gy, gz, bx, by, bz, self.dynamic_smem, stream.handle, packed.address, 0
            ),
            f"cuLaunchKernel({self.entry})",
        )

    def _programmatic_config(self, grid: tuple[int, int, int], block: tuple[int, int, int]):
        """The CUlaunchConfig of a PDL launch of this grid and block, made once: a launch
        only sets its stream."""
        configs = self._configs
        config = configs.get((grid, block))
        if config is None:
            d = api()
            attribute = d.CUlaunchAttribute()
            attribute.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            attribute.value.programmaticStreamSerializationAllowed = 1
            config = configs[(grid, block)] = d.CUlaunchConfig()
            config.gridDimX, config.gridDimY, config.gridDimZ = grid
            config.blockDimX, config.blockDimY, config.blockDimZ = block
            config.sharedMemBytes = self.dynamic_smem
            config.attrs, config.numAttrs = [attribute], 1
        return config


# --- memory and streams this process does not own (the caller's arrays and streams) -------
class ExternalStream:
    """A CUDA stream owned by someone else (torch, CuPy, a raw handle): used, never destroyed.

    ``handle`` is the raw ``CUstream`` as an int (0: the legacy default stream; 1 and 2 are
    CU_STREAM_LEGACY and CU_STREAM_PER_THREAD, the values the CUDA array interface and
    DLPack use too). It may be reassigned: a Plan points one ExternalStream at each caller's
    stream in turn, so the launches it packed once follow the stream of every call."""

    __slots__ = ("handle",)

    def __init__(self, handle: int = 0):
        self.handle = int(handle)

    def __cuda_stream__(self) -> tuple[int, int]:
        """The CUDA stream protocol (version 0, the handle): how CuPy and others take it in."""
        return 0, self.handle

    def synchronize(self) -> None:
        check(api().cuStreamSynchronize(self.handle), "cuStreamSynchronize")


def stream_wait(stream: Any, event: "Event") -> None:
    """Make ``stream`` (anything with ``handle``: Stream, ExternalStream) wait for ``event``."""
    check(api().cuStreamWaitEvent(stream.handle, event.handle, 0), "cuStreamWaitEvent")


def stream_is_capturing(handle: int) -> bool:
    """Whether stream ``handle`` is being captured into a CUDA graph (torch.cuda.graph, CuPy,
    cuStreamBeginCapture) right now: such a stream may not wait on work recorded outside it."""
    d = api()
    status = check(d.cuStreamIsCapturing(int(handle)), "cuStreamIsCapturing")
    return status == d.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE


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
