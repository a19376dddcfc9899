#!/usr/bin/env python3
"""The vote's left-out check on every committed tuned table, for 1-4 neighbours: each tuning
shape's pick made by the other shapes of its table, and how much slower that pick measured there
than the shape's fastest configuration (geometric mean, worst, and on how many shapes the pick
is the fastest). The row marked * is the number of neighbours the families vote with
(``tuned.NEIGHBOURS``); hopper_bf16 breaks its ties as it does (``selection.TIE``).

    python tools/left_out.py [--neighbours 1,2,3,4]

Pure: reads gemm_driver/tuned/*.json (real sweeps), no GPU. How each family's number of
neighbours was chosen: docs/corpus.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gemm_driver.kernels import tuned

if str(Path(__file__).resolve().parent) not in sys.path:  # loaded by file path (the tests), not run
    sys.path.append(str(Path(__file__).resolve().parent))  # last: tools/inspect.py must not shadow inspect
from _toolkit import Parser, run  # noqa: E402
from autotune import VOTERS, left_out_summary  # noqa: E402

PROG = Path(__file__).name


def voter_name(table: dict) -> str:
    """The tuned kernel a table serves: warptiled's sweep is the table of ``autotuned``."""
    return "autotuned" if table["kernel"] == "warptiled" else table["kernel"]


def check_line(entries: list[dict], voter: tuple, neighbours: int) -> str:
    """One neighbour count's left-out check over a table; ``voter`` as autotune.VOTERS holds it."""
    _, geomean, worst, winners = left_out_summary(entries, *voter, neighbours=neighbours)
    return f"{geomean:.4f}x  worst {worst:.3f}x  fastest on {winners}"


def main(argv=None) -> int:
    parser = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--neighbours", default="1,2,3,4", help="comma list of neighbour counts (default 1,2,3,4)")
    args = parser.parse_args(argv)
    try:
        counts = [int(x) for x in args.neighbours.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        parser.error(f"--neighbours takes a comma list of positive integers, not {args.neighbours!r}")
    for path in sorted(tuned.TUNED_DIR.glob("*.json")):
        table = json.loads(path.read_text())
        print(f"{path.name}: {voter_name(table)} on {table['gpu']}, {len(table['entries'])} tuning shapes")
        for count in counts:
            mark = "*" if count == tuned.NEIGHBOURS else " "
            print(f"  {mark}{count} neighbours: {check_line(table['entries'], VOTERS[voter_name(table)], count)}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main, PROG))
