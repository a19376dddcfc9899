"""Probe: what cuBLASLt's FP8 scale modes and torch._scaled_mm's block scales need on this GPU.

Run from the repository root:  PYTHONPATH=. python3 tools/probes/fp8_scales.py  (output: results/h100-80gb-hbm3/probe-fp8-scales.txt)
One line per attempt; every attempt is in its own try/except. Under 60 s on an H100.

Sections
  H  cuBLASLt heuristic only (no data): scale modes (cuBLASLt's A = our B, its B = our A) x
     scale pointers NULL / stand-in x D FP32 / BF16 (C = D type, or BF16 C with FP32 D) x FAST_ACCUM.
     Decides: is a NULL scale pointer the INVALID_VALUE?  which mode pairs exist?  D / C types?
  R  cuBLASLt runs against float64 (our scale layouts; for block, B's scales unpadded vs padded
     to 4 per row; a misaligned scale pointer; K not a multiple of 128; M not a multiple of 4).
     Decides: does BLK128x128_32F read rows padded to 4?  alignment / K rules.
  P  The project's provider path (run_case) for each FP8 baseline and shape, as the GPU tests do.
  T  torch._scaled_mm: block scale_b candidates (unpadded; padded memory seen through exact or
     padded strides; scaled_mm v2), row/tensor kernel names (cuBLASLt or CUTLASS), the 16 rule.

Error metric: max |D - ref| / max |ref| over the whole output (NaN counted apart); a wrong scale
layout gives O(1) or NaN, a right one ~1e-3 (BF16 D) or ~1e-5 (FP32 D).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import time
import traceback

os.environ.setdefault("CUBLASLT_LOG_LEVEL", "1")  # cuBLASLt prints its own reason for a refusal

import numpy as np  # noqa: E402

T0 = time.time()


def line(section: str, what: str, result: str) -> None:
    print(f"[{section}] {what:<78} -> {result}", flush=True)


def err(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}"


# --- setup -------------------------------------------------------------------------------
from gemm_driver import Session  # noqa: E402
from gemm_driver import fp8 as F  # noqa: E402
from gemm_driver.cuda import cublaslt as lt  # noqa: E402
from gemm_driver.cuda import cublaslt_binding as bd  # noqa: E402
from gemm_driver.cuda import cublaslt_layout as lay  # noqa: E402
from gemm_driver.cuda.cublas import DataType  # noqa: E402
from gemm_driver.cuda.memory import DeviceBuffer  # noqa: E402

session = Session()
session.context.make_current()
stream = session.stream
print(f"device {session.device.name} cc {session.device.compute_capability}; cuBLASLt {lt.version()} "
      f"at {lt.library_path()}", flush=True)
handle = lt.LtHandle()
workspace = DeviceBuffer(lt.DEFAULT_WORKSPACE_BYTES)
MODE = bd.MATRIX_SCALE
OUT = {"fp32": DataType.CUDA_R_32F, "bf16": DataType.CUDA_R_16BF}


def heuristic(problem, modes, pointers, c_type=None, fast_accum=0, count=8):
    """(status text) of the heuristic for ``problem`` (scaling 'none' descriptors) with scale
    modes (lt-A, lt-B) set by hand, scale pointers None (NULL) or a stand-in, C in c_type."""
    d = lt.MatmulDescriptors(problem)
    extra = None
    try:
        if modes is not None:
            d.desc.set(bd._DESC_A_SCALE_MODE, ctypes.c_int32(MODE[modes[0]]))
            d.desc.set(bd._DESC_B_SCALE_MODE, ctypes.c_int32(MODE[modes[1]]))
        if pointers:
            for attr in (bd._DESC_A_SCALE_POINTER, bd._DESC_B_SCALE_POINTER):
                d.desc.set(attr, ctypes.c_void_p(256))
        d.desc.set(bd._DESC_FAST_ACCUM, ctypes.c_int8(fast_accum))
        c_layout = d.c
        if c_type is not None:
            extra = lay._Layout(c_type, d.c.operand)
            c_layout = extra
        pref = lay._Preference()
        pref.set(bd._PREF_MAX_WORKSPACE_BYTES, ctypes.c_uint64(workspace.nbytes))
        results, returned = (bd.HeuristicResult * count)(), ctypes.c_int()
        try:
            bd._library().cublasLtMatmulAlgoGetHeuristic(handle.ptr, d.desc.ptr, d.first.ptr, d.second.ptr,
                                                         c_layout.ptr, d.c.ptr, pref.ptr, count, results,
                                                         ctypes.byref(returned))
        finally:
            pref.close()
        ok = [r for r in results[: returned.value] if r.state == 0]
        return f"OK {len(ok)} algorithm(s)" if ok else "no algorithm (returned 0)"
    finally:
        if extra is not None:
            extra.close()
        d.close()


def section_h():
    pairs = {"tensor": ("SCALAR_32F", "SCALAR_32F"), "row": ("OUTER_VEC_32F", "OUTER_VEC_32F"),
             "blk(ltA=ourB)/vec(ltB=ourA)": ("BLK128x128_32F", "VEC128_32F"),
             "vec/blk (swapped)": ("VEC128_32F", "BLK128x128_32F"), "vec/vec": ("VEC128_32F", "VEC128_32F"),
             "blk/blk": ("BLK128x128_32F", "BLK128x128_32F")}
    for shape in ((256, 256, 256), (4096, 4096, 4096)):
        for name, modes in pairs.items():
            for out in ("fp32", "bf16"):
                for pointers in (False, True):
                    what = f"{shape} {name:<27} D={out} ptr={'stand-in' if pointers else 'NULL'}"
                    try:
                        q = lt.LtProblem.packed(*shape, "fp8", b_k_major=True)
                        q = lt.LtProblem(*shape, "fp8", q.lda, q.ldb, q.ldc, True, out_dtype=out)
                        line("H", what, heuristic(q, modes, pointers))
                    except Exception as exc:  # noqa: BLE001
                        line("H", what, err(exc))
    for name, modes in (("row", pairs["row"]), ("block", pairs["blk(ltA=ourB)/vec(ltB=ourA)"])):
        q = lt.LtProblem(256, 256, 256, "fp8", 256, 256, 256, True, out_dtype="fp32")
        for what, kwargs in ((f"{name} D=FP32 C=BF16 ptr=stand-in", {"c_type": DataType.CUDA_R_16BF}),
                             (f"{name} D=FP32 FAST_ACCUM=1 ptr=stand-in", {"fast_accum": 1})):
            try:
                line("H", what, heuristic(q, modes, True, **kwargs))
            except Exception as exc:  # noqa: BLE001
                line("H", what, err(exc))
    # the project's own descriptors (stand-in pointers set by MatmulDescriptors)
    for scaling in ("tensor", "row", "block"):
        for out in ("fp32", "bf16"):
            what = f"project LtMatmul 256^3 scaling={scaling} D={out}"
            try:
                q = lt.LtProblem(256, 256, 256, "fp8", 256, 256, 256, True, out_dtype=out, scaling=scaling)
                with lt.LtMatmul(handle, q, workspace=workspace) as mm:
                    line("H", what, f"OK {len(mm.candidates)} candidate(s)")
            except Exception as exc:  # noqa: BLE001
                line("H", what, err(exc))


# --- data --------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def operands(scaling, m, n, k, seed=7):
    """(codes A m x k, codes B n x k, scales A, scales B (logical shapes), float64 reference)."""
    rng = np.random.default_rng(seed)
    xa, xb = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    kb = -(-k // 128)
    # groups of very different magnitude, so a misread scale shows
    xa *= np.repeat(2.0 ** rng.integers(-6, 7, (m, kb)), 128, axis=1)[:, :k]
    xb *= np.repeat(np.repeat(2.0 ** rng.integers(-6, 7, (-(-n // 128), kb)), 128, axis=0), 128, axis=1)[:n, :k]
    ra, rb = F.row_blocks(scaling)
    sa, sb = F.amax_scales(xa, scaling, ra, 0), F.amax_scales(xb, scaling, rb, 1)
    ca, da = F.quantize(xa, sa, ra)
    cb, db = F.quantize(xb, sb, rb)
    return ca, cb, sa, sb, da @ db.T


def upload(array, guard_nan=64):
    """A DeviceBuffer with ``array``'s bytes followed by NaN words (a read past it poisons D)."""
    raw = np.ascontiguousarray(array).view(np.uint8).ravel()
    tail = np.full(guard_nan, 0x7FC00000, np.uint32).view(np.uint8)
    buf = DeviceBuffer(raw.nbytes + tail.nbytes)
    buf.upload(np.concatenate([raw, tail]))
    return buf


