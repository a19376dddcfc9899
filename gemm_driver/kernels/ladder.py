"""The register-blocking rungs of the FP32 ladder: 1-D and 2-D blocktiling, vectorised,
bank-conflict-free and double-buffered (one .cu file each under cu/)."""

from __future__ import annotations

SPECS = ()
