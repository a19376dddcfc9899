"""Probe: every configuration the hopper_bf16 vote offers for a shape (selection.candidates),
timed beside the vote's pick, cuBLAS and cuBLASLt: how far the pick is from the fastest
candidate, and whether the fastest candidate reaches the baselines (a miss of selection or
of the kernel form). The default shapes are M = 96-128 rows against a wide or mid-size N, of
neither corpus set (docs/corpus.md): the tuning set has no model shape between M = 32 and 256.

Every configuration is verified once against the float64 reference, then all are timed
alternately as small_m.py times them (the median of 5 rounds of 100 launches).

Run from the repository root:  PYTHONPATH=. python3 tools/probes/vote_candidates.py [MxNxK ...]
"""
import sys

from small_m import TFLOPS_MEASURED, chosen_shapes, flags_and_shapes, offered, print_tflops, verified_times

from gemm_driver import kernels
from gemm_driver.kernels import tuned
from gemm_driver.kernels.hopper import selection

SHAPES = ["128x20480x4096", "96x30720x8192", "112x36864x7168", "128x49152x5120", "128x5632x4096",
          "128x6656x4608"]


def main(args: list[str]) -> None:
    _, shapes = flags_and_shapes(args, SHAPES)
    spec = kernels.KERNELS["hopper_bf16"]
    for label, s, timer, p, chosen, why in chosen_shapes(shapes, TFLOPS_MEASURED):
        others = {tuned.label(t): t for t in selection.candidates(p) if t != chosen}
        us = verified_times(s, timer, p, offered(spec, p, label, chosen, others))
        print(f"{label}: chosen {tuned.label(chosen)} ({why})", flush=True)
        print_tflops(p, us, width=36)


if __name__ == "__main__":
    main(sys.argv[1:])
