"""A cuBLASLt problem, validated, and its descriptors: host objects, no GPU needed.

Precisions (``LT_PRECISIONS``), all with FP32 compute and FP32 alpha/beta: fp32 (no TF32),
tf32 (``CUBLAS_COMPUTE_32F_FAST_TF32``), bf16, fp16 and fp8 (A and B each e4m3 or e5m2,
``formats`` below). C and D are FP32, or for bf16/fp16 inputs their own type (``out_dtype``);
an ``epilogue`` adds a bias vector of N elements in D's type (CUBLASLT_MATMUL_DESC_BIAS_POINTER,
BIAS_DATA_TYPE = the D type), then ReLU or GELU (CUBLASLT_EPILOGUE_BIAS, RELU_BIAS, GELU_BIAS).
A and B may each be stored transposed (``trans_a``: A is K x M row-major; ``b_k_major``: B is N x K).
cuBLASLt's FP8 kernels want the "TN" layout: both operands K-contiguous. In row-major
terms A is stored as usual (M x K) but B must be stored transposed, N x K row-major
(``b_k_major=True``); and k, lda, ldb must be multiples of 16 elements with 16-byte
aligned A and B. :func:`validate` refuses anything else with the rule it breaks. The
row-major swap is :func:`.cublas.column_major_call`, written once there.

FP8 takes a D in FP32 or BF16 and a ``scaling`` (problem.py's: "none" for no scale
pointers, i.e. scales of 1; "tensor", "row", "block"). The scale modes are set on the
descriptor (CUBLASLT_MATMUL_DESC_A/B_SCALE_MODE) and the FP32 scale pointers per run
(A/B_SCALE_POINTER). The swap makes cuBLASLt's A our B and its B our A, so our B's scales
go to its A: tensor SCALAR_32F for both; row OUTER_VEC_32F for both (a vector of N for its
A, of M for its B); block BLK128x128_32F for its A (our B, 128 x 128) and VEC128_32F for
its B (our A, 1 x 128): DeepSeek-V3's recipe, offered on sm_90 from cuBLAS 12.9. FAST_ACCUM
is set to 0: partial sums are promoted to FP32 (cublasLt.h), the accuracy the bound assumes.
No D scale: D is FP32 or BF16, and CUBLASLT_MATMUL_DESC_D_SCALE_POINTER scales FP8 outputs.

FP8 ``formats``: A's and B's element formats, each "e4m3" (CUDA_R_8F_E4M3) or "e5m2"
(CUDA_R_8F_E5M2), problem.py's ``operand_formats``. Each layout takes the type of the buffer it
describes (``LtOperand.source``), so the swap that makes cuBLASLt's A our B also gives it B's
format. cuBLASLt's FP8 kernels take e4m3 x e4m3, e4m3 x e5m2 and e5m2 x e4m3, never e5m2 x e5m2
(the FP8 type table of cublasLtMatmul in the cuBLAS documentation, which PyTorch's _scaled_mm
enforces as "type restrictions imposed by CuBLASLt" and its tests cite): :func:`validate`
refuses two e5m2 operands by name. Which pairs the row and block scale modes take the
documentation does not say; measured with cuBLASLt 13.1 on an H200, both took both mixed pairs
(tests/test_cublaslt.py). A pair a library lacks is refused by the heuristic (no algorithm),
which callers treat as any other refusal.

The heuristic refuses a scale mode other than SCALAR_32F whose scale pointer is still NULL
(CUBLAS_STATUS_INVALID_VALUE; cuBLASLt's log says the mode "requires a custom pointer"), so
the descriptors carry a stand-in address (``SCALE_POINTER_STAND_IN``) until the real scales
are set per run; the heuristic never reads them. The layouts the modes read (the cuBLASLt
samples' scale sizes, and the strides PyTorch's blockwise _scaled_mm checks): OUTER_VEC_32F a
vector of the outer dimension; VEC128_32F ceil(K/128) rows of the outer dimension, outer index
fastest, unpadded (our A's layout); BLK128x128_32F ceil(outer/128) rows of ceil(K/128), K
index fastest, each row padded to a multiple of 4 scales (``block_scale_ld``): our B's rows
are unpadded, so a provider hands cuBLASLt a padded copy (cublaslt.padded_block_scales).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from . import cublas
from .cublas import ComputeType, DataType, Operation
from .cublaslt_binding import (_DESC_A_SCALE_MODE, _DESC_A_SCALE_POINTER, _DESC_B_SCALE_MODE, _DESC_B_SCALE_POINTER,
                               _DESC_BIAS_DATA_TYPE, _DESC_EPILOGUE, _DESC_FAST_ACCUM, _DESC_TRANSA, _DESC_TRANSB,
                               _LAYOUT_ATTRIBUTES, EPILOGUES, MATRIX_SCALE, _create, _get_int, _library, _Owned)
from .errors import UnsupportedProblem

# cudaDataType_t (library_types.h); not in cublas.DataType, which has no FP8
CUDA_R_8F_E4M3, CUDA_R_8F_E5M2 = 28, 29
FP8_DATA_TYPES = {"e4m3": CUDA_R_8F_E4M3, "e5m2": CUDA_R_8F_E5M2}  # per FP8 format (problem.py's names)
# D's (and C's and the bias's) cudaDataType_t per out_dtype.
OUT_TYPES = {"fp32": DataType.CUDA_R_32F, "bf16": DataType.CUDA_R_16BF, "fp16": DataType.CUDA_R_16F}
# (cuBLASLt's A = our B, cuBLASLt's B = our A) scale modes per scaling; see the docstring.
SCALE_MODES = {"tensor": ("SCALAR_32F", "SCALAR_32F"), "row": ("OUTER_VEC_32F", "OUTER_VEC_32F"),
               "block": ("BLK128x128_32F", "VEC128_32F")}
FP8_OUT_DTYPES = ("fp32", "bf16")
# The scale modes other than SCALAR_32F came with cuBLAS 12.9 (cublasLt.h; CUDALibrarySamples'
# answer on them: sm_90 only); an older library has no enum value for them.
SCALE_MODES_SINCE = (12, 9)
SCALE_POINTER_STAND_IN = 256  # a non-NULL, 256-byte aligned address the heuristic never reads
BLOCK_SCALE_ROW_MULTIPLE = 4  # BLK128x128_32F rows of K-block scales are padded to 4 (16 bytes)
MAX_ALIGNMENT = 256  # cuBLASLt's default assumption for every pointer (MIN_ALIGNMENT_*_BYTES)
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class LtPrecision:
    """Storage and compute types of one precision; every one computes and scales in FP32."""

    name: str
    ab_type: int  # cudaDataType_t of A and B (fp8: of e4m3 ones; LtProblem.formats picks each's)
    compute: int  # cublasComputeType_t
    ab_bytes: int
    needs_k_major_b: bool = False  # FP8: cuBLASLt runs only the "TN" layout
    k_multiple: int = 1  # k, lda and ldb must be multiples of this (elements)


LT_PRECISIONS: dict[str, LtPrecision] = {p.name: p for p in (
    LtPrecision("fp32", DataType.CUDA_R_32F, ComputeType.CUBLAS_COMPUTE_32F, 4),
    LtPrecision("tf32", DataType.CUDA_R_32F, ComputeType.CUBLAS_COMPUTE_32F_FAST_TF32, 4),
    LtPrecision("bf16", DataType.CUDA_R_16BF, ComputeType.CUBLAS_COMPUTE_32F, 2),
    LtPrecision("fp16", DataType.CUDA_R_16F, ComputeType.CUBLAS_COMPUTE_32F, 2),
    LtPrecision("fp8", CUDA_R_8F_E4M3, ComputeType.CUBLAS_COMPUTE_32F, 1, needs_k_major_b=True, k_multiple=16),
)}

# --- the problem, validated, and its descriptors (host only) ---------------------------
@dataclass(frozen=True)
class LtProblem:
    """Row-major D (m x n, ldc) = epilogue(alpha * op(A) @ op(B) + beta * C) in ``precision``.

    A is m x k row-major (lda >= k), or with ``trans_a`` stored transposed: k x m (lda >= m).
    B is k x n row-major (ldb >= n), or with ``b_k_major`` stored transposed: n x k
    row-major (ldb >= k), i.e. column-major B, the only layout cuBLASLt's FP8 takes.
    C and D are stored in ``out_dtype``; ``epilogue`` is problem.py's spelling. ``formats``:
    FP8 only, A's and B's element formats ("e4m3" or "e5m2"; the other precisions keep the
    default, unread).
    """

    m: int
    n: int
    k: int
    precision: str
    lda: int
    ldb: int
    ldc: int
    b_k_major: bool = False
    trans_a: bool = False
    out_dtype: str = "fp32"
    epilogue: str = "none"
    scaling: str = "none"  # FP8 only: tensor, row, block (scale pointers passed per run)
    formats: tuple[str, str] = ("e4m3", "e4m3")  # FP8 only: A's and B's formats (FP8_DATA_TYPES)

    @classmethod
    def packed(cls, m: int, n: int, k: int, precision: str, b_k_major: bool = False) -> "LtProblem":
        """The problem with the tightest leading dimensions."""
        return cls(m, n, k, precision, k, k if b_k_major else n, n, b_k_major)


def validate(problem: LtProblem) -> LtPrecision:
    """The problem's precision; UnsupportedProblem naming the first rule the problem breaks."""
    if problem.precision not in LT_PRECISIONS:
        raise ValueError(f"unknown precision {problem.precision!r}; choose from {', '.join(LT_PRECISIONS)}")
    p, q = LT_PRECISIONS[problem.precision], problem
    mult = p.k_multiple
    rules = (
        ("m, n, k >= 1 (callers short-cut empty problems before cuBLASLt)", min(q.m, q.n, q.k) >= 1),
        ("sizes < 2**31", max(q.m, q.n, q.k, q.lda, q.ldb, q.ldc) <= _INT32_MAX),
        (f"{p.name} B stored K-major (b_k_major=True: n x k row-major, cuBLASLt's FP8 'TN' layout)",
         q.b_k_major or not p.needs_k_major_b),
        (f"{p.name} k, lda and ldb multiples of {mult} elements (16 bytes)",
         q.k % mult == 0 and q.lda % mult == 0 and q.ldb % mult == 0),
        ("ldb >= k for a K-major B", not q.b_k_major or q.ldb >= q.k),
        (f"{p.name} A not transposed (cuBLASLt's FP8 'TN' layout: A stored M x K)",
         not (q.trans_a and p.needs_k_major_b)),
        (f"an FP32 D, for bf16/fp16 inputs one of their own type, for fp8 FP32 or BF16 (out_dtype {q.out_dtype!r})",
         q.out_dtype == "fp32" or (q.out_dtype == p.name and q.out_dtype in OUT_TYPES)
         or (p.name == "fp8" and q.out_dtype in FP8_OUT_DTYPES)),
        (f"a scaling of none, {', '.join(SCALE_MODES)} (FP8 only; scaling {q.scaling!r})",
         q.scaling == "none" or (q.scaling in SCALE_MODES and p.name == "fp8")),
        (f"an epilogue of {', '.join(EPILOGUES)} without FP8 (epilogue {q.epilogue!r})",
         q.epilogue == "none" or (q.epilogue in EPILOGUES and p.name != "fp8")),
        (f"A and B formats of {' or '.join(FP8_DATA_TYPES)} (FP8 only; formats {q.formats!r})",
         tuple(q.formats) == ("e4m3", "e4m3")
         or (p.name == "fp8" and len(q.formats) == 2 and all(f in FP8_DATA_TYPES for f in q.formats))),
        ("at most one e5m2 operand (no e5m2 x e5m2 FP8 kernel: e4m3 x e4m3, e4m3 x e5m2 or e5m2 x e4m3)",
         tuple(q.formats) != ("e5m2", "e5m2")),
    )
    for rule, ok in rules:
        if not ok:
            raise UnsupportedProblem(f"cuBLASLt GEMM needs {rule}; got {_describe_problem(q)}")
    _swap(q)  # the row-major rules lda >= k, ldb >= n, ldc >= n
    return p


