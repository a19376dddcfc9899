"""GemmTarget: what every registered name is to its callers, a kernel or a provider alike.

``kernels.get(name)`` returns a KernelSpec (one of our kernels, built and launched by the
Session) or a Provider (a library baseline that owns its launcher, or a host one). Callers
(the prepared case, gemm(), Plan, the Session) ask this interface only: they never branch
on a provider's name or probe for attributes. How a target is launched stays with the
Session, which makes a Launch from a KernelSpec's build or from a Provider's launcher.
"""

from __future__ import annotations

from typing import Mapping, Protocol


class GemmTarget(Protocol):
    name: str
    description: str
    precision: str  # precision.py's spelling: fp32, tf32, bf16, fp16
    single: bool  # listed for unbatched shapes
    transposes: bool  # also reads operands stored transposed (operand.trans; gemm()'s transposed views)
    measures: bool  # its launcher runs the GEMM on the operands while it is made (a caller saves C around it)

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
