"""Per-call cost of plan(), gemm() and the plan's cached Launch for several kernels at 256^3,
beside torch and a bare cublasGemmEx through ctypes: where the microseconds of a call go
(results/h100-80gb-hbm3/api-overhead-kernels.txt). Needs a GPU and PyTorch; no options.

Each row is timed by tools/api_overhead.py's loop (200 calls of warm-up, 3000 timed, one
synchronize at the end): "host" before that synchronize, "total" after it.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # the repository, not tools/, first (as in api_overhead.py)
sys.path.append(str(ROOT / "tools"))

import ctypes  # noqa: E402

from _toolkit import Parser, run  # noqa: E402
from api_overhead import time_calls  # noqa: E402

PROG = Path(__file__).name
SIZE, CALLS, WARMUP = 256, 3000, 200
KERNELS = {"float32": ("cublas", "smem_tiled", "autotuned"), "bfloat16": ("cublas_bf16", "mma_sync_bf16", "hopper_bf16")}
MATH_MODES = (0x0, 0x2)  # cublasMath_t: CUBLAS_DEFAULT_MATH, CUBLAS_PEDANTIC_MATH
COMPUTE_TYPES = {68: "COMPUTE_32F", 69: "COMPUTE_32F_PEDANTIC"}


def main(argv=None) -> int:
    Parser(prog=PROG, description=__doc__.split("\n\n")[0]).parse_args(argv)
    from gemm_driver.cuda.errors import GpuUnavailableError

    try:
        import torch
    except ImportError as exc:
        raise GpuUnavailableError(f"PyTorch with CUDA is needed too ({exc})") from None
    if not torch.cuda.is_available():
        raise GpuUnavailableError("PyTorch sees none (torch.cuda.is_available() is False)")
    import gemm_driver

    torch.backends.cuda.matmul.allow_tf32 = False

    def row(label, call) -> None:
        host, total = time_calls(torch, call, CALLS, WARMUP)
        print(f"{label:52s} host {host:6.1f}  total {total:6.1f} us")

    n = SIZE
    for dtype_name, names in KERNELS.items():
        dtype = getattr(torch, dtype_name)
        a, b = torch.randn(n, n, device="cuda", dtype=dtype), torch.randn(n, n, device="cuda", dtype=dtype)
        out = torch.empty(n, n, device="cuda")
        print(dtype)
        for kernel in names:
            plan = gemm_driver.plan(n, n, n, dtype=dtype, kernel=kernel)
            row(f"plan {kernel}", lambda: plan(a, b, out))
            row(f"gemm(out=) {kernel}", lambda: gemm_driver.gemm(a, b, out=out, kernel=kernel))
            row(f"  cached Launch alone {kernel}", next(iter(plan._launches.values())))
        if dtype == torch.float32:
            row("torch.mm(a,b,out=out)", lambda: torch.mm(a, b, out=out))
        else:
            row("torch.mm(a,b,out_dtype=f32)", lambda: torch.mm(a, b, out_dtype=torch.float32))
        row("torch.matmul", lambda: torch.matmul(a, b))
    bare_cublas(torch, n, row)
    return 0


def bare_cublas(torch, n: int, row) -> None:
    """cublasGemmEx and cublasSgemm through ctypes on a fresh handle bound to torch's stream,
    every argument converted beforehand: the floor of a cuBLAS call from Python."""
    from gemm_driver.cuda import cublas

    handle = cublas.CublasHandle()
    handle.set_stream(torch.cuda.current_stream().cuda_stream)
    lib = handle._lib
    a, b, out = (torch.randn(n, n, device="cuda") for _ in range(3))
    alpha, beta = ctypes.byref(ctypes.c_float(1)), ctypes.byref(ctypes.c_float(0))
    pointers = (b.data_ptr(), a.data_ptr(), out.data_ptr())  # the row-major swap: B first
    for mode in MATH_MODES:
        lib.cublasSetMathMode(handle.ptr, mode)
        for compute, compute_name in COMPUTE_TYPES.items():
            args = (handle.ptr, 0, 0, n, n, n, alpha, pointers[0], 0, n, pointers[1], 0, n, beta, pointers[2], 0, n,
                    compute, -1)
            row(f"raw cublasGemmEx mathmode={mode:#x} {compute_name}", lambda: lib.cublasGemmEx(*args))
    sgemm = lib.cublasSgemm_v2
    sgemm.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                      ctypes.c_void_p, ctypes.c_int]
    lib.cublasSetMathMode(handle.ptr, 0)
    args = (handle.ptr, 0, 0, n, n, n, alpha, pointers[0], n, pointers[1], n, beta, pointers[2], n)
    row("raw cublasSgemm_v2", lambda: sgemm(*args))


if __name__ == "__main__":
    sys.exit(run(main, PROG))
