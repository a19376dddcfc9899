"""The caller's arrays as GEMM operands, read in place: device arrays of any library, streams.

A device array is anything with ``__cuda_array_interface__`` or ``__dlpack__`` on a GPU:
torch and CuPy (read through their own attributes: pointer, shape, strides, the cheapest
way), JAX, Numba or any other producer (through the array interface, else DLPack).
``device_array`` turns one into a ``DeviceArray``: pointer, shape, leading dimension,
whether it is stored transposed, dtype and device; nothing is copied, and every refusal
is one line naming the operand, what it got and what is allowed.

Layouts: row-major with a leading dimension (unit column stride, row stride >= columns),
or a transposed view of one (unit row stride, column stride >= rows: ``trans``). Anything
else (broadcast, negative or doubly strided views) is refused; pass a contiguous copy.

``stream_handle`` turns a ``stream=`` argument (a raw handle, an object with
``__cuda_stream__``, a torch or CuPy stream) into the raw ``CUstream``; without one, the
current stream of the inputs' library (torch's, CuPy's), else the legacy default stream.
``allocate`` makes a float32 result of the inputs' kind (torch, CuPy); other kinds need out=.
"""

from __future__ import annotations

import ctypes
import sys
import weakref
from typing import Any, NamedTuple

import numpy as np

from .cuda.driver import pointer_device
from .fp8 import FORMATS
from .kernels.frameworks import cupy_stream

# The FP8 dtypes (torch's and ml_dtypes' names, fp8.FORMATS) and their formats; A and B may mix
# them (problem.fp8_types).
FP8_FORMATS = {dtype: fmt for fmt, (dtype, _largest) in FORMATS.items()}
# dtype name -> bytes per element, for the element types a GEMM here reads (float8_e4m3fn and
# float8_e5m2: FP8 codes, device arrays only, with their scales: fp8_scales.py).
ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2, **{fp8: 1 for fp8 in FP8_FORMATS}}
# Precisions (precision.py) each input dtype computes in, and its default kernel.
PRECISIONS_OF = {"float32": ("fp32", "tf32"), "bfloat16": ("bf16",), "float16": ("fp16",),
                 **{fp8: ("fp8",) for fp8 in FP8_FORMATS}}
DEFAULT_KERNEL = {"float32": "cublas", "bfloat16": "cublas_bf16", "float16": "cublas_fp16",
                  **{fp8: "cublaslt_fp8" for fp8 in FP8_FORMATS}}
_INT32_MAX = 2**31 - 1  # kernels index with 32-bit ints, cuBLAS takes 32-bit dimensions
_LEGACY_STREAM = 1  # CU_STREAM_LEGACY: what DLPack's stream=1 means (0 is not allowed there)
_DL_CUDA, _DL_CUDA_MANAGED = 2, 13  # DLDeviceType
_DL_DTYPES = {(2, 32): "float32", (2, 16): "float16", (4, 16): "bfloat16", (2, 64): "float64"}
_CAI_DTYPES = {"<f4": "float32", "<f2": "float16", "<f8": "float64"}


class DeviceArray(NamedTuple):
    """One caller's matrix on the GPU, as a launch reads it (no copy)."""

    obj: Any  # the caller's object
    kind: str  # "torch", "cupy", or "array" (any other producer: array interface / DLPack)
    ptr: int  # address of element (0, 0)
    rows: int
    cols: int
    ld: int  # leading dimension in elements: the row stride, or the column stride when trans
    trans: bool  # stored column-major: a transposed view of a row-major array
    dtype: str  # float32, bfloat16, float16, or the name of what it is
    device: int  # CUDA device ordinal
    producer_stream: int | None = None  # a stream the data is still being written on (array interface v3)

    @property
    def itemsize(self) -> int:
        return ITEMSIZE.get(self.dtype, 4)

    @property
    def layout(self) -> str:
        return "transposed (column-major)" if self.trans else "row-major"


