"""Probe: hopper_fp8's configurations on the FP8 issue's shapes, each scaling mode beside its
baselines: what choose_fp8's rules were fitted on.

Every configuration is built first (parallel processes into the on-disk cache), then on each
(shape, scaling) case verified once against the float64 reference and timed hot through the bench's
own run_case and GpuTimer; the baselines of the same scaling (cuBLASLt's mode, torch._scaled_mm)
are timed on the same operands. BF16 D, no epilogue, nt.

Run from the repository root:  PYTHONPATH=. python3 tools/probes/fp8_configs.py [--json PATH] [--small-only]
Output on an H200: results/h200/probe-fp8-configs.txt (and .json), run with the choose_fp8 of
before the fit (its "chosen now" column) and before the block scales were multiplied at promotion.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from gemm_driver import Session, kernels
from gemm_driver.bench.timing import Budget, GpuTimer
from gemm_driver.case import PreparedCase, run_case
from gemm_driver.device_reference import products_for
from gemm_driver.kernels.build import build
from gemm_driver.kernels.tuned import label
from gemm_driver.problem import GemmProblem

NAME = "hopper_fp8"
SPEC = kernels.KERNELS[NAME]
LARGE = ((4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (4096, 7168, 16384))
SMALL = ((64, 4096, 7168), (128, 7168, 2048))
BASELINES = {"tensor": ("cublaslt_fp8", "torch_fp8"), "row": ("cublaslt_fp8_row", "torch_fp8"),
             "block": ("cublaslt_fp8_block", "torch_fp8")}


def configurations(m: int) -> list[dict]:
    """The configurations tried at M = m: 128 x 128 tiles (with and without clusters, 4 or 6
    stages) for large M; 64-row or 128-row tiles of 64 or 128 columns with split-K for small M;
    each with the promotion waiting for its k tile (PROMOTE 1) and overlapped (PROMOTE 2)."""
    if m >= 1024:
        return [{"PROMOTE": p, "CM": cm, "CN": cn, "STAGES": stages, "PDL": 1}
                for p in (1, 2) for cm, cn in ((1, 1), (2, 1), (1, 2)) for stages in (4, 6)] + [
            {"PROMOTE": 2, "BN": 64, "STAGES": 8, "PDL": 1}]
    one = [{"CONSUMERS": 1, "BN": 64, "STAGES": 6, "PROMOTE": p} for p in (1, 2)] + [
        {"CONSUMERS": 1, "BN": 128, "STAGES": 4, "PROMOTE": 1}]
    two = [{"BN": 64, "STAGES": 8, "PROMOTE": p} for p in (1, 2)] + [{"PROMOTE": 2}]
    return [{**c, "SPLITS": s} for c in one for s in (1, 2, 3, 4)] + [{**c, "SPLITS": s} for c in two for s in (1, 2)]


def problem(shape, scaling: str) -> GemmProblem:
    return GemmProblem(*shape, trans_b=True, out_dtype="bf16", scaling=scaling)


def _build(tunables: dict) -> None:
    build(SPEC, "sm_90", tunables)


def prebuild(cases, configurations_of=lambda shape, scaling: configurations(shape[0])) -> None:
    """Every configuration ``configurations_of(shape, scaling)`` gives a case, built into the on-disk
    cache by parallel processes (one job a build)."""
    jobs = {}
    for shape, scaling in cases:
        for t in configurations_of(shape, scaling):
            resolved = SPEC.validate(problem(shape, scaling), t)
            jobs[tuple(SPEC.entry_expressions(resolved).values())] = resolved
    with ProcessPoolExecutor(mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_build, jobs.values()))


def tflops(problem: GemmProblem, outcome) -> float | None:
    return problem.flops / outcome.timing.median_ms / 1e9 if outcome.ok else None


def measure(session, timer, budget, shape, scaling: str, rows: list) -> tuple:
    """One (shape, scaling) case: the baselines, every configuration, then choose's pick, on the
    same operands; each trial appended to ``rows`` and printed. Returns the summary line's parts."""
    p = problem(shape, scaling)
    with PreparedCase.random(p, "fp8", [*shape, len(scaling)], products=products_for(session, p)) as case:
        base = {}
        for name in BASELINES[scaling]:
            o = run_case(session, name, case, timer=timer, budget=budget)
            base[name] = tflops(p, o)
            rows.append({"shape": shape, "scaling": scaling, "kernel": name, "status": o.status,
                         "tflops": base[name], "detail": o.message if not o.ok else ""})
        best_base = max((v for v in base.values() if v), default=None)
        ours = []
        for t in configurations(shape[0]):
            o = run_case(session, NAME, case, tunables=t, timer=timer, budget=budget)
            tf = tflops(p, o)
            rows.append({"shape": shape, "scaling": scaling, "kernel": NAME, "tunables": t,
                         "status": o.status, "tflops": tf, "detail": o.message if not o.ok else ""})
            ratio = f"{tf / best_base:.3f}x" if tf and best_base else "-"
            print(f"{'x'.join(map(str, shape)):>16} {scaling:>6} {label(t):<52} {o.status:>7} "
                  f"{tf or 0:8.1f} {ratio}", flush=True)
            if tf:
                ours.append((tf, t))
        chosen = SPEC.choose(p, session.device.name)[0]
        tf_chosen = tflops(p, run_case(session, NAME, case, tunables=chosen or None, timer=timer, budget=budget))
    best = max(ours, key=lambda x: x[0]) if ours else (None, {})
    return shape, scaling, base, best, tf_chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write every trial here")
    parser.add_argument("--scalings", default="tensor,row,block")
    parser.add_argument("--seconds", type=float, default=0.3, help="timing budget per trial")
    parser.add_argument("--small-only", action="store_true", help="only the shapes of M <= 128")
    args = parser.parse_args()
    shapes = SMALL if args.small_only else LARGE + SMALL
    cases = [(shape, s) for shape in shapes for s in args.scalings.split(",")]
    t0 = time.time()
    prebuild(cases)
    print(f"built in {time.time() - t0:.0f} s", flush=True)
    rows = []
    with Session() as session:
        timer, budget = GpuTimer(session.stream, session.arch), Budget(seconds=args.seconds, energy=False)
        summary = [measure(session, timer, budget, shape, scaling, rows) for shape, scaling in cases]
        timer.close()
        device = session.device.name
    print("\nshape            scaling  baselines (TFLOP/s)                     chosen now   "
          "best config (ratio to best baseline)")
    for shape, scaling, base, (tf, t), chosen in summary:
        bases = " ".join(f"{k}={v:.0f}" if v else f"{k}=-" for k, v in base.items())
        best_base = max((v for v in base.values() if v), default=None)
        r = f"{tf / best_base:.3f}x" if tf and best_base else "-"
        rc = f"{chosen / best_base:.3f}x" if chosen and best_base else "-"
        print(f"{'x'.join(map(str, shape)):>16} {scaling:>6}  {bases:<40} {chosen or 0:6.0f} {rc}  "
              f"{tf or 0:6.0f} {r} {label(t)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
