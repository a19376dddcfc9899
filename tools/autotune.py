#!/usr/bin/env python3
"""Sweep a tuned kernel's configuration space on this GPU and write the per-GPU table it reads.

    python tools/autotune.py                       # autotuned (FP32): sweeps warptiled, prints the ranking
    python tools/autotune.py --write               # ... and writes gemm_driver/tuned/<gpu>.json
    python tools/autotune.py --shapes 1024,4093x4091x4099 --json run.json
    python tools/autotune.py --kernel mma_sync_tuned_bf16,mma_sync_tuned_tf32 --write
                                                   # -> gemm_driver/tuned/<gpu>.<kernel>.json each
    python tools/autotune.py --corpus all:tune --gpus all --write
                                                   # autotuned's table from the corpus's tuning set
    python tools/autotune.py --kernel hopper_bf16 --corpus all:tune --journal sweep.jsonl --write
                                                   # every candidate of kernels/hopper/selection.py on
                                                   # the corpus's tuning set; resumable
    python tools/autotune.py --kernel hopper_bf16 --corpus all:tune --gpus all
                                                   # one worker per GPU, whole shapes from one queue
    python tools/autotune.py --kernel hopper_tf32 --corpus all:tune --min-m 128 --gpus all --write
                                                   # hopper_tf32's candidates (tf32_selection.py) on the
                                                   # tuning shapes its vote decides (M > 128)
    python tools/autotune.py --kernel hopper_bf16 --corpus all:tune --max-m 128 --merge --write
                                                   # re-sweep the tuning shapes of M <= 128 only; the
                                                   # table keeps its other shapes' entries

``--corpus`` takes a corpus's tuning set only (docs/corpus.md): no sweep reads the validation
set. The table keeps every configuration's TFLOP/s per shape: ``autotuned``, ``hopper_bf16``,
``hopper_tf32`` and ``mma_sync_tuned_*`` read it by the vote of kernels/tuned.py (the nearest swept shapes predict
each configuration's slowdown), and their sweeps end with the vote checked on the tuning set
itself, each shape left out of its own vote.

Every configuration is verified against the float64 reference before it is timed; cuBLAS
of the kernel's precision is timed on the same operands for the % column. With --final-round,
where a shape's fastest configurations came within 10% of each other, the closest three are
timed again in alternation and the ranking marks their first-pass figures (bench/autotune.py
says what it changed on the H100, and why it is not the default). Needs a GPU;
without one, bad arguments or an unwritable --json it says so in one line (exit 2).
"""

from __future__ import annotations

import json
import math
import sys
from functools import partial
from pathlib import Path

from gemm_driver import kernels
from gemm_driver.arguments import gpu_choice
from gemm_driver.bench import autotune
from gemm_driver.bench.command import select_gpus
from gemm_driver.bench.environment import collect
from gemm_driver.bench.spread import Journal
from gemm_driver.corpus import corpus
from gemm_driver.cuda.driver import Device
from gemm_driver.kernels import tensor, tuned
from gemm_driver.kernels.hopper import selection, tf32_selection
from gemm_driver.kernels.simt import warptiling
from gemm_driver.kernels.simt.warptiling import TUNE_SPACE
from gemm_driver.kernels.tensor import mma_sync
from gemm_driver.problem import GemmProblem

if str(Path(__file__).resolve().parent) not in sys.path:  # loaded by file path (the tests), not run
    sys.path.append(str(Path(__file__).resolve().parent))  # last: tools/inspect.py must not shadow inspect
from _toolkit import Parser, add_sweep_options, comma_choice, positive, run, sweep_shapes  # noqa: E402

PROG = Path(__file__).name
DEFAULT_SHAPES = "512,1000,1024,2048,4096,4093x4091x4099,8192,16384x128x4096,1024x1024x16384"
# Tuned kernel -> (the kernel its sweep runs, the configurations). `autotuned` runs
# warptiled's code, and its table keeps warptiled's name (gemm_driver/tuned/<gpu>.json).
# hopper_bf16's configurations depend on the shape: the candidates offered for it.
TARGETS = {"autotuned": ("warptiled", TUNE_SPACE),
           **{name: (name, space) for name, space in tensor.TUNE_SPACES.items()},
           "hopper_bf16": ("hopper_bf16", lambda shape: selection.candidates(GemmProblem(*shape))),
           "hopper_tf32": ("hopper_tf32", lambda shape: tf32_selection.candidates(GemmProblem(*shape)))}


# The kernels that vote over their table (tuned.vote): the configurations each offers a shape, how
# it names a stored one (and hopper_bf16 its tie), for the left-out check printed after a sweep.
VOTERS = {"autotuned": (warptiling.offered, warptiling.named),
          "hopper_bf16": (selection.candidates, dict, selection.TIE),
          "hopper_tf32": (tf32_selection.candidates, dict),
          **{name: (partial(mma_sync.offered_configs, kernels.KERNELS[name]),
                    partial(mma_sync.named_config, kernels.KERNELS[name].precision))
             for name in tensor.TUNE_SPACES}}

targets = comma_choice("--kernel", TARGETS)  # '--kernel' values: a comma list of tuned kernels


