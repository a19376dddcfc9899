"""cuBLASLt's ctypes binding: the declared entry points, its structs and attribute numbers,
and the objects it owns (destroyed exactly once), starting with the handle.

The entry points are declared in one table (``SIGNATURES``) like :mod:`.cublas`, whose
status names and ``errcheck`` this module reuses, so a failing call raises
:class:`~.errors.CublasError` naming the function. Creating an :class:`LtHandle` needs a
current CUDA context, which the caller owns (the project's primary context).
"""

from __future__ import annotations

import ctypes
import functools
import re
import weakref
from typing import Any

from . import cublas
from .errors import CublasError, GemmDriverError

# Attribute numbers (cublasLt.h); the enums only grow, so 12.x and 13.x agree on these.
_DESC_TRANSA, _DESC_TRANSB = 3, 4
# CUBLASLT_MATMUL_DESC_EPILOGUE, _BIAS_POINTER, _BIAS_DATA_TYPE (cublasLt.h of cuBLAS 12.9 and 13.x).
_DESC_EPILOGUE, _DESC_BIAS_POINTER, _DESC_BIAS_DATA_TYPE = 7, 8, 26
# cublasLtEpilogue_t per problem.epilogue: DEFAULT = 1, BIAS = 4, RELU_BIAS = RELU (2) | BIAS,
# GELU_BIAS = GELU (32) | BIAS (cublasLt.h; the same in nvmath-python's cublasLt.Epilogue).
EPILOGUES = {"none": 1, "bias": 4, "bias_relu": 6, "bias_gelu": 36}
# FP8 scaling (cublasLt.h of the nvidia-cublas-cu12 12.9.3.13 wheel; tests/test_cublaslt.py
# reads them back from the installed header): CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
# B_SCALE_POINTER, D_SCALE_POINTER, FAST_ACCUM (int8_t), A_SCALE_MODE, B_SCALE_MODE (int32_t).
_DESC_A_SCALE_POINTER, _DESC_B_SCALE_POINTER, _DESC_D_SCALE_POINTER = 17, 18, 20
_DESC_FAST_ACCUM, _DESC_A_SCALE_MODE, _DESC_B_SCALE_MODE = 25, 31, 32
# cublasLtMatmulMatrixScale_t: one FP32 scalar; a vector of M (or N) FP32 scales
# (OUTER_VEC_32F); one FP32 scale per 128 elements along K (VEC128_32F); one per 128 x 128
# block (BLK128x128_32F). The last three exist from cuBLAS 12.9 (not in older headers).
MATRIX_SCALE = {"SCALAR_32F": 0, "OUTER_VEC_32F": 3, "VEC128_32F": 4, "BLK128x128_32F": 5}
_PREF_MAX_WORKSPACE_BYTES = 1
# CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK and cublasLtReductionScheme_t: the split-K
# reductions the heuristic may offer. OUTPUT_TYPE keeps the partial sums in D's type, so a
# 16-bit D is rounded once per partial: on the H100 at 1031x1029x257 with BF16 D the autotuned
# pick (3 slices) ran 11.6x past the bound (results/h100-80gb-hbm3/diag-cublaslt-odd-bf16.txt).
# The baseline asks for reductions in the compute type only (FP32 partials, D rounded once),
# the contract every kernel here is verified to; no split-K (NONE, 0) is always allowed.
_PREF_REDUCTION_SCHEME_MASK = 3
REDUCTION_SCHEME = {"INPLACE": 1, "COMPUTE_TYPE": 2, "OUTPUT_TYPE": 4}
REDUCTIONS_IN_COMPUTE_TYPE = REDUCTION_SCHEME["INPLACE"] | REDUCTION_SCHEME["COMPUTE_TYPE"]
_PREF_MIN_ALIGNMENT = {"a": 5, "b": 6, "c": 7, "d": 8}
_LAYOUT_ATTRIBUTES = {"type": 0, "order": 1, "rows": 2, "cols": 3, "ld": 4}
# CUBLASLT_ALGO_CONFIG_*: what describe() records about an algorithm.
ALGO_CONFIG = {"algo_id": 0, "tile_id": 1, "splitk": 2, "reduction_scheme": 3, "swizzle": 4,
               "custom_option": 5, "stages_id": 6, "inner_shape_id": 7, "cluster_shape_id": 8}


