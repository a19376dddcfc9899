"""The linear layer as a torch op (needs torch): ``gemm_driver::linear`` and ``Linear``.

``linear(x, weight, bias=None, activation=None, kernel=None)`` computes
act(x @ weight^T + bias) with weight stored [out, in] (as nn.Linear's), through
``torch.library.custom_op`` so it runs under ``torch.compile(fullgraph=True)`` and inside CUDA
graphs (a fake implementation gives shapes and dtypes), with an autograd formula whose
GEMMs run here too: dX = dY' W and dW = dY'^T X (``gemm_driver::matmul``, transposed views
read as stored), dbias = the column sums of dY' (on ``hopper_bf16``/``hopper_fp16`` the GEMM
ones @ dY' there too: ``_column_sums``), where dY' is dY times the activation's derivative at the
pre-activation the forward saved. On CUDA the GEMMs go through
gemm_driver.gemm() on the tensors in place; on the CPU through its NumPy path
(kernel "numpy"), which the CPU tests use. ``ran`` tells, per step, which kernel ran and
whether the epilogue was fused or done by torch after an FP32-out GEMM (when no kernel here
declares that layout, output type and epilogue).

Host cost per call, which sets the pace of a training step of small GEMMs: on CUDA each
call configuration is resolved once into a Route that keeps its Plan (routes.py), and later
calls pass the tensors' addresses and torch's current stream to ``Plan.run_pointers``. In
eager mode on plain tensors ``linear`` does not go through torch's custom-op dispatch
(which costs several times a GEMM's launch in Python) but through a ``torch.autograd.Function``
with the same forward and backward; under ``torch.compile``, a dispatch or function mode
(FakeTensor, make_fx, FlopCounterMode), functorch transforms or tensor subclasses it calls
the registered op. ``direct_eager = False`` sends every call through the op.
"""

from __future__ import annotations

from typing import Optional

try:
    import torch
except ImportError:
    raise ImportError("gemm_driver.torch needs PyTorch (pip install torch); the rest of gemm_driver works "
                      "without it") from None

from .. import api
from . import routes
from .routes import activate as _activate

__all__ = ["Linear", "linear", "ran"]

ran: dict[str, str] = {}  # "forward" / "matmul" / "cpu" -> "<kernel> (fused|torch epilogue)"
direct_eager = True  # eager calls on plain tensors skip the custom-op dispatch (see the module's docstring)
_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)
_functorch_active = getattr(torch._C, "_are_functorch_transforms_active", lambda: True)


def _activation_grad(dy: torch.Tensor, pre: torch.Tensor, activation: str) -> torch.Tensor:
    """dY times act'(pre) in dY's dtype, computed in FP32 and rounded once: torch's own
    backward kernels of ReLU and GELU (tanh form), one pass over the tensors each, as
    nn.GELU's backward runs them."""
    if activation == "relu":
        return torch.ops.aten.threshold_backward(dy, pre, 0)
    if activation == "gelu":
        return torch.ops.aten.gelu_backward(dy, pre, approximate="tanh")
    return dy


def _readable(t: torch.Tensor) -> torch.Tensor:
    """``t`` when gemm() reads it in place, else a contiguous copy (what autograd hands over
    sometimes)."""
    return t if routes.readable(t) else t.contiguous()


def _gemm_cuda(step: str, a, b, bias, activation: str, out_dtype, kernel: Optional[str]) -> torch.Tensor:
    """act(a @ b + bias) into a new ``out_dtype`` tensor through this configuration's Route
    (routes.py): fused where a kernel declares the layout, output type and epilogue, else an
    FP32-out GEMM and torch's epilogue; resolved on the first call, raw addresses after."""
    out, ran[step] = routes.gemm_cuda(a, b, bias, None if activation == "none" else activation, out_dtype, kernel)
    return out


def _gemm_cpu(a, b, bias, activation: str) -> torch.Tensor:
    """The same function through gemm()'s NumPy path (FP32 arithmetic, one rounding)."""
    A, B = _readable(a.detach().float()).numpy(), _readable(b.detach().float()).numpy()
    v = api.gemm(A, B, bias=None if bias is None else bias.detach().float().numpy(),
                 activation=None if activation == "none" else activation, kernel="numpy")
    ran["cpu"] = "numpy"
    return torch.from_numpy(v).to(a.dtype)


def _matmul_value(a, b, kernel: Optional[str]) -> torch.Tensor:
    if a.is_cuda:
        return _gemm_cuda("matmul", a, b, None, "none", a.dtype, kernel)
    return _gemm_cpu(a, b, None, "none")


