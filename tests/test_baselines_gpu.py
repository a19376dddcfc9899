"""Every cuBLAS baseline on the GPU: each precision verified on drawn cases (odd shapes,
padded leading dimensions, misaligned pointers, guard band, NaN-poisoned C) against its
own bound; the strided-batched baseline on drawn batches; a sweep over all precisions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemm_driver import precision
from gemm_driver.bench import roofline, runner
from gemm_driver.bench.timing import Budget
from gemm_driver.case import PreparedCase
from gemm_driver.case import run_case as run_prepared
from gemm_driver.checking import check_case
from gemm_driver.kernels import precision_of
from gemm_driver.kernels.providers import cupy_unavailable
from gemm_driver.operands import random_operands, upload_operands
from gemm_driver.problem import GemmProblem
from gemm_driver.strategies import GemmCase, gemm_cases
from gemm_driver.verify import reference

pytestmark = pytest.mark.gpu

BASELINES = [precision.get(name).baseline for name in precision.ALL_NAMES]  # fp8: tests/test_fp8_gpu.py
LT_BASELINES = [lt for name in precision.ALL_NAMES for lt in precision.get(name).other_baselines]
DRAWN = settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def run_case(session, kernel: str, case: GemmCase, dtype: str, guard: int = 2):
    p = case.problem
    lds = (p.k + case.pads[0], p.n + case.pads[1], p.n + case.pads[2])
    with PreparedCase.random(p, dtype, case.data_seed, guard=guard, lds=lds, misalign=case.misalign) as prepared:
        launch = session.launcher(kernel, p, *prepared.device())
        return prepared.check(*prepared.run(launch))


@pytest.mark.parametrize("name", BASELINES)
def test_each_precision_baseline_passes_drawn_cases(session, name):
    dtype = precision_of(name)

    @DRAWN
    @given(case=gemm_cases(300))
    def holds(case):
        result = run_case(session, name, case, dtype)
        assert result.ok, f"{case.describe()}: {result.message}"

    holds()


@pytest.mark.parametrize("name", BASELINES)
@pytest.mark.parametrize("shape", [(1, 1, 1), (4093, 67, 4099), (127, 4091, 257), (16, 16, 8191)])
def test_each_precision_baseline_on_odd_and_large_shapes(session, name, shape):
    dtype = precision_of(name)
    case = GemmCase(GemmProblem(*shape, 1.0, 0.5), (1, 3, 0), (1, 3, 2), 7)
    result = run_case(session, name, case, dtype, guard=1)
    assert result.ok, result.message


@pytest.mark.parametrize("name", LT_BASELINES)
def test_cublaslt_baselines_are_right_or_refuse_the_layout(session, name):
    """cuBLASLt (its algorithm measured per case) passes drawn cases, or, where its heuristic
    offers no algorithm for the layout (C rows not 16-byte aligned), says so: never a wrong answer.

    K >= 32 only: on the H100 (cuBLASLt 13.1) some of the heuristic's candidates for K below
    that read A past column K (into the leading-dimension padding or the next row) and
    multiply it by zero, so the NaN this harness keeps there comes out as NaN (M=83 N=83 K=1,
    K=17). With finite data around the matrix the result is right; the bench's shapes have
    large K."""
    dtype, ran = precision_of(name), []

    @DRAWN
    @given(case=gemm_cases(300).filter(lambda c: c.problem.k >= 32))
    def holds(case):
        try:
            result = run_case(session, name, case, dtype)
        except ValueError as exc:
            assert "offers no algorithm" in str(exc), str(exc)
            return
        ran.append(case)
        assert result.ok, f"{case.describe()}: {result.message}"

    holds()
    assert len(ran) >= 5, f"only {len(ran)} drawn cases had a cuBLASLt algorithm"


@pytest.mark.parametrize("name", LT_BASELINES)
def test_cublaslt_records_its_measured_algorithm(session, name):
    p = GemmProblem(512, 256, 384, 1.0, 0.5)
    with PreparedCase.random(p, precision_of(name), 3) as prepared:
        launch = session.launcher(name, p, *prepared.device())
        assert prepared.check(*prepared.run(launch)).ok
    algorithm = launch.record()["algorithm"]
    assert algorithm["library"] == "cublasLt" and algorithm["candidates"] >= 1
    assert algorithm["selection_ms"] is not None and algorithm["selection_ms"] > 0


@st.composite
def batched_cases(draw):
    case = draw(gemm_cases(96))
    p = case.problem
    batched = GemmProblem(p.m, p.n, p.k, p.alpha, p.beta, draw(st.sampled_from((1, 2, 3, 7, 16))))
    return GemmCase(batched, case.pads, case.misalign, case.data_seed)


def test_batched_baseline_passes_drawn_batches(session):
    @DRAWN
    @given(case=batched_cases())
    def holds(case):
        result = run_case(session, "cublas_batched", case, "fp32")
        assert result.ok, f"{case.describe()} batch={case.problem.batch}: {result.message}"

    holds()


@pytest.mark.parametrize("kernel, batch", [("cublas_batched", 2), ("cublas", 1), ("cublas_bf16", 1),
                                           ("cublaslt_bf16", 1)])
def test_negative_zero_beta_does_not_read_c(session, kernel, batch):
    """beta = -0.0 is zero to BLAS: C (NaN-poisoned here) must not be read. Drawn on the H100:
    cublas_batched M=2 N=2 K=1 batch=2 beta=-0.0 gave 8 NaN until cublas.scalars passed +0.0."""
    case = GemmCase(GemmProblem(2, 2, 1, 1.0, -0.0, batch), (0, 0, 0), (0, 0, 0), 0)
    result = run_case(session, kernel, case, precision_of(kernel))
    assert result.ok, result.message


def test_batched_baseline_is_not_a_single_gemm(session):
    """The stride matters: a result computed as if every matrix were the first one fails."""
    p = GemmProblem(33, 17, 9, 1.0, 0.0, 4)
    a, b, _ = random_operands(p, np.random.default_rng(3))
    wrong = reference(GemmProblem(33, 17, 9), a[:33], b[:9], None)
    with PreparedCase(p, "fp32", a, b, None, guard=1) as prepared:
        launch = prepared.run(session.launcher("cublas_batched", p, *prepared.device()))
        out, guard = launch
        right = prepared.check(out, guard)
    assert right.ok, right.message
    assert not np.allclose(out[33:66], wrong.value, atol=1e-3)


def test_tf32_baseline_really_rounds_to_tf32(session):
    """cuBLAS TF32 must multiply TF32-rounded inputs: its result sits far closer to a model
    GEMM on TF32-rounded inputs than to the exact FP32 product (input rounding ~2^-11 vs
    FP32 accumulation ~2^-24). Which model is closer tells how it rounds (to nearest, or
    truncation as raw mma does); both are inside the TF32 bound. (At K = 1 cuBLAS picks a
    non-tensor kernel and the result is plain FP32, so the shape is a real GEMM.)"""
    p = GemmProblem(512, 512, 256)
    a, b, _ = random_operands(p, np.random.default_rng(11))
    ops = upload_operands(p, a, b, None)
    try:
        session.launcher("cublas_tf32", p, *ops)()
        session.synchronize()
        out, _ = ops[2].read()
    finally:
        for m in ops:
            m.close()
    trunc = lambda x: (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)  # noqa: E731
    magnitude = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    distance = {name: float(np.max(np.abs(out - fa.astype(np.float64) @ fb.astype(np.float64)) / magnitude))
                for name, (fa, fb) in {"fp32 (no TF32)": (a, b),
                                       "round to nearest": (precision.tf32_round(a), precision.tf32_round(b)),
                                       "truncation": (trunc(a), trunc(b))}.items()}
    print(f"cuBLAS TF32 on this GPU, max |out - model| / (|A||B|): {distance}")
    closest = min(distance, key=distance.get)
    assert closest != "fp32 (no TF32)" and distance[closest] < 0.01 * distance["fp32 (no TF32)"], distance


def test_sweep_over_every_precision(session):
    names = ["cublas", "naive", "cublas_batched", "numpy", "cublas_tf32", "cublas_bf16", "cublas_fp16"]
    steps = runner.sweep_steps(names, [(200, 136, 72), (64, 48, 40, 3)])
    results = runner.run_sweep(session, steps, seed=1, budget=Budget(seconds=0.05))
    by = {(r.kernel, r.problem.batch): r for r in results}
    assert all(r.status == "ok" for r in results), [(r.kernel, r.detail) for r in results if r.status != "ok"]
    # One-GEMM kernels are not run on the batched shape (sweep_steps records why); cublas_batched
    # runs the batched shape only, NumPy both.
    assert len(by) == 6 + 2 and {k for k, batch in by if batch > 1} == {"cublas_batched", "numpy"}
    not_run = {name for step in steps for name, _ in step.not_run}
    assert not_run == {"cublas", "naive", "cublas_tf32", "cublas_bf16", "cublas_fp16"}
    assert by["cublas_bf16", 1].as_dict()["dtype"] == "bf16"
    assert by["cublas_bf16", 1].as_dict()["launch"] == {"kernel": "cublas_bf16", "tunables": {}, "note": "", "algorithm": {}}
    assert by["cublas_bf16", 1].pct_of_baseline == 100.0 and by["cublas_batched", 3].pct_of_baseline == 100.0
    # a ratio against cuBLAS, not a speed claim: under pytest -n 4 other workers' kernels share the
    # GPU and may land inside either kernel's timed batches. This test failed once in three runs of
    # the suite with four workers (which assertion was not captured) and passed four of four alone;
    # "naive is slower than cuBLAS" was the one assertion that depends on timing.
    assert by["naive", 1].pct_of_baseline > 0 and by["naive", 1].baseline == "cublas"
    recs = roofline.annotate_records([r.as_dict() for r in results], session.device.name)
    known = roofline.lookup(session.device.name) is not None
    for rec in recs:
        if rec["status"] == "ok" and rec["kernel"] != "numpy":
            assert (rec["pct_of_peak"] is not None) == known, rec


def test_rounds_verify_and_time_every_kernel_again_and_pool_the_samples(session):
    steps = runner.sweep_steps(["cublas", "naive"], [(96, 80, 72)])
    seen = []
    results = runner.run_sweep(session, steps, seed=2, budget=Budget(seconds=0.02), rounds=2,
                               on_case=lambda r: seen.append(r.kernel))
    assert seen == ["cublas", "naive", "naive", "cublas"]  # the second round in reverse
    assert [r.kernel for r in results] == ["cublas", "naive"]
    for r in results:
        assert r.status == "ok" and r.verification["ok"] and len(r.round_medians_ms) == 2, r
        assert min(r.round_medians_ms) <= r.timing.median_ms <= max(r.round_medians_ms)
    assert results[0].pct_of_baseline == 100.0 and results[1].as_dict()["round_medians_ms"]


@pytest.mark.skipif(cupy_unavailable() is not None, reason="CuPy is not installed here")
def test_cupy_baseline_passes_verification_on_drawn_cases(session):
    @settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=gemm_cases())
    def holds(case):
        verification = check_case(session, "cupy", case)
        assert verification.ok, f"{case.describe()}: {verification.message}"

    holds()


@pytest.mark.parametrize("out_dtype", ["bf16", "fp16"])
def test_cublaslt_rounds_a_16_bit_d_once_where_it_splits_k(session, out_dtype):
    """The heuristic's split-K algorithms that add the partials in D's type (reduction scheme
    OUTPUT_TYPE) are not asked for: on the H100 the autotuned pick at 1031x1029x257 with BF16 D
    was one (3 slices), 11.6x past the bound. With reductions in the compute type only, cuBLASLt's
    D passes the bound every kernel is held to. (The inputs are of D's type.)"""
    problem = GemmProblem(1031, 1029, 257, out_dtype=out_dtype)
    with PreparedCase.random(problem, out_dtype, [7], guard=1) as case:
        outcome = run_prepared(session, f"cublaslt_{out_dtype}", case)
        assert outcome.ok, outcome.message
        assert outcome.launch["algorithm"]["reduction_scheme"] in (0, 1, 2)  # none, in place, compute type
