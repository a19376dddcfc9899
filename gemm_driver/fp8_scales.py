"""The FP8 scales a caller passes with device arrays (``gemm(..., scales=(sa, sb))``), read in place.

An FP8 GEMM's A and B (torch.float8_e4m3fn or float8_e5m2 tensors) come with FP32
dequantization scales in one of fp8.py's modes; the kernels and the cuBLASLt baselines read
them in fp8.device_scales' layouts, as torch._scaled_mm takes them:

- ``tensor``: one scale each, any tensor of one element;
- ``row``: A's M scales and B's N scales, each a contiguous vector ((M,), (M, 1) or (1, M));
- ``block``: A's M x ceil(K/128) scales stored K-block-major (strides (1, >= M): each
  K-block's M scales contiguous, "outer-dimension major"), B's ceil(N/128) x ceil(K/128)
  row-major (strides (>= ceil(K/128), 1)).

``scale_operands`` turns the pair into the Operands (pointer, row stride in elements) a launch
reads, checking shape, layout, dtype and device: nothing is copied, and every refusal is one
line saying what the mode wants. ``scale_layout`` is the pure rule (no GPU). ``infer_scaling``
names the mode a pair's sizes mean, for gemm() called without ``scaling=``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from . import arrays
from .fp8 import scale_shapes

WHICH = ("A", "B")


class ScaleOperand(NamedTuple):
    """Scales as a launch reads them (kernels.launch.Operand): address, row stride, 4 bytes."""

    ptr: int
    ld: int
    itemsize: int = 4


class ScaleView(NamedTuple):
    """One scale tensor as stored: address, shape and element strides (2-D; 0-D and 1-D
    tensors read as a column), dtype name and device ordinal."""

    ptr: int
    shape: tuple[int, int]
    strides: tuple[int, int]
    dtype: str
    device: int


def view_of(name: str, x, stream: int) -> ScaleView:
    """``x`` (a torch tensor of 0-2 dimensions, or another device array of 1 or 2) as a
    ScaleView; one-line errors otherwise."""
    if arrays.kind_of(x) == "torch":
        if x.dim() > 2:
            raise ValueError(f"{name} must have at most 2 dimensions, got shape {tuple(x.shape)}")
        shape = (tuple(x.shape) + (1, 1))[:2] if x.dim() < 2 else tuple(x.shape)
        strides = (tuple(x.stride()) + (1, 1))[:2] if x.dim() < 2 else tuple(x.stride())
        device = x.get_device()
        if device < 0:
            raise ValueError(f"{name} is a torch tensor on {x.device}; scales must be on the GPU with A and B")
        return ScaleView(x.data_ptr(), shape, strides, str(x.dtype).removeprefix("torch."), device)
    if len(getattr(x, "shape", ())) == 1:
        v = arrays.device_vector(name, x, stream)
        return ScaleView(v.ptr, (v.length, 1), (1, 1), v.dtype, v.device)
    a = arrays.device_array(name, x, stream)
    strides = (1, a.ld) if a.trans else (a.ld, 1)
    return ScaleView(a.ptr, (a.rows, a.cols), strides, a.dtype, a.device)


def scale_layout(scaling: str, which: int, shape: tuple[int, int], strides: tuple[int, int],
                 m: int, n: int, k: int) -> int:
    """The row stride (in elements) a launch passes for the scales of A (``which`` 0) or B (1)
    stored with ``shape`` and ``strides``, or ValueError saying what ``scaling`` wants."""
    rows, cols = scale_shapes(scaling, m, n, k)[which]
    name = f"scales[{which}] ({WHICH[which]}'s)"
    got = f"got shape {shape} and strides {strides}"
    size = shape[0] * shape[1]
    if scaling == "tensor":
        if size != 1:
            raise ValueError(f"{name} must hold one scale for scaling 'tensor', {got}")
        return 1
    if scaling == "row":
        unit = shape[1] == 1 and (shape[0] <= 1 or strides[0] == 1) or shape[0] == 1 and (shape[1] <= 1 or
                                                                                          strides[1] == 1)
        if size != rows or not unit:
            raise ValueError(f"{name} must be a contiguous vector of {rows} scales ({'M' if which == 0 else 'N'}) "
                             f"for scaling 'row', {got}")
        return 1
    if tuple(shape) != (rows, cols):
        what = "M x ceil(K/128)" if which == 0 else "ceil(N/128) x ceil(K/128)"
        raise ValueError(f"{name} must be {what} = {rows}x{cols} for scaling 'block', {got}")
    if which == 0:  # K-block-major: element (i, kb) at kb * ld + i
        ld = strides[1] if cols > 1 else rows
        if (rows > 1 and strides[0] != 1) or ld < rows:
            raise ValueError(f"{name} must be stored K-block-major for scaling 'block' (strides (1, >= {rows}), as "
                             f"torch._scaled_mm takes them: e.g. s.t().contiguous().t()), {got}")
        return ld
    ld = strides[0] if rows > 1 else cols  # row-major: element (nb, kb) at nb * ld + kb
    if (cols > 1 and strides[1] != 1) or ld < cols:
        raise ValueError(f"{name} must be row-major for scaling 'block' (strides (>= {cols}, 1)), {got}")
    return ld


def scale_operands(scaling: str, scales, m: int, n: int, k: int, stream: int, device: int) -> tuple:
    """((A's pointer, row stride), (B's ...)) as launch Operands, from the caller's pair."""
    if not isinstance(scales, (tuple, list)) or len(scales) != 2:
        raise ValueError(f"scales must be a pair (A's, B's) of float32 device tensors for scaling {scaling!r}, "
                         f"got {type(scales).__name__}")
    operands = []
    for which, x in enumerate(scales):
        view = view_of(f"scales[{which}]", x, stream)
        if view.dtype != "float32":
            raise TypeError(f"scales[{which}] ({WHICH[which]}'s) must be float32, got {view.dtype}")
        if view.device != device:
            raise ValueError(f"scales[{which}] is on GPU {view.device}; A and B are on GPU {device}")
        ld = scale_layout(scaling, which, view.shape, view.strides, m, n, k)
        operands.append(ScaleOperand(view.ptr, ld))
    return tuple(operands)


def infer_scaling(scales, m: int, n: int) -> str:
    """The mode a pair's sizes mean: one scale each is 'tensor', M and N scales 'row', anything
    else 'block' (whose shapes scale_layout then checks)."""
    sizes = [_size(x) for x in scales] if isinstance(scales, (tuple, list)) and len(scales) == 2 else None
    if sizes == [1, 1]:
        return "tensor"
    if sizes == [m, n]:
        return "row"
    return "block"


def _size(x) -> int:
    """Elements in ``x`` (torch, CuPy, or anything with a shape or the array interface); -1
    when it says none."""
    if arrays.kind_of(x) == "torch":
        return x.numel()
    shape = getattr(x, "shape", None) or getattr(x, "__cuda_array_interface__", {}).get("shape")
    return -1 if shape is None else math.prod(int(extent) for extent in shape)
