"""GemmProblem: the shape and scalars of one C = alpha * A @ B + beta * C.

Pure data with no CUDA import, so the registry, the CLI and the tests can use it on
machines without a GPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Kernels index with 32-bit ints; a matrix this large would overflow them.
MAX_ELEMENTS = 2**31 - 1

_SHAPE = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*$")


@dataclass(frozen=True)
class GemmProblem:
    m: int
    n: int
    k: int
    alpha: float = 1.0
    beta: float = 0.0
    batch: int = 1  # independent GEMMs of this shape (strided-batched); 1 for a plain GEMM

    def __post_init__(self):
        for dim in ("m", "n", "k"):
            value = getattr(self, dim)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{dim.upper()} must be a non-negative integer, got {value!r}")
        if not isinstance(self.batch, int) or isinstance(self.batch, bool) or self.batch < 1:
            raise ValueError(f"batch must be a positive integer, got {self.batch!r}")
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value != value or abs(value) == float("inf"):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        # A batch is stored as one stacked matrix per operand, indexed with 32-bit ints too.
        b = self.batch
        sizes = {"A (M x K)": b * self.m * self.k, "B (K x N)": b * self.k * self.n, "C (M x N)": b * self.m * self.n}
        for label, count in sizes.items():
            if count > MAX_ELEMENTS:
                raise ValueError(f"{label} has {count} elements; at most {MAX_ELEMENTS} (2^31 - 1) are allowed")

    @property
    def flops(self) -> int:
        """Floating-point operations of the product (2 per multiply-add), the usual GEMM count."""
        return 2 * self.m * self.n * self.k * self.batch

    @property
    def label(self) -> str:
        return shape_label(self.m, self.n, self.k, self.batch)

    @property
    def is_empty(self) -> bool:
        """No output (M or N is 0) or no product (K is 0): nothing for a kernel to do."""
        return self.m == 0 or self.n == 0 or self.k == 0


def parse_batched_shape(text: str) -> tuple[int, int, int, int]:
    """'MxNxK' -> (M, N, K, 1); 'BxMxNxK' (B independent GEMMs) -> (M, N, K, B)."""
    parts = text.strip().lower().split("x")
    batch, rest = (parts[0].strip(), "x".join(parts[1:])) if len(parts) == 4 else ("1", text)
    try:
        m, n, k = parse_shape(rest)
    except ValueError as exc:
        if "at least 1" in str(exc):
            raise ValueError(f"shape {text!r}: M, N and K must each be at least 1") from None
        raise ValueError(f"shape {text!r} is not of the form MxNxK or BxMxNxK (e.g. 4093x4091x4099, "
                         "8x512x512x512)") from None
    if not batch.isdigit() or int(batch) < 1:
        raise ValueError(f"shape {text!r}: the batch count B of BxMxNxK must be a positive integer")
    return m, n, k, int(batch)


def shape_label(m: int, n: int, k: int, batch: int = 1) -> str:
    """'MxNxK', or 'BxMxNxK' for a batch: the form --shapes takes, used in tables, JSON and plots."""
    shape = f"{m}x{n}x{k}"
    return shape if batch == 1 else f"{batch}x{shape}"


def parse_shape(text: str) -> tuple[int, int, int]:
    """'4093x4091x4099' -> (4093, 4091, 4099); ValueError naming the expected form."""
    match = _SHAPE.match(text)
    if not match:
        raise ValueError(f"shape {text!r} is not of the form MxNxK (e.g. 4093x4091x4099)")
    m, n, k = (int(g) for g in match.groups())
    if min(m, n, k) < 1:
        raise ValueError(f"shape {text!r}: M, N and K must each be at least 1")
    return m, n, k
