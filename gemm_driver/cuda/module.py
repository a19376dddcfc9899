"""Loaded code: Module (a cubin, or PTX through the driver's JIT), Kernel (one entry point with
its declared C signature) and the packing of typed launch arguments, tensor maps included."""

from __future__ import annotations

import ctypes
import struct
import weakref
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .base import Resource, api
from .errors import check, error_for
from .streams import Stream
from .tensor_map import readdress


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


def _tensor_map_bytes(value: Any) -> memoryview:
    """The 128 bytes of an encoded tensor map (any bytes-like value), checked."""
    try:
        view = memoryview(value).cast("B")
    except TypeError:
        raise TypeError(f"a {TENSOR_MAP} argument takes the {TENSOR_MAP_BYTES} bytes of an encoded "
                        f"CUtensorMap (bytes-like), got {type(value).__name__}") from None
    if view.nbytes != TENSOR_MAP_BYTES:
        raise TypeError(f"a {TENSOR_MAP} argument is the {TENSOR_MAP_BYTES} bytes of an encoded CUtensorMap; "
                        f"got {view.nbytes} bytes")
    return view


# C type -> (struct format, bits): the values are packed with struct, wrapped to the type's width
# as ctypes would store them
_FORMATS = {"int": ("i", 32), "unsigned": ("I", 32), "long long": ("q", 64), "unsigned long long": ("Q", 64),
            "float": ("f", 32), "double": ("d", 64), "ptr": ("Q", 64), TENSOR_MAP: (f"{TENSOR_MAP_BYTES}s", 0)}


@dataclass(frozen=True)
class _Layout:
    """Where a signature's arguments sit in one buffer: each at its size's alignment, a tensor
    map at TENSOR_MAP_ALIGN; ``whole`` packs them all at once (padding included)."""

    offsets: tuple[int, ...]
    size: int
    whole: struct.Struct


_LAYOUTS: dict[tuple[str, ...], _Layout] = {}


def _layout(signature: tuple[str, ...]) -> _Layout:
    """The signature's layout, worked out once."""
    known = _LAYOUTS.get(signature)
    if known is None:
        offsets, end, fmt = [], 0, "<"
        for t in signature:
            size = TENSOR_MAP_BYTES if t == TENSOR_MAP else ctypes.sizeof(C_TYPES[t])
            pad = -end % (TENSOR_MAP_ALIGN if t == TENSOR_MAP else size)
            fmt += "x" * pad + _FORMATS[t][0]
            offsets.append(end + pad)
            end += pad + size
        known = _LAYOUTS[signature] = _Layout(tuple(offsets), end, struct.Struct(fmt))
    return known


# integer C type -> the values struct packs as they are (the common case, checked first)
_IN_RANGE = {t: (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if fmt in "iq" else (0, (1 << bits) - 1)
             for t, (fmt, bits) in _FORMATS.items() if fmt in ("i", "I", "q", "Q")}


def _stored(ctype: str, value: Any) -> Any:
    """``value`` as a ``ctype`` argument holds it: checked and converted (_as_c_value), integers
    wrapped to the type's width, a float rounded to FP32, a tensor map as its 128 bytes."""
    if type(value) is int and ctype in _IN_RANGE:
        low, high = _IN_RANGE[ctype]
        if low <= value <= high:
            return value
    if ctype == TENSOR_MAP:
        return _tensor_map_bytes(value).tobytes()
    v = _as_c_value(ctype, value)
    fmt, bits = _FORMATS[ctype]
    if ctype == "float":
        return ctypes.c_float(v).value  # out of range: inf, as ctypes stores it
    if fmt in "iIqQ":
        v &= (1 << bits) - 1
        if fmt in "iq" and v >> (bits - 1):
            v -= 1 << bits
    return v


class PackedArgs:
    """Kernel arguments packed once into a ``void*[]``, reusable for many launches.

    The values sit in one buffer (its start TENSOR_MAP_ALIGN-aligned), which ``replaced``
    copies whole: a launch at new addresses changes a few arguments and keeps the rest.
    cuLaunchKernel copies the values when it is called, so a packed set may be dropped once its
    launches are enqueued (or captured)."""

    def __init__(self, signature: Sequence[str], values: Sequence[Any], *, _copy_of: "PackedArgs | None" = None):
        if _copy_of is None and len(signature) != len(values):
            raise TypeError(f"kernel takes {len(signature)} arguments, {len(values)} given")
        self._signature = tuple(signature)
        self._layout = layout = _layout(self._signature)
        self._storage = ctypes.create_string_buffer(layout.size + TENSOR_MAP_ALIGN)
        start = ctypes.addressof(self._storage)
        self._shift = (-start) % TENSOR_MAP_ALIGN
        base = start + self._shift
        if _copy_of is not None:
            ctypes.memmove(base, _copy_of._base, layout.size)
        else:
            layout.whole.pack_into(self._storage, self._shift, *map(_stored, self._signature, values))
        self._pointers = (ctypes.c_void_p * len(layout.offsets))(*[base + offset for offset in layout.offsets])

    @property
    def _base(self) -> int:
        return ctypes.addressof(self._storage) + self._shift

    def replaced(self, changes: Mapping[int, Any], readdressed: Mapping[int, int] | None = None) -> "PackedArgs":
        """A copy with the arguments at the given positions set to new values; ``readdressed``:
        tensor-map arguments (by position) pointed at a new device address in place, their
        shapes, strides and boxes kept (tensor_map.readdress)."""
        copy = PackedArgs(self._signature, (), _copy_of=self)
        for index, value in changes.items():
            ctype = self._signature[index]
            struct.pack_into("<" + _FORMATS[ctype][0], copy._storage, copy._shift + self._layout.offsets[index],
                             _stored(ctype, value))
        for index, address in (readdressed or {}).items():
            if self._signature[index] != TENSOR_MAP:
                raise TypeError(f"argument {index} is a {self._signature[index]}, not a tensor map to readdress")
            readdress(copy._base + self._layout.offsets[index], address)
        return copy

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
        self.resident: dict = {}  # a recipe's answers to occupancy questions, by launch shape: asked once
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
