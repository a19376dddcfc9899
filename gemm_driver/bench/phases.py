"""Where a worker's time on one task went: seconds per phase, each lap from the end of the last.

The sweep's trials (autotune.py) and the bench's cases (runner.py) record them (``phases_s``):
"case" (the shape's operands drawn on the host, paid by its first task), "build" (compile or
load, and for cuBLASLt the timing of its heuristic's candidates), "verify" (the checked run:
poisoning C, the launch, the check of D) and "time" (the timed launches). The shape's first
task also pays its operands' upload (the bench's in "build", a sweep's in "time": the first
launcher made) and its float64 reference (in "verify": the case computes it when first checked).
A run's timed windows alone are far from its wall time (the H100's BF16 validation: 32 s of
timing in a 341 s run, 160 s verifying, nearly all of it the references), and these say where
the rest goes.
"""

from __future__ import annotations

import time


class Phases:
    """A task's phases, timed as laps of one clock."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, phase: str) -> None:
        """The seconds since the last lap (or the start) are ``phase``'s."""
        now = time.perf_counter()
        self.seconds[phase], self._last = round(now - self._last, 4), now

    def split_verify(self, verify_s: float | None) -> None:
        """run_case verified before it timed, inside the "time" lap: those seconds are "verify"'s."""
        if verify_s is not None:
            self.seconds["verify"] = round(verify_s, 4)
            self.seconds["time"] = round(max(self.seconds["time"] - verify_s, 0.0), 4)
