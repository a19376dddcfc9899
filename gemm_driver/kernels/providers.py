"""Baseline providers: what a kernel is measured against, each owning how it runs.

A Provider is not one of our kernels: a library on the GPU (cuBLAS in each precision, its
strided-batched form, CuPy, PyTorch) or the CPU (NumPy). Each carries its behaviour, so the rest of
the package never asks which one it holds:

- ``launcher(provider, session, problem, a, b, c, bias=pointer)`` -> ``ProviderLaunch``: the callable that enqueues
  one GEMM on the session's stream, and what the library chose to run (cuBLASLt's measured
  algorithm; empty where the library does not say) (GPU providers);
  ``host_gemm(problem, a, b, c)`` -> the result array (CPU providers, on the host operands).
- ``single`` / ``batched``: which shapes it takes (one GEMM, or a stacked batch).
- ``unavailable()`` -> why it cannot run in this installation, or None (``check_device``
  raises it, with the minimum architecture, as UnsupportedProblem).
- The rest of GemmTarget (kernels/target.py), which KernelSpec shares: ``runs_on_host``,
  ``check_tunables`` (a provider takes none), ``uses_scratch``.
- ``scalings``: the FP8 scaling modes it takes (problem.py's ``scaling``; "none" for every
  other precision); a scaled launcher gets ``scales=(A's, B's)`` device scales too.
  ``fp8_types``: the FP8 formats of A and B it takes (problem.py's ``fp8_types``; "e4m3" for
  every other precision).
- ``layouts`` / ``out_dtypes`` / ``epilogues``: what it computes beyond row-major operands,
  FP32 D and no epilogue (the problem's ``trans_a``/``trans_b``, ``out_dtype``, ``epilogue``;
  problem.py); ``transposes`` is whether a layout other than "nn" is among them (gemm()'s
  transposed views); ``measures``: its launcher runs the GEMM on the operands while it is
  made (cuBLASLt times its candidates), so a caller whose C holds data saves it around.
- The session a launcher gets may be a view whose stream changes between launches
  (``session.stream_per_call``, a Plan's caller streams): a launch reads
  ``session.stream.handle`` when it runs, and binds library handles to it there.

Adding a baseline is one entry in ``PROVIDERS`` (and its launcher, here).

CuPy runs on the CUDA runtime, which shares the device's primary context with our
driver-API Session, so its arrays can view our guarded device matrices in place and its
work is queued on our stream: what is verified and timed is exactly what the other
baselines get. CuPy keeps TF32 off unless CUPY_TF32=1 is set, which this baseline refuses.

PyTorch (``torch``, ``torch_bf16``, ``torch_fp16``) does the same; its code is in
kernels/frameworks.py, and torch is imported only when its baseline is asked about or run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple

import numpy as np

from .. import precision as _precision
from ..cuda import cublas, cublaslt
from ..cuda.errors import CublasError, GemmDriverError, UnsupportedProblem
from ..problem import EPILOGUES, FP8_TYPES, LAYOUTS, SCALINGS, GemmProblem
from . import frameworks
from .frameworks import torch_unavailable
from .target import check_declared, declared_transposes

Enqueue = Callable[[], None]


class ProviderLaunch(NamedTuple):
    """A provider's launch: what enqueues the GEMM, and what the library chose (for the JSON)."""

    enqueue: Enqueue
    algorithm: Mapping[str, Any] = {}


