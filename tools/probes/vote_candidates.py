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

from small_m import beside_the_candidates, flags_and_shapes

SHAPES = ["128x20480x4096", "96x30720x8192", "112x36864x7168", "128x49152x5120", "128x5632x4096",
          "128x6656x4608"]


def main(args: list[str]) -> None:
    _, shapes = flags_and_shapes(args, SHAPES)
    beside_the_candidates(shapes)


if __name__ == "__main__":
    main(sys.argv[1:])
