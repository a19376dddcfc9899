"""Probe: 64-row tiles whose two consumer warpgroups split the columns (NSPLIT=2), beside every
configuration the vote offers, cuBLAS and cuBLASLt, at small M.

Why: at 128x8192x2048 cuBLAS runs 64 x 128 tiles (in our terms) with two consumer warpgroups a
tile, each an m64n64 half of its columns, in 1 x 2 clusters (the two row halves share B), where
our 64-row tiles had one consumer and our two-consumer tiles 128 rows
(results/h100-80gb-hbm3/profile-hopper-source-bf16-128x8192x2048.txt). NSPLIT=2 is that form:
64 x 128 tiles (each consumer 64 columns) and 64 x 256 (128 each), alone and in 2 x 1 clusters.
The shapes are clusters.py's small-M set (the tuning models' layers at token counts of neither
corpus set, one tuning shape) and 128x8192x2048; a validation shape is refused.

Every configuration is verified once against the float64 reference, then all are timed
alternately as small_m.py times them (the median of 5 rounds of 100 launches).

Run from the repository root:  PYTHONPATH=. python3 tools/probes/column_halves.py [MxNxK ...]
"""
import sys

from clusters import SMALL_M
from small_m import beside_the_candidates, flags_and_shapes, refuse_validation_shapes

SHAPES = [*SMALL_M, "128x8192x2048"]
HALVES = {"64x128 halves": {"BN": 128, "STAGES": 8, "NSPLIT": 2, "PDL": 1},
          "64x128 halves 6 stages": {"BN": 128, "STAGES": 6, "NSPLIT": 2, "PDL": 1},
          "64x256 halves": {"NSPLIT": 2, "PDL": 1}}


def halves(p, candidates) -> dict[str, dict]:
    """HALVES, and past M = 64 (two tile rows) each in a 2 x 1 cluster sharing B, as cuBLAS's does."""
    out = {}
    for name, t in HALVES.items():
        out[name] = t
        if p.m > 64:
            out[name + " 2x1"] = {**t, "CM": 2}
    return out


def main(args: list[str]) -> None:
    _, shapes = flags_and_shapes(args, SHAPES)
    refuse_validation_shapes(shapes, "column_halves")
    beside_the_candidates(shapes, halves)


if __name__ == "__main__":
    main(sys.argv[1:])
