"""Probe: hopper_tf32 at M of 65-128 (shapes of neither corpus set: docs/corpus.md), where
choose() computes 256-row tiles (full grids from a wide N, and split-K at deep K) or 64-row
ones: each tile height whole, split 2-4 ways where every unit is resident and each slice keeps
>= 1024 of K, and the 128-row tiles in 1 x 2 clusters, beside cuBLAS and cuBLASLt. Every
configuration is verified once against the float64 reference, then all are timed alternately
as small_m.py times them (the median of 5 rounds of 100 launches).

--tail: each whole-tile form also without the tail split (TAIL=0; the default cuts the last, partial
wave's tiles over K), on the shapes given.
--two-a-sm: also 128 x 64 tiles of one consumer (two CTAs an SM, 4 stages) and 64 x 128 tiles at 4
and 8 stages with PDL, split up to 8 ways where every unit is resident: the small-M forms that put
more SMs to reading B than the 64 x 128 tiles at 8 stages, one CTA an SM, split as far as 132 units.

--rings: also 128 x 128 tiles (M of 65-128) at 2, 3, 4 and 6 stages with PDL, whole and split where
every unit is resident.
--slice=K: the shortest slice of K a split keeps (default tf32_selection.SLICE_K, 1024): shorter
slices let a short K split where a small grid leaves most SMs idle; "before" is the pick without
tf32_selection.short_k_split and rungs.narrow_n_split.

Run from the repository root:
    PYTHONPATH=. python3 tools/probes/tf32_mid_m.py [--tail] [--two-a-sm] [--rings] [--slice=K] [MxNxK ...]
"""
import math
import sys

from small_m import (TFLOPS_MEASURED, chosen_shapes, flags_and_shapes, offered, print_tflops, refuse_validation_shapes,
                     verified_times)

from gemm_driver import kernels
from gemm_driver.kernels.hopper import rungs, tf32_selection
from gemm_driver.kernels.hopper.selection import SMS
from gemm_driver.kernels.hopper.tf32_selection import SLICE_K
from gemm_driver.problem import GemmProblem

SHAPES = ["128x20480x4096", "96x30720x3072", "128x16896x5120", "128x6400x16000", "112x7680x20480",
          "128x4608x12288", "128x9216x8192", "128x5632x6144", "80x12800x5120"]
TILES = {"256x128": {}, "128x128": {"BM": 128}, "64x128": {"BM": 64, "STAGES": 8}}
TWO_A_SM_TILES = {"128x64 c1": {"BM": 128, "CONSUMERS": 1, "STAGES": 4}, "64x128 s4": {"BM": 64, "STAGES": 4},
                  "64x128 s8": {"BM": 64, "STAGES": 8}}
RING_TILES = {f"128x128 s{stages}": {"BM": 128, "STAGES": stages} for stages in (2, 3, 4, 6)}


def split_forms(p: GemmProblem, tiles: dict[str, dict], slice_k: int = SLICE_K) -> dict[str, dict]:
    """Each of ``tiles`` with PDL, whole ("/1") and split where every unit is resident and each
    slice keeps >= slice_k of K; the 64 x 128 tiles at 8 stages only split (whole: "64x128")."""
    configs = {}
    for label, t in tiles.items():
        consumers = t.get("CONSUMERS", 2)
        units = math.ceil(p.m / t["BM"]) * math.ceil(p.n / (64 * consumers))
        room = SMS * (2 if consumers == 1 else 1)  # one consumer: two CTAs an SM
        for splits in (1, 2, 3, 4, 6, 8) if label != "64x128 s8" else (2, 3, 4, 6, 8):
            if units * splits <= room and p.k >= splits * slice_k:
                configs[f"{label}/{splits}"] = {**t, "SPLITS": splits, "PDL": 1}
    return configs


def alternatives(p: GemmProblem, tail: bool = False, two_a_sm: bool = False, rings: bool = False,
                 slice_k: int = SLICE_K) -> dict[str, dict]:
    configs = {}
    for label, t in TILES.items():
        rows, cols = math.ceil(p.m / (t.get("BM", 256))), math.ceil(p.n / 128)
        configs[label] = {**t, "PDL": 1}
        if cols % 2 == 0:
            configs[label + " cn2"] = {**t, "CN": 2, "PDL": 1}
        if tail:
            configs[label + " tail0"] = {**t, "PDL": 1, "TAIL": 0}
        for splits in (2, 3, 4):
            if rows * cols * splits <= SMS and p.k >= splits * slice_k:
                configs[f"{label}/{splits}"] = {**t, "SPLITS": splits}
    if two_a_sm:
        configs.update(split_forms(p, TWO_A_SM_TILES, slice_k))
    if rings:
        configs.update(split_forms(p, RING_TILES, slice_k))
    return configs


def main(args: list[str]) -> None:
    flags, shapes = flags_and_shapes(args, SHAPES)
    refuse_validation_shapes(shapes, "tf32_mid_m.py")
    spec = kernels.KERNELS["hopper_tf32"]
    for label, s, timer, p, chosen, why in chosen_shapes(shapes, TFLOPS_MEASURED, kernel="hopper_tf32"):
        slice_k = next((int(f.split("=")[1]) for f in flags if f.startswith("--slice=")), SLICE_K)
        configs = offered(spec, p, label, chosen,
                          alternatives(p, "--tail" in flags, "--two-a-sm" in flags, "--rings" in flags, slice_k))
        if slice_k != SLICE_K:
            configs["before"] = (tf32_selection.fitted(p, s.device.name) or rungs._register_a_rule(p))[0]
        us = verified_times(s, timer, p, configs, precision="tf32")
        print(f"{label}: chosen {chosen} ({why})", flush=True)
        print_tflops(p, us, precision="tf32")


if __name__ == "__main__":
    main(sys.argv[1:])
