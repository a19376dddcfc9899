"""GPU tests of the tensor-core family (kernels/tensor/): drawn cases, fixed paths, TF32 rounding.

- Drawn cases per kernel: Hypothesis draws M, N, K biased to 1, primes and multiples of
  8/16/32/64 plus or minus one, alpha and beta including 0, padded leading dimensions and
  misaligned pointers (so the packing pre-pass and the staged WMMA fragments are reached),
  checked by ``check_case`` against the float64 reference with the precision's bound,
  output NaN-poisoned and the guard band around C checked.
- Fixed cases per configuration (each spec's configurations, and the BF16 and TF32 tune
  spaces): interior blocks on the cp.async path, partial k tiles, edge blocks, deep odd K
  (4099) with small M and N through the packing path, misaligned and padded operands,
  more tile rows than one block group.
- TF32: inputs whose round-to-nearest and truncation to TF32 differ, with every product
  and partial sum exact in FP32, so the output must equal the product of the RNA-rounded
  inputs bit for bit. A build that skips the rounding passes the tf32 bound but not this.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemm_driver import kernels
from gemm_driver.case import PreparedCase
from gemm_driver.checking import check_case
from gemm_driver.kernels import tensor
from gemm_driver.problem import GemmProblem
from gemm_driver.strategies import GemmCase, dims, scalars

pytestmark = pytest.mark.gpu

TENSOR = [spec.name for spec in tensor.SPECS]
EXAMPLES = 30
EDGES = sorted({m * j + d for m in (8, 16, 32, 64) for j in (1, 2, 3, 4) for d in (-1, 0, 1)})


@st.composite
def tensor_cases(draw, max_dim: int = 300) -> GemmCase:
    """gemm_cases with more tile multiples +-1, and pads / misalignments of 8 elements (16
    bytes for BF16/FP16: aligned again), beside the odd ones that force packing."""
    dim = st.one_of(dims(max_dim), st.sampled_from([e for e in EDGES if e <= max_dim]))
    problem = GemmProblem(draw(dim), draw(dim), draw(dim), float(draw(scalars())), float(draw(scalars())))
    pads = tuple(draw(st.sampled_from((0, 0, 1, 3, 8))) for _ in range(3))
    misalign = tuple(draw(st.sampled_from((0, 0, 1, 2, 8))) for _ in range(3))
    return GemmCase(problem, pads, misalign, draw(st.integers(0, 2**32 - 1)))


@pytest.mark.parametrize("name", TENSOR)
def test_drawn_cases(session, name):
    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=tensor_cases())
    def holds(case: GemmCase):
        outcome = check_case(session, name, case)
        assert outcome.ok, f"{name} {case.describe()}: {outcome.message}"

    holds()


# (m, n, k, ld pads, misalignments): what each one reaches, with a 128 x 256 (or 256 x 128) tile.
CASES = [
    (256, 512, 256, (0, 0, 0), (0, 0, 0)),  # aligned, every block inside: the unbounded k loop
    (300, 520, 100, (0, 0, 0), (0, 0, 0)),  # a partial k tile first, edge blocks, aligned B (N % 8 == 0)
    (129, 257, 33, (0, 0, 0), (0, 0, 0)),  # one past the tile edges; odd lda and ldb: both packed
    (67, 131, 4099, (0, 0, 0), (0, 0, 0)),  # deep odd K, small M and N: the packing path
    (64, 64, 4099, (5, 3, 1), (1, 3, 2)),  # misaligned and padded: packed, C written in singles
    (255, 256, 64, (8, 8, 2), (8, 8, 0)),  # padded but still 16-byte rows: no packing
    (2081, 520, 48, (0, 0, 0), (0, 0, 0)),  # more tile rows than GROUP_M: the last group is short
    (1, 300, 7, (0, 0, 0), (0, 0, 0)),
    (300, 1, 7, (0, 1, 0), (0, 0, 1)),
    (1, 1, 1, (0, 0, 0), (0, 0, 0)),
]
SCALARS = [(1.0, 0.0), (-1.25, 0.5), (0.0, -2.0)]


def _configurations():
    """Every configuration the specs name, then the BF16 and TF32 tune spaces' other entries."""
    seen = set()
    swept = [(kernels.KERNELS[name], t) for name in ("mma_sync_tuned_bf16", "mma_sync_tuned_tf32")
             for t in tensor.TUNE_SPACES[name]]
    for spec, tunables in [(s, t) for s in tensor.SPECS for t in s.configurations()] + swept:
        key = spec.name_expression(spec.resolve(tunables))
        if key not in seen:
            seen.add(key)
            yield spec.name, spec.resolve(tunables)


CONFIGS = list(_configurations())


@pytest.mark.parametrize("name, tunables", CONFIGS,
                         ids=[f"{n}-" + "-".join(f"{k}{v}" for k, v in t.items()) for n, t in CONFIGS])
def test_fixed_paths(session, name, tunables):
    spec = kernels.KERNELS[name]
    for index, (m, n, k, pads, misalign) in enumerate(CASES):
        for alpha, beta in (SCALARS[index % 3], SCALARS[(index + 1) % 3]):
            # the problem a linear-layer build computes (its output type and epilogue), else the FP32 GEMM
            problem = replace(spec.probe(m, n, k, tunables), alpha=alpha, beta=beta)
            case = GemmCase(problem, pads, misalign, data_seed=index)
            outcome = check_case(session, name, case, tunables)
            assert outcome.ok, f"{name} {tunables} {case.describe()}: {outcome.message}"


