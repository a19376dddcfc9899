"""The autotune sweep: verify and time a kernel's tuning space on this GPU, keep the best per shape.

For each shape, every candidate configuration is built (a configuration that fails to
compile, spills or uses local memory is dropped with the reason), then verified once on
fresh random data against the float64 reference and only then timed, through the same
prepared case and ``run_case`` as the bench (so a trial's status is an Outcome's: ok,
FAILED or skipped). Like the bench, the sweep runs in a worker process (isolation.py), so a
configuration that faults or hangs is FAILED and the rest still run. The winners go into the per-GPU table that the ``autotuned`` kernel
reads (``kernels/tuned.py`` looks it up; ``tools/autotune.py`` writes it).

Each trial is timed on its own, one after another. With ``final=True``, where a shape's
fastest candidates came within ``FINAL_MARGIN`` of each other, a final round times the closest
``FINALISTS`` of them again in alternation (alternate.py), on the same operands, and their
times replace the first pass's: timed one after another, a large shape's candidates run at the
clocks the one before left them. It is off by default: on the H100's 67 tuning shapes past
M = 128 it changed the winner on 27 of the 57 it timed again (19 of them a 2 x 1 cluster on or
off, by up to 17%), read the finalists 1.5% slower than the first pass at the median (7% at the
10th percentile), took 141 s beside the sweep's 180, and the vote's left-out check was no better
on its table (1.052x the winner against 1.047x: results/h100-80gb-hbm3/final-round-effect.txt).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from .. import precision as _precision
from ..case import PreparedCase, run_case
from ..cuda.driver import Device, gpu_available
from ..cuda.errors import GemmDriverError
from ..kernels.build import build_all
from ..kernels.tuned import SCHEMA
from ..problem import GemmProblem, parse_shape, shape_label
from .alternate import alternate_ms, launches_for
from .isolation import DEFAULT_WATCHDOG_S, TaskFailure, release_kept
from .phases import Phases
from .runner import kept_case
from .spread import Journal, completed, runner_on
from .timing import Budget, GpuTimer


@dataclass
class Trial:
    tunables: dict
    status: str  # "ok", "FAILED", "skipped" (run_case), or "spills", "compile error" (never run)
    detail: str = ""
    median_ms: float | None = None
    tflops: float | None = None
    gpu: int | None = None  # the ordinal of the GPU that ran it
    # where the worker's time went, in seconds: "case" (the shape's operands and reference, paid
    # by its first trial), "build" (load or compile), "verify" (run, read back, check), "time";
    # and when the sweep had the result, in seconds from its start after the builds (a GPU's
    # timeline, its idle time)
    phases_s: dict | None = None
    finished_s: float | None = None
    first_tflops: float | None = None  # the first pass's, where the final round's replaced it

    TIMES = ("phases_s", "finished_s")  # where and when, not what it measured: journaled, not tabled

    def as_dict(self) -> dict:
        timed = {name: value for name in self.TIMES if (value := getattr(self, name)) is not None}
        final = {"first_tflops": self.first_tflops} if self.first_tflops is not None else {}
        return {"tunables": self.tunables, "status": self.status, "detail": self.detail,
                "median_ms": self.median_ms, "tflops": self.tflops, "gpu": self.gpu, **final, **timed}


@dataclass
class ShapeResult:
    shape: tuple[int, int, int]
    trials: list[Trial] = field(default_factory=list)
    baseline_tflops: float | None = None  # cuBLAS on the same operands

    @property
    def ranked(self) -> list[Trial]:
        return sorted((t for t in self.trials if t.tflops), key=lambda t: -t.tflops)

    def report_lines(self, top: int | None = None, title: str = "") -> list[str]:
        """The shape's ranking beside cuBLAS (the best ``top``, or all), then every rejected trial."""
        ranked, base = self.ranked, self.baseline_tflops
        cublas = f"{base:.2f} TFLOP/s" if base else "not timed"
        lines = [f"{title}{shape_label(*self.shape)}: cuBLAS {cublas}, "
                 f"{len(ranked)}/{len(self.trials)} configurations ran"]
        for t in ranked[:top]:
            share = f"{100 * t.tflops / base:6.1f}%" if base else "      -"
            final = f"  (final round; first pass {t.first_tflops:.2f})" if t.first_tflops is not None else ""
            lines.append(f"  {t.tflops:7.2f} TFLOP/s {share}  {tunables_label(t.tunables)}{final}")
        lines += [f"  {t.status}: {tunables_label(t.tunables)}: {t.detail}" for t in self.trials if t.status != "ok"]
        return lines


