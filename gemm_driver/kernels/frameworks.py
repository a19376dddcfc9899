"""Array libraries as baselines: the PyTorch one, and what it shares with CuPy's.

The torch baselines (``torch``, ``torch_bf16``, ``torch_fp16``, registered in providers.py)
view our device matrices in place, through the CUDA array interface, and queue their work
on the launch's stream, so what is verified and timed is exactly what cuBLAS gets:

- FP32: ``C.addmm_(A, B, beta=beta, alpha=alpha)``, one cuBLAS call, with TF32 switched
  off for the call and the caller's setting restored after (``torch.backends.cuda.matmul``:
  ``fp32_precision = "ieee"`` where torch has it, from 2.9; ``allow_tf32 = False`` before).
- BF16 / FP16 with an FP32 D: ``torch.mm(A, B, out_dtype=torch.float32)``: 2-byte inputs,
  FP32 accumulation and an FP32 C, as cublasGemmEx runs here; alpha and beta applied as
  CuPy's baseline does.
- BF16 / FP16 with a D of their own type: ``C.addmm_(A, B, beta=, alpha=)`` (one rounding),
  and with a bias ``torch.addmm(bias, A, B, alpha=, out=C)`` (what ``F.linear`` runs).
- Epilogues as a user writes them with torch's own ops: the bias added by addmm, then
  ``relu_`` or ``gelu(approximate="tanh")`` on D in its own type (for GELU, D was rounded
  once before it: the bound allows that, verify.py). With beta != 0 and a bias on a 16-bit
  D, the sum is formed in FP32 and rounded once (two roundings would break the bound).

torch is imported only when a torch baseline is asked about (``torch_unavailable``) or
run: the CLI, ``list`` and the registry never pay for it.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

from ..cuda.driver import ExternalStream
from ..cuda.errors import GemmDriverError, UnsupportedProblem
from ..fp8 import FORMATS
from ..problem import GemmProblem


class StreamCache:
    """A library's stream object for the raw handle that ``stream.handle`` holds when called
    (a Plan's stream changes between launches), made once per handle."""

    def __init__(self, stream, make: Callable[[int], Any]):
        self._stream, self._make, self._made = stream, make, {}

    def __call__(self):
        raw = int(self._stream.handle)
        found = self._made.get(raw)
        if found is None:
            found = self._made[raw] = self._make(raw)
        return found


def cupy_stream(raw: int):
    """CuPy's stream object for a raw CUstream this process does not own. Newer CuPy deprecates
    cupy.cuda.ExternalStream for Stream.from_external, which takes the CUDA stream protocol."""
    import cupy

    from_external = getattr(cupy.cuda.Stream, "from_external", None)
    return cupy.cuda.ExternalStream(raw) if from_external is None else from_external(ExternalStream(raw))


def first_line(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def torch_unavailable() -> str | None:
    """None when torch imports and sees a CUDA GPU, else why it cannot serve as a baseline."""
    try:
        import torch

        if not torch.cuda.is_available():
            return "PyTorch sees no CUDA GPU here (torch.cuda.is_available() is False)"
    except Exception as exc:  # ImportError, or a broken install
        return f"PyTorch is not usable here ({first_line(exc)})"
    return None


class CudaArrayView:
    """The CUDA array interface over one of our rows x cols matrices (row-major, or stored
    transposed when ``trans``: cols x rows row-major, ``ld`` its row stride), for
    torch.as_tensor: no copy."""

    def __init__(self, matrix, rows: int, cols: int, typestr: str, itemsize: int, trans: bool = False):
        ld = matrix.ld * itemsize
        strides = (itemsize, ld) if trans else (ld, itemsize)
        self.matrix = matrix  # the device matrix lives as long as the tensor
        self.__cuda_array_interface__ = {"shape": (rows, cols), "typestr": typestr, "data": (int(matrix.ptr), False),
                                         "strides": strides, "version": 2}


# precision -> (array-interface type string, bytes per element); BF16 goes through int16 and
# FP8 through uint8, which the interface has type strings for, and are viewed as theirs after.
_TYPESTR = {"fp32": ("<f4", 4), "tf32": ("<f4", 4), "fp16": ("<f2", 2), "bf16": ("<i2", 2), "fp8": ("|u1", 1)}
# FP8 format (problem.py's operand_formats) -> torch's dtype name, ml_dtypes' (fp8.FORMATS): e4m3 is
# torch's "fn" variant (finite, NaN at 0x7F/0xFF, as fp8.py stores it), e5m2 the IEEE-like one
# with infinities.
TORCH_FP8_DTYPES = {fmt: dtype for fmt, (dtype, _largest) in FORMATS.items()}


def torch_view(torch, matrix, rows: int, cols: int, precision: str, device: int, trans: bool = False,
               fp8: str = "e4m3"):
    """A torch tensor over our rows x cols matrix stored in ``precision``'s format
    (transposed when ``trans``); an "fp8" matrix holds codes of FP8 format ``fp8``."""
    typestr, itemsize = _TYPESTR[precision]
    tensor = torch.as_tensor(CudaArrayView(matrix, rows, cols, typestr, itemsize, trans), device=f"cuda:{device}")
    if precision == "fp8":
        return tensor.view(getattr(torch, TORCH_FP8_DTYPES[fp8]))
    return tensor.view(torch.bfloat16) if precision == "bf16" else tensor


_OUT_DTYPE: dict[int, bool] = {}


def mm_takes_out_dtype(torch, device: int) -> bool:
    """Whether this torch has mm(..., out_dtype=float32) for BF16 inputs (asked once, on a
    1 x 1 product)."""
    if device not in _OUT_DTYPE:
        one = torch.ones(1, 1, dtype=torch.bfloat16, device=f"cuda:{device}")
        try:
            _OUT_DTYPE[device] = torch.mm(one, one, out_dtype=torch.float32).dtype == torch.float32
        except (TypeError, RuntimeError):
            _OUT_DTYPE[device] = False
    return _OUT_DTYPE[device]


@contextlib.contextmanager
def torch_without_tf32(torch):
    """FP32 matmuls in IEEE FP32 inside, the caller's setting restored after."""
    matmul = torch.backends.cuda.matmul
    name, value = ("fp32_precision", "ieee") if hasattr(matmul, "fp32_precision") else ("allow_tf32", False)
    saved = getattr(matmul, name)
    setattr(matmul, name, value)
    try:
        yield
    finally:
        setattr(matmul, name, saved)


class _Vector:
    """The bias vector (a device pointer) as a 1 x N matrix for torch_view."""

    def __init__(self, ptr: int, n: int):
        self.ptr, self.ld = ptr, max(n, 1)


def torch_enqueue(precision: str, session, problem: GemmProblem, a, b, c, bias: int = 0) -> Callable[[], None]:
    """What enqueues D = epilogue(alpha op(A) op(B) + beta C) with torch on ``session.stream``
    (its handle read at each launch), D in the problem's out_dtype; C is not read when
    beta == 0. UnsupportedProblem (the case is "skipped") where torch cannot run."""
    if (reason := torch_unavailable()) is not None:
        raise UnsupportedProblem(reason)
    import torch

    m, n, k, out = problem.m, problem.n, problem.k, problem.out_dtype
    device = session.device.ordinal
    if precision != "fp32" and out == "fp32" and not mm_takes_out_dtype(torch, device):
        raise UnsupportedProblem(f"PyTorch {torch.__version__} has no torch.mm(..., out_dtype=torch.float32) for "
                                 "2-byte inputs (it came in PyTorch 2.8): no FP32-C baseline in this precision")
    A = torch_view(torch, a, m, k, precision, device, problem.trans_a)
    B = torch_view(torch, b, k, n, precision, device, problem.trans_b)
    C = torch_view(torch, c, m, n, out, device)
    Bias = torch_view(torch, _Vector(bias, n), 1, n, out, device) if problem.has_bias else None
    stream = StreamCache(session.stream, lambda raw: torch.cuda.ExternalStream(raw, device=device))
    product = _torch_product(torch, precision, problem, A, B, C, Bias)
    activate = _torch_activation(torch, problem.epilogue, C)

    def launch() -> None:
        try:
            with torch.cuda.stream(stream()):
                product()
                activate()
        except Exception as exc:  # a torch error is this baseline's failure, not the sweep's
            raise GemmDriverError(f"PyTorch failed: {first_line(exc)}") from exc

    return launch


def _torch_product(torch, precision: str, problem: GemmProblem, A, B, C, Bias) -> Callable[[], None]:
    """alpha op(A) op(B) + beta C (+ bias) into C, each path rounding C's type once."""
    alpha, beta, wide = problem.alpha, problem.beta, problem.out_dtype == "fp32"

    def fp32_inputs() -> None:  # addmm_ ignores C (NaN included) when beta == 0
        with torch_without_tf32(torch):
            if Bias is not None and beta == 0:
                torch.addmm(Bias, A, B, alpha=alpha, out=C)
            else:
                C.addmm_(A, B, beta=beta, alpha=alpha)
                if Bias is not None:
                    C.add_(Bias)

    def fp32_out() -> None:
        if beta == 0:
            torch.mm(A, B, out_dtype=torch.float32, out=C)
            if alpha != 1:
                C.mul_(alpha)
        else:
            result = torch.mm(A, B, out_dtype=torch.float32)
            C.mul_(beta).add_(result, alpha=alpha)
        if Bias is not None:
            C.add_(Bias)

    def own_type() -> None:
        if Bias is None:
            C.addmm_(A, B, beta=beta, alpha=alpha)
        elif beta == 0:
            torch.addmm(Bias, A, B, alpha=alpha, out=C)
        else:  # C and the bias added in FP32, rounded once into C
            with torch_without_tf32(torch):
                total = torch.addmm(C.float(), A.float(), B.float(), beta=beta, alpha=alpha)
            C.copy_(total.add_(Bias.float()))

    return fp32_inputs if precision == "fp32" else fp32_out if wide else own_type


def _torch_activation(torch, epilogue: str, C) -> Callable[[], None]:
    """torch's own ReLU or GELU (tanh form) on D in place; nothing for the other epilogues."""
    if epilogue == "bias_relu":
        return lambda: C.relu_()
    if epilogue == "bias_gelu":
        return lambda: C.copy_(torch.nn.functional.gelu(C, approximate="tanh"))
    return lambda: None


def torch_scaled_enqueue(session, problem: GemmProblem, a, b, c, scales) -> Callable[[], None]:
    """What enqueues D = (sa . A) @ (sb . B)^T with ``torch._scaled_mm`` (fast accumulation off)
    on ``session.stream``: A M x K and B N x K (the "nt" layout), each viewed in its FP8 format
    (the problem's ``operand_formats``: torch.float8_e4m3fn or torch.float8_e5m2), FP32 scales
    in fp8.device_scales' layout, D in FP32 or BF16. It has no alpha or C: other scalars are
    refused. UnsupportedProblem where torch or its _scaled_mm cannot run the mode, and for
    the shapes _scaled_mm refuses at its call (K and N multiples of 16; A's and B's rows
    16-byte aligned, cuBLASLt's FP8 rule), so that they are skipped rather than failed.

    Block scaling runs cuBLASLt's VEC128_32F / BLK128x128_32F, which reads B's 128 x 128
    scales with rows padded to 4 scales: ``_torch_scales`` makes that padded copy here, once,
    outside the timed launches (see there for the strides _scaled_mm is shown). Where the
    library may lack the problem (a block-scaled shape; an e5m2 operand, whose row and block
    kernels neither PyTorch nor cuBLASLt document), _scaled_mm is called once here, and a
    refusal is UnsupportedProblem naming it rather than a failure at the first launch."""
    if (reason := torch_unavailable()) is not None:
        raise UnsupportedProblem(reason)
    import torch

    formats = problem.operand_formats
    missing = [TORCH_FP8_DTYPES[f] for f in dict.fromkeys(formats) if not hasattr(torch, TORCH_FP8_DTYPES[f])]
    if not hasattr(torch, "_scaled_mm") or missing:
        raise UnsupportedProblem(f"PyTorch {torch.__version__} has no torch._scaled_mm for fp8_types "
                                 f"{problem.fp8_types!r}" + (f" (no torch.{missing[0]})" if missing else ""))
    if (problem.alpha, problem.beta) != (1.0, 0.0):
        raise UnsupportedProblem("torch._scaled_mm computes alpha = 1, beta = 0 only")
    m, n, k, device = problem.m, problem.n, problem.k, session.device.ordinal
    if k % 16 or n % 16 or a.ld % 16 or b.ld % 16:
        raise UnsupportedProblem(f"torch._scaled_mm needs K, N and the rows of A and B in multiples of 16 "
                                 f"(K={k}, N={n}, lda={a.ld}, ldb={b.ld})")
    A = torch_view(torch, a, m, k, "fp8", device, fp8=formats[0])
    B = torch_view(torch, b, n, k, "fp8", device, fp8=formats[1]).t()  # K x N, column-major: what _scaled_mm takes
    C = torch_view(torch, c, m, n, problem.out_dtype, device)
    out_dtype = torch.bfloat16 if problem.out_dtype == "bf16" else torch.float32
    stream = StreamCache(session.stream, lambda raw: torch.cuda.ExternalStream(raw, device=device))

    def call(scale_a, scale_b) -> None:
        with torch.cuda.stream(stream()):
            torch._scaled_mm(A, B, scale_a, scale_b, out_dtype=out_dtype, use_fast_accum=False, out=C)

    scale_a, scale_b = _torch_scales(torch, session, problem, scales, device, call)
    # cuBLASLt takes block scales on some shapes only (not M = 1 on the H200); an e5m2 operand
    # may lack a kernel in the row or block mode (PyTorch's CUTLASS row kernel takes e5m2 A only)
    if problem.scaling == "block" or problem.fp8_types != "e4m3":
        try:
            call(scale_a, scale_b)
        except (RuntimeError, ValueError) as exc:  # TORCH_CHECK raises RuntimeError, TORCH_CHECK_VALUE ValueError
            raise UnsupportedProblem(_scaled_mm_refusal(problem, exc)) from exc

    def launch() -> None:
        try:
            call(scale_a, scale_b)
        except Exception as exc:  # a torch error is this baseline's failure, not the sweep's
            raise GemmDriverError(f"PyTorch failed: {first_line(exc)}") from exc

    return launch


def _scaled_mm_refusal(problem: GemmProblem, exc: BaseException) -> str:
    """One line saying what _scaled_mm refused at its trial call, and what it does take."""
    why = first_line(exc)[:120]
    if problem.fp8_types == "e4m3":
        return f"torch._scaled_mm does not take this block-scaled shape: {why}"
    a, b = problem.operand_formats
    return (f"torch._scaled_mm does not take {problem.scaling} scaling with fp8_types {problem.fp8_types!r} "
            f"(A {a}, B {b}) here ({why}); it takes e4m3 A and B in every scaling mode")


class _ScaleView:
    """A device pointer and a row pitch for ``torch_view``, keeping ``owner`` (a padded copy) alive."""

    def __init__(self, ptr: int, ld: int, owner: Any = None):
        self.ptr, self.ld, self.owner = int(ptr), ld, owner


def _torch_scales(torch, session, problem: GemmProblem, scales, device: int, call: Callable[[Any, Any], None]):
    """The scale tensors _scaled_mm reads, viewed over our device scales (fp8.device_scales).

    tensor: (1, 1) each; row: (M, 1) and (1, N). block: A (M, K/128) with strides (1, M), a
    transposed view of our K/128 x M rows ("outer-dim-major", as torch checks and cuBLASLt's
    VEC128_32F reads); B (K/128, N/128), a transposed view of N/128 rows of K/128 scales.
    cuBLASLt's BLK128x128_32F reads those rows at a pitch padded to 4 scales whatever strides
    the tensor has (it gets a pointer), so they are copied once into a padded buffer when
    K/128 is not a multiple of 4. _scaled_mm's own check of the strides differs between
    releases (the exact K/128 in the current source, the padded pitch in some 2.9-era ones):
    where N/128 > 1 and the two differ, both views of the padded copy are tried once, here,
    and the one _scaled_mm takes is kept; none taken is UnsupportedProblem. This runs the
    GEMM once on the operands (the provider declares ``measures``)."""
    sa, sb = scales
    m, n, k = problem.m, problem.n, problem.k
    if problem.scaling == "tensor":
        return torch_view(torch, sa, 1, 1, "fp32", device), torch_view(torch, sb, 1, 1, "fp32", device)
    if problem.scaling == "row":
        return torch_view(torch, sa, m, 1, "fp32", device), torch_view(torch, sb, n, 1, "fp32", device).t()
    from ..cuda import cublaslt

    kb, nb, pitch = -(-k // 128), -(-n // 128), cublaslt.block_scale_ld(k)
    scale_a = torch_view(torch, sa, m, kb, "fp32", device, True)
    if pitch == sb.ld:
        return scale_a, torch_view(torch, sb, kb, nb, "fp32", device, True)
    padded = cublaslt.padded_block_scales(sb.ptr, nb, kb, sb.ld, session.stream)
    views = [torch_view(torch, _ScaleView(padded.ptr, ld, padded), kb, nb, "fp32", device, True)
             for ld in ((kb, pitch) if nb > 1 else (pitch,))]
    if len(views) == 1:
        return scale_a, views[0]
    refusals = []
    for scale_b in views:
        try:
            call(scale_a, scale_b)
        except (RuntimeError, ValueError) as exc:  # _scaled_mm's check of the scale strides: try the other
            refusals.append(exc)
            continue
        return scale_a, scale_b
    if problem.fp8_types != "e4m3":  # the formats, not the strides, may be what it refuses: name them
        raise UnsupportedProblem(_scaled_mm_refusal(problem, refusals[-1]))
    raise UnsupportedProblem(f"PyTorch {torch.__version__} torch._scaled_mm takes B's 128x128 scales neither at "
                             f"row pitch {kb} nor {pitch} ({first_line(refusals[0])[:120]})")