@dataclass(frozen=True)
class Provider:
    name: str
    description: str
    launcher: Callable[..., ProviderLaunch] | None = None  # (provider, session, problem, a, b, c, bias=ptr); None: host
    host_gemm: Callable[[GemmProblem, np.ndarray, np.ndarray, np.ndarray | None], np.ndarray] | None = None
    precision: str = "fp32"
    min_cc: tuple[int, int] = (0, 0)
    single: bool = True  # takes one GEMM per call
    batched: bool = False  # takes a stacked batch of GEMMs per call
    unavailable: Callable[[], str | None] = lambda: None
    layouts: tuple[str, ...] = ("nn",)  # see above and kernels/target.py
    out_dtypes: tuple[str, ...] = ("fp32",)
    epilogues: tuple[str, ...] = ("none",)
    scalings: tuple[str, ...] = ("none",)  # FP8 scaling modes (problem.SCALINGS)
    fp8_types: tuple[str, ...] = ("e4m3",)  # FP8 formats of A and B (problem.FP8_TYPES)
    measures: bool = False  # runs the GEMM on the operands while its launcher is made
    uses_scratch: bool = False  # its launches use Session scratch (cuBLASLt's workspace)

    def __post_init__(self):
        check_declared(self.name, self.layouts, self.out_dtypes, self.epilogues)
        if not self.scalings or any(x not in SCALINGS for x in self.scalings):
            raise ValueError(f"{self.name}: scalings must be a non-empty tuple of {', '.join(SCALINGS)}")
        if not self.fp8_types or any(x not in FP8_TYPES for x in self.fp8_types):
            raise ValueError(f"{self.name}: fp8_types must be a non-empty tuple of {', '.join(FP8_TYPES)}")

    @property
    def runs_on_host(self) -> bool:
        return self.launcher is None

    @property
    def transposes(self) -> bool:
        return declared_transposes(self.layouts)

    @property
    def kind(self) -> str:
        """'library' for GPU providers, 'cpu' for host ones (as `list` prints it)."""
        return "cpu" if self.runs_on_host else "library"

    def check_tunables(self, tunables: Mapping[str, int] | None) -> dict[str, int]:
        """A library chooses its own algorithm: any tunable is refused."""
        if tunables:
            raise UnsupportedProblem(f"{self.name} takes no tunables, got {sorted(tunables)}")
        return {}

    def check_device(self, compute_capability: tuple[int, int]) -> None:
        """UnsupportedProblem when this installation lacks it or the GPU is older than min_cc."""
        if (reason := self.unavailable()) is not None:
            raise UnsupportedProblem(f"{self.name}: {reason}")
        if tuple(compute_capability) < tuple(self.min_cc):
            cc = compute_capability
            raise UnsupportedProblem(f"{self.name} needs {self.min_arch} or newer; this GPU is sm_{cc[0]}{cc[1]}")

    @property
    def min_arch(self) -> str:
        return "-" if self.runs_on_host else f"sm_{self.min_cc[0]}{self.min_cc[1]}"

    def takes_batch(self, batch: int) -> bool:
        """Batched providers run one GEMM too (a batch of 1); ``single`` says whether the
        sweep lists them for unbatched shapes."""
        return self.batched if batch > 1 else (self.single or self.batched)


# --- cuBLAS --------------------------------------------------------------------------------
def _cublas_gemm(provider: Provider, session, problem: GemmProblem, a, b, c, bias: int = 0) -> ProviderLaunch:
    """cublasGemmEx in the provider's precision: explicit types, compute type and math mode,
    C and D in the problem's out_dtype. Operands stored transposed (the problem's trans_a /
    trans_b) go through cuBLAS's own transpose flags (``cublas.gemm_ex_arguments``). The
    arguments are made once; at other addresses the enqueue's ``repoint`` (Launch.repoint)
    makes them again and keeps the rest (handle, types, stream)."""
    handle, types = session.cublas(), _precision.gemm_types(provider.precision, problem.out_dtype)
    stream, mode, rebind = session.stream, int(types.math_mode), session.stream_per_call

    def at(a, b, c) -> Enqueue:
        # C stays row-major: a caller's transposed C is swapped away before this
        gemm_ex = handle.gemm_ex_call(cublas.gemm_ex_arguments(
            problem.m, problem.n, problem.k, problem.alpha, a.ptr, a.ld, b.ptr, b.ld, problem.beta, c.ptr, c.ld,
            types, problem.trans_a, problem.trans_b))

        def enqueue() -> None:
            # the handle calls cuBLAS only where the stream (a caller's: Session.on) or mode changed
            if rebind:
                handle.use_stream(stream.handle)
            handle.use_math_mode(mode)
            gemm_ex()

        enqueue.repoint = lambda a, b, c, bias=0: at(a, b, c)  # GemmEx takes no bias
        return enqueue

    return ProviderLaunch(at(a, b, c))