def layout_of(name: str, rows: int, cols: int, row_stride: int, col_stride: int) -> tuple[int, bool]:
    """(leading dimension, stored transposed) of a rows x cols view with these element
    strides; ValueError when it is neither row-major with a leading dimension nor a
    transposed view of one. A dimension of size 1 may have any stride (torch, CuPy)."""
    if (cols <= 1 or col_stride == 1) and (rows <= 1 or row_stride >= cols):
        ld, trans = (row_stride if rows > 1 else cols), False
    elif (rows <= 1 or row_stride == 1) and (cols <= 1 or col_stride >= rows):
        ld, trans = (col_stride if cols > 1 else rows), True
    else:
        raise ValueError(f"{name} has element strides ({row_stride}, {col_stride}) for shape {rows}x{cols}: "
                         f"allowed are row-major (unit column stride, row stride >= {cols}) or a transposed "
                         "view of it (unit row stride, column stride >= rows); pass a contiguous copy")
    ld = max(ld, 1)
    extent = (rows - 1) * ld + cols if not trans else (cols - 1) * ld + rows
    if rows and cols and extent > _INT32_MAX:
        raise ValueError(f"{name} spans {extent} elements; at most {_INT32_MAX} (2^31 - 1): the kernels index "
                         "with 32-bit ints")
    return ld, trans


_LIBRARY_TYPES: dict[str, type] = {}  # "torch" -> torch.Tensor, "cupy" -> cupy.ndarray, once imported


def _library_type(module: str, attribute: str):
    """``module.attribute`` once the caller has imported the module (never imports it)."""
    found = _LIBRARY_TYPES.get(module)
    if found is None and module in sys.modules:
        found = _LIBRARY_TYPES[module] = getattr(sys.modules[module], attribute)
    return found


def kind_of(x) -> str:
    """'numpy', 'torch', 'cupy', 'array' (another device producer) or 'unknown'."""
    if isinstance(x, np.ndarray):
        return "numpy"
    tensor = _library_type("torch", "Tensor")
    if tensor is not None and isinstance(x, tensor):
        return "torch"
    cupy_array = _library_type("cupy", "ndarray")
    if cupy_array is not None and isinstance(x, cupy_array):
        return "cupy"
    if hasattr(x, "__cuda_array_interface__") or hasattr(x, "__dlpack__"):
        return "array"
    return "unknown"


def device_array(name: str, x, stream: int = 0, kind: str | None = None) -> DeviceArray:
    """``x`` as a DeviceArray (2-D, on a GPU, in an allowed layout); TypeError/ValueError
    in one line otherwise. ``stream`` is where the caller will use it (DLPack producers
    order their pending work before it)."""
    reader = _READERS.get(type(x))  # torch and CuPy arrays: one dict lookup, no isinstance chain
    if reader is not None:
        return reader(name, x)
    kind = kind or kind_of(x)
    if kind == "torch":
        _READERS[type(x)] = _from_torch  # torch.Tensor, nn.Parameter, ...
        return _from_torch(name, x)
    if kind == "cupy":
        _READERS[type(x)] = _from_cupy
        return _from_cupy(name, x)
    if kind == "array":
        return _from_interface(name, x, stream)
    if kind == "numpy":
        raise TypeError(f"{name} is a NumPy array (host memory); this call takes device arrays "
                        "(use gemm_driver.gemm() for NumPy arrays)")
    raise TypeError(f"{name} must be a NumPy array or a device array with __cuda_array_interface__ or "
                    f"__dlpack__ (torch, CuPy, JAX, Numba), got {type(x).__name__}")


_READERS: dict[type, Any] = {}  # exact type -> reader, learnt on first sight (torch, CuPy)
# Arrays read through the CUDA array interface, by identity: building the interface's dict and
# asking the driver which device holds the pointer cost more than the launch. Kept while the
# object lives (a weak reference) for producers whose arrays never change layout in place
# (JAX, Numba, ours); torch and CuPy arrays (whose shape and strides can be reassigned) and
# DLPack producers (whose __dlpack__ call orders their pending work) are read at every call.
_INTERFACE_SEEN: dict[int, tuple[Any, DeviceArray]] = {}
_INTERFACE_KEPT = 64


