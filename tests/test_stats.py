"""Statistics and the stopping rule, on synthetic samples (no GPU)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemm_driver.bench.stats import (Budget, median_ci, median_ci_rank, quantile, relative_noise, sample_until,
                                     summarize)


def coverage(n: int, j: int) -> float:
    """Exact probability that [x(j), x(n+1-j)] holds the median: 1 - 2 P(Binomial(n, 1/2) <= j - 1)."""
    return 1 - 2 * sum(math.comb(n, i) for i in range(j)) / 2**n


@pytest.mark.parametrize("n", [6, 7, 10, 17, 50, 100, 299, 300])
def test_median_interval_rank_is_the_tightest_with_95_percent(n):
    j = median_ci_rank(n)
    assert coverage(n, j) >= 0.95
    assert coverage(n, j + 1) < 0.95  # one rank tighter would not hold 95%


def test_too_few_samples_have_no_interval():
    assert [median_ci_rank(n) for n in range(6)] == [None] * 6
    assert median_ci([1.0, 2.0, 3.0]) is None and relative_noise([1.0, 2.0, 3.0]) is None
    assert median_ci_rank(6) == 1  # 1 - 2/64 = 96.9%


def test_known_small_intervals():
    # n = 10: P(B <= 1) = 11/1024 -> j = 2 (97.9%); j = 3 would give 1 - 2*56/1024 = 89%.
    assert median_ci_rank(10) == 2
    data = [float(x) for x in range(1, 11)]
    assert median_ci(data) == (2.0, 9.0)
    assert relative_noise(data) == pytest.approx((9 - 2) / (2 * 5.5))


@pytest.mark.parametrize("n", [301, 500, 1000, 5000])
def test_normal_approximation_beyond_300_keeps_95_percent(n):
    j = median_ci_rank(n)
    # Normal approximation of the binomial tail with continuity correction.
    z = (j - 1 + 0.5 - n / 2) / math.sqrt(n / 4)
    tail = 0.5 * math.erfc(-z / math.sqrt(2))
    assert 1 - 2 * tail >= 0.945
    assert 1 <= j < n / 2


def test_the_interval_covers_the_median_about_95_percent_of_the_time():
    rng = random.Random(1)
    trials, hits, n = 2000, 0, 25
    for _ in range(trials):
        lo, hi = median_ci(sorted(rng.expovariate(1.0) for _ in range(n)))
        hits += lo <= math.log(2) <= hi  # the median of Exp(1) is ln 2
    assert 0.93 <= hits / trials <= 0.995  # coverage(25, 8) = 95.7%


def test_outliers_move_the_interval_only_by_rank():
    quiet = [1.0 + 0.001 * i for i in range(20)]
    spiky = quiet[:-2] + [50.0, 1000.0]
    assert relative_noise(sorted(spiky)) == pytest.approx(relative_noise(sorted(quiet)), rel=0.2)


def test_summary():
    s = summarize([4.0, 1.0, 3.0, 2.0, 100.0, 2.5, 3.5])
    assert (s.n, s.median, s.min, s.max) == (7, 3.0, 1.0, 100.0)
    assert s.p10 == pytest.approx(quantile(sorted([4.0, 1.0, 3.0, 2.0, 100.0, 2.5, 3.5]), 0.1))
    assert (s.ci_low, s.ci_high) == (1.0, 100.0)  # n = 7: only the extremes give 95%
    assert s.noise == pytest.approx(99.0 / 6.0)
    few = summarize([2.0, 1.0])
    assert few.noise is None and few.ci_low is None and few.median == 1.5
    with pytest.raises(ValueError):
        summarize([])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.001, 1e3), min_size=1, max_size=60))
def test_summary_is_ordered(samples):
    s = summarize(samples)
    assert s.min <= s.p10 <= s.median <= s.p90 <= s.max
    if s.ci_low is not None:
        assert s.ci_low <= s.median <= s.ci_high and s.noise >= 0


class FakeClock:
    """Each sample costs ``step`` seconds of (fake) time."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        return self.now

    def taker(self, values):
        it = iter(values)

        def take():
            self.now += self.step
            return next(it)

        return take


def quiet(seed=0):
    rng = random.Random(seed)
    while True:
        yield 1.0 + rng.uniform(0, 1e-4)


def noisy(seed=0):
    rng = random.Random(seed)
    while True:
        yield rng.lognormvariate(0, 1.0)


def test_stops_early_on_quiet_data():
    clock = FakeClock(0.001)
    result = sample_until(clock.taker(quiet()), Budget(seconds=1.0, noise=0.005, min_samples=10), clock=clock)
    assert result.converged and result.stop_reason == "noise"
    assert len(result.samples) == 10  # converged at the first look it was allowed to
    assert result.elapsed_s == pytest.approx(0.01)


def test_runs_to_the_time_limit_on_noisy_data():
    clock = FakeClock(0.001)
    result = sample_until(clock.taker(noisy()), Budget(seconds=0.5, noise=0.005, max_samples=10_000), clock=clock)
    assert not result.converged and result.stop_reason == "max-time"
    assert len(result.samples) == pytest.approx(500, abs=1)
    assert relative_noise(sorted(result.samples)) > 0.005


def test_noise_threshold_decides_how_long():
    budget = dict(seconds=100, max_samples=100_000)
    loose = sample_until(noisy(1).__next__, Budget(noise=0.3, **budget), clock=FakeClock(0))
    tight = sample_until(noisy(1).__next__, Budget(noise=0.1, **budget), clock=FakeClock(0))
    assert loose.converged and tight.converged
    assert 2 * len(loose.samples) < len(tight.samples)  # n grows like 1 / noise**2
    assert relative_noise(sorted(tight.samples)) <= 0.1 < relative_noise(sorted(tight.samples[:-1]))


def test_max_samples_and_the_floor_past_the_limit():
    capped = sample_until(iter(noisy()).__next__, Budget(seconds=1e9, max_samples=25), clock=FakeClock(0))
    assert capped.stop_reason == "max-samples" and len(capped.samples) == 25
    clock = FakeClock(10.0)  # every sample alone exceeds the limit: still three samples
    slow = sample_until(clock.taker(quiet()), Budget(seconds=1.0), clock=clock)
    assert len(slow.samples) == 3 and slow.stop_reason == "max-time" and not slow.converged


def test_initial_samples_and_start_time_count():
    clock = FakeClock(0.001)
    clock.now = 0.9  # warm-up already took 0.9 s of a 1 s limit
    result = sample_until(clock.taker(noisy()), Budget(seconds=1.0, max_samples=10_000), initial=[1.0, 2.0],
                          started=0.0, clock=clock)
    assert result.samples[:2] == (1.0, 2.0)
    assert len(result.samples) == pytest.approx(102, abs=1) and result.elapsed_s == pytest.approx(1.0, abs=0.002)
