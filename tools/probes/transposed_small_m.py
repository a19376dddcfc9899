"""Probe: hopper_bf16 at small M with A stored transposed (layouts tn, tt: a weight gradient
dW = dY^T X whose output has few rows), where the decode tiles do not run (they read A
row-major) and no rule picks: the vote's pick, from neighbours timed with A row-major.

The question: does the small-grid rule's split-K (grid_fill_choice: 64 x 64 tiles split inside
clusters of 2-4 CTAs, or through the workspace), which the rules apply only past the decode
tiles' M, serve these shapes too? Each shape runs the pick, every candidate the vote offers,
and 64 x 64 and 128 x 64 tiles split 2-8 ways both ways, each verified once against the float64
reference, then all timed alternately as small_m.py times them, beside cuBLAS and cuBLASLt with
the same layout. D in BF16, as a training step writes dW. No shape of either corpus set (the
probe refuses validation shapes; the tuning set holds none of these).

Run from the repository root:
    PYTHONPATH=. python3 tools/probes/transposed_small_m.py [MxNxK ...]
"""

from __future__ import annotations

import sys

from small_m import TFLOPS_MEASURED, offered, print_tflops, refuse_validation_shapes, verified_times

from gemm_driver import Session, kernels
from gemm_driver.bench.timing import GpuTimer
from gemm_driver.kernels import tuned
from gemm_driver.kernels.hopper import selection
from gemm_driver.problem import GemmProblem

SHAPES = ["16x2048x4096", "8x4096x4096", "32x1024x8192", "16x4096x2048", "32x2048x2048", "24x3072x6144",
          "16x8192x4096"]


def split_forms() -> dict[str, dict]:
    """64 x 64 tiles split inside clusters (CK) and through the workspace (SPLITS, no PDL, as the
    rules run split-K), and 128 x 64 tiles through the workspace."""
    forms = {f"64x64 ck{ck}": {**selection.TILE_64x64, "CK": ck} for ck in (2, 3, 4)}
    forms.update({f"64x64 split{s}": {**selection.no_pdl(selection.TILE_64x64), "SPLITS": s} for s in (2, 4, 8)})
    forms.update({f"128x64 split{s}": {**selection.no_pdl(selection.TILE_128x64), "SPLITS": s} for s in (2, 4)})
    return forms


def main(labels: list[str]) -> None:
    labels = labels or SHAPES
    refuse_validation_shapes(labels, "transposed_small_m.py")
    spec = kernels.KERNELS["hopper_bf16"]
    with Session() as s:
        timer = GpuTimer(s.stream, s.arch)
        print(f"{s.device.name}; layout tn, BF16 D; {TFLOPS_MEASURED}", flush=True)
        for label in labels:
            p = GemmProblem(*map(int, label.split("x")), trans_a=True, out_dtype="bf16")
            chosen, why = spec.choose(p, s.device.name)
            others = {tuned.label(t): t for t in selection.candidates(p) if t != chosen}
            others.update(split_forms())
            us = verified_times(s, timer, p, offered(spec, p, label, chosen, others))
            print(f"{label} tn: chosen {tuned.label(chosen)} ({why})", flush=True)
            print_tflops(p, us, width=36)


if __name__ == "__main__":
    main(sys.argv[1:])
