#!/usr/bin/env python3
"""Time every configuration of the ladder rungs (kernels/simt/blocktiling.py) on this GPU, beside cuBLAS.

    python tools/ladder_sweep.py                          # all five rungs, default shapes
    python tools/ladder_sweep.py --kernels double_buffered --shapes 4096 --json out.json

Each rung's choice lists are small, so this builds ``spec.configurations()`` (every
combination the rules accept). Every configuration is verified against the float64
reference before it is timed (gemm_driver.bench.autotune.tune). The defaults in
blocktiling.py are meant to be the winners of this sweep on the H100. Needs a GPU;
without one, or with bad arguments, it says so in one line (exit 2).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gemm_driver import kernels
from gemm_driver.bench import autotune
from gemm_driver.cuda.driver import Device
from gemm_driver.kernels.simt import blocktiling

if str(Path(__file__).resolve().parent) not in sys.path:  # loaded by file path (the tests), not run
    sys.path.append(str(Path(__file__).resolve().parent))  # last: tools/inspect.py must not shadow inspect
from _toolkit import Parser, add_sweep_options, comma_choice, run, sweep_shapes  # noqa: E402

PROG = Path(__file__).name
DEFAULT_SHAPES = "1024,4096,4093x4091x4099"
RUNGS = [s.name for s in blocktiling.SPECS]


rungs = comma_choice("--kernels", RUNGS)  # '--kernels' values: a comma list of blocktiling rungs


def main(argv=None) -> int:
    parser = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", default=",".join(RUNGS), help=f"comma list of rungs (default all): "
                        f"{', '.join(RUNGS)}")
    add_sweep_options(parser, DEFAULT_SHAPES, "write every trial here")
    args = parser.parse_args(argv)
    try:
        names = rungs(args.kernels)
    except ValueError as exc:
        parser.error(str(exc))
    shapes = sweep_shapes(parser, args)
    document = {}
    status = 0
    Device.get(0)  # no GPU: one line, before anything runs
    for name in names:
        spec = kernels.KERNELS[name]
        results = autotune.tune(spec, shapes, spec.configurations(), seconds=args.seconds)
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
    sys.exit(run(main, PROG))
