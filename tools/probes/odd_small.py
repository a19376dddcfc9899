"""Probe: small shapes whose A and B rows TMA cannot read (K and N not multiples of 8 in BF16),
so both are packed before the GEMM (pack.cuh). For each shape (of neither corpus set), the
configuration choose() picks runs on the shape itself ("chosen": packing first), on its
aligned twin (N and K rounded up to multiples of 8: nothing to pack, a little more work:
what the packing costs), and split 2 and 4 ways, beside cuBLAS and cuBLASLt on the shape.
Each launch is verified once against the float64 reference, then all are timed alternately as
small_m.py times them (the median of 5 rounds of 100 launches, shuffled each round).

--once: verify the chosen launch and launch it once more, no timing (for ncu: how long the
packing and the GEMM each take).

Run from the repository root:  PYTHONPATH=. python3 tools/probes/odd_small.py [--once] [MxNxK ...]
"""
import sys

from small_m import BASELINES, LAUNCHES, ROUNDS, chosen_shapes, flags_and_shapes, print_tflops, timed, verify_all

from gemm_driver import kernels
from gemm_driver.case import PreparedCase
from gemm_driver.problem import GemmProblem

SHAPES = ["81x1250x230", "500x130x101", "560x61x1531", "601x77x2003", "400x170x2770", "370x330x330"]
SPLITS = (2, 4)


def aligned(p: GemmProblem) -> GemmProblem:
    """``p`` with N and K rounded up to multiples of 8: BF16 rows of whole 16 bytes."""
    return GemmProblem(p.m, -(-p.n // 8) * 8, -(-p.k // 8) * 8)


def main(args: list[str]) -> None:
    flags, shapes = flags_and_shapes(args, SHAPES)
    once = "--once" in flags
    spec = kernels.KERNELS["hopper_bf16"]
    measured = f"us per GEMM (median of {ROUNDS} rounds of {LAUNCHES})"
    for label, s, timer, p, chosen, why in chosen_shapes(shapes, measured):
        if once:
            with PreparedCase.random(p, "bf16", 11) as case:
                launch = case.launcher(s, "hopper_bf16", chosen)
                verify_all(case, {"chosen": launch})
                launch()
                s.stream.synchronize()
            continue
        twin = aligned(p)
        with PreparedCase.random(p, "bf16", 11) as case, PreparedCase.random(twin, "bf16", 12) as twin_case:
            runs = {"chosen": case.launcher(s, "hopper_bf16", chosen)}
            for splits in SPLITS:
                try:
                    tunables = spec.validate(p, {**chosen, "SPLITS": splits})
                except ValueError as exc:
                    print(f"  {label} split {splits}: refused ({exc})")
                    continue
                runs[f"split {splits}"] = case.launcher(s, "hopper_bf16", tunables)
            runs.update({name: case.launcher(s, name, None) for name in BASELINES})
            verify_all(case, runs)
            twin_run = {"aligned twin": twin_case.launcher(s, "hopper_bf16", chosen)}
            verify_all(twin_case, twin_run)
            us = timed(timer, {**runs, **twin_run})
        print(f"{label} (twin {twin.m}x{twin.n}x{twin.k}): chosen {chosen} ({why[:80]})", flush=True)
        print_tflops(p, us, width=14)


if __name__ == "__main__":
    main(sys.argv[1:])
