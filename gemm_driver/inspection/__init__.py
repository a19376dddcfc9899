"""Inspection of the generated code: PTX, SASS, resources, occupancy and instruction mix.

Everything here works without a GPU: NVRTC compiles for a named architecture and
nvdisasm / cuobjdump (NVIDIA's pip wheels) read the cubin. ``python -m gemm_driver
inspect`` (or ``python tools/inspect.py``) is the command over this package; from Python::

    from gemm_driver import kernels
    from gemm_driver.inspection import kernel_stats
    kernel_stats(kernels.KERNELS["smem_tiled"], "sm_90", {"TILE": 16})
"""

from .occupancy import Occupancy, occupancy
from .report import FIELDS, compile_row, diff, kernel_stats
from .sass import Instruction, Sass, disassemble, main_loop

__all__ = ["FIELDS", "Instruction", "compile_row", "Occupancy", "Sass", "diff", "disassemble", "kernel_stats", "main_loop",
           "occupancy"]
