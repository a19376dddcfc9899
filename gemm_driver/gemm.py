"""Run any registered kernel or provider on a GEMM problem, and the ``gemm()`` entry point.

A Session owns what running needs on one GPU: the retained primary context, a stream,
a lazily created cuBLAS handle and the kernels loaded so far. ``launcher()`` turns
(kernel, problem, operands) into a zero-argument callable that enqueues exactly one
GEMM: the same callable is verified and then timed, so what is timed is what passed.
"""

from __future__ import annotations

import atexit
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from . import kernels
from . import precision as _precision
from .cuda import cublas
from .cuda.driver import Context, DeviceBuffer, Kernel, Module, Stream
from .kernels.build import Build, build
from .kernels.sources import read_source
from .kernels.spec import KernelSpec, Provider
from .operands import DeviceMatrix, upload_operands
from .problem import GemmProblem
from .verify import Reference, Verification
from .verify import check as check_output

Launch = Callable[[], None]


@dataclass
class LoadedKernel:
    spec: KernelSpec
    tunables: Mapping[str, int]
    kernel: Kernel
    build: Build | None  # None for PTX loaded through the driver JIT


class Session:
    """One GPU ready to run GEMMs. Use as a context manager, or call ``close()``."""

    def __init__(self, device: int = 0):
        self.context = Context(device)
        self.device = self.context.device
        self.stream = Stream()
        self._loaded: dict[tuple, LoadedKernel] = {}
        self._modules: list[Module] = []
        self._cublas: cublas.CublasHandle | None = None
        self._scratch: dict[str, DeviceBuffer] = {}  # split-K workspace and tile counters
        self._retired: list[DeviceBuffer] = []  # every scratch buffer made, freed at close()

    @property
    def arch(self) -> str:
        return self.device.arch

    def cublas(self) -> cublas.CublasHandle:
        if self._cublas is None:
            self.context.make_current()
            self._cublas = cublas.CublasHandle(self.stream)
        return self._cublas

    def load(self, spec: KernelSpec, tunables: Mapping[str, int]) -> LoadedKernel:
        """Build (through the cache) and load a kernel once per tunable set."""
        key = (spec.name, tuple(sorted(tunables.items())))
        if key not in self._loaded:
            spec.check_device(self.device.compute_capability)
            self.context.make_current()
            if spec.kind == "ptx":
                # Hand-written PTX goes through the driver's JIT: that is the path it proves.
                module, entry, built = Module(read_source(spec.source), is_ptx=True, name=spec.source), spec.entry, None
            else:
                built = build(spec, self.arch, tunables)
                module, entry = Module(built.compiled.cubin, name=spec.source), built.entry
            self._modules.append(module)
            kernel = module.kernel(entry, spec.signature, spec.dynamic_smem(tunables))
            self._loaded[key] = LoadedKernel(spec, dict(tunables), kernel, built)
        return self._loaded[key]

    def launcher(self, name: str, problem: GemmProblem, a: DeviceMatrix, b: DeviceMatrix, c: DeviceMatrix,
                 tunables: Mapping[str, int] | None = None) -> Launch:
        """A callable that enqueues one C = alpha A B + beta C on this session's stream."""
        target = kernels.get(name)
        check_operands(target, problem, a, b)
        if isinstance(target, Provider):
            if tunables:
                raise ValueError(f"{name} takes no tunables, got {sorted(tunables)}")
            if target.kind != "library":
                raise ValueError(f"{name} runs on the CPU and has no GPU launcher")
            if target.name == "cupy":
                from . import cupy_baseline

                return cupy_baseline.launcher(int(self.stream.handle), problem, a, b, c)
            return _cublas_launch(self.cublas(), target, problem, a, b, c)
        note = ""
        if target.choose is not None and not tunables:
            tunables, note = target.choose(problem, self.device.name)
        resolved = target.validate(problem, tunables)
        loaded = self.load(target, resolved)
        extra = self._scratch_pointers(*target.scratch(problem, resolved)) if target.scratch else ()
        packed = loaded.kernel.pack(problem.m, problem.n, problem.k, problem.alpha, a.ptr, a.ld,
                                    b.ptr, b.ld, problem.beta, c.ptr, c.ld, *extra)
        grid, block = target.grid(problem, resolved), target.block(resolved)

        def launch() -> None:
            loaded.kernel.launch(grid, block, packed, self.stream)

        launch.tunables, launch.note = dict(resolved), note  # what ran, for the record
        return launch

    def _scratch_pointers(self, workspace_bytes: int, counter_bytes: int) -> tuple[int, int]:
        """Device pointers to at least this much workspace and zeroed counters (0 for none).

        Buffers only grow, and a replaced one is kept until close(): a launcher made
        earlier may still point into it. Kernels that use the counters leave them zeroed.
        """
        pointers = []
        for kind, nbytes in (("workspace", workspace_bytes), ("counters", counter_bytes)):
            current = self._scratch.get(kind)
            if nbytes and (current is None or current.nbytes < nbytes):
                self.context.make_current()
                current = DeviceBuffer(nbytes)
                if kind == "counters":
                    current.memset32(0)
                self._scratch[kind] = current
                self._retired.append(current)
            pointers.append(current.ptr if nbytes else 0)
        return tuple(pointers)

    def synchronize(self) -> None:
        self.stream.synchronize()

    def close(self) -> None:
        if self._cublas is not None:
            self._cublas.close()
        for module in self._modules:
            module.close()
        self._modules.clear()
        self._loaded.clear()
        for buffer in self._retired:
            buffer.close()
        self._retired.clear()
        self._scratch.clear()
        self.stream.close()
        self.context.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def check_operands(target: KernelSpec | Provider, problem: GemmProblem, a: DeviceMatrix, b: DeviceMatrix) -> None:
    """ValueError (the runner's "skipped") when operands or problem do not suit ``target``:
    A/B stored in another precision's element size, or a batch for a one-GEMM kernel."""
    p = _precision.get(target.dtype)
    if (a.itemsize, b.itemsize) != (p.itemsize, p.itemsize):
        raise ValueError(f"{target.name} takes {p.name} operands ({p.itemsize}-byte A and B), "
                         f"got {a.itemsize}- and {b.itemsize}-byte ones")
    if problem.batch > 1 and target.name != _precision.BATCHED_BASELINE:
        raise ValueError(f"{target.name} computes one GEMM per launch; batched shapes run on "
                         f"{_precision.BATCHED_BASELINE} (FP32)")


