"""Where kernel sources live, and the exact headers each one includes.

In a source checkout (or an editable install) ``cu/`` and ``ptx/`` sit beside the
package; a regular install ships them inside it as ``gemm_driver/_sources/``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent
_INCLUDE = re.compile(rb'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


@lru_cache(maxsize=1)
def source_root() -> Path:
    for candidate in (_PACKAGE.parent, _PACKAGE / "_sources"):
        if (candidate / "cu").is_dir() and (candidate / "ptx").is_dir():
            return candidate
    raise FileNotFoundError(f"kernel sources (cu/, ptx/) not found beside or inside {_PACKAGE}")


def read_source(relative: str) -> bytes:
    return (source_root() / relative).read_bytes()


def included_headers(relative: str) -> dict[str, bytes]:
    """Every header a ``.cu`` file includes with quotes, followed recursively, by name.

    Headers are looked up in ``cu/``; a missing one is left for NVRTC to report.
    """
    root = source_root() / "cu"
    found: dict[str, bytes] = {}
    pending = [read_source(relative)]
    while pending:
        for name in _INCLUDE.findall(pending.pop()):
            header = name.decode()
            path = root / header
            if header not in found and path.is_file():
                found[header] = path.read_bytes()
                pending.append(found[header])
    return found
