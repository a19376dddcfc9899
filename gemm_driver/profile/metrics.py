"""The metrics the profile command asks ncu for, how they read, and the table's rows.

A short curated set answers "where does the time, and the power, go" for a GEMM: time and
clocks; how busy the SMs, the tensor pipe and the issue slots are, and how many
instructions ran (a kernel that polls executes many that do no math); occupancy; DRAM and
L2 traffic and the L2 hit rate; shared-memory bank conflicts; and the warp-stall reasons,
of which the table shows the largest. Names were checked against ``ncu --query-metrics``
on an H100 (sm_90, Nsight Compute 2025.3): the tensor pipe's active cycles there count
wgmma as well as mma.sync. On another GPU a metric its counters lack is left out and
the output says so (``requested``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

# ncu's base units (--print-units base) and the units the table shows, in SI factors.
_FACTORS = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3,
            "s": 1.0, "second": 1.0, "hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9, "byte": 1.0, "kbyte": 1e3,
            "mbyte": 1e6, "gbyte": 1e9, "mb": 1e6}


@dataclass(frozen=True)
class Metric:
    name: str  # ncu's full name: base.rollup[.submetric]
    label: str
    unit: str  # as the table shows it; dimensioned ones are converted from ncu's unit

    @property
    def base(self) -> str:
        return self.name.split(".")[0]


CURATED = (
    Metric("gpu__time_duration.sum", "duration", "us"),
    Metric("gpc__cycles_elapsed.avg.per_second", "SM clock", "MHz"),
    Metric("dram__cycles_elapsed.avg.per_second", "DRAM clock", "MHz"),
    Metric("sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM throughput", "% of peak"),
    Metric("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", "tensor pipe active", "% of cycles"),
    Metric("sm__inst_executed_pipe_tensor_op_gmma.sum", "wgmma instructions", "warp inst."),
    Metric("sm__inst_executed_pipe_tensor_op_hmma.sum", "mma.sync instructions", "warp inst."),
    Metric("smsp__inst_executed.sum", "instructions executed", "warp inst."),
    Metric("smsp__issue_active.avg.pct_of_peak_sustained_active", "issue slots busy", "% of active cycles"),
    Metric("sm__inst_executed.avg.per_cycle_active", "instructions per active SM cycle", "IPC"),
    Metric("sm__cycles_active.avg", "SM active cycles", "cycles"),
    Metric("sm__warps_active.avg.pct_of_peak_sustained_active", "achieved occupancy", "% of max warps"),
    Metric("smsp__average_warp_latency_per_inst_issued.ratio", "warp cycles per issued instruction", "cycles"),
    Metric("dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM throughput", "% of peak"),
    Metric("dram__bytes_read.sum", "DRAM read", "MB"),
    Metric("dram__bytes_write.sum", "DRAM written", "MB"),
    Metric("lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2 throughput", "% of peak"),
    Metric("lts__t_bytes.sum", "L2 traffic", "MB"),
    Metric("lts__t_sector_hit_rate.pct", "L2 hit rate", "%"),
    Metric("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "shared-memory bank conflicts, loads",
           "conflicts"),
    Metric("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "shared-memory bank conflicts, stores",
           "conflicts"),
)
DURATION = CURATED[0].name
# A row shown as its metric less another: on the H100 (Nsight Compute 2025.3) the hmma pipe's
# instruction count includes wgmma (for a wgmma kernel the two counts were equal:
# results/h100-80gb-hbm3/profile-hopper-bf16-1024.txt), so mma.sync is hmma less gmma there.
LESS = {"sm__inst_executed_pipe_tensor_op_hmma.sum": "sm__inst_executed_pipe_tensor_op_gmma.sum"}
# Warp-stall reasons: the average number of warps stalled for each reason per issue cycle
# (the breakdown of "warp cycles per issued instruction"; Warp State Statistics in ncu).
STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+)_per_issue_active$")
NOT_STALLED = ("selected",)  # the warp that issued: not a stall
TOP_STALLS = 6


def stall_reason(name: str) -> str | None:
    match = STALL.match(name.split(".")[0])
    return match.group(1) if match else None


def requested(available: Iterable[str]) -> tuple[list[str], list[Metric]]:
    """(the metric names to ask ncu for, the curated metrics this GPU lacks): the curated
    set and every warp-stall reason that ``available`` (base names) lists."""
    available = set(available)
    names = [m.name for m in CURATED if m.base in available]
    names += sorted(f"{base}.ratio" for base in available
                    if (reason := stall_reason(base)) and reason not in NOT_STALLED)
    return names, [m for m in CURATED if m.base not in available]


def shown(value: float | None, ncu_unit: str | None, unit: str) -> float | None:
    """A value in ncu's unit as the table's unit (us, MHz, MB); other units as they are."""
    if value is None:
        return None
    have, want = _FACTORS.get((ncu_unit or "").lower()), _FACTORS.get(unit.lower())
    return value * have / want if have and want else value


@dataclass(frozen=True)
class Row:
    label: str
    unit: str
    metric: str
    values: tuple[float | None, ...]  # one per side (kernel, then baseline)

    @property
    def ratio(self) -> float | None:
        """The kernel's value over the baseline's."""
        if len(self.values) < 2 or None in self.values[:2] or not self.values[1]:
            return None
        return self.values[0] / self.values[1]

    def as_dict(self, sides: tuple[str, ...]) -> dict:
        return {"label": self.label, "unit": self.unit, "metric": self.metric,
                **dict(zip(sides, self.values)), "ratio": self.ratio}


Side = tuple[Mapping[str, float | str | None], Mapping[str, str]]  # (metrics, units) of one kernel


def rows(sides: tuple[Side, ...]) -> list[Row]:
    """The table: the curated metrics any side has, then the largest stall reasons (by the
    larger of the sides' values), each with one value per side."""
    def value(side: Side, name: str, unit: str) -> float | None:
        number = side[0].get(name)
        if not isinstance(number, float):
            return None
        less = side[0].get(LESS.get(name, ""))
        return shown(number - less if isinstance(less, float) else number, side[1].get(name), unit)

    table = [Row(m.label, m.unit, m.name, tuple(value(s, m.name, m.unit) for s in sides)) for m in CURATED]
    table = [r for r in table if any(v is not None for v in r.values)]
    stalls = sorted({name for side in sides for name in side[0] if (reason := stall_reason(name))
                     and reason not in NOT_STALLED and name.endswith(".ratio")})
    stall_rows = [Row(f"stall: {stall_reason(name)}", "warps per issue", name,
                      tuple(value(s, name, "") for s in sides)) for name in stalls]
    stall_rows.sort(key=lambda r: -max((v for v in r.values if v is not None), default=0.0))
    return table + [r for r in stall_rows[:TOP_STALLS] if any(r.values)]
