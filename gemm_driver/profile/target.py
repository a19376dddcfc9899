"""The process Nsight Compute profiles: ``python -m gemm_driver.profile.target REQUEST REPORT``.

REQUEST (JSON, written by command.py) names the kernel, its baseline (or null), the shape,
layout, output type, epilogue and FP8 scaling (``problem_of``), the precision, tunables and
the seed. This process prepares the case once (case.py: fresh
random operands, the float64 reference), verifies the kernel and then the baseline on it,
launches each a few times untimed (module load, cuBLAS's heuristics and the clocks'
ramp stay out of the profile), and only then, between cuProfilerStart and cuProfilerStop
(ncu runs with --profile-from-start off), launches the kernel once, a marker and the
baseline once. cuBLAS's kernel names are its own; the marker (the timing harness's hold
kernel, released, named timing.HOLD_ENTRY) splits the profiled launches into the
kernel's and the baseline's, however many each launches.

REPORT (JSON) says what ran and how it verified; exit status 0 profiled, 1 a side failed
verification, 2 it could not run (the report's "error" says why).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..bench.timing import HOLD_ENTRY, GpuTimer
from ..case import PreparedCase
from ..cuda.driver import api
from ..cuda.errors import check
from ..problem import GemmProblem, layout_flags
from ..session import Session

WARMUP_LAUNCHES = 3


def problem_of(request: dict) -> GemmProblem:
    """The request's problem: its shape, and its layout, output type, epilogue, scaling and FP8
    formats where it names them (nn, FP32, none, none and e4m3 where it does not)."""
    trans_a, trans_b = layout_flags(request.get("layout", "nn"))
    return GemmProblem(request["m"], request["n"], request["k"], trans_a=trans_a, trans_b=trans_b,
                       out_dtype=request.get("out_dtype", "fp32"), epilogue=request.get("epilogue", "none"),
                       scaling=request.get("scaling", "none"), fp8_types=request.get("fp8_types", "e4m3"))


def profile_case(request: dict) -> dict:
    """Verify, warm up, then launch kernel, marker and baseline inside the profiled range."""
    problem = problem_of(request)
    kernel, baseline = request["kernel"], request.get("baseline")
    names = [kernel] + ([baseline] if baseline else [])
    report: dict = {"status": "ok", "marker": HOLD_ENTRY, "verification": {}, "launch": {}}
    with Session() as session, PreparedCase.random(problem, request["precision"], [request["seed"], 0],
                                                   guard=1) as case:
        report["gpu"] = session.device.name
        launches = {}
        for name in names:
            try:
                launch = case.launcher(session, name, request["tunables"] if name == kernel else None)
            except ValueError as exc:  # this kernel cannot run this problem here
                return {**report, "status": "skipped", "error": f"{name}: {exc}"}
            verification = case.check(*case.run(launch))
            report["verification"][name] = verification.as_dict()
            report["launch"][name] = launch.record()
            if not verification.ok:
                return {**report, "status": "FAILED", "error": f"{name} failed verification: {verification.message}"}
            launches[name] = launch
        for launch in launches.values():
            for _ in range(WARMUP_LAUNCHES):
                launch()
        session.synchronize()
        timer = GpuTimer(session.stream, session.arch)
        try:
            check(api().cuProfilerStart(), "cuProfilerStart")
            launches[kernel]()
            if baseline:
                timer.mark()
                launches[baseline]()
            session.synchronize()
            check(api().cuProfilerStop(), "cuProfilerStop")
        finally:
            timer.close()
    return report


def main(argv: list[str] | None = None) -> int:
    request_path, report_path = argv if argv is not None else sys.argv[1:]
    try:
        report = profile_case(json.loads(Path(request_path).read_text()))
    except Exception as exc:  # noqa: BLE001 - the parent reports it in one line
        report = {"status": "error", "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    Path(report_path).write_text(json.dumps(report, indent=1))
    return {"ok": 0, "FAILED": 1}.get(report["status"], 2)


if __name__ == "__main__":
    sys.exit(main())
