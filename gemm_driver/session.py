"""Run any registered kernel or provider on a GEMM problem: the Session.

A Session owns what running needs on one GPU: the retained primary context, a stream, a
lazily created cuBLAS handle, the kernels loaded so far and named device scratch
(``workspace``). ``launcher()`` turns (kernel, problem, operands) into a ``Launch``: a
value that enqueues exactly one GEMM when called and records what runs (tunables, and
which tuned-table entry chose them). The same Launch is verified and then timed, so what
is timed is what passed. Operands are anything with ``ptr``, ``ld`` and ``itemsize``
(operands.DeviceMatrix).

``launcher(..., stream=...)`` queues the Launch on another stream instead (anything with a
``handle``: a caller's stream, cuda.driver.ExternalStream); providers then see the session
through ``on(stream)``, a view whose ``stream`` is that one and whose cuBLAS handle is bound
to it at each launch (the Plan of plans.py points one ExternalStream at each caller's stream).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from . import kernels
from .cuda import cache, cublas, cublaslt
from .cuda.driver import Context, DeviceBuffer, Kernel, Module, Stream
from .cuda.errors import UnsupportedProblem
from .kernels.build import Build, build
from .kernels.launch import Launch, Operand, LaunchContext, standard_recipe
from .kernels.providers import Provider
from .kernels.sources import included_headers, read_source
from .kernels.spec import KernelSpec
from .kernels.target import GemmTarget, check_capabilities
from .precision import get as get_precision
from .problem import GemmProblem, fp8_rule


@dataclass
class LoadedKernel:
    spec: KernelSpec
    tunables: Mapping[str, int]
    kernels: Mapping[str, Kernel]  # "main" and each extra entry's name
    build: Build | None  # None for PTX loaded through the driver JIT

    @property
    def kernel(self) -> Kernel:
        return self.kernels["main"]


class Session:
    """One GPU ready to run GEMMs. Use as a context manager, or call ``close()``."""

    # Launches always run on ``self.stream`` (the view made by ``on()`` says True: its stream's
    # handle may change between launches, so providers bind library handles at each one).
    stream_per_call = False

    def __init__(self, device: int = 0):
        self.context = Context(device)
        self.device = self.context.device
        self.stream = Stream()
        self._loaded: dict[tuple, LoadedKernel] = {}
        self._harness_modules: dict[str, Module] = {}  # one per source under cu/harness/
        self._harness: dict[tuple[str, str], Kernel] = {}  # (source, entry)
        self._modules: list[Module] = []
        self._cublas: cublas.CublasHandle | None = None
        self._cublas_shared: cublas.CublasHandle | None = None  # for launches on callers' streams
        self._cublaslt: cublaslt.LtHandle | None = None
        self._lt_matmuls: dict[tuple, cublaslt.LtMatmul] = {}
        self._workspace: dict[str, DeviceBuffer] = {}
        self._retired: list[DeviceBuffer] = []  # every scratch buffer made, freed at close()

    @property
    def arch(self) -> str:
        return self.device.arch

    def cublas(self) -> cublas.CublasHandle:
        if self._cublas is None:
            self.context.make_current()
            self._cublas = cublas.CublasHandle(self.stream)
        return self._cublas

    def cublas_for_other_streams(self) -> cublas.CublasHandle:
        """A second cuBLAS handle for launches on streams other than ``self.stream``; whoever
        uses it binds it to the stream at each call (``stream_per_call``), so the session's
        own handle never leaves its stream."""
        if self._cublas_shared is None:
            self.context.make_current()
            self._cublas_shared = cublas.CublasHandle(None)
        return self._cublas_shared

    def on(self, stream) -> "SessionOnStream":
        """This session as a provider sees it when its work goes on ``stream``."""
        return SessionOnStream(self, stream)

    def cublaslt_matmul(self, problem: cublaslt.LtProblem, workspace, alignment: tuple[int, int, int],
                        bias_alignment: int = cublaslt.MAX_ALIGNMENT) -> cublaslt.LtMatmul:
        """A cuBLASLt matmul for ``problem`` (its heuristic candidates at ``alignment``, and
        ``bias_alignment`` for an epilogue's bias), made once per (problem, alignments,
        workspace) and kept until close()."""
        key = (problem, alignment, bias_alignment, workspace)
        if key not in self._lt_matmuls:
            self.context.make_current()
            if self._cublaslt is None:
                self._cublaslt = cublaslt.LtHandle()
            self._lt_matmuls[key] = cublaslt.LtMatmul(self._cublaslt, problem, workspace=workspace, alignment=alignment,
                                                      bias_alignment=bias_alignment)
        return self._lt_matmuls[key]

    def load(self, spec: KernelSpec, tunables: Mapping[str, int]) -> LoadedKernel:
        """Build (through the cache) and load a kernel's entry points once per tunable set."""
        key = (spec.name, tuple(sorted(tunables.items())))
        if key not in self._loaded:
            spec.check_device(self.device.compute_capability)
            spec.check_shared_memory(tunables, self.device.max_shared_per_block_optin)
            self.context.make_current()
            if spec.kind == "ptx":
                # Hand-written PTX goes through the driver's JIT: that is the path it proves.
                module, built = Module(read_source(spec.source), is_ptx=True, name=spec.source), None
                symbols = {"main": spec.entry}
            else:
                built = build(spec, self.arch, tunables)
                module, symbols = Module(built.compiled.cubin, name=spec.source), built.entries
            self._modules.append(module)
            signatures = {"main": (spec.signature, spec.dynamic_smem(tunables)),
                          **{e.name: (e.signature, e.dynamic_smem(tunables)) for e in spec.entries_for(tunables)}}
            loaded = {name: module.kernel(symbols[name], *signatures[name]) for name in signatures}
            self._loaded[key] = LoadedKernel(spec, dict(tunables), loaded, built)
        return self._loaded[key]

    def harness_kernel(self, source: str, entry: str, signature: tuple[str, ...]) -> Kernel:
        """A kernel that is not a GEMM (``source`` under cu/harness/, e.g. the check of D on the
        GPU): each source built through the cache and loaded once, its entries keyed by
        (source, entry) so two sources may share an entry's name; unloaded at close()."""
        key = (source, entry)
        if key not in self._harness:
            module = self._harness_modules.get(source)
            if module is None:
                self.context.make_current()
                compiled, _ = cache.build(filename=source.rsplit("/", 1)[-1], source=read_source(source),
                                          arch=self.arch, headers=included_headers(source))
                module = self._harness_modules[source] = Module(compiled.cubin, name=source)
                self._modules.append(module)
            self._harness[key] = module.kernel(entry, signature)
        return self._harness[key]

    def launcher(self, name: str, problem: GemmProblem, a: Operand, b: Operand, c: Operand,
                 tunables: Mapping[str, int] | None = None, *, stream=None, bias: Operand | None = None,
                 scales: tuple[Operand, Operand] | None = None) -> Launch:
        """A Launch that enqueues one D = epilogue(alpha op(A) op(B) + beta C) on this
        session's stream, or on ``stream`` when one is given (anything with ``handle``; read
        at each launch). ``bias``: the N-vector in the problem's out_dtype, needed exactly
        when the problem has an epilogue. ``scales``: A's and B's FP32 scales of an FP8 problem
        (fp8.device_scales' layout), needed exactly when it has a scaling. ``tunables`` None or
        empty: the kernel's choose() picks them where it has one (name a tunable, e.g. BN=256,
        to run a kernel's defaults)."""
        stream = self.stream if stream is None else stream
        target = kernels.get(name)
        check_operands(target, problem, a, b)
        bias_ptr = bias_pointer(problem, bias)
        if (scales is None) != (problem.scaling == "none"):
            raise ValueError(f"scaling {problem.scaling!r} " + ("needs the scales of A and B" if scales is None
                             else "takes no scales; pass them only with an FP8 scaling"))
        if target.runs_on_host:
            raise UnsupportedProblem(f"{name} runs on the CPU and has no GPU launcher")
        if isinstance(target, Provider):
            target.check_tunables(tunables)
            target.check_device(self.device.compute_capability)
            made = target.launcher(target, self if stream is self.stream else self.on(stream), problem, a, b, c,
                                   bias=bias_ptr, **({} if scales is None else {"scales": scales}))
            return Launch(name, made.enqueue, stream, algorithm=made.algorithm)
        note = ""
        if target.choose is not None and not tunables:
            tunables, note = target.choose(problem, self.device.name)
        resolved = target.validate(problem, tunables)
        loaded = self.load(target, resolved)
        context = LaunchContext(target, loaded.kernels, problem, a, b, c, resolved, stream, self.workspace,
                                self.device, bias_ptr, scales)
        enqueue = (target.launch_recipe or standard_recipe)(context)
        return Launch(name, enqueue, stream, dict(resolved), note)

    def workspace(self, name: str, nbytes: int, *, zeroed: bool = False) -> int:
        """Device pointer to at least ``nbytes`` of the scratch buffer called ``name``
        (split-K partial sums, tile counters, packed operands...), zero-filled when made
        if ``zeroed``.

        Buffers only grow, and a replaced one is kept until close(): a Launch made earlier
        may still point into it. Kernels that use zeroed counters must leave them zeroed.
        """
        if nbytes <= 0:
            raise ValueError(f"workspace {name!r}: size must be positive, got {nbytes} bytes")
        current = self._workspace.get(name)
        if current is None or current.nbytes < nbytes:
            self.context.make_current()
            current = DeviceBuffer(-(-nbytes // 4) * 4)
            if zeroed:
                current.memset32(0)
            self._workspace[name] = current
            self._retired.append(current)
        return current.ptr

    def synchronize(self) -> None:
        self.stream.synchronize()

    def close(self) -> None:
        if self._cublas is not None:
            self._cublas.close()
        if self._cublas_shared is not None:
            self._cublas_shared.close()
        for matmul in self._lt_matmuls.values():
            matmul.close()
        self._lt_matmuls.clear()
        if self._cublaslt is not None:
            self._cublaslt.close()
        for module in self._modules:
            module.close()
        self._modules.clear()
        self._harness.clear()
        self._loaded.clear()
        for buffer in self._retired:
            buffer.close()
        self._retired.clear()
        self._workspace.clear()
        self.stream.close()
        self.context.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class SessionOnStream:
    """A Session whose launches go on another ``stream`` (Session.on): everything else is
    the session's own (context, loaded kernels, workspace, cuBLASLt matmuls); ``cublas()`` is
    the handle kept for other streams, which providers bind at each launch."""

    stream_per_call = True

    def __init__(self, session: Session, stream):
        self._session, self.stream = session, stream

    def cublas(self) -> cublas.CublasHandle:
        return self._session.cublas_for_other_streams()

    def __getattr__(self, name: str):
        return getattr(self._session, name)


def bias_pointer(problem: GemmProblem, bias: Operand | None) -> int:
    """The bias vector's device pointer: 0 without an epilogue; ValueError when an epilogue
    has no bias or a bias comes without one (it would be silently ignored)."""
    if problem.has_bias != (bias is not None):
        raise ValueError(f"epilogue {problem.epilogue!r} " + ("needs a bias vector of N elements"
                         if problem.has_bias else "reads no bias; pass bias only with bias, bias_relu or bias_gelu"))
    return 0 if bias is None else bias.ptr


def check_operands(target: GemmTarget, problem: GemmProblem, a: Operand, b: Operand) -> None:
    """UnsupportedProblem (the runner's "skipped") when operands or problem do not suit ``target``:
    A/B stored in another precision's element size, a batch it does not take, or a layout,
    output type or epilogue it does not declare."""
    check_capabilities(target, problem)
    if (why := fp8_rule(problem, target.precision)) is not None:
        raise UnsupportedProblem(f"{target.name}: {why}")
    p = get_precision(target.precision)
    if (a.itemsize, b.itemsize) != (p.itemsize, p.itemsize):
        raise UnsupportedProblem(f"{target.name} takes {p.name} operands ({p.itemsize}-byte A and B), "
                         f"got {a.itemsize}- and {b.itemsize}-byte ones")
    if not target.takes_batch(problem.batch):
        if problem.batch > 1:
            batched = p if p.batched_baseline else get_precision("fp32")  # FP32 has the one batched baseline
            raise UnsupportedProblem(f"{target.name} computes one GEMM per launch; batched shapes run on "
                             f"{batched.batched_baseline} ({batched.name.upper()})")
        raise UnsupportedProblem(f"{target.name} runs batched shapes only (B x M x N x K)")
