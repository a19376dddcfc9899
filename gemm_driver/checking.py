"""Property-based correctness runs: a kernel against the float64 reference on drawn cases.

``check_case`` runs one drawn case with every trap set (NaN-poisoned output, guard band,
padded leading dimensions, misaligned pointers, fresh random data). ``verify_kernel``
lets Hypothesis draw and shrink cases and reports the smallest failing one; the tests
and the ``verify`` command both use them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
from hypothesis import HealthCheck, given, settings

from . import kernels
from .cuda.errors import CudaError
from .gemm import Session, verify_once
from .operands import random_operands, upload_operands
from .strategies import GemmCase, gemm_cases
from .verify import Verification, reference

GUARD_ROWS = 2


def check_case(session: Session, kernel: str, case: GemmCase, tunables: Mapping[str, int] | None = None) -> Verification:
    p = case.problem
    dtype = kernels.get(kernel).dtype  # operands and bound of the kernel's precision (precision.py)
    a_host, b_host, c_host = random_operands(p, np.random.default_rng(case.data_seed), dtype)
    ref = reference(p, a_host, b_host, c_host)
    lds = (p.k + case.pads[0], p.n + case.pads[1], p.n + case.pads[2])
    operands = upload_operands(p, a_host, b_host, c_host, guard=GUARD_ROWS, lds=lds, misalign=case.misalign,
                               precision=dtype)
    try:
        launch = session.launcher(kernel, p, *operands, tunables)
        return verify_once(session, launch, p, operands[2], c_host, ref, dtype)
    finally:
        for matrix in operands:
            matrix.close()


@dataclass(frozen=True)
class VerifyOutcome:
    kernel: str
    examples: int
    failing_case: GemmCase | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.failing_case is None and not self.message


def verify_kernel(session: Session, kernel: str, examples: int = 100, max_dim: int = 300,
                  tunables: Mapping[str, int] | None = None) -> VerifyOutcome:
    """Run ``examples`` drawn cases; on failure, Hypothesis shrinks to the smallest case."""
    seen = 0
    failures: list[tuple[GemmCase, str]] = []

    @settings(max_examples=examples, deadline=None, database=None, print_blob=False,
              suppress_health_check=list(HealthCheck))
    @given(case=gemm_cases(max_dim))
    def property_holds(case: GemmCase) -> None:
        nonlocal seen
        seen += 1
        try:
            message = check_case(session, kernel, case, tunables).message
        except CudaError as exc:  # a faulting kernel fails its case like a wrong answer
            message = str(exc).splitlines()[0]
        if message != "ok":
            failures.append((case, message))
            raise AssertionError(message)

    try:
        property_holds()
    except AssertionError:
        case, message = failures[-1]  # Hypothesis replays the shrunk example last
        return VerifyOutcome(kernel, seen, case, message)
    return VerifyOutcome(kernel, seen)
