"""Statistics of timing samples and the rule that decides when to stop sampling.

Relative noise of the median
----------------------------
For n independent samples the number lying below the true median is Binomial(n, 1/2),
whatever the distribution of the samples. So for the order statistics
x(1) <= ... <= x(n), the interval [x(j), x(n+1-j)] contains the true median with
probability 1 - 2 P(B <= j - 1), B ~ Binomial(n, 1/2). We take the largest j that keeps
this at or above 95% (exact binomial sums up to n = 300, the normal approximation beyond,
which agrees there); it needs n >= 6. The *relative noise* is the half-width of that
interval over the median: (x(n+1-j) - x(j)) / (2 median). No normality is assumed, and
outliers (a clock step, another process) widen the interval only by moving ranks, not by
their size, which is why it suits GPU timings with their long right tail.

Stopping rule
-------------
Sample until the relative noise is at or below ``Budget.noise`` with at least
``min_samples`` samples (converged), or ``Budget.seconds`` of wall time have passed
(not converged, reported as such), or ``max_samples`` were taken. At least ``at_least``
samples are always taken, even past the time limit, so a case of multi-second launches
still gets a median.
"""

from __future__ import annotations

import bisect
import math
import statistics
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

CONFIDENCE = 0.95
_Z = 1.959963984540054  # two-sided 95% normal quantile
_EXACT_UP_TO = 300
MIN_SAMPLES_FOR_CI = 6  # 1 - 2 / 2**6 = 96.9% >= 95%; five samples give only 93.75%


@dataclass(frozen=True)
class Budget:
    """How long to measure one case, and when it is measured well enough."""

    seconds: float = 1.0  # sampling time limit per case (--max-time); a case that reaches it is "not converged"
    noise: float = 0.005  # stop once the median's relative noise is at or below this (--noise)
    min_samples: int = 10  # never call a case converged on fewer samples
    max_samples: int = 1000
    warmup_seconds: float = 0.03  # untimed launches first (--warmup), outside ``seconds``: clocks, caches, TLBs
    batch_ms: float = 2.0  # aim for samples (batches of launches) of at least this much GPU time
    max_batch: int = 200  # launches queued behind one hold, well under the driver's queue depth
    energy: bool = True  # an energy window after the samples (about 0.7 s a case on the H100; --no-energy)

    @property
    def wall_limit_s(self) -> float:
        """The longest one case's timing can run silent: the warm-up (host-bound kernels stop
        at 4x its GPU time) and the sampling limit."""
        return 4 * self.warmup_seconds + self.seconds

    def settings(self) -> dict:
        """The budget as the bench JSON's ``settings`` records it."""
        return {"noise_target": self.noise, "max_time_s": self.seconds, "min_samples": self.min_samples,
                "max_samples": self.max_samples, "warmup_s": self.warmup_seconds, "batch_ms": self.batch_ms,
                "energy": self.energy}


def quantile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (NumPy's default), on sorted data."""
    position = q * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@lru_cache(maxsize=None)
def median_ci_rank(n: int) -> int | None:
    """The 1-based rank j so that [x(j), x(n+1-j)] is a >= 95% interval for the median; None if n < 6."""
    if n < MIN_SAMPLES_FOR_CI:
        return None
    if n > _EXACT_UP_TO:
        return max(1, math.floor((n - _Z * math.sqrt(n)) / 2))
    allowed = (1 - CONFIDENCE) / 2 * 2**n  # P(B <= j-1) * 2**n may not exceed this
    tail, j = 0, 0
    while tail + math.comb(n, j) <= allowed:  # tail = sum_{i<j} C(n, i) = 2**n P(B <= j-1)
        tail += math.comb(n, j)
        j += 1
    return j  # the loop ran at least once because n >= 6


def median_ci(ordered: Sequence[float]) -> tuple[float, float] | None:
    """Distribution-free 95% confidence interval of the median of sorted samples."""
    j = median_ci_rank(len(ordered))
    if j is None:
        return None
    return ordered[j - 1], ordered[len(ordered) - j]


def relative_noise(ordered: Sequence[float]) -> float | None:
    """Half-width of the median's 95% interval over the median; None when n < 6."""
    ci = median_ci(ordered)
    if ci is None:
        return None
    median = statistics.median(ordered)
    if median <= 0:
        return math.inf
    return (ci[1] - ci[0]) / (2 * median)


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    min: float
    max: float
    mean: float
    p10: float
    p90: float
    ci_low: float | None
    ci_high: float | None
    noise: float | None  # relative half-width of the median's 95% interval


def summarize(samples: Sequence[float]) -> Summary:
    if not samples:
        raise ValueError("no samples to summarize")
    ordered = sorted(samples)
    ci = median_ci(ordered)
    return Summary(
        n=len(ordered), median=statistics.median(ordered), min=ordered[0], max=ordered[-1],
        mean=statistics.fmean(ordered), p10=quantile(ordered, 0.1), p90=quantile(ordered, 0.9),
        ci_low=ci[0] if ci else None, ci_high=ci[1] if ci else None, noise=relative_noise(ordered),
    )


@dataclass(frozen=True)
class Sampling:
    samples: tuple[float, ...]
    converged: bool
    stop_reason: str  # "noise", "max-time" or "max-samples"
    elapsed_s: float


def sample_until(take: Callable[[], float], budget: Budget, *, initial: Sequence[float] = (), at_least: int = 3,
                 started: float | None = None, clock: Callable[[], float] = time.perf_counter) -> Sampling:
    """Call ``take()`` for one sample at a time until the stopping rule (module docstring) says stop.

    ``initial`` samples (already taken the same way) count towards the rule; the time limit
    runs from ``started`` (default: now), so a caller can charge its warm-up to the case;
    ``clock`` is injectable so the rule can be tested without waiting.
    """
    start = clock() if started is None else started
    samples = list(initial)
    ordered = sorted(samples)
    while True:
        if samples:
            n = len(samples)
            noise = relative_noise(ordered)
            if n >= budget.min_samples and noise is not None and noise <= budget.noise:
                return Sampling(tuple(samples), True, "noise", clock() - start)
            if n >= budget.max_samples:
                return Sampling(tuple(samples), False, "max-samples", clock() - start)
            if n >= at_least and clock() - start >= budget.seconds:
                return Sampling(tuple(samples), False, "max-time", clock() - start)
        value = take()
        samples.append(value)
        bisect.insort(ordered, value)
