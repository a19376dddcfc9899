"""On-disk cache of compiled modules (cubin + PTX + log + resources), which heals itself.

The key hashes every input of a build, each under its own label so that no two inputs
can run together: schema version, compiler and its version, target arch, sorted options,
name expressions, the source bytes and the name and bytes of every header NVRTC is given,
and a digest of the CUDA system headers when the source includes any (``headers.py``).

Every entry is checked when it is read (``cache_entry.validate``): its schema, every field
with its type, the blake2b checksums of the cubin and the PTX, the cubin's ELF magic, and
a resources record for exactly the kernels the cubin holds. An entry that fails any check
(truncated, binary, hand-edited, from another version) is a miss: the build runs again
and the entry is replaced atomically (temp file + ``os.replace``), so a bad entry costs
one rebuild, never a crash or a wrong answer, and nothing reads a half-written file.

``GEMM_DRIVER_CACHE_DIR`` moves the cache, ``GEMM_DRIVER_NO_CACHE=1`` turns it off. A
directory that cannot be written (a file, read-only, under /proc) turns caching off with
one warning line on stderr per process; ``status()`` says which directory is in use or
why none is (``info`` shows it).
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

from . import headers as system_headers
from . import nvrtc
from .cache_entry import SCHEMA_VERSION, InvalidEntry, checksum, encode, validate  # noqa: F401 (the API)
from .nvrtc import Compiled

NO_CACHE_REASON = "GEMM_DRIVER_NO_CACHE is set"


# --- where the cache lives, and whether it can be used ----------------------------------
def cache_dir() -> Path | None:
    """Where entries are meant to live, or None when caching is turned off by the user.

    ``status()`` says whether that directory can actually be used."""
    if os.environ.get("GEMM_DRIVER_NO_CACHE", "") not in ("", "0"):
        return None
    if explicit := os.environ.get("GEMM_DRIVER_CACHE_DIR"):
        return Path(explicit)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "gemm_driver"


_problems: dict[str, str] = {}  # directory -> '' (usable) or why not; probed once per process
_warned: set[str] = set()


def _probe(directory: Path) -> str:
    """'' when entries can be written in ``directory`` (created if need be), else why not.

    Only a real write answers this: permission bits say nothing for root, and /proc or a
    read-only mount refuse writes whatever the bits say."""
    try:
        if directory.exists() and not directory.is_dir():
            return f"{directory} is not a directory"
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".probe.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"cannot create or write in {directory} ({exc.strerror or type(exc).__name__})"
    return ""


def status() -> tuple[Path | None, str]:
    """(the cache directory in use, '') or (None, why caching is off). Never prints."""
    try:
        directory = cache_dir()
    except RuntimeError:  # Path.home() with no HOME and no passwd entry
        return None, "no home directory to keep it in (set GEMM_DRIVER_CACHE_DIR)"
    if directory is None:
        return None, NO_CACHE_REASON
    if str(directory) not in _problems:
        _problems[str(directory)] = _probe(directory)
    problem = _problems[str(directory)]
    return (None, problem) if problem else (directory, "")


def _active_dir() -> Path | None:
    """The directory builds read and write, warning once per process when it is unusable."""
    directory, why = status()
    if directory is None and why != NO_CACHE_REASON and why not in _warned:
        _warned.add(why)
        print(f"gemm-driver: warning: compile cache off: {why}; every build compiles anew "
              "(GEMM_DRIVER_CACHE_DIR picks a writable directory, GEMM_DRIVER_NO_CACHE=1 silences this)",
              file=sys.stderr)
    return directory


# --- the key ----------------------------------------------------------------------------
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


# --- reading and writing entries --------------------------------------------------------
def load(key: str, directory: Path | None = None, *, arch: str | None = None,
         name_expressions: Sequence[str] | None = None) -> Compiled | None:
    """The cached build for ``key``, or None on a miss, an unreadable or an invalid entry."""
    directory = directory or _active_dir()
    if directory is None:
        return None
    try:
        return validate((directory / f"{key}.json").read_bytes(), arch=arch, name_expressions=name_expressions)
    except (OSError, InvalidEntry):
        return None


def store(key: str, compiled: Compiled, directory: Path | None = None) -> None:
    """Write (or replace) an entry atomically; a write that fails is skipped, never fatal."""
    directory = directory or _active_dir()
    if directory is None:
        return
    tmp = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        # A temp name of its own per writer, in the same directory (same file system), then
        # one rename: concurrent writers of one key each replace the entry with a whole one.
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{key}.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(encode(compiled))
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

    Returns the build and whether it came from the cache. A missing or invalid entry is
    rebuilt and (re)written.
    """
    headers = dict(headers or {})
    is_ptx = filename.endswith(".ptx")
    directory = _active_dir()
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
    if directory is not None:
        hit = load(key, directory, arch=arch, name_expressions=name_expressions)
        if hit is not None:
            return hit, True
    if is_ptx:
        compiled = nvrtc.assemble_ptx(source, filename, arch)
    else:
        compiled = nvrtc.compile_cuda(
            source, filename, arch, headers=headers, options=options, name_expressions=name_expressions
        )
    if directory is not None:
        store(key, compiled, directory)
    return compiled, False
