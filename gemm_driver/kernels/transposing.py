"""Every layout for kernels that read row-major A and B only: a transposed copy first.

``taking_layouts(spec, itemsize)`` gives such a kernel the layouts nn, nt, tn and tt. Its
launch recipe is wrapped: each operand the problem stores transposed (A as K x M, B as N x K)
is first written as its row-major transpose (``pack_transpose``, cu/common/pack_transpose.cuh:
32 x 32 tiles through shared memory) into Session scratch, rows padded to whole 16-byte
multiples, and the kernel's own recipe then runs the row-major ("nn") problem on the copy.
Nothing else of the kernel changes: its tunables, its choice per shape and its build. A kernel
that reads B stored N x K itself (``reads_transposed_b``: hopper_tf32, whose TF32 wgmma reads
B K-major) gets A copied alone and the problem with B's layout as it was.

The copy reads and writes the operand once each. At 4096^3 on an H200
(results/h200/bench-layouts-copy-*.txt) one copy added 27-41 us to mma_sync_bf16's 290 us,
38-83 us to hopper_tf32's 348 us (before it read B stored N x K in place) and 41-85 us to
autotuned's 2.76 ms. The Hopper BF16/FP16 kernels read every layout in place (TMA boxes and
wgmma's transpose bits) and do not use this.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from ..problem import LAYOUTS, GemmProblem
from .launch import Enqueue, LaunchContext, LaunchRecipe, Operand, standard_recipe
from .spec import MAX_GRID, Entry, KernelSpec, ceil_div

SIGNATURE = ("ptr", "long long", "int", "int", "ptr", "long long")  # src, ld_src, rows, cols, dst, ld_dst
STORAGE = {4: "float", 2: "unsigned short"}  # element bytes -> the copy's T: it moves bits, never converts
THREADS = 256  # pack_transpose is __launch_bounds__(256): 32 x 8 threads a tile
TILE = 32
MAX_GRID_Y = MAX_GRID[1]  # the source's 32-row tiles run along grid y
SCRATCH = {"a": "transposed_a", "b": "transposed_b"}  # Session workspace names, apart from any packing's


class Copy(NamedTuple):
    """The row-major copy of an operand stored transposed (``rows`` x ``cols`` as stored):
    ``cols`` x ``ld`` elements at ``ptr``, made by the ``launch`` of the copy kernel."""

    ptr: int
    ld: int
    itemsize: int
    launch: Enqueue


def transpose_entry(itemsize: int) -> Entry:
    return Entry("transpose", f"pack_transpose<{STORAGE[itemsize]}>", SIGNATURE)


def copy_ld(rows: int, itemsize: int) -> int:
    """The copy's leading dimension: ``rows`` (the stored rows become its columns) rounded up
    to whole 16-byte multiples, as cp.async and TMA read rows."""
    per = 16 // itemsize
    return ceil_div(max(rows, 1), per) * per


def _copies_fit_the_grid(copied: frozenset[str]):
    def copy_fits_the_grid(p: GemmProblem, t) -> str | None:
        for name, stored, rows in (("A", p.trans_a, p.k), ("B", p.trans_b, p.n)):
            if name.lower() in copied and stored and ceil_div(rows, TILE) > MAX_GRID_Y:
                return (f"{name} stored transposed has {rows} rows; its transposed copy takes at most "
                        f"{MAX_GRID_Y} x {TILE} = {MAX_GRID_Y * TILE}")
        return None

    return copy_fits_the_grid


def _copy(ctx: LaunchContext, which: str, operand: Operand, rows: int, cols: int) -> Copy:
    """Reserve the scratch for the transpose of ``operand`` (``rows`` x ``cols`` as stored)
    and make the launch that writes it."""
    ld = copy_ld(rows, operand.itemsize)
    dst = ctx.workspace(SCRATCH[which], max(cols, 1) * ld * operand.itemsize)
    kernel, stream = ctx.kernels["transpose"], ctx.stream
    args = kernel.pack(operand.ptr, operand.ld, rows, cols, dst, ld)
    grid = (ceil_div(cols, TILE), ceil_div(rows, TILE), 1)
    return Copy(dst, ld, operand.itemsize, lambda: kernel.launch(grid, (THREADS, 1, 1), args, stream))


def transposing(recipe: LaunchRecipe, copied: frozenset[str] = frozenset("ab")) -> LaunchRecipe:
    """``recipe`` for every layout: the nn problem as it was; otherwise the transposed copies
    of the ``copied`` operands stored transposed first (A^T stored K x M, B^T stored N x K),
    then ``recipe`` on the problem over them (an operand not in ``copied`` keeps its layout)."""

    def with_copies(ctx: LaunchContext) -> Enqueue:
        p = ctx.problem
        copy_a, copy_b = p.trans_a and "a" in copied, p.trans_b and "b" in copied
        if not (copy_a or copy_b):
            return recipe(ctx)
        inner = dataclasses.replace(p, trans_a=p.trans_a and not copy_a, trans_b=p.trans_b and not copy_b)
        copies, a, b = [], ctx.a, ctx.b
        if copy_a and not inner.is_empty:
            copies.append(_copy(ctx, "a", ctx.a, p.k, p.m))
            a = copies[-1]
        if copy_b and not inner.is_empty:
            copies.append(_copy(ctx, "b", ctx.b, p.n, p.k))
            b = copies[-1]
        gemm = recipe(dataclasses.replace(ctx, problem=inner, a=a, b=b))

        def enqueue() -> None:
            for copy in copies:
                copy.launch()
            gemm()

        return enqueue

    return with_copies


def taking_layouts(spec: KernelSpec, itemsize: int, reads_transposed_b: bool = False) -> KernelSpec:
    """``spec`` declaring every layout, the ones with a transposed operand by a copy first
    (A and B hold ``itemsize``-byte elements). ``reads_transposed_b``: the kernel reads B
    stored N x K itself, so only A is copied."""
    copied = frozenset("a" if reads_transposed_b else "ab")
    return dataclasses.replace(
        spec, layouts=LAYOUTS, rules=(*spec.rules, _copies_fit_the_grid(copied)),
        extra_entries=(*spec.extra_entries, transpose_entry(itemsize)),
        launch_recipe=transposing(spec.launch_recipe or standard_recipe, copied))
