"""The Hopper family (cu/hopper/, sm_90a): wgmma + TMA rungs in BF16, FP16 and TF32.

Per precision, in ladder order: ``wgmma_tma`` (rung 1), ``warp_specialized`` (2),
``persistent`` (3), ``cluster`` (4) and the last rung, ``hopper_bf16`` / ``hopper_fp16``
(any_shape.cu: split-K, packing, staged epilogue, swapped roles; tunables chosen per shape)
or ``hopper_tf32`` (tf32_register_a.cu). ``geometry`` holds the kernels' host contract as
pure numbers, ``recipe`` the launch recipe (packing, tensor maps, grid, scratch) they share,
``rungs`` the specs. ``fp8`` adds ``hopper_fp8`` (fp8.cu): the last rung's schedule on e4m3
operands with tensor, row or block scales.
"""

from __future__ import annotations

from . import fp8, rungs
from .rungs import choose_any_shape

SPECS = (*rungs.SPECS, *fp8.SPECS)

__all__ = ["SPECS", "choose_any_shape"]