# --- gemm_driver::matmul: a @ b (the backward GEMMs) ---------------------------------------------
@torch.library.custom_op("gemm_driver::matmul", mutates_args=())
def matmul(a: torch.Tensor, b: torch.Tensor, kernel_name: Optional[str] = None) -> torch.Tensor:
    """a @ b in a's dtype; a and b may be transposed views (read as stored). (Not ``kernel``:
    inductor's fallback lowering takes an argument of that name itself.)"""
    return _matmul_value(a, b, kernel_name)


@matmul.register_fake
def _(a, b, kernel_name=None):
    return a.new_empty(a.shape[0], b.shape[1])


def _matmul_setup(ctx, inputs, output):
    a, b, ctx.kernel = inputs
    ctx.save_for_backward(a, b)


def _matmul_backward(ctx, g):
    a, b = ctx.saved_tensors
    da = matmul(g, b.t(), ctx.kernel) if ctx.needs_input_grad[0] else None
    db = matmul(a.t(), g, ctx.kernel) if ctx.needs_input_grad[1] else None
    return da, db, None


matmul.register_autograd(_matmul_backward, setup_context=_matmul_setup)


# --- the linear layer's forward and backward, shared by the op and the eager path --------------
def _linear_value(x, weight, bias, activation: str, kernel) -> torch.Tensor:
    if x.is_cuda:
        return _gemm_cuda("forward", x, weight.t(), bias, activation, x.dtype, kernel)
    return _gemm_cpu(x, weight.t(), bias, activation)


