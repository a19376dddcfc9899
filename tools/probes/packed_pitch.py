"""Probe: the row pitch of a packed operand. A or B rows that are not 16-byte multiples are
copied first into scratch rows of a padded pitch (geometry.packed_ld). Each shape's chosen
configuration runs with its packed operands at a pitch of 16 bytes (TMA's minimum), 32 (L2's
sector) and 128 (a line), on shapes of neither corpus set whose A, B or both need packing.

Each launch is verified once against the float64 reference, then all are timed alternately as
small_m.py times them (the bench's stream hold, the median of 5 rounds of 100 launches),
beside cuBLAS and cuBLASLt.

Run from the repository root:  PYTHONPATH=. python3 tools/probes/packed_pitch.py [MxNxK ...]
"""
import sys
from unittest import mock

from small_m import BASELINES, LAUNCHES, ROUNDS, chosen_shapes, print_tflops, timed, verify_all

from gemm_driver.case import PreparedCase
from gemm_driver.kernels.hopper import geometry

SHAPES = ["4001x3999x4003", "4096x3999x4096", "4096x4096x3999", "2999x5001x2001", "6007x2501x3001"]


def main(args: list[str]) -> None:
    measured = f"us per GEMM (median of {ROUNDS} rounds of {LAUNCHES})"
    for label, s, timer, p, chosen, why in chosen_shapes(args or SHAPES, measured):
        with PreparedCase.random(p, "bf16", 11) as case:
            runs = {}
            for row_bytes in (16, 32, 128):  # the launch's recipe packs at the pitch in force when it is made
                with mock.patch.object(geometry, "PACKED_ROW_BYTES", row_bytes):  # packed_ld's pitch
                    runs[f"packed rows of {row_bytes} B"] = case.launcher(s, "hopper_bf16", chosen)
            runs.update({name: case.launcher(s, name, None) for name in BASELINES})
            verify_all(case, runs)
            us = timed(timer, runs)
        print(f"{label}: chosen {chosen} ({why[:80]})", flush=True)
        print_tflops(p, us, width=22)


if __name__ == "__main__":
    main(sys.argv[1:])
