"""``python -m gemm_driver inspect {ptx,sass,stats,diff}`` (and ``python tools/inspect.py``,
the same command): read what the compiler made of a kernel.

Works with no GPU: NVRTC compiles for ``--arch`` (default: this GPU's, else sm_90) and
nvdisasm reads the cubin. A KERNEL argument may carry its own tunables, as in
``smem_tiled:TILE=16,PAD=1``; they override ``--set``, which applies to every kernel named.
``add_subcommands`` declares the arguments under the CLI's ``inspect``; the CLI's one
``main`` runs them and maps errors to exit codes: 0 done, 1 a compile failed or nothing
to show, 2 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from .. import kernels
from ..cuda.nvrtc import parse_arch
from ..kernels.build import build
from ..kernels.spec import KernelSpec, cc_of, parse_tunable
from . import mix, ptx, report, sass, source

EXIT_OK, EXIT_FAILED = 0, 1


def compiled_kernel(name: str, what: str = "a kernel with code to inspect") -> KernelSpec:
    """The KernelSpec called ``name``; ValueError for a provider (it has no code of ours)."""
    spec = kernels.get(name)
    if not isinstance(spec, KernelSpec):
        raise ValueError(f"{name} is a {spec.kind} provider, not {what}")
    return spec


def _target(arg: str, common: dict[str, int]) -> tuple[KernelSpec, dict[str, int]]:
    """'smem_tiled:TILE=16,PAD=1' -> (spec, resolved tunables)."""
    name, _, settings = arg.partition(":")
    spec = compiled_kernel(name)
    own = dict(parse_tunable(pair) for pair in settings.split(",")) if settings else {}
    return spec, spec.resolve({**common, **own})


def _targets(args, names: Sequence[str]) -> list[tuple[KernelSpec, dict[str, int]]]:
    common = dict(args.set or ())
    return [_target(name, common) for name in names]


def cmd_ptx(args) -> int:
    [(spec, tunables)] = _targets(args, [args.kernel])
    text = build(spec, args.arch, tunables).compiled.ptx.decode(errors="replace")
    print(ptx.interleave(text, source.source_lines(spec)) if args.source else text, end="")
    return EXIT_OK


def cmd_sass(args) -> int:
    [(spec, tunables)] = _targets(args, [args.kernel])
    built = build(spec, args.arch, tunables)
    code = sass.disassemble(built.compiled.cubin, built.gemm_entry)
    shown = code.instructions
    heading = f"// {spec.name} {args.arch} {built.gemm_entry}: {len(shown)} instructions"
    if args.loop:
        loop = sass.main_loop(code)
        if loop is None:
            print(f"// {spec.name} {args.arch}: no loop does any arithmetic", file=sys.stderr)
            return EXIT_FAILED
        shown = loop.instructions
        counts = mix.count(mix.executed(shown))
        summary = ", ".join(f"{n} {_HEADERS.get(name, name.upper())}" for name, n in counts.items()
                            if n and name != "instructions")
        heading = (f"// {spec.name} {args.arch} main loop {loop.label} (0x{loop.start:04x}-0x{loop.end:04x}): "
                   f"{len(shown)} instructions: {summary}")
    print(heading)
    print(sass.render(code, shown, source.source_lines(spec)), end="")
    return EXIT_OK


def cmd_stats(args) -> int:
    number, _ = parse_arch(args.arch)
    names = args.kernels or [name for name, spec in kernels.KERNELS.items()  # all that build for arch
                             if spec.runs_on(cc_of(number))]
    rows = [report.kernel_stats(spec, args.arch, tunables) for spec, tunables in _targets(args, names)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    tables, notes = report.stats_tables(rows, {f: _HEADERS.get(f, f.upper()) for f in report.FIELDS}, _cell)
    for title, header, cells in tables:
        print(f"{title}:")
        print_table(header, cells)
        print()
    if notes:
        print("tunables:", *notes, sep="\n")
    return EXIT_OK


def cmd_diff(args) -> int:
    a, b = (report.kernel_stats(spec, args.arch, t) for spec, t in _targets(args, [args.a, args.b]))
    changed = report.diff(a, b)
    if args.json:
        print(json.dumps({"a": a, "b": b, "changed": changed}, indent=2))
        return EXIT_OK
    rows = [[name, _cell(name, x), _cell(name, y), _change(x, y)] for name, (x, y) in changed.items()]
    if not rows:
        print(f"{report.label(a)} and {report.label(b)}: no difference in resources or instruction mix")
        return EXIT_OK
    print_table(["field", report.label(a), report.label(b), "change"], rows)
    print(f"({len(report.FIELDS) - len(rows)} of {len(report.FIELDS)} fields identical)")
    return EXIT_OK


# Column headers of the stats and diff tables; the resource columns read as compile's do.
_HEADERS = {**report.COMPILE_COLUMNS, "threads_per_block": "threads", "constant_bytes": "cmem B",
            "blocks_per_sm": "blocks/SM", "occupancy": "occupancy", "occupancy_limit": "limited by",
            "local": "LDL/STL", "branches": "BRA", "instructions": "total"}


def _cell(name: str, value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.0%}" if name == "occupancy" else str(value)


def _change(x: Any, y: Any) -> str:
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y))
    return f"{y - x:+.4g}" if numeric else ""


def print_table(header: list[str], rows: list[list[str]]) -> None:
    """Plain aligned columns: stable in pipes and docs, whatever the terminal width."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        cells = [str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        print("  ".join(cells).rstrip())


def add_subcommands(parser: argparse.ArgumentParser, arch: Any, tunable: Any) -> None:
    """Declare ptx, sass, stats and diff under ``parser``; ``arch`` and ``tunable`` are the
    CLI's argparse types for ``--arch`` and ``--set``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--arch", type=arch, help="target, e.g. sm_80 or sm_90a (default: this GPU's, or sm_90)")
    common.add_argument("--set", action="append", type=tunable, metavar="NAME=VALUE",
                        help="tunable for every kernel, repeatable")
    parser.epilog = "KERNEL may carry tunables: smem_tiled:TILE=16,PAD=1 (these override --set)."
    sub = parser.add_subparsers(dest="inspect_command", required=True, metavar="WHAT")

    p = sub.add_parser("ptx", parents=[common], help="the PTX NVRTC generated")
    p.add_argument("kernel", help="NAME or NAME:TUNABLE=VALUE,...")
    p.add_argument("--source", action="store_true", help="interleave the source lines (from -lineinfo)")
    p.set_defaults(func=cmd_ptx)

    p = sub.add_parser("sass", parents=[common], help="the SASS, with source lines")
    p.add_argument("kernel", help="NAME or NAME:TUNABLE=VALUE,...")
    p.add_argument("--loop", action="store_true", help="only the main loop (the one doing the most math)")
    p.set_defaults(func=cmd_sass)

    p = sub.add_parser("stats", parents=[common], help="resources, occupancy and instruction mix per kernel")
    p.add_argument("kernels", nargs="*", help="kernels (default: every registered one)")
    p.add_argument("--json", action="store_true", help="print a JSON list with the same fields")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("diff", parents=[common], help="what differs between two kernels or configurations")
    p.add_argument("a", metavar="KERNEL_A", help="NAME or NAME:TUNABLE=VALUE,...")
    p.add_argument("b", metavar="KERNEL_B", help="the same kernel with other tunables, or another one")
    p.add_argument("--json", action="store_true", help="print both stats and the changed fields as JSON")
    p.set_defaults(func=cmd_diff)