def tunables_label(tunables: Mapping[str, int]) -> str:
    return " ".join(f"{name}={value}" for name, value in tunables.items())


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """'512,4093x4091x4099' -> [(512, 512, 512), (4093, 4091, 4099)]: N for a square, or MxNxK."""
    return [parse_shape(s if "x" in s else f"{s}x{s}x{s}") for s in text.split(",") if s]


Space = Sequence[Mapping[str, int]] | Callable[[tuple[int, int, int]], Sequence[Mapping[str, int]]]


def tune(spec, shapes: Sequence[tuple[int, int, int]], space: Space, *,
         seconds: float = 0.15, seed: int = 0, on_trial: Callable[[tuple, Trial], None] = lambda s, t: None,
         isolation: str = "process", watchdog_s: float = DEFAULT_WATCHDOG_S,
         journal: Journal | None = None, gpus: Sequence[int] = (0,), final: bool = False,
         on_phase: Callable[[str, float], None] = lambda phase, seconds: None) -> list[ShapeResult]:
    """Verify and time every configuration of ``space`` (or of ``space(shape)``, the
    configurations offered for that shape) on each shape, and the precision's cuBLAS beside
    them on the same operands, in a worker process (isolation.py): a configuration that
    faults or hangs is FAILED with the reason and the sweep goes on. With several ``gpus``,
    one worker per GPU takes whole shapes from a shared queue (spread.py; a shape's trials
    share its operands and reference). With a ``journal``, each finished trial is appended to
    it and trials already there are not run again, so a stopped sweep resumes where it
    stopped. Every configuration still to run is compiled first, in threads (build_all: a cold
    cache costs about the longest build, not the sum of them, on one GPU or several);
    ``on_phase`` hears how long that took ("prebuild"), the sweep after it ("sweep") and, with
    ``final``, the final round (``finalists``: "final"), whose times replace the first pass's."""
    baseline = _precision.get(spec.precision).baseline
    offered = space if callable(space) else (lambda shape: space)
    tasks = [TrialTask(name, tuple(shape), index, spec.precision, dict(tunables), seed, seconds)
             for index, shape in enumerate(shapes)
             for name, tunables in [(baseline, {})] + [(spec.name, spec.resolve(t)) for t in offered(tuple(shape))]]
    done = journal.load() if journal else {}
    results = {index: ShapeResult(tuple(shape)) for index, shape in enumerate(shapes)}

    def record(task: TrialTask, trial: Trial) -> None:
        result = results[task.shape_index]
        if task.kernel == baseline:
            result.baseline_tflops = trial.tflops
            return
        result.trials.append(trial)
        on_trial(task.shape, trial)

    todo = []
    for task in tasks:
        if task.key in done:
            record(task, Trial(**done[task.key]))
        else:
            todo.append(task)
    by_shape: dict[int, list[int]] = {}
    for index, task in enumerate(todo):
        by_shape.setdefault(task.shape_index, []).append(index)
    started = time.perf_counter()
    if gpu_available() and spec.kind != "ptx":
        build_all(((spec, task.tunables) for task in todo if task.kernel == spec.name), Device.get(gpus[0]).arch)
    on_phase("prebuild", time.perf_counter() - started)
    sweep_started = time.perf_counter()
    # the shapes of most trials first: over several GPUs, none starts a long shape while the others
    # run out of work (the sweep's tail); one GPU runs them in order
    groups = sorted(by_shape.values(), key=len, reverse=True)
    runner = runner_on(gpus, run_trial_task, isolation=isolation, watchdog_s=watchdog_s)
    for index, trial, gpu in completed(runner, todo, groups, gpus[0]):  # journaled as they end
        task = todo[index]
        if isinstance(trial, TaskFailure):
            trial = Trial(task.tunables, "FAILED", trial.reason)
        trial = dataclasses.replace(trial, gpu=gpu, finished_s=round(time.perf_counter() - sweep_started, 3))
        if journal is not None:
            journal.append(task.key, trial.as_dict())
        record(task, trial)
    on_phase("sweep", time.perf_counter() - sweep_started)
    if final:
        final_started = time.perf_counter()
        _final_round(spec, results, seed, done, journal, gpus, isolation, watchdog_s)
        on_phase("final", time.perf_counter() - final_started)
    return list(results.values())


FINALISTS = 3  # the most candidates of a shape the final round times again
FINAL_MARGIN = 0.10  # ... of those within this fraction of its fastest first-pass time


