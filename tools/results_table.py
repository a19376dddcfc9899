"""Print a bench JSON as a Markdown table (kernel rows, shape columns), for the README.

    python tools/results_table.py results/h100-80gb-hbm3/bench.json

Each cell is TFLOP/s with the percentage of cuBLAS in parentheses; FAILED and skipped
cases say so. The numbers are read from the file as written by `gemm_driver bench`.
"""

from __future__ import annotations

import json
import sys

from gemm_driver.problem import shape_label


def _shape(r: dict) -> str:
    """MxNxK, or BxMxNxK for a batch: a batched case must not share a column with its single GEMM."""
    return shape_label(r["m"], r["n"], r["k"], r.get("batch") or 1)


def markdown(document: dict) -> str:
    results = document["results"]
    shapes = list(dict.fromkeys(_shape(r) for r in results))
    names = list(dict.fromkeys(r["kernel"] for r in results))
    cell = {}
    for r in results:
        shape = _shape(r)
        if r["status"] != "ok":
            cell[r["kernel"], shape] = r["status"]
        else:
            pct = r.get("pct_of_cublas")
            cell[r["kernel"], shape] = f"{r['tflops']:.2f}" + (f" ({pct:.0f}%)" if pct is not None else "")
    gpu = document["environment"]["gpu"]
    lines = [
        f"TFLOP/s (% of cuBLAS) on {gpu['name']}, alpha={document['settings']['alpha']:g}, "
        f"beta={document['settings']['beta']:g}, median of event-timed batches:",
        "",
        "| kernel | " + " | ".join(shapes) + " |",
        "| --- | " + " | ".join("---:" for _ in shapes) + " |",
    ]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(cell.get((name, s), "-") for s in shapes) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/results_table.py BENCH.json")
    with open(sys.argv[1]) as f:
        print(markdown(json.load(f)))
