#!/usr/bin/env python3
"""Per-call time of gemm_driver.gemm() on torch device arrays, beside torch.matmul on the same arrays.

For FP32 and BF16 at SIZE^3 (default 256^3, where the host's per-call cost, not the GPU,
sets the pace): each way of calling runs WARMUP times, then CALLS times back to back timed
with time.perf_counter, with one torch.cuda.synchronize() at the end (so a call costs at
least its GPU time when the GPU is the slower side). Printed per call, in microseconds:

  host   the loop's time before the final synchronize, divided by CALLS (Python + launch)
  total  the same loop including the final synchronize (host or GPU, whichever is slower)

The ways: gemm(a, b) (result allocated as a torch tensor), gemm(a, b, out=out), a plan
called as plan(a, b, out), torch.matmul(a, b), and for BF16 torch.mm(a, b,
out_dtype=torch.float32) (gemm_driver's BF16 kernels write an FP32 C, torch.matmul a
BF16 one). Needs PyTorch and a GPU it sees; without them it says so in one line (exit 2).

    python tools/api_overhead.py [--size 256] [--calls 2000] [--warmup 200] [--kernel NAME] [--kernel-bf16 NAME]
"""

from __future__ import annotations

import sys
from pathlib import Path

# The repository instead of tools/ as the first import path, before torch imports inspect:
# tools/inspect.py would shadow the standard library's.
ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)

import time  # noqa: E402

sys.path.append(str(ROOT / "tools"))  # _toolkit.py; last, so that tools/inspect.py shadows nothing
from _toolkit import Parser, positive, run  # noqa: E402

PROG = Path(__file__).name


def parse(argv):
    parser = Parser(prog=PROG, description="Per-call time of gemm_driver.gemm() on torch device arrays, "
                                           "beside torch.matmul on the same arrays (FP32 and BF16).")
    parser.add_argument("--size", type=positive(int), default=256, help="M = N = K (default 256)")
    parser.add_argument("--calls", type=positive(int), default=2000, help="timed calls per row (default 2000)")
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls first (default 200)")
    parser.add_argument("--kernel", default=None, help="gemm_driver kernel of the FP32 rows (default: cublas)")
    parser.add_argument("--kernel-bf16", default=None,
                        help="gemm_driver kernel of the BF16 rows (default: cublas_bf16)")
    parser.add_argument("--also", nargs="*", default=[], help="own kernels timed beside (plan and gemm rows)")
    parser.add_argument("--numpy", action="store_true",
                        help="also NumPy 300x300 gemm() against CuPy's asarray + matmul + asnumpy")
    parser.add_argument("--graphs", action="store_true",
                        help="also a CUDA graph of 100 plan launches: replay time per GEMM against eager")
    args = parser.parse_args(argv)
    if args.warmup < 0:
        parser.error(f"--warmup must be 0 or more, got {args.warmup}")
    return args


def time_calls(torch, call, calls: int, warmup: int) -> tuple[float, float]:
    """(host us per call, total us per call) of ``calls`` back-to-back calls."""
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    queued = time.perf_counter()
    torch.cuda.synchronize()
    done = time.perf_counter()
    return (queued - start) / calls * 1e6, (done - start) / calls * 1e6


def rows_for(torch, gemm_driver, dtype, kernel, args) -> list[tuple[str, str, float, float]]:
    n = args.size
    g = torch.Generator(device="cuda").manual_seed(0)
    a = (torch.rand(n, n, device="cuda", generator=g) * 2 - 1).to(dtype)
    b = (torch.rand(n, n, device="cuda", generator=g) * 2 - 1).to(dtype)
    out = torch.empty(n, n, device="cuda")
    plan = gemm_driver.plan(n, n, n, dtype=dtype, kernel=kernel)
    ways = [
        ("gemm_driver.gemm(a, b)", lambda: gemm_driver.gemm(a, b, kernel=kernel)),
        ("gemm_driver.gemm(a, b, out=out)", lambda: gemm_driver.gemm(a, b, out=out, kernel=kernel)),
        ("plan(a, b, out)", lambda: plan(a, b, out)),
        ("torch.matmul(a, b)", lambda: torch.matmul(a, b)),
    ]
    if dtype != torch.float32:
        ways.append(("torch.mm(a, b, out_dtype=float32)", lambda: torch.mm(a, b, out_dtype=torch.float32)))
        same = torch.empty(n, n, device="cuda", dtype=dtype)
        ways.append(("torch.mm(a, b, out=c) (bf16 c)", lambda: torch.mm(a, b, out=same)))
    else:
        ways.append(("torch.mm(a, b, out=out)", lambda: torch.mm(a, b, out=out)))
    for other in args.also:
        if gemm_driver.kernels.get(other).precision == ("fp32" if dtype == torch.float32 else "bf16"):
            other_plan = gemm_driver.plan(n, n, n, dtype=dtype, kernel=other)
            ways.append((f"plan(a, b, out) {other}", lambda p=other_plan: p(a, b, out)))
            ways.append((f"gemm(a, b, out=out) {other}",
                         lambda k=other: gemm_driver.gemm(a, b, out=out, kernel=k)))
    name = str(dtype).removeprefix("torch.")
    return [(name, label, *time_calls(torch, call, args.calls, args.warmup)) for label, call in ways]


