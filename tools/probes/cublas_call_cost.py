"""Probe: the host time of one cuBLAS / cuBLASLt GEMM call through ctypes, and what it depends on.

Run from the repository root:  PYTHONPATH=. python3 tools/probes/cublas_call_cost.py
BF16 256^3 (the GPU takes a few microseconds; the host sets the pace). Each way runs 200
calls untimed, then 2000 timed with time.perf_counter up to the last call queued (host) and
through a final synchronize (total), in microseconds per call:

  session handle         cublasGemmEx on the Session's handle, bound to its stream (the bench's path)
  caller-stream handle   the handle kept for callers' streams (a Plan's path), bound once
  + workspace            the same after cublasSetWorkspace (32 MiB of our own): cuBLAS then
                         uses that buffer instead of its default one
  cuBLASLt               cublasLtMatmul with the measured algorithm (LtMatmul.run)
  torch.mm(out=)         where torch is installed, on tensors of the same shape
  raw GemmEx, ...        where torch is installed, BF16 D: cublasGemmEx called straight through
                         ctypes with its arguments converted once (no wrapper), on our caller-
                         stream handle and on torch's own handle (torch.cuda.current_blas_handle,
                         torch's stream), beside torch.mm(out=) into the same BF16 D: what the
                         cuBLAS call itself costs on each handle
"""

from __future__ import annotations

import time

from gemm_driver import kernels, precision
from gemm_driver.case import PreparedCase
from gemm_driver.cuda import cublas
from gemm_driver.cuda.memory import DeviceBuffer
from gemm_driver.problem import GemmProblem
from gemm_driver.session import Session

CALLS, WARMUP, SIDE = 2000, 200, 256


def per_call(run, sync) -> tuple[float, float]:
    for _ in range(WARMUP):
        run()
    sync()
    start = time.perf_counter()
    for _ in range(CALLS):
        run()
    host = time.perf_counter() - start
    sync()
    total = time.perf_counter() - start
    return host / CALLS * 1e6, total / CALLS * 1e6


def raw_gemm_ex_rows(torch, session, a, b, c) -> list[tuple[str, float, float]]:
    """cublasGemmEx with BF16 D into c (a, b, c: torch BF16 tensors), converted once and called
    with no wrapper, on our caller-stream handle bound to torch's stream and on torch's handle;
    then torch.mm(out=c) again, for the same D."""
    types = precision.gemm_types("bf16", "bf16")
    arguments = cublas.gemm_ex_arguments(SIDE, SIDE, SIDE, 1.0, a.data_ptr(), SIDE, b.data_ptr(), SIDE, 0.0,
                                         c.data_ptr(), SIDE, types)
    ours = session.cublas_for_other_streams()
    ours.use_stream(torch.cuda.current_stream().cuda_stream)
    ours.use_math_mode(int(types.math_mode))
    rows = []
    for name, handle in (("raw GemmEx, our handle", ours.ptr), ("raw GemmEx, torch's handle",
                                                                 torch.cuda.current_blas_handle())):
        rows.append((name, *per_call(cublas.raw_gemm_ex(handle, arguments), torch.cuda.synchronize)))
    rows.append(("torch.mm(out=), BF16 D", *per_call(lambda: torch.mm(a, b, out=c), torch.cuda.synchronize)))
    return rows


def main() -> None:
    problem = GemmProblem(SIDE, SIDE, SIDE)
    with Session() as session, PreparedCase.random(problem, "bf16", 1) as case:
        sync = session.stream.synchronize
        rows = []
        launch = case.launcher(session, "cublas_bf16")
        rows.append(("session handle", *per_call(launch, sync)))
        other = session.on(session.stream)
        provider = kernels.get("cublas_bf16")
        callers = provider.launcher(provider, other, problem, *case.device())
        rows.append(("caller-stream handle", *per_call(callers.enqueue, sync)))
        workspace = DeviceBuffer(32 << 20)
        for handle in (session.cublas(), session.cublas_for_other_streams()):  # after their set_stream: it resets
            handle._lib.cublasSetWorkspace_v2(handle.ptr, workspace.ptr, workspace.nbytes)
        rows.append(("session handle + workspace", *per_call(launch, sync)))
        rows.append(("caller-stream handle + workspace", *per_call(callers.enqueue, sync)))
        lt = case.launcher(session, "cublaslt_bf16")
        rows.append(("cuBLASLt", *per_call(lt, sync)))
        try:
            import torch

            a, b = (torch.randn(SIDE, SIDE, device="cuda", dtype=torch.bfloat16) for _ in range(2))
            c = torch.empty(SIDE, SIDE, device="cuda", dtype=torch.bfloat16)
            rows.append(("torch.mm(out=)", *per_call(lambda: torch.mm(a, b, out=c), torch.cuda.synchronize)))
            rows += raw_gemm_ex_rows(torch, session, a, b, c)
        except Exception as exc:  # noqa: BLE001 - torch is optional
            print(f"torch: {type(exc).__name__}: {exc}")
        print(f"BF16 {SIDE}^3, {CALLS} calls, microseconds per call")
        print(f"{'way':34} {'host':>8} {'total':>8}")
        for name, host, total in rows:
            print(f"{name:34} {host:8.1f} {total:8.1f}")
        workspace.close()


if __name__ == "__main__":
    main()
