"""Energy per GEMM, from NVML's energy counter read around a window of back-to-back launches.

NVML's ``nvmlDeviceGetTotalEnergyConsumption`` counts millijoules since the driver loaded,
but coarsely: on the H100 of results/ it steps every ~100 ms (and one read takes ~4 ms
there). Two reads around a timed batch of a few ms would see no step at all, and a
window read only at its ends is off by up to one step at each end (20% of a 1 s window).
So energy has its own window, after a case's timed samples:

- The case's launches run back to back (a captured CUDA graph of one batch, replayed;
  direct launches where a library cannot be captured), with ``QUEUED_AHEAD_MS`` of work
  always queued ahead, for as long as the rule below needs, at most ``MAX_WINDOW_S``.
- The counter is read in a loop the whole time. Each read that shows a new value marks
  one counter update, at the host time of that read. The first update is dropped (it may
  hold energy from before the window); the last one used is the last seen while work was
  still queued. Between the first and last used updates, the energy is all the case's:
  average power = energy / time between them. Update instants need not be known exactly:
  each is placed within one read's duration, so the timing error is at most the two reads'
  durations over the span.
- The window stops once it holds ``MIN_UPDATES`` updates over at least ``MIN_SPAN_S`` with
  a timing error under ``MAX_TIMING_ERROR`` (about 0.5 s on that H100).

Joules per GEMM = average power x the window's own GPU time per launch (events around
the window); TFLOP/s per watt = FLOP per GEMM / joules per GEMM / 1e12 (a TFLOP per joule),
so neither depends on the timed samples' clock. A reading is *trusted* when the rule
above was met, the GPU never ran out of queued work during the window (a host too
slow to keep it fed would mix idle power in) and, with several rounds, they agree within 5%;
otherwise the numbers stay (where there
are any) with ``trusted`` false and a note saying why. Without NVML, or on a GPU without
the counter, every number is null and the note says why. docs/profiling.md has the method
and the readings.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Sequence

MIN_UPDATES = 4  # counter updates between the first and last edge used
MIN_SPAN_S = 0.3  # ... spanning at least this long
MAX_TIMING_ERROR = 0.02  # the two edges' read durations over the span
MAX_WINDOW_S = 2.0  # a counter slower than this allows gives an untrusted reading, not a longer wait
MAX_ROUNDS_APART = 0.05  # rounds of one case further apart than this: the reading is not repeatable
# GPU work kept queued ahead of the host. A counter read takes ~4 ms on the H100 of results/,
# but now and then over 100 ms (an update goes unseen): 30 ms let the GPU run dry there.
QUEUED_AHEAD_MS = 250.0


@dataclass(frozen=True)
class CounterRead:
    before: float  # host clock (s) as the read started
    after: float  # ... and as it returned
    mj: int  # the counter's value
    busy: bool  # work was still queued on the GPU when the read returned

    @property
    def at(self) -> float:
        return (self.before + self.after) / 2


def edges(reads: Sequence[CounterRead]) -> list[CounterRead]:
    """The reads that showed a new counter value, less the first such one (it may hold
    energy from before the window) and any seen after the GPU ran out of work."""
    changed = [b for a, b in zip(reads, reads[1:]) if b.mj != a.mj]
    return [r for r in changed[1:] if r.busy]


def span_quality(used: Sequence[CounterRead]) -> tuple[int, float, float]:
    """(updates, span in s, timing error as a fraction of the span) of the edges ``used``."""
    if len(used) < 2:
        return 0, 0.0, math.inf
    span = used[-1].at - used[0].at
    error = ((used[0].after - used[0].before) + (used[-1].after - used[-1].before)) / span if span > 0 else math.inf
    return len(used) - 1, span, error


def enough(reads: Sequence[CounterRead]) -> bool:
    """The window's stopping rule (module docstring)."""
    updates, span, error = span_quality(edges(reads))
    return updates >= MIN_UPDATES and span >= MIN_SPAN_S and error <= MAX_TIMING_ERROR


def run_window(enqueue: Callable[[int], Callable[[], bool]], chunk_ms: float, read_mj: Callable[[], int], *,
               max_seconds: float = MAX_WINDOW_S, clock: Callable[[], float] = time.perf_counter
               ) -> tuple[list[CounterRead], int, int]:
    """Keep the GPU busy and read the counter until ``enough`` (or ``max_seconds``).

    ``enqueue(slot)`` queues one chunk of launches (about ``chunk_ms`` of GPU time) and
    returns a test of whether it has finished; ``slot`` cycles through ``ahead + 1`` values,
    and no chunk still tracked here holds the one given (an event per slot can be reused:
    an event re-recorded while its old chunk is still tracked would make that chunk look
    unfinished and stop the queueing). Returns the reads, the number of chunks queued and
    how often the GPU was found with nothing queued before the last chunk (it idled);
    every chunk has finished when this returns."""
    ahead = max(2, math.ceil(QUEUED_AHEAD_MS / max(chunk_ms, 1e-3)))
    pending: deque = deque()
    reads: list[CounterRead] = []
    chunks, starved, start, queueing = 0, 0, clock(), True
    while True:
        if queueing:
            while len(pending) < ahead:
                pending.append(enqueue(chunks % (ahead + 1)))
                chunks += 1
        before = clock()
        value = read_mj()
        after = clock()
        while pending and pending[0]():
            pending.popleft()
        starved += queueing and not pending
        reads.append(CounterRead(before, after, value, bool(pending)))
        if queueing and (enough(reads) or after - start >= max_seconds):
            queueing = False
        if not queueing and not pending:
            return reads, chunks, starved


