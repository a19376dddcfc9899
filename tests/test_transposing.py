"""Layouts by a transposed copy first (gemm_driver/kernels/transposing.py), without a GPU:
which kernels take them, the copies a launch makes and what the kernel's own recipe then
sees. The results on the GPU: tests/test_transposing_gpu.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gemm_driver import kernels, precision
from gemm_driver.cuda.errors import UnsupportedProblem
from gemm_driver.kernels import transposing
from gemm_driver.kernels.launch import LaunchContext
from gemm_driver.problem import LAYOUTS, GemmProblem
from test_tensor_specs import FakeKernel

TAKING = ["warptiled", "stream_k", "autotuned", "mma_sync_bf16", "mma_sync_fp16", "mma_sync_tf32",
          "mma_sync_tuned_bf16", "mma_sync_tuned_fp16", "mma_sync_tuned_tf32", "hopper_tf32"]
SCRATCH = {"transposed_a": 0xA0000, "transposed_b": 0xB0000}


def _launch(problem, a, b, itemsize=4, copied=frozenset("ab")):
    """A recipe wrapped by ``transposing`` (copying the ``copied`` operands) on stand-ins.
    -> (launches in order, workspace asked for, the context the wrapped recipe got)."""
    log, asked, seen = [], {}, []

    def gemm_recipe(ctx):
        seen.append(ctx)
        return lambda: log.append(("gemm",))

    def workspace(name, nbytes, *, zeroed=False):
        asked[name] = nbytes
        return SCRATCH[name]

    operand = lambda ptr, ld: SimpleNamespace(ptr=ptr, ld=ld, itemsize=itemsize)
    ctx = LaunchContext(None, {"transpose": FakeKernel("transpose", log)}, problem, operand(*a), operand(*b),
                        operand(0xC0000, problem.n), {}, "stream", workspace)
    enqueue = transposing.transposing(gemm_recipe, copied)(ctx)
    assert not log, "the copies are planned when the launcher is made, and run only when it is called"
    enqueue()
    return log, asked, seen[0]


def test_the_kernels_that_read_row_major_operands_take_every_layout_by_a_copy():
    for name in TAKING:
        spec = kernels.KERNELS[name]
        assert spec.layouts == LAYOUTS, name
        entry = next(e for e in spec.extra_entries if e.name == "transpose")
        itemsize = precision.get(spec.precision).itemsize
        assert entry.expression == f"pack_transpose<{transposing.STORAGE[itemsize]}>", name
    # The Hopper BF16/FP16 kernels read every layout in place; the ladder rungs stay row-major.
    for name in ("hopper_bf16", "hopper_fp16", "double_buffered", "wmma_smem_bf16"):
        assert all(e.name != "transpose" for e in kernels.KERNELS[name].extra_entries), name
    assert kernels.KERNELS["double_buffered"].layouts == ("nn",)


def test_the_row_major_problem_is_the_wrapped_recipe_unchanged():
    problem = GemmProblem(300, 200, 100)
    log, asked, seen = _launch(problem, (0x1000, 100), (0x2000, 200))
    assert log == [("gemm",)] and asked == {} and seen.problem is problem


def test_a_stored_transposed_is_copied_to_row_major_m_x_k_first():
    problem = GemmProblem(300, 200, 101, trans_a=True)  # A stored K x M = 101 x 300, ld 304
    log, asked, seen = _launch(problem, (0x1000, 304), (0x2000, 200))
    assert [entry[0] for entry in log] == ["transpose", "gemm"]
    _, grid, block, args = log[0]
    ld = 104  # K = 101 rounded up to whole 16-byte rows of FP32
    assert args == (0x1000, 304, 101, 300, SCRATCH["transposed_a"], ld)  # src, ld_src, rows, cols, dst, ld_dst
    assert grid == (-(-300 // 32), -(-101 // 32), 1) and block == (256, 1, 1)
    assert asked == {"transposed_a": 300 * ld * 4}
    assert seen.problem == GemmProblem(300, 200, 101)  # the wrapped recipe runs nn
    assert (seen.a.ptr, seen.a.ld, seen.a.itemsize) == (SCRATCH["transposed_a"], ld, 4)
    assert (seen.b.ptr, seen.b.ld) == (0x2000, 200)


def test_b_stored_transposed_is_copied_to_row_major_k_x_n_first():
    problem = GemmProblem(64, 77, 4099, trans_b=True)  # B stored N x K = 77 x 4099; 16-bit elements
    log, asked, seen = _launch(problem, (0x1000, 4099), (0x2000, 4099), itemsize=2)
    assert [entry[0] for entry in log] == ["transpose", "gemm"]
    ld = 80  # N = 77 rounded up to whole 16-byte rows of 2-byte elements
    assert log[0][3] == (0x2000, 4099, 77, 4099, SCRATCH["transposed_b"], ld)
    assert log[0][1] == (-(-4099 // 32), -(-77 // 32), 1)
    assert asked == {"transposed_b": 4099 * ld * 2}
    assert (seen.a.ptr, seen.b.ptr, seen.b.ld) == (0x1000, SCRATCH["transposed_b"], ld)
    assert not (seen.problem.trans_a or seen.problem.trans_b)


def test_both_stored_transposed_are_copied_into_their_own_scratch_a_first():
    problem = GemmProblem(33, 65, 17, 0.5, 2.0, trans_a=True, trans_b=True)
    log, asked, seen = _launch(problem, (0x1000, 33), (0x2000, 17))
    assert [entry[0] for entry in log] == ["transpose", "transpose", "gemm"]
    assert log[0][3][0] == 0x1000 and log[1][3][0] == 0x2000
    assert set(asked) == {"transposed_a", "transposed_b"}
    assert (seen.problem.alpha, seen.problem.beta) == (0.5, 2.0)  # the rest of the problem is kept


def test_a_kernel_that_reads_b_stored_n_x_k_gets_only_a_copied():
    """hopper_tf32 reads B stored N x K itself (TF32 wgmma's K-major B): tt copies A alone and
    hands on a problem that keeps trans_b; nt copies nothing."""
    problem = GemmProblem(33, 65, 17, trans_a=True, trans_b=True)
    log, asked, seen = _launch(problem, (0x1000, 36), (0x2000, 20), copied=frozenset("a"))
    assert [entry[0] for entry in log] == ["transpose", "gemm"] and log[0][3][0] == 0x1000
    assert set(asked) == {"transposed_a"}
    assert seen.problem == GemmProblem(33, 65, 17, trans_b=True) and (seen.b.ptr, seen.b.ld) == (0x2000, 20)
    problem = GemmProblem(33, 65, 17, trans_b=True)
    log, asked, seen = _launch(problem, (0x1000, 20), (0x2000, 20), copied=frozenset("a"))
    assert log == [("gemm",)] and asked == {} and seen.problem is problem
    spec = kernels.KERNELS["hopper_tf32"]
    rows = transposing.MAX_GRID_Y * transposing.TILE + 1  # B is never copied: no grid limit on its rows
    spec.validate(GemmProblem(8, rows, 64, trans_b=True))
    with pytest.raises(UnsupportedProblem, match="A stored transposed has 2097121 rows"):
        spec.validate(GemmProblem(8, 64, rows, trans_a=True))


def test_an_empty_problem_copies_nothing():
    for problem in (GemmProblem(0, 5, 7, trans_a=True), GemmProblem(5, 7, 0, trans_b=True)):
        log, asked, seen = _launch(problem, (0x1000, 8), (0x2000, 8))
        assert log == [("gemm",)] and asked == {} and not seen.problem.trans_a and not seen.problem.trans_b


def test_a_copy_too_tall_for_the_grid_is_refused_in_one_line():
    rows = transposing.MAX_GRID_Y * transposing.TILE + 1
    with pytest.raises(UnsupportedProblem) as info:
        kernels.KERNELS["warptiled"].validate(GemmProblem(1, 64, rows, trans_a=True))
    message = str(info.value)
    assert "A stored transposed has 2097121 rows" in message and "\n" not in message
    kernels.KERNELS["warptiled"].validate(GemmProblem(1, 64, rows))  # the row-major one needs no copy


@pytest.mark.parametrize("rows, itemsize, ld", [(1, 4, 4), (4, 4, 4), (5, 4, 8), (8, 2, 8), (9, 2, 16), (0, 2, 8)])
def test_the_copy_rows_are_whole_16_byte_multiples(rows, itemsize, ld):
    assert transposing.copy_ld(rows, itemsize) == ld
