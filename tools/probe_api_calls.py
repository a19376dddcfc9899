"""Per-call cost of plan(), gemm() and the plan's cached Launch for several kernels at 256^3,
beside torch and a bare cublasGemmEx through ctypes: where the microseconds of a call go
(results/h100-80gb-hbm3/api-overhead-kernels.txt). Needs a GPU and PyTorch; no options.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # the repository, not tools/, first (as in api_overhead.py)
sys.path.append(str(ROOT / "tools"))

import ctypes  # noqa: E402
import time  # noqa: E402

from _toolkit import Parser, run  # noqa: E402

PROG = "probe_api_calls.py"


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
    from gemm_driver.cuda import cublas

    torch.backends.cuda.matmul.allow_tf32 = False
    n = 256
    def timeit(label, fn, calls=3000):
        for _ in range(200): fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(calls): fn()
        host = (time.perf_counter() - t) / calls * 1e6
        torch.cuda.synchronize()
        print(f"{label:52s} host {host:6.1f}  total {(time.perf_counter() - t) / calls * 1e6:6.1f} us")
    for dt, k_ours in ((torch.float32, ("cublas", "smem_tiled", "autotuned")), (torch.bfloat16, ("cublas_bf16", "mma_sync_bf16", "hopper_bf16"))):
        a = torch.randn(n, n, device="cuda", dtype=dt); b = torch.randn(n, n, device="cuda", dtype=dt)
        out = torch.empty(n, n, device="cuda")
        print(dt)
        for kern in k_ours:
            p = gemm_driver.plan(n, n, n, dtype=dt, kernel=kern)
            timeit(f"plan {kern}", lambda: p(a, b, out))
            timeit(f"gemm(out=) {kern}", lambda: gemm_driver.gemm(a, b, out=out, kernel=kern))
            launch = next(iter(p._launches.values()))
            timeit(f"  cached Launch alone {kern}", launch)
        if dt == torch.float32:
            timeit("torch.mm(a,b,out=out)", lambda: torch.mm(a, b, out=out))
        else:
            timeit("torch.mm(a,b,out_dtype=f32)", lambda: torch.mm(a, b, out_dtype=torch.float32))
        timeit("torch.matmul", lambda: torch.matmul(a, b))
    # raw cuBLAS through ctypes: handle on torch's current stream, args pre-converted
    h = cublas.CublasHandle()
    h.set_stream(torch.cuda.current_stream().cuda_stream)
    a = torch.randn(n, n, device="cuda"); b = torch.randn(n, n, device="cuda"); out = torch.empty(n, n, device="cuda")
    al, be = ctypes.c_float(1), ctypes.c_float(0)
    f = h._lib.cublasGemmEx
    for mode in (0, 2):  # CUBLAS_DEFAULT_MATH, CUBLAS_PEDANTIC_MATH
        try:
            h._lib.cublasSetMathMode(h.ptr, mode)
        except Exception as e:
            print("mode", mode, e); continue
        for ct, label in ((68, "COMPUTE_32F"), (69, "COMPUTE_32F_PEDANTIC")):
            args = (h.ptr, 0, 0, n, n, n, ctypes.byref(al), b.data_ptr(), 0, n, a.data_ptr(), 0, n, ctypes.byref(be), out.data_ptr(), 0, n, ct, -1)
            try:
                timeit(f"raw cublasGemmEx mathmode={mode:#x} {label}", lambda: f(*args))
            except Exception as e:
                print(label, e)
    fs = getattr(h._lib, "cublasSgemm_v2", None)
    if fs is not None:
        fs.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                       ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        h._lib.cublasSetMathMode(h.ptr, 0)
        args = (h.ptr, 0, 0, n, n, n, ctypes.byref(al), b.data_ptr(), n, a.data_ptr(), n, ctypes.byref(be), out.data_ptr(), n)
        timeit("raw cublasSgemm_v2", lambda: fs(*args))
    return 0


if __name__ == "__main__":
    sys.exit(run(main, PROG))
