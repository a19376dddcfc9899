"""Print a rich table whole wherever stdout goes.

On a terminal rich fits a table to the window, as a reader there expects. Anywhere else (a
file, a pipe, a CI log) it would fit it to ``COLUMNS`` or 80 columns, cutting cells to
"…" and wrapping long ones over several lines: a log must instead hold every value, one
row per line. So off a terminal the table is laid out at its natural width (the widest
each column wants) and written without wrapping, its title as a plain line above it.
"""

from __future__ import annotations

from rich.console import Console
from rich.measure import Measurement
from rich.segment import Segments
from rich.table import Table

_UNBOUNDED = 1_000_000  # columns: wider than any table, so the measure is the natural one


def print_table(console: Console, table: Table) -> None:
    """``console.print(table)`` on a terminal; at natural width, never cut, off one."""
    if console.is_terminal:
        console.print(table)
        return
    title, table.title = table.title, None  # a centred title would wrap at the table's width
    if title:
        console.print(title, soft_wrap=True, highlight=False)
    width = Measurement.get(console, console.options.update_width(_UNBOUNDED), table).maximum
    lines = console.render_lines(table, console.options.update_width(width), pad=False, new_lines=True)
    console.print(Segments([segment for line in lines for segment in line]), soft_wrap=True)
    table.title = title
