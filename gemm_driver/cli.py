"""Command line: ``python -m gemm_driver {list,info,compile,bench,plot,compare,verify,inspect,profile}``.

Thin by design: parse (argparse types and choices refuse bad input), make one call into
the layers below, print, return an exit code. Nothing in the package imports this module.
Exit codes: 0 success; 1 a kernel failed (verification or compilation); 2 bad input,
including a missing GPU, driver or library, always as one line on stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Sequence

from . import __version__, kernels
from .arguments import add_bench_options, arch, archs, isolation_options, names, nonempty, positive, tunable
from .bench import command as bench
from .fp8 import parse_scalings
from .problem import parse_fp8_types, parse_variants
from .cuda.errors import GemmDriverError, GpuUnavailableError, NvrtcError
from .inspection import command as inspection
from .profile import command as profiling
from .cuda.nvrtc import parse_arch
from .kernels.build import default_arch
from .kernels.target import declared
from .kernels.spec import cc_of

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
NO_GPU_HINT = "commands that work without a GPU: list, info, compile, inspect, compare, plot"


def _flat(values) -> list:
    return [item for value in values or () for item in value]


# --- the commands -----------------------------------------------------------------------
LIST_WIDTH = 120  # columns of `list` off a terminal; on one, the terminal's


def _listed(args) -> list:
    """The registry's entries of the precisions ``--dtype`` names that run on ``--arch``."""
    from .precision import NAMES, parse_dtypes

    chosen = parse_dtypes([args.dtype]) if args.dtype else NAMES  # list shows fp8 too, asked or not
    cc = cc_of(parse_arch(args.arch)[0]) if args.arch else None
    return [e for e in kernels.ALL.values() if e.precision in chosen and (cc is None or (
        e.runs_on(cc) if isinstance(e, kernels.KernelSpec) else tuple(cc) >= tuple(e.min_cc)))]


def _takes(entry) -> str:
    """`list --wide`'s cell: the layouts, output types and epilogues (and FP8 scalings and
    formats) an entry declares, spelled as the bench options take them."""
    return " | ".join(",".join(values) for values in declared(entry).values())


def cmd_list(args) -> int:
    import shutil
    import textwrap

    entries = _listed(args)
    if args.json:
        print(json.dumps([{"name": e.name, "kind": "kernel" if isinstance(e, kernels.KernelSpec) else e.kind,
                           "source": getattr(e, "source", None), "precision": e.precision, "min_arch": e.min_arch,
                           **{what: list(values) for what, values in declared(e).items()},
                           "description": e.description} for e in entries], indent=2))
        return EXIT_OK
    if not entries:
        print(f"no kernel or provider{' in ' + args.dtype if args.dtype else ''} runs on {args.arch}")
        return EXIT_OK
    wide_columns = ("source or kind", "takes: layouts | D | epilogues [| FP8 scalings | FP8 types]")
    rows = [("name", "precision", "min arch", *(wide_columns if args.wide else ()), "what it is")]
    rows += [(e.name, e.precision, e.min_arch, *((getattr(e, "source", e.kind), _takes(e)) if args.wide else ()),
              e.description) for e in entries]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    indent = sum(widths) + 2 * len(widths)
    # --wide: one line per entry, as long as it takes; else the descriptions wrap under their column
    width = shutil.get_terminal_size((LIST_WIDTH, 24)).columns if sys.stdout.isatty() else LIST_WIDTH
    for row in rows:
        lines = [row[-1]] if args.wide else textwrap.wrap(row[-1], max(width - indent, 20), break_on_hyphens=False)
        text = "\n".join(lines) or row[-1]
        lead = "  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  "
        print(lead + text.replace("\n", "\n" + " " * indent))
    return EXIT_OK


def cmd_info(args) -> int:
    from .bench.environment import collect, describe

    env = collect()
    print(json.dumps(env, indent=2) if args.json else "\n".join(describe(env, NO_GPU_HINT)))
    return EXIT_OK


def cmd_compile(args) -> int:
    from .inspection.report import compile_row, compile_table

    named = _flat(args.kernels)
    specs = [inspection.compiled_kernel(n, "a kernel this tool compiles") for n in named or kernels.KERNELS]
    archs, overrides = _flat(args.arch) or [default_arch()], dict(args.set or ())
    rows, failed = [], False
    for spec in specs:
        tunables = spec.resolve(overrides)
        # Unnamed, a kernel is built for the archs it runs on; named, a wrong arch is an error.
        for target in (archs if named else [a for a in archs if spec.runs_on(cc_of(parse_arch(a)[0]))]):
            try:
                rows.append(compile_row(spec, target, tunables))
            except NvrtcError as exc:
                failed = True
                print(f"compile of {spec.name} for {target} failed:\n{exc}", file=sys.stderr)
                rows.append({"kernel": spec.name, "arch": target, "error": exc.name})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        inspection.print_table(*compile_table(rows))
    return EXIT_FAILED if failed else EXIT_OK


