"""cuBLASLt through ctypes: the strongest library baseline, with its algorithm chosen by measurement.

Plain cuBLAS runs whatever its heuristic ranks first. cuBLASLt can be asked for the
heuristic's top few candidates (``cublasLtMatmulAlgoGetHeuristic``); :class:`LtMatmul`
times each one on the caller's stream (replays of a CUDA graph, so no host time counts) and
keeps the fastest, and :meth:`LtMatmul.describe` records which algorithm that was (id, tile, stages, split-K, swizzle, cluster, workspace,
waves) for the results JSON.

The entry points are declared in one table (``SIGNATURES``) like :mod:`.cublas`, whose
status names and ``errcheck`` this module reuses, so a failing call raises
:class:`~.errors.CublasError` naming the function. The row-major swap is
:func:`.cublas.column_major_call`, written once there.

Precisions (``LT_PRECISIONS``), all with FP32 compute, FP32 alpha/beta and an FP32 C:
fp32 (no TF32), tf32 (``CUBLAS_COMPUTE_32F_FAST_TF32``), bf16, fp16 and fp8 (e4m3 A and B).
cuBLASLt's FP8 kernels want the "TN" layout: both operands K-contiguous. In row-major
terms A is stored as usual (M x K) but B must be stored transposed, N x K row-major
(``b_k_major=True``); and k, lda, ldb must be multiples of 16 elements with 16-byte
aligned A and B. :func:`validate` refuses anything else with the rule it breaks.
Measured with cuBLASLt 13.1 on the H100: m and n need not be multiples of 16 (100x72x64
and 4093x4096x4096 ran and were right), but an FP32 C whose rows are not 16-byte
aligned (ldc not a multiple of 4: n = 4094, 4091, 33) gets no algorithm from the
heuristic, which then raises CUBLAS_STATUS_NOT_SUPPORTED.

Descriptors are host objects (no GPU needed); creating an :class:`LtHandle` needs a
current CUDA context, which the caller owns (the project's primary context).

Over ~300 lines because it is one library's binding: the table, the owned descriptor
objects and the measured choice of algorithm change together.
"""

from __future__ import annotations

import ctypes
import functools
import math
import re
import weakref
from dataclasses import dataclass
from typing import Any

from . import cublas
from .cublas import ComputeType, DataType, Operation
from .errors import CublasError, GemmDriverError, UnsupportedProblem

DEFAULT_WORKSPACE_BYTES = 32 * 2**20  # what PyTorch and the cuBLASLt samples give it on Hopper
DEFAULT_CANDIDATES = 8
CUDA_R_8F_E4M3 = 28  # cudaDataType_t (library_types.h); not in cublas.DataType, which has no FP8
_MAX_ALIGNMENT = 256  # cuBLASLt's default assumption for every pointer (MIN_ALIGNMENT_*_BYTES)
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class LtPrecision:
    """Storage and compute types of one precision; every one computes and scales in FP32."""

    name: str
    ab_type: int  # cudaDataType_t of A and B
    compute: int  # cublasComputeType_t
    ab_bytes: int
    needs_k_major_b: bool = False  # FP8: cuBLASLt runs only the "TN" layout
    k_multiple: int = 1  # k, lda and ldb must be multiples of this (elements)


LT_PRECISIONS: dict[str, LtPrecision] = {p.name: p for p in (
    LtPrecision("fp32", DataType.CUDA_R_32F, ComputeType.CUBLAS_COMPUTE_32F, 4),
    LtPrecision("tf32", DataType.CUDA_R_32F, ComputeType.CUBLAS_COMPUTE_32F_FAST_TF32, 4),
    LtPrecision("bf16", DataType.CUDA_R_16BF, ComputeType.CUBLAS_COMPUTE_32F, 2),
    LtPrecision("fp16", DataType.CUDA_R_16F, ComputeType.CUBLAS_COMPUTE_32F, 2),
    LtPrecision("fp8", CUDA_R_8F_E4M3, ComputeType.CUBLAS_COMPUTE_32F, 1, needs_k_major_b=True, k_multiple=16),
)}

