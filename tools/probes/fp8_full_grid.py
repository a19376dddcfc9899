"""Probe: hopper_fp8's 128 x 128 tiles on grids of most of a wave or more, with 4 or 6 stages
and without or with a 2 x 1 or 1 x 2 cluster, against the rule's pick (fp8.tile_choice) and the
baselines of the scaling: what that rule's 128 x 128 branches are fitted on.

Per (shape, scaling): every configuration and the baselines verified once against the float64
reference on one random case (BF16 D, nt), then all timed alternately in a shuffled order each
round (small_m.timed: the median of 5 rounds of 100 launches). Large FP8 GEMMs run at the power
cap, where a configuration timed after a cool one starts faster: alternating rounds share the
cap between them. No validation shape of the corpus.

Run from the repository root:
    PYTHONPATH=. python3 tools/probes/fp8_full_grid.py [--scalings tensor,row,block] [--configs JSON] [MxNxK ...]
--configs '{"label": {tunables}, ...}' times those configurations (beside the rule's pick) instead.
--tail: the rule's pick also without the tail split ("rule tail0": TAIL=0).
--ring: the rule's pick also with block scales read in place ("rule ring0": RING=0).
--variants '{"label": {tunables}, ...}': the rule's pick also with those tunables changed ("rule label").
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from fp8_configs import BASELINES, NAME, prebuild, problem
from small_m import labelled_times, print_against, refuse_validation_shapes

from gemm_driver import Session
from gemm_driver.bench.timing import GpuTimer
from gemm_driver.case import PreparedCase
from gemm_driver.device_reference import products_for
from gemm_driver.kernels.hopper import fp8

SHAPES = ["3072x6144x4096", "6144x3072x8192", "4608x4608x6144", "8192x4096x2048"]
SCALINGS = ("tensor", "row", "block")
CLUSTERS = {"": {}, "+cm2": {"CM": 2}, "+cn2": {"CN": 2}}


def configurations(p, given: dict | None = None, variants: dict | None = None) -> dict[str, dict]:
    """Labelled tunables: ``given``, else 128 x 128 tiles with the overlapped promotion, 4 or 6
    stages, each without a cluster and in 2 x 1 and 1 x 2 clusters ("s6+cm2"), and 128 x 64 tiles
    at 8 stages ("t64", the rule's pick below its 128 x 128 branches); "rule": tile_choice's pick;
    ``variants`` (label -> tunables): the rule's pick with those changed ("rule tail0")."""
    configs = dict(given) if given is not None else {
        **{f"s{stages}{name}": {"PROMOTE": 2, "STAGES": stages, **cluster, "PDL": 1}
           for stages in (4, 6) for name, cluster in CLUSTERS.items()},
        "t64": {"PROMOTE": 2, "BN": 64, "STAGES": 8, "PDL": 1}}
    configs["rule"] = fp8.tile_choice(p)[0]
    for label, changed in (variants or {}).items():
        configs[f"rule {label}"] = {**configs["rule"], **changed}
    return configs


def measure(session, timer, shape: tuple, scaling: str, given: dict | None, variants: dict) -> None:
    p = problem(shape, scaling)
    configs = configurations(p, given, variants)
    with PreparedCase.random(p, "fp8", [*shape, len(scaling)], products=products_for(session, p)) as case:
        us, best = labelled_times(session, timer, case, NAME, configs, BASELINES[scaling])
    print(f"{'x'.join(map(str, shape))} {scaling}:", flush=True)
    print_against(p, us, best, 48)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shapes", nargs="*", default=SHAPES)
    parser.add_argument("--scalings", default=",".join(SCALINGS), help="comma list of tensor, row, block")
    parser.add_argument("--configs", type=json.loads, default=None, help="labelled tunables to time instead")
    parser.add_argument("--tail", action="store_true", help="the rule's pick also with TAIL=0")
    parser.add_argument("--ring", action="store_true", help="the rule's pick also with RING=0 (block scaling)")
    parser.add_argument("--variants", type=json.loads, default={}, help="labelled changes to the rule's pick")
    args = parser.parse_args()
    variants = {**({"tail0": {"TAIL": 0}} if args.tail else {}), **({"ring0": {"RING": 0}} if args.ring else {}),
                **args.variants}
    refuse_validation_shapes(args.shapes, "fp8_full_grid.py")
    cases = [(tuple(map(int, s.split("x"))), scaling) for s in args.shapes for scaling in args.scalings.split(",")]
    t0 = time.time()
    prebuild(cases, lambda shape, scaling: configurations(problem(shape, scaling), args.configs, variants).values())
    print(f"built in {time.time() - t0:.0f} s", flush=True)
    with Session() as session:
        timer = GpuTimer(session.stream, session.arch)
        print(f"{session.device.name}; us per GEMM, TFLOP/s, BF16 D, the faster baseline of the scaling's time "
              "over each", flush=True)
        for shape, scaling in cases:
            measure(session, timer, shape, scaling, args.configs, variants)
        timer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