def _from_interface(name: str, x, stream: int) -> DeviceArray:
    seen = _INTERFACE_SEEN.get(id(x))
    if seen is not None and seen[0]() is x:
        return seen[1]
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None and (cai.get("typestr") in _CAI_DTYPES or not hasattr(x, "__dlpack__")):
        array = _from_cai(name, x, cai)
        try:
            ref = weakref.ref(x)
        except TypeError:  # not weakly referable: read it each time
            return array
        if len(_INTERFACE_SEEN) >= _INTERFACE_KEPT:
            _INTERFACE_SEEN.pop(next(iter(_INTERFACE_SEEN)))
        _INTERFACE_SEEN[id(x)] = (ref, array)
        return array
    return _from_dlpack(name, x, stream)


def _two_d(name: str, shape) -> tuple[int, int]:
    if len(shape) != 2:
        raise ValueError(f"{name} must be 2-D, got {len(shape)}-D (shape {tuple(shape)})")
    return int(shape[0]), int(shape[1])


_TORCH_DTYPES: dict = {}


def _torch_dtype_name(dtype) -> str:
    name = _TORCH_DTYPES.get(dtype)
    if name is None:
        name = _TORCH_DTYPES[dtype] = str(dtype).removeprefix("torch.")
    return name


def _from_torch(name: str, x) -> DeviceArray:
    shape = x.shape
    if len(shape) != 2:
        _two_d(name, shape)
    rows, cols = shape
    row_stride, col_stride = x.stride()
    if col_stride == 1 and row_stride >= cols > 1 and rows > 1 and (rows - 1) * row_stride + cols <= _INT32_MAX:
        ld, trans = row_stride, False  # row-major with a leading dimension: the common case, checked inline
    else:
        ld, trans = layout_of(name, rows, cols, row_stride, col_stride)
    device = x.get_device()
    if device < 0:
        raise ValueError(f"{name} is a torch tensor on {x.device}; a device array must be on a CUDA GPU "
                         "(move it with .cuda(), or pass x.numpy() for the host path)")
    dtype = _TORCH_DTYPES.get(x.dtype) or _torch_dtype_name(x.dtype)
    return DeviceArray(x, "torch", x.data_ptr(), rows, cols, ld, trans, dtype, device)


