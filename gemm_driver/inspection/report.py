"""Quick facts about a built kernel, as one flat dict, and what differs between two of them.

``kernel_stats`` joins three sources: the resources every Build carries (registers, shared,
stack and constant memory read from the cubin, spills from ptxas's report), the SASS
instruction mix (nvdisasm), and theoretical occupancy computed from the first.

Shared memory comes from two places: the static arrays ptxas sizes into the cubin
(``shared_bytes``, as it always meant) and the dynamic size the launch asks for, which the
KernelSpec computes from the resolved tunables (``dynamic_shared_bytes``, what the Session
loads the kernel with). ``total_shared_bytes`` is their sum: what a block takes, and what
the occupancy is computed from. ``compile`` and ``inspect stats`` show all three as one
group of columns.
"""

from __future__ import annotations

import textwrap
from math import prod
from typing import Any, Mapping, Sequence

from ..kernels.build import Build, build
from ..kernels.spec import KernelSpec
from . import mix
from .occupancy import occupancy
from .sass import disassemble

# Resource fields in report order; the mix fields (mix.FIELDS) follow them.
RESOURCE_FIELDS = {
    "threads_per_block": "threads per block",
    "registers": "registers per thread",
    "shared_bytes": "static shared memory per block (ptxas, from the cubin)",
    "dynamic_shared_bytes": "dynamic shared memory per block (the launch's, from the tunables)",
    "total_shared_bytes": "static + dynamic shared memory per block",
    "spill_bytes": "spill stores + loads, bytes per thread",
    "local_bytes": "local memory (stack frame), bytes per thread",
    "constant_bytes": "constant bank 0 (parameters, compiler constants)",
    "blocks_per_sm": "resident blocks per SM",
    "occupancy": "resident warps / max warps per SM",
    "occupancy_limit": "what stops one more block fitting",
}
FIELDS = {**RESOURCE_FIELDS, **mix.FIELDS}


def resources(spec: KernelSpec, built: Build) -> dict[str, Any]:
    """What ptxas and the cubin say about the entry that computes the GEMM with these tunables
    (Build.gemm_entry), and the dynamic shared memory its launch asks for, under the report's
    field names."""
    r = built.gemm_resources
    dynamic = spec.dynamic_smem(built.tunables)
    return {"registers": r.registers, "shared_bytes": r.shared_bytes, "dynamic_shared_bytes": dynamic,
            "total_shared_bytes": r.shared_bytes + dynamic, "spill_bytes": r.spill_bytes,
            "local_bytes": r.stack_bytes, "constant_bytes": r.constant_bytes}


def compile_row(spec: KernelSpec, arch: str, tunables: Mapping[str, int]) -> dict[str, Any]:
    """One row of ``compile``: the build's resources, compile time and whether it was cached."""
    built = build(spec, arch, tunables)
    return {"kernel": spec.name, "arch": arch, "entry": built.gemm_entry, "tunables": dict(tunables),
            **resources(spec, built), "compile_seconds": round(built.compiled.compile_seconds, 4),
            "cache_hit": built.cache_hit}


# compile's table: row field -> column header. A row that failed to compile has only
# kernel, arch and error; it reads FAILED under regs and "-" elsewhere.
COMPILE_COLUMNS = {"kernel": "kernel", "arch": "arch", "registers": "regs", "shared_bytes": "smem static B",
                   "dynamic_shared_bytes": "smem dynamic B", "total_shared_bytes": "smem total B",
                   "spill_bytes": "spill B", "local_bytes": "local B", "compile_seconds": "secs",
                   "cache_hit": "cached"}


def compile_table(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """(header, cells) of ``compile``'s table, for ``inspection.command.print_table``."""
    cells = [[str(r.get(c, "FAILED" if c == "registers" else "-")) for c in COMPILE_COLUMNS] for r in rows]
    return list(COMPILE_COLUMNS.values()), cells


def kernel_stats(spec: KernelSpec, arch: str, tunables: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Resources, occupancy on ``arch`` and SASS instruction mix of ``spec`` built for ``arch``."""
    built = build(spec, arch, tunables)
    r = built.gemm_resources
    threads = prod(spec.block(built.tunables))
    res = resources(spec, built)
    try:  # a block takes its static and its dynamic shared memory: the total decides the fit
        occ = occupancy(arch, threads, r.registers, res["total_shared_bytes"], barriers=r.barriers)
        fit = {"blocks_per_sm": occ.blocks_per_sm, "occupancy": round(occ.fraction, 4),
               "occupancy_limit": occ.limited_by}
    except ValueError:  # an arch missing from the limits table: the rest is still worth having
        fit = {"blocks_per_sm": None, "occupancy": None, "occupancy_limit": f"no limits for {arch}"}
    sass = disassemble(built.compiled.cubin, built.gemm_entry)
    return {
        "kernel": spec.name, "arch": arch, "tunables": dict(built.tunables), "entry": built.gemm_entry,
        "threads_per_block": threads, **res, **fit,
        **mix.count(mix.executed(sass.instructions)),
    }


def label(stats: Mapping[str, Any]) -> str:
    """'smem_tiled TILE=32 PAD=0 sm_90': enough to tell two configurations apart."""
    settings = " ".join(f"{k}={v}" for k, v in stats["tunables"].items())
    return " ".join(part for part in (stats["kernel"], settings, stats["arch"]) if part)


def diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Field -> (a's value, b's value) for every report field that differs."""
    return {name: (a[name], b[name]) for name in FIELDS if a[name] != b[name]}


STATS_WIDTH = 120  # columns of each stats table: a field group too wide for it is split


def stats_tables(rows: Sequence[Mapping[str, Any]], headers: Mapping[str, str], cell
                 ) -> tuple[list[tuple[str, list[str], list[list[str]]]], list[str]]:
    """(tables, notes) for ``inspect stats``: each table (title, header, cells) starts with
    kernel, arch and a tunables mark ("[1]", the settings in the notes below), then as many
    of a field group's columns as fit ``STATS_WIDTH``; the rest follow in the next table.
    ``headers`` names each field's column, ``cell(field, value)`` writes a value."""
    numbers: dict[str, int] = {}
    keys = []
    for r in rows:
        settings = " ".join(f"{k}={v}" for k, v in r["tunables"].items())
        mark = f"[{numbers.setdefault(settings, len(numbers) + 1)}]" if settings else "-"
        keys.append([r["kernel"], r["arch"], mark])
    key_header = ["kernel", "arch", "tunables"]
    width = lambda column: max(len(str(c)) for c in column)  # noqa: E731
    used = sum(width([h, *(k[i] for k in keys)]) + 2 for i, h in enumerate(key_header))
    tables = []
    for title, fields in (("resources", RESOURCE_FIELDS), ("instruction mix (static SASS)", mix.FIELDS)):
        groups, total = [[]], used
        for field in fields:
            cells = [headers[field], *(cell(field, r[field]) for r in rows)]
            if groups[-1] and total + width(cells) > STATS_WIDTH:
                groups.append([])
                total = used
            groups[-1].append(field)
            total += width(cells) + 2
        for n, group in enumerate(groups, 1):
            part = f" ({n} of {len(groups)})" if len(groups) > 1 else ""
            tables.append((title + part, key_header + [headers[f] for f in group],
                           [key + [cell(f, r[f]) for f in group] for key, r in zip(keys, rows)]))
    return tables, [textwrap.fill(f"[{number}] {settings}", STATS_WIDTH, subsequent_indent="    ")
                    for settings, number in numbers.items()]
