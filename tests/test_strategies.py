"""The Hypothesis strategies shared by the tests and ``verify``: bounds and bias."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings

from gemm_driver.strategies import PRIMES, SPECIAL_SCALARS, TILE_EDGES, GemmCase, gemm_cases, scalars

SPECIAL = {1, *TILE_EDGES, *PRIMES}


def draw_many(strategy, count=400):
    """``count`` values drawn by Hypothesis the way a test run draws them (fixed seed)."""
    seen = []

    @settings(max_examples=count, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value):
        seen.append(value)

    collect()
    assert len(seen) >= count // 2, "Hypothesis stopped early: the strategy cannot produce enough cases"
    return seen


def test_cases_respect_bounds():
    for max_dim in (1, 9, 64, 300):
        cases = draw_many(gemm_cases(max_dim), 100)
        for case in cases:
            assert isinstance(case, GemmCase)
            p = case.problem
            assert all(1 <= d <= max_dim for d in (p.m, p.n, p.k)), (max_dim, p)
            assert all(math.isfinite(s) and -4 <= s <= 4 for s in (p.alpha, p.beta))
            assert all(pad in (0, 1, 3, 4, 5) for pad in case.pads)
            assert all(0 <= mis <= 3 for mis in case.misalign)
            assert 0 <= case.data_seed < 2**32
            assert str(p.m) in case.describe() and "seed=" in case.describe()


def all_dims(cases):
    return [d for c in cases for d in (c.problem.m, c.problem.n, c.problem.k)]


def test_max_dim_one_gives_only_ones():
    assert set(all_dims(draw_many(gemm_cases(1), 60))) == {1}


def test_dims_are_biased_towards_edges():
    """1, primes and tile edges +-1 are about a tenth of 1..300, but most of the drawn M, N, K."""
    values = all_dims(draw_many(gemm_cases(300), 300))
    share = sum(v in SPECIAL for v in values) / len(values)
    uniform_share = len([v for v in SPECIAL if v <= 300]) / 300
    assert uniform_share < 0.15
    assert share > 0.4, f"only {share:.0%} of dims hit 1, primes or tile edges"
    assert values.count(1) / len(values) > 0.1
    assert len({1, 31, 33, 63, 65, 127, 129, 255, 257} & set(values)) >= 6, "the classic edges must come up"
    assert any(v not in SPECIAL for v in values), "arbitrary sizes are drawn too"
    assert max(values) > 200


def test_special_values_respect_small_bounds():
    values = all_dims(draw_many(gemm_cases(20), 200))
    assert max(values) <= 20
    assert len({1, 2, 3, 5, 7, 8, 9, 15, 16, 17} & set(values)) >= 8


def test_scalars_include_the_special_cases():
    values = draw_many(scalars(), 400)
    assert set(SPECIAL_SCALARS) <= set(values), "0, 1, -1 and friends must all come up (beta = 0 path!)"
    assert any(v not in SPECIAL_SCALARS for v in values)
    assert all(math.isfinite(v) and abs(v) <= 4 for v in values)


def test_beta_zero_and_nonzero_both_occur():
    cases = draw_many(gemm_cases(64), 300)
    betas = [c.problem.beta for c in cases]
    assert betas.count(0.0) >= 10 and sum(b != 0 for b in betas) >= 10
    assert any(c.pads != (0, 0, 0) for c in cases) and any(c.pads == (0, 0, 0) for c in cases)
    assert any(c.misalign != (0, 0, 0) for c in cases) and any(c.misalign == (0, 0, 0) for c in cases)


def test_verify_draws_one_scaling_mode_when_asked():
    """``verify --scaling row`` draws row-scaled cases only, from the kernel's other variants;
    without it every mode the kernel declares is drawn."""
    from gemm_driver.checking import drawn_variants

    every = drawn_variants("hopper_fp8")
    assert set(every.scalings) == {"tensor", "row", "block"}
    one = drawn_variants("hopper_fp8", "row")
    assert one.scalings == ("row",) and one.layouts == every.layouts and one.epilogues == every.epilogues


def test_verify_draws_every_declared_fp8_pair_or_the_one_asked():
    """An FP8 target's cases draw its formats (``fp8_types``) as they draw its scalings;
    ``verify --fp8-types e5m2_e4m3`` draws that pair only."""
    from gemm_driver.checking import drawn_variants

    every = drawn_variants("hopper_fp8")
    assert every.fp8_types == ("e4m3", "e5m2_e4m3", "e4m3_e5m2", "e5m2")
    drawn = {c.problem.fp8_types for c in draw_many(gemm_cases(64, every), 120)}
    assert drawn == set(every.fp8_types)
    one = drawn_variants("hopper_fp8", "block", "e5m2_e4m3")
    assert (one.scalings, one.fp8_types) == (("block",), ("e5m2_e4m3",))
    assert drawn_variants("cublas_bf16").fp8_types == ("e4m3",)  # unread outside FP8
