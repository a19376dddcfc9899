"""gemm() and plan() on torch float8_e4m3fn and float8_e5m2 tensors with their scales (GPU and torch).

Each case draws FP8 operands and amax scales on the host (operands.random_scaled_operands),
puts the codes on the GPU as float8 tensors of their formats (A M x K, W N x K, passed as W.t()) and
the scales as float32 tensors in each mode's layout (fp8_scales.py: one scale each; M and N
vectors; A's block scales K-block-major as a transposed view, B's row-major), lets gemm()
or a plan run them in place, and checks the BF16 result against the float64 reference of
the dequantized values within the FP8 bound (verify.check), NaN poison in out beforehand.
"""

from __future__ import annotations

import numpy as np
import pytest

import gemm_driver
from gemm_driver import fp8
from gemm_driver.operands import random_scaled_operands
from gemm_driver.problem import GemmProblem
from gemm_driver.verify import check, reference

pytest.importorskip("ml_dtypes")
pytestmark = pytest.mark.gpu
SCALINGS = ("tensor", "row", "block")


def on_gpu(torch, problem, seed):
    """(host operands, A's codes, W's codes, (A's scales, B's scales)) as torch tensors."""
    ops = random_scaled_operands(problem, np.random.default_rng(seed))
    dtypes = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    codes = [torch.from_numpy(c).cuda().view(dtypes[fmt]) for c, fmt in zip((ops.codes_a, ops.codes_b),
                                                                            problem.operand_formats)]
    sa = torch.from_numpy(fp8.device_scales(problem.scaling, 0, ops.scales_a)).cuda()
    sb = torch.from_numpy(fp8.device_scales(problem.scaling, 1, ops.scales_b)).cuda()
    if problem.scaling == "block":
        sa = sa.t()  # stored (K blocks) x M: the M x K-blocks view, K-block-major
    return ops, codes[0], codes[1], (sa, sb)


def checked(torch, problem, ops, out):
    torch.cuda.synchronize()
    got = out.float().cpu().numpy()
    verdict = check(problem, got, reference(problem, ops.a, ops.b, None), precision="fp8")
    assert verdict.ok, verdict.message


def hopper(torch):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("hopper_fp8 runs on sm_90 only")
    return "hopper_fp8"


@pytest.mark.parametrize("scaling", SCALINGS)
@pytest.mark.parametrize("kernel, shape", [(None, (256, 384, 512)), ("hopper_fp8", (256, 384, 512)),
                                           ("hopper_fp8", (129, 260, 1000)),
                                           ("hopper_fp8", (13, 520, 1000))])  # the decode tiles (M <= 16)
def test_gemm_on_float8_tensors(torch, scaling, kernel, shape):
    if kernel is not None:
        hopper(torch)
    problem = GemmProblem(*shape, trans_b=True, out_dtype="bf16", scaling=scaling)
    ops, x8, w8, scales = on_gpu(torch, problem, [*shape, len(scaling)])
    out = torch.full((shape[0], shape[1]), float("nan"), dtype=torch.bfloat16, device="cuda")
    assert gemm_driver.gemm(x8, w8.t(), scales=scales, out=out, kernel=kernel) is out  # the mode from the sizes
    checked(torch, problem, ops, out)


def test_a_plan_runs_new_data_in_the_same_buffers(torch):
    kernel = hopper(torch)
    m, n, k = 200, 384, 640
    problem = GemmProblem(m, n, k, trans_b=True, out_dtype="bf16", scaling="block")
    p = gemm_driver.plan(m, n, k, dtype=torch.float8_e4m3fn, trans_b=True, out_dtype=torch.bfloat16, scaling="block",
                         kernel=kernel)
    first, x8, w8, scales = on_gpu(torch, problem, 1)
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    p(x8, w8.t(), out, scales=scales)
    checked(torch, problem, first, out)
    second, x2, w2, (sa2, sb2) = on_gpu(torch, problem, 2)
    for mine, new in ((x8, x2), (w8, w2), (scales[0], sa2), (scales[1], sb2)):
        mine.copy_(new)
    out.fill_(float("nan"))
    p(x8, w8.t(), out, scales=scales)
    checked(torch, problem, second, out)
    assert p.launches_made == 1


def test_bias_and_gelu_fused_on_float8(torch):
    kernel = hopper(torch)
    m, n, k = 192, 256, 384
    problem = GemmProblem(m, n, k, trans_b=True, out_dtype="bf16", epilogue="bias_gelu", scaling="row")
    ops, x8, w8, scales = on_gpu(torch, problem, 3)
    bias = torch.randn(n, device="cuda").bfloat16()
    out = gemm_driver.gemm(x8, w8.t(), scales=scales, bias=bias, activation="gelu", out_dtype=torch.bfloat16,
                           kernel=kernel)
    torch.cuda.synchronize()
    ref = reference(problem, ops.a, ops.b, None, bias.float().cpu().numpy())
    verdict = check(problem, out.float().cpu().numpy(), ref, precision="fp8")
    assert verdict.ok, verdict.message


@pytest.mark.parametrize("fp8_types, scaling", [("e5m2_e4m3", "tensor"), ("e4m3_e5m2", "row"), ("e5m2", "block")])
@pytest.mark.parametrize("kernel", [None, "hopper_fp8"])
def test_gemm_takes_each_operand_in_its_own_format(torch, fp8_types, scaling, kernel):
    if kernel is not None:
        hopper(torch)
    elif fp8_types == "e5m2":  # no baseline multiplies two e5m2 operands: a clear refusal
        problem = GemmProblem(256, 384, 512, trans_b=True, out_dtype="bf16", scaling=scaling, fp8_types=fp8_types)
        _, x8, w8, scales = on_gpu(torch, problem, 3)
        with pytest.raises(Exception, match="no baseline here computes .* on FP8 formats e5m2; name a kernel"):
            gemm_driver.gemm(x8, w8.t(), scales=scales, out_dtype=torch.bfloat16)
        return
    problem = GemmProblem(256, 384, 512, trans_b=True, out_dtype="bf16", scaling=scaling, fp8_types=fp8_types)
    ops, x8, w8, scales = on_gpu(torch, problem, 3)
    out = torch.full((256, 384), float("nan"), dtype=torch.bfloat16, device="cuda")
    assert gemm_driver.gemm(x8, w8.t(), scales=scales, out=out, kernel=kernel) is out
    checked(torch, problem, ops, out)
    p = gemm_driver.plan(256, 384, 512, dtype=(x8.dtype, w8.dtype), trans_b=True, out_dtype=torch.bfloat16,
                         scaling=scaling, kernel=kernel)
    assert p.problem.fp8_types == fp8_types
    out.fill_(float("nan"))
    p(x8, w8.t(), out, scales=scales)
    checked(torch, problem, ops, out)
    other = torch.float8_e4m3fn if x8.dtype == torch.float8_e5m2 else torch.float8_e5m2
    with pytest.raises(TypeError, match=f"^A has dtype {str(other)[6:]}; this call takes {str(x8.dtype)[6:]}$"):
        p(x8.view(other), w8.t(), out, scales=scales)  # a plan's formats are fixed: codes of another format refused