# Attribute numbers (cublasLt.h); the enums only grow, so 12.x and 13.x agree on these.
_DESC_TRANSA, _DESC_TRANSB = 3, 4
_PREF_MAX_WORKSPACE_BYTES = 1
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


# --- the problem, validated, and its descriptors (host only) ---------------------------
@dataclass(frozen=True)
class LtProblem:
    """Row-major C (m x n, ldc) = alpha * A (m x k, lda) @ B + beta * C in ``precision``.

    B is k x n row-major (ldb >= n), or with ``b_k_major`` stored transposed: n x k
    row-major (ldb >= k), i.e. column-major B, the only layout cuBLASLt's FP8 takes.
    """

    m: int
    n: int
    k: int
    precision: str
    lda: int
    ldb: int
    ldc: int
    b_k_major: bool = False

    @classmethod
    def packed(cls, m: int, n: int, k: int, precision: str, b_k_major: bool = False) -> "LtProblem":
        """The problem with the tightest leading dimensions."""
        return cls(m, n, k, precision, k, k if b_k_major else n, n, b_k_major)


def validate(problem: LtProblem) -> LtPrecision:
    """The problem's precision; UnsupportedProblem naming the first rule the problem breaks."""
    if problem.precision not in LT_PRECISIONS:
        raise ValueError(f"unknown precision {problem.precision!r}; choose from {', '.join(LT_PRECISIONS)}")
    p, q = LT_PRECISIONS[problem.precision], problem
    mult = p.k_multiple
    rules = (
        ("m, n, k >= 1 (callers short-cut empty problems before cuBLASLt)", min(q.m, q.n, q.k) >= 1),
        ("sizes < 2**31", max(q.m, q.n, q.k, q.lda, q.ldb, q.ldc) <= _INT32_MAX),
        (f"{p.name} B stored K-major (b_k_major=True: n x k row-major, cuBLASLt's FP8 'TN' layout)",
         q.b_k_major or not p.needs_k_major_b),
        (f"{p.name} k, lda and ldb multiples of {mult} elements (16 bytes)",
         q.k % mult == 0 and q.lda % mult == 0 and q.ldb % mult == 0),
        ("ldb >= k for a K-major B", not q.b_k_major or q.ldb >= q.k),
    )
    for rule, ok in rules:
        if not ok:
            raise UnsupportedProblem(f"cuBLASLt GEMM needs {rule}; got {_describe_problem(q)}")
    _swap(q)  # the row-major rules lda >= k, ldb >= n, ldc >= n
    return p


def _describe_problem(q: LtProblem) -> str:
    return (f"{q.precision} m={q.m}, n={q.n}, k={q.k}, lda={q.lda}, ldb={q.ldb}, ldc={q.ldc}, "
            f"b_k_major={q.b_k_major}")


@dataclass(frozen=True)
class LtOperand:
    """One column-major layout cuBLASLt sees, and which row-major buffer it is."""

    source: str  # "a", "b" or "c"
    rows: int
    cols: int
    ld: int
    op: int  # cublasOperation_t applied to it


def _swap(q: LtProblem) -> tuple[LtOperand, LtOperand, LtOperand]:
    """cuBLASLt's (A, B, C) for the row-major problem: C^T = B^T A^T, column-major.

    cublas.column_major_call gives the (n, m, k) call with B first. A row-major K x N B
    read column-major is N x K (op N); a K-major B (n x k row-major) read column-major is
    K x N, so cuBLASLt transposes it (op T): that is the "TN" of FP8.
    """
    cm = cublas.column_major_call(q.m, q.n, q.k, q.lda, q.ldb, q.ldc, trans_b=q.b_k_major)
    assert cm.first == "b" and cm.second == "a"
    first_shape = (cm.k, cm.m) if q.b_k_major else (cm.m, cm.k)  # B as stored, read column-major
    first = LtOperand("b", *first_shape, cm.ld_first, cm.op_first)
    second = LtOperand("a", cm.k, cm.n, cm.ld_second, cm.op_second)
    return first, second, LtOperand("c", cm.m, cm.n, cm.ldc, Operation.N)


