"""Per-kernel resources read straight from a cubin (an ELF file), no tools needed.

Why not only the ``ptxas -v`` log: on a machine with a driver, NVRTC and nvJitLink answer
a repeated compile from their own cache and then print no log at all, so the log is not
always there. The cubin always is. It records, per kernel:

- in ``.nv.info``: attribute records (EIATTR_*) holding the register count and the
  stack frame size of each function symbol;
- ``.nv.shared.<kernel>``: a NOBITS section as large as the kernel's static shared memory;
- ``.nv.constant0.<kernel>``: constant bank 0 (parameters and compiler constants).

The attribute records are 4-byte headers (format, attribute, 16-bit value); a record of
format EIFMT_SVAL carries a payload whose length is that 16-bit value.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

EIFMT_BVAL, EIFMT_HVAL = 0x02, 0x03  # a value inside the record itself (8 or 16 bits)
EIFMT_SVAL = 0x04
EIATTR_FRAME_SIZE = 0x11
EIATTR_REGCOUNT = 0x2F
EIATTR_NUM_BARRIERS = 0x4C


@dataclass(frozen=True)
class CubinFunction:
    registers: int
    frame_bytes: int  # per-thread stack frame: local memory the code uses (spills included)
    shared_bytes: int
    constant_bytes: int
    barriers: int  # named barriers (bar.sync ids) the code uses: they limit blocks per SM too


def _sections(image: bytes) -> list[tuple[str, int, int, int, int, int]]:
    """(name, type, offset, size, link, flags) of every section, in section-index order."""
    if image[:4] != b"\x7fELF" or image[4] != 2:
        raise ValueError("not a 64-bit ELF cubin")
    (shoff,) = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * shentsize) for i in range(shnum)]
    names_offset = headers[shstrndx][4]

    def name(offset: int) -> str:
        end = image.index(b"\x00", names_offset + offset)
        return image[names_offset + offset : end].decode()

    return [(name(h[0]), h[1], h[4], h[5], h[6], h[2]) for h in headers]


def _symbol_names(image: bytes, sections: list) -> list[str]:
    _, _, offset, size, link, _ = next(s for s in sections if s[0] == ".symtab")
    strtab_offset = sections[link][2]  # sh_link is the index of the symbols' string table
    names = []
    for i in range(size // 24):
        (name_offset,) = struct.unpack_from("<I", image, offset + i * 24)
        end = image.index(b"\x00", strtab_offset + name_offset)
        names.append(image[strtab_offset + name_offset : end].decode())
    return names


def _attributes(image: bytes, offset: int, size: int):
    """(attribute, payload) for each EIFMT_SVAL record of an .nv.info section."""
    position, end = offset, offset + size
    while position + 4 <= end:
        fmt, attr, value = struct.unpack_from("<BBH", image, position)
        position += 4
        if fmt == EIFMT_SVAL:
            yield attr, image[position : position + value]
            position += value


def _header_values(image: bytes, offset: int, size: int):
    """(attribute, value) for each EIFMT_BVAL / EIFMT_HVAL record (the value in the record)."""
    position, end = offset, offset + size
    while position + 4 <= end:
        fmt, attr, value = struct.unpack_from("<BBH", image, position)
        position += 4
        if fmt in (EIFMT_BVAL, EIFMT_HVAL):
            yield attr, value
        elif fmt == EIFMT_SVAL:
            position += value


def _barrier_counts(sections: list) -> dict[str, int]:
    """Named barriers per kernel. ptxas 12.x puts the count in bits 20-26 of the kernel's
    .text section flags; ptxas 13 writes EIATTR_NUM_BARRIERS (a BVAL record) in the
    kernel's own .nv.info.<name> section instead. Both checked against "Used N barriers"."""
    counts: dict[str, int] = {}
    for name, _, _, _, _, flags in sections:
        if name.startswith(".text."):
            counts[name[len(".text."):]] = (flags >> 20) & 0x7F
    return counts


def functions(image: bytes) -> dict[str, CubinFunction]:
    """Resources of every kernel in the cubin, by (mangled) name."""
    sections = _sections(image)
    symbols = _symbol_names(image, sections)
    sizes = {name: size for name, _, _, size, _, _ in sections}
    barriers = _barrier_counts(sections)
    for name, _, offset, size, _, _ in sections:
        if name.startswith(".nv.info."):
            for attr, value in _header_values(image, offset, size):
                if attr == EIATTR_NUM_BARRIERS:
                    barriers[name[len(".nv.info."):]] = value
    per_symbol: dict[str, dict[int, int]] = {}
    for name, _, offset, size, _, _ in sections:
        if name != ".nv.info":
            continue
        for attr, payload in _attributes(image, offset, size):
            if attr in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE) and len(payload) == 8:
                index, value = struct.unpack("<II", payload)
                per_symbol.setdefault(symbols[index], {})[attr] = value
    kernels = [name[len(".text."):] for name in sizes if name.startswith(".text.")]
    return {
        name: CubinFunction(
            registers=per_symbol.get(name, {}).get(EIATTR_REGCOUNT, 0),
            frame_bytes=per_symbol.get(name, {}).get(EIATTR_FRAME_SIZE, 0),
            shared_bytes=sizes.get(f".nv.shared.{name}", 0),
            constant_bytes=sizes.get(f".nv.constant0.{name}", 0),
            barriers=barriers.get(name, 0),
        )
        for name in kernels
    }
