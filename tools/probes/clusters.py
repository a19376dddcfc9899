"""Probe: cluster shapes the vote does not offer, beside every configuration it does, cuBLAS and
cuBLASLt. Clusters along N (CN CTAs of one tile row sharing their A tile by TMA multicast), and
both ways at once (CM x CN), over the tiles the vote offers.

Why: cuBLASLt's picks on the H100 multicast where ours do not (the `cluster_shape` of each
cuBLASLt case in results/h100-80gb-hbm3/bench-corpus-validate-bf16.json, in its column-major
terms: its M is our N). At M = 128 it runs clusters of 2-4 along our N (every CTA of a tile
row reads the same A tile, as many bytes as its B tile at M = BN); on mid-size grids of long K
(1024x576x7168: 72 of our 128 x 64 tiles, 0.52x) 2 x 4 clusters of small tiles, where the L2
-> SM traffic of many small tiles would otherwise exceed what L2 delivers. The vote offers CN =
1 everywhere, and CM = 2 only over 128-row tiles.

The shapes are the tuning models' layers at token counts of neither corpus set and DeepSeek-
like 576-column layers at other token counts (docs/corpus.md); a validation shape is refused.
Every configuration is verified once against the float64 reference, then all are timed
alternately as small_m.py times them (the median of 5 rounds of 100 launches).

Run from the repository root:  PYTHONPATH=. python3 tools/probes/clusters.py [--small|--mid] [MxNxK ...]
"""
import sys

from small_m import beside_the_candidates, flags_and_shapes, refuse_validation_shapes

from gemm_driver.kernels import tuned
from gemm_driver.kernels.hopper import selection
from gemm_driver.kernels.spec import ceil_div
from gemm_driver.problem import GemmProblem

SMALL_M = ["128x6144x4096", "128x28672x4096", "128x4096x14336", "128x4608x3584", "128x37888x3584",
           "128x3584x18944", "128x9216x3072", "64x6144x4096", "96x28672x4096", "256x6144x4096"]
MID = ["2048x576x7168", "512x576x7168", "1536x576x7168", "1024x6144x4096", "1024x4096x14336",
       "1024x3584x18944", "1024x4608x3584"]
TILES = {"128x256": selection.TILE_128x256, "128x128": selection.TILE_128x128, "128x64": selection.TILE_128x64,
         "64x128": selection.TILE_64x128, "64x64": selection.TILE_64x64}
CLUSTERS = ((1, 2), (1, 4), (2, 1), (2, 2), (2, 4))  # (CM, CN)


def variants(p: GemmProblem, candidates: list[dict]) -> dict[str, dict]:
    """Each tile of TILES in each cluster of CLUSTERS that the candidates do not hold already,
    CM = 2 only over two tile rows or more (over one, a CTA of each pair has no rows)."""
    held = [tuned.label(c) for c in candidates]
    out = {}
    for name, tile in TILES.items():
        rows = ceil_div(p.m, 64 * tile.get("CONSUMERS", 2))
        for cm, cn in CLUSTERS:
            if cm > rows:
                continue
            t = {**tile, **({"CM": cm} if cm > 1 else {}), **({"CN": cn} if cn > 1 else {})}
            if tuned.label(t) not in held:
                out[f"{name} {cm}x{cn}"] = t
    return out


def main(args: list[str]) -> None:
    flags, shapes = flags_and_shapes(args, [])
    groups = (SMALL_M if "--small" in flags else []) + (MID if "--mid" in flags else [])
    shapes = shapes or groups or SMALL_M + MID
    refuse_validation_shapes(shapes, "clusters")
    beside_the_candidates(shapes, variants)


if __name__ == "__main__":
    main(sys.argv[1:])