def main(argv=None) -> int:
    args = parse(argv)
    from gemm_driver.cuda.errors import GpuUnavailableError

    try:
        import torch
    except ImportError as exc:
        raise GpuUnavailableError(f"PyTorch with CUDA is needed too ({exc})") from None
    if not torch.cuda.is_available():
        raise GpuUnavailableError("PyTorch sees none (torch.cuda.is_available() is False)")
    import gemm_driver
    import gemm_driver.kernels

    # FP32 rows compare IEEE FP32 with IEEE FP32: no TF32 in torch.matmul either.
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = "ieee"
    else:
        matmul.allow_tf32 = False
    kernels = {torch.float32: args.kernel or "cublas", torch.bfloat16: args.kernel_bf16 or "cublas_bf16"}
    rows = [row for dtype, kernel in kernels.items() for row in rows_for(torch, gemm_driver, dtype, kernel, args)]
    device = torch.cuda.get_device_name()
    print(f"{args.size}^3 on {device}, {args.calls} calls after {args.warmup} warm-up, us per call "
          f"(gemm_driver kernels: {' and '.join(kernels.values())})")
    width = max(len(label) for _, label, _, _ in rows)
    print(f"{'dtype':9} {'call':{width}} {'host':>8} {'total':>8}")
    for dtype, label, host, total in rows:
        print(f"{dtype:9} {label:{width}} {host:8.1f} {total:8.1f}")
    if args.numpy:
        numpy_rows(gemm_driver)
    if args.graphs:
        graph_rows(torch, gemm_driver, args)
    return 0


def numpy_rows(gemm_driver) -> None:
    """gemm() on NumPy 300x300 (copies in, kernel, copy out) beside CuPy's round trip."""
    import numpy as np

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((300, 300), dtype=np.float32) for _ in range(2))

    def per_call(call, calls=300) -> float:
        for _ in range(20):
            call()
        start = time.perf_counter()
        for _ in range(calls):
            call()
        return (time.perf_counter() - start) / calls * 1e6

    print("NumPy 300x300 float32, us per call (each call synchronous: copies in, GEMM, copy out)")
    print(f"  gemm_driver.gemm(a, b) cublas      {per_call(lambda: gemm_driver.gemm(a, b)):8.1f}")
    try:
        import cupy
    except ImportError:
        print("  CuPy round trip: CuPy is not installed")
        return
    print(f"  cp.asnumpy(cp.asarray(a) @ cp.asarray(b)) {per_call(lambda: cupy.asnumpy(cupy.asarray(a) @ cupy.asarray(b))):8.1f}")


def graph_rows(torch, gemm_driver, args, launches: int = 100) -> None:
    """Per GEMM: eager calls (host-bound at small sizes), a torch CUDA graph of ``launches``
    plan calls replayed, and the same graph of torch.mm, timed with events."""
    print(f"CUDA graphs of {launches} GEMMs, us per GEMM (events around 20 replays; eager: {launches} calls)")
    for n, dtype, kernel in [(256, torch.bfloat16, args.kernel_bf16 or "cublas_bf16"),
                             (256, torch.bfloat16, "hopper_bf16"), (2048, torch.bfloat16, "hopper_bf16"),
                             (2048, torch.bfloat16, "cublas_bf16")]:
        a, b = (torch.randn(n, n, device="cuda", dtype=dtype) for _ in range(2))
        out = torch.empty(n, n, device="cuda")
        p = gemm_driver.plan(n, n, n, dtype=dtype, kernel=kernel)
        rows = {}
        for label, call in ((f"plan {kernel}", lambda: p(a, b, out)),
                            ("torch.mm(out_dtype=f32)", lambda: torch.mm(a, b, out_dtype=torch.float32))):
            side = torch.cuda.Stream()
            with torch.cuda.stream(side):
                call()
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(launches):
                    call()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            graph.replay()
            start.record()
            for _ in range(20):
                graph.replay()
            end.record()
            torch.cuda.synchronize()
            replay = start.elapsed_time(end) * 1e3 / (20 * launches)
            start.record()
            for _ in range(launches):
                call()
            end.record()
            torch.cuda.synchronize()
            rows[label] = (replay, start.elapsed_time(end) * 1e3 / launches)
        for label, (replay, eager) in rows.items():
            print(f"  {n}^3 {label:28s} graph replay {replay:7.2f}   eager {eager:7.2f}")


if __name__ == "__main__":
    sys.exit(run(main, PROG))
