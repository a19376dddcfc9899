"""Where kernel sources live, and the exact headers each one includes.

In a source checkout (or an editable install) ``cu/`` and ``ptx/`` sit beside the
package; a regular install ships them inside it as ``gemm_driver/_sources/``. ``cu/`` is
laid out by family (``cu/simt/`` the FP32 ladder, ``cu/tensor/``, ``cu/hopper/``,
``cu/harness/`` for the timing harness), each family's headers beside its kernels and the
headers several families share in ``cu/common/``.

A quoted ``#include "x.cuh"`` is resolved as the preprocessor would: first in the
directory of the file that includes it, then in ``cu/``. NVRTC, though, knows in-memory
headers only by the include name as written (a header named ``sub/b.cuh`` that includes
``"a.cuh"`` is served the header named ``a.cuh``), so one build may not include two
different files under the same name: that is refused, naming both.
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


def source_path(relative: str) -> Path:
    """The file of a registry source path such as ``"cu/simt/naive.cu"`` (an absolute path
    is taken as it is: tests register kernels that live under ``tests/``)."""
    return source_root() / relative


def read_source(relative: str) -> bytes:
    return source_path(relative).read_bytes()


def included_headers(relative: str) -> dict[str, bytes]:
    """Every header a ``.cu`` file includes with quotes, followed recursively: include
    name -> bytes. A header that is not found is left for NVRTC to report."""
    cu = source_root() / "cu"
    found: dict[str, bytes] = {}
    origin: dict[str, Path] = {}
    pending = [source_path(relative)]
    while pending:
        including = pending.pop()
        for name in _INCLUDE.findall(including.read_bytes()):
            header = name.decode()
            path = _resolve(header, including.parent, cu)
            if path is None:
                continue
            if header in origin:
                if origin[header] != path:
                    raise ValueError(f"two different headers are included as {header!r} by {relative}: "
                                     f"{origin[header]} and {path}; NVRTC knows headers only by that name, "
                                     "so rename one of them")
                continue
            origin[header], found[header] = path, path.read_bytes()
            pending.append(path)
    return found


def _resolve(header: str, beside: Path, cu: Path) -> Path | None:
    """The including file's directory first, then cu/ (as ``#include "..."`` with ``-I cu``)."""
    for directory in (beside, cu):
        path = (directory / header).resolve()
        if path.is_file():
            return path
    return None