# --- the binding ---------------------------------------------------------------------
class Algo(ctypes.Structure):
    """cublasLtMatmulAlgo_t: 64 opaque bytes, copied by value."""
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class HeuristicResult(ctypes.Structure):
    """cublasLtMatmulHeuristicResult_t."""
    _fields_ = [("algo", Algo), ("workspace_size", ctypes.c_size_t), ("state", ctypes.c_int),
                ("waves_count", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


_i, _p, _sz = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
_pp, _szp = ctypes.POINTER(_p), ctypes.POINTER(_sz)
_algo_p = ctypes.POINTER(Algo)
_SET = (_p, _i, _p, _sz)  # descriptor, attribute, buffer, size
_GET = (_p, _i, _p, _sz, _szp)  # ... plus bytes written (or needed, when size is 0)

# (restype, name, argtypes). Status-returning (c_int) entries get cublas's errcheck.
SIGNATURES: tuple[tuple[Any, str, tuple[Any, ...]], ...] = (
    (_i, "cublasLtCreate", (_pp,)),
    (_i, "cublasLtDestroy", (_p,)),
    (_sz, "cublasLtGetVersion", ()),
    (_i, "cublasLtGetProperty", (_i, ctypes.POINTER(_i))),
    (ctypes.c_char_p, "cublasLtGetStatusName", (_i,)),
    (ctypes.c_char_p, "cublasLtGetStatusString", (_i,)),
    (_i, "cublasLtMatmulDescCreate", (_pp, _i, _i)),
    (_i, "cublasLtMatmulDescDestroy", (_p,)),
    (_i, "cublasLtMatmulDescSetAttribute", _SET),
    (_i, "cublasLtMatmulDescGetAttribute", _GET),
    (_i, "cublasLtMatrixLayoutCreate", (_pp, _i, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int64)),
    (_i, "cublasLtMatrixLayoutDestroy", (_p,)),
    (_i, "cublasLtMatrixLayoutGetAttribute", _GET),
    (_i, "cublasLtMatmulPreferenceCreate", (_pp,)),
    (_i, "cublasLtMatmulPreferenceDestroy", (_p,)),
    (_i, "cublasLtMatmulPreferenceSetAttribute", _SET),
    (_i, "cublasLtMatmulAlgoGetHeuristic",
     (_p, _p, _p, _p, _p, _p, _p, _i, ctypes.POINTER(HeuristicResult), ctypes.POINTER(_i))),
    (_i, "cublasLtMatmulAlgoConfigGetAttribute", (_algo_p, _i, _p, _sz, _szp)),
    (_i, "cublasLtMatmul",
     (_p, _p, _p, _p, _p, _p, _p, _p, _p, _p, _p, _p, _algo_p, _p, _sz, _p)),
)


@functools.lru_cache(maxsize=None)
def _library() -> ctypes.CDLL:
    """cuBLASLt (the same wheel as cuBLAS), opened once and bound."""
    return cublas.bind_library("cublasLt", "cuBLASLt", SIGNATURES)


def library_path() -> str:
    return _library()._name


def version() -> tuple[int, int, int]:
    """(major, minor, patch) of the loaded cuBLASLt; needs no GPU."""
    lib, value, parts = _library(), ctypes.c_int(), []
    for prop in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        lib.cublasLtGetProperty(prop, ctypes.byref(value))
        parts.append(value.value)
    return tuple(parts)  # type: ignore[return-value]


@functools.lru_cache(maxsize=None)
def enum_names(prefix: str) -> dict[int, str]:
    """{value: name} of a cublasLt.h enum (e.g. "CUBLASLT_MATMUL_TILE_" -> {23: "128x256"}),
    read from the header of the installed wheel; {} when no header ships with it. The tile
    and stage enums have hundreds of irregular entries: reading them beats copying them."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        directory = find_nvidia_header_directory("cublas")
        text = open(f"{directory}/cublasLt.h", encoding="utf-8", errors="replace").read() if directory else ""
    except Exception:  # no header wheel, an older pathfinder: names are a convenience, ids remain
        return {}
    pattern = re.compile(re.escape(prefix) + r"(\w+)\s*=\s*(\d+)\s*,")
    return {int(value): name for name, value in pattern.findall(text)}


# --- handle --------------------------------------------------------------------------
def _destroy_quietly(destroy: Any, raw: int) -> None:
    """Finalizer for a forgotten handle or descriptor: runs inside GC, where raising helps no one."""
    try:
        destroy(raw)
    except CublasError:
        pass


class _Owned:
    """A cuBLASLt object destroyed exactly once: by close(), with, or the GC."""

    def _own(self, raw: int, destroy: Any) -> None:
        self._raw, self._destroy = raw, destroy
        self._finalizer = weakref.finalize(self, _destroy_quietly, destroy, raw)
        self._finalizer.atexit = False  # process teardown frees it; the context may be gone

    @property
    def ptr(self) -> int:
        if not self._finalizer.alive:
            raise GemmDriverError(f"{type(self).__name__} is closed")
        return self._raw

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        if self._finalizer.detach() is not None:
            self._destroy(self._raw)

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _create(create: Any, *args: Any) -> int:
    raw = ctypes.c_void_p()
    create(ctypes.byref(raw), *args)
    return int(raw.value or 0)


class LtHandle(_Owned):
    """A cublasLtHandle_t. Needs a current CUDA context (the caller's primary context);
    cuBLASLt takes the stream per call, so the handle holds none."""

    def __init__(self):
        lib = _library()
        self._own(_create(lib.cublasLtCreate), lib.cublasLtDestroy)


def _get_int(getter: Any, obj: Any, attribute: int) -> int:
    """An integer attribute whose width may differ between cuBLASLt versions: ask for the
    size first (size 0 returns the bytes needed), then read that many bytes."""
    needed = ctypes.c_size_t()
    getter(obj, attribute, None, 0, ctypes.byref(needed))
    buf = ctypes.create_string_buffer(max(needed.value, 1))
    getter(obj, attribute, buf, needed.value, ctypes.byref(needed))
    return int.from_bytes(buf.raw[: needed.value], "little", signed=True)