def _cublas_launch(handle: cublas.CublasHandle, target: Provider, problem: GemmProblem,
                   a: DeviceMatrix, b: DeviceMatrix, c: DeviceMatrix) -> Launch:
    """cuBLAS in the provider's precision (explicit types and math mode, cublasGemmEx);
    the batched provider walks the stacked operands with strides of one matrix each."""
    p, (m, n, k) = _precision.get(target.dtype), (problem.m, problem.n, problem.k)
    if target.name == _precision.BATCHED_BASELINE:
        args = (m, n, k, problem.alpha, a.ptr, a.ld, m * a.ld, b.ptr, b.ld, k * b.ld,
                problem.beta, c.ptr, c.ld, m * c.ld, problem.batch)
        return lambda: cublas.gemm_strided_batched_ex(handle, *args, precision=p.cublas)
    args = (m, n, k, problem.alpha, a.ptr, a.ld, b.ptr, b.ld, problem.beta, c.ptr, c.ld)
    return lambda: cublas.gemm_ex(handle, *args, precision=p.cublas)


def verify_once(session: Session, launch: Launch, problem: GemmProblem, c: DeviceMatrix,
                c_host: np.ndarray | None, ref: Reference, precision: str = "fp32") -> Verification:
    """Poison C (or restore its input values), run ``launch`` once, check C and its guard
    band against ``precision``'s bound."""
    c.fill(c_host)
    launch()
    session.synchronize()
    out, guard_violations = c.read()
    return check_output(problem, out, ref, guard_violations, precision)


_default: Session | None = None


def default_session() -> Session:
    """The process-wide Session ``gemm()`` uses, created on first use."""
    global _default
    if _default is None:
        _default = Session()
        atexit.register(_default.close)
    return _default


def _check_matrix(name: str, x, shape_hint: str) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if x.dtype != np.float32:
        raise TypeError(f"{name} must have dtype float32, got {x.dtype}")
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D ({shape_hint}), got {x.ndim}-D")
    if not x.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous (row-major); use numpy.ascontiguousarray({name})")
    return x


def gemm(A: np.ndarray, B: np.ndarray, C: np.ndarray | None = None, *, alpha: float = 1.0, beta: float = 0.0,
         kernel: str = "cublas", **tunables: int) -> np.ndarray:
    """Return alpha * A @ B + beta * C computed by ``kernel`` (C itself is left unchanged).

    A is M x K, B is K x N, C (needed when beta != 0) is M x N, all float32 and
    C-contiguous. As in cuBLAS, M or N = 0 gives an empty result, K = 0 gives beta * C,
    and C is not read when beta == 0. A kernel of a 2-byte precision (e.g. cublas_bf16)
    multiplies A and B rounded to it (round to nearest even); C stays float32.
    """
    _check_matrix("A", A, "M x K")
    _check_matrix("B", B, "K x N")
    (m, k), (k2, n) = A.shape, B.shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: A is {m}x{k}, B is {k2}x{n}")
    if C is not None:
        _check_matrix("C", C, "M x N")
        if C.shape != (m, n):
            raise ValueError(f"C must be {m}x{n} for A {m}x{k} @ B {k}x{n}, got {C.shape[0]}x{C.shape[1]}")
    elif beta != 0:
        raise ValueError(f"beta={beta} scales C, but no C was given")
    problem = GemmProblem(m, n, k, float(alpha), float(beta))
    target = kernels.get(kernel)
    if isinstance(target, KernelSpec):
        target.validate(problem, tunables)
    elif tunables:
        raise ValueError(f"{kernel} takes no tunables, got {sorted(tunables)}")
    c_in = C if beta != 0 else None
    if problem.is_empty or target.name == "numpy":
        return host_gemm(problem, A, B, c_in)
    session = default_session()
    a, b, c = upload_operands(problem, A, B, c_in, precision=target.dtype)
    try:
        session.launcher(kernel, problem, a, b, c, tunables)()
        session.synchronize()
        out, _ = c.read()
    finally:
        for matrix in (a, b, c):
            matrix.close()
    return out


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
