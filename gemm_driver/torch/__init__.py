"""The linear layer as a torch op (needs torch): ``gemm_driver::linear`` and ``Linear``.

``linear(x, weight, bias=None, activation=None, kernel=None)`` computes
act(x @ weight^T + bias) with weight stored [out, in] (as nn.Linear's), through
``torch.library.custom_op`` so it runs under ``torch.compile(fullgraph=True)`` and inside CUDA
graphs (a fake implementation gives shapes and dtypes), with an autograd formula whose
GEMMs run here too: dX = dY' W and dW = dY'^T X (``gemm_driver::matmul``, transposed views
read as stored), dbias = the column sums of dY', where dY' is dY times the activation's
derivative at the pre-activation the forward saved. On CUDA the GEMMs go through
gemm_driver.gemm() on the tensors in place; on the CPU through its NumPy path
(kernel "numpy"), which the CPU tests use. ``ran`` tells, per step, which kernel ran and
whether the epilogue was fused or done by torch after an FP32-out GEMM (when no kernel here
declares that layout, output type and epilogue).
"""

from __future__ import annotations

import math
from typing import Optional

try:
    import torch
except ImportError:
    raise ImportError("gemm_driver.torch needs PyTorch (pip install torch); the rest of gemm_driver works "
                      "without it") from None

from .. import api
from ..cuda.errors import UnsupportedProblem

__all__ = ["Linear", "linear", "ran"]

ran: dict[str, str] = {}  # "forward" / "dX" / "dW" -> "<kernel> (fused|torch epilogue)"
_ROUTE: dict[tuple, tuple[Optional[str], bool]] = {}  # call configuration -> (kernel, fused)
_GELU_C = math.sqrt(2 / math.pi)


def _activate(v: torch.Tensor, activation: str) -> torch.Tensor:
    if activation == "relu":
        return torch.relu(v)
    if activation == "gelu":
        return torch.nn.functional.gelu(v, approximate="tanh")
    return v


def _activation_grad(dy: torch.Tensor, pre: torch.Tensor, activation: str) -> torch.Tensor:
    """dY times act'(pre), in FP32."""
    v, g = pre.float(), dy.float()
    if activation == "relu":
        return g * (v > 0)
    if activation == "gelu":  # d/dv of 0.5 v (1 + tanh(c (v + 0.044715 v^3)))
        t = torch.tanh(_GELU_C * (v + 0.044715 * v ** 3))
        return g * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * _GELU_C * (1 + 3 * 0.044715 * v * v))
    return g


def _readable(t: torch.Tensor) -> torch.Tensor:
    """``t`` when gemm() reads it in place (row-major with a leading dimension, or a
    transposed view of one), else a contiguous copy (what autograd hands over sometimes)."""
    rows, cols = t.shape
    rs, cs = t.stride()
    if (cs == 1 or cols <= 1) and (rs >= cols or rows <= 1) or (rs == 1 or rows <= 1) and (cs >= rows or cols <= 1):
        return t
    return t.contiguous()


def _gemm_cuda(step: str, a, b, bias, activation: str, out_dtype, kernel: Optional[str]) -> torch.Tensor:
    """act(a @ b + bias) into a new ``out_dtype`` tensor through gemm(): fused where a kernel
    declares the layout, output type and epilogue, else an FP32-out GEMM and torch's epilogue.
    The route is found once per configuration (a refusal is not paid per call)."""
    act = None if activation == "none" else activation
    a, b = _readable(a), _readable(b)
    key = (step, a.dtype, out_dtype, a.stride(1) == 1, b.stride(1) == 1, bias is not None, act, kernel)
    route = _ROUTE.get(key)
    out = torch.empty(a.shape[0], b.shape[1], dtype=out_dtype, device=a.device)
    if route is None or route[1]:
        try:
            api.gemm(a, b, out=out, bias=bias, activation=act, kernel=kernel)
            _ROUTE[key] = route = (kernel, True)
        except UnsupportedProblem:
            if route is not None:
                raise
            _ROUTE[key] = route = (kernel, False)
    if not route[1]:
        wide = torch.empty(a.shape[0], b.shape[1], dtype=torch.float32, device=a.device)
        try:
            api.gemm(a, b, out=wide, kernel=kernel)
        except UnsupportedProblem:  # the named kernel does not read this layout: the dtype's cuBLAS does
            api.gemm(a, b, out=wide)
        if bias is not None:
            wide += bias.float()
        out.copy_(_activate(wide, activation))
    plan = next(reversed(api._plans.values()), None)
    ran[step] = f"{plan.kernel if plan is not None else kernel} ({'fused' if route[1] else 'torch epilogue'})"
    return out


