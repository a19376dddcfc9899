"""mma_sync's launch recipe: pack A and/or B into aligned scratch when cp.async cannot read them.

The ASYNC=1 kernel copies 16-byte chunks with cp.async, which needs every row start
16-byte aligned: the base pointer 16-byte aligned and the leading dimension a multiple of
a chunk (8 BF16/FP16 elements, 4 FP32). An operand that is not gets copied first by the
source's ``pack_rows`` kernel into Session scratch with the leading dimension rounded up to
a chunk (zeros in the padding), and the GEMM then reads the copy. Measured on the H100 at
4093x4091x4099 BF16 (odd leading dimensions): packing + ASYNC 322 TFLOP/s, the register
path (ASYNC=0, any alignment, no copy) 108. ASYNC=0 never packs.

Pure: the packing is decided from the operands' pointers and leading dimensions when the
launcher is made; tests drive it with stand-in kernels and workspace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..launch import Enqueue, Operand, LaunchContext
from ..spec import Entry, ceil_div
from .common import CHUNK_BYTES

PACK_SIGNATURE = ("int", "int", "ptr", "int", "ptr", "int")  # rows, cols, src, ld_src, dst, ld_dst
PACK_THREADS = 256
PACK_MAX_BLOCKS = 4096  # a grid-stride loop: enough blocks to fill any GPU, no more
SCRATCH = {"a": "packed_a", "b": "packed_b"}  # Session workspace names


def pack_entry(storage: str) -> Entry:
    return Entry("pack", f"pack_rows<{storage}>", PACK_SIGNATURE)


def chunk_aligned(operand: Operand) -> bool:
    """What the kernel's rows_chunk_aligned() checks: every row start 16-byte aligned."""
    per_chunk = CHUNK_BYTES // operand.itemsize
    return operand.ptr % CHUNK_BYTES == 0 and operand.ld % per_chunk == 0


@dataclass(frozen=True)
class Packed:
    """An operand copied to aligned scratch: where the copy lives and how it is made."""

    ptr: int
    ld: int
    grid: tuple[int, int, int]
    args: object  # the pack kernel's packed arguments


def pack(ctx: LaunchContext, which: str, operand: Operand, rows: int, cols: int) -> Packed:
    """Plan the copy of a rows x cols operand into the scratch buffer of ``which`` ('a'/'b')."""
    per_chunk = CHUNK_BYTES // operand.itemsize
    ld = ceil_div(max(cols, 1), per_chunk) * per_chunk
    dst = ctx.workspace(SCRATCH[which], max(rows, 1) * ld * operand.itemsize)
    chunks = rows * (ld // per_chunk)
    grid = (max(1, min(ceil_div(chunks, PACK_THREADS), PACK_MAX_BLOCKS)), 1, 1)
    args = ctx.kernels["pack"].pack(rows, cols, operand.ptr, operand.ld, dst, ld)
    return Packed(dst, ld, grid, args)


def packing_recipe(ctx: LaunchContext) -> Enqueue:
    """The GEMM on the stream: with ASYNC=1, first a pack of each operand cp.async cannot
    read (A is M x K, B is K x N), then the kernel on the aligned copies."""
    spec, p, t = ctx.spec, ctx.problem, ctx.tunables
    copies: list[Packed] = []
    (a_ptr, lda), (b_ptr, ldb) = (ctx.a.ptr, ctx.a.ld), (ctx.b.ptr, ctx.b.ld)
    if t["ASYNC"]:
        if not chunk_aligned(ctx.a):
            copies.append(pack(ctx, "a", ctx.a, p.m, p.k))
            a_ptr, lda = copies[-1].ptr, copies[-1].ld
        if not chunk_aligned(ctx.b):
            copies.append(pack(ctx, "b", ctx.b, p.k, p.n))
            b_ptr, ldb = copies[-1].ptr, copies[-1].ld
    main, packer = ctx.kernels["main"], ctx.kernels.get("pack")
    args = main.pack(p.m, p.n, p.k, p.alpha, a_ptr, lda, b_ptr, ldb, p.beta, ctx.c.ptr, ctx.c.ld, ctx.bias)
    grid, block = spec.grid(p, t), spec.block(t)
    launches: list[Callable[[], None]] = [
        (lambda c=c: packer.launch(c.grid, (PACK_THREADS, 1, 1), c.args, ctx.stream)) for c in copies]

    def enqueue() -> None:
        for launch in launches:
            launch()
        main.launch(grid, block, args, ctx.stream)

    return enqueue
