"""Probe: hopper_bf16 at small M with A stored transposed (layouts tn, tt: a weight gradient
dW = dY^T X whose output has few rows), where the vote alone picked before the rules below,
from neighbours timed with A row-major.

The questions it was written for: does the small-grid rule's split-K (grid_fill_choice: 64 x 64
tiles split inside clusters of 2-4 CTAs, or through the workspace), which the rules applied only
past the decode tiles' M, serve these shapes too; and how do the decode tiles do with A's tile
M-major (64 rows only: transposed_decode_choice)? Each shape runs the pick, every candidate the
vote offers, 64 x 64 and 128 x 64 tiles split 2-8 ways both ways, and the 64-row decode tiles
with one or two consumers split 1-8 ways, each verified once against the float64 reference,
then all timed alternately as small_m.py times them, beside cuBLAS and cuBLASLt with the same
layout. D in BF16, as a training step writes dW. No shape of either corpus set (the probe
refuses validation shapes; the tuning set holds none of these).

--check: the pick beside the vote's pick and the baselines on CHECK_SHAPES, chosen after the
rules (grid_fill_choice, transposed_decode_choice) were written from the default shapes.

Run from the repository root:
    PYTHONPATH=. python3 tools/probes/transposed_small_m.py [--check] [MxNxK ...]
"""

from __future__ import annotations

import sys

from small_m import TFLOPS_MEASURED, flags_and_shapes, offered, print_tflops, refuse_validation_shapes, verified_times

from gemm_driver import Session, kernels
from gemm_driver.bench.timing import GpuTimer
from gemm_driver.kernels import tuned
from gemm_driver.kernels.hopper import rungs, selection
from gemm_driver.problem import GemmProblem

# --check: chosen after the rules were written (the first form of transposed_decode_choice was
# checked on 4x6144x4096, 12x5120x3072, 20x4608x8192, 2x3584x7168, 32x6144x2048, 16x10240x4096,
# 8x2560x8192 and 28x3072x3072; these after its bounds on K and the tiles)
CHECK_SHAPES = ["6x5120x6144", "10x3328x8192", "24x7168x4096", "3x4096x12288", "30x5632x5120", "16x6656x4096",
                "12x2304x16384", "5x8192x4096"]
SHAPES = ["16x2048x4096", "8x4096x4096", "32x1024x8192", "16x4096x2048", "32x2048x2048", "24x3072x6144",
          "16x8192x4096", "1x4096x4096", "48x4096x4096", "64x3072x6144"]


def split_forms() -> dict[str, dict]:
    """64 x 64 tiles split inside clusters (CK) and through the workspace (SPLITS, no PDL, as the
    rules run split-K), and 128 x 64 tiles through the workspace."""
    forms = {f"64x64 ck{ck}": {**selection.TILE_64x64, "CK": ck} for ck in (2, 3, 4)}
    forms.update({f"64x64 split{s}": {**selection.no_pdl(selection.TILE_64x64), "SPLITS": s} for s in (2, 4, 8)})
    forms.update({f"128x64 split{s}": {**selection.no_pdl(selection.TILE_128x64), "SPLITS": s} for s in (2, 4)})
    return forms


def decode_forms() -> dict[str, dict]:
    """The decode tiles with A's tile M-major (64 rows: DECODE_TRANSPOSED_ROWS), one consumer
    (64 x 64, two CTAs an SM) or two (64 x 128), whole or split 2-8 ways, all with PDL as
    decode_choice launches them ("d64x<consumers>/<splits>", small_m.py's labels)."""
    rows = rungs.DECODE_TRANSPOSED_ROWS
    return {f"d{rows}x{c}/{s}": {"DECODE": rows, "BN": 64 * c, "CONSUMERS": c, "PDL": 1,
                                  **({"SPLITS": s} if s > 1 else {})}
            for c in (1, 2) for s in (1, 2, 4, 8)}


def every_form(p: GemmProblem, chosen: dict, gpu_name: str) -> tuple[dict[str, dict], str]:
    """The default run's alternatives: every candidate the vote offers, the split forms and the
    decode forms."""
    others = {tuned.label(t): t for t in selection.candidates(p) if t != chosen}
    return {**others, **split_forms(), **decode_forms()}, ""


def the_vote(p: GemmProblem, chosen: dict, gpu_name: str) -> tuple[dict[str, dict], str]:
    """--check's alternative: the vote's pick (rungs.voted_choice: what the shape ran before the
    rules that now take it)."""
    voted, _ = rungs.voted_choice(p, gpu_name)
    return {"vote": voted}, f"; vote {tuned.label(voted)}"


def probe(labels: list[str], heading: str, alternatives, width: int) -> None:
    """Per tn label: the pick and ``alternatives(problem, pick, gpu_name)``, each verified, then
    all timed alternately with the baselines (small_m.verified_times) and printed fastest first."""
    refuse_validation_shapes(labels, "transposed_small_m.py")
    spec = kernels.KERNELS["hopper_bf16"]
    with Session() as s:
        timer = GpuTimer(s.stream, s.arch)
        print(f"{s.device.name}; layout tn, BF16 D; {heading}{TFLOPS_MEASURED}", flush=True)
        for label in labels:
            p = GemmProblem(*map(int, label.split("x")), trans_a=True, out_dtype="bf16")
            chosen, why = spec.choose(p, s.device.name)
            others, note = alternatives(p, chosen, s.device.name)
            us = verified_times(s, timer, p, offered(spec, p, label, chosen, others))
            print(f"{label} tn: chosen {tuned.label(chosen)} ({why}){note}", flush=True)
            print_tflops(p, us, width=width)


def main(args: list[str]) -> None:
    flags, labels = flags_and_shapes(args, CHECK_SHAPES if "--check" in args else SHAPES)
    if "--check" in flags:
        probe(labels, "the pick against the vote's; ", the_vote, 14)
    else:
        probe(labels, "", every_form, 36)


if __name__ == "__main__":
    main(sys.argv[1:])
