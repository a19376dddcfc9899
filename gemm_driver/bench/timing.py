"""GPU and CPU timing.

GPU, hot mode: events around a batch of back-to-back launches; one sample is the batch
time over the number of launches. A tiny ``hold_stream`` kernel is queued first and keeps
the stream busy until the whole batch (start event, launches, end event) is queued, then
the host releases it: the batch runs without gaps, so the ~10 us Python launch overhead
never counts as GPU time even for kernels shorter than it. Operands stay in L2 between
launches when they fit: that is what "hot" means.

GPU, cold mode: behind the same hold, each launch is preceded by a write of a buffer of
twice the L2 size (``cuMemsetD32Async``), which evicts the operands, and bracketed by its
own pair of events, so the flush is queued between the timed regions and never inside
one. A sample is the mean of the per-launch times of one batch.

Warm-up and the number of samples are chosen by time, not counts: warm-up launches run
for ``Budget.warmup_seconds`` (clocks up, caches and TLBs warm; long enough, the clock down to
where the power limit holds it), then samples are taken until the median's relative noise is
under ``Budget.noise`` or the case's sampling time limit is reached (``stats.sample_until``).
Events are created once per timer.

GPU, graph mode: the batch of launches is captured once into a CUDA graph
(``cuda/graph.py``) and each sample is one replay behind the same hold, between events:
one host call queues the whole batch, an independent check that no host overhead is in
the hot numbers (they agree within 2% from 512^3 up: README, "Timing"). A launch that
cannot be captured (a library that synchronises inside) is timed hot instead, and its
case records mode "hot" with why (``TimingStats.mode_note``).

Energy: after the samples, with a clock monitor that can read NVML's energy counter, the
case runs once more back to back (the sampling batch as a graph, replayed) for an energy
window of its own (energy.py); its reading goes into ``TimingStats.energy_windows``.

Events around single launches, the remaining way of timing a launch, live with the
launch-overhead test (tests/timing_references.py).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Protocol

from ..cuda import cache
from ..cuda.driver import DeviceBuffer, Event, Module, PinnedWords, Stream
from ..cuda.errors import CudaError, GemmDriverError
from ..cuda.graph import Graph
from ..kernels.sources import read_source
from . import energy

ENERGY_OFF = "energy not read (bench --no-energy)"
from .stats import Budget, Summary, sample_until, summarize

HOLD_TIMEOUT_NS = 5_000_000_000  # far longer than queueing any batch takes
COLD_MAX_BATCH = 50  # 4 queued operations per cold launch: stay far below the queue depth
MODES = ("hot", "cold", "graph")
HOLD_SOURCE = "cu/harness/hold_stream.cu"  # the harness kernel, apart from the ladder's rungs
HOLD_ENTRY = "hold_stream"  # its name, which profilers see too (the profile command's marker)

__all__ = ["Budget", "GpuTimer", "MODES", "TimingError", "TimingStats", "measure_host"]


def check_mode(mode: str) -> str:
    """The one check of a timing mode (the CLI offers MODES as argparse choices)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


class TimingError(GemmDriverError):
    """A measurement could not be taken honestly."""


class ClockMonitorLike(Protocol):  # clocks.ClockMonitor; a Protocol keeps NVML out of this module
    def start_case(self) -> None: ...

    def sample(self) -> None:
        """Called while a timed batch runs on the GPU."""

    def end_case(self) -> dict: ...

    @property
    def energy_unavailable(self) -> str | None: ...

    def energy_mj(self) -> int: ...


@dataclass(frozen=True)
class TimingStats:
    samples_ms: tuple[float, ...]  # per-launch time of each sample (batch time / launches)
    launches_per_sample: int
    clock: str  # "cuda-events" or "host"
    converged: bool | None = None  # None: no stopping rule was applied
    stop_reason: str = ""
    elapsed_s: float = 0.0  # wall time of the measurement, warm-up included
    mode: str = "hot"
    clocks: dict | None = None  # clocks.assess() of the reads taken during the batches; None: no monitor
    mode_note: str = ""  # why the mode differs from the one asked for (a graph that could not be captured)
    energy_windows: tuple[dict, ...] = ()  # energy.window_record() of each energy window (one per round)

    @cached_property
    def summary(self) -> Summary:
        return summarize(self.samples_ms)

    @property
    def median_ms(self) -> float:
        return self.summary.median

    @property
    def min_ms(self) -> float:
        return self.summary.min

    @property
    def noise(self) -> float | None:
        return self.summary.noise

    def quantile_ms(self, q: float) -> float:
        from .stats import quantile

        return quantile(sorted(self.samples_ms), q)

    def as_dict(self) -> dict:
        s = self.summary
        return {
            "median_ms": s.median, "min_ms": s.min, "max_ms": s.max, "mean_ms": s.mean,
            "p10_ms": s.p10, "p90_ms": s.p90, "ci_low_ms": s.ci_low, "ci_high_ms": s.ci_high,
            "noise": s.noise, "samples": s.n, "launches_per_sample": self.launches_per_sample,
            "converged": self.converged, "stop_reason": self.stop_reason,
            "elapsed_s": round(self.elapsed_s, 4), "mode": self.mode, "mode_note": self.mode_note, "clock": self.clock,
            "clocks": self.clocks, "samples_ms": list(self.samples_ms),
            **({"energy_windows": list(self.energy_windows)} if self.energy_windows else {}),
        }