def judge(out, ref):
    """(NaN count, max relative error, text)."""
    nan = int(np.isnan(out).sum())
    finite = np.where(np.isnan(out), 0.0, out)
    rel = float(np.max(np.abs(finite - ref)) / max(np.max(np.abs(ref)), 1e-300))
    cols = np.where(np.isnan(out).any(axis=0))[0]
    where = f" in columns {cols.min()}..{cols.max()}" if nan else ""
    return nan, rel, f"max rel err {rel:.2e}, NaN {nan}{where}"


def measure(out, ref):
    return judge(out, ref)[2]


def read_d(buf, m, n, out):
    if out == "fp32":
        return buf.download(np.empty((m, n), np.float32)).astype(np.float64)
    raw = buf.download(np.empty((m, n), np.uint16))
    return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def lt_run(scaling, m, n, k, out, variant="ours"):
    ca, cb, sa, sb, ref = operands(scaling, m, n, k)
    A, B = upload(ca), upload(cb)
    C = DeviceBuffer(m * n * (4 if out == "fp32" else 2) + 256)
    kept = []
    try:
        dev_a, dev_b = F.device_scales(scaling, 0, sa), F.device_scales(scaling, 1, sb)
        SA, SB = upload(dev_a), upload(dev_b)
        kept += [SA, SB]
        pa, pb = SA.ptr, SB.ptr
        if variant == "padded":
            P = lt.padded_block_scales(SB.ptr, dev_b.shape[0], dev_b.shape[1], dev_b.shape[1], stream)
            kept.append(P)
            pb = P.ptr
        elif variant == "A scales 4-byte aligned":
            S4 = DeviceBuffer(dev_a.nbytes + 16 + 256)
            S4.upload(np.ascontiguousarray(dev_a).view(np.uint8).ravel(), offset=4)
            kept.append(S4)
            pa = S4.ptr + 4
        q = lt.LtProblem(m, n, k, "fp8", k, k, n, True, out_dtype=out, scaling=scaling)
        with lt.LtMatmul(handle, q, workspace=workspace) as mm:
            verdicts = []
            for index in range(len(mm.candidates)):
                C.memset32(0x7FC07FC0)
                mm.run(A, B, C, stream, 1.0, 0.0, candidate=index, scales=(pa, pb))
                stream.synchronize()
                verdicts.append(judge(read_d(C, m, n, out), ref))
            return f"{len(mm.candidates)} candidates, worst: {max(verdicts)[2]}"
    finally:
        for b in (A, B, C, *kept):
            b.close()


