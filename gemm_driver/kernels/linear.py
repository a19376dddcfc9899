"""Kernels that write a linear layer's D: the output type and the epilogue as template arguments.

D's type (FP32, BF16, FP16) and the epilogue (none, bias, bias + ReLU, bias + GELU) change a
kernel's code (cu/common/epilogue.cuh), so each is a template argument, carried as a tunable
(OUT, EPI) that the problem sets: ``LinearSpec.validate`` fills them in from the problem's
out_dtype and epilogue and refuses a given value that differs, so the resolved tunables name
the build that computes this problem, a build per combination that runs. A subclass names more
such arguments (the Hopper kernels' operand layouts, FP8's scaling) by overriding
``fixed_tunables`` and ``fixed_by``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..cuda.errors import UnsupportedProblem
from ..problem import GemmProblem
from .spec import KernelSpec, Tunable
from .target import check_capabilities

# common/epilogue.cuh's OutId and EpiId, by problem.py's spelling
OUT_CODE = {"fp32": 0, "bf16": 1, "fp16": 2}
EPILOGUE_CODE = {"none": 0, "bias": 1, "bias_relu": 2, "bias_gelu": 3}
OUT_DTYPE = {code: name for name, code in OUT_CODE.items()}
EPILOGUE = {code: name for name, code in EPILOGUE_CODE.items()}

OUTPUT_TUNABLES = (
    Tunable("OUT", 0, (0, 1, 2), "D's type, set by the problem's out_dtype: 0 FP32, 1 BF16, 2 FP16"),
    Tunable("EPI", 0, (0, 1, 2, 3), "epilogue, set by the problem: 0 none, 1 bias, 2 bias + ReLU, 3 bias + GELU"),
)


def output_tunables(problem: GemmProblem) -> dict[str, int]:
    """OUT and EPI as ``problem`` sets them."""
    return {"OUT": OUT_CODE[problem.out_dtype], "EPI": EPILOGUE_CODE[problem.epilogue]}


@dataclass(frozen=True)
class LinearSpec(KernelSpec):
    """A KernelSpec whose output type and epilogue are template arguments set by the problem."""

    def fixed_tunables(self, problem: GemmProblem) -> dict[str, int]:
        """The tunables ``problem`` sets."""
        return output_tunables(problem)

    def fixed_by(self, problem: GemmProblem) -> str:
        """What of ``problem`` sets them, for the refusal's words."""
        return f"out {problem.out_dtype}, epilogue {problem.epilogue}"

    def resolve(self, overrides: Mapping[str, int] | None = None) -> dict[str, int]:
        """KernelSpec.resolve, with OUT and EPI held to what the kernel declares: `compile` and
        `inspect` build without a problem, and a build of an output type it never runs is refused."""
        values = super().resolve(overrides)
        for name, codes, declared in (("OUT", OUT_CODE, self.out_dtypes), ("EPI", EPILOGUE_CODE, self.epilogues)):
            allowed = {codes[d]: d for d in declared}
            if name in values and values[name] not in allowed:
                choices = ", ".join(f"{code} ({what})" for code, what in allowed.items())
                raise UnsupportedProblem(f"{self.name}: {name}={values[name]} is not among what it takes: {choices}")
        return values

    def validate(self, problem: GemmProblem, overrides: Mapping[str, int] | None = None) -> dict[str, int]:
        check_capabilities(self, problem)  # what the kernel does not take is said in those words
        fixed = self.fixed_tunables(problem)
        for name, value in (overrides or {}).items():
            if name in fixed and value != fixed[name]:
                raise UnsupportedProblem(
                    f"{self.name}: {name} is set by the problem ({self.fixed_by(problem)}): {fixed[name]}, not {value}")
        return super().validate(problem, {**(overrides or {}), **fixed})

    def probe(self, m: int, n: int, k: int, tunables: Mapping[str, int] | None = None) -> GemmProblem:
        """The problem with the layout (TRANS_A, TRANS_B where the kernel has them), output type
        and epilogue that ``tunables`` name, so a checked configuration may name a linear-layer build."""
        t = {**{tn.name: tn.default for tn in self.tunables}, **(tunables or {})}
        return GemmProblem(m, n, k, trans_a=bool(t.get("TRANS_A", 0)), trans_b=bool(t.get("TRANS_B", 0)),
                           out_dtype=OUT_DTYPE[t.get("OUT", 0)], epilogue=EPILOGUE[t.get("EPI", 0)])
