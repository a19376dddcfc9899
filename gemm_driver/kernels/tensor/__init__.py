"""The sm_80+ tensor-core family (cu/tensor/): WMMA and mma.sync rungs in BF16, FP16 and TF32.

Each precision's ladder, in registry order: ``wmma`` (fragments straight from global
memory), ``wmma_smem`` (shared-memory tiles, cp.async pipeline), ``mma_sync`` (ldmatrix,
swizzled tiles, inline mma.sync; unaligned operands packed first) and ``mma_sync_tuned``
(mma_sync with the configuration tuned per shape on this GPU). TF32 starts at mma_sync.
Names carry the precision (``mma_sync_bf16``), which puts each spec on that precision's
ladder beside its cuBLAS baseline.

``TUNE_SPACES`` maps each tuned kernel to the configurations tools/autotune.py sweeps for
it; the winners go to ``gemm_driver/tuned/<gpu>.<kernel>.json`` (kernels/tuned.py).
"""

from __future__ import annotations

from . import mma_sync, wmma
from ..spec import KernelSpec

HALF = ("bf16", "fp16")
ALL_PRECISIONS = ("bf16", "fp16", "tf32")

SPECS: tuple[KernelSpec, ...] = (
    *(wmma.wmma(p) for p in HALF),
    *(wmma.wmma_smem(p) for p in HALF),
    *(mma_sync.plain(p) for p in ALL_PRECISIONS),
    *(mma_sync.autotuned(p) for p in ALL_PRECISIONS),
)
TUNE_SPACES: dict[str, tuple[dict[str, int], ...]] = {
    f"mma_sync_tuned_{p}": mma_sync.TUNE_SPACE[p] for p in ALL_PRECISIONS}
