"""The float64 reference and the verdict on a kernel's output.

Every output element is held to a rigorous bound rather than a tuned tolerance. With
unit roundoff u, a K-term dot product in any summation order (with or without FMA) is off
by at most about K*u times the sum of the magnitudes of its terms; alpha, beta and the
final add cost a few more u. So element (i, j) passes when

    |out - ref| <= (K + 3) * u * (|alpha| * (|A| @ |B|) + |beta| * |C|)   (x 1.05 slack)

which holds for every correct kernel on every input, and fails by orders of magnitude for
a wrong index, a missed tile, an unwritten element (NaN poison) or a read of C when
beta == 0 (NaN again).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .problem import GemmProblem

UNIT_ROUNDOFF = {"float32": 2.0**-24}
SLACK = 1.05


@dataclass(frozen=True)
class Reference:
    value: np.ndarray  # float64 alpha * A @ B + beta * C
    magnitude: np.ndarray  # float64 |alpha| |A| @ |B| + |beta| |C|, the scale of each element's error


def reference(problem: GemmProblem, a: np.ndarray, b: np.ndarray, c: np.ndarray | None) -> Reference:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    value = problem.alpha * (a64 @ b64)
    magnitude = abs(problem.alpha) * (np.abs(a64) @ np.abs(b64))
    if problem.beta != 0 and c is not None:
        value += problem.beta * c.astype(np.float64)
        magnitude += abs(problem.beta) * np.abs(c.astype(np.float64))
    return Reference(value, magnitude)


@dataclass(frozen=True)
class Verification:
    ok: bool
    max_error_ratio: float  # worst |out - ref| / bound; <= 1 passes
    relative_error: float  # ||out - ref||_F / ||ref||_F
    wrong: int  # elements over their bound (NaN included)
    nan: int  # NaN elements: unwritten (poison) or computed from a NaN read
    guard_violations: int  # elements outside C that changed
    message: str

    def as_dict(self) -> dict:
        return {
            "ok": self.ok,
            "max_error_ratio": self.max_error_ratio,
            "relative_error": self.relative_error,
            "wrong": self.wrong,
            "nan": self.nan,
            "guard_violations": self.guard_violations,
            "message": self.message,
        }


def check(problem: GemmProblem, out: np.ndarray, ref: Reference, guard_violations: int = 0,
          dtype: str = "float32") -> Verification:
    """Compare ``out`` with ``ref`` element by element against the rounding bound."""
    if out.shape != ref.value.shape:
        raise ValueError(f"output shape {out.shape} differs from the reference's {ref.value.shape}")
    u = UNIT_ROUNDOFF[dtype]
    bound = (problem.k + 3) * u * ref.magnitude * SLACK + np.finfo(np.float32).tiny
    error = np.abs(out.astype(np.float64) - ref.value)
    bad = ~(error <= bound)  # NaN compares false, so NaN counts as wrong
    wrong, nan = int(np.count_nonzero(bad)), int(np.count_nonzero(np.isnan(out)))
    ratio = float("inf") if nan else float(np.max(error / bound)) if out.size else 0.0
    norm = float(np.linalg.norm(ref.value))
    rel = float(np.linalg.norm(np.nan_to_num(out.astype(np.float64), nan=np.inf) - ref.value))
    rel = rel / norm if norm > 0 else rel
    problems = []
    if wrong:
        i, j = np.argwhere(bad)[0]
        problems.append(
            f"{wrong} of {out.size} elements wrong, first at ({i}, {j}): got {out[i, j]!r}, "
            f"expected {ref.value[i, j]!r}"
        )
    if nan:
        problems.append(f"{nan} NaN (unwritten, or computed from a read outside A/B or of C with beta=0)")
    if guard_violations:
        problems.append(f"{guard_violations} elements outside C were overwritten")
    ok = not problems
    return Verification(ok, ratio, rel, wrong, nan, guard_violations, "ok" if ok else "; ".join(problems))
