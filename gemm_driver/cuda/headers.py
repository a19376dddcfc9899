"""The CUDA system headers NVRTC needs for 16-bit kernels, found in the pip wheels.

The NVRTC wheel ships no ``cuda_bf16.h`` / ``cuda_fp16.h``: they come with the CUDA
runtime wheel (``nvidia-cuda-runtime-cu12`` beside cuda-bindings 12.x,
``nvidia-cuda-runtime`` beside 13.x), and ``cuda.pathfinder`` knows where each layout puts
them. A source that includes a system header (``#include <...>``) is compiled with that
directory on NVRTC's include path, and the bytes of every file under it go into the cache
key: a new wheel is a new build. Sources that include none (the FP32 ladder) need no
package and keep their keys.

``mma.h`` (the nvcuda::wmma API) is deliberately not offered: the runtime wheel has it,
but it includes ``crt/mma.h``, which only the nvcc wheel ships; the WMMA kernels issue
the ``wmma.*`` PTX instructions themselves instead.
"""

from __future__ import annotations

import hashlib
import os
import re
from functools import lru_cache
from typing import Mapping

from .errors import LibraryNotFoundError

# cuda.pathfinder's name for the runtime's header directory (it holds cuda_runtime.h).
_LIBNAME = "cudart"
_ANGLE_INCLUDE = re.compile(rb"^[ \t]*#[ \t]*include[ \t]*<", re.MULTILINE)


class HeaderPackageMissingError(LibraryNotFoundError):
    """A kernel includes CUDA system headers and the wheel that carries them is absent."""


def runtime_package() -> str:
    """The pip package with the runtime headers that matches the installed cuda-bindings."""
    return "nvidia-cuda-runtime" if _bindings_major() >= 13 else "nvidia-cuda-runtime-cu12"


def _bindings_major() -> int:
    try:
        from cuda.bindings import __version__
    except ImportError:  # no bindings at all: NVRTC itself will fail with its own message
        return 12
    return int(__version__.split(".")[0])


@lru_cache(maxsize=1)
def include_directories() -> tuple[str, ...]:
    """The system include directories NVRTC is given, or a one-line error naming the package."""
    from cuda.pathfinder import find_nvidia_header_directory

    found = find_nvidia_header_directory(_LIBNAME)
    if not found or not os.path.isfile(os.path.join(found, "cuda_bf16.h")):
        package = runtime_package()
        raise HeaderPackageMissingError(
            f"the CUDA headers (cuda_bf16.h, cuda_fp16.h) were not found; install them with: pip install {package}"
        )
    return (found,)


def uses_system_headers(source: bytes, headers: Mapping[str, bytes] | None = None) -> bool:
    """Whether the source or one of its quoted headers includes a ``<...>`` header."""
    return any(_ANGLE_INCLUDE.search(text) for text in (source, *(headers or {}).values()))


def include_options(source: bytes, headers: Mapping[str, bytes] | None = None) -> list[str]:
    """``-I`` options for a build: none unless the source needs system headers."""
    if not uses_system_headers(source, headers):
        return []
    return [f"-I{directory}" for directory in include_directories()]


@lru_cache(maxsize=1)
def digest() -> str:
    """A blake2b digest of the relative name and bytes of every file under the directories.

    Computed once per process (a few MB in the cu12 wheel). NVRTC does not say which
    headers it opened, so all of them count: a changed file anywhere is a rebuild.
    """
    h = hashlib.blake2b(digest_size=20)
    for directory in include_directories():
        for relative, path in _files_under(directory):
            data = open(path, "rb").read()
            for label, payload in (("name", relative.encode()), ("bytes", data)):
                h.update(label.encode() + b"\x00" + len(payload).to_bytes(8, "little") + payload)
    return h.hexdigest()


def _files_under(directory: str) -> list[tuple[str, str]]:
    found = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            if os.path.isfile(path):
                found.append((os.path.relpath(path, directory).replace(os.sep, "/"), path))
    return found


def key_for(source: bytes, headers: Mapping[str, bytes] | None = None) -> str:
    """What a build's cache key records about system headers: '' when it uses none."""
    return digest() if uses_system_headers(source, headers) else ""
