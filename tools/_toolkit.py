"""What the Python scripts in tools/ share, so that each behaves like ``python -m gemm_driver``.

- ``Parser``: argparse whose errors (an unknown option, a bad value) are one line on
  stderr and exit 2, instead of the usage block and the error.
- ``comma_choice``, ``add_sweep_options``, ``sweep_shapes``: the kernel list, ``--shapes``,
  ``--seconds`` and ``--json`` that the sweep scripts (autotune.py, ladder_sweep.py) share.
- ``run``: calls a script's ``main`` and turns what can go wrong into one line and an exit
  code: bad input, a missing file or library, no GPU -> 2; a failed compile -> 1;
  Ctrl-C -> 130, quietly; a closed pipe (``... | head``) -> 0. Never a traceback.

Not a script itself (hence the underscore): the scripts beside it import it, which works
because Python puts the folder of the script it runs first on ``sys.path``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable, Collection

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
NO_GPU = "this command needs an NVIDIA GPU"


class Parser(argparse.ArgumentParser):
    """argparse, with its errors as one line on stderr like every other bad input."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message.splitlines()[0]}\n")


def say(prog: str, message: str) -> None:
    """One line on stderr, prefixed with the script's name."""
    first = str(message).splitlines()[0] if str(message).strip() else "unknown error"
    print(f"{prog}: error: {first}", file=sys.stderr)


def positive(kind: type = float) -> Callable[[str], float]:
    """An argparse type: a number above zero (a time budget, a count)."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be above zero")
        return value

    return parse


def comma_choice(flag: str, choices: Collection[str]) -> Callable[[str], list[str]]:
    """A parser of ``flag``'s value: a non-empty comma list of ``choices``; ValueError naming them."""

    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        if not names or any(n not in choices for n in names):
            raise ValueError(f"{flag} {text!r}: choose from {', '.join(choices)}")
        return names

    return parse


def add_sweep_options(parser: argparse.ArgumentParser, default_shapes: str, json_help: str) -> None:
    """--shapes, --seconds and --json of a sweep script (read back with ``sweep_shapes``)."""
    parser.add_argument("--shapes", default=default_shapes, help="comma list of N (square) or MxNxK")
    parser.add_argument("--seconds", type=positive(float), default=0.15, help="timing budget per configuration")
    parser.add_argument("--json", help=json_help)


def sweep_shapes(parser: argparse.ArgumentParser, args) -> list[tuple[int, int, int]]:
    """The parsed --shapes, once --json is known not to be a directory; a bad value ends the
    run as a one-line usage error."""
    from gemm_driver.bench.autotune import parse_shapes

    try:
        shapes = parse_shapes(args.shapes)
    except ValueError as exc:
        parser.error(str(exc))
    if args.json and Path(args.json).is_dir():
        parser.error(f"--json takes a file path, but {args.json!r} is a directory")
    return shapes


def run(main: Callable[[], int], prog: str) -> int:
    """``main()``'s exit code, with every expected failure said in one line (see above)."""
    try:
        from gemm_driver.cuda.errors import GemmDriverError, GpuUnavailableError, NvrtcError

        try:
            return main()
        except GpuUnavailableError as exc:
            say(prog, f"{NO_GPU}: {exc}")
            return EXIT_USAGE
        except NvrtcError as exc:  # a kernel did not build: a failure, not bad input
            say(prog, f"compile failed: {exc}")
            return EXIT_FAILED
        except (GemmDriverError, ValueError, OSError, MemoryError) as exc:
            if isinstance(exc, BrokenPipeError):
                raise
            say(prog, str(exc) if str(exc) else type(exc).__name__)
            return EXIT_USAGE
    except KeyboardInterrupt:  # the user stopped it: that is the whole message, as in the CLI
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
