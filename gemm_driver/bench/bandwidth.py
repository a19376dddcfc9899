"""The GPU's measured DRAM bandwidth: what a memory-bound GEMM (small M) is judged against.

A datasheet's bandwidth is not reachable (the H100 SXM's 3.35 TB/s reads about 3.0 in a
copy), so the corpus summary uses a measured one: device-to-device copies of a buffer far
larger than L2, timed with events, counting each byte read and written once.
"""

from __future__ import annotations

from ..cuda.driver import Context, DeviceBuffer, Event, Stream, api
from ..cuda.errors import check

COPY_BYTES = 1 << 30  # 1 GiB each way: 20x the H100's 50 MiB L2
COPIES = 10


def copy_bandwidth_tbs(ordinal: int = 0, nbytes: int = COPY_BYTES, copies: int = COPIES) -> float:
    """TB/s of (read + write) bytes over the best of ``copies`` timed copies, after one untimed."""
    with Context(ordinal), DeviceBuffer(nbytes) as src, DeviceBuffer(nbytes) as dst, Stream() as stream, \
            Event() as start, Event() as end:
        src.memset32(0x3F800000, stream=stream)  # 1.0f: the contents do not matter to a copy
        best = float("inf")
        for i in range(copies + 1):
            start.record(stream)
            check(api().cuMemcpyDtoDAsync(dst.ptr, src.ptr, nbytes, stream.handle), "cuMemcpyDtoDAsync")
            end.record(stream)
            end.synchronize()
            if i:
                best = min(best, Event.elapsed_ms(start, end))
        return 2 * nbytes / (best * 1e-3) / 1e12
