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
    """'a,b' -> [item('a'), item('b')]."""
    return lambda text: [item(part) for part in text.split(",") if part]


def _arch(text: str) -> str:
    check_arch(text)  # the form sm_XY(a), and one this NVRTC can target
    return text


arch = typed(_arch, "arch")
archs = list_of(arch)
sizes = list_of(positive("--sizes", "takes positive integers (e.g. 256,512,1024)"))
shapes = list_of(typed(parse_batched_shape, "shape"))
names = list_of(typed(lambda name: kernels.get(name).name, "kernel"))
tunable = typed(parse_tunable, "NAME=INTEGER")
