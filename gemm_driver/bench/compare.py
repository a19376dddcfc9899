"""Compare two bench JSON files case by case: FASTER, SLOWER, SAME or NOISY.

Cases are matched on kernel, shape, batch, dtype, mode and tunables (a tunable the kernel
gained since a file was written counts at its default there). For each run we
take an interval for its median: the distribution-free 95% interval (``ci_low_ms`` ..
``ci_high_ms``, schema bench/2), or [p10, p90] when a file has no interval (bench/1,
or fewer than six samples). The speed-up of NEW over OLD, r = old median / new median,
then lies in [old_low / new_high, old_high / new_low], and with threshold t:

- FASTER: that whole range is above 1 (the intervals are apart) and r > 1 + t;
- SLOWER: the whole range is below 1 and r < 1 / (1 + t);
- SAME:   the whole range lies within [1 / (1 + t), 1 + t] (any change is smaller than
          t), or the intervals are apart but r is within the threshold (a real change
          smaller than t);
- NOISY:  otherwise: the intervals overlap and are too wide to rule out a change
          larger than t. Measure longer (--max-time) or on a quieter machine.

A case that did not run OK in one of the files gets that status instead of a verdict.
Where both files measured a case's energy (the record's ``energy`` field, absent from
older files), the table adds the change of its joules per GEMM, new against old.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .. import precision as _precision
from ..problem import shape_label, variant_label
from .writers import load, record_scaled, record_variant

DEFAULT_THRESHOLD = 0.02
VERDICTS = ("FASTER", "SLOWER", "SAME", "NOISY")


def recorded_tunables(rec: dict) -> dict:
    """The record's tunables, with those its registered kernel gained since the file was
    written at their defaults (a run before a tunable existed ran as its default does), so a
    file still matches the runs after it. Records whose tunables are not the kernel's are left
    as they are."""
    tunables = dict(rec.get("tunables") or {})
    from ..kernels import KERNELS  # the registry imports the whole kernel layer: only when comparing

    spec = KERNELS.get(rec["kernel"])
    if spec is None or not tunables:
        return tunables
    declared = {t.name: t.default for t in spec.tunables}
    if not set(tunables) <= set(declared):
        return tunables
    return {**declared, **tunables}


def case_key(rec: dict, filled: bool = False) -> tuple:
    """The record's case as compare shows it (its tunables as recorded); ``filled``: as it is
    matched (``recorded_tunables``)."""
    tunables = tuple(sorted((recorded_tunables(rec) if filled else rec.get("tunables") or {}).items()))
    dtype = _precision.from_record(rec["dtype"]) if rec.get("dtype") else "fp32"
    return (rec["kernel"], rec["m"], rec["n"], rec["k"], rec.get("batch") or 1, dtype, record_variant(rec),
            record_scaled(rec), rec.get("mode") or (rec.get("timing") or {}).get("mode") or "hot", tunables)


def describe_key(key: tuple) -> str:
    kernel, m, n, k, batch, dtype, variant, scaling, mode, tunables = key
    scaled = [f"{scaling} scaling"] if scaling != "none" else []  # FP8: the same kernel in several modes and formats
    parts = [kernel, shape_label(m, n, k, batch), dtype, *filter(None, [variant_label(*variant)]), *scaled, mode]
    if tunables:
        parts.append(",".join(f"{name}={value}" for name, value in tunables))
    return " ".join(parts)


def interval(timing: dict) -> tuple[float, float, float]:
    """(low, median, high) of one case's median time in ms."""
    median = timing["median_ms"]
    low, high = timing.get("ci_low_ms"), timing.get("ci_high_ms")
    if low is None or high is None:
        low, high = timing.get("p10_ms", median), timing.get("p90_ms", median)
    return low, median, high


def verdict(old: dict, new: dict, threshold: float = DEFAULT_THRESHOLD) -> tuple[str, float, tuple[float, float]]:
    """(verdict, speed-up of new over old, its plausible range) from two timing dicts."""
    o_low, o_med, o_high = interval(old)
    n_low, n_med, n_high = interval(new)
    ratio = o_med / n_med
    low, high = o_low / n_high, o_high / n_low
    if low > 1 and ratio > 1 + threshold:
        return "FASTER", ratio, (low, high)
    if high < 1 and ratio < 1 / (1 + threshold):
        return "SLOWER", ratio, (low, high)
    apart = low > 1 or high < 1
    within = low >= 1 / (1 + threshold) and high <= 1 + threshold
    if within or (apart and 1 / (1 + threshold) <= ratio <= 1 + threshold):
        return "SAME", ratio, (low, high)
    return "NOISY", ratio, (low, high)


@dataclass
class Row:
    key: tuple
    verdict: str  # one of VERDICTS, or e.g. "FAILED in new"
    old_ms: float | None = None
    new_ms: float | None = None
    ratio: float | None = None
    ratio_range: tuple[float, float] | None = None
    old_energy: dict | None = None  # the records' energy fields, where they have one
    new_energy: dict | None = None

    def energy_change(self) -> float | None:
        """new / old joules per GEMM - 1, when both files have a reading."""
        old, new = ((e or {}).get("joules_per_gemm") for e in (self.old_energy, self.new_energy))
        return new / old - 1 if old and new is not None else None


@dataclass
class Comparison:
    rows: list[Row]
    only_old: list[tuple]
    only_new: list[tuple]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in self.rows:
            out[row.verdict] = out.get(row.verdict, 0) + 1
        return out


