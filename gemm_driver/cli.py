"""Command line: ``python -m gemm_driver {list,info,compile,bench,verify}``.

Thin by design: parse, call the layers below, print, return an exit code.
Exit codes: 0 success; 1 a kernel failed (verification or compilation); 2 bad input,
including a missing GPU, driver or library, always as one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from . import kernels
from .cuda.driver import NO_GPU_HINT
from .cuda.errors import GemmDriverError, GpuUnavailableError, NvrtcError
from .problem import parse_shape

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(GemmDriverError):
    """Bad input on the command line."""


def _split(values: Sequence[str] | None) -> list[str]:
    """Accept both ``--kernels a,b`` and ``--kernels a b``."""
    return [item for value in values or () for item in value.split(",") if item]


def _kernel_names(values: Sequence[str] | None, default: Sequence[str]) -> list[str]:
    names = _split(values) or list(default)
    for name in names:
        kernels.get(name)  # ValueError naming the known kernels
    return names


def tunable_overrides(pairs: Sequence[str] | None) -> dict[str, int]:
    overrides = {}
    for pair in pairs or ():
        name, sep, value = pair.partition("=")
        if not sep or not name or not value.lstrip("-").isdigit():
            raise UsageError(f"--set takes NAME=INTEGER (e.g. --set TILE=16), got {pair!r}")
        overrides[name] = int(value)
    return overrides


def _require_gpu_session():
    from .gemm import Session

    try:
        return Session()
    except GpuUnavailableError as exc:
        raise GpuUnavailableError(f"this command needs an NVIDIA GPU: {exc}; {NO_GPU_HINT}") from None


def cmd_list(args) -> int:
    rows = []
    for entry in kernels.ALL.values():
        source = entry.source if isinstance(entry, kernels.KernelSpec) else entry.kind
        rows.append((entry.name, source, entry.dtype, entry.min_arch, entry.description))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[4])
    return EXIT_OK


def cmd_info(args) -> int:
    from .bench.environment import collect

    env = collect()
    if args.json:
        print(json.dumps(env, indent=2))
        return EXIT_OK
    gpu = env.pop("gpu")
    if "unavailable" in gpu:
        print(f"GPU: none found ({gpu['unavailable']}); {NO_GPU_HINT}")
    else:
        print(f"GPU: {gpu['name']} (sm_{gpu['compute_capability'].replace('.', '')}, {gpu['sm_count']} SMs, "
              f"{gpu['memory_bytes'] / 2**30:.1f} GiB, L2 {gpu['l2_bytes'] / 2**20:.0f} MiB)")
    for key in ("driver_cuda_version", "cuda_bindings", "nvrtc_version", "nvrtc_path", "nvjitlink_version",
                "cublas_version",
                "cublas_path", "cache_dir", "python", "numpy"):
        value = env[key]
        print(f"{key}: {value['unavailable'] + ' (unavailable)' if isinstance(value, dict) else value}")
    return EXIT_OK


def default_arch() -> str:
    from .cuda.driver import Device, gpu_available

    return Device.get(0).arch if gpu_available() else "sm_90"


def cmd_compile(args) -> int:
    from .cuda.nvrtc import parse_arch
    from .kernels.build import build

    names = _kernel_names(args.kernels, kernels.KERNELS)
    specs = []
    for name in names:
        spec = kernels.get(name)
        if not isinstance(spec, kernels.KernelSpec):
            raise UsageError(f"{name} is a {spec.kind} provider, not a kernel this tool compiles")
        specs.append(spec)
    archs = _split(args.arch) or [default_arch()]
    for arch in archs:
        parse_arch(arch)
    overrides = tunable_overrides(args.set)
    rows, failed = [], False
    for spec in specs:
        tunables = spec.resolve(overrides)
        for arch in archs:
            try:
                built = build(spec, arch, tunables)
            except NvrtcError as exc:
                failed = True
                print(f"compile of {spec.name} for {arch} failed:\n{exc}", file=sys.stderr)
                rows.append({"kernel": spec.name, "arch": arch, "error": exc.name})
                continue
            r = built.resources
            rows.append({
                "kernel": spec.name, "arch": arch, "entry": built.entry, "tunables": dict(tunables),
                "registers": r.registers, "shared_bytes": r.shared_bytes, "spill_bytes": r.spill_bytes,
                "local_bytes": r.stack_bytes, "constant_bytes": r.constant_bytes,
                "compile_seconds": round(built.compiled.compile_seconds, 4), "cache_hit": built.cache_hit,
            })
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        _print_compile_table(rows)
    return EXIT_FAILED if failed else EXIT_OK


def _print_compile_table(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(header_style="bold")
    columns = {"kernel": "kernel", "arch": "arch", "registers": "regs", "shared_bytes": "smem B",
               "spill_bytes": "spill B", "local_bytes": "local B", "compile_seconds": "secs", "cache_hit": "cached"}
    for key, header in columns.items():
        table.add_column(header, justify="left" if key in ("kernel", "arch") else "right", no_wrap=True)
    for row in rows:
        table.add_row(*(str(row.get(c, "FAILED" if c == "registers" else "-")) for c in columns))
    Console().print(table)


def _shapes(args) -> list[tuple[int, int, int]]:
    from .bench.runner import DEFAULT_SHAPES, DEFAULT_SIZES

    sizes = []
    for size in _split(args.sizes):
        if not size.isdigit() or int(size) < 1:
            raise UsageError(f"--sizes takes positive integers (e.g. 256,512,1024), got {size!r}")
        sizes.append((int(size),) * 3)
    shapes = [parse_shape(s) for s in _split(args.shapes)]
    if not sizes and not shapes:
        return [(s, s, s) for s in DEFAULT_SIZES] + list(DEFAULT_SHAPES)
    return sizes + shapes


def cmd_bench(args) -> int:
    from rich.console import Console
    from rich.progress import Progress

    from .bench import report
    from .bench.environment import collect
    from .bench.runner import default_kernels, run_sweep
    from .bench.timing import Budget

    names = _kernel_names(args.kernels, default_kernels())
    shapes = _shapes(args)
    if args.seconds <= 0:
        raise UsageError(f"--seconds must be positive, got {args.seconds}")
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    session = _require_gpu_session()
    console = Console()
    try:
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("bench", total=len(names) * len(shapes))

            def advance(result):
                progress.update(task, advance=1, description=f"{result.kernel} {result.problem.label}")

            results = run_sweep(session, names, shapes, alpha=args.alpha, beta=args.beta, seed=seed,
                                budget=Budget(seconds=args.seconds), on_case=advance)
        env = collect(session.device)
    finally:
        session.close()
    title = f"{env['gpu']['name']}  alpha={args.alpha:g} beta={args.beta:g}  seed={seed}"
    report.print_table(results, console, title)
    if args.json:
        settings = {"kernels": names, "shapes": [list(s) for s in shapes], "alpha": args.alpha, "beta": args.beta,
                    "seed": seed, "seconds_per_case": args.seconds}
        report.write_json(args.json, report.to_json(results, env, settings))
        console.print(f"wrote {args.json}")
    return EXIT_FAILED if any(r.status == "FAILED" for r in results) else EXIT_OK


def cmd_verify(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from .checking import verify_kernel

    names = _kernel_names(args.kernels, ["cublas", *kernels.KERNELS])
    if args.examples < 1:
        raise UsageError(f"--examples must be at least 1, got {args.examples}")
    if args.max_dim < 1:
        raise UsageError(f"--max-dim must be at least 1, got {args.max_dim}")
    session = _require_gpu_session()
    table = Table(header_style="bold")
    for column in ("kernel", "examples", "result", "smallest failing case"):
        table.add_column(column)
    failed = False
    try:
        for name in names:
            outcome = verify_kernel(session, name, args.examples, args.max_dim)
            failed |= not outcome.ok
            case = outcome.failing_case.describe() + f": {outcome.message}" if outcome.failing_case else "-"
            table.add_row(name, str(outcome.examples), "pass" if outcome.ok else "[red]FAIL[/red]", case)
    finally:
        session.close()
    Console().print(table)
    return EXIT_FAILED if failed else EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gemm-driver", description="GEMM kernels on NVIDIA GPUs, measured.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="kernels and baseline providers")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("info", help="GPU, driver and library versions (works without a GPU)")
    p.add_argument("--json", action="store_true", help="print the environment record as JSON")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("compile", help="compile kernels and report their resources (no GPU needed)")
    p.add_argument("kernels", nargs="*", help="kernels to compile (default: all)")
    p.add_argument("--arch", action="append", help="target(s), e.g. sm_90 or sm_80,sm_90 (default: this GPU's, or sm_90)")
    p.add_argument("--set", action="append", metavar="NAME=VALUE", help="tunable override, repeatable")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("bench", help="verify, then time kernels against cuBLAS")
    p.add_argument("--kernels", action="append", help="comma-separated (default: cublas, every kernel, numpy)")
    p.add_argument("--sizes", action="append", help="square sizes, e.g. 256,512,1024")
    p.add_argument("--shapes", action="append", help="MxNxK shapes, e.g. 4093x4091x4099")
    p.add_argument("--alpha", type=float, default=1.0)
    p.add_argument("--beta", type=float, default=0.0)
    p.add_argument("--seed", type=int, help="seed of the random inputs (default: fresh, recorded in the output)")
    p.add_argument("--seconds", type=float, default=0.5, help="measuring time per case (default 0.5)")
    p.add_argument("--json", metavar="PATH", help="write results and environment as JSON")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("verify", help="property-based correctness run (Hypothesis) on the GPU")
    p.add_argument("--kernels", action="append", help="comma-separated (default: cublas and every kernel)")
    p.add_argument("--examples", type=int, default=100, help="cases drawn per kernel (default 100)")
    p.add_argument("--max-dim", type=int, default=300, help="largest M, N or K drawn (default 300)")
    p.set_defaults(func=cmd_verify)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, GemmDriverError, MemoryError, OSError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"gemm-driver {args.command}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
