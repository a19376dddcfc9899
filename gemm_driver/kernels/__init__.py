"""The kernel registry: every kernel and baseline provider, by name."""

from __future__ import annotations

from . import ladder, simt, warptiling
from .spec import KernelSpec, Provider, Tunable

# One cuBLAS baseline per precision (gemm_driver/precision.py maps the dtypes), each through
# cublasGemmEx with explicit types, compute type and math mode; min_cc is where the GPU has
# the units the baseline is about (TF32/BF16 tensor cores from sm_80, FP16 from sm_70).
# `cupy` (gemm_driver/cupy_baseline.py) runs where CuPy is installed; elsewhere its cases
# are "skipped" with the reason, and bench records it under settings.absent_baselines.
PROVIDERS = (
    Provider("cublas", "cuBLAS SGEMM, FP32 compute, no TF32 (the baseline)", "library", min_cc=(5, 0)),
    Provider("numpy", "NumPy float32 matmul on the CPU", "cpu"),
    Provider("cublas_tf32", "cuBLAS GemmEx, FP32 in memory, TF32 tensor cores, FP32 accumulate", "library",
             dtype="tf32", min_cc=(8, 0)),
    Provider("cublas_bf16", "cuBLAS GemmEx, BF16 A/B, FP32 accumulate and C", "library",
             dtype="bfloat16", min_cc=(8, 0)),
    Provider("cublas_fp16", "cuBLAS GemmEx, FP16 A/B, FP32 accumulate and C", "library",
             dtype="float16", min_cc=(7, 0)),
    Provider("cublas_batched", "cuBLAS strided-batched GemmEx, FP32, no TF32 (batched shapes)", "library",
             min_cc=(5, 0)),
    Provider("cupy", "CuPy matmul on the same operands and stream, FP32 (TF32 off), when CuPy is installed",
             "library", min_cc=(5, 0)),
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
