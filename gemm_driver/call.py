"""What a call asks for, read once: its dtype's name, the epilogue its bias and activation name,
the precision check of a named kernel, and the kernel that serves it when none is named.

Shared by plan() and gemm() (api.py), the host path and the torch op; pure (no GPU).
"""

from __future__ import annotations

import numpy as np

from . import arrays, kernels
from . import precision as _precision
from .kernels.target import capability_refusal
from .cuda.errors import UnsupportedProblem
from .problem import GemmProblem

_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16", "float": "float32",
            "fp8": "float8_e4m3fn", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def dtype_name(dtype) -> str:
    """'float32', 'bfloat16', 'float16', 'float8_e4m3fn' or 'float8_e5m2' from a name ('bf16',
    'fp8', 'e5m2'), a NumPy or ml_dtypes dtype, or a torch dtype; ValueError otherwise."""
    if isinstance(dtype, str):
        name = dtype
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = str(dtype)
    name = _ALIASES.get(name.removeprefix("torch."), name.removeprefix("torch."))
    if name not in arrays.ITEMSIZE:
        raise ValueError(f"dtype must be float32, bfloat16, float16, float8_e4m3fn or float8_e5m2 (FP8, device "
                         f"arrays), got {dtype!r}")
    return name


def operand_dtypes(dtype) -> tuple[str, str]:
    """(A's dtype, B's dtype) from one dtype (both) or a pair of FP8 dtypes that may differ
    (``("float8_e5m2", "float8_e4m3fn")``: e5m2 A times e4m3 B); ValueError otherwise."""
    if isinstance(dtype, (tuple, list)):
        if len(dtype) != 2:
            raise ValueError(f"dtype takes one dtype or a pair (A's, B's) of FP8 dtypes, got {dtype!r}")
        a, b = dtype_name(dtype[0]), dtype_name(dtype[1])
        if a != b and not (a in arrays.FP8_FORMATS and b in arrays.FP8_FORMATS):
            raise ValueError(f"A's and B's dtypes may differ only as two FP8 formats (float8_e4m3fn, float8_e5m2), "
                             f"got {a} and {b}")
        return a, b
    name = dtype_name(dtype)
    return name, name


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
    """The dtype's cuBLAS for what it computes; else (an output type, epilogue or FP8 scaling
    it does not take) the first baseline of the dtype's precision that declares the problem's
    layout, output type, epilogue and scaling and runs here (the precision's own baselines,
    cuBLASLt's, first: its epilogues, its FP8 row and block modes)."""
    first, precisions = arrays.DEFAULT_KERNEL[dtype], arrays.PRECISIONS_OF[dtype]
    candidates = [name for precision in precisions for name in _precision.baselines(precision)]
    candidates += ["torch" if precision == "fp32" else f"torch_{precision}" for precision in precisions]
    wanted = (problem.layout, problem.out_dtype, problem.epilogue)

    def declares(target) -> bool:  # the layout, output type, epilogue and FP8 scaling
        return capability_refusal(target, problem) is None

    if declares(kernels.get(first)):
        return first  # what it always was (its own refusal, if the GPU lacks it)
    for name in candidates:
        target = kernels.ALL.get(name)
        if target is None or target.runs_on_host or not declares(target):
            continue
        try:
            target.check_device(tuple(compute_capability))
        except UnsupportedProblem:
            continue
        return name
    scaled = f" and scaling {problem.scaling}" if problem.scaling != "none" else ""
    scaled += f" on FP8 formats {problem.fp8_types}" if problem.fp8_types != "e4m3" else ""
    raise UnsupportedProblem(f"no baseline here computes {dtype} layout {wanted[0]} with output type {wanted[1]} "
                             f"and epilogue {wanted[2]}{scaled}; name a kernel that declares them (`list`)")
