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

Precisions (``LT_PRECISIONS``), all with FP32 compute and FP32 alpha/beta: fp32 (no TF32),
tf32 (``CUBLAS_COMPUTE_32F_FAST_TF32``), bf16, fp16 and fp8 (A and B each e4m3 or e5m2, not
both e5m2: ``LtProblem.formats``); C and D FP32 or (bf16/fp16) the inputs' type, transposed
A and B, and the bias/ReLU/GELU epilogues (cublaslt_layout.py).
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

The binding (the table, the owned objects, the handle) is in :mod:`.cublaslt_binding`; the
problem, its validation and its descriptors in :mod:`.cublaslt_layout`; this module is the
heuristic and the measured choice, and the names callers use.
"""


from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from typing import Any

from . import cublas
from .cublaslt_binding import (_DESC_A_SCALE_POINTER, _DESC_B_SCALE_POINTER, _DESC_BIAS_POINTER,
                               _PREF_MAX_WORKSPACE_BYTES, _PREF_MIN_ALIGNMENT, _PREF_REDUCTION_SCHEME_MASK,
                               ALGO_CONFIG, REDUCTIONS_IN_COMPUTE_TYPE,
                               HeuristicResult, LtHandle, _get_int, _library, enum_names, library_path, version)
from .cublaslt_layout import (BLOCK_SCALE_ROW_MULTIPLE, FP8_DATA_TYPES, LT_PRECISIONS, MAX_ALIGNMENT, LtPrecision,
                              LtProblem, MatmulDescriptors, _describe_problem, _Preference, block_scale_ld,
                              pointer_alignment, scale_mode_refusal, validate)
from .errors import CublasError, CudaError

__all__ = ["BLOCK_SCALE_ROW_MULTIPLE", "DEFAULT_CANDIDATES", "DEFAULT_WORKSPACE_BYTES", "FP8_DATA_TYPES",
           "LT_PRECISIONS", "MAX_ALIGNMENT", "CandidateTiming", "LtHandle", "LtMatmul", "LtPrecision", "LtProblem",
           "MatmulDescriptors", "block_scale_ld", "enum_names", "library_path", "padded_block_scales",
           "pointer_alignment", "scale_mode_refusal", "validate", "version"]

DEFAULT_WORKSPACE_BYTES = 32 * 2**20  # what PyTorch and the cuBLASLt samples give it on Hopper
DEFAULT_CANDIDATES = 8


# --- block scales as BLK128x128_32F reads them ----------------------------------------------
def padded_block_scales(src: int, rows: int, cols: int, src_ld: int, stream: Any):
    """A new DeviceBuffer holding the ``rows`` x ``cols`` FP32 block scales at device address
    ``src`` (row pitch ``src_ld`` scales) with each row padded to a multiple of 4 scales
    (``block_scale_ld`` for cols = ceil(K/128); the padding zero), the copy queued on
    ``stream``: BLK128x128_32F reads its rows of K-block scales at that pitch, so unpadded
    rows are read past their end."""
    from .memory import DeviceBuffer, copy_2d_async, memset_2d32_async  # needs a GPU; descriptors do not

    ld = -(-max(cols, 1) // BLOCK_SCALE_ROW_MULTIPLE) * BLOCK_SCALE_ROW_MULTIPLE
    buffer = DeviceBuffer(4 * ld * max(rows, 1))
    try:
        memset_2d32_async(buffer.ptr, 4 * ld, 0, ld, max(rows, 1), stream)
        copy_2d_async(buffer.ptr, 4 * ld, int(src), 4 * src_ld, 4 * cols, rows, stream)
    except BaseException:
        buffer.close()
        raise
    return buffer


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
    ``bias_alignment`` is the same promise for the bias vector of an epilogue.
    """

    def __init__(self, handle: LtHandle, problem: LtProblem, *, workspace: Any = None,
                 alignment: int | tuple[int, int, int] = MAX_ALIGNMENT, candidates: int = DEFAULT_CANDIDATES,
                 bias_alignment: int = MAX_ALIGNMENT):
        if candidates < 1:
            raise ValueError(f"ask the heuristic for at least 1 candidate, got {candidates}")
        align = tuple(alignment) if isinstance(alignment, tuple) else (alignment,) * 3
        if len(align) != 3 or any(x < 1 or x & (x - 1) for x in align):
            raise ValueError(f"alignment must be a power of two bytes, or three of them (A, B, C); got {alignment}")
        self.handle, self.problem = handle, problem
        self.alignment = dict(zip("abc", (min(x, MAX_ALIGNMENT) for x in align)))
        if bias_alignment < 1 or bias_alignment & (bias_alignment - 1):
            raise ValueError(f"bias_alignment must be a power of two bytes; got {bias_alignment}")
        self.alignment["bias"] = min(bias_alignment, MAX_ALIGNMENT)
        self.workspace = workspace
        self.workspace_bytes = int(workspace.nbytes) if workspace is not None else 0
        self.descriptors = MatmulDescriptors(problem)
        try:
            if problem.epilogue != "none":
                # The heuristic never reads the bias; it judges the alignment by the pointer's
                # value (cublasLt.h), so an address of exactly that alignment stands in for it.
                self.descriptors.desc.set(_DESC_BIAS_POINTER, ctypes.c_void_p(self.alignment["bias"]))
            self.candidates = self._heuristic(candidates)
        except BaseException:
            self.descriptors.close()
            raise
        self.chosen = 0  # the heuristic's first choice until autotune() measures
        self.timings: list[CandidateTiming] = []
        self._described: dict[int, dict] = {}  # describe()'s answers (a dozen library calls each)

    def _heuristic(self, count: int) -> list[HeuristicResult]:
        lib, d = _library(), self.descriptors
        pref = _Preference()
        try:
            pref.set(_PREF_MAX_WORKSPACE_BYTES, ctypes.c_uint64(self.workspace_bytes))
            pref.set(_PREF_REDUCTION_SCHEME_MASK, ctypes.c_uint32(REDUCTIONS_IN_COMPUTE_TYPE))  # D rounded once
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
            candidate: int | None = None, bias: int = 0, scales: tuple[int, int] | None = None) -> None:
        """D = epilogue(alpha*op(A)@op(B) + beta*C) into C on ``stream`` (a driver Stream, or
        None for the default stream) with the chosen algorithm or candidate ``candidate``. C
        is not read when beta == 0; ``bias`` is the epilogue's vector; ``scales`` the FP32
        scales of A and B of a scaled FP8 problem (shapes per fp8.scale_shapes, laid out as
        the provider hands them over). Pointers are device addresses (ints or objects with
        ``.ptr``)."""
        ptrs = {"a": int(getattr(a, "ptr", a)), "b": int(getattr(b, "ptr", b)), "c": int(getattr(c, "ptr", c))}
        if self.problem.epilogue != "none":
            ptrs["bias"] = int(getattr(bias, "ptr", bias))
            if not ptrs["bias"]:
                raise ValueError(f"epilogue {self.problem.epilogue!r} needs a bias pointer")
        for name, ptr in ptrs.items():
            if pointer_alignment(ptr) < self.alignment[name]:
                raise ValueError(f"{name.upper()} at {ptr:#x} is {pointer_alignment(ptr)}-byte aligned; this "
                                 f"LtMatmul was made for {self.alignment[name]}-byte alignment")
        d = self.descriptors
        if "bias" in ptrs:  # read by cublasLtMatmul when it is called (a graph capture keeps it)
            d.desc.set(_DESC_BIAS_POINTER, ctypes.c_void_p(ptrs["bias"]))
        if (scales is None) != (self.problem.scaling == "none"):
            raise ValueError(f"scaling {self.problem.scaling!r} " + ("needs the scales of A and B"
                             if scales is None else "takes no scales"))
        if scales is not None:  # the swap: cuBLASLt's A is our B
            scale_a, scale_b = (int(getattr(x, "ptr", x)) for x in scales)
            d.desc.set(_DESC_A_SCALE_POINTER, ctypes.c_void_p(scale_b))
            d.desc.set(_DESC_B_SCALE_POINTER, ctypes.c_void_p(scale_a))
        result = self.candidates[self.chosen if candidate is None else candidate]
        al, be = cublas.scalars(alpha, beta)
        ws = self.workspace.ptr if self.workspace is not None else None
        _library().cublasLtMatmul(
            self.handle.ptr, d.desc.ptr, ctypes.byref(al), ptrs[d.first.operand.source], d.first.ptr,
            ptrs[d.second.operand.source], d.second.ptr, ctypes.byref(be), ptrs["c"], d.c.ptr, ptrs["c"], d.c.ptr,
            ctypes.byref(result.algo), ws, self.workspace_bytes, cublas._stream_ptr(stream))

    def autotune(self, a: int, b: int, c: int, stream: Any, alpha: float = 1.0, beta: float = 0.0,
                 target_ms: float = 1.0, rounds: int = 2, bias: int = 0,
                 scales: tuple[int, int] | None = None) -> list[CandidateTiming]:
        """Time every candidate on ``stream`` and choose the fastest.

        Each candidate runs once untimed (a candidate that fails there, or then fails under
        stream capture, is recorded and skipped), then enough runs to last about ``target_ms``
        are captured in a CUDA graph:
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
            return lambda: self.run(a, b, c, stream, alpha, beta, candidate=index, bias=bias, scales=scales)

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
                    n = min(100, max(2, math.ceil(target_ms / once)))
                    try:
                        graphs[index] = Graph(stream, lambda run=launch(index), n=n: [run() for _ in range(n)])
                    except (CublasError, CudaError) as exc:
                        # ran, yet not under capture (seen once on an H200: a block-scaled FP8
                        # candidate, its capture invalidated, four test workers sharing the GPU)
                        errors[index] = f"not capturable in a CUDA graph: {exc}"
                        continue
                    launches[index] = n
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
        self._described.clear()
        return timings

    def describe(self, candidate: int | None = None) -> dict:
        """The algorithm as a small dict for the results JSON (a copy; worked out once per
        candidate and measurement: a Plan asks again for every new set of addresses)."""
        index = self.chosen if candidate is None else candidate
        if index not in self._described:
            self._described[index] = self._describe(index)
        return dict(self._described[index])

    def _describe(self, index: int) -> dict:
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
            **({} if self.problem.epilogue == "none" else {"epilogue": self.problem.epilogue}),
            **({} if self.problem.scaling == "none" else {"scaling": self.problem.scaling}),
            **({} if tuple(self.problem.formats) == ("e4m3", "e4m3") else {"formats": list(self.problem.formats)}),
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
