"""The Hopper family (cu/hopper/, sm_90a): wgmma + TMA rungs in BF16, FP16 and TF32."""

from __future__ import annotations

SPECS: tuple = ()
