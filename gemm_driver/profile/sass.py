"""Where a kernel's instructions go: Nsight Compute's source counters, per SASS instruction.

``profile --source N`` adds ncu's SourceCounters section to the run; ``ncu.source_csv`` reads
the report's source page back (``--page source --csv --print-source sass``): per profiled launch, a
line ``"Kernel Name","<name>"``, a header row, then one row per SASS instruction with its address,
its text, "Instructions Executed" (warp-level, summed over the launch) and "Warp Stall Sampling
(All Samples)" among some sixty other columns.

A GEMM spends its instructions in a few loops, and every instruction of a loop body (or of a
straight path through it) executes equally often. So the listing is cut into *stretches*: runs
of consecutive instructions with the same execution count. The stretches with the most
instructions executed (count x length) name the code to look at, as in docs/profiling.md, where
one stretch of 174 instructions held 78% of a 4096^3 GEMM's instructions.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from typing import Sequence

KERNEL_LINE = '"Kernel Name",'
EXECUTED = "Instructions Executed"
SAMPLES = "Warp Stall Sampling (All Samples)"


@dataclass(frozen=True)
class Instruction:
    address: str
    sass: str
    executed: float
    samples: float


@dataclass(frozen=True)
class Listing:
    """One launch's SASS with its counters, in address order."""

    kernel: str
    instructions: tuple[Instruction, ...]

    @property
    def executed(self) -> float:
        return sum(i.executed for i in self.instructions)


@dataclass(frozen=True)
class Stretch:
    """Consecutive instructions executed equally often: first..last index of the listing."""

    first: int
    last: int
    times: float  # executions of each instruction
    samples: float  # warp-stall samples on them
    first_sass: str
    last_sass: str

    @property
    def length(self) -> int:
        return self.last - self.first + 1

    @property
    def executed(self) -> float:
        return self.times * self.length

    def as_dict(self, total: float) -> dict:
        return {"first": self.first, "last": self.last, "instructions": self.length, "times": self.times,
                "executed": self.executed, "share": self.executed / total if total else None,
                "stall_samples": self.samples, "first_sass": self.first_sass, "last_sass": self.last_sass}


def _number(text: str) -> float:
    text = (text or "").strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return 0.0


def parse_source_csv(text: str) -> list[Listing]:
    """The launches of a source-page CSV, in the report's order. ValueError when it holds none
    or a table lacks the instruction counts (a run without the SourceCounters section)."""
    blocks = ("\n" + text).split("\n" + KERNEL_LINE)
    listings = []
    for block in blocks[1:]:
        name_line, _, table = block.partition("\n")
        name = next(csv.reader([name_line]))[0]
        rows = list(csv.DictReader(io.StringIO(table)))
        if rows and EXECUTED not in rows[0]:
            raise ValueError(f"ncu's source page has no {EXECUTED!r} column: the run lacked the SourceCounters section")
        listings.append(Listing(name, tuple(
            Instruction(r.get("Address", ""), (r.get("Source") or "").strip(), _number(r[EXECUTED]),
                        _number(r.get(SAMPLES, ""))) for r in rows)))
    if not listings:
        raise ValueError("no kernel in ncu's source page (its tables start with \"Kernel Name\")")
    return listings


def stretches(listing: Listing, top: int) -> list[Stretch]:
    """The ``top`` stretches with the most instructions executed, largest first."""
    found, ins = [], listing.instructions
    start = 0
    for i in range(1, len(ins) + 1):
        if i == len(ins) or ins[i].executed != ins[start].executed:
            if ins[start].executed > 0:
                found.append(Stretch(start, i - 1, ins[start].executed, sum(x.samples for x in ins[start:i]),
                                     ins[start].sass, ins[i - 1].sass))
            start = i
    return sorted(found, key=lambda s: -s.executed)[:top]


# The source page spells integer template arguments with a cast ("(int)64"), the raw page without.
_CAST = re.compile(r"\((?:unsigned |signed )?(?:int|long long|long|short|char|bool)\)")


def match(listings: Sequence[Listing], launch_names: Sequence[str]) -> list[Listing | None]:
    """The listing of each launch: the listings come in the report's order, one per launch;
    where the count differs, by name (the first listing of that kernel, casts aside)."""
    if len(listings) == len(launch_names):
        return list(listings)
    by_name = {}
    for listing in listings:
        by_name.setdefault(_CAST.sub("", listing.kernel), listing)
    return [by_name.get(_CAST.sub("", name)) for name in launch_names]