def _linear_forward(x, weight, bias, activation: str, kernel, save_pre: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(act(x @ W^T + bias), the pre-activation when ``save_pre`` and there is an activation,
    else an empty tensor). Training keeps the pre-activation for backward: the GEMM adds the
    bias and torch applies the activation (in FP32 for 16-bit tensors, rounded once)."""
    if save_pre and activation != "none":
        pre = _linear_value(x, weight, bias, "none", kernel)
        return _activate(pre, activation), pre
    return _linear_value(x, weight, bias, activation, kernel), x.new_empty(0)


def _linear_grads(dy, x, weight, pre, activation: str, kernel, has_bias: bool, needs, mm):
    """(dX, dW, dbias), each None where ``needs`` says it is not wanted: dY' = dY act'(pre),
    dX = dY' W, dW = dY'^T X (dY' read transposed in place), dbias = the column sums of dY'
    (``_column_sums``). ``mm``: the GEMM (the op where autograd must see it)."""
    g = _activation_grad(dy, pre, activation)
    dx = mm(g, weight, kernel) if needs[0] else None  # (M x N) @ (N x K)
    dw = mm(g.t(), x, kernel) if needs[1] else None  # (N x M) @ (M x K)
    dbias = _column_sums(g, kernel, mm) if has_bias and needs[2] else None
    return dx, dw, dbias


dbias_gemm = True  # dbias as a GEMM on the named kernel (``_column_sums``); False: torch's sum
# the kernels dbias runs on: at M = 1 their decode tiles read g once (measured on hopper_bf16;
# hopper_fp16 has the same tiles). Other kernels' M = 1 forms were not timed so; they keep torch's sum
DBIAS_KERNELS = ("hopper_bf16", "hopper_fp16")
_ONES: dict[tuple, torch.Tensor] = {}  # (rows, dtype, device) -> a 1 x rows row of ones


def _column_sums(g: torch.Tensor, kernel: Optional[str], mm) -> torch.Tensor:
    """The column sums of g in g's dtype, summed in FP32 and rounded once: with a kernel of
    DBIAS_KERNELS named (``dbias_gemm``), the GEMM ones (1 x M) @ g on it, which reads g once at
    M = 1 (the decode tiles); else torch's sum, which sums 16-bit tensors so too, as nn.Linear's
    backward does. Torch's sum also where no row of ones can be made and kept: a first call
    under CUDA-graph capture (a tensor made there is filled only at replay) and traced calls
    (torch.compile, a dispatch mode: a traced tensor must not be kept). H100, the MLP training
    run's graph steps: 1.023x torch's samples per second, 0.981x with torch's sum
    (results/h100-80gb-hbm3/train-mlp-bf16-hopper-graph-dbias-gemm.txt,
    results/h100-80gb-hbm3/train-mlp-bf16-hopper-graph-dbias-sum.txt)."""
    if dbias_gemm and kernel in DBIAS_KERNELS and g.is_cuda and type(g) in _PLAIN_TYPES and _untraced():
        key = (g.shape[0], g.dtype, g.device)
        ones = _ONES.get(key)
        if ones is None and not torch.cuda.is_current_stream_capturing():
            ones = _ONES[key] = torch.ones(1, g.shape[0], dtype=g.dtype, device=g.device)
        if ones is not None:
            return mm(ones, g, kernel).view(-1)
    return g.sum(0)


def _pre_for_backward(x, weight, bias, pre, activation: str, kernel):
    """The pre-activation backward differentiates at: the one saved, else (none saved, or a
    backward that builds a graph, where act'(pre) must carry pre's history to x, W and bias)
    recomputed through the op."""
    if activation != "none" and (pre.numel() == 0 or torch.is_grad_enabled()):
        return _linear(x, weight, bias, "none", kernel, False)[0]
    return pre


# --- gemm_driver::linear: (act(x @ W^T + bias), the pre-activation when asked) -------------------
@torch.library.custom_op("gemm_driver::linear", mutates_args=())
def _linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], activation: str,
            kernel_name: Optional[str], save_pre: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return _linear_forward(x, weight, bias, activation, kernel_name, save_pre)


@_linear.register_fake
def _(x, weight, bias, activation, kernel_name, save_pre):
    y = x.new_empty(x.shape[0], weight.shape[0])
    return y, (x.new_empty(x.shape[0], weight.shape[0]) if save_pre and activation != "none" else x.new_empty(0))


def _setup_context(ctx, inputs, output):
    x, weight, bias, activation, kernel, _ = inputs
    ctx.save_for_backward(x, weight, output[1], bias)
    ctx.activation, ctx.kernel, ctx.has_bias = activation, kernel, bias is not None


def _backward(ctx, dy, _dpre):
    x, weight, pre, bias = ctx.saved_tensors
    pre = _pre_for_backward(x, weight, bias, pre, ctx.activation, ctx.kernel)
    grads = _linear_grads(dy, x, weight, pre, ctx.activation, ctx.kernel, ctx.has_bias, ctx.needs_input_grad, matmul)
    return (*grads, None, None, None)


_linear.register_autograd(_backward, setup_context=_setup_context)


# --- the eager path: the same functions without the custom-op dispatch ----------------------------
class _LinearFunction(torch.autograd.Function):
    """``linear`` in eager mode: the op's forward (pre-activation kept) and backward, called
    directly. A backward that builds a graph (create_graph=True) runs through the ops, whose
    own autograd makes it differentiable again."""

    @staticmethod
    def forward(ctx, x, weight, bias, activation: str, kernel):
        y, pre = _linear_forward(x, weight, bias, activation, kernel, save_pre=True)
        ctx.save_for_backward(x, weight, pre, bias)
        ctx.activation, ctx.kernel, ctx.has_bias = activation, kernel, bias is not None
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, pre, bias = ctx.saved_tensors
        pre = _pre_for_backward(x, weight, bias, pre, ctx.activation, ctx.kernel)
        mm = matmul if torch.is_grad_enabled() else _matmul_value
        grads = _linear_grads(dy, x, weight, pre, ctx.activation, ctx.kernel, ctx.has_bias, ctx.needs_input_grad, mm)
        return (*grads, None, None)


_dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", lambda: 1)
_function_modes = getattr(torch._C, "_len_torch_function_stack", lambda: 1)


def _untraced() -> bool:
    """Eager mode: not traced by torch.compile, no dispatch or function mode (FakeTensor,
    make_fx, FlopCounterMode, torch.device(...)), no functorch transform."""
    return not (torch.compiler.is_compiling() or _dispatch_modes() or _function_modes() or _functorch_active())


def _plain_eager(x, weight, bias) -> bool:
    """Whether a call may skip the op's dispatch: ``_untraced``, tensors of the plain types on
    the CPU or a CUDA GPU. Anything else reaches the registered op, which those mechanisms
    know how to handle."""
    if not direct_eager or not _untraced():
        return False
    return (type(x) in _PLAIN_TYPES and type(weight) in _PLAIN_TYPES and (bias is None or type(bias) in _PLAIN_TYPES)
            and (x.is_cuda or x.is_cpu))


def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
           activation: Optional[str] = None, kernel: Optional[str] = None) -> torch.Tensor:
    """act(x @ weight^T + bias); x is (..., in), weight (out, in), bias (out) in x's dtype;
    activation None, "relu" or "gelu" (tanh form)."""
    if activation not in (None, "relu", "gelu"):
        raise ValueError(f"activation must be None, 'relu' or 'gelu' (the tanh form), got {activation!r}")
    act, two_d = activation or "none", x.dim() == 2
    flat = x if two_d else x.reshape(-1, x.shape[-1])
    grad = torch.is_grad_enabled()
    if _plain_eager(flat, weight, bias):
        if grad and (x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)):
            y = _LinearFunction.apply(flat, weight, bias, act, kernel)
        else:
            y = _linear_value(flat, weight, bias, act, kernel)
    else:
        y, _ = _linear(flat, weight, bias, act, kernel, grad and (x.requires_grad or weight.requires_grad))
    return y if two_d else y.reshape(*x.shape[:-1], weight.shape[0])


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
