"""The benchmark sweep: for each shape and kernel, verify first, then time.

Per shape the inputs are drawn once (fresh random data from a recorded seed) into one
prepared case (case.py): the float64 reference is computed once and every kernel runs on
the same device operands. ``run_case`` times a case only after its output passed
verification on those very operands with C poisoned and a guard band around it; a kernel
that fails gets FAILED and its error, never a speed.

The sweep runs once per precision (fp32, tf32, bf16, fp16: precision.py), each with its
own kernels and its own cuBLAS baseline; every precision sees the same data for a shape
(BF16/FP16 rounded from it). A batched shape (B independent GEMMs) runs on the batched
baselines; kernels that compute one GEMM per launch are not run on it, and the results
record them as "skipped" with that reason (``not_run``), without a case or a progress line.

The bench command runs the sweep as tasks (``CaseTask``, ``run_case_task``) in a worker
process (isolation.py); ``run_sweep`` runs it in this process for the tests.

Rounds (bench --rounds R): each shape's kernels are verified and timed R times, forward and
reversed in turn, and each kernel's rounds become one result with every sample pooled
(``merge_rounds``). Under a power cap the clock a case gets depends on how long the GPU has
been busy before it, so one fixed order favours the kernels timed first; alternating gives
each kernel every place in the order.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Iterable, NamedTuple, Sequence

from .. import kernels
from .. import precision as _precision
from ..case import Outcome, PreparedCase, run_case
from ..device_reference import products_for
from ..cuda.errors import NvrtcError
from ..kernels import precision_of
from ..kernels.target import capability_refusal
from ..problem import DEFAULT_VARIANT, GemmProblem, layout_flags
from ..session import Session
from . import energy
from .clocks import ClockMonitor
from .clocks import merge as merge_clocks
from .isolation import kept, release_kept
from .phases import Phases
from .timing import Budget, GpuTimer, TimingStats

class Step(NamedTuple):
    problem: GemmProblem
    shape_index: int  # the data seed's second half: one shape's data is the same in every precision
    precision: str
    kernels: list[str]
    not_run: tuple[tuple[str, str], ...] = ()  # (kernel, why): selected, but it cannot take this shape


def sweep_steps(kernel_names: Sequence[str], shapes: Iterable[tuple[int, ...]], *, alpha: float = 1.0,
                beta: float = 0.0, variants: Sequence[tuple[str, str, str]] = (DEFAULT_VARIANT,),
                scalings: Sequence[str] = ("tensor",), fp8_types: Sequence[str] = ("e4m3",)) -> list[Step]:
    """The sweep, in order: per precision, per shape, per variant (layout, output type,
    epilogue), the kernels that take that shape and variant.

    A kernel runs in its own precision only; a baseline that takes only batched shapes is
    left out of the unbatched ones (it would repeat the cublas row). A kernel that does not
    declare a variant is recorded as not run with why, as a batched shape's are.

    FP8 (a scaled precision) runs each of ``scalings`` in each of ``fp8_types`` (A's and B's
    formats) and its one layout, "nt" (K-major A and B, what Hopper's FP8 reads), whatever layout
    a variant names; other precisions run unscaled."""
    shapes = list(shapes)
    precisions = set(precision_of(name) for name in kernel_names)
    steps = []
    for prec in (p for p in _precision.NAMES if p in precisions):
        for index, shape in enumerate(shapes):
            m, n, k, batch = (*shape, 1)[:4]
            scaled = _precision.get(prec).scaled
            chosen = dict.fromkeys((("nt" if scaled else lay), out, epi, scaling, types)
                                   for lay, out, epi in variants for scaling in (scalings if scaled else ("none",))
                                   for types in (fp8_types if scaled else ("e4m3",)))
            for layout, out_dtype, epilogue, scaling, types in chosen:
                trans_a, trans_b = layout_flags(layout)
                problem = GemmProblem(m, n, k, alpha, beta, batch, trans_a, trans_b, out_dtype, epilogue, scaling,
                                      types)
                ours = [x for x in kernel_names if precision_of(x) == prec]
                # A kernel that computes one GEMM per launch does not run a batched shape, nor
                # one a variant it does not declare: it is recorded as skipped (with why)
                # without a case or a progress line.
                reasons = {x: why for x in ours if (why := _not_run_reason(x, problem)) is not None}
                names = [x for x in ours if x not in reasons]
                not_run = tuple((x, why) for x, why in reasons.items() if why)
                if names or not_run:
                    steps.append(Step(problem, index, prec, names, not_run))
    return steps


def _not_run_reason(name: str, problem: GemmProblem) -> str | None:
    """Why ``name`` is left out of ``problem``'s step (None: it runs there)."""
    target = kernels.get(name)
    if problem.batch > 1 and not target.takes_batch(problem.batch):
        return _batch_reason(name, problem.batch)
    if problem.batch == 1 and not target.single:
        return ""  # a batched-only baseline: left out of unbatched shapes, and not recorded
    return capability_refusal(target, problem)


def _batch_reason(name: str, batch: int) -> str:
    return f"{name} computes one GEMM per launch; batched shapes (here B={batch}) run on the batched baselines"


def case_count(steps: Sequence[Step], rounds: int = 1) -> int:
    return rounds * sum(len(step.kernels) for step in steps)


@dataclass
class CaseResult:
    kernel: str
    problem: GemmProblem
    status: str  # "ok", "FAILED" or "skipped"
    detail: str = ""
    verification: dict = field(default_factory=dict)
    timing: TimingStats | None = None
    tunables: dict = field(default_factory=dict)
    pct_of_baseline: float | None = None
    baseline: str | None = None  # the provider pct_of_baseline is against (the fastest baseline)
    precision: str = "fp32"  # precision.py name; the baseline of pct_of_baseline has the same
    mode: str = "hot"  # the sweep's timing mode (timing.py); the CPU baseline is always timed as is
    launch: dict = field(default_factory=dict)  # what ran: Launch.record() (kernel, tunables, note)
    not_run: bool = False  # left out by sweep_steps (it cannot take the shape), not by a run
    round_medians_ms: tuple[float, ...] = ()  # with --rounds: each round's median, in round order
    phases_s: dict = field(default_factory=dict)  # the worker's seconds by phase (phases.py); summed over rounds

    @classmethod
    def from_outcome(cls, name: str, problem: GemmProblem, outcome: Outcome, precision: str,
                     mode: str) -> "CaseResult":
        verification = outcome.verification.as_dict() if outcome.verification is not None else {}
        return cls(name, problem, outcome.status, outcome.detail, verification, outcome.timing,
                   outcome.tunables, precision=precision, mode=mode, launch=dict(outcome.launch))

    @property
    def tflops(self) -> float | None:
        if self.timing is None:
            return None
        return self.problem.flops / (self.timing.median_ms * 1e-3) / 1e12

    def as_dict(self) -> dict:
        return {
            "kernel": self.kernel,
            "m": self.problem.m,
            "n": self.problem.n,
            "k": self.problem.k,
            "batch": self.problem.batch,
            "dtype": self.precision,  # the precision: fp32, tf32, bf16 or fp16
            "alpha": self.problem.alpha,
            "beta": self.problem.beta,
            "layout": self.problem.layout,
            "out_dtype": self.problem.out_dtype,
            "epilogue": self.problem.epilogue,
            **({"scaling": self.problem.scaling} if self.problem.scaling != "none" else {}),
            **({"fp8_types": self.problem.fp8_types} if self.problem.fp8_types != "e4m3" else {}),
            "status": self.status,
            "detail": self.detail,
            "tunables": self.tunables,
            "launch": self.launch,
            "verification": self.verification,
            "timing": self.timing.as_dict() if self.timing else None,
            "tflops": self.tflops,
            "pct_of_cublas": self.pct_of_baseline,
            "baseline": self.baseline,
            "mode": self.timing.mode if self.timing is not None and self.timing.clock != "host" else self.mode,
            "clocks_sagged": (self.timing.clocks or {}).get("sagged") if self.timing else None,
            "energy": energy.case_energy(self.timing, self.problem.flops),
            **({"not_run": True} if self.not_run else {}),
            **({"round_medians_ms": list(self.round_medians_ms)} if self.round_medians_ms else {}),
            **({"phases_s": self.phases_s} if self.phases_s else {}),
        }


def run_sweep(session: Session, steps: Sequence[Step], *, seed: int = 0, budget: Budget = Budget(),
              mode: str = "hot", monitor: ClockMonitor | None = None, rounds: int = 1,
              on_case: Callable[[CaseResult], None] = lambda r: None) -> list[CaseResult]:
    """Verify then time every step's kernels on its shape in its precision (``sweep_steps``), in this
    process and ``session``, through the handler the bench's worker runs (``run_case_task``);
    ``monitor`` reads clocks during each case's batches; ``rounds`` as the bench's --rounds."""
    state = {"monitor": monitor, "timer": GpuTimer(session.stream, session.arch, session.device.l2_bytes,
                                                   mode=mode, monitor=monitor)}
    results: list[CaseResult] = []
    try:
        for step in steps:
            ran = []
            for task in sweep_tasks([step], seed=seed, budget=budget, mode=mode, rounds=rounds):
                ran.append(run_case_task(session, state, task, lambda: None))
                on_case(ran[-1])
            shape_results = by_kernel(step, ran)
            fill_baseline_ratio(shape_results, _precision.baselines(step.precision, step.problem.batch))
            results.extend(shape_results)
    finally:
        release_kept(state)
        state["timer"].close()
    return results


def by_kernel(step: Step, ran: Sequence[CaseResult]) -> list[CaseResult]:
    """The step's results in its kernels' order, each kernel's rounds merged into one."""
    return [merge_rounds([r for r in ran if r.kernel == name]) for name in step.kernels]


def merge_rounds(rounds: Sequence[CaseResult]) -> CaseResult:
    """One kernel's rounds on one shape as one result: the first round that did not pass (a
    kernel is only as good as its worst round), else every round's samples pooled, so the
    median is over all of them, with each round's own median kept beside it."""
    first = rounds[0]
    if len(rounds) == 1:
        return first
    bad = next((r for r in rounds if r.status != "ok" or r.timing is None), None)
    if bad is not None:
        return bad
    timings = [r.timing for r in rounds]
    stops = list(dict.fromkeys(t.stop_reason for t in timings if t.stop_reason))
    pooled = dataclasses.replace(
        timings[0], samples_ms=tuple(x for t in timings for x in t.samples_ms),
        converged=None if any(t.converged is None for t in timings) else all(t.converged for t in timings),
        stop_reason=", ".join(stops), elapsed_s=sum(t.elapsed_s for t in timings),
        clocks=merge_clocks([t.clocks for t in timings]),
        energy_windows=tuple(w for t in timings for w in t.energy_windows))
    phases = {phase: round(sum(r.phases_s.get(phase, 0.0) for r in rounds), 4)
              for phase in dict.fromkeys(p for r in rounds for p in r.phases_s)}
    return dataclasses.replace(first, timing=pooled, round_medians_ms=tuple(t.median_ms for t in timings),
                               phases_s=phases)


def fill_baseline_ratio(results: list[CaseResult], baselines: Sequence[str]) -> None:
    """Each timed result's speed as a % of the fastest timed baseline of ``baselines``."""
    timed = [r for r in results if r.kernel in baselines and r.timing]
    if not timed:
        return
    base = min(timed, key=lambda r: r.timing.median_ms)
    for r in results:
        if r.timing is not None:
            # the ratio first: (100 x t) / t can round to 99.99999999999999, t / t is 1 exactly
            r.pct_of_baseline = 100.0 * (base.timing.median_ms / r.timing.median_ms)
            r.baseline = base.kernel


# --- the sweep as tasks, for a worker process (isolation.py) ------------------------------
@dataclass(frozen=True)
class CaseTask:
    """One kernel on one step's shape: what a worker needs to verify and time it."""

    step: Step
    kernel: str
    seed: int
    budget: Budget
    mode: str


def sweep_tasks(steps: Sequence[Step], *, seed: int, budget: Budget, mode: str, rounds: int = 1) -> list[CaseTask]:
    """Per step, ``rounds`` passes over its kernels: forward, reversed, forward, ..."""
    return [CaseTask(step, name, seed, budget, mode) for step in steps for r in range(rounds)
            for name in (step.kernels if r % 2 == 0 else step.kernels[::-1])]


def kept_case(session: Session, state: dict, problem: GemmProblem, precision: str, seed: int, shape_index: int,
              guard: int = 0) -> PreparedCase:
    """The shape's case (fresh operands of ``[seed, shape_index]``, the float64 reference's products
    on the GPU where the host would be slow), kept in the worker's ``state`` while its tasks stay on
    the shape: the bench's cases and the sweep's trials alike."""
    return kept(state, (problem, shape_index, precision, seed),
                lambda: PreparedCase.random(problem, precision, [seed, shape_index], guard=guard,
                                            products=products_for(session, problem)))


def run_case_task(session: Session, state: dict, task: CaseTask, beat: Callable[[], None]) -> CaseResult:
    """The worker's handler: prepare the step's case once (kept while the step lasts), build
    the kernel, then (``beat``: the watchdog's GPU phase starts) verify and time it."""
    step, phases = task.step, Phases()
    if "timer" not in state:  # the worker's first task (run_sweep brings its own timer)
        state["monitor"] = ClockMonitor(session.device.pci_bus_id())
        state["timer"] = GpuTimer(session.stream, session.arch, session.device.l2_bytes, mode=task.mode,
                                  monitor=state["monitor"])
        state["close"] = lambda: _close_worker_state(state)
    case = kept_case(session, state, step.problem, step.precision, task.seed, step.shape_index, guard=1)
    phases.lap("case")
    try:  # compile and load before the watchdog's GPU phase: a cold build may take a while
        case.launcher(session, task.kernel)
    except Exception:  # noqa: BLE001 - run_case reports what is wrong, under this kernel's name
        pass
    phases.lap("build")
    beat()
    try:
        outcome = run_case(session, task.kernel, case, timer=state["timer"], budget=task.budget)
    except NvrtcError as exc:
        outcome = Outcome("FAILED", f"compile failed: {str(exc).splitlines()[0]}")
    phases.lap("time")
    phases.split_verify(outcome.verify_s)
    result = CaseResult.from_outcome(task.kernel, step.problem, outcome, step.precision, task.mode)
    result.phases_s = phases.seconds
    return result


def finish_sweep(session: Session, state: dict) -> dict | None:
    """The worker's last word: the clock monitor's snapshot for the JSON's environment."""
    monitor = state.get("monitor")
    return monitor.snapshot() if monitor is not None else None


def _close_worker_state(state: dict) -> None:
    release_kept(state)
    state.pop("timer").close()
    state.pop("monitor").close()


def failed_case(task: CaseTask, reason: str) -> CaseResult:
    """The result of a task whose worker faulted, hung or raised: FAILED under its own name."""
    return CaseResult(task.kernel, task.step.problem, "FAILED", reason, precision=task.step.precision,
                      mode=task.mode)


def not_run_case(step: Step, name: str, why: str, mode: str) -> CaseResult:
    """The record of a kernel the sweep did not run on ``step``'s shape, saying why."""
    return CaseResult(name, step.problem, "skipped", why, precision=step.precision, mode=mode, not_run=True)
