"""Probe: hopper_bf16's split-K picks with and without PDL. Where choose() splits K over
any_shape's tiles it leaves PDL off (1024x1024x16384 lost 2-3% with it:
results/h100-80gb-hbm3/pdl-split-k-after-handover.txt), while the decode tiles' split-K gained
with it on most small-M shapes. For each MxNxK (no validation shape), choose()'s pick and the
same with PDL=1 beside cuBLAS and cuBLASLt, each verified once, then timed alternately
(small_m.verified_times: the median of 5 rounds of 100 launches behind the stream hold, so that
each launch follows the one before as in a model's loop).

Run from the repository root:  PYTHONPATH=. python3 tools/probes/split_pdl.py [MxNxK ...]
"""
import sys

from small_m import (TFLOPS_MEASURED, chosen_shapes, flags_and_shapes, offered, print_tflops,
                     refuse_validation_shapes, verified_times)

from gemm_driver import kernels
from gemm_driver.kernels.tuned import label

SHAPES = ["128x2304x12288", "128x4096x16384", "128x6656x12288", "128x3584x20480", "192x4096x16384",
          "256x4096x14336", "256x3584x18944", "1024x1024x16384"]


def main(args: list[str]) -> None:
    _, shapes = flags_and_shapes(args, SHAPES)
    refuse_validation_shapes(shapes, "split_pdl.py")
    spec = kernels.KERNELS["hopper_bf16"]
    for shape, s, timer, p, chosen, why in chosen_shapes(shapes, TFLOPS_MEASURED):
        if chosen.get("SPLITS", 1) == 1 or chosen.get("PDL"):
            print(f"{shape}: chosen {label(chosen)} ({why}): no split without PDL, skipped", flush=True)
            continue
        configs = offered(spec, p, shape, chosen, {"chosen+pdl": {**chosen, "PDL": 1}})
        us = verified_times(s, timer, p, configs)
        print(f"{shape}: chosen {label(chosen)} ({why})", flush=True)
        print_tflops(p, us)


if __name__ == "__main__":
    main(sys.argv[1:])
