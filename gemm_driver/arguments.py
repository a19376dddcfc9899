"""argparse value types for the command line: each turns one value into what the layers
below take, or refuses it with a message naming the flag and the value (argparse prints it
as the one line of a usage error). ``action="append"`` with a list type gives lists of
lists: ``--sizes 256,512 --sizes 1024``.
"""

from __future__ import annotations

import argparse

from . import kernels
from .cuda.nvrtc import check_arch
from .kernels.spec import parse_tunable
from .bench.command import EVERY_KERNEL
from .bench.isolation import DEFAULT_WATCHDOG_S
from .bench.timing import MODES
from .corpus import corpus as _corpus
from .problem import parse_batched_shape


def typed(parse, name: str | None = None):
    """``parse`` as an argparse type: its ValueError becomes the usage error's message."""
    def convert(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = name or parse.__name__
    return convert


def positive(flag: str, what: str, cast=int, low: float = 0, high: float = float("inf"), percent: bool = False):
    """A number in (low, high); with ``percent``, '0.5%' means 0.005."""
    def parse(text: str):
        scale, body = (0.01, text[:-1]) if percent and text.endswith("%") else (1, text)
        try:
            value = cast(body) * scale if cast is float else cast(body)
        except ValueError:
            value = None
        if value is None or not low < value < high:  # also refuses nan
            raise ValueError(f"{flag} {what}, got {text!r}")
        return value
    return typed(parse, flag)


def list_of(item):
    """'a,b' -> [item('a'), item('b')]; an empty list is refused (it would mean "the default")."""
    def parse(text: str) -> list:
        parts = [part for part in text.split(",") if part.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"takes a comma-separated list, got {text!r}")
        return [item(part.strip()) for part in parts]
    return parse


def nonempty(what: str):
    """A string argument that may not be empty (an empty path or name would silently mean
    the current directory or the default)."""
    def parse(text: str) -> str:
        if not text.strip():
            raise ValueError(f"takes {what}, got an empty string")
        return text
    return typed(parse, what)


class Once(argparse.Action):
    """An option that may be given once: a second value is an error, not a silent override."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, f"_seen_{self.dest}", False):
            parser.error(f"{option_string} given twice; give it once")
        setattr(namespace, f"_seen_{self.dest}", True)
        setattr(namespace, self.dest, values)


def _arch(text: str) -> str:
    check_arch(text)  # the form sm_XY(a), and one this NVRTC can target
    return text


arch = typed(_arch, "arch")
archs = list_of(arch)
sizes = list_of(positive("--sizes", "takes positive integers (e.g. 256,512,1024)"))
shapes = list_of(typed(parse_batched_shape, "shape"))
names = list_of(typed(lambda name: kernels.get(name).name, "kernel"))
# bench also takes "all" (every kernel: the ladder)
bench_names = list_of(typed(lambda name: name if name == EVERY_KERNEL else kernels.get(name).name, "kernel"))
tunable = typed(parse_tunable, "NAME=INTEGER")


# --- option groups the CLI shares ----------------------------------------------------------
def isolation_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--isolation", default="process", choices=("process", "off"), help="process (default): the GPU "
                   "work runs in a worker process that is replaced when a kernel faults or hangs, so the rest of the "
                   "run goes on; off: in this process (a fault or hang ends the run)")
    p.add_argument("--watchdog", default=DEFAULT_WATCHDOG_S, metavar="SECONDS", type=positive("--watchdog",
                   "takes a positive number of seconds", float), help="a kernel's GPU work silent for this long is "
                   f"reported as hung and its worker stopped (default {DEFAULT_WATCHDOG_S:g}; in bench never below 3x "
                   "--max-time plus 4x --warmup; needs --isolation process)")


def gpu_choice(text: str) -> str:
    if text != "all" and not all(part.strip().isdigit() for part in text.split(",")):
        raise ValueError(f"--gpus takes all or GPU ordinals such as 0,1; got {text!r}")
    return text.replace(" ", "")


def add_bench_options(p: argparse.ArgumentParser) -> None:
    """The bench command's options: what to run, how to time it, where results go."""
    p.add_argument("--kernels", action="append", type=bench_names, help="comma-separated, or all: every kernel and "
                   "baseline, as --ladder (default: each selected precision's best kernel for this GPU beside its "
                   "baselines, on three shapes)")
    p.add_argument("--ladder", action="store_true", help="the whole ladder: every kernel and baseline of the selected "
                   "precisions, on the ladder's shapes unless --sizes/--shapes are given")
    p.add_argument("--sizes", action="append", type=sizes, help="square sizes, e.g. 256,512,1024")
    p.add_argument("--gpus", default="0", type=typed(gpu_choice, "--gpus"), help="GPU ordinals (e.g. 0,1) or all: with "
                   "several, one worker per GPU takes whole shapes from a shared queue, and each case records its "
                   "GPU (default 0)")
    p.add_argument("--corpus", metavar="NAME[:SET]", type=typed(lambda t: (_corpus(t), t)[1], "--corpus"),
                   help="the shapes of a corpus instead of --sizes/--shapes: llm (model layers), sized, odd or all, "
                   "optionally :tune or :validate (docs/corpus.md); prints the own-best/best-baseline summary")
    p.add_argument("--shapes", action="append", type=shapes, help="MxNxK or BxMxNxK shapes, e.g. 4093x4091x4099")
    p.add_argument("--alpha", type=float, default=1.0, help="C = alpha A B + beta C: the scale of A B (default 1)")
    p.add_argument("--beta", type=float, default=0.0, help="the scale of the C read in; 0 (default) means C is "
                   "not read")
    p.add_argument("--seed", type=int, help="seed of the random inputs (default: fresh, recorded in the output)")
    p.add_argument("--mode", default="hot", choices=MODES, action=Once, help="hot: operands stay in L2 between launches; "
                   "cold: L2 flushed before every launch, outside the timed region; graph: as hot, the batch replayed "
                   "from a captured CUDA graph (default hot)")
    p.add_argument("--noise", default=0.005, type=positive("--noise", "takes a fraction or percentage between 0 and 1 "
                   "(e.g. 0.005 or 0.5%)",
                   float, 0, 1, percent=True), help="stop sampling a case once the relative half-width of its "
                   "median's 95%% interval is below this (default 0.005 = 0.5%%)")
    p.add_argument("--max-time", default=1.0, type=positive("--max-time", "takes a positive number of seconds per "
                   "case (e.g. 1.5)", float), help="sampling time limit per case in seconds; a case that reaches "
                   "it is marked not converged (default 1.0)")
    p.add_argument("--warmup", default=0.03, metavar="SECONDS", type=positive("--warmup", "takes a positive number "
                   "of seconds, at most 600", float, 0, 600.001), help="untimed launches of each case before its "
                   "samples, outside --max-time (default 0.03). Tensor-core kernels draw enough power to pull the "
                   "clock down for about a second: 2 compares every case at the clock it holds under sustained load")
    p.add_argument("--no-energy", action="store_true", help="skip each case's energy window (about 0.7 s a case on "
                   "an H100): for long sweeps such as a corpus run, where time matters more than joules")
    p.add_argument("--rounds", default=1, type=positive("--rounds", "takes a whole number from 1 to 100 (passes "
                   "over each shape's kernels)", int, 0, 101), help="time each shape's kernels this many times, in "
                   "alternating order (forward, then reversed), and pool each kernel's samples (default 1). Under a "
                   "power cap the kernels timed later in a shape run at a lower clock: 2 gives every kernel both places")
    p.add_argument("--json", metavar="PATH", type=nonempty("a file path"), help="write environment, settings and every case with its samples")
    p.add_argument("--resume", action="store_true", help="carry on the sweep whose cut run left the --json file "
                   "(\"complete\": false): run only the shapes it lacks, with its seed, and write them beside its "
                   "records; the same command otherwise (a file of another sweep is refused)")
    p.add_argument("--csv", metavar="PATH", type=nonempty("a file path"), help="write one row per case")
    p.add_argument("--dtype", action="append", type=nonempty("precisions (e.g. bf16,fp16 or all)"), help="precisions: fp32, tf32, bf16, fp16, fp8 (comma list) or all "
                   "(default: all but fp8, each with its own kernels and cuBLAS baseline)")
    p.add_argument("--layout", type=nonempty("layouts (e.g. nn,nt)"), help="comma list of nn, nt, tn, tt: which "
                   "operands are stored transposed (first letter A, second B; nt is x @ W^T). Default nn")
    p.add_argument("--out-dtype", type=nonempty("output types (e.g. fp32,bf16)"), help="comma list of fp32, bf16, "
                   "fp16: the type D (and C) is stored in. Default fp32")
    p.add_argument("--epilogue", type=nonempty("epilogues (e.g. none,bias_gelu)"), help="comma list of none, bias, "
                   "bias_relu, bias_gelu (GELU's tanh form), applied to alpha A B + beta C before the store. Every "
                   "combination of --layout, --out-dtype and --epilogue runs on each shape; a kernel that does not "
                   "declare one is recorded as not run there, with why. Default none")
    p.add_argument("--scaling", type=nonempty("scaling modes (e.g. tensor,block)"), help="comma list of tensor, "
                   "row, block: how FP8 cases scale A and B (one scale each; per row of A and column of B; 1x128 of "
                   "A and 128x128 of B). FP8 runs the nt layout only. Default tensor")
    p.add_argument("--fp8-types", type=nonempty("FP8 formats (e.g. e4m3,e5m2_e4m3)"), help="comma list of e4m3, "
                   "e5m2_e4m3, e4m3_e5m2, e5m2: the formats of FP8 cases' A and B (one name: both; A's and B's "
                   "joined by _ where they differ; e5m2_e4m3 is a gradient times a weight). Default e4m3")
    p.add_argument("--batch", type=positive("--batch", "takes a positive integer (the number of GEMMs per case)"),
                   help="run every shape as a batch of this many GEMMs (batched baselines)")
    p.add_argument("--plot", metavar="DIR", type=nonempty("a directory"), help="write PNG plots (throughput, roofline, ladder) into DIR")
    isolation_options(p)
