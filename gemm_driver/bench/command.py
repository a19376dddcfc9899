"""The bench command below the CLI: what to run, the sweep, and the results document.

``select_kernels`` and ``select_shapes`` turn the command line's choices into the sweep's
kernels and shapes; ``run`` verifies and times them (runner.py) with the clocks read,
annotates the records with the roofline and builds the JSON document (writers.py) with
the environment and the settings; ``write_outputs`` writes the JSON, CSV and plots.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Sequence

from .. import kernels
from .. import precision as _precision
from ..kernels import precision_of
from ..session import Session
from . import plots, report, roofline, writers
from .clocks import ClockMonitor
from .environment import collect
from .runner import CaseResult, Step, case_count, default_kernels, default_shapes, plan, run_sweep
from .stats import Budget


def select_kernels(names: Sequence[str], dtypes: Sequence[str] | None) -> list[str]:
    """Named kernels run in their own precision, which ``dtypes`` (when given) must select;
    without names, every kernel and baseline of the selected precisions (default: all)."""
    selected = _precision.parse_dtypes(dtypes)
    if not names:
        return default_kernels(selected)
    for name in names:
        if dtypes and precision_of(name) not in selected:
            raise ValueError(f"kernel {name} computes in {precision_of(name)}, which --dtype "
                             f"{','.join(selected)} does not select")
    return list(names)


def select_shapes(sizes: Sequence[int], shapes: Sequence[tuple[int, int, int, int]],
                  batch: int | None) -> list[tuple[int, int, int, int]]:
    """(M, N, K, batch) per case: the square sizes, then the shapes, else the default sweep;
    ``batch`` batches every shape that does not name its own B."""
    chosen = [(s, s, s, 1) for s in sizes] + list(shapes) or default_shapes()
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

    def plan(self) -> list[Step]:
        """The sweep's steps; ValueError when nothing would run."""
        steps = plan(self.kernels, self.shapes, alpha=self.alpha, beta=self.beta)
        if not case_count(steps):
            raise ValueError(f"nothing to run: {', '.join(self.kernels)} on these shapes (batched baselines run "
                             "batched shapes only, e.g. --batch 8 or 8x512x512x512)")
        return steps

    def with_seed(self) -> "BenchRequest":
        seed = self.seed if self.seed is not None else int.from_bytes(os.urandom(4), "little")
        return BenchRequest(self.kernels, self.shapes, self.alpha, self.beta, seed, self.mode, self.budget)


@dataclass
class BenchRun:
    results: list[CaseResult]
    records: list[dict]
    document: dict
    title: str

    @property
    def failed(self) -> bool:
        return any(r.status == "FAILED" for r in self.results)


def run(session: Session, request: BenchRequest, steps: Sequence[Step],
        on_case: Callable[[CaseResult], None] = lambda r: None) -> BenchRun:
    """Verify then time every case of ``steps``; ``request.seed`` must be set (with_seed)."""
    monitor = ClockMonitor(session.device.pci_bus_id())
    try:
        results = run_sweep(session, steps, seed=request.seed, budget=request.budget, mode=request.mode,
                            monitor=monitor, on_case=on_case)
        env = collect(session.device)
        env["clocks"] = monitor.snapshot()
    finally:
        monitor.close()
    recs = roofline.annotate_records(report.records(results), env["gpu"]["name"])
    budget = request.budget
    title = (f"{env['gpu']['name']}  mode={request.mode}  alpha={request.alpha:g} beta={request.beta:g}  "
             f"seed={request.seed}  noise target {budget.noise:.2%}, at most {budget.seconds:g} s per case")
    settings = {"kernels": list(request.kernels), "shapes": [list(s) for s in request.shapes],
                "alpha": request.alpha, "beta": request.beta, "seed": request.seed, "mode": request.mode,
                **budget.settings(), "dtypes": sorted({r["dtype"] for r in recs}),
                "absent_baselines": kernels.absent_baselines()}
    document = writers.document(recs, env, settings)
    document["roofline"] = roofline.device_summary(env["gpu"]["name"])
    return BenchRun(results, recs, document, title)


def check_outputs(json_path: str | None, csv_path: str | None, plot_dir: str | None) -> None:
    """Fail before a long sweep, not after it, when a result file cannot be written there."""
    for path, flag in ((json_path, "--json"), (csv_path, "--csv")):
        if path and os.path.isdir(path):
            raise ValueError(f"{flag} takes a file path, but {path!r} is a directory")
    if plot_dir:
        plots.check_output_dir(plot_dir)


def write_outputs(bench: BenchRun, json_path: str | None, csv_path: str | None, plot_dir: str | None) -> list[str]:
    """Write what was asked for; returns the paths written."""
    written = []
    if json_path:
        writers.write_json(json_path, bench.document)
        written.append(json_path)
    if plot_dir:
        written += [str(path) for path in plots.write_plots(bench.document, plot_dir)]
    if csv_path:
        writers.write_csv(csv_path, bench.records)
        written.append(csv_path)
    return written
