#!/usr/bin/env python3
"""Time every configuration of the ladder rungs (kernels/simt/blocktiling.py) on this GPU, beside cuBLAS.

    python tools/ladder_sweep.py                          # all five rungs, default shapes
    python tools/ladder_sweep.py --kernels double_buffered --shapes 4096 --json out.json

Each rung's choice lists are small, so this builds ``spec.configurations()`` (every
combination the rules accept). Every configuration is verified against the float64
reference before it is timed (gemm_driver.bench.autotune.tune). The defaults in
blocktiling.py are meant to be the winners of this sweep on the H100.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gemm_driver import Session, kernels
from gemm_driver.bench import autotune
from gemm_driver.kernels.simt import blocktiling

DEFAULT_SHAPES = "1024,4096,4093x4091x4099"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", default=",".join(s.name for s in blocktiling.SPECS))
    parser.add_argument("--shapes", default=DEFAULT_SHAPES, help="comma list of N (square) or MxNxK")
    parser.add_argument("--seconds", type=float, default=0.15, help="timing budget per configuration")
    parser.add_argument("--json", help="write every trial here")
    args = parser.parse_args(argv)
    shapes = autotune.parse_shapes(args.shapes)
    document = {}
    status = 0
    with Session() as session:
        for name in args.kernels.split(","):
            spec = kernels.KERNELS[name]
            results = autotune.tune(session, spec, shapes, spec.configurations(), seconds=args.seconds)
            document[name] = [{"shape": r.shape, "cublas_tflops": r.baseline_tflops,
                               "trials": [t.as_dict() for t in r.trials]} for r in results]
            for r in results:
                print("\n" + "\n".join(r.report_lines(title=f"{name} ")))
                if any(t.status != "ok" for t in r.trials):
                    status = 1
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
