#!/usr/bin/env python3
"""Print a bench JSON as a Markdown table (kernel rows, shape columns), for the README.

    python tools/results_table.py results/h100-80gb-hbm3/bench.json

Each cell is TFLOP/s with the percentage of cuBLAS in parentheses; FAILED and skipped
cases say so. The file is read and checked by the same loader as ``compare`` and
``plot`` (gemm_driver.bench.writers.load): a missing or malformed file is one line on
stderr and exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gemm_driver.bench.writers import load
from gemm_driver.problem import shape_label

if str(Path(__file__).resolve().parent) not in sys.path:  # loaded by file path (the tests), not run
    sys.path.append(str(Path(__file__).resolve().parent))  # last: tools/inspect.py must not shadow inspect
from _toolkit import Parser, run  # noqa: E402

PROG = Path(__file__).name


def _shape(r: dict) -> str:
    """MxNxK, or BxMxNxK for a batch: a batched case must not share a column with its single GEMM."""
    return shape_label(r["m"], r["n"], r["k"], r.get("batch") or 1)


def _cell(r: dict) -> str:
    if r["status"] != "ok":
        return r["status"]
    if r.get("tflops") is None:
        return "-"
    pct = r.get("pct_of_cublas")
    return f"{r['tflops']:.2f}" + (f" ({pct:.0f}%)" if pct is not None else "")


def markdown(document: dict) -> str:
    """The table of a document ``load`` accepted (the fields it reads are checked there)."""
    results = document["results"]
    shapes = list(dict.fromkeys(_shape(r) for r in results))
    names = list(dict.fromkeys(r["kernel"] for r in results))
    cell = {(r["kernel"], _shape(r)): _cell(r) for r in results}
    gpu = (document.get("environment") or {}).get("gpu") or {}
    settings = document.get("settings") or {}
    lines = [
        f"TFLOP/s (% of cuBLAS) on {gpu.get('name', 'an unnamed GPU')}, alpha={settings.get('alpha', 1.0):g}, "
        f"beta={settings.get('beta', 0.0):g}, median of event-timed batches:",
        "",
        "| kernel | " + " | ".join(shapes) + " |",
        "| --- | " + " | ".join("---:" for _ in shapes) + " |",
    ]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(cell.get((name, s), "-") for s in shapes) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("bench_json", metavar="BENCH.json", help="a bench JSON written by gemm_driver bench --json")
    args = parser.parse_args(argv)
    print(markdown(load(args.bench_json)))  # a bad file: BenchFileError, one line from run()
    return 0


if __name__ == "__main__":
    sys.exit(run(main, PROG))
