"""SASS of one kernel: disassemble a cubin with nvdisasm and parse it into instructions.

``nvdisasm -c -g`` prints code sections only, with ``//## File "...", line N`` markers
taken from the .debug_line section that ``-lineinfo`` puts in the cubin, so every
instruction carries the source line it came from. No ELF parsing of our own: the
disassembler's text is the single source of truth.

The main loop is found by a simple, documented rule (``main_loop``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Mapping, Sequence

from ..cuda.errors import GemmDriverError
from .mix import is_math
from .source import file_name, source_text
from .tools import run_on_cubin

_SECTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
_LINE_INFO = re.compile(r'^\s*//## File "([^"]+)", line (\d+)')
_LABEL = re.compile(r"^([.\w$]+):\s*$")
_INSTRUCTION = re.compile(
    r"^\s*/\*([0-9a-f]+)\*/\s+(?:(@!?U?P(?:T|\d+))\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);"
)
_TARGET = re.compile(r"`\(([^)]+)\)")


@dataclass(frozen=True)
class Instruction:
    address: int
    opcode: str  # with modifiers, e.g. "LDG.E.128.CONSTANT"
    operands: str = ""
    predicate: str = ""  # "@P0", "@!P1" or ""
    file: str | None = None  # source file name (no directory), from -lineinfo
    line: int | None = None
    target: str | None = None  # label a branch jumps to

    @property
    def base(self) -> str:
        """The opcode without modifiers: "LDG" for "LDG.E.128"."""
        return self.opcode.split(".", 1)[0]


@dataclass(frozen=True)
class Sass:
    function: str
    instructions: tuple[Instruction, ...]
    labels: Mapping[str, int]  # label -> address of the instruction after it

    def labels_at(self, address: int) -> list[str]:
        return [name for name, at in self.labels.items() if at == address]


@dataclass(frozen=True)
class Loop:
    label: str
    start: int  # address of the first instruction (the branch target)
    end: int  # address of the backward branch
    instructions: tuple[Instruction, ...]


def parse(text: str, function: str) -> Sass:
    """The instructions of ``function`` in nvdisasm output; other sections are skipped."""
    found: list[str] = []
    instructions: list[Instruction] = []
    labels: dict[str, int] = {}
    pending: list[str] = []
    section = None
    where: tuple[str | None, int | None] = (None, None)
    for raw in text.splitlines():
        if m := _SECTION.match(raw):
            section, where = m.group(1), (None, None)
            found.append(section)
        elif section != function:
            continue
        elif m := _LINE_INFO.match(raw):
            where = (file_name(m.group(1)), int(m.group(2)))
        elif m := _LABEL.match(raw):
            pending.append(m.group(1))
        elif m := _INSTRUCTION.match(raw):
            address, predicate, opcode, operands = int(m[1], 16), m[2] or "", m[3], m[4].strip()
            target = _TARGET.search(operands)
            instructions.append(Instruction(address, opcode, operands, predicate, *where,
                                            target.group(1) if target else None))
            labels.update((name, address) for name in pending)
            pending.clear()
    if function not in found:
        raise GemmDriverError(f"function {function!r} not in the disassembly; it holds {', '.join(found) or 'none'}")
    return Sass(function, tuple(instructions), labels)


@lru_cache(maxsize=64)
def disassemble(cubin: bytes, function: str) -> Sass:
    """Parsed SASS of ``function`` in ``cubin`` (cached: the same cubin is asked for often)."""
    return parse(run_on_cubin("nvdisasm", ["-c", "-g"], cubin), function)


def loops(sass: Sass) -> list[Loop]:
    """Every backward branch as a loop: from the label it jumps to, through the branch."""
    found = []
    for branch in sass.instructions:
        start = sass.labels.get(branch.target or "")
        if branch.base == "BRA" and start is not None and start <= branch.address:
            body = tuple(i for i in sass.instructions if start <= i.address <= branch.address)
            found.append(Loop(branch.target, start, branch.address, body))
    return found


def main_loop(sass: Sass) -> Loop | None:
    """The loop that does the kernel's arithmetic, or None if no loop does any.

    Rule: count, for each loop, the math instructions (FFMA/FMUL/FADD/HMMA/HGMMA...) in its
    *own* body, leaving out those of loops nested inside it; take the loop with the most,
    and of equals the shortest. An outer K loop around an inner unrolled loop therefore
    loses to the inner loop, and a remainder loop (same FFMAs, fewer of them) loses to the
    unrolled main body.
    """
    candidates = loops(sass)

    def own_math(loop: Loop) -> int:
        inner = [other for other in candidates if other is not loop
                 and loop.start <= other.start and other.end <= loop.end]
        return sum(1 for i in loop.instructions
                   if is_math(i.opcode) and not any(o.start <= i.address <= o.end for o in inner))

    scored = [(own_math(loop), -(loop.end - loop.start), loop) for loop in candidates]
    best = max(scored, key=lambda s: s[:2], default=None)
    return best[2] if best and best[0] > 0 else None


def render(sass: Sass, instructions: Iterable[Instruction] | None = None,
           sources: Mapping[str, Sequence[str]] | None = None) -> str:
    """Readable listing: labels, addresses, and a ``// file:line  source`` comment each
    time the source line changes (the text comes from ``sources`` when given)."""
    out, last = [], None
    for ins in sass.instructions if instructions is None else instructions:
        out.extend(f"{label}:" for label in sass.labels_at(ins.address))
        if ins.file and (ins.file, ins.line) != last:
            out.append(f"        // {ins.file}:{ins.line}{source_text(sources, ins.file, ins.line)}")
        last = (ins.file, ins.line)
        out.append(f"  /*{ins.address:04x}*/ {ins.predicate:>5} {ins.opcode} {ins.operands} ;".rstrip())
    return "\n".join(out) + "\n"