def _cublas_batched(provider: Provider, session, problem: GemmProblem, a, b, c, bias: int = 0) -> ProviderLaunch:
    """Strided-batched GemmEx walking the stacked operands, one matrix per stride. A batch of
    one is plain GemmEx: cuBLAS 13.1's strided-batched call with alpha = beta = 0 leaves a
    1 x 1 x 1 C unwritten (seen on the H100), where C must become 0."""
    if problem.batch == 1:
        return _cublas_gemm(provider, session, problem, a, b, c, bias)
    handle, types = session.cublas(), _precision.get(provider.precision).cublas
    m, n, k = problem.m, problem.n, problem.k
    args = (m, n, k, problem.alpha, a.ptr, a.ld, m * a.ld, b.ptr, b.ld, k * b.ld,
            problem.beta, c.ptr, c.ld, m * c.ld, problem.batch)
    stream, rebind = session.stream, session.stream_per_call

    def enqueue() -> None:
        if rebind:
            handle.use_stream(stream)
        cublas.gemm_strided_batched_ex(handle, *args, types=types)

    return ProviderLaunch(enqueue)


# --- cuBLASLt ------------------------------------------------------------------------------
def _cublaslt_matmul(provider: Provider, session, problem: GemmProblem, a, b, c, bias: int = 0,
                     scales=None) -> ProviderLaunch:
    """cublasLtMatmul with the fastest of the heuristic's top candidates, measured here.

    The heuristic is asked at the operands' real pointer alignment (a misaligned or odd-ld
    operand gets the algorithms that handle it, as cuBLAS would), and every candidate is
    timed from CUDA-graph replays on these operands before the first verified run
    (cublaslt.LtMatmul.autotune), so the choice costs nothing in the timed region; a later
    launcher for the same problem (a repeated gemm() call) keeps that choice. The
    chosen algorithm (id, tile, stages, split-K, cluster, ...) goes into the results JSON.
    A scaled FP8 problem passes its scale pointers (A's, B's) with every run: our device
    layouts as they are, except B's 128 x 128 block scales, which BLK128x128_32F reads with
    rows padded to 4 scales; a padded copy is made here, once, outside the timed launches
    (``_lt_scale_pointers``). A cuBLASLt older than the row/block modes refuses them up front.
    FP8 A and B take the types of their formats (the problem's ``operand_formats``, e4m3 or
    e5m2; cublaslt_layout maps each to its side of the swap); a pair the heuristic has no
    algorithm for in this scale mode is refused here, like any layout it lacks.
    """
    q = lt_problem(provider, problem, a, b, c)
    cublaslt.validate(q)  # UnsupportedProblem (the case is "skipped") naming the rule
    if (reason := cublaslt.scale_mode_refusal(problem.scaling, cublaslt.version())) is not None:
        raise UnsupportedProblem(f"{provider.name}: {reason}")
    workspace = session.workspace("cublaslt", cublaslt.DEFAULT_WORKSPACE_BYTES)
    alignment = tuple(cublaslt.pointer_alignment(x.ptr) for x in (a, b, c))
    bias_alignment = cublaslt.pointer_alignment(bias) if bias else cublaslt.MAX_ALIGNMENT
    try:
        matmul = session.cublaslt_matmul(q, _Scratch(workspace, cublaslt.DEFAULT_WORKSPACE_BYTES), alignment,
                                         bias_alignment)
    except CublasError as exc:  # no algorithm for this layout (e.g. C rows not 16-byte aligned): skipped
        raise UnsupportedProblem(f"{provider.name}: {exc}") from None
    scale_ptrs, keep = _lt_scale_pointers(session, problem, scales)
    if not matmul.timings:  # measured once per Session matmul (problem, alignment), not per launcher
        matmul.autotune(a.ptr, b.ptr, c.ptr, session.stream, problem.alpha, problem.beta, bias=bias, scales=scale_ptrs)
    alpha, beta, lds = problem.alpha, problem.beta, (a.ld, b.ld, c.ld)

    def at(a, b, c, bias) -> Enqueue:
        def enqueue(_padded=keep) -> None:  # the default keeps the padded scales as long as the launch
            matmul.run(a.ptr, b.ptr, c.ptr, session.stream, alpha, beta, bias=bias, scales=scale_ptrs)

        def repoint(a, b, c, bias=0) -> Enqueue | None:
            """This matmul at other operands (Launch.repoint) where a new launcher would pick it
            too: the same leading dimensions and pointer alignments (the problem and the
            heuristic's candidates depend on them), no FP8 scales; else None."""
            same = ((a.ld, b.ld, c.ld) == lds and scale_ptrs is None
                    and tuple(cublaslt.pointer_alignment(x.ptr) for x in (a, b, c)) == alignment
                    and (cublaslt.pointer_alignment(bias) if bias else cublaslt.MAX_ALIGNMENT) == bias_alignment)
            return at(a, b, c, bias) if same else None

        enqueue.repoint = repoint
        return enqueue

    return ProviderLaunch(at(a, b, c, bias), matmul.describe())