def finalists(result: ShapeResult) -> list[Trial]:
    """The candidates of a shape the final round times again: the ``FINALISTS`` fastest of those
    within ``FINAL_MARGIN`` of its fastest first-pass time; none where only one is."""
    ranked = result.ranked
    close = [t for t in ranked if t.median_ms <= ranked[0].median_ms * (1 + FINAL_MARGIN)] if ranked else []
    return close[:FINALISTS] if len(close) > 1 else []


def _final_round(spec, results: Mapping[int, ShapeResult], seed: int, done: Mapping[str, dict],
                 journal: Journal | None, gpus: Sequence[int], isolation: str, watchdog_s: float) -> None:
    """Each shape's finalists timed again in alternation, one task a shape (journaled, so a
    resumed sweep runs only the rounds it lacks: ``done``, the journal as the sweep began);
    their times replace the first pass's."""
    tasks = [FinalTask(spec.name, result.shape, index, spec.precision, tuple(t.tunables for t in close), seed,
                       launches_for(max(t.median_ms for t in close)))
             for index, result in results.items() if (close := finalists(result))]
    outcomes = {task.key: done[task.key] for task in tasks if task.key in done}
    todo = [task for task in tasks if task.key not in outcomes]
    if todo:
        if gpu_available() and spec.kind != "ptx":  # a resumed sweep's finalists may not be built yet
            build_all(((spec, t) for task in todo for t in task.configurations), Device.get(gpus[0]).arch)
        runner = runner_on(gpus, run_final_task, isolation=isolation, watchdog_s=watchdog_s)
        for index, outcome, gpu in completed(runner, todo, [[i] for i in range(len(todo))], gpus[0]):
            if isinstance(outcome, TaskFailure):  # the first pass's times stay
                outcome = {"medians_ms": {}, "wrong": {}, "failed": outcome.reason}
            outcome = {**outcome, "gpu": gpu}
            if journal is not None:
                journal.append(todo[index].key, outcome)
            outcomes[todo[index].key] = outcome
    for task in tasks:
        apply_final(results[task.shape_index], outcomes[task.key])


def apply_final(result: ShapeResult, outcome: Mapping) -> None:
    """A final round's outcome into its shape's trials: each finalist timed again gets the new
    time (its first pass's TFLOP/s kept beside it); one whose check failed this time is FAILED."""
    flops = GemmProblem(*result.shape).flops
    for i, trial in enumerate(result.trials):
        label = tunables_label(trial.tunables)
        if label in outcome["wrong"]:
            result.trials[i] = dataclasses.replace(trial, status="FAILED", median_ms=None, tflops=None,
                                                   detail=f"final round: {outcome['wrong'][label]}")
        elif label in outcome["medians_ms"]:
            ms = outcome["medians_ms"][label]
            result.trials[i] = dataclasses.replace(trial, median_ms=ms, tflops=flops / ms / 1e9,
                                                   first_tflops=trial.tflops)


@dataclass(frozen=True)
class TrialTask:
    """One configuration (or the baseline, without tunables) on one shape, for a worker."""

    kernel: str
    shape: tuple[int, int, int]
    shape_index: int  # the data seed's second half
    precision: str
    tunables: dict
    seed: int
    seconds: float

    @property
    def key(self) -> str:
        """The trial's name in a sweep's journal: kernel, shape, configuration, seed."""
        return f"{self.kernel} {shape_label(*self.shape)} {tunables_label(self.tunables) or '-'} seed={self.seed}"


@dataclass(frozen=True)
class FinalTask:
    """A shape's finalists, timed again in alternation by one worker."""

    kernel: str
    shape: tuple[int, int, int]
    shape_index: int
    precision: str
    configurations: tuple[dict, ...]
    seed: int
    launches: int  # a batch of each (alternate.launches_for the slowest)

    @property
    def key(self) -> str:
        """The round's name in a sweep's journal: kernel, shape, its finalists, seed."""
        finalists = " | ".join(tunables_label(t) for t in self.configurations)
        return f"final {self.kernel} {shape_label(*self.shape)} {finalists} seed={self.seed}"


def _timer(session, state: dict) -> GpuTimer:
    """The worker's timer, made by its first task."""
    if "timer" not in state:
        state["timer"] = GpuTimer(session.stream, session.arch)
        state["close"] = lambda: _close_trial_state(state)
    return state["timer"]


def _case(session, state: dict, task) -> PreparedCase:
    """The task's shape's case, kept while the worker's tasks stay on it (runner.kept_case)."""
    return kept_case(session, state, GemmProblem(*task.shape), task.precision, task.seed, task.shape_index)


