"""Probe: hopper_bf16 on full grids with a short K (512-2048), where the validation run's BF16
ratios fall to 0.79-0.85 (1024x5120x4096, 16384x7168x2048, 4096x24576x1536, 16384x32768x512),
measured on shapes of neither corpus set (no validation shape is read: docs/corpus.md).

With a short K a tile's k loop is short beside its epilogue (writing 128 x 256 FP32 values), and
the two consumers of a 128-row tile wait for their epilogue together while the tensor cores
idle. One-consumer tiles (64 rows, two CTAs an SM) overlap one CTA's epilogue with the other's
k loop. Each of them (64 x 192 with 3 stages, 64 x 128; 64 x 256 does not fit the 128 registers a
thread of two CTAs an SM has) against the 128-row
tiles the vote picks among (128 x 256 whole and in 2 x 1 clusters, 128 x 192, 128 x 128), and
ping-pong tiles (PINGPONG: each consumer a whole 128 x 128 tile in turn, one's epilogue beside
the other's k loop; whole and in 2 x 1 clusters), all with PDL, beside cuBLAS and cuBLASLt.

--swapped: the swapped ping-pong tiles (DECODE rows of A x 128 columns, wgmma's A = the B tile,
each consumer whole tiles in turn: cuBLASLt's form on these shapes, 128 x 160 in its transposed
terms), 160 and 128 rows, whole, in 2 x 1 and 1 x 2 clusters, and the 160-row tiles with both
consumers on each tile (64 columns each), beside the vote's pick, the 128 x 256 tiles in 2 x 1
clusters and the 128 x 128 ping-pong tiles in 2 x 1 clusters.

--rule: short_k_choice (rungs.py) checked on shapes of neither corpus set chosen after it was
fitted (RULE_SHAPES): its pick ("chosen") beside the vote's (rungs.voted_choice, what the shape
ran before the rule), the 128-row swapped tiles and the baselines. K up to 2048 (where it picks)
and a few past it (where it does not: there "chosen" is the vote's pick).

--epilogue: how much of the time is the epilogue's. The vote's pick and the 128 x 256 tiles
also with STORE=0 (C stored from registers, no TMA stores), ping-pong 128 x 128 tiles in 2 x 1
clusters, and every run, the baselines too, once more with D in BF16 (half the bytes written),
beside cuBLAS and cuBLASLt writing BF16. --nt: B stored N x K (a linear layer's x @ W^T), the
tunables still those choose() picks for the row-major shape.

Every configuration is verified once against the float64 reference, then all are timed
alternately as small_m.py times them (the median of 5 rounds of 100 launches).

Run from the repository root:
  PYTHONPATH=. python3 tools/probes/short_k.py [--swapped | --rule | --epilogue [--nt]] [MxNxK ...]
"""
from dataclasses import replace

import sys

from small_m import (TFLOPS_MEASURED, chosen_shapes, flags_and_shapes, offered, print_tflops,
                     refuse_validation_shapes, verified_times)

from gemm_driver import kernels
from gemm_driver.cuda.driver import Device
from gemm_driver.kernels.build import build_all
from gemm_driver.kernels.hopper import rungs
from gemm_driver.problem import GemmProblem

SHAPES = ["6144x8192x1024", "3072x16384x1536", "12288x6144x2048", "6144x24576x512", "2304x8192x2048",
          "768x8192x4096", "3072x5120x3072", "1536x6144x4096"]
TILES = {"128x256": {"PDL": 1}, "128x256 2x1": {"CM": 2, "PDL": 1}, "128x192": {"BN": 192, "PDL": 1},
         "128x128": {"BN": 128, "STAGES": 6, "PDL": 1},
         "64x192": {"BN": 192, "CONSUMERS": 1, "STAGES": 3, "PDL": 1},
         "64x128": {"BN": 128, "CONSUMERS": 1, "PDL": 1},
         "128x128 pp": {"BN": 128, "STAGES": 6, "PINGPONG": 1, "PDL": 1},
         "128x128 pp 2x1": {"BN": 128, "STAGES": 6, "PINGPONG": 1, "CM": 2, "PDL": 1}}

SWAPPED_PP = {"DECODE": 160, "BN": 128, "CONSUMERS": 2, "PINGPONG": 1, "PDL": 1}
SWAPPED = {"128x256 2x1": TILES["128x256 2x1"], "128x128 pp 2x1": TILES["128x128 pp 2x1"],
           "160x128 sw pp": SWAPPED_PP, "160x128 sw pp 2x1": {**SWAPPED_PP, "CM": 2},
           "160x128 sw pp 1x2": {**SWAPPED_PP, "CN": 2}, "128x128 sw pp 1x2": {**SWAPPED_PP, "DECODE": 128, "CN": 2},
           "160x128 sw 1x2": {**SWAPPED_PP, "PINGPONG": 0, "CN": 2}}
# chosen after short_k_choice was fitted; none of them a corpus shape
RULE_SHAPES = ["4096x4096x512", "8192x8192x768", "2560x12288x1024", "5120x5120x1280", "16384x2048x1792",
               "1536x16384x2048", "9216x4608x384", "3000x7000x1000", "5000x3000x700", "4608x9216x2560",
               "6144x6144x3072"]


def rule_configurations(spec, label: str, gpu: str) -> dict[str, dict]:
    """--rule's configurations of one shape: the rule's pick (choose()), the vote's, the 128-row swapped tiles."""
    p = GemmProblem(*map(int, label.split("x")))
    return {"chosen": spec.choose(p, gpu)[0], "voted": rungs.voted_choice(p, gpu)[0],
            "128x128 sw pp 1x2": SWAPPED["128x128 sw pp 1x2"]}


def main(args: list[str]) -> None:
    flags, shapes = flags_and_shapes(args, RULE_SHAPES if "--rule" in args else SHAPES)
    refuse_validation_shapes(shapes, "short_k.py")
    spec = kernels.KERNELS["hopper_bf16"]
    if "--rule" in flags:  # every build at once, in threads, before the first shape
        device = Device.get(0)
        build_all([(spec, spec.validate(GemmProblem(*map(int, label.split("x"))), t)) for label in shapes
                   for t in rule_configurations(spec, label, device.name).values()], device.arch)
    for label, s, timer, p, chosen, why in chosen_shapes(shapes, TFLOPS_MEASURED):
        if "--rule" in flags:
            others = rule_configurations(spec, label, s.device.name)
            us = verified_times(s, timer, p, offered(spec, p, label, others.pop("chosen"), others))
            print(f"{label}: chosen {chosen} ({why}); voted {others['voted']}", flush=True)
            print_tflops(p, us)
            continue
        if "--epilogue" not in flags:
            tiles = SWAPPED if "--swapped" in flags else TILES
            us = verified_times(s, timer, p, offered(spec, p, label, chosen, tiles))
            print(f"{label}: chosen {chosen} ({why})", flush=True)
            print_tflops(p, us)
            continue
        others = {"chosen STORE=0": {**chosen, "STORE": 0}, "128x256": TILES["128x256"],
                  "128x256 STORE=0": {**TILES["128x256"], "STORE": 0}, "128x128 pp 2x1": TILES["128x128 pp 2x1"]}
        for out in ("fp32", "bf16"):
            q = replace(p, out_dtype=out, trans_b="--nt" in flags)
            us = verified_times(s, timer, q, offered(spec, q, label, chosen, others))
            print(f"{label} {q.layout}, D in {out}: chosen {chosen} ({why})", flush=True)
            print_tflops(q, us, width=16)


if __name__ == "__main__":
    main(sys.argv[1:])
