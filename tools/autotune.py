#!/usr/bin/env python3
"""Sweep a tuned kernel's configuration space on this GPU and write the per-GPU table it reads.

    python tools/autotune.py                       # autotuned (FP32): sweeps warptiled, prints the ranking
    python tools/autotune.py --write               # ... and writes gemm_driver/tuned/<gpu>.json
    python tools/autotune.py --shapes 1024,4093x4091x4099 --json run.json
    python tools/autotune.py --kernel mma_sync_tuned_bf16,mma_sync_tuned_tf32 --write
                                                   # -> gemm_driver/tuned/<gpu>.<kernel>.json each

Every configuration is verified against the float64 reference before it is timed; cuBLAS
of the kernel's precision is timed on the same operands for the % column. Needs a GPU;
without one, bad arguments or an unwritable --json it says so in one line (exit 2).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gemm_driver import kernels
from gemm_driver.bench import autotune
from gemm_driver.bench.environment import collect
from gemm_driver.cuda.driver import Device
from gemm_driver.kernels import tensor, tuned
from gemm_driver.kernels.simt.warptiling import TUNE_SPACE

if str(Path(__file__).resolve().parent) not in sys.path:  # loaded by file path (the tests), not run
    sys.path.append(str(Path(__file__).resolve().parent))  # last: tools/inspect.py must not shadow inspect
from _toolkit import Parser, add_sweep_options, comma_choice, positive, run, sweep_shapes  # noqa: E402

PROG = Path(__file__).name
DEFAULT_SHAPES = "512,1000,1024,2048,4096,4093x4091x4099,8192,16384x128x4096,1024x1024x16384"
# Tuned kernel -> (the kernel its sweep runs, the configurations). `autotuned` runs
# warptiled's code, and its table keeps warptiled's name (gemm_driver/tuned/<gpu>.json).
TARGETS = {"autotuned": ("warptiled", TUNE_SPACE),
           **{name: (name, space) for name, space in tensor.TUNE_SPACES.items()}}


targets = comma_choice("--kernel", TARGETS)  # '--kernel' values: a comma list of tuned kernels


def main(argv=None) -> int:
    parser = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", default="autotuned",
                        help=f"comma list of tuned kernels to sweep (default autotuned): {', '.join(TARGETS)}")
    add_sweep_options(parser, DEFAULT_SHAPES, "also write the table document here (several kernels: "
                      "PATH.<kernel>.json)")
    parser.add_argument("--top", type=positive(int), default=5, help="configurations shown per shape")
    parser.add_argument("--write", action="store_true", help="write gemm_driver/tuned/<gpu>[.<kernel>].json")
    args = parser.parse_args(argv)
    try:
        names = targets(args.kernel)
    except ValueError as exc:
        parser.error(str(exc))
    shapes = sweep_shapes(parser, args)

    failed = False
    environment = collect(Device.get(0))  # no GPU: one line, before anything runs
    for name in names:
        swept, space = TARGETS[name]
        spec = kernels.KERNELS[swept]
        results = autotune.tune(spec, shapes, space, seconds=args.seconds)  # in a worker process
        title = f"{name} " if len(names) > 1 else ""
        for r in results:
            print("\n" + "\n".join(r.report_lines(args.top, title=title)))
        document = autotune.table_document(results, spec, environment)
        if args.json:
            path = Path(args.json)
            if len(names) > 1:  # run.json -> run.<kernel>.json, one per kernel
                path = path.with_name(f"{path.stem}.{name}{path.suffix}")
            path.write_text(json.dumps(document, indent=2) + "\n")
        if args.write:
            path = tuned.tuned_path(environment["gpu"]["name"], kernel=name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(document, indent=2) + "\n")
            print(f"\nwrote {path}")
        failed |= any(t.status == "FAILED" for r in results for t in r.trials)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run(main, PROG))