def _from_cupy(name: str, x) -> DeviceArray:
    rows, cols = _two_d(name, x.shape)
    itemsize = x.dtype.itemsize
    row_bytes, col_bytes = x.strides
    if row_bytes % itemsize or col_bytes % itemsize:
        raise ValueError(f"{name} has byte strides {x.strides}, not whole {itemsize}-byte elements")
    ld, trans = layout_of(name, rows, cols, row_bytes // itemsize, col_bytes // itemsize)
    return DeviceArray(x, "cupy", int(x.data.ptr), rows, cols, ld, trans, x.dtype.name, int(x.device.id))


def _from_cai(name: str, x, cai: dict) -> DeviceArray:
    """The CUDA array interface (v2/v3): shape, typestr, data (pointer, read-only), strides
    in bytes (None: C-contiguous), stream (v3: where the producer may still be writing)."""
    rows, cols = _two_d(name, cai["shape"])
    typestr = cai["typestr"]
    dtype = _CAI_DTYPES.get(typestr, f"typestr {typestr!r}")
    itemsize = int(typestr[2:]) if typestr[2:].isdigit() else ITEMSIZE.get(dtype, 4)
    ptr, _readonly = cai["data"]
    strides = cai.get("strides")
    row_bytes, col_bytes = strides if strides is not None else (cols * itemsize, itemsize)
    if row_bytes % itemsize or col_bytes % itemsize:
        raise ValueError(f"{name} has byte strides {tuple(strides)}, not whole {itemsize}-byte elements")
    ld, trans = layout_of(name, rows, cols, row_bytes // itemsize, col_bytes // itemsize)
    device = pointer_device(ptr) if ptr else 0
    if device is None:
        raise ValueError(f"{name}'s pointer {int(ptr):#x} is not device memory the CUDA driver knows")
    return DeviceArray(x, "array", int(ptr), rows, cols, ld, trans, dtype, device, cai.get("stream"))


# --- DLPack: the capsule's DLTensor read with ctypes (dlpack.h, the unversioned ABI) ---------
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):  # the first member of DLManagedTensor
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


class DLPackView(NamedTuple):
    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    dtype: str
    device_type: int
    device_id: int


def read_dlpack(capsule) -> DLPackView:
    """What a "dltensor" capsule describes. The capsule is only read, not consumed: its
    destructor still releases the producer's reference when it is dropped, while the
    caller's own object keeps the memory alive."""
    tensor = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    ndim = tensor.ndim
    shape = tuple(tensor.shape[i] for i in range(ndim))
    if tensor.strides:
        strides = tuple(tensor.strides[i] for i in range(ndim))
    else:  # NULL strides: compact row-major
        strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(ndim))
    dt = tensor.dtype
    dtype = _DL_DTYPES.get((dt.code, dt.bits), f"DLPack type (code {dt.code}, {dt.bits} bits)")
    if dt.lanes != 1:
        dtype = f"DLPack vector type ({dt.lanes} lanes)"
    return DLPackView((tensor.data or 0) + tensor.byte_offset, shape, strides, dtype, tensor.device.device_type,
                      tensor.device.device_id)


def _from_dlpack(name: str, x, stream: int) -> DeviceArray:
    device_type, device_id = x.__dlpack_device__()
    if int(device_type) not in (_DL_CUDA, _DL_CUDA_MANAGED):
        raise ValueError(f"{name} is on DLPack device type {int(device_type)} (1 is the CPU); a device array "
                         "must be on a CUDA GPU")
    view = read_dlpack(x.__dlpack__(stream=stream or _LEGACY_STREAM))
    rows, cols = _two_d(name, view.shape)
    ld, trans = layout_of(name, rows, cols, *view.strides)
    return DeviceArray(x, "array", view.ptr, rows, cols, ld, trans, view.dtype, view.device_id)


# --- streams ---------------------------------------------------------------------------------
def stream_handle(stream, like: DeviceArray | None = None) -> int:
    """The raw CUstream of a ``stream=`` argument; None: the current stream of ``like``'s
    library (torch, CuPy), else 0 (the legacy default stream)."""
    if stream is None:
        return current_stream(like) if like is not None else 0
    if isinstance(stream, int) and not isinstance(stream, bool):
        if stream < 0:
            raise ValueError(f"stream must be a CUDA stream handle (a non-negative int), got {stream}")
        return stream
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:  # the CUDA stream protocol: (version, handle)
        return int(protocol()[1])
    for attribute in ("cuda_stream", "ptr", "handle"):  # torch.cuda.Stream, cupy Stream, ours and Numba's
        value = getattr(stream, attribute, None)
        if value is not None:
            return int(getattr(value, "value", value) or 0)  # Numba's handle is a ctypes c_void_p
    raise TypeError("stream must be a CUDA stream handle (int), an object with __cuda_stream__, or a torch/CuPy "
                    f"stream, got {type(stream).__name__}")


def current_stream(like: DeviceArray) -> int:
    """The stream ``like``'s library queues work on now (torch's or CuPy's current stream)."""
    if like.kind == "torch":
        raw = _TORCH_CURRENT_STREAM.get("raw")
        if raw is None:
            raw = _TORCH_CURRENT_STREAM["raw"] = _torch_current_stream_reader()
        return raw(like.device)
    if like.kind == "cupy":
        import cupy

        return int(cupy.cuda.get_current_stream().ptr)
    return 0


_TORCH_CURRENT_STREAM: dict[str, Any] = {}  # "raw" -> device ordinal -> raw stream, found once


