"""Per-architecture hardware limits, for work done without a GPU (compiling, checking rules,
computing occupancy): one table, from the CUDA C++ Programming Guide's compute-capability
table. With a GPU, its own Device attributes are the truth (``Device.sm_count``,
``Device.max_shared_per_block_optin``): launch recipes size grids from them and the Session
refuses a kernel whose shared memory the GPU cannot give.
"""

from __future__ import annotations

from dataclasses import dataclass

from .nvrtc import parse_arch

WARP = 32
KIB = 1024

# The SM count of the GPU the tuned rules were measured on (H100 SXM and H200: 132 SMs).
# ``choose`` sees a GPU's name, not its Device, so its grid-fullness thresholds use this count
# on every GPU; launch recipes size their grids from the Device's own count.
MEASURED_SM_COUNT = 132


@dataclass(frozen=True)
class ArchLimits:
    max_threads_per_sm: int
    max_blocks_per_sm: int
    shared_per_sm: int  # bytes, at the largest shared-memory carveout
    max_shared_per_block: int  # bytes, with the opt-in attribute
    reserved_shared_per_block: int
    shared_granularity: int
    registers_per_sm: int = 64 * KIB
    registers_per_block: int = 64 * KIB
    max_registers_per_thread: int = 255
    register_granularity: int = 256  # registers, per warp
    sub_partitions: int = 4
    barriers_per_sm: int | None = None  # the named-barrier pool; None: not modelled

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // WARP


LIMITS = {
    75: ArchLimits(1024, 16, 64 * KIB, 64 * KIB, 0, 256),
    80: ArchLimits(2048, 32, 164 * KIB, 163 * KIB, KIB, 128),
    86: ArchLimits(1536, 16, 100 * KIB, 99 * KIB, KIB, 128),
    89: ArchLimits(1536, 24, 100 * KIB, 99 * KIB, KIB, 128),
    90: ArchLimits(2048, 32, 228 * KIB, 227 * KIB, KIB, 128, barriers_per_sm=64),
    100: ArchLimits(2048, 32, 228 * KIB, 227 * KIB, KIB, 128),
}

# The most dynamic shared memory any GPU of the table gives one block (sm_90's opt-in 227 KiB):
# the bound a kernel's rules check without a GPU. A smaller GPU is checked against its own
# Device attribute when the kernel is loaded there.
MAX_SHARED_PER_BLOCK = max(limit.max_shared_per_block for limit in LIMITS.values())


def limits(arch: str) -> ArchLimits:
    """The table row for ``arch`` ('sm_90a' uses sm_90's); ValueError for one not in it."""
    number, _ = parse_arch(arch)
    if number not in LIMITS:
        known = ", ".join(f"sm_{n}" for n in LIMITS)
        raise ValueError(f"no occupancy limits known for {arch}; known: {known}")
    return LIMITS[number]
