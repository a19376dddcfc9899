"""gemm_driver: GEMM kernels on NVIDIA GPUs from the naive kernel to cuBLAS speed, measured.

``gemm_driver.gemm(A, B, C, alpha=..., beta=..., kernel=...)`` runs one product;
``python -m gemm_driver`` lists, compiles, verifies and benchmarks the kernels.
"""

from .api import gemm
from .problem import GemmProblem
from .session import Session

__version__ = "0.1.0"
__all__ = ["GemmProblem", "Session", "gemm", "__version__"]
