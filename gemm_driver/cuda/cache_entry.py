"""The format of one compile-cache entry (a JSON file) and the checks it passes on every read.

An entry holds a whole build: arch, PTX and cubin (base64, each with its blake2b checksum),
the compiler log, the lowered names of name expressions and the resources of every kernel.
``validate`` accepts an entry only when all of it is usable: the schema is this version's,
every field is there with its type, both checksums match, the cubin is an ELF file whose
kernels are exactly the ones the resources describe, and every lowered name has its
resources. What fails is ``InvalidEntry``, which the cache treats as a miss (cache.py):
nothing downstream (the loader, the SASS view, ``compile``'s table) ever sees a bad entry.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
from dataclasses import asdict, fields
from typing import Sequence

from .nvrtc import ARCH_PATTERN, Compiled, Resources

# 2: cubins stored whole; 3: resources read from the cubin; 4: barriers too;
# 5: blake2b checksums of cubin and PTX, every field checked on read
SCHEMA_VERSION = 5


class InvalidEntry(ValueError):
    """A cache entry that must not be used; the message says which check it failed."""


def checksum(payload: bytes) -> str:
    """The hex blake2b (20 bytes) an entry stores beside its cubin and its PTX."""
    return hashlib.blake2b(payload, digest_size=20).hexdigest()


def encode(compiled: Compiled) -> str:
    """The JSON text of an entry for ``compiled``."""
    return json.dumps(
        {
            "schema": SCHEMA_VERSION,
            "arch": compiled.arch,
            "ptx": base64.b64encode(compiled.ptx).decode(),
            "ptx_blake2b": checksum(compiled.ptx),
            "cubin": base64.b64encode(compiled.cubin).decode(),
            "cubin_blake2b": checksum(compiled.cubin),
            "log": compiled.log,
            "lowered_names": dict(compiled.lowered_names),
            "resources": {name: asdict(r) for name, r in compiled.resources.items()},
            "compile_seconds": compiled.compile_seconds,
        }
    )


_FIELDS = {"schema": int, "arch": str, "ptx": str, "ptx_blake2b": str, "cubin": str, "cubin_blake2b": str,
           "log": str, "lowered_names": dict, "resources": dict, "compile_seconds": (int, float)}
_RESOURCE_FIELDS = {f.name: f.type for f in fields(Resources)}  # "int" or "int | None"


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _binary(data: dict, name: str) -> bytes:
    try:
        payload = base64.b64decode(data[name], validate=True)
    except (binascii.Error, ValueError):
        raise InvalidEntry(f"{name} is not base64") from None
    if checksum(payload) != data[f"{name}_blake2b"]:
        raise InvalidEntry(f"{name} does not match its checksum")
    return payload


def _resources(records: dict, cubin: bytes) -> dict[str, Resources]:
    from .elf import functions

    try:
        kernels = set(functions(cubin))
    except Exception as exc:  # any malformed ELF: struct.error, IndexError, ValueError, ...
        raise InvalidEntry(f"cubin is not a readable ELF file ({type(exc).__name__})") from None
    if not records or set(records) != kernels:
        raise InvalidEntry(f"resources name {sorted(records)}, the cubin holds {sorted(kernels)}")
    out = {}
    for name, record in records.items():
        if not isinstance(record, dict) or set(record) != set(_RESOURCE_FIELDS):
            raise InvalidEntry(f"resources[{name!r}] lacks or adds fields")
        for key, value in record.items():
            nullable = "None" in str(_RESOURCE_FIELDS[key])
            if not ((_is_int(value) and value >= 0) or (nullable and value is None)):
                raise InvalidEntry(f"resources[{name!r}].{key} is {value!r}")
        out[name] = Resources(**record)
    return out


def validate(text: str | bytes, *, arch: str | None = None,
             name_expressions: Sequence[str] | None = None) -> Compiled:
    """The build an entry holds, or InvalidEntry naming the first check it fails.

    ``arch`` and ``name_expressions``, when given, must be the entry's (the key covers
    them, so a mismatch means the file was edited or mixed up)."""
    try:
        data = json.loads(text)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError both are
        raise InvalidEntry(f"not JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise InvalidEntry(f"a JSON {type(data).__name__}, not an object")
    if data.get("schema") != SCHEMA_VERSION or not _is_int(data.get("schema")):
        raise InvalidEntry(f"schema {data.get('schema')!r}, this version reads {SCHEMA_VERSION}")
    for name, kind in _FIELDS.items():
        if not isinstance(data.get(name), kind) or isinstance(data.get(name), bool):
            raise InvalidEntry(f"field {name} missing or of the wrong type")
    if not ARCH_PATTERN.match(data["arch"]) or (arch is not None and data["arch"] != arch):
        raise InvalidEntry(f"arch {data['arch']!r}" + (f", expected {arch}" if arch else ""))
    seconds = data["compile_seconds"]
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidEntry(f"compile_seconds is {seconds!r}")
    lowered = data["lowered_names"]
    if not all(isinstance(k, str) and isinstance(v, str) and v for k, v in lowered.items()):
        raise InvalidEntry("lowered_names must map names to symbols")
    if name_expressions is not None and set(lowered) != set(name_expressions):
        raise InvalidEntry(f"lowered_names for {sorted(lowered)}, expected {sorted(name_expressions)}")
    cubin, ptx = _binary(data, "cubin"), _binary(data, "ptx")
    if cubin[:4] != b"\x7fELF":
        raise InvalidEntry("cubin is not an ELF file")
    resources = _resources(data["resources"], cubin)
    if missing := sorted(set(lowered.values()) - set(resources)):
        raise InvalidEntry(f"no resources for {', '.join(missing)}")
    return Compiled(arch=data["arch"], ptx=ptx, cubin=cubin, log=data["log"], lowered_names=lowered,
                    resources=resources, compile_seconds=float(seconds))
