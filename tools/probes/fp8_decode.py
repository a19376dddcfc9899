"""Probe: hopper_fp8's decode tiles (DECODE: wgmma's roles swapped, the deepest ring that fits)
against its 64- and 128-row tiles at small M, in every scaling mode, beside the baselines of
the same scaling: what choose_fp8's small-M rule is fitted on.

Per (shape, scaling): the tiles' rule (``fp8.tile_choice``), the decode tiles of the fewest rows
>= M (64 past M = 64) with one and two consumers, split 1, 2 or 4 ways over K, and what
``choose_fp8`` picks; every configuration verified against the float64 reference, then timed hot
through the bench's run_case and GpuTimer (BF16 D, nt). No validation shape of the corpus.

Run from the repository root, one process a GPU (``--shard I/N`` takes every N-th case from
the I-th; ``--build-only`` first, so that the shards do not build the same kernels at once):
    PYTHONPATH=. python3 tools/probes/fp8_decode.py [--shard 0/4] [--seconds 0.3] [--build-only]
        [--scalings tensor,row,block] [MxNxK ...]
"""

from __future__ import annotations

import argparse
import sys
import time

from fp8_configs import BASELINES, NAME, prebuild, problem, tflops
from small_m import clustered_decode, refuse_validation_shapes

from gemm_driver import Session
from gemm_driver.bench.timing import Budget, GpuTimer
from gemm_driver.case import PreparedCase, run_case
from gemm_driver.device_reference import products_for
from gemm_driver.kernels.hopper import fp8, rungs
from gemm_driver.kernels.spec import ceil_div
from gemm_driver.kernels.tuned import label

SHAPES = ["1x4096x4096", "1x8192x8192", "8x28672x4096", "16x14336x4096", "16x6144x2048", "32x4096x4096",
          "32x7168x16384", "48x8192x2048", "64x4096x7168", "64x2048x8192", "96x8192x4096", "128x6144x2048",
          "128x4096x4096"]
SCALINGS = ("tensor", "row", "block")


def configurations(p) -> dict[str, dict]:
    """Labelled tunables for ``p``: the tiles' rule, the decode variants, choose_fp8's pick; past
    M = 32 also 32-row decode tiles, two or more to a column of C (one consumer, split 1 or 2);
    the decode variants split at most 2 ways also in clusters of two tile rows sharing B ("+cm2",
    small_m.clustered_decode); the split decode variants also with PDL ("+pdl")."""
    rows = min(r for r in rungs.DECODE_ROWS if r >= min(p.m, 64))
    configs = {"tiles": fp8.tile_choice(p)[0]}
    if p.m > 32:
        for splits in (1, 2):
            configs[f"d32x1/{splits}"] = {"DECODE": 32, "BN": 64, "CONSUMERS": 1, "PROMOTE": 2, "SPLITS": splits,
                                          "PDL": int(splits == 1)}
    for consumers in (1, 2):
        tiles = ceil_div(p.m, rows) * ceil_div(p.n, 64 * consumers)
        for splits in (1, 2, 4):
            if splits > 1 and (p.k < splits * 2 * 128 or tiles * splits > 2 * rungs.SMS):
                continue
            configs[f"d{rows}x{consumers}/{splits}"] = {
                "DECODE": rows, "BN": 64 * consumers, "CONSUMERS": consumers, "PROMOTE": 2, "SPLITS": splits,
                "PDL": int(splits == 1)}
    for t in [t for t in configs.values() if t.get("DECODE") and t["SPLITS"] <= 2]:
        configs.update(clustered_decode(p, t))
    for name, t in list(configs.items()):  # the split decode tiles with PDL too ("+pdl")
        if t.get("DECODE") and t["SPLITS"] > 1 and not t.get("CM", 1) > 1:
            configs[name + "+pdl"] = {**t, "PDL": 1}
    configs["chosen"] = fp8.choose_fp8(p, "")[0]
    return configs


def measure(session, timer, budget, shape: tuple, scaling: str) -> None:
    p = problem(shape, scaling)
    with PreparedCase.random(p, "fp8", [*shape, len(scaling)], products=products_for(session, p)) as case:
        results = {}
        for name in BASELINES[scaling]:
            results[name] = tflops(p, run_case(session, name, case, timer=timer, budget=budget))
        for name, t in configurations(p).items():
            outcome = run_case(session, NAME, case, tunables=t, timer=timer, budget=budget)
            if not outcome.ok:
                print(f"  {name} {label(t)}: {outcome.status} {outcome.message}", flush=True)
            results[f"{name} {label(t)}"] = tflops(p, outcome)
    best = max((results[b] or 0) for b in BASELINES[scaling])
    print(f"{'x'.join(map(str, shape))} {scaling}:", flush=True)
    for name, tf in sorted(results.items(), key=lambda kv: -(kv[1] or 0)):
        ratio = f"{tf / best:6.3f}x" if tf and best else "     -"
        print(f"  {name:<60} {tf or 0:8.1f} TFLOP/s {ratio}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shapes", nargs="*", default=SHAPES)
    parser.add_argument("--shard", default="0/1", help="I/N: every N-th case, from the I-th")
    parser.add_argument("--seconds", type=float, default=0.3, help="timing budget per trial")
    parser.add_argument("--build-only", action="store_true", help="build the shard's configurations, time nothing")
    parser.add_argument("--scalings", default=",".join(SCALINGS), help="comma list of tensor, row, block")
    args = parser.parse_args()
    refuse_validation_shapes(args.shapes, "fp8_decode.py")
    first, every = map(int, args.shard.split("/"))
    cases = [(tuple(map(int, s.split("x"))), scaling) for s in args.shapes
             for scaling in args.scalings.split(",")][first::every]
    t0 = time.time()
    prebuild(cases, lambda shape, scaling: configurations(problem(shape, scaling)).values())
    print(f"built in {time.time() - t0:.0f} s", flush=True)
    if args.build_only:
        return 0
    with Session() as session:
        timer, budget = GpuTimer(session.stream, session.arch), Budget(seconds=args.seconds, energy=False)
        print(f"{session.device.name}; TFLOP/s, BF16 D, ratio to the faster baseline of the scaling", flush=True)
        for shape, scaling in cases:
            measure(session, timer, budget, shape, scaling)
        timer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
