"""How a registered kernel is enqueued: the launch-recipe hook, the standard recipe, and Launch.

A launch recipe is called once per (problem, operands) when the launcher is made, never per
launch. It receives a ``LaunchContext``: the loaded kernels of the spec's module ("main"
plus every ``Entry`` of ``spec.extra_entries``), the problem, the operands' device
pointers and leading dimensions, the resolved tunables, the stream, and ``workspace``
(Session-owned scratch by name, grown on demand) and the ``device`` (its SM count sizes a
persistent grid). It returns the zero-argument callable
that enqueues the whole GEMM on that stream, for instance a packing pre-pass into aligned
scratch and then the main kernel with ``"tensormap"`` arguments (cuda/driver.py)::

    def packed_recipe(ctx: LaunchContext) -> Callable[[], None]:
        a = ctx.problem.m * ctx.problem.k * 2
        packed = ctx.workspace("packed_a", a)            # device pointer, kept by the Session
        pack, main = ctx.kernels["pack_a"], ctx.kernels["main"]
        pack_args = pack.pack(ctx.a.ptr, ctx.a.ld, packed, ctx.problem.m, ctx.problem.k)
        main_args = main.pack(encode(packed), ...)      # encoded once, here
        grid = ctx.spec.grid(ctx.problem, ctx.tunables)

        def enqueue():
            pack.launch((ctx.problem.m, 1, 1), (256, 1, 1), pack_args, ctx.stream)
            main.launch(grid, ctx.spec.block(ctx.tunables), main_args, ctx.stream)
        return enqueue

``standard_recipe`` is today's path: the main kernel, grid and block from the spec, the
SGEMM arguments (+ the spec's ``scratch`` pointers). The Session builds the context
(run layer); everything here is pure and testable without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

from ..problem import GemmProblem
from .spec import KernelSpec

Enqueue = Callable[[], None]


class Operand(Protocol):
    """What a launch needs of a device matrix (operands.DeviceMatrix has it)."""

    ptr: int  # device address of the first element
    ld: int  # row stride as stored, in elements (a transposed A is stored K x M: ld >= M)
    itemsize: int  # bytes per element (C: the problem's out_dtype)


class Workspace(Protocol):
    def __call__(self, name: str, nbytes: int, *, zeroed: bool = False) -> int:
        """Device pointer to at least ``nbytes`` of the scratch buffer ``name``."""


@dataclass(frozen=True)
class LaunchContext:
    spec: KernelSpec
    kernels: Mapping[str, Any]  # "main" and each extra entry's name -> cuda.driver.Kernel
    problem: GemmProblem
    a: Operand
    b: Operand
    c: Operand
    tunables: Mapping[str, int]
    stream: Any  # cuda.driver.Stream
    workspace: Workspace
    device: Any = None  # cuda.driver.Device: SM count, shared memory limits (persistent grids)
    bias: int = 0  # device pointer to the N-vector bias in problem.out_dtype; 0 when problem.epilogue is "none"
    # FP8: A's and B's FP32 scales (Operands: ptr, ld; fp8.device_scales' layouts); None without a scaling
    scales: tuple[Operand, Operand] | None = None


LaunchRecipe = Callable[[LaunchContext], Enqueue]


def standard_recipe(ctx: LaunchContext) -> Enqueue:
    """One launch of the main kernel with (M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), plus
    a workspace and a zeroed counter buffer when the spec declares ``scratch`` (split-K)."""
    spec, p, t = ctx.spec, ctx.problem, ctx.tunables
    extra: tuple[int, ...] = ()
    if spec.scratch is not None:
        workspace_bytes, counter_bytes = spec.scratch(p, t)
        extra = (ctx.workspace("workspace", workspace_bytes) if workspace_bytes else 0,
                 ctx.workspace("counters", counter_bytes, zeroed=True) if counter_bytes else 0)
    kernel = ctx.kernels["main"]
    packed = kernel.pack(p.m, p.n, p.k, p.alpha, ctx.a.ptr, ctx.a.ld, ctx.b.ptr, ctx.b.ld, p.beta,
                         ctx.c.ptr, ctx.c.ld, *extra)
    grid, block = spec.grid(p, t), spec.block(t)

    def enqueue() -> None:
        kernel.launch(grid, block, packed, ctx.stream)

    return enqueue


@dataclass(frozen=True)
class Launch:
    """One GEMM ready to enqueue on ``stream`` (call it), and the record of what it is:
    the kernel or provider, the tunables it runs with and why (``note``: the tuned-table
    entry that chose them; empty when they were given or are the defaults)."""

    target: str
    enqueue: Enqueue
    stream: Any
    tunables: Mapping[str, int] = field(default_factory=dict)
    note: str = ""
    algorithm: Mapping[str, Any] = field(default_factory=dict)  # what a library chose (cuBLASLt)

    def __call__(self) -> None:
        self.enqueue()

    @property
    def uses_scratch(self) -> bool:
        """Whether this launch may touch Session scratch, as far as its recipe tells (a Hopper
        recipe knows whether it splits K or packs an operand); else its target's word holds."""
        return getattr(self.enqueue, "uses_scratch", True)

    def synchronize(self) -> None:
        self.stream.synchronize()

    def repoint(self, a: Operand, b: Operand, c: Operand, bias: int = 0) -> "Launch | None":
        """This GEMM at other operand addresses (same problem, tunables and stream), made from
        this Launch where its recipe or library launcher can (the Hopper recipes: the moved
        operands' tensor maps pointed at their new addresses; cuBLAS: the argument tuple); None
        where it cannot, and a new Launch is made instead. (Made by the constructor, not
        dataclasses.replace: this runs once a training step per GEMM, and replace costs more.)"""
        again = getattr(self.enqueue, "repoint", None)
        moved = None if again is None else again(a, b, c, bias)
        return None if moved is None else Launch(self.target, moved, self.stream, self.tunables, self.note,
                                                 self.algorithm)

    def record(self) -> dict:
        """What ran, for the results JSON."""
        return {"kernel": self.target, "tunables": dict(self.tunables), "note": self.note,
                "algorithm": dict(self.algorithm)}
