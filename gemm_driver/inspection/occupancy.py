"""Theoretical occupancy: how many blocks of a kernel fit on one SM at once.

The same arithmetic as CUDA's occupancy calculator (cuda_occupancy.h), with the per-arch
limits of cuda/arch_limits.py (the CUDA C++ Programming Guide's compute-capability table),
so it runs with no GPU. Blocks per SM is the smallest of four limits:

- warps:     max_warps_per_sm // ceil(threads / 32)
- blocks:    max_blocks_per_sm
- registers: registers go to warps in units of 256: a warp takes
             ceil(regs_per_thread * 32 / 256) * 256 of them, out of each of the SM's 4
             sub-partitions (registers_per_sm / 4 each), so
             warps_that_fit = (registers_per_sm / 4 // regs_per_warp) * 4, then
             // warps_per_block. A block needing more than 64K registers does not launch.
- shared:    (static + dynamic + reserved) rounded up to the allocation unit, divided into
             the SM's shared memory at its largest carveout. sm_80 and newer reserve 1 KiB
             per block for the system.
- barriers:  an SM holds a pool of named barriers; a kernel that uses B of them (the cubin
             says how many: ptxas reserves all 16 when a barrier id is computed at run time)
             gets pool // B blocks. The pool is 64 on sm_90, as measured against the H100's
             driver (16 barriers: 4 blocks); not modelled for other architectures.

occupancy = blocks_per_sm * warps_per_block / max_warps_per_sm.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..cuda.arch_limits import WARP, ArchLimits, limits

__all__ = ["ArchLimits", "Occupancy", "limits", "occupancy"]


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    warps_per_block: int
    max_warps_per_sm: int
    limited_by: str  # "warps", "blocks", "registers", "shared memory", "barriers" (ties: the first), "does not fit"

    @property
    def warps_per_sm(self) -> int:
        return self.blocks_per_sm * self.warps_per_block

    @property
    def fraction(self) -> float:
        return self.warps_per_sm / self.max_warps_per_sm


def occupancy(arch: str, threads: int, registers: int, shared_bytes: int, dynamic_shared_bytes: int = 0,
              barriers: int = 0) -> Occupancy:
    """Theoretical occupancy of blocks of ``threads`` threads using ``registers`` per thread,
    ``shared_bytes`` static plus ``dynamic_shared_bytes`` dynamic shared memory and
    ``barriers`` named barriers."""
    lim = limits(arch)
    warps = -(-threads // WARP)
    regs_per_warp = _round_up(registers * WARP, lim.register_granularity)
    shared = shared_bytes + dynamic_shared_bytes
    smem_per_block = _round_up(shared + lim.reserved_shared_per_block, lim.shared_granularity)
    fits = (registers <= lim.max_registers_per_thread
            and regs_per_warp * _round_up(warps, lim.sub_partitions) <= lim.registers_per_block
            and shared <= lim.max_shared_per_block)
    by = {
        "warps": lim.max_warps_per_sm // warps,
        "blocks": lim.max_blocks_per_sm,
        "registers": (lim.registers_per_sm // lim.sub_partitions // regs_per_warp) * lim.sub_partitions // warps
        if regs_per_warp else lim.max_blocks_per_sm,
        "shared memory": lim.shared_per_sm // smem_per_block if smem_per_block else lim.max_blocks_per_sm,
        "barriers": lim.barriers_per_sm // barriers if barriers and lim.barriers_per_sm else lim.max_blocks_per_sm,
    }
    limited_by = min(by, key=by.get) if fits else "does not fit"
    return Occupancy(by[limited_by] if fits else 0, warps, lim.max_warps_per_sm, limited_by)


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit
