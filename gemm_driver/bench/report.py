"""Bench output in the terminal: records, the ladder, the table and the progress display.

Everything here works on *records*, the JSON-ready dicts of ``CaseResult.as_dict()``
(plus the ladder fields ``add_ladder`` derives), so the table shows exactly what the
JSON and CSV files hold, and can be rebuilt from a saved file. Fields other parts of the
harness may add (``dtype``, ``batch``, ``pct_of_peak``, ``energy``) are read with ``.get``
and shown when present. Long notes are numbered footnotes under the table (tables.py).
"""

from __future__ import annotations

from typing import Iterable, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from .. import kernels
from ..kernels.simt.warptiling import schedule_label
from ..problem import shape_label as problem_shape_label
from . import tables
from .tables import Column
from .runner import CaseResult
from .writers import record_variant, record_variant_label


def records(results: Iterable[CaseResult]) -> list[dict]:
    """JSON-ready dicts of the results, with the ladder fields added."""
    out = [r.as_dict() for r in results]
    add_ladder(out)
    return out


def shape_label(record: dict) -> str:
    return problem_shape_label(record["m"], record["n"], record["k"], record.get("batch") or 1)


def group_key(record: dict) -> tuple:
    """Cases that are comparable with each other: same shape, batch, precision, layout,
    output type, epilogue and mode."""
    return (record["m"], record["n"], record["k"], record.get("batch") or 1, record.get("dtype") or "fp32",
            *record_variant(record), record.get("mode") or "hot")


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


def notes(rec: dict) -> list[str]:
    """The record's notes, each in full: why it did not run OK, its timing flags, the
    roofline's and the launch's notes, an energy reading not to trust."""
    out = [f"{rec['status']}: {rec['detail']}"] if rec["status"] != "ok" else []
    out += _flags(rec)
    out += [rec.get("roofline_note"), (rec.get("launch") or {}).get("note")]
    energy = _energy(rec)
    if energy.get("joules_per_gemm") is not None and not energy.get("trusted"):
        out.append("energy reading not trusted" + (f": {energy['note']}" if energy.get("note") else ""))
    return [note for note in out if note]


def _status(rec: dict) -> Text:
    return Text(rec["status"], style={"ok": "", "FAILED": "red"}.get(rec["status"], "yellow"))


def _num(value, fmt: str) -> str:
    return format(value, fmt) if value is not None else "-"


def _percent(fraction: float | None) -> str:
    return f"{100 * fraction:.2f}%" if fraction is not None else "-"


def _joules(value: float | None) -> str:
    """'3.12 mJ', '1.05 J': the energy of one GEMM."""
    if value is None:
        return "-"
    return f"{value:.3g} J" if value >= 1 else f"{value * 1e3:.3g} mJ"


def _energy(rec: dict) -> dict:
    return rec.get("energy") or {}


def _kernel(rec: dict) -> str:
    """The kernel, and for a split-K or stream-K family how the tuned table (or the rung)
    splits the work: 'warptiled split-K 4'."""
    schedule = schedule_label((rec.get("launch") or {}).get("tunables") or {})
    return f"{rec['kernel']} {schedule}" if schedule else rec["kernel"]


def _error_ratio(rec: dict) -> str:
    verification = rec.get("verification") or {}
    return _num(verification.get("max_error_ratio") if verification.get("ok") else None, ".3f")


def _any(field):
    return lambda recs: any(field(r) is not None for r in recs)


# Column, cell(record), shown(records): None shows it always. Ranks say what a narrow
# terminal leaves out first; the kernel, the shape, the time, the speed and the status stay.
COLUMNS = (
    (Column("kernel"), _kernel, None),
    (Column("dtype"), lambda r: r.get("dtype") or "-", _any(lambda r: r.get("dtype"))),
    (Column("shape MxNxK"), shape_label, None),
    (Column("layout out\nepilogue"), lambda r: record_variant_label(r) or "-",
     lambda recs: any(record_variant_label(r) for r in recs)),
    (Column("median\nms", "right"), lambda r: _num((r.get("timing") or {}).get("median_ms"), ".4f"), None),
    (Column("noise", "right", drop=2), lambda r: _percent((r.get("timing") or {}).get("noise")), None),
    (Column("samples", "right", drop=1),
     lambda r: f"{t['samples']}x{t['launches_per_sample']}" if (t := r.get("timing")) else "-", None),
    (Column("GFLOP/s", "right"), lambda r: _num(r["tflops"] * 1e3 if r.get("tflops") else None, ",.0f"), None),
    (Column("x prev\nrung", "right", drop=5), lambda r: _num(r.get("speedup_vs_previous"), ".2f"), None),
    (Column("%\ncuBLAS", "right"), lambda r: _num(r.get("pct_of_cublas"), ".1f"), None),
    (Column("%\npeak", "right", drop=3), lambda r: _num(r.get("pct_of_peak"), ".1f"),
     _any(lambda r: r.get("pct_of_peak"))),
    (Column("err/\nbound", "right", drop=6), _error_ratio, None),
    (Column("energy\nper GEMM", "right"), lambda r: _joules(_energy(r).get("joules_per_gemm")),
     _any(lambda r: _energy(r).get("joules_per_gemm"))),
    (Column("TFLOP/s\nper W", "right", drop=4), lambda r: _num(_energy(r).get("tflops_per_watt"), ".2f"),
     _any(lambda r: _energy(r).get("tflops_per_watt"))),
    (Column("status"), _status, None),
)


def shown_columns(recs: Sequence[dict]) -> list[tuple]:
    """(Column, cell) of the COLUMNS some record has a value for (dtype, % peak and energy
    are absent from older files)."""
    return [(column, cell) for column, cell, shown in COLUMNS if shown is None or shown(recs)]


def print_table(results: Sequence[CaseResult | dict], console: Console | None = None, title: str = "") -> None:
    """One row per case, a section per shape, precision and mode, the notes numbered below;
    fitted to a terminal, at most ``tables.LOG_WIDTH`` columns in a file, a pipe or a log."""
    recs = [r for r in results if isinstance(r, dict)] or records(results)
    shown = shown_columns(recs)
    footnotes = tables.Footnotes()
    rows: list[list | None] = []
    for i, rec in enumerate(recs):
        if i and group_key(rec)[:5] != group_key(recs[i - 1])[:5]:  # a new section
            rows.append(None)
        rows.append([cell(rec) for _, cell in shown] + [footnotes.mark(notes(rec))])
    columns = [column for column, _ in shown] + [Column("notes")]
    if not footnotes.numbers:  # no record has a note: no column for them
        columns, rows = columns[:-1], [row[:-1] if row else row for row in rows]
    tables.print_fitted(console or Console(), columns, rows, title=title, notes=footnotes)


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
        rec = result.as_dict()
        # the variant (layout, D, epilogue, FP8 scaling and formats) tells apart a shape's cases
        label = " ".join(filter(None, (result.kernel, result.problem.label, record_variant_label(rec))))
        if self._progress is not None:
            self._progress.update(self._task, advance=1, description=label)
            return
        what = f"{rec['tflops']:.3f} TFLOP/s" if rec.get("tflops") else rec["status"]
        self.console.print(f"[{self.done}/{self.total}] {label}: {what}", markup=False, highlight=False, soft_wrap=True)