def section_r():
    shapes = [(256, 256, 256), (256, 384, 384), (128, 7168, 2048), (256, 256, 512), (98, 200, 272),
              (1000, 512, 384)]
    for scaling in ("tensor", "row", "block"):
        for shape in shapes:
            for out in (("fp32", "bf16") if scaling == "block" else ("fp32",)):
                variants = ("ours", "padded") if scaling == "block" else ("ours",)
                for variant in variants:
                    what = f"{scaling:<6} {str(shape):<16} D={out} B scales {variant}"
                    try:
                        line("R", what, lt_run(scaling, *shape, out, variant))
                    except Exception as exc:  # noqa: BLE001
                        line("R", what, err(exc))
    for scaling in ("row", "block"):
        what = f"{scaling:<6} (256, 256, 512) D=fp32 A scales 4-byte aligned"
        try:
            line("R", what, lt_run(scaling, 256, 256, 512, "fp32", "A scales 4-byte aligned"))
        except Exception as exc:  # noqa: BLE001
            line("R", what, err(exc))


def section_p():
    from gemm_driver.case import PreparedCase, run_case
    from gemm_driver.problem import GemmProblem

    modes = [("cublaslt_fp8", "tensor"), ("cublaslt_fp8_row", "row"), ("cublaslt_fp8_block", "block"),
             ("torch_fp8", "tensor"), ("torch_fp8", "row"), ("torch_fp8", "block")]
    for name, scaling in modes:
        for shape in ((256, 256, 256), (1000, 520, 384), (256, 384, 384)):
            for out in ("fp32", "bf16"):
                what = f"{name:<18} {scaling:<6} {str(shape):<16} D={out}"
                try:
                    problem = GemmProblem(*shape, trans_b=True, out_dtype=out, scaling=scaling)
                    with PreparedCase.random(problem, "fp8", [11, shape[0]], guard=1, scale_draw=(4, 0)) as case:
                        outcome = run_case(session, name, case)
                    v = outcome.verification
                    extra = f" err/bound {v.max_error_ratio:.3g}" if v is not None else ""
                    line("P", what, f"{outcome.status}{extra} {outcome.detail or outcome.message or ''}"[:220])
                except Exception as exc:  # noqa: BLE001
                    line("P", what, err(exc))