def _torch_current_stream_reader():
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # the cheap spelling, where it exists
    if raw is not None:
        return raw  # returns the handle as an int
    return lambda device: int(torch.cuda.current_stream(device).cuda_stream)


def allocate(like: DeviceArray, rows: int, cols: int, *, trans: bool, stream: int, dtype: str = "float32"):
    """A ``dtype`` rows x cols array of ``like``'s kind on its device (a transposed view of a
    cols x rows one when ``trans``), safe to use on ``stream``; TypeError for other kinds."""
    if like.kind == "torch":
        import torch

        out = torch.empty((cols, rows) if trans else (rows, cols), dtype=getattr(torch, dtype),
                          device=like.obj.device)
        if stream != current_stream(like):  # torch's allocator must not reuse it before ``stream`` is done
            out.record_stream(torch.cuda.ExternalStream(stream, device=like.obj.device))
        return out.t() if trans else out
    if like.kind == "cupy" and dtype != "bfloat16":
        import cupy

        shape = (cols, rows) if trans else (rows, cols)
        with cupy.cuda.Device(like.device):
            if stream == current_stream(like):
                out = cupy.empty(shape, dtype=dtype)
            else:
                with cupy_stream(stream):  # CuPy's pool hands out memory per stream
                    out = cupy.empty(shape, dtype=dtype)
        return out.T if trans else out
    what = "CuPy has no bfloat16" if like.kind == "cupy" else f"A is a {type(like.obj).__name__}"
    raise TypeError(f"out= is needed: results are allocated for torch and CuPy arrays only, and {what}; pass a "
                    f"{dtype} {rows}x{cols} device array as out=")


class DeviceVector(NamedTuple):
    """A contiguous vector on the GPU (a bias), read in place."""

    ptr: int
    length: int
    dtype: str
    device: int


def device_vector(name: str, x, stream: int = 0) -> DeviceVector:
    """``x`` (1-D, unit stride, on a GPU) as a DeviceVector; one-line errors otherwise. Read
    as a 1 x n matrix of the same memory."""
    if _READERS.get(type(x)) is _from_torch or kind_of(x) == "torch":
        if x.dim() != 1 or (x.shape[0] > 1 and x.stride(0) != 1):
            raise ValueError(f"{name} must be a contiguous vector (1-D, unit stride), got shape {tuple(x.shape)} "
                             f"and strides {x.stride()}")
        device = x.get_device()
        if device < 0:
            raise ValueError(f"{name} is a torch tensor on {x.device}; a device array must be on a CUDA GPU")
        return DeviceVector(x.data_ptr(), x.shape[0], _TORCH_DTYPES.get(x.dtype) or _torch_dtype_name(x.dtype), device)
    else:
        shape = getattr(x, "shape", None)
        if shape is None or len(shape) != 1:
            raise ValueError(f"{name} must be a 1-D device array, got {type(x).__name__} of shape {shape}")
        row = device_array(name, x.reshape(1, -1), stream)
        if row.rows == 1 and row.cols > 1 and row.trans:
            raise ValueError(f"{name} must be a contiguous vector (unit stride)")
    return DeviceVector(row.ptr, row.cols, row.dtype, row.device)


def product_shape(a_shape, a_dtype: str, b_shape, b_dtype: str) -> tuple[int, int, int]:
    """(m, n, k) of A @ B once A and B agree: the same dtype (or two FP8 formats), then the
    inner dimension. Host and device arrays alike; each path has checked A itself (2-D, an
    allowed dtype) first."""
    if b_dtype != a_dtype and not (a_dtype in FP8_FORMATS and b_dtype in FP8_FORMATS):
        raise TypeError(f"A is {a_dtype} and B is {b_dtype}: A and B must have the same dtype (FP8 A and B may "
                        "mix float8_e4m3fn and float8_e5m2)")
    (m, k), (k2, n) = a_shape, b_shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: A is {m}x{k}, B is {k2}x{n}")
    return m, n, k
