"""What a call asks for, read once: its dtype's name, the epilogue its bias and activation name,
the precision check of a named kernel, and the kernel that serves it when none is named.

Shared by plan() and gemm() (api.py), the host path and the torch op; pure (no GPU).
"""

from __future__ import annotations

import numpy as np

from . import arrays, kernels
from .cuda.errors import UnsupportedProblem
from .problem import GemmProblem

_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16", "float": "float32"}

def dtype_name(dtype) -> str:
    """'float32', 'bfloat16' or 'float16' from a name ('bf16', 'float16'), a NumPy or ml_dtypes
    dtype, or a torch dtype; ValueError otherwise."""
    if isinstance(dtype, str):
        name = dtype
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = str(dtype)
    name = _ALIASES.get(name.removeprefix("torch."), name.removeprefix("torch."))
    if name not in arrays.ITEMSIZE:
        raise ValueError(f"dtype must be float32, bfloat16 or float16, got {dtype!r}")
    return name


def check_precision(kernel: str, target, dtype: str) -> None:
    """UnsupportedProblem when ``kernel`` computes in a precision other than the inputs' dtype."""
    if target.precision not in arrays.PRECISIONS_OF[dtype]:
        wanted = next(d for d, precisions in arrays.PRECISIONS_OF.items() if target.precision in precisions)
        raise UnsupportedProblem(f"kernel {kernel!r} computes in {target.precision} but A and B are {dtype}: choose a "
                         f"{'/'.join(arrays.PRECISIONS_OF[dtype])} kernel (e.g. {arrays.DEFAULT_KERNEL[dtype]}), "
                         f"or pass {wanted} A and B to {kernel}")


ACTIVATIONS = (None, "relu", "gelu")
OUT_CODES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}  # dtype name -> problem.out_dtype


def epilogue_of(has_bias: bool, activation) -> str:
    """problem.epilogue for a bias (or none) and an activation: "none", "bias", "bias_relu",
    "bias_gelu"; an activation without a bias runs as its bias epilogue on a zero vector."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be None, 'relu' or 'gelu' (the tanh form), got {activation!r}")
    if not has_bias and activation is None:
        return "none"
    return "bias" if activation is None else f"bias_{activation}"


def default_kernel(dtype: str, problem: GemmProblem, compute_capability) -> str:
    """The dtype's cuBLAS for what it computes; else (an output type or epilogue it does
    not take) the first baseline of the dtype's precision that declares the problem's
    layout, output type and epilogue and runs here (cuBLASLt with its epilogue first)."""
    first = arrays.DEFAULT_KERNEL[dtype]
    candidates = [first] + [f"{family}_{precision}" for precision in arrays.PRECISIONS_OF[dtype]
                            for family in ("cublaslt", "cublas", "torch")]
    candidates += ["torch"] if dtype == "float32" else []
    wanted = (problem.layout, problem.out_dtype, problem.epilogue)

    def declares(target) -> bool:
        return wanted[0] in target.layouts and wanted[1] in target.out_dtypes and wanted[2] in target.epilogues

    if declares(kernels.get(first)):
        return first  # what it always was (its own refusal, if the GPU lacks it)
    for name in dict.fromkeys(candidates[1:]):
        target = kernels.ALL.get(name)
        if target is None or target.runs_on_host or not declares(target):
            continue
        try:
            target.check_device(tuple(compute_capability))
        except UnsupportedProblem:
            continue
        return name
    raise UnsupportedProblem(f"no baseline here computes {dtype} layout {wanted[0]} with output type {wanted[1]} "
                             f"and epilogue {wanted[2]}; name a kernel that declares them (`list`)")
