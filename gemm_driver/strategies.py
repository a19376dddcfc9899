"""Hypothesis strategies for GEMM cases: one module serves the tests and ``verify``.

Shapes are biased towards the values that break kernels: 1, primes, and tile edges
plus or minus one; leading dimensions get random padding and pointers random
misalignment, so every edge path and every non-vectorisable layout is exercised. The
layout (which operands are stored transposed), the output type and the epilogue are drawn
from those a target declares (``variants_of``): row-major, FP32 and none where it declares
nothing more. An FP8 target's cases draw a scaling mode and A's and B's formats (fp8_types) it
declares and how its scales are drawn (``scale_draw``: groups of magnitudes 2^-s..2^s, scales
amax over the format's largest value times 2^offset, so stored values reach the formats'
subnormals and their saturation; operands.random_scaled_operands);
K is drawn like any dimension, so most FP8 cases have K not a multiple of 16.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hypothesis import strategies as st

from .problem import DEFAULT_EPILOGUE, DEFAULT_LAYOUT, DEFAULT_OUT_DTYPE, GemmProblem, layout_flags

TILE_EDGES = tuple(sorted({edge + d for edge in (8, 16, 32, 64, 128, 256) for d in (-1, 0, 1)}))
PRIMES = (2, 3, 5, 7, 11, 13, 17, 31, 61, 67, 127, 131, 251, 257, 293)
SPECIAL_SCALARS = (0.0, 1.0, -1.0, 0.5, -2.5)


@dataclass(frozen=True)
class GemmCase:
    problem: GemmProblem
    pads: tuple[int, int, int]  # extra elements in lda, ldb, ldc beyond the row length
    misalign: tuple[int, int, int]  # elements by which A, B, C start past a 16-byte boundary
    data_seed: int
    scale_draw: tuple[int, int] = (0, 0)  # FP8: (spread, offset) of random_scaled_operands

    def describe(self) -> str:
        p = self.problem
        variant = "" if p.is_default_variant else f" layout={p.layout} out={p.out_dtype} epilogue={p.epilogue}"
        if p.scaling != "none":
            variant += (f" scaling={p.scaling} fp8_types={p.fp8_types} scale spread={self.scale_draw[0]} "
                        f"offset={self.scale_draw[1]}")
        return (f"M={p.m} N={p.n} K={p.k} alpha={p.alpha:g} beta={p.beta:g}{variant} "
                f"ld pads={self.pads} misalign={self.misalign} seed={self.data_seed}")


@dataclass(frozen=True)
class Variants:
    """The layouts, output types and epilogues cases are drawn from."""

    layouts: tuple[str, ...] = (DEFAULT_LAYOUT,)
    out_dtypes: tuple[str, ...] = (DEFAULT_OUT_DTYPE,)
    epilogues: tuple[str, ...] = (DEFAULT_EPILOGUE,)
    scalings: tuple[str, ...] = ("none",)
    fp8_types: tuple[str, ...] = ("e4m3",)


def variants_of(target) -> Variants:
    """Everything a kernel or provider declares (kernels/target.py; FP8 targets also their
    scalings and formats)."""
    return Variants(tuple(target.layouts), tuple(target.out_dtypes), tuple(target.epilogues),
                    tuple(getattr(target, "scalings", ("none",))), tuple(getattr(target, "fp8_types", ("e4m3",))))


def dims(max_value: int = 300) -> st.SearchStrategy[int]:
    special = sorted(v for v in {1, *TILE_EDGES, *PRIMES} if v <= max_value)
    return st.one_of(st.just(1), st.sampled_from(special), st.integers(1, max_value))


def scalars() -> st.SearchStrategy[float]:
    return st.one_of(
        st.sampled_from(SPECIAL_SCALARS),
        st.floats(-4.0, 4.0, allow_nan=False, allow_infinity=False, width=32),
    )


@st.composite
def gemm_cases(draw, max_dim: int = 300, variants: Variants = Variants()) -> GemmCase:
    m, n, k = draw(dims(max_dim)), draw(dims(max_dim)), draw(dims(max_dim))
    alpha, beta = float(draw(scalars())), float(draw(scalars()))
    trans_a, trans_b = layout_flags(draw(st.sampled_from(variants.layouts)))
    problem = GemmProblem(m, n, k, alpha, beta, trans_a=trans_a, trans_b=trans_b,
                          out_dtype=draw(st.sampled_from(variants.out_dtypes)),
                          epilogue=draw(st.sampled_from(variants.epilogues)),
                          scaling=draw(st.sampled_from(variants.scalings)))
    scale_draw = (0, 0)
    if problem.scaling != "none":
        problem = dataclasses.replace(problem, fp8_types=draw(st.sampled_from(variants.fp8_types)))
        scale_draw = (draw(st.sampled_from((0, 0, 4, 20))), draw(st.sampled_from((0, 0, 3, 8, -2))))
    pads = tuple(draw(st.sampled_from((0, 0, 1, 3, 4, 5))) for _ in range(3))
    misalign = tuple(draw(st.sampled_from((0, 0, 1, 2, 3))) for _ in range(3))
    return GemmCase(problem, pads, misalign, draw(st.integers(0, 2**32 - 1)), scale_draw)
