"""FP8 scales passed with device arrays (fp8_scales.py) and FP8 plans, without a GPU.

The layout rule per scaling mode (what torch._scaled_mm takes: one scale each; contiguous
vectors of M and N; A's block scales K-block-major, B's row-major), the row stride a launch
gets, the mode gemm() infers from the sizes, and a Plan's FP8 refusals, each one line.
"""

from __future__ import annotations

import pytest

from gemm_driver import fp8_scales
from gemm_driver.cuda.errors import UnsupportedProblem
from gemm_driver.fp8_scales import infer_scaling, scale_layout
from gemm_driver.plans import Plan
from test_plan_cpu import CudaArray, FakeSession, on_gpu  # noqa: F401  (on_gpu: the fixture)

M, N, K = 300, 260, 1000  # K blocks: 8; N blocks: 3


@pytest.mark.parametrize("scaling, which, shape, strides, ld", [
    ("tensor", 0, (1, 1), (1, 1), 1),
    ("tensor", 1, (1, 1), (7, 3), 1),
    ("row", 0, (M, 1), (1, 1), 1),  # (M,) and (M, 1) read as a column
    ("row", 1, (1, N), (N, 1), 1),  # torch._scaled_mm's (1, N)
    ("block", 0, (M, 8), (1, M), M),  # K-block-major: s.t().contiguous().t()
    ("block", 0, (M, 8), (1, 304), 304),  # padded rows of M
    ("block", 1, (3, 8), (8, 1), 8),
    ("block", 1, (3, 8), (12, 1), 12),
])
def test_the_layouts_each_mode_takes(scaling, which, shape, strides, ld):
    assert scale_layout(scaling, which, shape, strides, M, N, K) == ld


def test_one_k_block_takes_any_column_stride():
    assert scale_layout("block", 0, (M, 1), (1, 1), M, N, 100) == M
    assert scale_layout("block", 1, (3, 1), (1, 1), M, N, 100) == 1


@pytest.mark.parametrize("scaling, which, shape, strides, says", [
    ("tensor", 0, (2, 1), (1, 1), "must hold one scale for scaling 'tensor'"),
    ("row", 0, (M - 1, 1), (1, 1), "must be a contiguous vector of 300 scales (M)"),
    ("row", 1, (N, 1), (2, 1), "contiguous vector of 260 scales (N)"),
    ("block", 0, (8, M), (M, 1), "must be M x ceil(K/128) = 300x8"),
    ("block", 0, (M, 8), (8, 1), "stored K-block-major for scaling 'block' (strides (1, >= 300)"),
    ("block", 1, (3, 8), (1, 3), "must be row-major for scaling 'block' (strides (>= 8, 1))"),
    ("block", 1, (2, 8), (8, 1), "ceil(N/128) x ceil(K/128) = 3x8"),
])
def test_a_wrong_layout_is_one_line_naming_the_rule(scaling, which, shape, strides, says):
    with pytest.raises(ValueError) as exc:
        scale_layout(scaling, which, shape, strides, M, N, K)
    assert says in str(exc.value) and "\n" not in str(exc.value)
    assert f"scales[{which}] ({'AB'[which]}'s)" in str(exc.value) and f"got shape {shape}" in str(exc.value)


def test_gemm_infers_the_mode_from_the_sizes():
    one, rows, cols = CudaArray(1, 1), CudaArray(M, 1), CudaArray(1, N)
    assert infer_scaling((one, one), M, N) == "tensor"
    assert infer_scaling((rows, cols), M, N) == "row"
    assert infer_scaling((CudaArray(M, 8), CudaArray(3, 8)), M, N) == "block"


