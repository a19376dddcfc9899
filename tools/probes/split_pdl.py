"""Probe: a Hopper kernel's split-K picks with and without PDL. Where choose() splits K over
any_shape's tiles (hopper_bf16/fp16) it leaves PDL off (1024x1024x16384 lost 2-3% with it:
results/h100-80gb-hbm3/pdl-split-k-after-handover.txt), while the decode tiles' split-K gained
with it on most small-M shapes, and so did hopper_tf32's split small tiles (M <= 128), which take
it. For each MxNxK (no validation shape), choose()'s pick and the same with PDL the other way
("chosen+pdl" or "chosen-pdl") beside cuBLAS and cuBLASLt, each
verified once, then timed alternately (small_m.verified_times: the median of 5 rounds of 100
launches behind the stream hold, so that each launch follows the one before as in a model's loop).

Run from the repository root:
    PYTHONPATH=. python3 tools/probes/split_pdl.py [--tf32] [MxNxK ...]
--tf32: hopper_tf32 (and its default shapes), else hopper_bf16.
"""
import sys

from small_m import (TFLOPS_MEASURED, chosen_shapes, flags_and_shapes, offered, print_tflops,
                     refuse_validation_shapes, verified_times)

from gemm_driver import kernels
from gemm_driver.kernels.tuned import label

SHAPES = {"bf16": ["128x2304x12288", "128x4096x16384", "128x6656x12288", "128x3584x20480", "192x4096x16384",
                   "256x4096x14336", "256x3584x18944", "1024x1024x16384"],
          "tf32": ["1x4096x4096", "8x8192x8192", "16x4096x4096", "24x2048x8192", "32x4096x11008", "48x5120x5120",
                   "64x6144x4096", "100x3072x6144", "128x4096x8192"]}


def main(args: list[str]) -> None:
    flags, shapes = flags_and_shapes(args, [])
    precision = "tf32" if "--tf32" in flags else "bf16"
    shapes = shapes or SHAPES[precision]
    refuse_validation_shapes(shapes, "split_pdl.py")
    name = f"hopper_{precision}"
    spec = kernels.KERNELS[name]
    for shape, s, timer, p, chosen, why in chosen_shapes(shapes, TFLOPS_MEASURED, name):
        if chosen.get("SPLITS", 1) == 1:
            print(f"{shape}: chosen {label(chosen)} ({why}): no split, skipped", flush=True)
            continue
        other = ({"chosen-pdl": {k: v for k, v in chosen.items() if k != "PDL"}} if chosen.get("PDL")
                 else {"chosen+pdl": {**chosen, "PDL": 1}})  # the same split with PDL the other way
        configs = offered(spec, p, shape, chosen, other)
        us = verified_times(s, timer, p, configs, precision=precision)
        print(f"{shape}: chosen {label(chosen)} ({why})", flush=True)
        print_tflops(p, us, precision=precision)


if __name__ == "__main__":
    main(sys.argv[1:])
