#!/usr/bin/env python3
"""Sweep warptiled's tuning space on this GPU and write the per-GPU table `autotuned` reads.

    python tools/autotune.py                       # default shapes, prints the ranking
    python tools/autotune.py --write               # ... and writes gemm_driver/tuned/<gpu>.json
    python tools/autotune.py --shapes 1024,4093x4091x4099 --json run.json

Every configuration is verified against the float64 reference before it is timed; cuBLAS
is timed on the same operands for the % column.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gemm_driver import Session, kernels
from gemm_driver.bench import autotune
from gemm_driver.bench.environment import collect
from gemm_driver.kernels import tuned
from gemm_driver.kernels.simt.warptiling import TUNE_SPACE

DEFAULT_SHAPES = "512,1000,1024,2048,4096,4093x4091x4099,8192,16384x128x4096,1024x1024x16384"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default=DEFAULT_SHAPES, help="comma list of N (square) or MxNxK")
    parser.add_argument("--seconds", type=float, default=0.15, help="timing budget per configuration")
    parser.add_argument("--top", type=int, default=5, help="configurations shown per shape")
    parser.add_argument("--json", help="also write the whole table document here")
    parser.add_argument("--write", action="store_true", help="write gemm_driver/tuned/<gpu>.json")
    args = parser.parse_args(argv)
    shapes = autotune.parse_shapes(args.shapes)

    with Session() as session:
        spec = kernels.KERNELS["warptiled"]
        results = autotune.tune(session, spec, shapes, TUNE_SPACE, seconds=args.seconds)
        environment = collect(session.device)
    for r in results:
        print("\n" + "\n".join(r.report_lines(args.top)))
    document = autotune.table_document(results, spec, environment)
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
    if args.write:
        path = tuned.tuned_path(environment["gpu"]["name"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2) + "\n")
        print(f"\nwrote {path}")
    failed = any(t.status == "FAILED" for r in results for t in r.trials)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