def test_scales_of_device_arrays_become_launch_operands(on_gpu):  # noqa: F811
    a = CudaArray(M, 8, strides=(4, 4 * M))  # K-block-major float32
    b = CudaArray(3, 8)
    sa, sb = fp8_scales.scale_operands("block", (a, b), M, N, K, stream=0, device=0)
    assert (sa.ptr, sa.ld, sa.itemsize) == (a.ptr, M, 4) and (sb.ptr, sb.ld) == (b.ptr, 8)
    with pytest.raises(TypeError, match=r"^scales\[1\] \(B's\) must be float32, got float16$"):
        fp8_scales.scale_operands("block", (a, CudaArray(3, 8, "<f2")), M, N, K, stream=0, device=0)
    with pytest.raises(ValueError, match=r"^scales must be a pair \(A's, B's\)"):
        fp8_scales.scale_operands("tensor", a, M, N, K, stream=0, device=0)


def test_fp8_plans_refuse_in_one_line(on_gpu):  # noqa: F811
    session = FakeSession()
    with pytest.raises(UnsupportedProblem, match=r"^FP8 takes A row-major \(M x K\), B as a transposed view"):
        Plan(session, M, N, K, dtype="fp8", kernel="hopper_fp8", scaling="row")  # B row-major: nn
    with pytest.raises(ValueError, match=r"^scaling='row' goes with FP8 \(float8_e4m3fn, float8_e5m2\) A and B; "
                                         r"these are bfloat16"):
        Plan(session, M, N, K, dtype="bfloat16", scaling="row")
    with pytest.raises(ValueError, match=r"^scaling 'rows' is not one of tensor, row, block"):
        Plan(session, M, N, K, dtype="fp8", trans_b=True, kernel="hopper_fp8", scaling="rows")
    p = Plan(session, M, N, K, dtype="fp8", trans_b=True, kernel="hopper_fp8", out_dtype="bfloat16", scaling="block")
    assert p.problem.scaling == "block" and p.problem.layout == "nt" and "scaling='block'" in repr(p)
    with pytest.raises(ValueError, match=r"^this FP8 plan \(block scaling\) needs scales=\(A's, B's\)"):
        p._scale_operands(None, 0)
    with pytest.raises(ValueError, match=r"^run_pointers takes no scales; an FP8 plan runs through"):
        p.run_pointers(1, 2, 3, 0, lda=K, ldb=K, ldc=N)
    bf16 = Plan(session, M, N, K, dtype="bfloat16")
    with pytest.raises(ValueError, match=r"^scales= goes with FP8 \(float8_e4m3fn, float8_e5m2\) A and B; this plan "
                                         r"computes"):
        bf16._scale_operands((1, 2), 0)


def test_fp8_plans_take_a_format_per_operand(on_gpu):  # noqa: F811
    session = FakeSession()
    p = Plan(session, M, N, K, dtype=("float8_e5m2", "fp8"), trans_b=True, kernel="hopper_fp8", out_dtype="bfloat16")
    assert p.problem.fp8_types == p.run_problem.fp8_types == "e5m2_e4m3"
    assert p._want["A"][3] == "float8_e5m2" and p._want["B"][3] == "float8_e4m3fn"
    both = Plan(session, M, N, K, dtype="e5m2", trans_b=True, kernel="hopper_fp8", out_dtype="bfloat16")
    assert both.problem.fp8_types == "e5m2"
    assert Plan(session, M, N, K, dtype="fp8", trans_b=True, out_dtype="bfloat16").problem.fp8_types == "e4m3"
    with pytest.raises(UnsupportedProblem, match=r"^no baseline here computes .* on FP8 formats e5m2; name a kernel"):
        Plan(session, M, N, K, dtype="e5m2", trans_b=True, out_dtype="bfloat16")


def test_fp8_default_kernels_follow_the_scaling(on_gpu):  # noqa: F811
    session = FakeSession()
    kernels = {s: Plan(session, M, N, K, dtype="fp8", trans_b=True, out_dtype="bfloat16", scaling=s).kernel
               for s in ("tensor", "row", "block")}
    assert kernels == {"tensor": "cublaslt_fp8", "row": "cublaslt_fp8_row", "block": "cublaslt_fp8_block"}
