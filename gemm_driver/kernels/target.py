"""GemmTarget: what every registered name is to its callers, a kernel or a provider alike.

``kernels.get(name)`` returns a KernelSpec (one of our kernels, built and launched by the
Session) or a Provider (a library baseline that owns its launcher, or a host one). Callers
(the prepared case, gemm(), Plan, the Session) ask this interface only: they never branch
on a provider's name or probe for attributes. How a target is launched stays with the
Session, which makes a Launch from a KernelSpec's build or from a Provider's launcher.
"""

from __future__ import annotations

from typing import Mapping, Protocol

from ..cuda.errors import UnsupportedProblem
from ..problem import EPILOGUES, LAYOUTS, OUT_DTYPES, GemmProblem


class GemmTarget(Protocol):
    name: str
    description: str
    precision: str  # precision.py's spelling: fp32, tf32, bf16, fp16
    single: bool  # listed for unbatched shapes
    # What it computes beyond the row-major FP32-out GEMM (problem.py spells each value):
    layouts: tuple[str, ...]  # "nn", "nt", "tn", "tt" it reads
    out_dtypes: tuple[str, ...]  # "fp32", "bf16", "fp16" it writes D (and reads C) in
    epilogues: tuple[str, ...]  # "none", "bias", "bias_relu", "bias_gelu" it applies
    measures: bool  # its launcher runs the GEMM on the operands while it is made (a caller saves C around it)

    @property
    def transposes(self) -> bool:
        """Takes some layout other than "nn" (gemm()'s transposed views)."""

    @property
    def min_arch(self) -> str:
        """'sm_80', 'sm_90a', or '-' for the host."""

    @property
    def runs_on_host(self) -> bool:
        """Computed on the host operands by ``host_gemm(problem, a, b, c)``, with no GPU."""

    @property
    def uses_scratch(self) -> bool:
        """Its launches use Session scratch (split-K, packed operands, a library's
        workspace), so work on two streams must be ordered around it."""

    def takes_batch(self, batch: int) -> bool:
        """Whether it computes a stacked batch of ``batch`` GEMMs in one call."""

    def check_tunables(self, tunables: Mapping[str, int] | None) -> dict[str, int]:
        """The tunables merged with its defaults; UnsupportedProblem naming an unknown name,
        a disallowed value, or any tunable at all for a target that takes none."""

    def check_device(self, compute_capability: tuple[int, int]) -> None:
        """UnsupportedProblem when it cannot run on a GPU of ``compute_capability`` here."""


def check_capabilities(target: GemmTarget, problem: GemmProblem) -> None:
    """UnsupportedProblem naming what ``target`` takes when ``problem``'s layout, output type,
    epilogue or scaling is not among those it declares."""
    for what, value, allowed in (("layout", problem.layout, target.layouts),
                                 ("output type", problem.out_dtype, target.out_dtypes),
                                 ("epilogue", problem.epilogue, target.epilogues),
                                 # FP8 scaling modes: FP8 targets declare them; the others take "none"
                                 ("scaling", problem.scaling, getattr(target, "scalings", ("none",))),
                                 # FP8 formats of A and B: FP8 targets declare them; the others see "e4m3", unread
                                 ("fp8_types", problem.fp8_types, getattr(target, "fp8_types", ("e4m3",)))):
        if value not in allowed:
            raise UnsupportedProblem(f"{target.name} does not take {what} {value!r}; it takes {', '.join(allowed)}")


def declared(target: GemmTarget) -> dict[str, tuple[str, ...]]:
    """What ``target`` takes beyond the row-major FP32-out GEMM, by the problem field's name:
    layouts, out_dtypes, epilogues, and an FP8 target's scalings and fp8_types."""
    fields = {"layouts": target.layouts, "out_dtypes": target.out_dtypes, "epilogues": target.epilogues}
    scalings = getattr(target, "scalings", ("none",))
    fp8_types = getattr(target, "fp8_types", ("e4m3",))
    return {name: tuple(values) for name, values in fields.items()} | (
        {} if tuple(scalings) == ("none",) else {"scalings": tuple(scalings), "fp8_types": tuple(fp8_types)})


def capability_refusal(target: GemmTarget, problem: GemmProblem) -> str | None:
    """``check_capabilities``' reason for refusing ``problem``, or None where ``target`` takes it."""
    try:
        check_capabilities(target, problem)
    except UnsupportedProblem as exc:
        return str(exc)
    return None


def declared_transposes(layouts: tuple[str, ...]) -> bool:
    """Whether ``layouts`` holds one with a transposed operand."""
    return any(layout != "nn" for layout in layouts)


def check_declared(name: str, layouts, out_dtypes, epilogues) -> None:
    """ValueError at registration when a target declares a value problem.py does not spell
    (a typo would otherwise make every such case silently not run)."""
    for what, values, allowed in (("layouts", layouts, LAYOUTS), ("out_dtypes", out_dtypes, OUT_DTYPES),
                                  ("epilogues", epilogues, EPILOGUES)):
        if not isinstance(values, tuple) or not values or any(v not in allowed for v in values):
            raise ValueError(f"{name}: {what} must be a non-empty tuple of {', '.join(allowed)}; got {values!r}")
