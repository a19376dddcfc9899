"""Command line: ``python -m gemm_driver {list,info,compile,bench,plot,compare,verify}``.

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
from .problem import parse_batched_shape

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


def _shapes(args) -> list[tuple[int, int, int, int]]:
    """(M, N, K, batch) per case: --sizes, --shapes (MxNxK or BxMxNxK), else the default
    sweep; --batch N batches every shape that does not name its own B."""
    from .bench.runner import DEFAULT_SHAPES, DEFAULT_SIZES

    batch = getattr(args, "batch", None)
    if batch is not None and (not batch.isdigit() or int(batch) < 1):
        raise UsageError(f"--batch takes a positive integer (the number of GEMMs per case), got {batch!r}")
    sizes = []
    for size in _split(args.sizes):
        if not size.isdigit() or int(size) < 1:
            raise UsageError(f"--sizes takes positive integers (e.g. 256,512,1024), got {size!r}")
        sizes.append((int(size),) * 3 + (1,))
    shapes = sizes + [parse_batched_shape(s) for s in _split(args.shapes)]
    if not shapes:
        shapes = [(s, s, s, 1) for s in DEFAULT_SIZES] + [(*s, 1)[:4] for s in DEFAULT_SHAPES]
    return [(m, n, k, int(batch) if batch and b == 1 else b) for m, n, k, b in shapes]


def _bench_kernels(args) -> list[str]:
    """--kernels and --dtype together: named kernels run in their own precision, which
    --dtype (when given) must select; without --kernels, every kernel of the selection."""
    from . import precision
    from .bench.runner import default_kernels, precision_of

    dtypes = precision.parse_dtypes(args.dtype)
    if not args.kernels:
        return default_kernels(dtypes)
    names = _kernel_names(args.kernels, ())
    if args.dtype:
        for name in names:
            if precision_of(name) not in dtypes:
                raise UsageError(f"kernel {name} computes in {precision_of(name)}, which --dtype "
                                 f"{','.join(dtypes)} does not select")
    return names


def _number(text: str, flag: str, allowed: str, low: float, high: float = float("inf"), percent: bool = False) -> float:
    """Parse ``text`` as a number in (low, high); with ``percent``, '0.5%' means 0.005."""
    scale, body = (0.01, text[:-1]) if percent and text.endswith("%") else (1.0, text)
    try:
        value = float(body) * scale
    except ValueError:
        value = float("nan")
    if not low < value < high:  # also rejects nan
        raise UsageError(f"{flag} takes {allowed}, got {text!r}")
    return value


def _budget(args):
    from .bench.timing import Budget

    seconds = _number(args.max_time, "--max-time", "a positive number of seconds per case (e.g. 1.5)", 0)
    noise = _number(args.noise, "--noise", "a fraction or percentage between 0 and 1 (e.g. 0.005 or 0.5%)", 0, 1,
                    percent=True)
    return Budget(seconds=seconds, noise=noise)


def _check_output(path: str | None, flag: str) -> None:
    """Fail before a long sweep, not after it, when a result file cannot be written there."""
    if path and os.path.isdir(path):
        raise UsageError(f"{flag} takes a file path, but {path!r} is a directory")


def cmd_bench(args) -> int:
    from rich.console import Console

    from .bench import report, writers
    from .bench.clocks import ClockMonitor
    from .bench.environment import collect
    from .bench import plots, roofline
    from .bench.runner import absent_baselines, plan, run_sweep
    from .bench.timing import MODES

    names = _bench_kernels(args)
    shapes = _shapes(args)
    cases = sum(len(step[3]) for step in plan(names, shapes))
    if not cases:
        raise UsageError(f"nothing to run: {', '.join(names)} on these shapes (cublas_batched runs batched shapes "
                         "only, e.g. --batch 8 or 8x512x512x512)")
    if args.plot:
        plots.check_output_dir(args.plot)  # before the sweep, not after it
    budget = _budget(args)
    if args.mode not in MODES:
        raise UsageError(f"--mode takes {' or '.join(MODES)}, got {args.mode!r}")
    _check_output(args.json, "--json")
    _check_output(args.csv, "--csv")
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    session = _require_gpu_session()
    console = Console()
    monitor = ClockMonitor(session.device.pci_bus_id())
    try:
        with report.SweepProgress(console, cases) as progress:
            results = run_sweep(session, names, shapes, alpha=args.alpha, beta=args.beta, seed=seed, budget=budget,
                                mode=args.mode, monitor=monitor, on_case=progress.advance)
        env = collect(session.device)
        env["clocks"] = monitor.snapshot()
    finally:
        monitor.close()
        session.close()
    recs = roofline.annotate_records(report.records(results), env["gpu"]["name"])
    title = (f"{env['gpu']['name']}  mode={args.mode}  alpha={args.alpha:g} beta={args.beta:g}  seed={seed}  "
             f"noise target {budget.noise:.2%}, at most {budget.seconds:g} s per case")
    report.print_table(recs, console, title)
    settings = {"kernels": names, "shapes": [list(s) for s in shapes], "alpha": args.alpha, "beta": args.beta,
                "seed": seed, "mode": args.mode, "noise_target": budget.noise, "max_time_s": budget.seconds,
                "min_samples": budget.min_samples, "max_samples": budget.max_samples,
                "warmup_s": budget.warmup_seconds, "batch_ms": budget.batch_ms,
                "dtypes": sorted({r["dtype"] for r in recs}), "absent_baselines": absent_baselines()}
    doc = writers.document(recs, env, settings)
    doc["roofline"] = roofline.device_summary(env["gpu"]["name"])
    if args.json:
        writers.write_json(args.json, doc)
        console.print(f"wrote {args.json}")
    if args.plot:
        for path in plots.write_plots(doc, args.plot):
            console.print(f"wrote {path}")
    if args.csv:
        writers.write_csv(args.csv, recs)
        console.print(f"wrote {args.csv}")
    return EXIT_FAILED if any(r.status == "FAILED" for r in results) else EXIT_OK


def cmd_plot(args) -> int:
    from .bench import plots, writers

    plots.check_output_dir(args.out_dir)
    for path in plots.write_plots(writers.load(args.run), args.out_dir):
        print(f"wrote {path}")
    return EXIT_OK


def cmd_compare(args) -> int:
    from rich.console import Console

    from .bench.compare import compare_files, print_comparison

    threshold = _number(args.threshold, "--threshold", "a fraction or percentage between 0 and 1 (e.g. 0.02 or 2%)",
                        0, 1, percent=True)
    result = compare_files(args.old, args.new, threshold)
    print_comparison(result, Console(), args.old, args.new, threshold)
    return EXIT_OK


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
    p.add_argument("--mode", default="hot", help="hot: operands stay in L2 between launches; cold: L2 flushed "
                   "before every launch, outside the timed region (default hot)")
    p.add_argument("--noise", default="0.005", help="stop sampling a case once the relative half-width of its "
                   "median's 95%% interval is below this (default 0.005 = 0.5%%)")
    p.add_argument("--max-time", default="1.0", help="time limit per case in seconds, warm-up included; a case "
                   "that reaches it is marked not converged (default 1.0)")
    p.add_argument("--json", metavar="PATH", help="write environment, settings and every case with its samples")
    p.add_argument("--csv", metavar="PATH", help="write one row per case")
    p.add_argument("--dtype", action="append", help="precisions: fp32, tf32, bf16, fp16 (comma list) or all "
                   "(default: all, each with its own cuBLAS baseline; FP32 alone has the ladder kernels)")
    p.add_argument("--batch", help="run every shape as a batch of this many GEMMs (cublas_batched)")
    p.add_argument("--plot", metavar="DIR", help="write PNG plots (throughput, roofline, ladder) into DIR")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("plot", help="draw the PNG plots of a saved bench JSON (no GPU needed)")
    p.add_argument("run", help="bench JSON written by bench --json")
    p.add_argument("out_dir", help="directory for the PNG files")
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("compare", help="compare two bench JSON files case by case (no GPU needed)")
    p.add_argument("old", help="bench JSON of the earlier run")
    p.add_argument("new", help="bench JSON of the later run")
    p.add_argument("--threshold", default="0.02", help="changes smaller than this count as SAME (default 0.02 = 2%%)")
    p.set_defaults(func=cmd_compare)

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