def block_scale_ld(k: int) -> int:
    """The row pitch, in scales, of BLK128x128_32F block scales for a K of ``k``: ceil(k/128)
    rounded up to a multiple of 4."""
    m = BLOCK_SCALE_ROW_MULTIPLE
    return -(-(-(-k // 128)) // m) * m


def scale_mode_refusal(scaling: str, version: tuple[int, int, int]) -> str | None:
    """Why cuBLASLt ``version`` cannot take ``scaling`` (one line naming the mode), or None."""
    if scaling in ("none", "tensor") or tuple(version[:2]) >= SCALE_MODES_SINCE:
        return None
    modes = "/".join(dict.fromkeys(SCALE_MODES[scaling]))
    since = ".".join(map(str, SCALE_MODES_SINCE))
    noun = "modes" if "/" in modes else "mode"
    return f"cuBLASLt {'.'.join(map(str, version))} has no {modes} scale {noun} (they came with cuBLAS {since})"


def _describe_problem(q: LtProblem) -> str:
    return (f"{q.precision} m={q.m}, n={q.n}, k={q.k}, lda={q.lda}, ldb={q.ldb}, ldc={q.ldc}, "
            f"b_k_major={q.b_k_major}, trans_a={q.trans_a}, out_dtype={q.out_dtype}, epilogue={q.epilogue}"
            + (f", scaling={q.scaling}" if q.scaling != "none" else "")
            + (f", formats={'/'.join(q.formats)}" if tuple(q.formats) != ("e4m3", "e4m3") else ""))


def layout_type(p: LtPrecision, q: LtProblem, source: str) -> int:
    """cudaDataType_t of the layout over buffer ``source`` ("a" or "b"): the precision's type,
    for FP8 the format of that operand (A's or B's, whichever side of the swap it lands on)."""
    return FP8_DATA_TYPES[q.formats["ab".index(source)]] if p.name == "fp8" else p.ab_type


@dataclass(frozen=True)
class LtOperand:
    """One column-major layout cuBLASLt sees, and which row-major buffer it is."""

    source: str  # "a", "b" or "c"
    rows: int
    cols: int
    ld: int
    op: int  # cublasOperation_t applied to it


def _swap(q: LtProblem) -> tuple[LtOperand, LtOperand, LtOperand]:
    """cuBLASLt's (A, B, C) for the row-major problem: C^T = B^T A^T, column-major.

    cublas.column_major_call gives the (n, m, k) call with B first. A row-major K x N B
    read column-major is N x K (op N); a K-major B (n x k row-major) read column-major is
    K x N, so cuBLASLt transposes it (op T): that is the "TN" of FP8. Likewise A: M x K
    row-major reads as K x M (op N), a transposed A (k x m row-major) as M x K (op T).
    """
    cm = cublas.column_major_call(q.m, q.n, q.k, q.lda, q.ldb, q.ldc, trans_a=q.trans_a, trans_b=q.b_k_major)
    assert cm.first == "b" and cm.second == "a"
    first_shape = (cm.k, cm.m) if q.b_k_major else (cm.m, cm.k)  # B as stored, read column-major
    second_shape = (cm.n, cm.k) if q.trans_a else (cm.k, cm.n)  # A likewise
    first = LtOperand("b", *first_shape, cm.ld_first, cm.op_first)
    second = LtOperand("a", *second_shape, cm.ld_second, cm.op_second)
    return first, second, LtOperand("c", cm.m, cm.n, cm.ldc, Operation.N)


class _Layout(_Owned):
    def __init__(self, data_type: int, operand: LtOperand):
        lib = _library()
        raw = _create(lib.cublasLtMatrixLayoutCreate, data_type, operand.rows, operand.cols, operand.ld)
        self._own(raw, lib.cublasLtMatrixLayoutDestroy)
        self.operand = operand

    def attribute(self, name: str) -> int:
        """A layout attribute read back from cuBLASLt (type, order, rows, cols, ld)."""
        return _get_int(_library().cublasLtMatrixLayoutGetAttribute, self.ptr, _LAYOUT_ATTRIBUTES[name])


class _Desc(_Owned):
    def __init__(self, compute: int):
        lib = _library()
        self._own(_create(lib.cublasLtMatmulDescCreate, compute, DataType.CUDA_R_32F), lib.cublasLtMatmulDescDestroy)

    def set(self, attribute: int, value: ctypes._SimpleCData) -> None:
        _library().cublasLtMatmulDescSetAttribute(self.ptr, attribute, ctypes.byref(value), ctypes.sizeof(value))

    def get(self, attribute: int) -> int:
        """An integer attribute read back (the tests check what was set)."""
        return _get_int(_library().cublasLtMatmulDescGetAttribute, self.ptr, attribute)


class _Preference(_Owned):
    def __init__(self):
        lib = _library()
        self._own(_create(lib.cublasLtMatmulPreferenceCreate), lib.cublasLtMatmulPreferenceDestroy)

    def set(self, attribute: int, value: ctypes._SimpleCData) -> None:
        _library().cublasLtMatmulPreferenceSetAttribute(self.ptr, attribute, ctypes.byref(value),
                                                         ctypes.sizeof(value))


class MatmulDescriptors:
    """The matmul descriptor and the three layouts of one problem (C's serves D too), with
    the epilogue and its bias type set; the bias pointer is set per run (``set_bias``).

    Host objects only: they can be built and read back without a GPU."""

    def __init__(self, problem: LtProblem):
        self.problem, self.precision = problem, validate(problem)
        first, second, c = _swap(problem)
        p = self.precision
        self._parts: list[_Owned] = []
        try:
            self.desc = self._keep(_Desc(p.compute))
            self.desc.set(_DESC_TRANSA, ctypes.c_int32(first.op))
            self.desc.set(_DESC_TRANSB, ctypes.c_int32(second.op))
            self.first = self._keep(_Layout(layout_type(p, problem, first.source), first))  # our B
            self.second = self._keep(_Layout(layout_type(p, problem, second.source), second))  # our A
            self.c = self._keep(_Layout(OUT_TYPES[problem.out_dtype], c))
            self.desc.set(_DESC_EPILOGUE, ctypes.c_int32(EPILOGUES[problem.epilogue]))
            if problem.epilogue != "none":
                self.desc.set(_DESC_BIAS_DATA_TYPE, ctypes.c_int32(OUT_TYPES[problem.out_dtype]))
            if p.name == "fp8":
                self.desc.set(_DESC_FAST_ACCUM, ctypes.c_int8(0))  # promote partial sums to FP32
            if problem.scaling != "none":
                first_mode, second_mode = SCALE_MODES[problem.scaling]
                self.desc.set(_DESC_A_SCALE_MODE, ctypes.c_int32(MATRIX_SCALE[first_mode]))
                self.desc.set(_DESC_B_SCALE_MODE, ctypes.c_int32(MATRIX_SCALE[second_mode]))
                for pointer in (_DESC_A_SCALE_POINTER, _DESC_B_SCALE_POINTER):  # replaced per run
                    self.desc.set(pointer, ctypes.c_void_p(SCALE_POINTER_STAND_IN))
        except BaseException:
            self.close()
            raise

    def _keep(self, part):
        self._parts.append(part)
        return part

    def close(self) -> None:
        for part in reversed(self._parts):
            part.close()

    def __enter__(self) -> "MatmulDescriptors":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def pointer_alignment(ptr: int) -> int:
    """The largest power of two (up to 256 bytes) dividing a device address."""
    ptr = int(ptr)
    return MAX_ALIGNMENT if ptr % MAX_ALIGNMENT == 0 else ptr & -ptr
