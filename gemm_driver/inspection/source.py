"""The source text behind a kernel's line info, for interleaving with PTX and SASS.

NVRTC records file names as it was given them (joined to the working directory), so
lines are looked up by bare file name: the kernel's own file and every header it includes.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from ..kernels.sources import included_headers, read_source
from ..kernels.spec import KernelSpec


def source_lines(spec: KernelSpec) -> dict[str, list[str]]:
    """File name -> its lines, for ``spec``'s source and the headers it includes."""
    files = {spec.source: read_source(spec.source)}
    if spec.kind == "cu":
        files.update(included_headers(spec.source))
    return {file_name(name): text.decode(errors="replace").splitlines() for name, text in files.items()}


def source_text(sources: Mapping[str, Sequence[str]] | None, file: str, line: int) -> str:
    """'  <the source line, stripped>', or '' when the file or line is unknown."""
    lines = (sources or {}).get(file_name(file), ())
    return f"  {lines[line - 1].strip()}" if 0 < line <= len(lines) else ""


def file_name(path: str) -> str:
    """The bare file name of a path NVRTC recorded ("/cwd/smem_tiled.cu" -> "smem_tiled.cu")."""
    return path.replace("\\", "/").rsplit("/", 1)[-1]