def run_final_task(session, state: dict, task: FinalTask, beat: Callable[[], None]) -> dict:
    """The worker's handler for a final round: each finalist verified again on the shape's
    case, then all timed in alternation (``alternate_ms``); the medians in ms by label, and
    the check's message for any that failed it (left out of the timing)."""
    timer, case = _timer(session, state), _case(session, state, task)
    beat()
    runs, wrong = {}, {}
    for tunables in task.configurations:
        label, launch = tunables_label(tunables), case.launcher(session, task.kernel, tunables)
        verdict = case.verify(session, launch)
        if verdict.ok:
            runs[label] = launch
        else:
            wrong[label] = verdict.message
    return {"medians_ms": alternate_ms(timer, runs, task.launches) if len(runs) > 1 else {}, "wrong": wrong}


def run_trial_task(session, state: dict, task: TrialTask, beat: Callable[[], None]) -> Trial:
    """The worker's handler: the shape's case (kept while the shape lasts), the build (a
    configuration that spills or does not compile is out, untimed), then verify and time."""
    timer, phases = _timer(session, state), Phases()
    case = _case(session, state, task)
    phases.lap("case")
    if task.tunables:
        refusal = _refusal(session, task)
        phases.lap("build")
        if refusal is not None:
            return dataclasses.replace(refusal, phases_s=phases.seconds)
    beat()
    outcome = run_case(session, task.kernel, case, tunables=task.tunables or None, timer=timer,
                       budget=Budget(seconds=task.seconds))
    phases.lap("time")
    phases.split_verify(outcome.verify_s)
    if not outcome.ok:
        return Trial(task.tunables, outcome.status, outcome.detail, phases_s=phases.seconds)
    median = outcome.timing.median_ms
    return Trial(task.tunables, "ok", "", median, case.problem.flops / median / 1e9, phases_s=phases.seconds)


def _refusal(session, task: TrialTask) -> Trial | None:
    """Why a configuration is out before it runs (compile error, spills), or None."""
    from .. import kernels

    try:
        built = session.load(kernels.KERNELS[task.kernel], task.tunables).build
    except (GemmDriverError, ValueError) as exc:
        return Trial(task.tunables, "compile error", str(exc).splitlines()[0])
    for res in built.every_resources:  # the GEMM may run in an entry other than main (a cluster's)
        if res.stack_bytes or res.spill_store_bytes:
            return Trial(task.tunables, "spills", f"{res.stack_bytes} B stack")
    return None


def _close_trial_state(state: dict) -> None:
    release_kept(state)
    state.pop("timer").close()


def _measured(trial: Trial) -> dict:
    """A trial as the table keeps it: what it measured, not where the worker's time went."""
    return {name: value for name, value in trial.as_dict().items() if name not in Trial.TIMES}


def merge_tables(document: Mapping, kept: Mapping) -> dict:
    """``document`` (a sweep of some shapes) with ``kept``'s entries (the table it updates) for
    every shape it did not sweep, in ``kept``'s order, the swept shapes' entries in place of
    theirs (whole entries: one shape's candidates always come from one sweep) and new shapes
    last. ``kept_from`` says which table the kept entries came from."""
    swept = {tuple(e["shape"]): e for e in document["entries"]}
    entries = [swept.pop(tuple(e["shape"]), e) for e in kept["entries"]]
    kept_count = len(entries) - (len(document["entries"]) - len(swept))
    return {**document, "entries": entries + list(swept.values()),
            "kept_from": {"created": kept.get("created"), "entries": kept_count}}


def table_document(results: Sequence[ShapeResult], spec, environment: Mapping, keep: int | None = 5) -> dict:
    """The per-GPU tuned table: each shape's winner plus the runners-up (the best ``keep``
    in all; None: every configuration that ran), each by the tunables it sets away from the
    kernel's defaults."""
    defaults = spec.resolve()
    sparse = lambda tunables: {k: v for k, v in tunables.items() if defaults.get(k) != v}  # noqa: E731
    entries = []
    for r in results:
        ranked = r.ranked
        if not ranked:
            continue
        entries.append({
            "shape": list(r.shape),
            "best": sparse(ranked[0].tunables),
            "tflops": round(ranked[0].tflops, 2),
            "cublas_tflops": round(r.baseline_tflops, 2) if r.baseline_tflops else None,
            "runners_up": [{"tunables": sparse(t.tunables), "tflops": round(t.tflops, 2)} for t in ranked[1:keep]],
            "trials": len(r.trials),
            "rejected": [_measured(t) for t in r.trials if t.status != "ok"],
        })
    return {
        "schema": SCHEMA,
        "kernel": spec.name,
        "gpu": environment.get("gpu", {}).get("name"),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "environment": dict(environment),
        "entries": entries,
    }
