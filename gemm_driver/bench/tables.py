"""Print rich tables that read on a terminal and in a log: fitted, never cut, notes below.

A table of measurements must show its numbers whole wherever it goes. On a terminal it has
the window's width; in a file, a pipe or a CI log (not a terminal) rich would fit it to
``COLUMNS`` or 80 columns, cutting cells to "…", so there it gets ``LOG_WIDTH``.
``print_fitted`` lays a table out in that width:

- every cell is one line, never wrapped or cut; a long header is broken over lines instead
  ("median\\nms"), so a narrow number needs no wide column; cells are two blanks apart, or
  one where two do not fit;
- long text (errors, clock sag, launch notes) is not a cell: ``Footnotes`` numbers each
  distinct note once, the row shows "[1,2]" in a narrow notes column and the notes follow
  the table, wrapped to the width, in full;
- a table still too wide leaves out its optional columns, least wanted first, and says
  which under it; columns without a ``drop`` rank are always shown. An optional column
  holding nothing but "-" is left out anywhere.

Off a terminal the table is written at its natural width, one row per line, its title as a
plain line above it (a centred title would wrap at the table's width).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from rich import box
from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.segment import Segments
from rich.table import Table
from rich.text import Text

LOG_WIDTH = 160  # columns of a table written to a file, a pipe or a CI log
_UNBOUNDED = 1_000_000  # columns: wider than any table, so the measure is the natural one

@dataclass(frozen=True)
class Column:
    header: str  # "\n" breaks it over lines
    justify: str = "left"
    drop: int = 0  # 0: always shown; else left out of a table too wide, rank 1 first


class Footnotes:
    """Numbered notes: identical texts share one number, in order of first use."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}

    def mark(self, texts: Iterable[str | None]) -> str:
        """'[1,3]' for these notes (empty texts skipped), '' when there are none."""
        numbers = [self.numbers.setdefault(text, len(self.numbers) + 1) for text in dict.fromkeys(texts) if text]
        return f"[{','.join(map(str, numbers))}]" if numbers else ""

    def renderable(self) -> Table:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(justify="right", no_wrap=True)
        grid.add_column(overflow="fold")
        for text, number in self.numbers.items():
            grid.add_row(f"[{number}]", Text(text))
        return grid


def width_limit(console: Console) -> int:
    """The columns a table may take: the terminal's, or ``LOG_WIDTH`` off a terminal."""
    return console.width if console.is_terminal else LOG_WIDTH


def _text(cell) -> Text:
    """A cell: a str is plain text (never markup), a Text carries its own style."""
    return cell if isinstance(cell, Text) else Text(str(cell))


def _natural(column: Column, rows: Sequence[Sequence | None], index: int) -> int:
    cells = [cell_len(_text(row[index]).plain) for row in rows if row is not None]
    return max([*cells, *(cell_len(line) for line in column.header.split("\n"))])


def _empty(rows: Sequence[Sequence | None], index: int) -> bool:
    return all(_text(row[index]).plain == "-" for row in rows if row is not None)


def fit(columns: Sequence[Column], rows: Sequence[Sequence | None], limit: int) -> tuple[list[int], int]:
    """(indexes of the columns to show, blanks between two of them): all of them (less any
    optional column with nothing but "-") two blanks apart if that fits ``limit``, else one
    blank apart, else without the optional columns, lowest ``drop`` rank first, until it fits."""
    widths = [_natural(column, rows, i) for i, column in enumerate(columns)]
    shown = [i for i, column in enumerate(columns) if not (column.drop and _empty(rows, i))]
    width = lambda gap: sum(widths[i] for i in shown) + gap * (len(shown) - 1)  # noqa: E731
    if width(2) <= limit:
        return shown, 2
    while width(1) > limit:
        optional = [i for i in shown if columns[i].drop]
        if not optional:
            break
        shown.remove(min(optional, key=lambda i: columns[i].drop))
    return shown, 1


def print_fitted(console: Console, columns: Sequence[Column], rows: Sequence[Sequence | None], *,
                 title: str = "", notes: Footnotes | None = None) -> None:
    """``rows`` (a None between two rows starts a new section) as a table fitted to the
    console (``fit``), then the columns left out, if any, and the notes."""
    limit = width_limit(console)
    shown, gap = fit(columns, rows, limit)
    # no edges, no rules between columns: each cell's right padding (and the blank rule) is the gap
    table = Table(title=title or None, header_style="bold", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  padding=(0, gap - 1, 0, 0))
    for i in shown:
        table.add_column(columns[i].header, justify=columns[i].justify, no_wrap=True)
    for row in rows:
        if row is None:
            table.add_section()
        else:
            table.add_row(*(_text(row[i]) for i in shown))
    print_table(console, table)
    left_out = [columns[i].header.replace("\n", " ") for i in range(len(columns))
                if i not in shown and not _empty(rows, i)]
    if left_out:
        print_text(console, f"left out to fit {limit} columns: {', '.join(left_out)}")
    if notes is not None and notes.numbers:
        print_whole(console, notes.renderable(), limit)


def print_text(console: Console, text: str) -> None:
    """A line of plain text, wrapped at the table width (``width_limit``)."""
    print_whole(console, Text(text), width_limit(console))


def print_table(console: Console, table: Table) -> None:
    """``console.print(table)`` on a terminal; off one, its title as a plain line and the
    table at its natural width, never cut."""
    if console.is_terminal:
        console.print(table)
        return
    title, table.title = table.title, None
    if title:
        print_text(console, str(title))
    print_whole(console, table, _UNBOUNDED)
    table.title = title


def print_whole(console: Console, renderable: RenderableType, limit: int) -> None:
    """``renderable`` at its natural width up to ``limit`` columns; off a terminal written as
    rendered, without the console's own cropping to ``COLUMNS``."""
    width = min(limit, Measurement.get(console, console.options.update_width(_UNBOUNDED), renderable).maximum)
    if console.is_terminal:
        console.print(renderable, width=width)
        return
    lines = console.render_lines(renderable, console.options.update_width(max(width, 1)), pad=False, new_lines=True)
    console.print(Segments([segment for line in lines for segment in line]), soft_wrap=True)
