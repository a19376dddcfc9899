"""Probe: what programmatic dependent launch (PDL) gives or costs a hopper_bf16 GEMM by what
runs before it, launched on a stream and captured in a CUDA graph. For each call (the MLP
training run's GEMMs, tools/train_mlp.py; MxNxK[:layout[:epilogue]], BF16 D), the GEMM planned
with PDL and without (api.plan's pdl), in two sequences of REPS iterations:

- after torch: a torch kernel (an in-place scale of a 16 MiB buffer, which, like every torch
  kernel, never hands over early) then the GEMM, as in a model's step;
- back to back: the GEMM alone, again and again, as bench times it.

Each sequence is run as stream launches and as one captured graph, the combinations taking
turns; the median of ROUNDS, in us per iteration. Outputs are checked once against torch's
matmul in FP32.

Run from the repository root:
    PYTHONPATH=. python3 tools/probes/pdl_in_graph.py [CALL ...]
"""

from __future__ import annotations

import statistics
import sys

import torch
from linear_configs import parse_call

from gemm_driver import api

CALLS = ["4096x2048x2048:nn", "2048x512x4096:tn", "4096x2048x512:nt:bias", "2048x2048x4096:tn"]
REPS, ROUNDS = 20, 7


def operands(call: str):
    """(a, b, bias or None, plan options) for MxNxK[:layout[:epilogue]] (linear_configs.parse_call),
    a and b views as the layout says."""
    p = parse_call(call)
    g = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn(*((p.k, p.m) if p.trans_a else (p.m, p.k)), device="cuda", generator=g).bfloat16()
    b = torch.randn(*((p.n, p.k) if p.trans_b else (p.k, p.n)), device="cuda", generator=g).bfloat16()
    a, b = (a.t() if p.trans_a else a), (b.t() if p.trans_b else b)
    bias = torch.randn(p.n, device="cuda", generator=g).bfloat16() if p.has_bias else None
    options = dict(dtype="bfloat16", out_dtype="bfloat16", kernel="hopper_bf16", trans_a=p.trans_a,
                   trans_b=p.trans_b, bias=bias is not None)
    return a, b, bias, (p.m, p.n, p.k), options


def runner(run, graph: bool):
    """``run`` as stream launches, or captured once in a graph and replayed."""
    if not graph:
        return run
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        run()
    return g.replay


def timed(run) -> float:
    """us per iteration of ``run`` (REPS iterations), after one untimed run."""
    run()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000 / REPS


def main(calls: list[str]) -> None:
    print(f"{torch.cuda.get_device_name()}; hopper_bf16, BF16 D; us per iteration, median of {ROUNDS} rounds "
          f"of {REPS} iterations")
    print(f"{'call':<26} {'sequence':<14} {'mode':<7} {'PDL on':>8} {'PDL off':>8} {'off/on':>7}")
    scratch = torch.randn(4 << 20, device="cuda")  # 16 MiB
    for call in calls:
        a, b, bias, (m, n, k), options = operands(call)
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        plans = {pdl: api.plan(m, n, k, pdl=pdl, **options) for pdl in (True, False)}
        want = a.float() @ b.float() + (0 if bias is None else bias.float())
        for pdl, p in plans.items():
            out.fill_(float("nan"))
            p(a, b, out, bias=bias)
            error = ((out.float() - want).abs().max() / want.abs().max()).item()
            if not error < 2e-2:
                raise SystemExit(f"{call} with pdl={pdl}: relative error {error:.3g}")
        sequences = {
            "after torch": lambda p: [(scratch.mul_(1.0), p(a, b, out, bias=bias)) for _ in range(REPS)],
            "back to back": lambda p: [p(a, b, out, bias=bias) for _ in range(REPS)],
        }
        for name, sequence in sequences.items():
            for graph in (False, True):
                runs = {pdl: runner(lambda p=p: sequence(p), graph) for pdl, p in plans.items()}
                us = {pdl: [] for pdl in plans}
                for _ in range(ROUNDS):
                    for pdl, run in runs.items():
                        us[pdl].append(timed(run))
                on, off = (statistics.median(us[pdl]) for pdl in (True, False))
                print(f"{call:<26} {name:<14} {'graph' if graph else 'stream':<7} {on:8.2f} {off:8.2f} "
                      f"{off / on:7.3f}", flush=True)
    scale = runner(lambda: [scratch.mul_(1.0) for _ in range(REPS)], True)
    alone = statistics.median(timed(scale) for _ in range(ROUNDS))
    print(f"the torch kernel alone, graph: {alone:.2f} us")


if __name__ == "__main__":
    main(sys.argv[1:] or CALLS)
