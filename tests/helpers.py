"""Test-only helpers: code the tests need that the package itself never runs.

- ``sgemm`` / ``sgemm_strided_batched``: plain cublasSgemm and cublasSgemmStridedBatched,
  row-major through ``cublas.column_major_call``, to check the GemmEx baselines and the
  swap against the classic entry points.
- ``FP32_DEFAULT_MATH``: cuBLAS FP32 with DEFAULT math (no TF32 either), measured against
  the pedantic baseline to decide which is the honest one.
- ``unheld_event_ms`` / ``graph_replay_ms``: the two other ways of timing a launch that
  the launch-overhead test compares with the stream hold.
- ``UNIT_ROUNDOFF``: FP32's unit roundoff, for the bound's own tests.
- ``assert_same_bits``: the determinism check (split-K, stream-K) of the GPU tests.
"""

from __future__ import annotations

import ctypes
import os
from typing import Callable

import numpy as np

from gemm_driver.cuda import cublas
from gemm_driver.cuda.cublas import ComputeType, DataType, GemmTypes, MathMode
from gemm_driver.cuda.driver import Event
from gemm_driver.cuda.graph import Graph

UNIT_ROUNDOFF = {"fp32": 2.0**-24}
FP32_DEFAULT_MATH = GemmTypes(DataType.CUDA_R_32F, DataType.CUDA_R_32F, ComputeType.CUBLAS_COMPUTE_32F,
                              MathMode.DEFAULT)


def build_processes(jobs: int) -> int:
    """Processes for a module's parallel prebuild: this worker's share of the cores. Every
    xdist worker that runs such a module runs its prebuild at once (16 workers each asking
    for all 64 cores of a four-GPU host: the pool's processes were killed)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    return max(1, min(jobs, (os.cpu_count() or 1) // workers))


def sgemm(handle, m: int, n: int, k: int, alpha: float, a: int, lda: int,
          b: int, ldb: int, beta: float, c: int, ldc: int) -> None:
    """C = alpha*A@B + beta*C in fp32 (cublasSgemm) with DEFAULT math, no TF32. The mode is set
    here: a handle keeps the mode of its last call (a Session's handle after a TF32 baseline ran
    this at TF32's error)."""
    handle.use_math_mode(int(MathMode.DEFAULT))
    cm = cublas.column_major_call(m, n, k, lda, ldb, ldc)
    first, second = cm.operands(int(a), int(b))
    al, be = ctypes.c_float(alpha), ctypes.c_float(beta)
    handle._lib.cublasSgemm_v2(handle.ptr, cm.op_first, cm.op_second, cm.m, cm.n, cm.k,
                               ctypes.byref(al), first, cm.ld_first, second, cm.ld_second,
                               ctypes.byref(be), int(c), cm.ldc)


def sgemm_strided_batched(handle, m: int, n: int, k: int, alpha: float,
                          a: int, lda: int, stride_a: int, b: int, ldb: int, stride_b: int,
                          beta: float, c: int, ldc: int, stride_c: int, batch: int) -> None:
    """``batch`` independent fp32 GEMMs with DEFAULT math (set here, as in ``sgemm``); matrix i
    of X starts stride_x elements after i-1."""
    if not 0 <= batch <= 2**31 - 1:
        raise ValueError(f"sgemm_strided_batched needs 0 <= batch < 2**31; got batch={batch}")
    handle.use_math_mode(int(MathMode.DEFAULT))
    cm = cublas.column_major_call(m, n, k, lda, ldb, ldc)
    (first, s_first), (second, s_second) = cm.operands((int(a), stride_a), (int(b), stride_b))
    al, be = ctypes.c_float(alpha), ctypes.c_float(beta)
    handle._lib.cublasSgemmStridedBatched(
        handle.ptr, cm.op_first, cm.op_second, cm.m, cm.n, cm.k, ctypes.byref(al),
        first, cm.ld_first, s_first, second, cm.ld_second, s_second,
        ctypes.byref(be), int(c), cm.ldc, stride_c, batch)


def unheld_event_ms(stream, launch: Callable[[], None], samples: int) -> list[float]:
    """The naive way: an event pair around each single launch, no hold; host gaps leak in."""
    out = []
    with Event() as start, Event() as end:
        for _ in range(samples):
            start.record(stream)
            launch()
            end.record(stream)
            end.synchronize()
            out.append(Event.elapsed_ms(start, end))
    return out


def graph_replay_ms(stream, launch: Callable[[], None], launches: int, samples: int) -> list[float]:
    """Per-launch time from replays of a CUDA graph of ``launches`` captured launches."""
    with Graph(stream, lambda: [launch() for _ in range(launches)]) as graph, Event() as start, Event() as end:
        graph.launch()  # first replay uploads the graph
        stream.synchronize()
        out = []
        for _ in range(samples):
            start.record(stream)
            graph.launch()
            end.record(stream)
            end.synchronize()
            out.append(Event.elapsed_ms(start, end) / launches)
    return out


def assert_same_bits(run: Callable[[], np.ndarray], times: int, what: str) -> np.ndarray:
    """Call ``run`` ``times`` times and fail unless every result has the first one's bits
    (split-K and stream-K must add their partial sums in a fixed order, whichever block
    finishes last); returns a copy of the first result. Bits, not values: -0.0 is not 0.0,
    and a NaN matches only the same NaN."""
    first = np.array(run(), copy=True)
    as_bits = lambda x: x.view(f"u{x.dtype.itemsize}")
    for index in range(1, times):
        out = run()
        if (out.shape, out.dtype) != (first.shape, first.dtype):
            raise AssertionError(f"{what}: run {index} of 0..{times - 1} gave {out.dtype} {out.shape}, "
                                 f"run 0 {first.dtype} {first.shape}")
        differing = int(np.count_nonzero(as_bits(out) != as_bits(first)))
        if differing:
            raise AssertionError(f"{what}: run {index} of 0..{times - 1} differs from run 0 in {differing} "
                                 f"of {first.size} elements")
    return first
