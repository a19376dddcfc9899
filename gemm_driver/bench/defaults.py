"""What ``bench`` runs when it is not told: the quick run, and the whole ladder one flag away.

The quick run (``bench`` alone) shows each precision's best kernel for this GPU beside its
library baselines (cuBLAS, cuBLASLt; torch's matmul runs the same cuBLAS kernels and
stays in the ladder, as its import alone costs the worker seconds) on three shapes: a small square one (launch and fill costs show), a large one
(the tensor cores' throughput) and an odd one (no tile divides it: the bounds and packing
paths). It is meant to finish within a minute and a half on an H100 with a cold compile
cache. The ladder (``bench --ladder`` or ``--kernels all``) runs every kernel and baseline on
the ladder's shapes: that is where the docs' ladder tables come from.
"""

from __future__ import annotations

from typing import Sequence

from .. import kernels
from .. import precision as _precision
from ..kernels.spec import cc_of
from ..cuda.nvrtc import parse_arch

# Per precision, the own kernels worth showing first, best first: the quick run takes the
# first that runs on the GPU (the sm_90a Hopper kernels run on sm_90 only; elsewhere the
# tuned mma.sync kernels, which run from sm_80 on).
BEST_KERNELS = {
    "fp32": ("autotuned",),
    "tf32": ("hopper_tf32", "mma_sync_tuned_tf32"),
    "bf16": ("hopper_bf16", "mma_sync_tuned_bf16"),
    "fp16": ("hopper_fp16", "mma_sync_tuned_fp16"),
    "fp8": ("hopper_fp8",),
}
QUICK_SHAPES = ((1024, 1024, 1024, 1), (4096, 4096, 4096, 1), (4093, 4091, 4099, 1))

LADDER_SIZES = (256, 512, 1024, 2048, 4096)
# (M, N, K) or (M, N, K, batch): odd sizes (no tile divides them), tall-skinny (N far
# below a tile row of blocks: few output tiles, the grid barely fills the GPU), deep K
# (few output tiles, long inner loop: where split-K pays), and a batch of small GEMMs.
LADDER_SHAPES = ((4093, 4091, 4099), (16384, 128, 4096), (1024, 1024, 16384), (256, 256, 256, 64))


def default_shapes() -> list[tuple[int, int, int, int]]:
    """The quick run's shapes, as (M, N, K, batch)."""
    return list(QUICK_SHAPES)


def ladder_shapes() -> list[tuple[int, int, int, int]]:
    return [(s, s, s, 1) for s in LADDER_SIZES] + [(*s, 1)[:4] for s in LADDER_SHAPES]


def default_kernels(dtypes: Sequence[str] | None = None, arch: str = "sm_90") -> list[str]:
    """The quick run's kernels per selected precision (default: all): its baselines (cuBLAS,
    then cuBLASLt where the precision has one), then its best own kernel that runs on ``arch``."""
    cc = cc_of(parse_arch(arch)[0])
    names: list[str] = []
    for prec in _precision.parse_dtypes(dtypes):
        names += _precision.baselines(prec)
        names += [name for name in BEST_KERNELS[prec] if kernels.get(name).runs_on(cc)][:1]
    return names


def ladder_kernels(dtypes: Sequence[str] | None = None) -> list[str]:
    """Per selected precision (default: all): its baselines first (cuBLAS, then cuBLASLt where
    the precision has one), then its kernels in registry order, then its other GPU providers
    that are usable here (batched, CuPy); the CPU baselines of the selected precisions last."""
    names: list[str] = []
    selected = _precision.parse_dtypes(dtypes)
    absent = kernels.absent_baselines()
    for prec in selected:
        bases = _precision.baselines(prec)
        names += bases
        names += [spec.name for spec in kernels.SPECS if spec.precision == prec]
        names += [p.name for p in kernels.PROVIDERS if p.precision == prec and p.kind == "library"
                  and p.name not in bases and p.name not in absent]
    return names + [p.name for p in kernels.PROVIDERS if p.kind == "cpu" and p.precision in selected]
