"""The bench command below the CLI: what to run, the sweep, and the results document.

``select_kernels`` and ``select_shapes`` turn the command line's choices into the sweep's
kernels and shapes; ``run`` verifies and times them (runner.py) with the clocks read,
annotates the records with the roofline and builds the JSON document (writers.py) with
the environment and the settings; ``write_outputs`` writes the JSON, CSV and plots.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from .. import corpus as _corpus
from .. import kernels
from .. import precision as _precision
from ..kernels import precision_of
from ..cuda.driver import Device, device_count, gpu_available
from ..kernels.build import build_all, default_arch
from . import corpus_summary, plots, report, roofline, writers
from ..cuda.errors import GemmDriverError
from ..problem import DEFAULT_VARIANT
from .bandwidth import copy_bandwidth_tbs
from .environment import collect
from .isolation import DEFAULT_WATCHDOG_S, TaskFailure
from .defaults import default_kernels, default_shapes, ladder_kernels, ladder_shapes
from .spread import Spread, in_order, runner_on
from .runner import (CaseResult, Step, by_kernel, case_count, failed_case, fill_baseline_ratio, finish_sweep,
                     not_run_case, run_case_task, sweep_steps, sweep_tasks)
from .stats import Budget

EVERY_KERNEL = "all"  # --kernels all: the ladder's kernels, as --ladder


def wants_ladder(names: Sequence[str], ladder: bool) -> bool:
    """Whether the run is the ladder (every kernel; the ladder's shapes unless some are given):
    asked for by --ladder or by --kernels all, which name every kernel and so take no others."""
    if EVERY_KERNEL in names and len(names) > 1:
        raise ValueError(f"--kernels {EVERY_KERNEL} names every kernel; give it alone, not with "
                         f"{', '.join(n for n in names if n != EVERY_KERNEL)}")
    if ladder and names and names != [EVERY_KERNEL]:
        raise ValueError(f"--ladder runs every kernel; give --ladder or --kernels {','.join(names)}, not both")
    return ladder or names == [EVERY_KERNEL]


def select_kernels(names: Sequence[str], dtypes: Sequence[str] | None, *, ladder: bool = False,
                   arch: str | None = None) -> list[str]:
    """Named kernels run in their own precision, which ``dtypes`` (when given) must select;
    without names, the selected precisions' (default: all) quick set (defaults.py) for the
    GPU's ``arch`` (default: this GPU's, or sm_90), or with ``ladder`` every kernel and
    baseline of them."""
    selected = _precision.parse_dtypes(dtypes)
    if ladder:
        return ladder_kernels(selected)
    if not names:
        return default_kernels(selected, arch or default_arch())
    for name in names:
        if dtypes and precision_of(name) not in selected:
            raise ValueError(f"kernel {name} computes in {precision_of(name)}, which --dtype "
                             f"{','.join(selected)} does not select")
    return list(names)


def select_shapes(sizes: Sequence[int], shapes: Sequence[tuple[int, int, int, int]],
                  batch: int | None, *, ladder: bool = False, corpus: str | None = None) -> list[tuple[int, int, int, int]]:
    """(M, N, K, batch) per case: the square sizes, then the shapes, else the quick run's
    shapes (the ladder's with ``ladder``), or a corpus's (``corpus``, alone); ``batch``
    batches every shape that does not name its own B."""
    if corpus:
        if sizes or shapes or batch:
            raise ValueError("--corpus takes its shapes from the corpus: leave out --sizes, --shapes and --batch")
        return [(s.m, s.n, s.k, 1) for s in _corpus.corpus(corpus)]
    chosen = [(s, s, s, 1) for s in sizes] + list(shapes) or (ladder_shapes() if ladder else default_shapes())
    return [(m, n, k, batch if batch and b == 1 else b) for m, n, k, b in chosen]


@dataclass(frozen=True)
class BenchRequest:
    kernels: list[str]
    shapes: list[tuple[int, int, int, int]]
    alpha: float = 1.0
    beta: float = 0.0
    seed: int | None = None  # None: fresh, recorded in the output
    mode: str = "hot"
    budget: Budget = Budget()
    isolation: str = "process"  # RUNNERS: a worker process the parent replaces, or "off"
    watchdog_s: float = DEFAULT_WATCHDOG_S
    rounds: int = 1  # passes over each shape's kernels, in alternating order (runner.py)
    corpus: str | None = None  # the corpus the shapes came from: its summary goes into the document
    gpus: tuple[int, ...] = (0,)  # GPU ordinals; several: one worker each, shapes shared out (spread.py)
    # (layout, out_dtype, epilogue) per case of a shape: --layout x --out-dtype x --epilogue
    variants: tuple[tuple[str, str, str], ...] = (DEFAULT_VARIANT,)
    scalings: tuple[str, ...] = ("tensor",)  # FP8 cases: --scaling (fp8.SCALINGS)
    fp8_types: tuple[str, ...] = ("e4m3",)  # FP8 cases: --fp8-types, A's and B's formats (problem.FP8_TYPES)
    prior: tuple[dict, ...] = ()  # records of an earlier, cut run of this sweep (--resume: resume.py)

    def steps(self) -> list[Step]:
        """The sweep's steps; ValueError when nothing would run."""
        steps = sweep_steps(self.kernels, self.shapes, alpha=self.alpha, beta=self.beta, variants=self.variants,
                            scalings=self.scalings, fp8_types=self.fp8_types)
        if not case_count(steps):
            if self.variants != (DEFAULT_VARIANT,):
                raise ValueError(f"nothing to run: none of {', '.join(self.kernels)} declares these layouts, output "
                                 "types and epilogues")
            raise ValueError(f"nothing to run: {', '.join(self.kernels)} on these shapes (batched baselines run "
                             "batched shapes only, e.g. --batch 8 or 8x512x512x512)")
        return steps

    def with_seed(self) -> "BenchRequest":
        seed = self.seed if self.seed is not None else int.from_bytes(os.urandom(4), "little")
        return dataclasses.replace(self, seed=seed)


@dataclass
class BenchRun:
    results: list[CaseResult]
    records: list[dict]
    document: dict
    title: str
    complete: bool = True  # False: interrupted (Ctrl-C); the document holds what finished

    @property
    def shown(self) -> list[dict]:
        """The records the table shows: every case that ran (a kernel that cannot take a
        batched shape is in the JSON as skipped, with why, not in the table)."""
        return [rec for rec in self.records if not rec.get("not_run")]

    @property
    def failed(self) -> bool:
        return any(r.status == "FAILED" for r in self.results)


def prebuild(steps: Sequence[Step]) -> int:
    """Compile every configuration of an own kernel that ``steps`` will load on this GPU into the
    on-disk cache the bench's worker reads, in threads (build_all). Returns how many
    configurations there were (0 without a GPU: the tuned tables are chosen per GPU).

    Nothing is reported here: a kernel that does not take a shape, or does not build, is
    skipped or FAILED by the sweep under its own name."""
    if not gpu_available():
        return 0
    device = Device.get(0)
    configurations = []
    for step in steps:
        for spec in (kernels.get(name) for name in step.kernels):
            if not isinstance(spec, kernels.KernelSpec) or spec.kind == "ptx" or not spec.runs_on(
                    device.compute_capability):
                continue
            try:  # as Session.launcher resolves it
                tunables = spec.choose(step.problem, device.name)[0] if spec.choose is not None else {}
                configurations.append((spec, spec.validate(step.problem, tunables)))
            except ValueError:
                continue
    return build_all(configurations, device.arch)


def select_gpus(text: str) -> tuple[int, ...]:
    """``--gpus``: 'all' (every visible GPU) or ordinals '0,2'; each must exist."""
    count = device_count()
    gpus = tuple(range(count)) if text == "all" else tuple(int(g) for g in text.split(","))
    missing = [g for g in gpus if not 0 <= g < count]
    if missing:
        raise ValueError(f"--gpus {text}: no GPU {', '.join(map(str, missing))}; this machine has {count} "
                         f"(ordinals 0-{count - 1})")
    return gpus


def _sweep_runner(request: BenchRequest, watchdog_s: float):
    """One worker on the request's GPU, or one per GPU (Spread) when it names several."""
    return runner_on(request.gpus, run_case_task, finish_sweep, isolation=request.isolation, watchdog_s=watchdog_s)


def run(request: BenchRequest, steps: Sequence[Step], on_case: Callable[[CaseResult], None] = lambda r: None,
        on_checkpoint: Callable[[BenchRun], None] = lambda b: None) -> BenchRun:
    """Verify then time every case of ``steps`` in a worker process (isolation.py), so that
    a kernel that faults or hangs is FAILED under its own name and the sweep goes on.

    ``on_checkpoint`` gets the run so far (``complete`` False) after every finished step,
    for writing results as they come; Ctrl-C ends the sweep and returns what finished.
    ``request.seed`` must be set (with_seed)."""
    started = time.monotonic()
    prebuilt = prebuild(steps)
    built = time.monotonic()
    tasks = sweep_tasks(steps, seed=request.seed, budget=request.budget, mode=request.mode, rounds=request.rounds)
    # A case's GPU phase may take its whole time budget: the watchdog never fires sooner than 3x it.
    watchdog_s = max(request.watchdog_s, 3 * request.budget.wall_limit_s)
    runner = _sweep_runner(request, watchdog_s)
    env = collect()
    env["isolation"] = request.isolation
    if request.corpus:  # small-M shapes are judged against the bandwidth a copy reaches
        try:
            env["copy_bandwidth_tbs"] = copy_bandwidth_tbs()
        except GemmDriverError as exc:
            env["copy_bandwidth_tbs"] = None
            env["copy_bandwidth_unavailable"] = str(exc).splitlines()[0]
    results: list[CaseResult] = []
    groups, start = [], 0  # a shape's cases run on one GPU: they share its operands and reference
    for step in steps:
        groups.append(range(start, start + case_count([step], request.rounds)))
        start = groups[-1].stop
    ran = in_order(runner, tasks, groups, request.gpus[0])
    complete = False
    try:
        for step in steps:
            step_results = []
            for _ in range(case_count([step], request.rounds)):
                index, result, gpu = next(ran)
                if isinstance(result, TaskFailure):
                    result = failed_case(tasks[index], result.reason)
                if len(request.gpus) > 1:
                    result.launch = {**result.launch, "gpu": gpu}
                step_results.append(result)
                on_case(result)
            step_results = by_kernel(step, step_results)
            fill_baseline_ratio(step_results, _precision.baselines(step.precision, step.problem.batch))
            step_results += [not_run_case(step, name, why, request.mode) for name, why in step.not_run]
            results += step_results
            on_checkpoint(_assemble(request, results, env, complete=False))
        next(ran, None)  # the runner's end: the worker's last word (clocks), then it stops
        complete = True
    except KeyboardInterrupt:
        pass
    finally:
        ran.close()  # stops the worker if the sweep ended early
    if isinstance(runner, Spread):
        words = {gpu: word for gpu, word in runner.last_words.items() if word}
        runner.last_word = words.get(min(words)) if words else None
        env["clocks_per_gpu"], env["gpus_lost"] = words, runner.lost
        env["workers_started"] = sum(runner.workers_started.values())
    else:
        env["workers_started"] = runner.workers_started
    env["clocks"] = runner.last_word or {"available": False, "unavailable": "the sweep did not finish"}
    env["gpus_used"] = list(request.gpus)
    # where a run's wall time went: the compiles before the sweep, and the sweep (worker start,
    # operands and float64 references, verification, timing and energy windows)
    env["phases_s"] = {"prebuild": round(built - started, 2), "prebuilt_configurations": prebuilt,
                       "sweep": round(time.monotonic() - built, 2)}
    return _assemble(request, results, env, complete=complete)


def settings_of(request: BenchRequest) -> dict:
    """The request as the JSON's ``settings`` records it (with the precisions that ran added)."""
    return {"kernels": list(request.kernels), "shapes": [list(s) for s in request.shapes],
            "alpha": request.alpha, "beta": request.beta, "seed": request.seed, "mode": request.mode,
            **request.budget.settings(), "absent_baselines": kernels.absent_baselines(),
            "isolation": request.isolation, "watchdog_s": request.watchdog_s, "rounds": request.rounds,
            "variants": [list(v) for v in request.variants], "scalings": list(request.scalings),
            "fp8_types": list(request.fp8_types)}


def _assemble(request: BenchRequest, results: list[CaseResult], env: dict, *, complete: bool) -> BenchRun:
    """The records (with the roofline) and the JSON document of ``results``."""
    gpu = env.get("gpu")
    gpu_name = gpu.get("name", "unknown GPU") if isinstance(gpu, dict) else "unknown GPU"
    recs = roofline.annotate_records(report.records(results), gpu_name)
    recs = [*request.prior, *recs]
    if request.prior:
        env["resumed_records"] = len(request.prior)
    budget = request.budget
    title = (f"{gpu_name}  mode={request.mode}  alpha={request.alpha:g} beta={request.beta:g}  "
             f"seed={request.seed}  noise target {budget.noise:.2%}, at most {budget.seconds:g} s per case")
    settings = {**settings_of(request), "dtypes": sorted({r["dtype"] for r in recs})}
    document = writers.document(recs, env, settings)
    document["complete"] = complete
    if request.corpus:
        document["corpus"] = {"name": request.corpus,
                              "summary": [s.as_dict() for s in corpus_summary.summarize(document)]}
    document["roofline"] = roofline.device_summary(gpu_name)
    return BenchRun(list(results), recs, document, title, complete)


def check_outputs(json_path: str | None, csv_path: str | None, plot_dir: str | None) -> None:
    """Fail before a long sweep, not after it, when a result file cannot be written there:
    a directory where a file goes, or a place this process cannot write (empty names are
    refused by the command line's ``arguments.nonempty``)."""
    for path, flag in ((json_path, "--json"), (csv_path, "--csv")):
        if path:
            if os.path.isdir(path):
                raise ValueError(f"{flag} takes a file path, but {path!r} is a directory")
            _probe_writable(Path(path).parent, flag, path)
    if plot_dir:
        plots.check_output_dir(plot_dir)
        _probe_writable(Path(plot_dir), "--plot", plot_dir)


def _probe_writable(directory: Path, flag: str, given: str) -> None:
    """Create (if needed) ``directory`` and a scratch file in it: permissions alone do not
    tell (root ignores them, a read-only mount does not)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".gemm_driver-probe-"):
            pass
    except OSError as exc:
        raise ValueError(f"{flag} {given}: cannot write into {str(directory) or '.'} "
                         f"({exc.strerror or type(exc).__name__})") from None


def write_outputs(bench: BenchRun, json_path: str | None, csv_path: str | None, plot_dir: str | None,
                  *, plots_too: bool = True) -> list[str]:
    """Write what was asked for, each file replaced atomically (a reader, or a run cut off
    while writing, never sees half a file); returns the paths written."""
    written = []
    if json_path:
        _replace(json_path, lambda tmp: writers.write_json(tmp, bench.document))
        written.append(json_path)
    if plot_dir and plots_too:
        written += [str(path) for path in plots.write_plots(bench.document, plot_dir)]  # corpus.png too
    if csv_path:
        _replace(csv_path, lambda tmp: writers.write_csv(tmp, bench.records))
        written.append(csv_path)
    return written


def _replace(path: str, write: Callable[[str], None]) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
