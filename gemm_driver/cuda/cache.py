"""On-disk cache of compiled modules (cubin + PTX + log + resources).

The key hashes every input of a build, each under its own label so that no two inputs
can run together: schema version, compiler and its version, target arch, sorted options,
name expressions, the source bytes and the name and bytes of every header NVRTC is given,
and a digest of the CUDA system headers when the source includes any (``headers.py``).
Entries are written atomically (temp file + ``os.replace``); an unreadable entry is a
miss, never a crash. ``GEMM_DRIVER_CACHE_DIR`` moves the cache, ``GEMM_DRIVER_NO_CACHE=1``
turns it off.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Mapping, Sequence

from . import headers as system_headers
from . import nvrtc
from .nvrtc import Compiled, Resources

SCHEMA_VERSION = 4  # 2: cubins stored whole; 3: resources read from the cubin; 4: barriers too


def cache_dir() -> Path | None:
    """Where entries live, or None when caching is disabled."""
    if os.environ.get("GEMM_DRIVER_NO_CACHE", "") not in ("", "0"):
        return None
    if explicit := os.environ.get("GEMM_DRIVER_CACHE_DIR"):
        return Path(explicit)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "gemm_driver"


def cache_key(
    *,
    compiler: str,
    compiler_version: Sequence[int],
    arch: str,
    options: Sequence[str],
    name_expressions: Sequence[str],
    filename: str,
    source: bytes,
    headers: Mapping[str, bytes],
    system_headers_digest: str = "",
) -> str:
    """A labelled blake2b digest over every input of one build.

    ``system_headers_digest`` (``headers.digest()``) stands for the CUDA system headers a
    source includes with ``<...>``; it is fed only when given, so builds that use none keep
    their keys.
    """
    digest = hashlib.blake2b(digest_size=20)

    def feed(label: str, payload: bytes) -> None:
        digest.update(label.encode() + b"\x00" + len(payload).to_bytes(8, "little") + payload)

    feed("schema", str(SCHEMA_VERSION).encode())
    feed("compiler", f"{compiler} {'.'.join(map(str, compiler_version))}".encode())
    feed("arch", arch.encode())
    feed("options", "\x1f".join(sorted(options)).encode())
    feed("name_expressions", "\x1f".join(name_expressions).encode())
    feed("filename", filename.encode())
    feed("source", source)
    for name in sorted(headers):
        feed("header-name", name.encode())
        feed("header-bytes", headers[name])
    if system_headers_digest:
        feed("system-headers", system_headers_digest.encode())
    return digest.hexdigest()


def _encode(compiled: Compiled) -> str:
    return json.dumps(
        {
            "schema": SCHEMA_VERSION,
            "arch": compiled.arch,
            "ptx": base64.b64encode(compiled.ptx).decode(),
            "cubin": base64.b64encode(compiled.cubin).decode(),
            "log": compiled.log,
            "lowered_names": dict(compiled.lowered_names),
            "resources": {name: asdict(r) for name, r in compiled.resources.items()},
            "compile_seconds": compiled.compile_seconds,
        }
    )


def _decode(text: str) -> Compiled:
    data = json.loads(text)
    if data.get("schema") != SCHEMA_VERSION:
        raise ValueError("cache entry from another schema")
    return Compiled(
        arch=data["arch"],
        ptx=base64.b64decode(data["ptx"]),
        cubin=base64.b64decode(data["cubin"]),
        log=data["log"],
        lowered_names=data["lowered_names"],
        resources={name: Resources(**r) for name, r in data["resources"].items()},
        compile_seconds=float(data["compile_seconds"]),
    )


def load(key: str, directory: Path | None = None) -> Compiled | None:
    """The cached build for ``key``, or None on a miss or an unreadable entry."""
    directory = directory or cache_dir()
    if directory is None:
        return None
    try:
        return _decode((directory / f"{key}.json").read_text())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def store(key: str, compiled: Compiled, directory: Path | None = None) -> None:
    """Write an entry atomically; a cache that cannot be written is silently skipped."""
    directory = directory or cache_dir()
    if directory is None:
        return
    tmp = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{key}.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(_encode(compiled))
        os.replace(tmp, directory / f"{key}.json")
    except OSError:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def build(
    *,
    filename: str,
    source: bytes,
    arch: str,
    headers: Mapping[str, bytes] | None = None,
    options: Sequence[str] = (),
    name_expressions: Sequence[str] = (),
) -> tuple[Compiled, bool]:
    """Compile (``.cu`` via NVRTC, ``.ptx`` via nvJitLink) through the cache.

    Returns the build and whether it came from the cache.
    """
    headers = dict(headers or {})
    is_ptx = filename.endswith(".ptx")
    key = cache_key(
        compiler="nvjitlink" if is_ptx else "nvrtc",
        compiler_version=nvrtc.jitlink_version() if is_ptx else nvrtc.version(),
        arch=arch,
        options=options,
        name_expressions=name_expressions,
        filename=filename,
        source=source,
        headers=headers,
        system_headers_digest="" if is_ptx else system_headers.key_for(source, headers),
    )
    if (hit := load(key)) is not None:
        return hit, True
    if is_ptx:
        compiled = nvrtc.assemble_ptx(source, filename, arch)
    else:
        compiled = nvrtc.compile_cuda(
            source, filename, arch, headers=headers, options=options, name_expressions=name_expressions
        )
    store(key, compiled)
    return compiled, False
