"""Probe: two kinds of shape where hopper_bf16's choice loses on the validation set, measured on
shapes of neither set (no validation shape is read: docs/corpus.md).

- Ragged N: N a multiple of 192 but not of 256, where 128 x 256 tiles compute up to a third of
  their columns past the edge. 128 x 192 tiles (wgmma m64n192) against the 128 x 256 and
  128 x 128 ones, on full grids.
- Small grids, deep K: fewer tiles than SMs at M > 32, where the vote's neighbours are few. Each
  tile form split 2 to 8 ways (every split offered where the units fit twice the SMs and each
  slice keeps >= 2 k tiles) against the same tiles whole.

- With ``--clusters``, on the same small grids: the 128-row tiles in 2 x 1 and 1 x 2 clusters
  (B or A multicast, halving what the cluster reads from L2) whole and split 2 to 8 ways,
  beside the unclustered forms.
- With ``--cluster-split``, on the same small grids: split-K inside clusters of 2-4 CTAs (CK,
  the partials added through distributed shared memory; with PDL and without) for every tile of
  at most 192 columns, where the clusters' CTAs fit on the GPU at once, beside the same tiles
  split through the workspace.

Every configuration is verified once against the float64 reference, then all are timed
alternately as small_m.py times them (the bench's stream hold, the median of 5 rounds of 100
launches), beside cuBLAS and cuBLASLt.

Run from the repository root:
    PYTHONPATH=. python3 tools/probes/grid_fill.py [--clusters] [--cluster-split] [MxNxK ...]
"""
import math
import sys

from small_m import TFLOPS_MEASURED, chosen_shapes, flags_and_shapes, offered, print_tflops, verified_times

from gemm_driver import kernels
from gemm_driver.problem import GemmProblem

RAGGED = ["8192x1344x4096", "2048x1344x4096", "8192x2112x2048", "2048x2112x4096", "8192x320x4096",
          "2048x320x4096", "8192x1152x3072", "256x1344x8192", "256x320x8192"]
SMALL_GRIDS = ["256x640x6144", "256x448x7680", "384x384x4096", "200x300x5000", "480x200x2560", "640x96x3000",
               "96x1024x6144", "64x896x7168", "1536x640x4096"]
SMS = 132
# label: (tile rows, tile columns, tunables without the split)
TILES = {"128x256": (128, 256, {}), "128x192": (128, 192, {"BN": 192}),
         "128x128": (128, 128, {"BN": 128, "STAGES": 6}), "128x64": (128, 64, {"BN": 64, "STAGES": 8}),
         "64x192": (64, 192, {"BN": 192, "CONSUMERS": 1, "STAGES": 3}),
         "64x128": (64, 128, {"BN": 128, "CONSUMERS": 1}), "64x64": (64, 64, {"BN": 64, "CONSUMERS": 1, "STAGES": 6})}


def _splits(configs: dict, label: str, t: dict, tiles: int, resident: int, p: GemmProblem) -> None:
    """``label`` split 2-8 ways, where the units fit twice the resident CTAs and each slice
    keeps >= 2 k tiles."""
    for splits in (2, 3, 4, 6, 8):
        if tiles * splits <= 2 * resident and p.k >= splits * 2 * 64:
            configs[f"{label}/{splits}"] = {**t, "SPLITS": splits}


def alternatives(p: GemmProblem, clusters: bool = False, cluster_split: bool = False) -> dict[str, dict]:
    """Every tile whole with PDL, the 2 x 1 clusters of the large tiles (on full grids their
    1 x 2 ones too, sharing A), and on grids of fewer 128 x 128 tiles than SMs each tile split
    2-8 ways (no PDL, as split-K runs); ``clusters``: there also the 128-row tiles in 2 x 1 and
    1 x 2 clusters, whole and split; ``cluster_split``: there also each tile of <= 192 columns
    split inside clusters of 2-4 CTAs, with PDL and without, where all of them are resident at once."""
    configs = {}
    small = math.ceil(p.m / 128) * math.ceil(p.n / 128) < SMS
    for label, (rows, cols, t) in TILES.items():
        configs[label] = {**t, "PDL": 1}
        if rows == 128 and cols >= 192 and math.ceil(p.m / 128) % 2 == 0:
            configs[label + " cm2"] = {**t, "CM": 2, "PDL": 1}
        if rows == 128 and cols >= 192 and math.ceil(p.n / cols) % 2 == 0 and not small:
            configs[label + " cn2"] = {**t, "CN": 2, "PDL": 1}
        if not small:
            continue
        tiles, resident = math.ceil(p.m / rows) * math.ceil(p.n / cols), SMS * (2 if rows == 64 else 1)
        _splits(configs, label, t, tiles, resident, p)
        if cluster_split and cols <= 192:
            for ck in (2, 3, 4):
                if tiles * ck <= resident:
                    configs[f"{label} ck{ck}"] = {**t, "CK": ck}
                    configs[f"{label} ck{ck} pdl"] = {**t, "CK": ck, "PDL": 1}
        if clusters and rows == 128 and cols >= 128:
            for name, shape in (("cm2", {"CM": 2}), ("cn2", {"CN": 2})):
                configs[f"{label} {name}"] = {**t, **shape, "PDL": 1}
                _splits(configs, f"{label} {name}", {**t, **shape}, tiles, resident, p)
    return configs


def main(args: list[str]) -> None:
    flags, shapes = flags_and_shapes(args, RAGGED + SMALL_GRIDS)
    clusters, cluster_split = "--clusters" in flags, "--cluster-split" in flags
    spec = kernels.KERNELS["hopper_bf16"]
    for label, s, timer, p, chosen, why in chosen_shapes(shapes, TFLOPS_MEASURED):
        us = verified_times(s, timer, p, offered(spec, p, label, chosen, alternatives(p, clusters, cluster_split)))
        print(f"{label}: chosen {chosen} ({why})", flush=True)
        print_tflops(p, us)


if __name__ == "__main__":
    main(sys.argv[1:])
