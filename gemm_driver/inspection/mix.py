"""Instruction mix: how many of the instructions that tell a GEMM kernel's story it has.

Counted over the static SASS (each instruction once, however often it runs). Memory
instructions are split by access width, read from the opcode's modifiers: ``LDG.E.128``
is a 128-bit global load, ``LDS.64`` a 64-bit shared load, and an access with no width
modifier (``LDG.E``, ``LDS``, ``STS.U16``...) moves 32 bits or fewer. Widths tell whether
the compiler vectorised: four LDG.E where one LDG.E.128 would do costs four instructions.
"""

from __future__ import annotations

from typing import Iterable

# Field -> what it counts. The order is the order of report columns.
FIELDS = {
    "ffma": "FP32 fused multiply-add",
    "fmul": "FP32 multiply",
    "fadd": "FP32 add",
    "ldg32": "global loads of 32 bits or fewer",
    "ldg64": "64-bit global loads",
    "ldg128": "128-bit global loads",
    "lds32": "shared loads of 32 bits or fewer",
    "lds64": "64-bit shared loads",
    "lds128": "128-bit shared loads",
    "sts32": "shared stores of 32 bits or fewer",
    "sts64": "64-bit shared stores",
    "sts128": "128-bit shared stores",
    "ldgsts": "global->shared async copies (cp.async)",
    "bar": "barriers (__syncthreads and friends)",
    "hmma": "warp-level tensor-core MMA (mma.sync)",
    "hgmma": "warpgroup tensor-core MMA (wgmma, sm_90a: HGMMA, and QGMMA for FP8)",
    "branches": "branches (BRA/BRX/JMP/JMX)",
    "local": "local-memory loads and stores (LDL/STL: spills, stack arrays)",
    "instructions": "all instructions but NOP padding",
}

_SIZED = {"LDG": "ldg", "LDS": "lds", "STS": "sts"}
_PLAIN = {"FFMA": "ffma", "FMUL": "fmul", "FADD": "fadd", "LDGSTS": "ldgsts", "BAR": "bar",
          "HMMA": "hmma", "HGMMA": "hgmma", "QGMMA": "hgmma", "BRA": "branches", "BRX": "branches", "JMP": "branches",
          "JMX": "branches", "LDL": "local", "STL": "local"}
_MATH = {"FFMA", "FFMA2", "FMUL", "FADD", "DFMA", "HMMA", "HGMMA", "QGMMA", "IMMA", "UTCMMA"}


def width(opcode: str) -> int:
    """Access width in bits from the modifiers; 32 when none is given."""
    modifiers = opcode.split(".")[1:]
    return 128 if "128" in modifiers else 64 if "64" in modifiers else 32


def field(opcode: str) -> str | None:
    """The mix field an opcode counts toward (besides 'instructions'), or None."""
    base = opcode.split(".", 1)[0]
    if base in _SIZED:
        return f"{_SIZED[base]}{width(opcode)}"
    return _PLAIN.get(base)


def is_math(opcode: str) -> bool:
    """Arithmetic that does the GEMM's work (HFMA2.MMA, a register-zeroing idiom, is not)."""
    return opcode.split(".", 1)[0] in _MATH


def executed(instructions) -> list[str]:
    """Opcodes of the instructions that can run. ptxas plants ``@!PT LDS RZ, [RZ]`` (never
    true, so never executed) next to cp.async on sm_80+; counting it would show a phantom LDS."""
    return [i.opcode for i in instructions if i.predicate != "@!PT"]


def count(opcodes: Iterable[str]) -> dict[str, int]:
    """The mix of a sequence of opcodes, every field present."""
    mix = dict.fromkeys(FIELDS, 0)
    for opcode in opcodes:
        if opcode.split(".", 1)[0] == "NOP":
            continue
        mix["instructions"] += 1
        if (name := field(opcode)) is not None:
            mix[name] += 1
    return mix