def section_t():
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        line("T", "import torch", err(exc))
        return
    line("T", "torch", f"{torch.__version__} CUDA {torch.version.cuda} "
                       f"v2={hasattr(torch.nn.functional, 'scaled_mm')} _scaled_mm_v2={hasattr(torch, '_scaled_mm_v2')}")
    dev = "cuda"
    torch.cuda.init()

    def maps():
        with open("/proc/self/maps") as f:
            return sorted({ln.split()[-1] for ln in f if "cublasLt" in ln})
    line("T", "libcublasLt mapped in this process", ", ".join(maps()))

    def case(m, n, k, scaling="block"):
        ca, cb, sa, sb, ref = operands(scaling, m, n, k)
        A = torch.from_numpy(ca).to(dev).view(torch.float8_e4m3fn)
        B = torch.from_numpy(cb).to(dev).view(torch.float8_e4m3fn).t()  # K x N column-major
        return A, B, sa, sb, ref

    def run(A, B, scale_a, scale_b, out=torch.float32, fn=None):
        C = fn() if fn is not None else torch._scaled_mm(A, B, scale_a, scale_b, out_dtype=out, use_fast_accum=False)
        torch.cuda.synchronize()
        return C.double().cpu().numpy()

    for (m, n, k) in ((256, 256, 256), (256, 384, 384), (128, 7168, 2048), (256, 256, 128), (256, 768, 512)):
        kb, nb = -(-k // 128), -(-n // 128)
        L4 = -(-kb // 4) * 4
        A, B, sa, sb, ref = case(m, n, k)
        scale_a = torch.from_numpy(F.device_scales("block", 0, sa)).to(dev).t()  # (M, kb) strides (1, M)
        guard = torch.full((nb * L4 + 64,), float("nan"), device=dev)
        ours = guard.clone()
        ours[: nb * kb] = torch.from_numpy(np.ascontiguousarray(sb, np.float32).ravel()).to(dev)
        padded = torch.zeros(nb, L4, device=dev)
        padded[:, :kb] = torch.from_numpy(np.asarray(sb, np.float32)).to(dev)
        cands = {
            "unpadded mem, view (kb,nb) strides (1,kb)": ours.as_strided((kb, nb), (1, kb)),
            "padded mem,   view (kb,nb) strides (1,kb)": padded.view(-1).as_strided((kb, nb), (1, kb)),
            "padded mem,   view (kb,nb) strides (1,L4)": padded.view(-1).as_strided((kb, nb), (1, L4)),
            "padded mem,   view (L4,nb) strides (1,L4)": padded.t(),
        }
        for name, scale_b in cands.items():
            what = f"_scaled_mm block {(m, n, k)} kb={kb} nb={nb} {name}"
            try:
                line("T", what, measure(run(A, B, scale_a, scale_b), ref))
            except Exception as exc:  # noqa: BLE001
                line("T", what, err(exc))
        what = f"F.scaled_mm (v2) block {(m, n, k)} scale_b padded (L4,nb) strides (1,L4)"
        try:
            fn_ = torch.nn.functional
            Sc = getattr(fn_, "ScalingType", None) or getattr(fn_, "_ScalingType", None)
            if Sc is None:
                from torch.nn.functional import ScalingType as Sc  # noqa: N813
            line("T", what, measure(run(A, B, None, None, fn=lambda: torch.nn.functional.scaled_mm(
                A, B, scale_a, Sc.BlockWise1x128, padded.t(), Sc.BlockWise128x128, output_dtype=torch.float32)), ref))
        except Exception as exc:  # noqa: BLE001
            line("T", what, err(exc))

    # which kernel runs tensor / row scaling (cuBLASLt: nvjet/sm90_xmma; CUTLASS: cutlass)
    for scaling in ("tensor", "row", "block"):
        what = f"kernel names, {scaling} 1024^3 BF16 out"
        try:
            A, B, sa, sb, ref = case(1024, 1024, 1024, scaling)
            if scaling == "tensor":
                s_a, s_b = torch.tensor(float(sa[0, 0]), device=dev), torch.tensor(float(sb[0, 0]), device=dev)
            elif scaling == "row":
                s_a = torch.from_numpy(sa).to(dev)
                s_b = torch.from_numpy(sb).to(dev).t()
            else:
                s_a = torch.from_numpy(F.device_scales("block", 0, sa)).to(dev).t()
                s_b = torch.from_numpy(np.ascontiguousarray(sb)).to(dev).t()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                C = torch._scaled_mm(A, B, s_a, s_b, out_dtype=torch.bfloat16, use_fast_accum=False)
                torch.cuda.synchronize()
            names = sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
            line("T", what, f"{measure(C.double().cpu().numpy(), ref)}; kernels: {'; '.join(n[:90] for n in names)}")
        except Exception as exc:  # noqa: BLE001
            line("T", what, err(exc))

    what = "_scaled_mm tensor 1000x520x384 (N % 16 != 0)"
    try:
        A, B, sa, sb, ref = case(1000, 520, 384, "tensor")
        one = torch.tensor(1.0, device=dev)
        line("T", what, measure(run(A, B, one, one), ref))
    except Exception as exc:  # noqa: BLE001
        line("T", what, err(exc))


for name, fn in (("H", section_h), ("R", section_r), ("T", section_t), ("P", section_p)):
    t = time.time()
    try:
        fn()
    except Exception:  # noqa: BLE001
        print(f"[{name}] section crashed:\n{traceback.format_exc()}", flush=True)
    print(f"[{name}] section took {time.time() - t:.1f} s", flush=True)
print(f"total {time.time() - T0:.1f} s", flush=True)
sys.stdout.flush()
os._exit(0)
