"""GPU and CPU timing.

GPU: events around a batch of back-to-back launches, repeated; the median per-launch
time is reported. A tiny ``hold_stream`` kernel is queued first and keeps the stream
busy until the whole batch (start event, launches, end event) is queued, then the host
releases it: the batch runs without gaps, so the ~10 us Python launch overhead never
counts as GPU time even for kernels shorter than it. Events are created once per timer.
Warm-up and the number of samples are chosen by time, not fixed counts.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable

from ..cuda import cache
from ..cuda.driver import Event, Module, PinnedWords, Stream
from ..cuda.errors import GemmDriverError
from ..kernels.sources import read_source

HOLD_TIMEOUT_NS = 5_000_000_000  # far longer than queueing any batch takes


class TimingError(GemmDriverError):
    """A measurement could not be taken honestly."""


@dataclass(frozen=True)
class TimingStats:
    samples_ms: tuple[float, ...]  # per-launch time of each sample (batch time / launches)
    launches_per_sample: int
    clock: str  # "cuda-events" or "host"

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def min_ms(self) -> float:
        return min(self.samples_ms)

    def quantile_ms(self, q: float) -> float:
        ordered = sorted(self.samples_ms)
        position = q * (len(ordered) - 1)
        low, high = math.floor(position), math.ceil(position)
        return ordered[low] + (ordered[high] - ordered[low]) * (position - low)

    def as_dict(self) -> dict:
        return {
            "median_ms": self.median_ms,
            "min_ms": self.min_ms,
            "p10_ms": self.quantile_ms(0.1),
            "p90_ms": self.quantile_ms(0.9),
            "samples": len(self.samples_ms),
            "launches_per_sample": self.launches_per_sample,
            "clock": self.clock,
        }


@dataclass(frozen=True)
class Budget:
    """How long to measure one case."""

    seconds: float = 0.5  # keep sampling until this much wall time has passed ...
    min_samples: int = 5  # ... and at least this many samples were taken
    max_samples: int = 100
    batch_ms: float = 2.0  # aim for batches of at least this much GPU time
    max_batch: int = 200  # launches queued behind one hold, well under the driver's queue depth


class GpuTimer:
    """Times launch callables on one stream with events and the stream hold."""

    def __init__(self, stream: Stream, arch: str):
        self.stream = stream
        compiled, _ = cache.build(filename="hold_stream.cu", source=read_source("cu/hold_stream.cu"), arch=arch)
        self._module = Module(compiled.cubin, name="hold_stream.cu")
        self._hold = self._module.kernel("hold_stream", ("ptr", "ptr", "unsigned long long"))
        self._flags = PinnedWords(2)  # [0] release, [1] expired
        self._hold_args = self._hold.pack(self._flags.device_ptr(0), self._flags.device_ptr(1), HOLD_TIMEOUT_NS)
        self._start, self._end = Event(), Event()

    def batch_ms(self, launch: Callable[[], None], launches: int) -> float:
        """GPU time of ``launches`` back-to-back launches, per launch, in ms."""
        self._flags[0], self._flags[1] = 0, 0
        self._hold.launch((1, 1, 1), (1, 1, 1), self._hold_args, self.stream)
        self._start.record(self.stream)
        for _ in range(launches):
            launch()
        self._end.record(self.stream)
        self._flags[0] = 1
        self._end.synchronize()
        if self._flags[1]:
            raise TimingError("the stream hold expired before the batch was queued; the sample is void")
        return Event.elapsed_ms(self._start, self._end) / launches

    def measure(self, launch: Callable[[], None], budget: Budget = Budget()) -> TimingStats:
        launch()  # warm-up: first-launch costs (module load, cuBLAS heuristics) stay out
        self.stream.synchronize()
        estimate = self.batch_ms(launch, 1)
        launches = max(1, min(budget.max_batch, math.ceil(budget.batch_ms / max(estimate, 1e-4))))
        min_samples = budget.min_samples if estimate < 1000 else 3  # multi-second launches
        samples: list[float] = []
        deadline = time.perf_counter() + budget.seconds
        while len(samples) < budget.max_samples and (len(samples) < min_samples or time.perf_counter() < deadline):
            samples.append(self.batch_ms(launch, launches))
        return TimingStats(tuple(samples), launches, "cuda-events")

    def close(self) -> None:
        for resource in (self._start, self._end, self._flags, self._module):
            resource.close()


def measure_host(run: Callable[[], object], budget: Budget = Budget()) -> TimingStats:
    """Wall-clock timing of a CPU computation (the NumPy baseline)."""
    run()
    samples: list[float] = []
    deadline = time.perf_counter() + budget.seconds
    while len(samples) < budget.max_samples and (len(samples) < 3 or time.perf_counter() < deadline):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1e3)
    return TimingStats(tuple(samples), 1, "host")
