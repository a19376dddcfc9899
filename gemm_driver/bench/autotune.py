"""The autotune sweep: verify and time a kernel's tuning space on this GPU, keep the best per shape.

For each shape, every candidate configuration is built (a configuration that fails to
compile, spills or uses local memory is dropped with the reason), then verified once on
fresh random data against the float64 reference and only then timed, through the same
prepared case and ``run_case`` as the bench (so a trial's status is an Outcome's: ok,
FAILED or skipped). Like the bench, the sweep runs in a worker process (isolation.py), so a
configuration that faults or hangs is FAILED and the rest still run. The winners go into the per-GPU table that the ``autotuned`` kernel
reads (``kernels/tuned.py`` looks it up; ``tools/autotune.py`` writes it).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from .. import precision as _precision
from ..case import PreparedCase, run_case
from ..device_reference import products_for
from ..cuda.driver import Device, gpu_available
from ..cuda.errors import GemmDriverError
from ..kernels.build import build_all
from ..kernels.tuned import SCHEMA
from ..problem import GemmProblem, parse_shape, shape_label
from .isolation import DEFAULT_WATCHDOG_S, TaskFailure, kept, release_kept
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

    TIMES = ("phases_s", "finished_s")  # where and when, not what it measured: journaled, not tabled

    def as_dict(self) -> dict:
        timed = {name: value for name in self.TIMES if (value := getattr(self, name)) is not None}
        return {"tunables": self.tunables, "status": self.status, "detail": self.detail,
                "median_ms": self.median_ms, "tflops": self.tflops, "gpu": self.gpu, **timed}


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
            lines.append(f"  {t.tflops:7.2f} TFLOP/s {share}  {tunables_label(t.tunables)}")
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
         journal: Journal | None = None, gpus: Sequence[int] = (0,),
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
    ``on_phase`` hears how long that took ("prebuild") and the sweep after it ("sweep")."""
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
    return list(results.values())


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


def run_trial_task(session, state: dict, task: TrialTask, beat: Callable[[], None]) -> Trial:
    """The worker's handler: the shape's case (kept while the shape lasts), the build (a
    configuration that spills or does not compile is out, untimed), then verify and time."""
    if "timer" not in state:
        state["timer"] = GpuTimer(session.stream, session.arch)
        state["close"] = lambda: _close_trial_state(state)
    phases, clock = {}, time.perf_counter()

    def lap(phase: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        phases[phase], clock = round(now - clock, 4), now

    case = kept(state, (task.shape, task.shape_index, task.precision, task.seed),
                lambda: PreparedCase.random(GemmProblem(*task.shape), task.precision, [task.seed, task.shape_index],
                                            products=products_for(session, GemmProblem(*task.shape))))
    lap("case")
    if task.tunables:
        refusal = _refusal(session, task)
        lap("build")
        if refusal is not None:
            return dataclasses.replace(refusal, phases_s=phases)
    beat()
    outcome = run_case(session, task.kernel, case, tunables=task.tunables or None, timer=state["timer"],
                       budget=Budget(seconds=task.seconds))
    lap("time")
    if outcome.verify_s is not None:  # run_case verified before it timed
        phases["verify"] = round(outcome.verify_s, 4)
        phases["time"] = round(max(phases["time"] - outcome.verify_s, 0.0), 4)
    if not outcome.ok:
        return Trial(task.tunables, outcome.status, outcome.detail, phases_s=phases)
    median = outcome.timing.median_ms
    return Trial(task.tunables, "ok", "", median, case.problem.flops / median / 1e9, phases_s=phases)


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