def _gemm_cpu(a, b, bias, activation: str) -> torch.Tensor:
    """The same function through gemm()'s NumPy path (FP32 arithmetic, one rounding)."""
    A, B = _readable(a.detach().float()).numpy(), _readable(b.detach().float()).numpy()
    v = api.gemm(A, B, bias=None if bias is None else bias.detach().float().numpy(),
                 activation=None if activation == "none" else activation, kernel="numpy")
    ran["cpu"] = "numpy"
    return torch.from_numpy(v).to(a.dtype)


# --- gemm_driver::matmul: a @ b (the backward GEMMs) ---------------------------------------------
@torch.library.custom_op("gemm_driver::matmul", mutates_args=())
def matmul(a: torch.Tensor, b: torch.Tensor, kernel_name: Optional[str] = None) -> torch.Tensor:
    """a @ b in a's dtype; a and b may be transposed views (read as stored). (Not ``kernel``:
    inductor's fallback lowering takes an argument of that name itself.)"""
    if a.is_cuda:
        return _gemm_cuda("matmul", a, b, None, "none", a.dtype, kernel_name)
    return _gemm_cpu(a, b, None, "none")


@matmul.register_fake
def _(a, b, kernel_name=None):
    return a.new_empty(a.shape[0], b.shape[1])


def _matmul_setup(ctx, inputs, output):
    a, b, ctx.kernel = inputs
    ctx.save_for_backward(a, b)


def _matmul_backward(ctx, g):
    a, b = ctx.saved_tensors
    return matmul(g, b.t(), ctx.kernel), matmul(a.t(), g, ctx.kernel), None


matmul.register_autograd(_matmul_backward, setup_context=_matmul_setup)


# --- gemm_driver::linear: (act(x @ W^T + bias), the pre-activation when asked) -------------------
@torch.library.custom_op("gemm_driver::linear", mutates_args=())
def _linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], activation: str,
            kernel_name: Optional[str], save_pre: bool) -> tuple[torch.Tensor, torch.Tensor]:
    if save_pre and activation != "none":  # training: keep the pre-activation for backward
        pre = _linear_value(x, weight, bias, "none", kernel_name)
        return _activate(pre.float(), activation).to(x.dtype), pre
    return _linear_value(x, weight, bias, activation, kernel_name), x.new_empty(0)


def _linear_value(x, weight, bias, activation: str, kernel) -> torch.Tensor:
    if x.is_cuda:
        return _gemm_cuda("forward", x, weight.t(), bias, activation, x.dtype, kernel)
    return _gemm_cpu(x, weight.t(), bias, activation)


@_linear.register_fake
def _(x, weight, bias, activation, kernel_name, save_pre):
    y = x.new_empty(x.shape[0], weight.shape[0])
    return y, (x.new_empty(x.shape[0], weight.shape[0]) if save_pre and activation != "none" else x.new_empty(0))


def _setup_context(ctx, inputs, output):
    x, weight, bias, activation, kernel, _ = inputs
    ctx.save_for_backward(x, weight, output[1])
    ctx.activation, ctx.kernel, ctx.has_bias = activation, kernel, bias is not None
    ctx.bias = bias.detach() if bias is not None and activation != "none" and output[1].numel() == 0 else None


def _backward(ctx, dy, _dpre):
    x, weight, pre = ctx.saved_tensors
    if ctx.activation != "none" and pre.numel() == 0:  # called without save_pre: recompute it
        pre = _linear(x, weight, ctx.bias, "none", ctx.kernel, False)[0]
    g = dy if ctx.activation == "none" else _activation_grad(dy, pre, ctx.activation).to(dy.dtype)
    dx = matmul(g, weight, ctx.kernel)  # (M x N) @ (N x K)
    dw = matmul(g.t(), x, ctx.kernel)  # (N x M) @ (M x K), g read transposed in place
    dbias = g.float().sum(0).to(dy.dtype) if ctx.has_bias else None
    return dx, dw, dbias, None, None, None


_linear.register_autograd(_backward, setup_context=_setup_context)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
           activation: Optional[str] = None, kernel: Optional[str] = None) -> torch.Tensor:
    """act(x @ weight^T + bias); x is (..., in), weight (out, in), bias (out) in x's dtype;
    activation None, "relu" or "gelu" (tanh form)."""
    if activation not in (None, "relu", "gelu"):
        raise ValueError(f"activation must be None, 'relu' or 'gelu' (the tanh form), got {activation!r}")
    lead = x.shape[:-1]
    flat = x.reshape(-1, x.shape[-1])
    save = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)
    y, _ = _linear(flat, weight, bias, activation or "none", kernel, save)
    return y.reshape(*lead, weight.shape[0])


class Linear(torch.nn.Linear):
    """nn.Linear whose forward (and backward) GEMMs run on gemm_driver's kernels, with the
    activation fused where a kernel declares it: ``Linear(in, out, activation="gelu")``."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, activation: Optional[str] = None,
                 kernel: Optional[str] = None, device=None, dtype=None):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.activation, self.kernel = activation, kernel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, self.activation, self.kernel)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, activation={self.activation}, kernel={self.kernel}"
