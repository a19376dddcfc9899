"""The sm_80+ tensor-core family (cu/tensor/): WMMA and mma.sync rungs in BF16, FP16 and TF32."""

from __future__ import annotations

SPECS: tuple = ()
