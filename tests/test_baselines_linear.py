"""The baselines as linear layers: cuBLAS GemmEx with a BF16/FP16 D and transpose flags,
cuBLASLt with a 16-bit D, transposes and the bias/ReLU/GELU epilogues, torch with its own ops.

Without a GPU: the GemmEx argument tuple, the cuBLASLt descriptors read back from the
library (layouts fed to a column-major model, the D type, the epilogue and bias type), the
rules refused by name, the enum numbers against the shipped header. With a GPU (marked):
every baseline verified in each layout, output type and epilogue it declares, on odd
shapes with padding, misalignment, the guard band and NaN poison."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cublaslt import flat_rowmajor, header_text, lt_model

from gemm_driver import kernels
from gemm_driver import precision as _precision
from gemm_driver.cuda import cublas
from gemm_driver.cuda import cublaslt as lt
from gemm_driver.cuda import cublaslt_binding as binding
from gemm_driver.cuda.cublas import DataType, Operation
from gemm_driver.kernels.providers import lt_problem
from gemm_driver.problem import EPILOGUES, LAYOUTS, GemmProblem, layout_flags

TYPE_OF = {"fp32": DataType.CUDA_R_32F, "bf16": DataType.CUDA_R_16BF, "fp16": DataType.CUDA_R_16F}


# --- cuBLAS GemmEx ------------------------------------------------------------------------
@pytest.mark.parametrize("precision, out", [("bf16", "bf16"), ("fp16", "fp16"), ("bf16", "fp32"), ("fp32", "fp32")])
def test_gemm_types_store_d_in_the_output_type(precision, out):
    types = _precision.gemm_types(precision, out)
    assert types.ab_type == _precision.get(precision).cublas.ab_type and types.c_type == TYPE_OF[out]
    assert types.compute == _precision.get(precision).cublas.compute  # FP32 accumulation kept
    assert types.c_bytes == (4 if out == "fp32" else 2)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_gemm_ex_arguments_carry_the_transposes_and_the_d_type(layout):
    trans_a, trans_b = layout_flags(layout)
    types = _precision.gemm_types("bf16", "bf16")
    args = cublas.gemm_ex_arguments(3, 5, 7, 1.0, 0xA000, 9 if trans_a else 8, 0xB000, 11 if trans_b else 6, 0.0,
                                    0xC000, 6, types, trans_a, trans_b)
    op = {False: Operation.N, True: Operation.T}
    assert args[:5] == (op[trans_b], op[trans_a], 5, 3, 7)  # B first: the row-major swap
    assert (args[6], args[7], args[9], args[10]) == (0xB000, DataType.CUDA_R_16BF, 0xA000, DataType.CUDA_R_16BF)
    assert (args[13], args[14], args[15]) == (0xC000, DataType.CUDA_R_16BF, 6)


# --- cuBLASLt -----------------------------------------------------------------------------
def test_epilogue_and_attribute_numbers_match_the_header():
    text = header_text()
    for name, value in (("CUBLASLT_MATMUL_DESC_EPILOGUE", binding._DESC_EPILOGUE),
                        ("CUBLASLT_MATMUL_DESC_BIAS_POINTER", binding._DESC_BIAS_POINTER),
                        ("CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE", binding._DESC_BIAS_DATA_TYPE),
                        ("CUBLASLT_EPILOGUE_DEFAULT", binding.EPILOGUES["none"]),
                        ("CUBLASLT_EPILOGUE_BIAS", binding.EPILOGUES["bias"])):
        assert re.search(rf"\b{name}\s*=\s*{value}\s*,", text), name
    for name, parts, value in (("RELU_BIAS", "RELU", binding.EPILOGUES["bias_relu"]),
                               ("GELU_BIAS", "GELU", binding.EPILOGUES["bias_gelu"])):
        assert re.search(rf"CUBLASLT_EPILOGUE_{name}\s*=\s*\(CUBLASLT_EPILOGUE_{parts} \| CUBLASLT_EPILOGUE_BIAS\)",
                         text), name
        bit = int(re.search(rf"\bCUBLASLT_EPILOGUE_{parts}\s*=\s*(\d+)\s*,", text).group(1))
        assert value == bit | 4


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.integers(1, 9), st.tuples(*[st.integers(0, 3)] * 3),
       st.sampled_from(LAYOUTS), st.sampled_from(["fp32", "bf16", "fp16"]))
def test_descriptors_of_every_layout_compute_the_row_major_product(m, n, k, pads, layout, precision):
    trans_a, trans_b = layout_flags(layout)
    rng = np.random.default_rng(m * 1000 + n * 100 + k)
    lda, ldb, ldc = (m if trans_a else k) + pads[0], (k if trans_b else n) + pads[1], n + pads[2]
    a, am = flat_rowmajor(rng, k, m, lda) if trans_a else flat_rowmajor(rng, m, k, lda)
    b, bm = flat_rowmajor(rng, n, k, ldb) if trans_b else flat_rowmajor(rng, k, n, ldb)
    am, bm = (am.T if trans_a else am), (bm.T if trans_b else bm)
    problem = lt.LtProblem(m, n, k, precision, lda, ldb, ldc, b_k_major=trans_b, trans_a=trans_a)
    with lt.MatmulDescriptors(problem) as d:
        d_colmajor = lt_model(d, {"a": a, "b": b})
        assert d.second.operand.op == (Operation.T if trans_a else Operation.N)
    np.testing.assert_allclose(d_colmajor.T, am @ bm, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("precision, out", [("bf16", "bf16"), ("fp16", "fp16"), ("bf16", "fp32"), ("tf32", "fp32")])
@pytest.mark.parametrize("epilogue", EPILOGUES)
def test_descriptors_set_the_d_type_the_epilogue_and_the_bias_type(precision, out, epilogue):
    problem = lt.LtProblem.packed(64, 48, 32, precision)
    problem = lt.LtProblem(64, 48, 32, precision, problem.lda, problem.ldb, problem.ldc, out_dtype=out,
                           epilogue=epilogue)
    with lt.MatmulDescriptors(problem) as d:
        assert d.c.attribute("type") == TYPE_OF[out]
        assert d.desc.get(binding._DESC_EPILOGUE) == binding.EPILOGUES[epilogue]
        if epilogue != "none":
            assert d.desc.get(binding._DESC_BIAS_DATA_TYPE) == TYPE_OF[out]


@pytest.mark.parametrize("fields, rule", [
    ({"precision": "fp32", "out_dtype": "bf16"}, "an FP32 D, for bf16/fp16 inputs one of their own type"),
    ({"precision": "bf16", "out_dtype": "fp16"}, "out_dtype 'fp16'"),
    ({"precision": "fp8", "b_k_major": True, "epilogue": "bias"}, "without FP8"),
])
def test_output_types_and_epilogues_cublaslt_lacks_are_refused_by_name(fields, rule):
    base = {"m": 32, "n": 32, "k": 32, "lda": 32, "ldb": 32, "ldc": 32, **fields}
    with pytest.raises(ValueError, match=re.escape(rule)):
        lt.validate(lt.LtProblem(**base))


def test_bias_alignment_is_checked_before_any_gpu_call():
    with pytest.raises(ValueError, match="bias_alignment must be a power of two"):
        lt.LtMatmul(None, lt.LtProblem.packed(16, 16, 16, "bf16"), bias_alignment=6)


def test_the_provider_maps_the_problem_onto_cublaslt():
    p = GemmProblem(5, 7, 9, trans_a=True, trans_b=True, out_dtype="bf16", epilogue="bias_gelu")
    operand = lambda ld: type("M", (), {"ld": ld})()  # noqa: E731
    q = lt_problem(kernels.get("cublaslt_bf16"), p, operand(8), operand(16), operand(7))
    assert q == lt.LtProblem(5, 7, 9, "bf16", 8, 16, 7, b_k_major=True, trans_a=True, out_dtype="bf16",
                             epilogue="bias_gelu")
    lt.validate(q)


# --- declarations -------------------------------------------------------------------------
def test_baselines_declare_what_their_library_computes():
    for name in ("cublas_bf16", "cublaslt_bf16", "torch_bf16"):
        target = kernels.get(name)
        assert target.layouts == LAYOUTS and target.out_dtypes == ("fp32", "bf16")
    assert kernels.get("cublas_bf16").epilogues == ("none",)  # cublasGemmEx has no epilogue
    assert kernels.get("cublaslt_fp16").epilogues == EPILOGUES and kernels.get("torch_fp16").epilogues == EPILOGUES
    assert kernels.get("cublas").out_dtypes == ("fp32",) and kernels.get("cublas_batched").layouts == ("nn",)


# --- on the GPU ---------------------------------------------------------------------------
LINEAR_BASELINES = ["cublas_bf16", "cublaslt_bf16", "torch_bf16", "cublas_fp16", "cublaslt_fp16", "torch_fp16"]
VARIANTS = [(layout, out, epilogue) for layout in LAYOUTS for out in ("fp32", "own") for epilogue in EPILOGUES]


@pytest.mark.gpu
@pytest.mark.parametrize("name", LINEAR_BASELINES)
@pytest.mark.parametrize("layout, out, epilogue", VARIANTS)
def test_each_baseline_is_verified_in_what_it_declares(session, name, layout, out, epilogue):
    """An odd shape with padded operands (16-byte rows); cases a baseline does not declare
    are refused by name (skipped), never run."""
    from gemm_driver.case import PreparedCase, run_case

    target = kernels.get(name)
    out = target.precision if out == "own" else out
    trans_a, trans_b = layout_flags(layout)
    problem = GemmProblem(131, 67, 259, 1.0, 0.0, trans_a=trans_a, trans_b=trans_b, out_dtype=out, epilogue=epilogue)
    rows = {"a": 131 if trans_a else 259, "b": 259 if trans_b else 67}
    padded = lambda length: -(-length // 8) * 8 + 8  # noqa: E731 - 16-byte rows: cuBLASLt has algorithms
    lds = (padded(rows["a"]), padded(rows["b"]), padded(67))
    with PreparedCase.random(problem, target.precision, 11, guard=2, lds=lds) as case:
        outcome = run_case(session, name, case)
    declared = layout in target.layouts and out in target.out_dtypes and epilogue in target.epilogues
    if not declared:
        assert outcome.status == "skipped" and "does not take" in outcome.detail
    elif outcome.status == "skipped":
        if target.unavailable() is not None or "heuristic offers no algorithm" in outcome.detail:
            pytest.skip(outcome.detail)
        pytest.fail(outcome.detail)
    else:
        assert outcome.ok, outcome.message


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["cublaslt_bf16", "torch_bf16", "cublas_bf16"])
@pytest.mark.parametrize("beta", [0.0, -0.5])
def test_linear_layer_at_aligned_sizes_with_c(session, name, beta):
    """x @ W^T + bias then GELU, BF16 D, with and without beta*C, at 16-byte aligned sizes."""
    from gemm_driver.case import PreparedCase, run_case

    epilogue = "bias_gelu" if "bias_gelu" in kernels.get(name).epilogues else "none"
    problem = GemmProblem(256, 384, 512, 1.0, beta, trans_b=True, out_dtype="bf16", epilogue=epilogue)
    with PreparedCase.random(problem, "bf16", 3, guard=1) as case:
        outcome = run_case(session, name, case)
    if outcome.status == "skipped" and kernels.get(name).unavailable() is not None:
        pytest.skip(outcome.detail)
    assert outcome.ok, outcome.message


def test_ctypes_scalars_are_host_floats():
    al, be = cublas.scalars(2.0, -0.0)
    assert isinstance(al, ctypes.c_float) and be.value == 0.0
