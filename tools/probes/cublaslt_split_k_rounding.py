"""Probe: cuBLASLt's 16-bit D on odd shapes, where its heuristic may offer split-K algorithms
that add the partial sums in D's type (CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE), rounding D once
per slice. Each case runs through PreparedCase and run_case (autotuned, verified against the
float64 reference); the first part prints the verdict by the host reference checked on the host
or the device and by the device reference, the second the algorithm each pick ran.

Run from the repository root:  PYTHONPATH=. python3 tools/probes/cublaslt_split_k_rounding.py
(results/h100-80gb-hbm3/diag-cublaslt-odd-bf16.txt: before and after the heuristic was asked
for reductions in the compute type only).
"""

from __future__ import annotations

from gemm_driver import Session
from gemm_driver.case import PreparedCase, run_case
from gemm_driver.device_reference import GpuProducts
from gemm_driver.problem import GemmProblem

# (beta, epilogue, kernel, B stored transposed) at 1031x1029x257, alpha 0.75, BF16 D
LINEAR_CASES = [(0.5, "bias_gelu", "cublaslt_bf16", True), (0.5, "bias", "cublaslt_bf16", True),
                (0.0, "bias_gelu", "cublaslt_bf16", True), (0.5, "none", "cublaslt_bf16", True),
                (0.5, "bias_gelu", "cublaslt_bf16", False), (0.5, "bias_gelu", "hopper_bf16", True),
                (0.5, "bias_relu", "cublaslt_bf16", True)]
SHAPES = [(1031, 1029, 257), (1024, 1024, 256), (1024, 1024, 257), (1031, 1029, 256), (1032, 1032, 264)]


def by_reference(session: Session) -> None:
    for beta, epilogue, kernel, trans_b in LINEAR_CASES:
        p = GemmProblem(1031, 1029, 257, 0.75, beta, trans_b=trans_b, out_dtype="bf16", epilogue=epilogue)
        for label, how in [("host ref, host check", dict(check_on_device=False)),
                           ("host ref, device check", dict(check_on_device=True)),
                           ("device ref", dict(products=GpuProducts(session), check_on_device=True))]:
            with PreparedCase.random(p, "bf16", [5], guard=1, **how) as case:
                outcome = run_case(session, kernel, case)
                print(f"beta {beta} {epilogue:9} {kernel:13} tb={int(trans_b)} {label:22}: {outcome.message[:110]}",
                      flush=True)


def by_algorithm(session: Session) -> None:
    for m, n, k in SHAPES:
        for out in ("fp32", "bf16"):
            for kernel in ("cublaslt_bf16", "cublas_bf16"):
                with PreparedCase.random(GemmProblem(m, n, k, out_dtype=out), "bf16", [5], guard=1,
                                         check_on_device=False) as case:
                    outcome = run_case(session, kernel, case)
                    v = outcome.verification
                    print(f"{m}x{n}x{k} out {out} {kernel:13}: {outcome.message[:70]:70} worst/bound "
                          f"{v.max_error_ratio if v else None!s:.6} {outcome.launch.get('algorithm')}", flush=True)


if __name__ == "__main__":
    with Session() as s:
        by_reference(s)
        by_algorithm(s)