def _lt_scale_pointers(session, problem: GemmProblem, scales) -> tuple[tuple[int, int] | None, Any]:
    """(A's, B's) scale pointers as cuBLASLt reads them, and the buffer that must outlive them.

    Our device layouts (fp8.device_scales) serve as they are, except B's block scales: BLK128x128_32F
    reads ceil(N/128) rows of ceil(K/128) scales at a pitch padded to 4 (cublaslt_layout), ours are
    unpadded, so they are copied once into a padded buffer (queued on the session's stream, before
    any run)."""
    if scales is None:
        return None, None
    sa, sb = scales
    if problem.scaling != "block" or cublaslt.block_scale_ld(problem.k) == sb.ld:
        return (sa.ptr, sb.ptr), None
    rows, cols = -(-problem.n // 128), -(-problem.k // 128)
    padded = cublaslt.padded_block_scales(sb.ptr, rows, cols, sb.ld, session.stream)
    return (sa.ptr, padded.ptr), padded


def lt_problem(provider: Provider, problem: GemmProblem, a, b, c) -> cublaslt.LtProblem:
    """The cuBLASLt problem of ``problem`` on these operands (their stored row strides)."""
    return cublaslt.LtProblem(problem.m, problem.n, problem.k, provider.precision, a.ld, b.ld, c.ld,
                              b_k_major=problem.trans_b, trans_a=problem.trans_a, out_dtype=problem.out_dtype,
                              epilogue=problem.epilogue, scaling=problem.scaling,
                              formats=problem.operand_formats if provider.precision == "fp8" else ("e4m3", "e4m3"))


@dataclass(frozen=True)
class _Scratch:
    """Session workspace as cuBLASLt's workspace argument (a pointer and its size)."""

    ptr: int
    nbytes: int


# --- NumPy ---------------------------------------------------------------------------------
def host_gemm(problem: GemmProblem, a: np.ndarray, b: np.ndarray, c: np.ndarray | None) -> np.ndarray:
    """NumPy float32 on the CPU; also the exact answer for empty problems (K = 0 -> beta C).
    Batched problems take and give stacked matrices (see operands.random_operands)."""
    rows, batch = problem.batch * problem.m, problem.batch
    if not problem.k:
        out = np.zeros((rows, problem.n), np.float32)
    elif batch == 1:
        out = np.float32(problem.alpha) * (a @ b)
    else:
        product = a.reshape(batch, problem.m, problem.k) @ b.reshape(batch, problem.k, problem.n)
        out = np.float32(problem.alpha) * product.reshape(rows, problem.n)
    if c is not None:
        out = out + np.float32(problem.beta) * c
    return np.ascontiguousarray(out, dtype=np.float32)


# --- CuPy ----------------------------------------------------------------------------------
def cupy_unavailable() -> str | None:
    """None when CuPy imports and sees a GPU, else why it cannot serve as a baseline."""
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # ImportError, or a CUDA error from a broken install
        return f"CuPy is not usable here ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    return None


def cupy_tf32_enabled() -> bool:
    return os.environ.get("CUPY_TF32", "0") == "1"


def _cupy_view(matrix, rows: int, cols: int):
    """A CuPy array over our rows x cols matrix (leading dimension ld), without copying."""
    import cupy

    extent = max((rows - 1) * matrix.ld + cols, 1) * 4
    memory = cupy.cuda.UnownedMemory(matrix.ptr, extent, owner=matrix)
    return cupy.ndarray((rows, cols), cupy.float32, cupy.cuda.MemoryPointer(memory, 0),
                        strides=(matrix.ld * 4, 4))


def _cupy_matmul(provider: Provider, session, problem: GemmProblem, a, b, c, bias: int = 0) -> ProviderLaunch:
    """C = alpha A B + beta C with cupy.matmul on our stream; C is not read when beta == 0."""
    if (reason := cupy_unavailable()) is not None:
        raise UnsupportedProblem(reason)
    if cupy_tf32_enabled():
        raise UnsupportedProblem("CUPY_TF32=1 is set: CuPy would use TF32, which is not an FP32 baseline")
    import cupy

    m, n, k = problem.m, problem.n, problem.k
    A, B, C = _cupy_view(a, m, k), _cupy_view(b, k, n), _cupy_view(c, m, n)
    stream = frameworks.StreamCache(session.stream, frameworks.cupy_stream)
    alpha, beta = problem.alpha, problem.beta

    def launch() -> None:
        try:
            with stream():
                if beta == 0:
                    cupy.matmul(A, B, out=C)
                    if alpha != 1:
                        cupy.multiply(C, alpha, out=C)
                else:
                    product = cupy.matmul(A, B)
                    cupy.multiply(C, beta, out=C)
                    cupy.add(C, cupy.multiply(product, alpha), out=C)
        except Exception as exc:  # a CuPy error is this baseline's failure, not the sweep's
            raise GemmDriverError(f"CuPy failed: {type(exc).__name__}: {exc}") from exc

    return ProviderLaunch(launch)


# --- PyTorch (kernels/frameworks.py: imported there only when used) -------------------------
def _torch_matmul(provider: Provider, session, problem: GemmProblem, a, b, c, bias: int = 0) -> ProviderLaunch:
    """C = alpha A B + beta C with torch on our stream (frameworks.torch_enqueue)."""
    return ProviderLaunch(frameworks.torch_enqueue(provider.precision, session, problem, a, b, c, bias))


def _torch_scaled_mm(provider: Provider, session, problem: GemmProblem, a, b, c, bias: int = 0,
                     scales=None) -> ProviderLaunch:
    """D = (sa . A) (sb . B)^T with torch._scaled_mm on our stream (frameworks.torch_scaled_enqueue).
    Block scaling: B's 128 x 128 scales are copied once, at setup, into rows padded to 4 scales
    (the pitch cuBLASLt's BLK128x128_32F reads); _scaled_mm may run once there to find which
    strides of that copy its check takes, and runs once there for a block-scaled problem or an
    e5m2 operand, so that what it refuses is refused at setup (``measures``)."""
    return ProviderLaunch(frameworks.torch_scaled_enqueue(session, problem, a, b, c, scales))


# One cuBLAS baseline per precision (precision.py names it), each through cublasGemmEx with
# explicit types, compute type and math mode; min_cc is where the GPU has the units the
# baseline is about (TF32/BF16 tensor cores from sm_80, FP16 from sm_70). The tensor-core
# precisions also have a cuBLASLt baseline with a measured algorithm choice; their "% of
# cuBLAS" is taken against the faster of the two (precision.baselines). `cupy` runs where
# CuPy is installed (`torch*` where PyTorch is); elsewhere their cases are "skipped" with the
# reason, and bench records them under settings.absent_baselines. cuBLAS GemmEx, cuBLASLt and
# PyTorch take every layout and write D in FP32 or the inputs' 16-bit type; cuBLASLt
# (CUBLASLT_EPILOGUE_BIAS, RELU_BIAS, GELU_BIAS) and PyTorch (its own relu and gelu) apply the
# epilogues, which cublasGemmEx has none of.
#
# FP8 (A and B e4m3 or one of them e5m2, the "nt" layout only, FP32 or BF16 D): one cuBLASLt
# entry per scaling mode rather than a tunable, since a provider takes no tunables and each mode
# is the baseline of its own kernels (its own row in tables, plots and "% of baseline").
# Per-tensor runs on any cuBLASLt with FP8 (12.x on sm_89/sm_90); row (OUTER_VEC_32F) and block
# (VEC128_32F for A, BLK128x128_32F for B) need the scale modes of cuBLAS 12.9 or newer, on
# sm_90 (NVIDIA's answers in CUDALibrarySamples: Hopper only; Blackwell has VEC32_UE8M0
# instead): an older library is refused up front with the mode and the version, another GPU by
# min_cc or cuBLASLt's heuristic.
# torch_fp8 is torch._scaled_mm (its block mode is cuBLASLt's too; its row mode cuBLASLt's
# OUTER_VEC_32F where cuBLAS >= 12.9 on sm_90, else a CUTLASS kernel, per PyTorch's source).
# Formats (``fp8_types``): cuBLASLt's FP8 kernels take e4m3 x e4m3, e4m3 x e5m2 and e5m2 x e4m3,
# never two e5m2 operands (its documentation's FP8 type table; _scaled_mm refuses that pair
# for the same reason), so every FP8 baseline declares the three pairs and refuses "e5m2" by
# name. The documentation does not say which pairs the row and block modes have (cuBLASLt 13.1
# on an H200 took both mixed pairs in both, directly and through _scaled_mm); a pair a library
# lacks there gets no algorithm from the heuristic, and _scaled_mm's CUTLASS row kernel (cuBLAS
# before 12.9) takes an e5m2 A only: either refusal comes when the case is prepared ("skipped").
_FP8_TYPES = ("e4m3", "e5m2_e4m3", "e4m3_e5m2")
_FP8 = dict(precision="fp8", min_cc=(8, 9), layouts=("nt",), out_dtypes=("fp32", "bf16"), fp8_types=_FP8_TYPES)
_FP8_SM90 = {**_FP8, "min_cc": (9, 0)}
PROVIDERS = (
    Provider("cublas", "cuBLAS SGEMM, FP32 compute, no TF32 (the baseline)", _cublas_gemm, min_cc=(5, 0),
             layouts=LAYOUTS),
    Provider("numpy", "NumPy float32 matmul on the CPU", host_gemm=host_gemm, batched=True),
    Provider("cublas_tf32", "cuBLAS GemmEx, FP32 in memory, TF32 tensor cores, FP32 accumulate", _cublas_gemm,
             precision="tf32", min_cc=(8, 0), layouts=LAYOUTS),
    Provider("cublas_bf16", "cuBLAS GemmEx, BF16 A/B, FP32 accumulate, FP32 or BF16 C", _cublas_gemm,
             precision="bf16", min_cc=(8, 0), layouts=LAYOUTS, out_dtypes=("fp32", "bf16")),
    Provider("cublas_fp16", "cuBLAS GemmEx, FP16 A/B, FP32 accumulate, FP32 or FP16 C", _cublas_gemm,
             precision="fp16", min_cc=(7, 0), layouts=LAYOUTS, out_dtypes=("fp32", "fp16")),
    Provider("cublaslt_tf32", "cuBLASLt matmul, TF32, fastest of the heuristic's top 8 measured here",
             _cublaslt_matmul, precision="tf32", min_cc=(8, 0), measures=True, uses_scratch=True, layouts=LAYOUTS,
             epilogues=EPILOGUES),
    Provider("cublaslt_bf16", "cuBLASLt matmul, BF16 A/B, FP32 or BF16 C, bias/ReLU/GELU epilogues, fastest of the "
             "heuristic's top 8 measured here", _cublaslt_matmul, precision="bf16", min_cc=(8, 0), measures=True,
             uses_scratch=True, layouts=LAYOUTS, out_dtypes=("fp32", "bf16"), epilogues=EPILOGUES),
    Provider("cublaslt_fp16", "cuBLASLt matmul, FP16 A/B, FP32 or FP16 C, bias/ReLU/GELU epilogues, fastest of the "
             "heuristic's top 8 measured here", _cublaslt_matmul, precision="fp16", min_cc=(7, 0), measures=True,
             uses_scratch=True, layouts=LAYOUTS, out_dtypes=("fp32", "fp16"), epilogues=EPILOGUES),
    Provider("cublaslt_fp8", "cuBLASLt matmul, e4m3 A/B or one of them e5m2 (nt), per-tensor FP32 scales, FP32 or "
             "BF16 D, fast accumulation off, fastest of the heuristic's top 8 measured here", _cublaslt_matmul,
             measures=True, uses_scratch=True, scalings=("tensor",), **_FP8),
    Provider("cublaslt_fp8_row", "cuBLASLt matmul, e4m3 A/B or one of them e5m2 (nt), per-row-of-A and "
             "per-column-of-B FP32 scales (OUTER_VEC_32F, cuBLAS 12.9+, sm_90), FP32 or BF16 D", _cublaslt_matmul,
             measures=True, uses_scratch=True, scalings=("row",), **_FP8_SM90),
    Provider("cublaslt_fp8_block", "cuBLASLt matmul, e4m3 A/B or one of them e5m2 (nt), 1x128 scales of A and "
             "128x128 of B (VEC128_32F / BLK128x128_32F, cuBLAS 12.9+, sm_90; B's scales copied with padded rows), "
             "FP32 or BF16 D", _cublaslt_matmul, measures=True, uses_scratch=True, scalings=("block",), **_FP8_SM90),
    Provider("cublas_batched", "cuBLAS strided-batched GemmEx, FP32, no TF32 (batched shapes)", _cublas_batched,
             min_cc=(5, 0), single=False, batched=True),
    Provider("cupy", "CuPy matmul on the same operands and stream, FP32 (TF32 off), when CuPy is installed",
             _cupy_matmul, min_cc=(5, 0), unavailable=cupy_unavailable),
    Provider("torch", "PyTorch addmm on the same operands and stream, FP32 (TF32 off), when torch is installed",
             _torch_matmul, min_cc=(5, 0), unavailable=torch_unavailable, layouts=LAYOUTS, epilogues=EPILOGUES),
    Provider("torch_bf16", "PyTorch mm/addmm, BF16 A/B, FP32 or BF16 C, torch's relu/gelu, on the same operands "
             "and stream", _torch_matmul, precision="bf16", min_cc=(8, 0), unavailable=torch_unavailable,
             layouts=LAYOUTS, out_dtypes=("fp32", "bf16"), epilogues=EPILOGUES),
    Provider("torch_fp16", "PyTorch mm/addmm, FP16 A/B, FP32 or FP16 C, torch's relu/gelu, on the same operands "
             "and stream", _torch_matmul, precision="fp16", min_cc=(7, 0), unavailable=torch_unavailable,
             layouts=LAYOUTS, out_dtypes=("fp32", "fp16"), epilogues=EPILOGUES),
    Provider("torch_fp8", "PyTorch torch._scaled_mm, e4m3 A/B or one of them e5m2 (nt), tensor/row/block FP32 "
             "scales, FP32 or BF16 D, fast accumulation off, on the same operands and stream (K, N multiples of 16)",
             _torch_scaled_mm, unavailable=torch_unavailable, measures=True, scalings=("tensor", "row", "block"),
             **_FP8),
)