class GpuTimer:
    """Times launch callables on one stream with events and the stream hold."""

    def __init__(self, stream: Stream, arch: str, l2_bytes: int | None = None, mode: str = "hot",
                 monitor: "ClockMonitorLike | None" = None):
        self.stream, self.mode, self.monitor = stream, check_mode(mode), monitor
        compiled, _ = cache.build(filename="hold_stream.cu", source=read_source(HOLD_SOURCE), arch=arch)
        self._module = Module(compiled.cubin, name="hold_stream.cu")
        self._hold = self._module.kernel(HOLD_ENTRY, ("ptr", "ptr", "unsigned long long"))
        self._flags = PinnedWords(2)  # [0] release, [1] expired
        self._hold_args = self._hold.pack(self._flags.device_ptr(0), self._flags.device_ptr(1), HOLD_TIMEOUT_NS)
        self._start, self._end = Event(), Event()
        self._l2_bytes = l2_bytes
        self._flush: DeviceBuffer | None = None  # made on first cold use: 2x L2 of device memory
        self._pairs: list[tuple[Event, Event]] = []
        self._chunk_events: list[Event] = []  # the energy window's, one per slot (energy.run_window)
        self._flushes = 0
        self._monitor: ClockMonitorLike | None = None

    # -- the hold ---------------------------------------------------------------------
    def _held(self, enqueue: Callable[[], None], last: Event) -> None:
        """Queue the hold, then ``enqueue()``, release, and wait for ``last``."""
        self._flags[0], self._flags[1] = 0, 0
        self._hold.launch((1, 1, 1), (1, 1, 1), self._hold_args, self.stream)
        enqueue()
        self._flags[0] = 1
        if self._monitor is not None:
            self._monitor.sample()  # the GPU is running the batch now
        last.synchronize()
        if self._flags[1]:
            raise TimingError("the stream hold expired before the batch was queued; the sample is void")

    def batch_ms(self, launch: Callable[[], None], launches: int) -> float:
        """Hot: GPU time of ``launches`` back-to-back launches, per launch, in ms."""
        def enqueue():
            self._start.record(self.stream)
            for _ in range(launches):
                launch()
            self._end.record(self.stream)

        self._held(enqueue, self._end)
        return Event.elapsed_ms(self._start, self._end) / launches

    def mark(self) -> None:
        """Queue the hold kernel already released: a launch that does nothing, which a
        profiler lists by name (HOLD_ENTRY) between the launches it separates."""
        self._flags[0], self._flags[1] = 1, 0
        self._hold.launch((1, 1, 1), (1, 1, 1), self._hold_args, self.stream)
        self.stream.synchronize()

    def cold_batch_ms(self, launch: Callable[[], None], launches: int) -> float:
        """Cold: mean GPU time of ``launches`` launches, each after an L2 flush outside its events."""
        flush = self._flush_buffer()
        while len(self._pairs) < launches:
            self._pairs.append((Event(), Event()))
        pairs = self._pairs[:launches]

        def enqueue():
            for start, end in pairs:
                self._flushes += 1  # a new value each time: nothing can skip a write of what is there
                flush.memset32(self._flushes, stream=self.stream)
                start.record(self.stream)
                launch()
                end.record(self.stream)

        self._held(enqueue, pairs[-1][1])
        return sum(Event.elapsed_ms(start, end) for start, end in pairs) / launches

    def graph_batch_ms(self, graph: Graph, launches: int) -> float:
        """Graph: GPU time of one replay of a captured batch of ``launches``, per launch, in ms."""
        def enqueue():
            self._start.record(self.stream)
            graph.launch(self.stream)
            self._end.record(self.stream)

        self._held(enqueue, self._end)
        return Event.elapsed_ms(self._start, self._end) / launches

    def _capture(self, launch: Callable[[], None], launches: int) -> tuple[Graph | None, str]:
        """The batch as a graph, or (None, why) when the launch cannot be captured."""
        def record():
            for _ in range(launches):
                launch()
        try:
            return Graph(self.stream, record), ""
        except (CudaError, GemmDriverError) as exc:
            self.stream.synchronize()  # a failed capture leaves nothing queued; make sure
            return None, f"graph capture failed ({str(exc).splitlines()[0]}); timed hot"

    def _flush_buffer(self) -> DeviceBuffer:
        if self._flush is None:
            if not self._l2_bytes:
                raise TimingError("cold mode needs the device's L2 size (GpuTimer(..., l2_bytes=...))")
            self._flush = DeviceBuffer(2 * self._l2_bytes)
        return self._flush

    # -- measuring --------------------------------------------------------------------
    def measure(self, launch: Callable[[], None], budget: Budget = Budget(), mode: str | None = None) -> TimingStats:
        """Warm up, then sample until the stopping rule says stop; ``mode`` defaults to the timer's."""
        mode = self.mode if mode is None else check_mode(mode)
        started = time.perf_counter()
        launch()  # first launch: module load, cuBLAS heuristics stay out of everything
        self.stream.synchronize()
        estimate = self.batch_ms(launch, 1)
        self._warm_up(launch, estimate, budget)
        sampling_started = time.perf_counter()  # --max-time limits the sampling; the warm-up has its own time
        limit = COLD_MAX_BATCH if mode == "cold" else budget.max_batch
        launches = max(1, min(limit, math.ceil(budget.batch_ms / max(estimate, 1e-4))))
        graph, note = self._capture(launch, launches) if mode == "graph" else (None, "")
        if mode == "graph" and graph is None:
            mode = "hot"
        if graph is not None:
            take_batch = lambda: self.graph_batch_ms(graph, launches)  # noqa: E731
        elif mode == "hot":
            take_batch = lambda: self.batch_ms(launch, launches)  # noqa: E731
        else:
            take_batch = lambda: self.cold_batch_ms(launch, launches)  # noqa: E731
        # A hot batch of one launch is exactly what the estimate measured: keep it as a sample.
        initial = (estimate,) if launches == 1 and mode == "hot" else ()
        self._monitor = self.monitor
        if self.monitor is not None:
            self.monitor.start_case()
        try:
            sampling = sample_until(take_batch, budget, initial=initial, started=sampling_started)
        finally:
            self._monitor = None
            if graph is not None:
                graph.close()
        clocks = self.monitor.end_case() if self.monitor is not None else None
        windows = () if self.monitor is None else (
            (self.energy_window(launch, launches, statistics.median(sampling.samples)),) if budget.energy
            else (energy.unavailable_window(ENERGY_OFF),))
        return TimingStats(sampling.samples, launches, "cuda-events", sampling.converged, sampling.stop_reason,
                           time.perf_counter() - started, mode, clocks, note, windows)

    def energy_window(self, launch: Callable[[], None], launches: int, kernel_ms: float) -> dict:
        """Run ``launch`` back to back, in chunks of ``launches`` (about ``kernel_ms`` each, the
        samples' median), while the monitor reads the energy counter (energy.run_window); the
        window's reading (energy.window_record)."""
        why = getattr(self.monitor, "energy_unavailable", "the clock monitor cannot read energy")
        if why:
            return energy.unavailable_window(why)
        graph, _ = self._capture(launch, launches)
        how = "graph replays" if graph is not None else "direct launches"

        def enqueue(slot: int) -> Callable[[], bool]:
            if graph is not None:
                graph.launch(self.stream)
            else:
                for _ in range(launches):
                    launch()
            while len(self._chunk_events) <= slot:
                self._chunk_events.append(Event())
            self._chunk_events[slot].record(self.stream)
            return self._chunk_events[slot].query

        try:
            self._start.record(self.stream)
            reads, chunks, starved = energy.run_window(enqueue, launches * kernel_ms, self.monitor.energy_mj)
            self._end.record(self.stream)
            self._end.synchronize()
        finally:
            if graph is not None:
                graph.close()
        return energy.window_record(reads, launches=chunks * launches, gpu_ms=Event.elapsed_ms(self._start, self._end),
                                    starved=starved, how=how)

    def _warm_up(self, launch: Callable[[], None], estimate_ms: float, budget: Budget) -> None:
        """Untimed launches for ``budget.warmup_seconds`` of GPU time (none if one launch is longer)."""
        remaining = math.floor(budget.warmup_seconds * 1e3 / max(estimate_ms, 1e-4))
        # Kernels shorter than a Python launch make this host-bound: cap the wall time.
        deadline = time.perf_counter() + 4 * budget.warmup_seconds
        while remaining > 0 and time.perf_counter() < deadline:
            chunk = min(remaining, budget.max_batch)
            for _ in range(chunk):
                launch()
            self.stream.synchronize()
            remaining -= chunk

    @staticmethod
    def measure_host(run: Callable[[], object], budget: Budget = Budget()) -> TimingStats:
        """CPU baselines are timed with the host clock (``measure_host``), same stopping rule."""
        return measure_host(run, budget)

    def close(self) -> None:
        resources = [self._start, self._end, self._flags, self._module, self._flush]
        resources += [event for pair in self._pairs for event in pair] + self._chunk_events
        for resource in resources:
            if resource is not None:
                resource.close()


def measure_host(run: Callable[[], object], budget: Budget = Budget()) -> TimingStats:
    """Wall-clock timing of a CPU computation (the NumPy baseline), same stopping rule."""
    started = time.perf_counter()
    run()  # warm-up: first-call costs (allocation, thread pool start) stay out

    def take() -> float:
        start = time.perf_counter()
        run()
        return (time.perf_counter() - start) * 1e3

    sampling = sample_until(take, budget, started=started)
    return TimingStats(sampling.samples, 1, "host", sampling.converged, sampling.stop_reason,
                       time.perf_counter() - started)