def _status_row(key: tuple, old: dict, new: dict) -> Row | None:
    """A row for a case that lacks a speed in either file, else None."""
    bad = [f"{rec['status']} in {which}" for which, rec in (("old", old), ("new", new))
           if rec["status"] != "ok" or not rec.get("timing")]
    if not bad:
        return None
    old_ms, new_ms = ((rec.get("timing") or {}).get("median_ms") for rec in (old, new))
    return Row(key, ", ".join(bad), old_ms, new_ms)


def compare_records(old: Sequence[dict], new: Sequence[dict], threshold: float = DEFAULT_THRESHOLD) -> Comparison:
    old_by = {case_key(r, filled=True): r for r in old}
    new_by = {case_key(r, filled=True): r for r in new}
    rows = []
    for match, o in old_by.items():
        if match not in new_by:
            continue
        n = new_by[match]
        key = case_key(n)  # shown as the new run recorded it
        row = _status_row(key, o, n)
        if row is None:
            word, ratio, span = verdict(o["timing"], n["timing"], threshold)
            row = Row(key, word, o["timing"]["median_ms"], n["timing"]["median_ms"], ratio, span)
        row.old_energy, row.new_energy = o.get("energy"), n.get("energy")
        rows.append(row)
    return Comparison(rows, [case_key(r) for k, r in old_by.items() if k not in new_by],
                      [case_key(r) for k, r in new_by.items() if k not in old_by])


def compare_files(old_path: str, new_path: str, threshold: float = DEFAULT_THRESHOLD) -> Comparison:
    return compare_records(load(old_path)["results"], load(new_path)["results"], threshold)


STYLE = {"FASTER": "green", "SLOWER": "red", "SAME": "", "NOISY": "yellow"}


def _notes(row: Row) -> list[str]:
    """The row's long parts, as footnotes: its tunables, an energy reading not to trust."""
    tunables = row.key[-1]
    out = ["tunables " + ",".join(f"{name}={value}" for name, value in tunables)] if tunables else []
    if row.energy_change() is not None:
        for which, energy in (("old", row.old_energy), ("new", row.new_energy)):
            if not energy.get("trusted"):
                out.append(f"energy in {which} not trusted" + (f": {energy['note']}" if energy.get("note") else ""))
    return out


def print_comparison(result: Comparison, console, old_name: str, new_name: str, threshold: float) -> None:
    """One table row, on one line, per case in both files (kernel, shape and precision in
    columns of their own, tunables as numbered notes below); then the one-sided cases and
    the count of each verdict. Fitted to a terminal, at most tables.LOG_WIDTH columns
    elsewhere (bench/tables.py)."""
    from rich.text import Text

    from .tables import Column, Footnotes, print_fitted, print_text

    modes = {row.key[8] for row in result.rows}
    energy = any(row.energy_change() is not None for row in result.rows)
    variants = any(_variant_cell(row.key) != "-" for row in result.rows)
    footnotes = Footnotes()
    rows = []
    for row in result.rows:
        kernel, m, n, k, batch, dtype, _, _, mode, _ = row.key
        style = STYLE.get(row.verdict, "red")
        change = row.energy_change()
        rows.append([kernel, shape_label(m, n, k, batch), dtype, _variant_cell(row.key), mode,
                     _ms(row.old_ms), _ms(row.new_ms),
                     f"{row.ratio:.3f}" if row.ratio is not None else "-",
                     f"{row.ratio_range[0]:.3f}-{row.ratio_range[1]:.3f}" if row.ratio_range else "-",
                     Text(row.verdict, style=style), f"{change:+.1%}" if change is not None else "-",
                     footnotes.mark(_notes(row))])
    columns = [Column("kernel"), Column("shape MxNxK"), Column("dtype"), Column("layout out\nepilogue"),
               Column("mode"), Column("old ms", "right"), Column("new ms", "right"), Column("speed-up", "right"),
               Column("plausible\nrange", "right", drop=1), Column("verdict"), Column("J/GEMM\nchange", "right", drop=2),
               Column("notes")]
    # a mode every case shares goes to the title; variants, energy and notes only where some case has them
    optional = {3: variants, 4: len(modes) > 1, 10: energy, 11: bool(footnotes.numbers)}
    shown = [i for i in range(len(columns)) if optional.get(i, True)]
    mode_note = f"{next(iter(modes))} mode; " if len(modes) == 1 else ""
    print_fitted(console, [columns[i] for i in shown], [[row[i] for i in shown] for row in rows],
                 title=f"{new_name} against {old_name} ({mode_note}threshold {threshold:.1%}; "
                       "speed-up = old / new median)", notes=footnotes)
    for label, keys in ((f"only in {old_name}", result.only_old), (f"only in {new_name}", result.only_new)):
        for key in keys:
            print_text(console, f"{label}: {describe_key(key)}")
    counts = result.counts()
    print_text(console, ", ".join(f"{counts[v]} {v}" for v in sorted(counts)) or "no case in both files")


def _variant_cell(key: tuple) -> str:
    """'nt bf16 bias_gelu', with an FP8 case's scaling mode (and formats) after it; '-' for the default."""
    variant, scaling = key[6], key[7]
    return " ".join(filter(None, [variant_label(*variant), scaling if scaling != "none" else ""])) or "-"


def _ms(value: float | None) -> str:
    return f"{value:.4f}" if value is not None else "-"
