"""Layouts by a transposed copy first (kernels/transposing.py), on the GPU: every kernel that
takes them, on drawn cases of the transposed layouts (odd shapes, padded and misaligned
leading dimensions, drawn alpha and beta) and on a larger odd shape in each, against the
float64 reference with D poisoned and a guard band that must stay untouched (check_case)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from gemm_driver import kernels
from gemm_driver.checking import check_case
from gemm_driver.problem import GemmProblem, layout_flags
from gemm_driver.strategies import GemmCase, Variants, gemm_cases

pytestmark = pytest.mark.gpu

TAKING = [name for name, spec in kernels.KERNELS.items() if any(e.name == "transpose" for e in spec.extra_entries)]
TRANSPOSED = ("nt", "tn", "tt")


def _runs_here(session, name):
    if not kernels.KERNELS[name].runs_on(session.device.compute_capability):
        pytest.skip(f"{name} does not run on this GPU")


@pytest.mark.parametrize("name", TAKING)
def test_transposed_layouts_match_the_reference_on_drawn_cases(session, name):
    _runs_here(session, name)

    @settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=gemm_cases(variants=Variants(layouts=TRANSPOSED)))
    def holds(case: GemmCase):
        verification = check_case(session, name, case)
        assert verification.ok, f"{case.describe()}: {verification.message}"

    holds()


@pytest.mark.parametrize("name", TAKING)
@pytest.mark.parametrize("layout", TRANSPOSED)
def test_a_larger_odd_shape_in_each_transposed_layout(session, name, layout):
    _runs_here(session, name)
    trans_a, trans_b = layout_flags(layout)
    problem = GemmProblem(1037, 771, 1283, -0.75, 1.5, trans_a=trans_a, trans_b=trans_b)
    case = GemmCase(problem, pads=(3, 0, 1), misalign=(1, 0, 0), data_seed=len(name) * 31 + len(layout))
    verification = check_case(session, name, case)
    assert verification.ok, f"{case.describe()}: {verification.message}"
