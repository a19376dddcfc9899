"""The kernel registry: every kernel and baseline provider, by name."""

from __future__ import annotations

from . import ladder, simt, warptiling
from .spec import KernelSpec, Provider, Tunable

PROVIDERS = (
    Provider("cublas", "cuBLAS SGEMM, FP32 compute, no TF32 (the baseline)", "library", min_cc=(5, 0)),
    Provider("numpy", "NumPy float32 matmul on the CPU", "cpu"),
)

# Ladder order: each rung's speed-up is reported against the one before it. The
# hand-written PTX kernel is a side branch of the first rung, so it comes last.
LADDER = (*simt.FIRST_RUNGS, *ladder.SPECS, *warptiling.SPECS)
SPECS = (*LADDER, simt.ptx_naive)
KERNELS: dict[str, KernelSpec] = {spec.name: spec for spec in SPECS}
ALL: dict[str, KernelSpec | Provider] = {**{p.name: p for p in PROVIDERS}, **KERNELS}


def get(name: str) -> KernelSpec | Provider:
    """The kernel or provider called ``name``; ValueError listing the known names."""
    try:
        return ALL[name]
    except KeyError:
        raise ValueError(f"unknown kernel {name!r}; known: {', '.join(ALL)}") from None


__all__ = ["ALL", "KERNELS", "PROVIDERS", "KernelSpec", "Provider", "Tunable", "get"]
