"""PTX as NVRTC generated it, optionally with the source lines interleaved.

With ``-lineinfo`` NVRTC emits ``.file N "name"`` directives (at the end of the module)
and a ``.loc N LINE COL`` before the instructions of each source line; we insert the
source text as a ``//`` comment wherever the (file, line) changes. Line 0 means "no
particular line" and is skipped. Nothing is removed, so the output is still valid PTX.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from .source import file_name, source_text

_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"', re.MULTILINE)
_LOC = re.compile(r"^(\s*)\.loc\s+(\d+)\s+(\d+)")


def interleave(ptx: str, sources: Mapping[str, Sequence[str]]) -> str:
    """``ptx`` with a ``// file:line  source`` comment where each new source line starts."""
    files = {int(number): name for number, name in _FILE.findall(ptx)}
    out, last = [], None
    for line in ptx.splitlines():
        if (m := _LOC.match(line)) and int(m.group(3)) > 0:
            where = (files.get(int(m.group(2)), "?"), int(m.group(3)))
            if where != last:
                out.append(f"{m.group(1)}// {file_name(where[0])}:{where[1]}{source_text(sources, *where)}")
            last = where
        out.append(line)
    return "\n".join(out) + "\n"