class _Layout(_Owned):
    def __init__(self, data_type: int, operand: LtOperand):
        lib = _library()
        raw = _create(lib.cublasLtMatrixLayoutCreate, data_type, operand.rows, operand.cols, operand.ld)
        self._own(raw, lib.cublasLtMatrixLayoutDestroy)
        self.operand = operand

    def attribute(self, name: str) -> int:
        """A layout attribute read back from cuBLASLt (type, order, rows, cols, ld)."""
        return _get_int(_library().cublasLtMatrixLayoutGetAttribute, self.ptr, _LAYOUT_ATTRIBUTES[name])


class _Desc(_Owned):
    def __init__(self, compute: int):
        lib = _library()
        self._own(_create(lib.cublasLtMatmulDescCreate, compute, DataType.CUDA_R_32F), lib.cublasLtMatmulDescDestroy)

    def set(self, attribute: int, value: ctypes._SimpleCData) -> None:
        _library().cublasLtMatmulDescSetAttribute(self.ptr, attribute, ctypes.byref(value), ctypes.sizeof(value))


class _Preference(_Owned):
    def __init__(self):
        lib = _library()
        self._own(_create(lib.cublasLtMatmulPreferenceCreate), lib.cublasLtMatmulPreferenceDestroy)

    def set(self, attribute: int, value: ctypes._SimpleCData) -> None:
        _library().cublasLtMatmulPreferenceSetAttribute(self.ptr, attribute, ctypes.byref(value),
                                                         ctypes.sizeof(value))


class MatmulDescriptors:
    """The matmul descriptor and the three layouts of one problem (C's serves D too).

    Host objects only: they can be built and read back without a GPU."""

    def __init__(self, problem: LtProblem):
        self.problem, self.precision = problem, validate(problem)
        first, second, c = _swap(problem)
        p = self.precision
        self._parts: list[_Owned] = []
        try:
            self.desc = self._keep(_Desc(p.compute))
            self.desc.set(_DESC_TRANSA, ctypes.c_int32(first.op))
            self.desc.set(_DESC_TRANSB, ctypes.c_int32(second.op))
            self.first = self._keep(_Layout(p.ab_type, first))
            self.second = self._keep(_Layout(p.ab_type, second))
            self.c = self._keep(_Layout(DataType.CUDA_R_32F, c))
        except BaseException:
            self.close()
            raise

    def _keep(self, part):
        self._parts.append(part)
        return part

    def close(self) -> None:
        for part in reversed(self._parts):
            part.close()

    def __enter__(self) -> "MatmulDescriptors":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _get_int(getter: Any, obj: Any, attribute: int) -> int:
    """An integer attribute whose width may differ between cuBLASLt versions: ask for the
    size first (size 0 returns the bytes needed), then read that many bytes."""
    needed = ctypes.c_size_t()
    getter(obj, attribute, None, 0, ctypes.byref(needed))
    buf = ctypes.create_string_buffer(max(needed.value, 1))
    getter(obj, attribute, buf, needed.value, ctypes.byref(needed))
    return int.from_bytes(buf.raw[: needed.value], "little", signed=True)


def pointer_alignment(ptr: int) -> int:
    """The largest power of two (up to 256 bytes) dividing a device address."""
    ptr = int(ptr)
    return _MAX_ALIGNMENT if ptr % _MAX_ALIGNMENT == 0 else ptr & -ptr


# --- the matmul ----------------------------------------------------------------------
@dataclass(frozen=True)
class CandidateTiming:
    index: int  # rank in the heuristic's list (0: its first choice)
    ms: float | None  # per-run GPU time of its fastest graph replay; None when it failed to run
    error: str = ""
    launches: int = 0  # runs captured in the graph that was timed


