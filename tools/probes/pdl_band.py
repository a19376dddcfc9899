"""Probe: programmatic dependent launch (PDL) by how much of a wave the grid fills. Each kernel's
pick (choose) timed as picked and with PDL turned the other way; for BF16 also the 128 x 64,
128 x 128 and 128 x 256 tiles (one CTA an SM) both ways.

Why: back to back on the H100, 128 x 64 tiles at 1024x704x6144 (88 tiles, one wave of more than
half the SMs) ran 30.3 us with PDL and 23.9 without; at 768x704x6144 (66 tiles) PDL won, 19.3
against 20.8 (results/h100-80gb-hbm3/probe-pdl-band.txt). With PDL the next grid is launched as
soon as every CTA of this one has passed its wait, and its CTAs take the idle SMs and wait there.

Per shape and precision (bf16; tf32; fp8: per-tensor scales, BF16 D, nt): every configuration
and the precision's baselines verified once against the float64 reference on one random case,
then all timed alternately (small_m.timed: the median of 5 rounds of 100 launches, each batch
queued behind the bench's stream hold). The line of each pick gives its CTAs (grid) against the
resident ones. No validation shape of the corpus.

Run from the repository root:
    PYTHONPATH=. python3 tools/probes/pdl_band.py [--dtypes bf16,tf32,fp8] MxNxK ...
"""

from __future__ import annotations

import argparse
import sys

from fp8_configs import BASELINES as FP8_BASELINES, prebuild, problem as fp8_problem
from small_m import baselines, labelled_times, print_against, refuse_validation_shapes

from gemm_driver import Session, kernels
from gemm_driver.bench.timing import GpuTimer
from gemm_driver.case import PreparedCase
from gemm_driver.device_reference import products_for
from gemm_driver.kernels.tuned import label
from gemm_driver.problem import GemmProblem

# BF16, each both ways (BN named: an empty configuration would run choose()'s pick)
TILES = {"128x64": {"BN": 64, "STAGES": 8}, "128x128": {"BN": 128, "STAGES": 6}, "128x256": {"BN": 256}}


def turned(t: dict) -> dict:
    """``t`` with PDL the other way."""
    return {**t, "PDL": 0 if t.get("PDL") else 1}


def configurations(precision: str, p: GemmProblem, gpu: str) -> tuple[dict[str, dict], str]:
    """Labelled tunables: the pick and the pick turned ("pick~"); BF16 also TILES with and without
    PDL ("128x64+pdl", "128x64"). And the pick's launch: CTAs over the resident ones."""
    spec = kernels.KERNELS[f"hopper_{precision}"]
    pick = dict(spec.choose(p, gpu)[0])
    configs = {"pick": pick, "pick~": turned(pick)}
    if precision == "bf16":
        for name, t in TILES.items():
            configs[name] = t
            configs[name + "+pdl"] = {**t, "PDL": 1}
    resolved = spec.validate(p, pick)
    return configs, f"{spec.grid(p, resolved)[0]} CTAs with work"


def case_of(session: Session, precision: str, p: GemmProblem, seed: int) -> PreparedCase:
    if precision == "fp8":
        return PreparedCase.random(p, "fp8", seed, products=products_for(session, p))
    return PreparedCase.random(p, precision, seed)


def measure(session: Session, timer: GpuTimer, label_: str, precision: str) -> None:
    shape = tuple(map(int, label_.split("x")))
    p = fp8_problem(shape, "tensor") if precision == "fp8" else GemmProblem(*shape)
    configs, launch = configurations(precision, p, session.device.name)
    names = FP8_BASELINES["tensor"] if precision == "fp8" else baselines(precision)
    with case_of(session, precision, p, sum(shape)) as case:
        us, best = labelled_times(session, timer, case, f"hopper_{precision}", configs, names)
    print(f"{label_} {precision}: pick {label(configs['pick'])}, {launch}", flush=True)
    print_against(p, us, best, 52)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shapes", nargs="+")
    parser.add_argument("--dtypes", default="bf16", help="comma list of bf16, tf32, fp8")
    args = parser.parse_args()
    refuse_validation_shapes(args.shapes, "pdl_band.py")
    precisions = args.dtypes.split(",")
    if "fp8" in precisions:
        gpu = "NVIDIA H100 80GB HBM3"  # fp8's choose reads no table: any name picks the same
        prebuild([(tuple(map(int, s.split("x"))), "tensor") for s in args.shapes],
                 lambda shape, scaling: configurations("fp8", fp8_problem(shape, scaling), gpu)[0].values())
    with Session() as session:
        timer = GpuTimer(session.stream, session.arch)
        print(f"{session.device.name}; us per GEMM, TFLOP/s, the faster baseline's time over each", flush=True)
        for s in args.shapes:
            for precision in precisions:
                measure(session, timer, s, precision)
        timer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