def cmd_bench(args) -> int:
    from rich.console import Console

    from .bench.report import SweepProgress, print_table

    ladder = bench.wants_ladder(_flat(args.kernels), args.ladder)
    names = bench.select_kernels(_flat(args.kernels), args.dtype, ladder=ladder)
    shapes = bench.select_shapes(_flat(args.sizes), _flat(args.shapes), args.batch, ladder=ladder, corpus=args.corpus)
    budget = bench.Budget(seconds=args.max_time, noise=args.noise, warmup_seconds=args.warmup,
                          energy=not args.no_energy)
    variants = tuple(parse_variants(args.layout, args.out_dtype, args.epilogue))
    scalings = tuple(parse_scalings(args.scaling))
    fp8_types = tuple(parse_fp8_types(args.fp8_types))
    for flag, given in (("--scaling", args.scaling), ("--fp8-types", args.fp8_types)):
        if given and not any(kernels.precision_of(name) == "fp8" for name in names):
            raise ValueError(f"{flag} applies to fp8 cases; add --dtype fp8 (or name an fp8 baseline)")
    bench.check_outputs(args.json, args.csv, args.plot)  # bad paths before --gpus asks the driver
    request = bench.BenchRequest(names, shapes, args.alpha, args.beta, args.seed, args.mode, budget, args.isolation,
                                 args.watchdog, args.rounds, corpus=args.corpus, variants=variants,
                                 scalings=scalings, fp8_types=fp8_types).with_seed()
    steps = request.steps()  # "nothing to run" before --gpus asks the driver
    if args.resume:
        request, steps = _resumed(request, steps, args)
    request = dataclasses.replace(request, gpus=bench.select_gpus(args.gpus))
    console = Console()
    # Results reach the files as each shape finishes, so a run cut off keeps what it measured.
    checkpoint = lambda run: bench.write_outputs(run, args.json, args.csv, None)  # noqa: E731
    with SweepProgress(console, bench.case_count(steps, request.rounds)) as progress:
        run = bench.run(request, steps, on_case=progress.advance, on_checkpoint=checkpoint)
    print_table(run.shown, console, run.title)
    if args.corpus:
        console.print("\n".join(bench.corpus_summary.summary_lines(run.document)), highlight=False)
    for path in bench.write_outputs(run, args.json, args.csv, args.plot if run.complete else None):
        console.print(f"wrote {path}")
    if not run.complete:
        print("interrupted: the files hold the cases that finished, marked \"complete\": false", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_FAILED if run.failed else EXIT_OK


def _resumed(request, steps, args):
    """--resume: the request and steps left by the cut run in --json's file (bench/resume.py);
    as they are where the file does not exist yet."""
    from .bench import writers
    from .bench.resume import resume

    if not args.json:
        raise ValueError("--resume carries on the sweep in the --json file: give --json PATH")
    if not os.path.lexists(args.json):
        return request, steps
    try:
        document = writers.load(args.json)  # every reader of saved runs: checked field by field
    except writers.BenchFileError as exc:
        raise ValueError(f"--resume: cannot read {exc}") from None
    return resume(request, steps, bench.settings_of(request), document, args.json, seed_given=args.seed is not None)


def cmd_plot(args) -> int:
    from .bench import plots, writers

    plots.check_output_dir(args.out_dir)
    for path in plots.write_plots(writers.load(args.run), args.out_dir):
        print(f"wrote {path}")
    return EXIT_OK


def cmd_compare(args) -> int:
    from rich.console import Console

    from .bench.compare import compare_files, print_comparison

    result = compare_files(args.old, args.new, args.threshold)
    print_comparison(result, Console(), args.old, args.new, args.threshold)
    return EXIT_OK


def cmd_verify(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from .bench.isolation import RUNNERS, TaskFailure
    from .bench.tables import print_table
    from .checking import VerifyTask, drawn_variants, verify_task

    table = Table(header_style="bold")
    for column in ("kernel", "examples", "result", "smallest failing case"):
        table.add_column(column)
    chosen = _flat(args.kernels) or ["cublas", *kernels.KERNELS]
    scalings = parse_scalings(args.scaling) if args.scaling else [None]
    pairs = parse_fp8_types(args.fp8_types) if args.fp8_types else [None]
    tasks = [VerifyTask(name, args.examples, args.max_dim, scaling, pair) for name in chosen for scaling in scalings
             for pair in pairs]
    for task in tasks:  # a mode or pair the kernel lacks: one line, before any GPU work
        drawn_variants(task.kernel, task.scaling, task.fp8_types)
    failed = False
    for index, outcome in RUNNERS[args.isolation](verify_task, watchdog_s=args.watchdog).run(tasks):
        if isinstance(outcome, str):  # the kernel cannot run here: bad input
            raise ValueError(outcome)
        if isinstance(outcome, TaskFailure):  # it faulted or hung: FAILED under its own name
            failed = True
            table.add_row(tasks[index].label, "-", "[red]FAIL[/red]", outcome.reason)
            continue
        failed |= not outcome.ok
        case = outcome.failing_case.describe() + f": {outcome.message}" if outcome.failing_case else "-"
        table.add_row(tasks[index].label, str(outcome.examples), "pass" if outcome.ok else "[red]FAIL[/red]", case)
    print_table(Console(), table)  # whole rows in a log or a pipe, fitted on a terminal
    return EXIT_FAILED if failed else EXIT_OK


def cmd_inspect(args) -> int:
    args.arch = args.arch or default_arch()
    return args.func(args)


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors as one line on stderr like every other bad input."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message.splitlines()[0]}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gemm-driver", description="GEMM kernels on NVIDIA GPUs, measured.")
    parser.add_argument("--version", action="version", version=f"gemm_driver {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    p = sub.add_parser("list", help="kernels and baseline providers")
    p.add_argument("--dtype", type=nonempty("a precision (e.g. bf16, or a comma list)"),
                   help="only these precisions: fp32, tf32, bf16, fp16, fp8 (comma list)")
    p.add_argument("--arch", type=arch, help="only what runs on a GPU of this architecture, e.g. sm_80 or sm_90")
    p.add_argument("--wide", action="store_true", help="one line per entry, with the source file, however wide")
    p.add_argument("--json", action="store_true", help="print a JSON list with every field")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("info", help="GPU, driver and library versions (works without a GPU)")
    p.add_argument("--json", action="store_true", help="print the environment record as JSON")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("compile", help="compile kernels and report their resources (no GPU needed)")
    p.add_argument("kernels", nargs="*", type=names, help="kernels to compile (default: all)")
    p.add_argument("--arch", action="append", type=archs, help="target(s), e.g. sm_90 or sm_80,sm_90 "
                   "(default: this GPU's, or sm_90)")
    p.add_argument("--set", action="append", type=tunable, metavar="NAME=VALUE", help="tunable override, repeatable")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("bench", help="verify, then time kernels against cuBLAS")
    add_bench_options(p)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("plot", help="draw the PNG plots of a saved bench JSON (no GPU needed)")
    p.add_argument("run", type=nonempty("a bench JSON path"), help="bench JSON written by bench --json")
    p.add_argument("out_dir", type=nonempty("a directory"), help="directory for the PNG files")
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("compare", help="compare two bench JSON files case by case (no GPU needed)")
    p.add_argument("old", help="bench JSON of the earlier run")
    p.add_argument("new", help="bench JSON of the later run")
    p.add_argument("--threshold", default=0.02, type=positive("--threshold", "takes a fraction or percentage between 0 "
        "and 1 (e.g. 0.02 or 2%)", float, 0, 1, percent=True), help="changes smaller than this count as SAME (default 0.02 = 2%%)")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("verify", help="property-based correctness run (Hypothesis) on the GPU")
    p.add_argument("--kernels", action="append", type=names, help="comma-separated (default: cublas and every kernel)")
    p.add_argument("--examples", type=positive("--examples", "must be at least 1"), default=100,
                   help="cases drawn per kernel (default 100)")
    p.add_argument("--max-dim", type=positive("--max-dim", "must be at least 1"), default=300,
                   help="largest M, N or K drawn (default 300)")
    p.add_argument("--scaling", type=nonempty("scaling modes (e.g. tensor,block)"),
                   help="fp8 kernels: comma list of tensor, row, block; --examples cases of each mode in turn "
                        "(default: modes drawn among all the kernel declares)")
    p.add_argument("--fp8-types", type=nonempty("FP8 formats (e.g. e4m3,e5m2_e4m3)"),
                   help="fp8 kernels: comma list of e4m3, e5m2_e4m3, e4m3_e5m2, e5m2 (A's and B's formats); "
                        "--examples cases of each pair in turn (default: pairs drawn among all the kernel declares)")
    isolation_options(p)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("profile", help="one verified case under Nsight Compute (ncu) beside its baseline, "
                       "clocks locked to base (needs a GPU and ncu)")
    profiling.add_arguments(p)
    p.set_defaults(func=profiling.cmd_profile)

    p = sub.add_parser("inspect", help="PTX, SASS, resources and instruction mix of a kernel (no GPU needed)")
    inspection.add_subcommands(p, arch=arch, tunable=tunable)
    p.set_defaults(command_func=cmd_inspect)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if kernels.EXTRA_KERNELS_ERROR:
        print(f"gemm-driver: error: {kernels.EXTRA_KERNELS_ERROR}", file=sys.stderr)
        return EXIT_USAGE
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0), or bad input already said in one line (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    where = f"gemm-driver {args.command}"
    try:
        return (getattr(args, "command_func", None) or args.func)(args)
    except BrokenPipeError:  # `... | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except GpuUnavailableError as exc:
        print(f"{where}: error: this command needs an NVIDIA GPU: {str(exc).splitlines()[0]}; {NO_GPU_HINT}",
              file=sys.stderr)
        return EXIT_USAGE
    except NvrtcError as exc:  # compile uses it per kernel; elsewhere a build failed: a kernel failed
        print(f"{where}: compile failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except (ValueError, GemmDriverError, MemoryError, OSError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"{where}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