class LtMatmul:
    """One row-major GEMM through cuBLASLt, its algorithm picked among the heuristic's top.

    ``workspace`` is the caller's DeviceBuffer (None: algorithms without one); ``alignment``
    is what the A, B and C pointers passed to :meth:`run` are guaranteed to be aligned to,
    in bytes (one number or one per operand): the heuristic only offers algorithms that
    work at that alignment, and ``run`` refuses pointers that break the promise.
    """

    def __init__(self, handle: LtHandle, problem: LtProblem, *, workspace: Any = None,
                 alignment: int | tuple[int, int, int] = _MAX_ALIGNMENT, candidates: int = DEFAULT_CANDIDATES):
        if candidates < 1:
            raise ValueError(f"ask the heuristic for at least 1 candidate, got {candidates}")
        align = tuple(alignment) if isinstance(alignment, tuple) else (alignment,) * 3
        if len(align) != 3 or any(x < 1 or x & (x - 1) for x in align):
            raise ValueError(f"alignment must be a power of two bytes, or three of them (A, B, C); got {alignment}")
        self.handle, self.problem = handle, problem
        self.alignment = dict(zip("abc", (min(x, _MAX_ALIGNMENT) for x in align)))
        self.workspace = workspace
        self.workspace_bytes = int(workspace.nbytes) if workspace is not None else 0
        self.descriptors = MatmulDescriptors(problem)
        try:
            self.candidates = self._heuristic(candidates)
        except BaseException:
            self.descriptors.close()
            raise
        self.chosen = 0  # the heuristic's first choice until autotune() measures
        self.timings: list[CandidateTiming] = []

    def _heuristic(self, count: int) -> list[HeuristicResult]:
        lib, d = _library(), self.descriptors
        pref = _Preference()
        try:
            pref.set(_PREF_MAX_WORKSPACE_BYTES, ctypes.c_uint64(self.workspace_bytes))
            first, second = d.first.operand.source, d.second.operand.source
            for lt_name, source in (("a", first), ("b", second), ("c", "c"), ("d", "c")):
                pref.set(_PREF_MIN_ALIGNMENT[lt_name], ctypes.c_uint32(self.alignment[source]))
            results, returned = (HeuristicResult * count)(), ctypes.c_int()
            lib.cublasLtMatmulAlgoGetHeuristic(self.handle.ptr, d.desc.ptr, d.first.ptr, d.second.ptr, d.c.ptr,
                                               d.c.ptr, pref.ptr, count, results, ctypes.byref(returned))
        finally:
            pref.close()
        usable = [r for r in results[: returned.value] if r.state == 0]
        if not usable:
            raise CublasError("CUBLAS_STATUS_NOT_SUPPORTED",
                              f"the heuristic offers no algorithm for {_describe_problem(self.problem)} "
                              f"(alignment {self.alignment}, workspace {self.workspace_bytes} bytes)",
                              "cublasLtMatmulAlgoGetHeuristic")
        return usable

    def run(self, a: int, b: int, c: int, stream: Any = None, alpha: float = 1.0, beta: float = 0.0,
            candidate: int | None = None) -> None:
        """C = alpha*A@B + beta*C on ``stream`` (a driver Stream, or None for the default
        stream) with the chosen algorithm or candidate ``candidate``. C is not read when
        beta == 0. Pointers are device addresses (ints or objects with ``.ptr``)."""
        ptrs = {"a": int(getattr(a, "ptr", a)), "b": int(getattr(b, "ptr", b)), "c": int(getattr(c, "ptr", c))}
        for name, ptr in ptrs.items():
            if pointer_alignment(ptr) < self.alignment[name]:
                raise ValueError(f"{name.upper()} at {ptr:#x} is {pointer_alignment(ptr)}-byte aligned; this "
                                 f"LtMatmul was made for {self.alignment[name]}-byte alignment")
        d = self.descriptors
        result = self.candidates[self.chosen if candidate is None else candidate]
        al, be = cublas.scalars(alpha, beta)
        ws = self.workspace.ptr if self.workspace is not None else None
        _library().cublasLtMatmul(
            self.handle.ptr, d.desc.ptr, ctypes.byref(al), ptrs[d.first.operand.source], d.first.ptr,
            ptrs[d.second.operand.source], d.second.ptr, ctypes.byref(be), ptrs["c"], d.c.ptr, ptrs["c"], d.c.ptr,
            ctypes.byref(result.algo), ws, self.workspace_bytes, cublas._stream_ptr(stream))

    def autotune(self, a: int, b: int, c: int, stream: Any, alpha: float = 1.0, beta: float = 0.0,
                 target_ms: float = 1.0, rounds: int = 2) -> list[CandidateTiming]:
        """Time every candidate on ``stream`` and choose the fastest.

        Each candidate runs once untimed (a candidate that fails there is recorded and
        skipped), then enough runs to last about ``target_ms`` are captured in a CUDA graph:
        a replay runs them back to back, so Python's ~10 us per call never counts as GPU
        time (timed call by call, a 1024^3 BF16 GEMM of 7 us measured 27-38 us on the
        H100 and the wrong candidate won). Each graph is replayed ``rounds`` times between
        two events, in forward then reverse order so that no candidate always runs on the
        coolest GPU, and its fastest replay counts. Runs the GEMM many times: when
        beta != 0, C holds garbage afterwards; refill it before checking a result.
        """
        from .driver import Event  # the driver layer; imported here so descriptors need no GPU
        from .graph import Graph

        def launch(index):
            return lambda: self.run(a, b, c, stream, alpha, beta, candidate=index)

        errors, graphs, launches = {}, {}, {}
        try:
            with Event() as start, Event() as end:
                for index in range(len(self.candidates)):
                    try:
                        start.record(stream)
                        launch(index)()
                        end.record(stream)
                        end.synchronize()
                    except CublasError as exc:  # offered by the heuristic, yet it will not run
                        errors[index] = str(exc)
                        continue
                    once = max(Event.elapsed_ms(start, end), 1e-3)  # host-bound for small GEMMs: an upper bound
                    launches[index] = n = min(100, max(2, math.ceil(target_ms / once)))
                    graphs[index] = Graph(stream, lambda run=launch(index), n=n: [run() for _ in range(n)])
                best: dict[int, float] = {}
                for round_ in range(rounds):
                    order = sorted(graphs) if round_ % 2 == 0 else sorted(graphs, reverse=True)
                    for index in order:
                        graphs[index].launch()  # warm: the first replay uploads the graph
                        start.record(stream)
                        graphs[index].launch()
                        end.record(stream)
                        end.synchronize()
                        ms = Event.elapsed_ms(start, end) / launches[index]
                        best[index] = min(ms, best.get(index, ms))
        finally:
            for graph in graphs.values():
                graph.close()
        timings = [CandidateTiming(i, best.get(i), errors.get(i, ""), launches.get(i, 0))
                   for i in range(len(self.candidates))]
        if not best:
            raise CublasError("CUBLAS_STATUS_NOT_SUPPORTED", "no candidate ran: " + timings[0].error, "cublasLtMatmul")
        self.chosen, self.timings = min(best, key=best.get), timings
        return timings

    def describe(self, candidate: int | None = None) -> dict:
        """The algorithm as a small dict for the results JSON."""
        index = self.chosen if candidate is None else candidate
        result = self.candidates[index]
        getter = _library().cublasLtMatmulAlgoConfigGetAttribute
        config = {name: _get_int(getter, ctypes.byref(result.algo), attr) for name, attr in ALGO_CONFIG.items()}
        names = {"tile": ("tile_id", "CUBLASLT_MATMUL_TILE_"), "stages": ("stages_id", "CUBLASLT_MATMUL_STAGES_"),
                 "cluster_shape": ("cluster_shape_id", "CUBLASLT_CLUSTER_SHAPE_")}
        for key, (id_key, prefix) in names.items():
            config[key] = enum_names(prefix).get(config[id_key])
        timing = next((t for t in self.timings if t.index == index), None)
        return {
            "library": "cublasLt", "version": ".".join(map(str, version())), "precision": self.problem.precision,
            **config, "workspace_bytes": int(result.workspace_size), "waves_count": round(float(result.waves_count), 4),
            "heuristic_rank": index, "candidates": len(self.candidates),
            "selection_ms": timing.ms if timing else None, "workspace_limit_bytes": self.workspace_bytes,
        }

    def close(self) -> None:
        self.descriptors.close()

    def __enter__(self) -> "LtMatmul":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