def window_record(reads: Sequence[CounterRead], *, launches: int, gpu_ms: float, starved: int, how: str) -> dict:
    """One window's reading: average power, joules per launch, and whether to trust them.

    ``launches`` ran in ``gpu_ms`` (events around the window); ``starved`` as run_window
    counts it; ``how`` says how the launches were queued."""
    used = edges(reads)
    updates, span, error = span_quality(used)
    record = {"joules_per_launch": None, "avg_power_w": None, "span_s": round(span, 4), "updates": updates,
              "timing_error": round(error, 4) if math.isfinite(error) else None, "launches": launches,
              "gpu_ms": round(gpu_ms, 3), "launch_us": round(1e3 * gpu_ms / launches, 3) if launches else None,
              "starved": starved, "queued": how,
              "counter_interval_ms": round(1e3 * span / updates, 1) if updates else None}
    why = []
    if updates < 1 or span <= 0:
        why.append(f"the energy counter did not step twice during a {reads[-1].after - reads[0].before:.2f} s window"
                   if reads else "the energy counter was not read")
    else:
        power = (used[-1].mj - used[0].mj) / 1e3 / span
        record["avg_power_w"] = round(power, 2)
        record["joules_per_launch"] = power * gpu_ms / 1e3 / launches
        if updates < MIN_UPDATES or span < MIN_SPAN_S:
            why.append(f"only {updates} counter updates over {span:.3f} s (the rule: {MIN_UPDATES} over "
                       f"{MIN_SPAN_S:g} s)")
        if error > MAX_TIMING_ERROR:
            why.append(f"edge timing uncertain by {error:.1%} of the span (the rule: {MAX_TIMING_ERROR:.0%})")
    if starved:
        why.append(f"the GPU ran out of queued work ({starved} of {len(reads)} reads found nothing queued)")
    record["trusted"] = not why
    record["note"] = "; ".join(why) or None
    return record


def unavailable_window(why: str) -> dict:
    """The window record where no reading could be taken (no NVML, no counter)."""
    return {"joules_per_launch": None, "avg_power_w": None, "trusted": False, "note": why}


def unmeasured(why: str) -> dict:
    """A record's ``energy`` field with no reading, saying why."""
    return {"joules_per_gemm": None, "avg_power_w": None, "tflops_per_watt": None, "window_s": None,
            "trusted": False, "note": why}


def summarize(windows: Sequence[dict], flops: int) -> dict:
    """A record's ``energy`` field from its windows (one per round): the mean of the windows
    with a reading, trusted only when every window is and the rounds agree within
    MAX_ROUNDS_APART; the note says what was not, and how far apart the rounds were."""
    if not windows:
        return unmeasured("energy not read (no NVML monitor in this run)")
    read = [w for w in windows if w.get("joules_per_launch") is not None]
    notes = [f"round {i + 1}: {w['note']}" if len(windows) > 1 else w["note"]
             for i, w in enumerate(windows) if w.get("note")]
    if not read:
        return unmeasured("; ".join(notes) or "no energy reading")
    joules = sum(w["joules_per_launch"] for w in read) / len(read)
    power = sum(w["avg_power_w"] for w in read) / len(read)
    apart = 0.0
    if len(read) > 1:
        values = [w["joules_per_launch"] for w in read]
        apart = (max(values) - min(values)) / min(values) if min(values) > 0 else math.inf
        notes.append(f"rounds {', '.join(f'{v:.4g}' for v in values)} J per GEMM ({apart:.1%} apart"
                     + (f", over the {MAX_ROUNDS_APART:.0%} a repeatable reading allows)" if apart > MAX_ROUNDS_APART
                        else ")"))
    return {"joules_per_gemm": joules, "avg_power_w": round(power, 2),
            "tflops_per_watt": flops / joules / 1e12 if joules > 0 else None,
            "window_s": round(sum(w.get("span_s") or 0.0 for w in read), 4),
            "trusted": len(read) == len(windows) and all(w.get("trusted") for w in windows)
            and apart <= MAX_ROUNDS_APART,
            "note": "; ".join(notes) or None}


def case_energy(timing, flops: int) -> dict:
    """The record's ``energy`` field for a case timed as ``timing`` (TimingStats or None)."""
    if timing is None:
        return unmeasured("not timed")
    if timing.clock == "host":
        return unmeasured("timed on the host: no GPU energy")
    return summarize(timing.energy_windows, flops)


def counter_updates(read_mj: Callable[[], int], seconds: float = 2.0,
                    clock: Callable[[], float] = time.perf_counter) -> dict:
    """How often the counter steps, read in a loop for ``seconds`` (docs/profiling.md)."""
    reads = []
    start = clock()
    while clock() - start < seconds:
        before = clock()
        value = read_mj()
        reads.append(CounterRead(before, clock(), value, True))
    steps = [b for a, b in zip(reads, reads[1:]) if b.mj != a.mj]
    gaps = sorted(1e3 * (b.at - a.at) for a, b in zip(steps, steps[1:]))
    return {"reads": len(reads), "read_ms": round(1e3 * seconds / max(len(reads), 1), 3), "updates": len(steps),
            "interval_ms_median": round(gaps[len(gaps) // 2], 2) if gaps else None,
            "interval_ms_min": round(gaps[0], 2) if gaps else None,
            "interval_ms_max": round(gaps[-1], 2) if gaps else None}
