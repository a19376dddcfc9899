#!/usr/bin/env python3
"""Print a corpus run's ratios by subset as the Markdown rows of docs/corpus.md's tables.

    python tools/corpus_rows.py results/h100-80gb-hbm3/bench-corpus-validate-bf16.json

Per precision, over all shapes, without the odd ones, M <= 128 (with the median share of the
copy bandwidth its unavoidable bytes reach), M = 16, M >= 1024 and the odd shapes alone: the
number of shapes, the geometric mean of own / best baseline, the minimum with its shape and
the share at 1.0 or more. The ratios are corpus_summary's, as the bench prints them. A missing
or malformed file is one line on stderr and exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gemm_driver.bench.corpus_summary import PrecisionSummary, ShapeRatio, shape_ratios
from gemm_driver.bench.writers import load

if str(Path(__file__).resolve().parent) not in sys.path:  # loaded by file path (the tests), not run
    sys.path.append(str(Path(__file__).resolve().parent))  # last: tools/inspect.py must not shadow inspect
from _toolkit import Parser, run  # noqa: E402

PROG = Path(__file__).name
SUBSETS = (("all", lambda r: True), ("without the odd shapes", lambda r: r.kind != "odd"),
           ("M <= 128", lambda r: r.m <= 128), ("M = 16", lambda r: r.m == 16),
           ("M >= 1024", lambda r: r.m >= 1024), ("the odd shapes", lambda r: r.kind == "odd"))


def row(name: str, ratios: list[ShapeRatio]) -> str:
    s = PrecisionSummary.stats(ratios)
    share = PrecisionSummary.median_bandwidth_share(ratios) if name == "M <= 128" else None
    bandwidth = f" (median {share:.0%} of the copy bandwidth)" if share is not None else ""
    return (f"| {name} | {s['shapes']} | {s['geomean']:.3f}{bandwidth} | {s['min']:.3f} ({s['min_shape']}) "
            f"| {s['share_at_least_1']:.0%} |")


def rows(document: dict) -> list[str]:
    ratios = shape_ratios(document)
    lines = []
    for precision in dict.fromkeys(r.precision for r in ratios):
        mine = [r for r in ratios if r.precision == precision]
        lines += [f"{precision}:", "| set | shapes | geometric mean | minimum | shapes >= 1.0 |", "| --- | --- | --- | --- | --- |"]
        lines += [row(name, chosen) for name, keep in SUBSETS if (chosen := [r for r in mine if keep(r)])]
    return lines


def main(argv=None) -> int:
    parser = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a bench JSON of a corpus run")
    args = parser.parse_args(argv)
    print("\n".join(rows(load(args.run))))
    return 0


if __name__ == "__main__":
    sys.exit(run(main, PROG))
