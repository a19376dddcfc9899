"""mma_sync as a linear layer on the GPU: every layout, output type and epilogue the kernels
declare, on drawn cases (odd shapes, padded and misaligned leading dimensions, drawn alpha and
beta, bias and C of D's type) and on a larger odd x @ W^T per output type and epilogue, against
the float64 reference with D poisoned and a guard band that must stay untouched (check_case;
the bound gains D's rounding and the activation's error, docs/correctness.md)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from gemm_driver import kernels
from gemm_driver.checking import check_case
from gemm_driver.problem import EPILOGUES, GemmProblem
from gemm_driver.strategies import GemmCase, gemm_cases, variants_of

pytestmark = pytest.mark.gpu

NAMES = ["mma_sync_bf16", "mma_sync_fp16", "mma_sync_tf32"]


@pytest.mark.parametrize("name", NAMES)
def test_every_declared_variant_matches_the_reference_on_drawn_cases(session, name):
    variants = variants_of(kernels.KERNELS[name])

    @settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=gemm_cases(variants=variants))
    def holds(case: GemmCase):
        verification = check_case(session, name, case)
        assert verification.ok, f"{case.describe()}: {verification.message}"

    holds()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("epilogue", EPILOGUES)
def test_x_times_w_transposed_per_output_type_and_epilogue(session, name, epilogue):
    for out in kernels.KERNELS[name].out_dtypes:
        problem = GemmProblem(777, 1000, 1001, 1.0, 0.25, trans_b=True, out_dtype=out, epilogue=epilogue)
        case = GemmCase(problem, pads=(0, 8, 0), misalign=(0, 0, 0), data_seed=len(epilogue) * 101 + len(out))
        verification = check_case(session, name, case)
        assert verification.ok, f"{case.describe()}: {verification.message}"
