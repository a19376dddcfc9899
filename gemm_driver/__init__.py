"""gemm_driver: GEMM kernels on NVIDIA GPUs from the naive kernel to cuBLAS speed, measured.

``gemm_driver.gemm(A, B, C, alpha=..., beta=..., kernel=...)`` runs one product, on NumPy
arrays or in place on device arrays (torch, CuPy, JAX, Numba); ``gemm_driver.plan(m, n, k,
dtype=..., kernel=...)`` resolves one configuration once for many launches;
``python -m gemm_driver`` lists, compiles, verifies and benchmarks the kernels.
"""

from .api import gemm, plan
from .plans import Plan
from .problem import GemmProblem
from .session import Session

__version__ = "0.1.0"
__all__ = ["GemmProblem", "Plan", "Session", "gemm", "plan", "__version__"]
