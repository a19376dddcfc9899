"""Several launches of one shape timed in alternation: the median of a few rounds, each round
a batch of every launch in a shuffled order.

Timed one after another, each for its own budget, two configurations of a large shape are not
compared under the same conditions: under the power cap the clock a batch runs at depends on
what ran just before it (a cool, slow baseline lets the next batch start faster). On the H100
the sweep, timing its candidates so, put the whole 128 x 256 tiles 5-15% ahead of the same
tiles in 2 x 1 clusters on two large tuning shapes, where timed in alternation the clusters
were 3-5% ahead on both (results/h100-80gb-hbm3/probe-cluster-flips.txt); two identical
launches in one fixed order measured 7-8% apart
(results/h100-80gb-hbm3/probe-packed-pitch-fixed-order.txt).
"""

from __future__ import annotations

import random
import statistics
from typing import Callable, Mapping

ROUNDS, WARMUP = 5, 10
BATCH_S = 0.05  # a batch of launches lasts about this long (launches_for)
MOST_LAUNCHES = 100


def launches_for(ms: float, batch_s: float = BATCH_S, most: int = MOST_LAUNCHES) -> int:
    """How many launches of ``ms`` each make a batch of about ``batch_s`` (1 to ``most``)."""
    return max(1, min(most, round(batch_s * 1e3 / ms))) if ms > 0 else most


def alternate_ms(timer, runs: Mapping[str, Callable[[], None]], launches: int, rounds: int = ROUNDS,
                 warmup: int = WARMUP) -> dict[str, float]:
    """Milliseconds per launch of each run: the median over ``rounds`` rounds, each a batch of
    ``launches`` after ``warmup`` untimed (``timer.batch_ms``: a bench.timing.GpuTimer), the
    runs in a shuffled order each round, seeded by the round so that a run repeats exactly."""
    times: dict[str, list[float]] = {label: [] for label in runs}
    for r in range(rounds):
        order = list(runs)
        random.Random(r).shuffle(order)
        for label in order:
            timer.batch_ms(runs[label], warmup)
            times[label].append(timer.batch_ms(runs[label], launches))
    return {label: statistics.median(t) for label, t in times.items()}
