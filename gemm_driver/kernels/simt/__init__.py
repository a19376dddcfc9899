"""The FP32 SIMT ladder (cu/simt/, and the first rung in PTX under ptx/): one family of the
registry, its kernels in ladder order.

Each rung is one ``.cu`` file and one KernelSpec: ``first_rungs`` (naive, coalesced,
shared-memory tiled), ``blocktiling`` (1-D and 2-D register blocking, vectorised,
bank-conflict-free, double-buffered) and ``warptiling`` (warptiled, stream_k and autotuned). The
PTX version of the naive kernel is a side branch of the first rung, so it comes last and
is not a rung (``in_ladder=False``).
"""

from __future__ import annotations

from . import blocktiling, first_rungs, warptiling

SPECS = (*first_rungs.FIRST_RUNGS, *blocktiling.SPECS, *warptiling.SPECS, *first_rungs.SIDE_BRANCHES)
