"""Kernels that fault or hang, for the fault-isolation tests (tests/kernels/faulty.cu).

Loaded only through ``GEMM_DRIVER_EXTRA_KERNELS=tests/kernels/faulty_specs.py``: the
registry (gemm_driver/kernels/__init__.py) then lists them beside the real kernels, in
this process and in the worker processes it starts.
"""

from pathlib import Path

from gemm_driver.kernels.spec import KernelSpec, ceil_div

SOURCE = str(Path(__file__).with_name("faulty.cu"))

SPECS = (
    KernelSpec(
        name="faults_illegal_address",
        description="stores far outside any allocation (test kernel: a sticky CUDA error)",
        source=SOURCE,
        entry="sgemm_illegal_address",
        block=lambda t: (32, 1, 1),
        grid=lambda p, t: (1, 1, 1),
        in_ladder=False,
    ),
    KernelSpec(
        name="hangs_forever",
        description="never returns (test kernel: the watchdog)",
        source=SOURCE,
        entry="sgemm_spins_forever",
        block=lambda t: (32, 1, 1),
        grid=lambda p, t: (ceil_div(p.m, 32), 1, 1),
        in_ladder=False,
    ),
)
