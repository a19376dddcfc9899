"""Property-based correctness runs: a kernel against the float64 reference on drawn cases.

``check_case`` runs one drawn case with every trap set (NaN-poisoned output, guard band,
padded leading dimensions, misaligned pointers, fresh random data; a guarded bias vector
with an epilogue) through the one prepared case and ``run_case`` (case.py). Cases are drawn
in every layout, output type, epilogue and FP8 scaling mode the kernel declares (or in one
mode: ``drawn_variants``). ``verify_kernel`` lets Hypothesis draw and
shrink cases and reports the smallest failing one; the tests and the ``verify`` command
both use them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping

from hypothesis import HealthCheck, given, settings

from .case import Outcome, PreparedCase, run_case
from .cuda.errors import UnsupportedProblem
from . import kernels
from .kernels import precision_of
from .operands import stored_shapes
from .session import Session
from .strategies import GemmCase, Variants, gemm_cases, variants_of

GUARD_ROWS = 2


def check_case(session: Session, kernel: str, case: GemmCase, tunables: Mapping[str, int] | None = None) -> Outcome:
    """One drawn case in the kernel's precision (its operands' storage and its bound); each
    stored row (a transposed operand's too) padded by the case's ``pads``."""
    lds = tuple(cols + pad for (_, cols), pad in zip(stored_shapes(case.problem), case.pads))
    with PreparedCase.random(case.problem, precision_of(kernel), case.data_seed, guard=GUARD_ROWS, lds=lds,
                             misalign=case.misalign, scale_draw=case.scale_draw) as prepared:
        return run_case(session, kernel, prepared, tunables=tunables)


@dataclass(frozen=True)
class VerifyOutcome:
    kernel: str
    examples: int
    failing_case: GemmCase | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.failing_case is None and not self.message


def drawn_variants(kernel: str, scaling: str | None = None, fp8_types: str | None = None) -> Variants:
    """What ``kernel``'s cases are drawn from: all it declares, or one FP8 ``scaling`` mode
    and one pair of ``fp8_types`` of them (ValueError naming the modes or pairs it takes)."""
    variants = variants_of(kernels.get(kernel))
    fp8 = [x for x in variants.scalings if x != "none"]
    for flag, value, takes in (("--scaling", scaling, fp8), ("--fp8-types", fp8_types, variants.fp8_types)):
        if value is not None and not fp8:
            raise ValueError(f"{kernel} takes no FP8 scaling; {flag} applies to fp8 kernels")
        if value is not None and value not in takes:
            what = "scalings" if flag == "--scaling" else "FP8 formats"
            raise ValueError(f"{kernel} takes the {what} {', '.join(takes)}, not {value!r}")
    return replace(variants, scalings=(scaling,) if scaling else variants.scalings,
                   fp8_types=(fp8_types,) if fp8_types else variants.fp8_types)


def verify_kernel(session: Session, kernel: str, examples: int = 100, max_dim: int = 300,
                  tunables: Mapping[str, int] | None = None, on_example: Callable[[], None] = lambda: None,
                  scaling: str | None = None, fp8_types: str | None = None) -> VerifyOutcome:
    """Run ``examples`` drawn cases (of one FP8 ``scaling`` mode and pair of ``fp8_types`` when
    given); on failure, Hypothesis shrinks to the smallest case. ``on_example`` is called before
    each (the isolation watchdog's heartbeat)."""
    seen = 0
    failures: list[tuple[GemmCase, str]] = []

    @settings(max_examples=examples, deadline=None, database=None, print_blob=False,
              suppress_health_check=list(HealthCheck))
    @given(case=gemm_cases(max_dim, drawn_variants(kernel, scaling, fp8_types)))
    def property_holds(case: GemmCase) -> None:
        nonlocal seen
        seen += 1
        on_example()
        outcome = check_case(session, kernel, case, tunables)  # a fault is FAILED, like a wrong answer
        if outcome.status == "skipped":  # not a property failure: the kernel cannot run here
            raise UnsupportedProblem(outcome.detail)
        message = outcome.message
        if message != "ok":
            failures.append((case, message))
            raise AssertionError(message)

    try:
        property_holds()
    except AssertionError:
        case, message = failures[-1]  # Hypothesis replays the shrunk example last
        return VerifyOutcome(kernel, seen, case, message)
    return VerifyOutcome(kernel, seen)


@dataclass(frozen=True)
class VerifyTask:
    kernel: str
    examples: int
    max_dim: int
    scaling: str | None = None  # one FP8 scaling mode; None: every mode the kernel declares
    fp8_types: str | None = None  # one pair of FP8 formats; None: every pair the kernel declares

    @property
    def label(self) -> str:
        chosen = ", ".join(filter(None, (self.scaling, self.fp8_types)))
        return f"{self.kernel} ({chosen})" if chosen else self.kernel


def verify_task(session: Session, state: dict, task: VerifyTask, beat: Callable[[], None]) -> VerifyOutcome | str:
    """A worker's handler (bench/isolation.py): one kernel's verify run; a kernel that cannot
    run here at all comes back as the reason (a str), which is bad input, not a failure."""
    try:
        return verify_kernel(session, task.kernel, task.examples, task.max_dim, on_example=beat, scaling=task.scaling,
                             fp8_types=task.fp8_types)
    except ValueError as exc:
        return str(exc).splitlines()[0]
