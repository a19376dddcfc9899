"""The torch op's GEMMs on CUDA tensors: one Route per call configuration, resolved once.

A training step calls the same few GEMMs again and again, so everything that does not
depend on where the tensors are is worked out on the first call of a configuration and
kept: the Plan (kernel choice, capability checks, the load), whether the epilogue is the
kernel's (fused) or torch's after an FP32-out GEMM, the leading dimensions. Later calls
read the tensors' addresses and torch's current stream and launch through
``Plan.run_pointers``; the Plan keeps one packed Launch per set of addresses.

The key (``route_key``) holds everything the first call checked and the Plan binds: A's
and B's shapes, strides (layout and leading dimension), dtypes and devices, the bias's
(or None), the activation, the output dtype and the kernel's name. A different shape or
device is another key; the stream is not part of it, since a Plan launches on whichever
stream each call names. The first call of a key runs through ``Plan.__call__``, which
checks every operand; a key equal to it can only hold tensors that pass the same checks.
At most ``ROUTES_KEPT`` routes are kept, least recently used dropped first.

The kernels launch without programmatic dependent launch (``PDL``): in a model's step the
kernel before a GEMM is mostly torch's, which never hands over early. H100, the MLP training
run's CUDA-graph steps with every GEMM on hopper_bf16 (tools/probes/mlp_gemm_split.py): 0.975x
torch's samples per second without PDL, 0.961x with it where the picks have it
(results/h100-80gb-hbm3/probe-mlp-gemm-split-pdl-off.txt,
results/h100-80gb-hbm3/probe-mlp-gemm-split-pdl-on.txt). Alone after a torch
kernel, in a graph, PDL gave the step's GEMMs nothing (without it 0.991-0.996x their time with
it); launched on a stream with the host ahead of the GPU they took 1.03-1.06x as long without it
(tools/probes/pdl_in_graph.py, results/h100-80gb-hbm3/probe-pdl-in-graph.txt), which eager
steps bound by the GPU give up here; ``PDL = None`` launches as each kernel's choice says.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Optional

import torch

from .. import api
from ..arrays import layout_of
from ..cuda.errors import UnsupportedProblem

ROUTES_KEPT = 64
PDL = False  # api.plan's pdl for every route (None: as each kernel's choice says); see the docstring


def route_key(a, b, bias, activation: Optional[str], out_dtype, kernel: Optional[str]) -> tuple:
    """Everything a Route was checked and planned for (cheap: attributes torch keeps)."""
    bias_part = None if bias is None else (bias.shape, bias.stride(), bias.dtype, bias.get_device())
    return (a.shape, a.stride(), a.dtype, a.get_device(), b.shape, b.stride(), b.dtype, b.get_device(), bias_part,
            activation, out_dtype, kernel)


class RouteCache:
    """The last ``size`` Routes by key (LRU), with hit and miss counts to show reuse."""

    def __init__(self, size: int = ROUTES_KEPT):
        self.size, self.hits, self.misses = size, 0, 0
        self._routes: OrderedDict[tuple, "Route"] = OrderedDict()

    def get(self, key: tuple, make: Callable[[], "Route"]) -> "Route":
        route = self._routes.get(key)
        if route is not None:
            self.hits += 1
            self._routes.move_to_end(key)
            return route
        self.misses += 1
        route = self._routes[key] = make()
        if len(self._routes) > self.size:
            self._routes.popitem(last=False)
        return route

    def __len__(self) -> int:
        return len(self._routes)

    def stats(self) -> dict[str, int]:
        """Routes kept, hits, misses, and the Launches their plans made (one per new set of
        addresses: when it grows with every step, an operand's address changes each call) and
        how many of them were re-pointed from the one before (the cheap way: Plan._repointed)."""
        plans = {id(p): p for route in self._routes.values() for p in (route.fused, route.wide) if p is not None}
        return {"routes": len(self._routes), "hits": self.hits, "misses": self.misses,
                "launches_made": sum(p.launches_made for p in plans.values()),
                "launches_repointed": sum(p.launches_repointed for p in plans.values())}

    def clear(self) -> None:
        self._routes.clear()
        self.hits = self.misses = 0


def readable(t: torch.Tensor) -> bool:
    """Whether a GEMM reads ``t`` in place: row-major with a leading dimension, or a transposed
    view of one (arrays.layout_of's rule; a dimension of 1 takes any stride)."""
    rows, cols = t.shape
    rs, cs = t.stride()
    return (cs == 1 or cols <= 1) and (rs >= cols or rows <= 1) or (rs == 1 or rows <= 1) and (cs >= rows or cols <= 1)


def _stream_reader() -> Callable[[int], int]:
    """device ordinal -> torch's current raw stream there (the cheap spelling where it exists)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw if raw is not None else (lambda device: int(torch.cuda.current_stream(device).cuda_stream))


current_stream = _stream_reader()


def activate(v: torch.Tensor, activation: Optional[str]) -> torch.Tensor:
    """torch's activation (GELU in its tanh form), computed in FP32 for 16-bit inputs."""
    if activation == "relu":
        return torch.relu(v)
    if activation == "gelu":
        return torch.nn.functional.gelu(v, approximate="tanh")
    return v


class Route:
    """One configuration's GEMM: act(a @ b + bias) into a new ``out_dtype`` tensor, fused where
    a kernel declares the layout, output type and epilogue, else an FP32-out GEMM and torch's
    epilogue. ``label``: what ran, for ``gemm_driver.torch.ran``."""

    def __init__(self, a, b, bias, activation: Optional[str], out_dtype, kernel: Optional[str]):
        (self.m, self.k), self.n = a.shape, b.shape[1]
        self.dtype, self.out_dtype, self.device = a.dtype, out_dtype, a.device
        self.activation, self.kernel, self.has_bias = activation, kernel, bias is not None
        # a layout no kernel reads in place (what autograd hands over sometimes) is copied at each call
        self.copy_a, self.copy_b = not readable(a), not readable(b)
        a, b = (a.contiguous() if self.copy_a else a), (b.contiguous() if self.copy_b else b)
        (self.lda, trans_a), (self.ldb, trans_b) = (layout_of(name, *t.shape, *t.stride()) for name, t in
                                                    (("A", a), ("B", b)))
        self.trans = (trans_a, trans_b)
        self.fused: Optional[api.Plan] = None  # the plan with the epilogue, when a kernel declares it
        self.fused_tried = False
        self.wide: Optional[api.Plan] = None  # FP32 out, torch's epilogue after it
        self.ready = False  # the plan in use passed a checked first call: raw addresses from now on
        self.label = ""

    def __call__(self, a, b, bias, stream: int) -> torch.Tensor:
        if self.copy_a:
            a = a.contiguous()
        if self.copy_b:
            b = b.contiguous()
        out = torch.empty(self.m, self.n, dtype=self.out_dtype, device=self.device)
        if self.ready:
            try:
                if self.fused is not None:
                    self.fused.run_pointers(a.data_ptr(), b.data_ptr(), out.data_ptr(), stream, lda=self.lda,
                                            ldb=self.ldb, ldc=self.n, bias=0 if bias is None else bias.data_ptr())
                    return out
                wide = torch.empty(self.m, self.n, dtype=torch.float32, device=self.device)
                self.wide.run_pointers(a.data_ptr(), b.data_ptr(), wide.data_ptr(), stream, lda=self.lda,
                                       ldb=self.ldb, ldc=self.n)
                return self._epilogue(wide, bias, out)
            except UnsupportedProblem:  # no algorithm at these addresses' alignment: checked again, unfused
                self.ready, self.fused = False, None
        return self._checked_call(a, b, bias, stream, out)

    def _checked_call(self, a, b, bias, stream: int, out: torch.Tensor) -> torch.Tensor:
        """Through Plan.__call__, which checks every operand: the first call, empty problems
        (run_pointers launches GEMMs only) and the call after a refusal. Plans here once."""
        if not self.fused_tried:
            self.fused_tried = True
            try:
                self.fused = self._plan(self.kernel, self.out_dtype, fused=True)
            except UnsupportedProblem:
                self.fused = None
        if self.fused is not None:
            try:
                self.fused(a, b, out, bias=bias, stream=stream)
                self._checked(self.fused, fused=True)
                return out
            except UnsupportedProblem:
                self.fused = None
        wide = torch.empty(self.m, self.n, dtype=torch.float32, device=self.device)
        self._run_wide(a, b, wide, stream)
        return self._epilogue(wide, bias, out)

    def _run_wide(self, a, b, wide, stream: int) -> None:
        """The FP32-out GEMM on the named kernel, or the dtype's cuBLAS where that kernel
        refuses this layout."""
        for kernel in dict.fromkeys((self.kernel, None)):
            try:
                if self.wide is None:
                    self.wide = self._plan(kernel, torch.float32, fused=False)
                self.wide(a, b, wide, stream=stream)
                self._checked(self.wide, fused=False)
                return
            except UnsupportedProblem:
                self.wide = None
                if kernel is None:
                    raise

    def _plan(self, kernel: Optional[str], out_dtype, *, fused: bool) -> api.Plan:
        return api.plan(self.m, self.n, self.k, dtype=self.dtype, kernel=kernel, trans_a=self.trans[0],
                        trans_b=self.trans[1], out_dtype=out_dtype, bias=self.has_bias and fused,
                        activation=self.activation if fused else None, pdl=PDL)

    def _checked(self, plan: api.Plan, *, fused: bool) -> None:
        self.ready = not plan.problem.is_empty
        self.label = f"{plan.kernel} ({'fused' if fused else 'torch epilogue'})"

    def _epilogue(self, wide: torch.Tensor, bias, out: torch.Tensor) -> torch.Tensor:
        """act(wide + bias) rounded once into out (FP32 arithmetic, as a fused epilogue)."""
        if bias is not None:
            wide += bias  # bias in out's dtype, widened exactly
        return out.copy_(activate(wide, self.activation))


_ROUTES = RouteCache()


def stats() -> dict[str, int]:
    """The route cache's counts (RouteCache.stats)."""
    return _ROUTES.stats()


def gemm_cuda(a, b, bias, activation: Optional[str], out_dtype, kernel: Optional[str]) -> tuple[torch.Tensor, str]:
    """(act(a @ b + bias) in ``out_dtype``, what ran) through this configuration's Route, on
    torch's current stream of a's device."""
    route = _ROUTES.get(route_key(a, b, bias, activation, out_dtype, kernel),
                        lambda: Route(a, b, bias, activation, out_dtype, kernel))
    return route(a, b, bias, current_stream(a.get_device())), route.label