def main(argv=None) -> int:
    parser = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", default="autotuned",
                        help=f"comma list of tuned kernels to sweep (default autotuned): {', '.join(TARGETS)}")
    add_sweep_options(parser, DEFAULT_SHAPES, "also write the table document here (several kernels: "
                      "PATH.<kernel>.json)")
    parser.add_argument("--top", type=positive(int), default=5, help="configurations shown per shape")
    parser.add_argument("--write", action="store_true", help="write gemm_driver/tuned/<gpu>[.<kernel>].json")
    parser.add_argument("--corpus", metavar="NAME:tune", help="the shapes of a corpus's tuning set instead of "
                        "--shapes: llm:tune, sized:tune, odd:tune or all:tune")
    parser.add_argument("--journal", help="append each finished trial here (JSON lines) and skip the trials "
                        "already in it: a stopped sweep resumes")
    parser.add_argument("--max-m", type=positive(int), help="only the shapes with M at most this (a partial "
                        "re-sweep: see --merge)")
    parser.add_argument("--min-m", type=positive(int), help="only the shapes with M above this (hopper_tf32's "
                        "vote decides past M = 128 only)")
    parser.add_argument("--merge", action="store_true", help="with --write: keep the written table's entries "
                        "for the shapes this sweep does not run, and replace the others")
    parser.add_argument("--gpus", default="0", help="GPU ordinals (e.g. 0,1) or all: with several, one worker per "
                        "GPU takes whole shapes from a shared queue (default 0)")
    parser.add_argument("--final-round", action="store_true", help="time each shape's candidates within 10%% of its "
                        "fastest again in alternation, the closest three, and keep those times")
    args = parser.parse_args(argv)
    try:
        names = targets(args.kernel)
    except ValueError as exc:
        parser.error(str(exc))
    shapes = corpus_shapes(parser, args.corpus) if args.corpus else sweep_shapes(parser, args)
    for bound, keep, says in ((args.max_m, lambda m, b: m <= b, "<="), (args.min_m, lambda m, b: m > b, ">")):
        if bound is not None:
            shapes = [s for s in shapes if keep(s[0], bound)]
            if not shapes:
                parser.error(f"no shape has M {says} {bound}")
    if args.merge and not args.write:
        parser.error("--merge updates the table --write writes: give both")
    try:
        gpu_text = gpu_choice(args.gpus)
    except ValueError as exc:
        parser.error(str(exc))

    failed = False
    environment = collect(Device.get(0))  # no GPU: one line, before anything runs
    gpus = select_gpus(gpu_text)
    for name in names:
        swept, space = TARGETS[name]
        spec = kernels.KERNELS[swept]
        journal = Journal(args.journal if len(names) == 1 else f"{args.journal}.{name}") if args.journal else None
        phases = {}
        results = autotune.tune(spec, shapes, space, seconds=args.seconds, journal=journal, gpus=gpus,  # in workers
                                final=args.final_round, on_phase=phases.__setitem__)
        title = f"{name} " if len(names) > 1 else ""
        for r in results:
            print("\n" + "\n".join(r.report_lines(args.top, title=title)))
        document = autotune.table_document(results, spec, environment, keep=None)  # every timing: the vote reads them
        if args.merge:
            kept = tuned.load_table(environment["gpu"]["name"], kernel=name)
            document = autotune.merge_tables(document, kept) if kept else document
        if name in VOTERS:
            print("\n" + "\n".join(left_out_check(document["entries"], *VOTERS[name])))
        final = f", final round {phases['final']:.1f} s" if "final" in phases else ""
        print(f"{title}prebuild {phases['prebuild']:.1f} s, sweep {phases['sweep']:.1f} s{final} on GPUs "
              f"{','.join(map(str, gpus))}")
        if args.json:
            path = Path(args.json)
            if len(names) > 1:  # run.json -> run.<kernel>.json, one per kernel
                path = path.with_name(f"{path.stem}.{name}{path.suffix}")
            path.write_text(json.dumps(document, indent=2) + "\n")
        if args.write:
            path = tuned.tuned_path(environment["gpu"]["name"], kernel=name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(document, indent=2) + "\n")
            print(f"\nwrote {path}")
        failed |= any(t.status == "FAILED" for r in results for t in r.trials)
    return 1 if failed else 0


def corpus_shapes(parser, spec: str) -> list[tuple[int, int, int]]:
    """The shapes of a corpus's tuning set; a validation set (or a whole corpus) is refused."""
    if not spec.endswith(":tune"):
        parser.error(f"--corpus takes a tuning set (e.g. all:tune): no sweep reads the validation set; got {spec!r}")
    try:
        return [(s.m, s.n, s.k) for s in corpus(spec)]
    except ValueError as exc:
        parser.error(str(exc))


def left_out_summary(entries: list[dict], offered, named=dict, tie: float = 0.0,
                     neighbours: int = tuned.NEIGHBOURS) -> tuple[int, float, float, int] | None:
    """The vote's left-out check (tuned.left_out_slowdowns, an unmeasured pick counted at
    UNMEASURED_SLOWDOWN): (shapes, geometric mean and worst slowdown, shapes whose pick is the
    winner); None with fewer than two shapes."""
    slowdowns = [min(x, tuned.UNMEASURED_SLOWDOWN)
                 for x in tuned.left_out_slowdowns(entries, offered, named, tie, neighbours)]
    if not slowdowns:
        return None
    geomean = math.exp(sum(math.log(x) for x in slowdowns) / len(slowdowns))
    return len(slowdowns), geomean, max(slowdowns), sum(x == 1.0 for x in slowdowns)


def left_out_check(entries: list[dict], offered, named=dict, tie: float = 0.0) -> list[str]:
    """The vote checked on the tuning set: each shape's pick when it is left out of the vote,
    and how much slower that pick measured there than the shape's winner."""
    summary = left_out_summary(entries, offered, named, tie)
    if summary is None:
        return ["left-out check: fewer than two shapes"]
    shapes, geomean, worst, winners = summary
    return [f"left-out check over {shapes} tuning shapes: the vote's pick is {geomean:.3f}x slower than "
            f"the winner (geometric mean), {worst:.3f}x at worst, the winner itself on {winners}"]


if __name__ == "__main__":
    sys.exit(run(main, PROG))
