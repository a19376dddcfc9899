"""Probe: does NVRTC give the same PTX, cubin and SASS for the same source and options every time?

Run from the repository root (no GPU needed):  PYTHONPATH=. python3 tools/probes/nvrtc_determinism.py [BUILDS]

Compiles each build below BUILDS times in this process, straight through NVRTC (no cache),
and counts the distinct PTX texts, cubins, main-entry SASS listings (instructions and
operands, label numbers normalised) and register counts. One of each means the compiler is
deterministic for that build; more means the project's exact SASS checks can see another
variant on another run, and the compile cache keeps whichever variant it met first.
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections import Counter

from gemm_driver import kernels
from gemm_driver.cuda import nvrtc
from gemm_driver.inspection import disassemble
from gemm_driver.kernels.sources import included_headers, read_source

BUILDS = [  # (kernel, arch, tunables): the three at a register cap that the CI has seen vary, and mma_sync
    ("bank_conflict_free", "sm_90", {"BM": 128, "BK": 8}),
    ("double_buffered", "sm_75", {"ASYNC": 0, "STAGES": 2}),
    ("vectorized", "sm_80", {}),
    ("mma_sync_bf16", "sm_90", {}),
]


def digest(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()[:10]


def sass_text(cubin: bytes, symbol: str) -> str:
    labels: dict[str, str] = {}
    lines = []
    for ins in disassemble(cubin, symbol).instructions:
        text = f"{ins.predicate} {ins.opcode} {ins.operands}"
        lines.append(re.sub(r"\.L_x_\d+", lambda m: labels.setdefault(m.group(0), f"L{len(labels)}"), text))
    return "\n".join(lines)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    major, minor = nvrtc.version()
    print(f"NVRTC {major}.{minor}, {runs} builds each, one process, no cache")
    print(f"{'build':50s} {'PTX':>4s} {'cubin':>6s} {'SASS':>5s}  registers (count)")
    for name, arch, tunables in BUILDS:
        spec = kernels.KERNELS[name]
        t = spec.resolve(tunables)
        expressions = spec.entry_expressions(t)
        source, headers = read_source(spec.source), included_headers(spec.source)
        ptx, cubin, sass, registers = Counter(), Counter(), Counter(), Counter()
        for _ in range(runs):
            c = nvrtc.compile_cuda(source, spec.source, spec.build_arch(arch), headers=headers, options=spec.options,
                                   name_expressions=list(expressions.values()))
            main_symbol = c.lowered_names[expressions["main"]]
            ptx[digest(c.ptx)] += 1
            cubin[digest(c.cubin)] += 1
            sass[digest(sass_text(c.cubin, main_symbol).encode())] += 1
            registers[c.resources[main_symbol].registers] += 1
        label = f"{name} {arch} {tunables or 'defaults'}"
        regs = ", ".join(f"{r} ({n})" for r, n in sorted(registers.items()))
        print(f"{label:50s} {len(ptx):4d} {len(cubin):6d} {len(sass):5d}  {regs}")


if __name__ == "__main__":
    main()
