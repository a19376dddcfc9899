"""Bench output in the terminal: records, the ladder, the table and the progress display.

Everything here works on *records*, the JSON-ready dicts of ``CaseResult.as_dict()``
(plus the ladder fields ``add_ladder`` derives), so the table shows exactly what the
JSON and CSV files hold, and can be rebuilt from a saved file. Fields other parts of the
harness may add (``dtype``, ``batch``, ``pct_of_peak``) are read with ``.get`` and shown
when present.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .. import kernels
from ..kernels.simt.warptiling import schedule_label
from ..problem import shape_label as problem_shape_label
from . import tables
from .runner import CaseResult


def records(results: Iterable[CaseResult]) -> list[dict]:
    """JSON-ready dicts of the results, with the ladder fields added."""
    out = [r.as_dict() for r in results]
    add_ladder(out)
    return out


def shape_label(record: dict) -> str:
    return problem_shape_label(record["m"], record["n"], record["k"], record.get("batch") or 1)


def group_key(record: dict) -> tuple:
    """Cases that are comparable with each other: same shape, batch, precision and mode."""
    return (record["m"], record["n"], record["k"], record.get("batch") or 1, record.get("dtype") or "fp32",
            record.get("mode") or "hot")


def add_ladder(recs: Sequence[dict], ladder: Sequence[str] | None = None) -> None:
    """Set ``previous_rung`` and ``speedup_vs_previous`` on each ladder kernel's record.

    The previous rung is the nearest earlier entry of ``kernels.LADDER`` that ran OK on the
    same shape, batch, precision and mode; a rung with none before it gets None.
    """
    order = {name: i for i, name in enumerate(ladder if ladder is not None else [s.name for s in kernels.LADDER])}
    timed = {}
    for rec in recs:
        if rec["status"] == "ok" and rec.get("timing") and rec["kernel"] in order:
            timed.setdefault(group_key(rec), {})[rec["kernel"]] = rec
    for rec in recs:
        rec["previous_rung"], rec["speedup_vs_previous"] = None, None
        if rec["kernel"] not in order or rec["status"] != "ok" or not rec.get("timing"):
            continue
        earlier = [name for name in timed.get(group_key(rec), {}) if order[name] < order[rec["kernel"]]]
        if earlier:
            previous = timed[group_key(rec)][max(earlier, key=order.__getitem__)]
            rec["previous_rung"] = previous["kernel"]
            rec["speedup_vs_previous"] = previous["timing"]["median_ms"] / rec["timing"]["median_ms"]


ROUND_SPREAD = 1.02  # --rounds: a spread of round medians above 2% is worth a flag


def _flags(rec: dict) -> list[str]:
    timing = rec.get("timing") or {}
    flags = []
    if timing.get("converged") is False:
        noise = timing.get("noise")
        flags.append(f"not converged ({timing.get('stop_reason')}, noise {_percent(noise)})")
    clocks = timing.get("clocks") or {}
    if clocks.get("sagged"):
        flags.append("clocks sagged: " + "; ".join(clocks.get("why", [])))
    rounds = rec.get("round_medians_ms") or []
    if len(rounds) > 1 and max(rounds) > ROUND_SPREAD * min(rounds):
        flags.append(f"rounds differ by {max(rounds) / min(rounds) - 1:.1%}")
    return flags


def _status(rec: dict) -> str:
    if rec["status"] == "FAILED":
        return f"[red]FAILED[/red]: {rec['detail']}"
    if rec["status"] != "ok":
        return f"[yellow]{rec['status']}[/yellow]: {rec['detail']}"
    flags = _flags(rec)
    return "ok" + ("  [yellow]" + "; ".join(flags) + "[/yellow]" if flags else "")


def _num(value, fmt: str) -> str:
    return format(value, fmt) if value is not None else "-"


def _percent(fraction: float | None) -> str:
    return f"{100 * fraction:.2f}%" if fraction is not None else "-"


COLUMNS = (  # header, justify, cell(record)
    ("kernel", "left", lambda r: r["kernel"]),
    # data-parallel, split-K or stream-K: what the tuned table (or the rung) chose
    ("schedule", "left", lambda r: schedule_label((r.get("launch") or {}).get("tunables") or {}) or "-"),
    ("dtype", "left", lambda r: r.get("dtype") or "-"),
    ("shape MxNxK", "left", shape_label),
    ("median ms", "right", lambda r: _num((r.get("timing") or {}).get("median_ms"), ".4f")),
    ("noise", "right", lambda r: _percent((r.get("timing") or {}).get("noise"))),
    ("samples", "right", lambda r: f"{t['samples']}x{t['launches_per_sample']}" if (t := r.get("timing")) else "-"),
    ("GFLOP/s", "right", lambda r: _num(r["tflops"] * 1e3 if r.get("tflops") else None, ",.0f")),
    ("x prev rung", "right", lambda r: _num(r.get("speedup_vs_previous"), ".2f")),
    ("% cuBLAS", "right", lambda r: _num(r.get("pct_of_cublas"), ".1f")),
    ("% peak", "right", lambda r: _num(r.get("pct_of_peak"), ".1f")),
    ("err/bound", "right", lambda r: _num((r.get("verification") or {}).get("max_error_ratio")
                                          if (r.get("verification") or {}).get("ok") else None, ".3f")),
    ("status", "left", _status),
)


def shown_columns(recs: Sequence[dict]) -> list[tuple]:
    """COLUMNS less dtype, schedule and % peak when no record has them."""
    has = {"dtype": any(r.get("dtype") for r in recs),
           "% peak": any(r.get("pct_of_peak") is not None for r in recs),
           "schedule": any(schedule_label((r.get("launch") or {}).get("tunables") or {}) for r in recs)}
    return [c for c in COLUMNS if has.get(c[0], True)]


def table(recs: Sequence[dict], title: str = "") -> Table:
    shown = shown_columns(recs)
    t = Table(title=title or None, header_style="bold")
    for header, justify, _ in shown:
        t.add_column(header, justify=justify, no_wrap=header != "status")
    previous = None
    for rec in recs:
        section = group_key(rec)[:5]
        if previous is not None and section != previous:
            t.add_section()
        previous = section
        t.add_row(*(cell(rec) for _, _, cell in shown))
    return t


def print_table(results: Sequence[CaseResult | dict], console: Console | None = None, title: str = "") -> None:
    """The table, fitted to a terminal, or whole (natural width, one row per line) in a
    file, a pipe or a CI log."""
    recs = [r for r in results if isinstance(r, dict)] or records(results)
    tables.print_table(console or Console(), table(recs, title))


class SweepProgress:
    """A progress bar over the sweep on a terminal; one plain line per finished case otherwise.

    A redrawn bar turns into a pile of control codes in a log file or a CI transcript, so
    off a terminal each case is announced once, as a line that reads well in a log.
    """

    def __init__(self, console: Console, total: int):
        self.console, self.total, self.done = console, total, 0
        self._progress = None
        if console.is_terminal:
            self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), console=console, transient=True)
            self._task = self._progress.add_task("bench", total=total)

    def __enter__(self) -> "SweepProgress":
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()

    def advance(self, result: CaseResult) -> None:
        self.done += 1
        label = f"{result.kernel} {result.problem.label}"
        if self._progress is not None:
            self._progress.update(self._task, advance=1, description=label)
            return
        rec = result.as_dict()
        what = f"{rec['tflops']:.3f} TFLOP/s" if rec.get("tflops") else rec["status"]
        self.console.print(f"[{self.done}/{self.total}] {label}: {what}", markup=False, highlight=False, soft_wrap=True)
