"""GemmProblem: the shape, scalars, layout, output type and epilogue of one GEMM,

    D = epilogue(alpha * op(A) @ op(B) + beta * C)     (M x N, K the inner dimension)

Pure data with no CUDA import, so the registry, the CLI and the tests can use it on
machines without a GPU.

- ``trans_a`` / ``trans_b``: the operand is stored transposed, row-major: A as K x M
  (ld >= M), B as N x K (ld >= K, a torch ``W`` of shape [out, in] for ``x @ W.t()``), and
  op(X) = stored^T. ``layout`` spells the pair: "nn", "nt", "tn", "tt" (A first).
- ``out_dtype``: the storage of D and of C (read when beta != 0): "fp32", "bf16" or "fp16".
  Accumulation and alpha/beta stay FP32; D is rounded once (nearest even) when stored.
- ``epilogue``: what is applied to v = alpha*acc + beta*C before the store: "none",
  "bias" (v += bias[col], a vector of N in out_dtype), "bias_relu" (then max(v, 0)),
  "bias_gelu" (then GELU in its tanh form, 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))),
  the form cuBLASLt's GELU epilogue computes).
- ``scaling``: "none" for every precision but FP8; an FP8 problem names how its e4m3 A and
  B are scaled: "tensor", "row" or "block" (fp8.py: the scale shapes each implies). FP8 on
  Hopper reads K-major A and B only (wgmma and cuBLASLt alike): the "nt" layout, A stored
  M x K and B stored N x K (``fp8_rule``).
- ``fp8_types``: an FP8 problem's element formats of A and B: "e4m3" (both, the default),
  "e5m2" (both), or A's and B's joined by "_" ("e5m2_e4m3": e5m2 A, as a gradient is stored
  in FP8 training, times e4m3 B). Every other precision leaves it "e4m3", unread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Kernels index with 32-bit ints; a matrix this large would overflow them.
MAX_ELEMENTS = 2**31 - 1

LAYOUTS = ("nn", "nt", "tn", "tt")  # op(A), op(B): n = as stored (row-major), t = stored transposed
OUT_DTYPES = ("fp32", "bf16", "fp16")
EPILOGUES = ("none", "bias", "bias_relu", "bias_gelu")
SCALINGS = ("none", "tensor", "row", "block")  # "none": not FP8; the others: fp8.SCALINGS
# FP8 A and B formats; the index is the kernels' code: bit 0 set where A is e5m2, bit 1 where B is
FP8_TYPES = ("e4m3", "e5m2_e4m3", "e4m3_e5m2", "e5m2")
DEFAULT_LAYOUT, DEFAULT_OUT_DTYPE, DEFAULT_EPILOGUE = "nn", "fp32", "none"

_SHAPE = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*$")


@dataclass(frozen=True)
class GemmProblem:
    m: int
    n: int
    k: int
    alpha: float = 1.0
    beta: float = 0.0
    batch: int = 1  # independent GEMMs of this shape (strided-batched); 1 for a plain GEMM
    trans_a: bool = False  # A stored transposed: K x M row-major, op(A) = stored^T
    trans_b: bool = False  # B stored transposed: N x K row-major, op(B) = stored^T
    out_dtype: str = DEFAULT_OUT_DTYPE  # storage of D and C: fp32, bf16, fp16
    epilogue: str = DEFAULT_EPILOGUE  # none, bias, bias_relu, bias_gelu
    scaling: str = "none"  # FP8 only: tensor, row, block (fp8.py)
    fp8_types: str = "e4m3"  # FP8 only: A's and B's formats (FP8_TYPES)

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
        for name in ("trans_a", "trans_b"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.out_dtype not in OUT_DTYPES:
            raise ValueError(f"out_dtype {self.out_dtype!r} is not one of {', '.join(OUT_DTYPES)}")
        if self.epilogue not in EPILOGUES:
            raise ValueError(f"epilogue {self.epilogue!r} is not one of {', '.join(EPILOGUES)}")
        if self.scaling not in SCALINGS:
            raise ValueError(f"scaling {self.scaling!r} is not one of {', '.join(SCALINGS)}")
        if self.fp8_types not in FP8_TYPES:
            raise ValueError(f"fp8_types {self.fp8_types!r} is not one of {', '.join(FP8_TYPES)}")
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
    def layout(self) -> str:
        """'nn', 'nt', 'tn' or 'tt': how op(A) and op(B) are stored (t: transposed)."""
        return "nt"[self.trans_a] + "nt"[self.trans_b]

    @property
    def has_bias(self) -> bool:
        return self.epilogue != "none"

    @property
    def variant(self) -> tuple[str, str, str]:
        """(layout, out_dtype, epilogue): what a case computes beyond its shape and scalars."""
        return self.layout, self.out_dtype, self.epilogue

    @property
    def is_default_variant(self) -> bool:
        """Row-major operands, FP32 out, no epilogue: the GEMM every kernel computes."""
        return (self.layout, self.out_dtype, self.epilogue) == (DEFAULT_LAYOUT, DEFAULT_OUT_DTYPE, DEFAULT_EPILOGUE)

    @property
    def operand_formats(self) -> tuple[str, str]:
        """FP8: ('e4m3' or 'e5m2' of A, the same of B), from ``fp8_types``."""
        return fp8_formats(self.fp8_types)

    @property
    def label(self) -> str:
        return shape_label(self.m, self.n, self.k, self.batch)

    @property
    def is_empty(self) -> bool:
        """No output (M or N is 0) or no product (K is 0): nothing for a kernel to do."""
        return self.m == 0 or self.n == 0 or self.k == 0


def fp8_rule(problem: GemmProblem, precision: str) -> str | None:
    """The rule an FP8 problem breaks (or a scaled problem of another precision), else None:
    a scaling mode, the K-major "nt" layout, an FP32 or BF16 output, no batch."""
    if precision != "fp8":
        if problem.fp8_types != "e4m3":
            return f"fp8_types {problem.fp8_types!r} needs fp8 operands, not {precision}"
        return None if problem.scaling == "none" else f"scaling {problem.scaling!r} needs fp8 operands, not {precision}"
    rules = (
        (problem.scaling != "none", "fp8 needs a scaling of tensor, row or block"),
        (problem.layout == "nt", f"fp8 reads K-major A and B only: layout nt (A stored M x K, B stored N x K), "
                                 f"not {problem.layout}"),
        (problem.out_dtype in ("fp32", "bf16"), f"fp8 writes D in fp32 or bf16, not {problem.out_dtype}"),
        (problem.batch == 1, "fp8 takes one GEMM per call (batch 1)"),
    )
    return next((why for ok, why in rules if not ok), None)


def fp8_formats(fp8_types: str) -> tuple[str, str]:
    """'e5m2_e4m3' -> ('e5m2', 'e4m3'); 'e4m3' -> ('e4m3', 'e4m3')."""
    if fp8_types not in FP8_TYPES:
        raise ValueError(f"fp8_types {fp8_types!r} is not one of {', '.join(FP8_TYPES)}")
    a, _, b = fp8_types.partition("_")
    return a, b or a


def fp8_types_of(format_a: str, format_b: str) -> str:
    """('e5m2', 'e4m3') -> 'e5m2_e4m3'; a pair of one format -> its name."""
    name = format_a if format_a == format_b else f"{format_a}_{format_b}"
    if name not in FP8_TYPES:
        raise ValueError(f"FP8 formats are e4m3 and e5m2, got A {format_a!r} and B {format_b!r}")
    return name


def parse_choices(flag: str, text: str | None, allowed, default: str, note: str = "give a comma list") -> list[str]:
    """A comma list of ``allowed`` values, in the order given, each once (None: ``default``);
    ValueError naming ``flag``, the bad value and what is allowed."""
    items = [item.strip().lower() for item in (text or default).split(",") if item.strip()]
    bad = [item for item in items if item not in allowed]
    if bad or not items:
        raise ValueError(f"{flag} {bad[0] if bad else text!r} is not one of {', '.join(allowed)} ({note})")
    return list(dict.fromkeys(items))


def parse_fp8_types(text: str | None) -> list[str]:
    """'e4m3,e5m2_e4m3' -> ['e4m3', 'e5m2_e4m3'] (None: ['e4m3']); ValueError naming the bad value."""
    return parse_choices("--fp8-types", text, FP8_TYPES, "e4m3",
                         "A's and B's formats, joined by _ where they differ; give a comma list")


def layout_flags(layout: str) -> tuple[bool, bool]:
    """'nt' -> (False, True): (trans_a, trans_b); ValueError naming the layouts there are."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r} is not one of {', '.join(LAYOUTS)} (first letter A, second B; "
                         "t = stored transposed)")
    return layout[0] == "t", layout[1] == "t"


DEFAULT_VARIANT = (DEFAULT_LAYOUT, DEFAULT_OUT_DTYPE, DEFAULT_EPILOGUE)


def variant_label(layout: str, out_dtype: str, epilogue: str) -> str:
    """'nt bf16 bias_gelu' (tables, plots, compare); '' for the default nn fp32 none."""
    variant = (layout, out_dtype, epilogue)
    return "" if variant == DEFAULT_VARIANT else " ".join(variant)


def parse_variants(layouts: str | None = None, out_dtypes: str | None = None, epilogues: str | None = None
                   ) -> list[tuple[str, str, str]]:
    """The cross product of comma lists of layouts, output types and epilogues (None: the
    default of each), in the order given; ValueError naming the value and what is allowed."""
    chosen = [parse_choices(flag, text, allowed, default)
              for flag, text, allowed, default in (("--layout", layouts, LAYOUTS, DEFAULT_LAYOUT),
                                                   ("--out-dtype", out_dtypes, OUT_DTYPES, DEFAULT_OUT_DTYPE),
                                                   ("--epilogue", epilogues, EPILOGUES, DEFAULT_EPILOGUE))]
    return [(lay, out, epi) for lay in chosen[0] for out in chosen[1] for epi in chosen[2]]


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