@pytest.mark.parametrize("name", [n for n in TENSOR if "_tuned_" in n])
def test_tuned_kernels_say_which_configuration_ran_and_why(session, name):
    outcome = check_case(session, name, GemmCase(GemmProblem(1024, 1024, 1024), (0, 0, 0), (0, 0, 0), 7))
    assert outcome.ok, outcome.message
    note = outcome.launch["note"]  # the vote's reason, the nearest winner's, or why there is no table
    assert re.search(r": predicted \d+\.\d{3}x the fastest by the \d+ nearest tuning shapes \(", note) or \
        note.startswith(("tuned at ", "no tuned table for this GPU")), outcome.launch
    kernels.KERNELS[name].validate(GemmProblem(1024, 1024, 1024), outcome.tunables)


# --- TF32 rounding --------------------------------------------------------------------
def rna_tf32(x: np.ndarray) -> np.ndarray:
    """FP32 -> TF32 as cvt.rna.tf32.f32 does: to nearest, ties away from zero (on the magnitude)."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x1000) & ~np.uint64(0x1FFF)).astype(np.uint32).view(np.float32)


def truncate_tf32(x: np.ndarray) -> np.ndarray:
    """FP32 -> TF32 by dropping the low 13 mantissa bits: what the tensor cores make of raw FP32."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    return (bits & np.uint32(0xFFFFE000)).view(np.float32)


def tf32_probe(problem: GemmProblem, which: str, rng: np.random.Generator):
    """(A, B, (A, B) as RNA-rounded to TF32, (A, B) as truncated to TF32) for ``problem``.

    The probed operand (``which``: 'a' or 'b') holds +-(1 + q 2^-10 + r 2^-12) with r in
    {1, 3}: never a tie, RNA rounds r = 1 down and r = 3 up, truncation both down. The other
    holds +-1, exact in TF32. Products are multiples of 2^-12 below 2 and K <= 256 keeps
    every partial sum below 2^9: all exact in FP32, in any order of summation, so a TF32
    GEMM's output is exactly the float64 product of the rounded operands."""
    assert problem.k <= 256
    shapes = {"a": (problem.m, problem.k), "b": (problem.k, problem.n)}
    sign = lambda shape: rng.choice(np.array([-1.0, 1.0], np.float32), shape)
    probe_shape = shapes[which]
    values = 1 + rng.integers(0, 1024, probe_shape) * 2.0**-10 + rng.choice([1, 3], probe_shape) * 2.0**-12
    probe = (sign(probe_shape) * values).astype(np.float32)
    other = sign(shapes["b" if which == "a" else "a"])
    a, b = (probe, other) if which == "a" else (other, probe)
    pair = lambda f: (f(a), b) if which == "a" else (a, f(b))
    return a, b, pair(rna_tf32), pair(truncate_tf32)


def _product(problem, pair):
    a, b = pair
    return (problem.alpha * (a.astype(np.float64) @ b.astype(np.float64))).astype(np.float32)


def _run_tf32(session, name, problem, a, b, tunables, lds):
    with PreparedCase(problem, "tf32", a, b, None, guard=2, lds=lds) as case:
        out, guard = case.run(session.launcher(name, problem, *case.device(), tunables))
        return out, guard, case.check(out, guard)


TF32_PATHS = [
    ("mma_sync_tf32", {}, (None, None, None)),  # cp.async, rounded in shared memory when a tile lands
    ("mma_sync_tf32", {}, (201, 93, None)),  # odd leading dimensions: packed first, then the same
    ("mma_sync_tf32", {"ASYNC": 0}, (201, 93, None)),  # through registers, rounded before the store
    ("mma_sync_tuned_tf32", {}, (None, None, None)),
]


@pytest.mark.parametrize("which", ["a", "b"])
@pytest.mark.parametrize("name, tunables, lds", TF32_PATHS)
def test_tf32_rounds_to_nearest_exactly(session, which, name, tunables, lds):
    problem = GemmProblem(70, 90, 200, -2.0, 0.0)
    a, b, rounded, truncated = tf32_probe(problem, which, np.random.default_rng(11))
    out, guard, verification = _run_tf32(session, name, problem, a, b, tunables, lds)
    assert guard == 0 and verification.ok, verification.message
    assert np.array_equal(out, _product(problem, rounded)), "not the product of RNA-rounded TF32 inputs"
    assert not np.array_equal(out, _product(problem, truncated))


def test_a_build_that_skips_the_rounding_passes_the_bound_but_not_the_exact_check(session, monkeypatch):
    spec = kernels.KERNELS["mma_sync_tf32"]
    unrounded = replace(spec, name="mma_sync_tf32_unrounded", options=(*spec.options, "-DTC_TF32_SKIP_ROUNDING"))
    monkeypatch.setitem(kernels.ALL, unrounded.name, unrounded)
    problem = GemmProblem(70, 90, 200, -2.0, 0.0)
    a, b, rounded, truncated = tf32_probe(problem, "a", np.random.default_rng(11))
    out, guard, verification = _run_tf32(session, unrounded.name, problem, a, b, {}, (None, None, None))
    assert verification.ok, "the tf32 bound (2^-10 per factor) admits truncated inputs"
    assert not np.array_equal(out, _product(problem, rounded))
    assert np.array_equal(out, _product(problem, truncated)), "raw FP32 bits: the low 13 are ignored"
