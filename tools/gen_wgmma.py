#!/usr/bin/env python3
"""Write cu/hopper/wgmma.cuh, the wgmma.mma_async wrappers the Hopper rungs issue (BF16, FP16,
TF32, and FP8 in each pair of e4m3 and e5m2 operands).

    python tools/gen_wgmma.py            # rewrite cu/hopper/wgmma.cuh
    python tools/gen_wgmma.py --check    # exit 1 if the committed file differs from the output

The header is committed as source and never generated at build time. Each wgmma instruction
names every accumulator register of a thread (N/2 of them, up to 128), so the operand lists
are long and mechanical: they are written out here instead of by hand. Edit this script, run
it, and commit both; tests/test_hopper_specs.py checks that the two agree byte for byte.
"""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:  # loaded by file path (the tests), not run
    sys.path.append(str(Path(__file__).resolve().parent))  # last: tools/inspect.py must not shadow inspect
from _toolkit import Parser, run  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "cu" / "hopper" / "wgmma.cuh"
NS = (64, 128, 256)  # the wgmma N extents the rungs use
NS_FP8 = (8, 16, 32, 64, 128, 256)  # FP8 also narrow ones, for the FP8 decode tiles' few rows of A
# FP8 (A, B) formats, in the order of gemm_driver/problem.py's FP8_TYPES: the index is fp8_t's TYPES
# (bit 0: A is e5m2, bit 1: B is), and the namespace is its name there
FP8_PAIRS = (("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e5m2"))
NS_16BIT = (8, 16, 32, 64, 128, 160, 192, 256)  # 16-bit types also: narrow ones for the decode tiles' few
# rows of A (decode_body.cuh), 160 for their 160-row ping-pong tiles, 192 for any_shape's 128 x 192 tiles
# (N a multiple of 192, not of 256)
TYPES_16BIT = (("bf16", "bf16"), ("fp16", "f16"))  # (namespace, PTX type)


def regs(first: int, count: int) -> str:
    """'%first, ..., %(first + count - 1)': PTX operand numbers."""
    return ", ".join(f"%{i}" for i in range(first, first + count))


def outs(count: int) -> str:
    """The '+f'(d[i]) output constraints, eight to a line."""
    lines = []
    for start in range(0, count, 8):
        lines.append("          " + ", ".join(f'"+f"(d[{i}])' for i in range(start, min(start + 8, count))))
    return ",\n".join(lines)


def ss_16bit(n: int) -> str:
    r = n // 2
    return f'''
// D(64x{n}) += A(64x16, smem) * B(16x{n}, smem), FP32 D; TRANS_A = 1: A is M-major (0: K-major),
// TRANS_B = 1: B is N-major (0: K-major).
template <int TRANS_A, int TRANS_B>
__device__ __forceinline__ void mma_ss_n{n}(float (&d)[{r}], unsigned long long a, unsigned long long b, int scale_d) {{
    asm volatile(
        "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{r + 2}, 0;\\n"
        "wgmma.mma_async.sync.aligned.m64n{n}k16.f32." HOPPER_TYPE_STR "." HOPPER_TYPE_STR " "
        "{{{regs(0, r)}}}, %{r}, %{r + 1}, p, 1, 1, %{r + 3}, %{r + 4};\\n}}\\n"
        : {outs(r).lstrip()}
        : "l"(a), "l"(b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B));
}}'''


def ss_16bit_any() -> str:
    """The 16-bit wrappers by N, for the dispatch below."""
    chain = "\n".join(f"    {'if' if i == 0 else 'else if'} constexpr (N == {n}) mma_ss_n{n}<TRANS_A, TRANS_B>(d, a, b, scale_d);"
                      for i, n in enumerate(NS_16BIT))
    return f'''
template <int N, int TRANS_A, int TRANS_B>
__device__ __forceinline__ void mma_ss_any(float (&d)[N / 2], unsigned long long a, unsigned long long b, int scale_d) {{
{chain}
}}'''


def ss_k_major(n: int, name: str, a_type: str, b_type: str, k: int, note: str) -> str:
    """The wrapper ``name`` of both operands from shared memory, K-major, no transpose operands:
    TF32 (k8) and FP8 (k32); ``note`` is the comment's text after the shapes."""
    r = n // 2
    return f'''
// D(64x{n}) += A(64x{k}, smem{note}
__device__ __forceinline__ void {name}(float (&d)[{r}], unsigned long long a, unsigned long long b, int scale_d) {{
    asm volatile(
        "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{r + 2}, 0;\\n"
        "wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{a_type}.{b_type} "
        "{{{regs(0, r)}}}, %{r}, %{r + 1}, p, 1, 1;\\n}}\\n"
        : {outs(r).lstrip()}
        : "l"(a), "l"(b), "r"(scale_d));
}}'''


def ss_tf32(n: int) -> str:
    return ss_k_major(n, f"mma_tf32_ss_n{n}", "tf32", "tf32", 8,
                      f", K-major) * B(8x{n}, smem, K-major), TF32 operands, FP32 D.")


def rs_tf32(n: int) -> str:
    r = n // 2
    return f'''
// D(64x{n}) += A(64x8, registers) * B(8x{n}, smem, K-major), TF32 operands, FP32 D.
__device__ __forceinline__ void mma_tf32_rs_n{n}(float (&d)[{r}], const unsigned (&a)[4], unsigned long long b, int scale_d) {{
    asm volatile(
        "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{r + 5}, 0;\\n"
        "wgmma.mma_async.sync.aligned.m64n{n}k8.f32.tf32.tf32 "
        "{{{regs(0, r)}}}, {{%{r}, %{r + 1}, %{r + 2}, %{r + 3}}}, %{r + 4}, p, 1, 1;\\n}}\\n"
        : {outs(r).lstrip()}
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));
}}'''


def fp8_namespace(a_type: str, b_type: str) -> str:
    """The pair's name in FP8_TYPES: one format's, or A's and B's joined by _."""
    return a_type if a_type == b_type else f"{a_type}_{b_type}"


def ss_fp8(n: int, a_type: str, b_type: str) -> str:
    return ss_k_major(n, f"mma_ss_n{n}", a_type, b_type, 32,
                      f", K-major, {a_type}) * B(32x{n}, smem, K-major, {b_type}), FP32 D. FP8 wgmma\n"
                      "// has no transpose operands: both matrices are read K-major.")


def ss_fp8_any() -> str:
    """A pair's FP8 wrappers by N, for mma_ss's dispatch."""
    chain = "\n".join(f"    {'if' if i == 0 else 'else if'} constexpr (N == {n}) mma_ss_n{n}(d, a, b, scale_d);"
                      for i, n in enumerate(NS_FP8))
    return f'''
template <int N>
__device__ __forceinline__ void mma_ss_any(float (&d)[N / 2], unsigned long long a, unsigned long long b, int scale_d) {{
{chain}
}}'''


HEAD = '''// wgmma.cuh -- the wgmma.mma_async instructions the Hopper rungs issue, one wrapper per shape.
//
// GENERATED by tools/gen_wgmma.py, committed as source: each instruction must name all N/2
// accumulator registers of a thread, which is long and mechanical, so it is written out by a
// script instead of by hand. Edit the script, not this file.
//
// Conventions: d[] is the thread's FP32 accumulator fragment in the PTX order (d[4j + 2h + e] is
// row 16*warp + lane/4 + 8h, column 8j + 2*(lane%4) + e of the 64 x N tile); a and b are shared
// memory matrix descriptors (see smem_desc in hopper_common.cuh); scale_d == 0 ignores the old
// d (D = A*B), which starts a tile without zeroing 128 registers first.
#pragma once
#include "hopper_common.cuh"

namespace hopper {
namespace wgmma_ops {
'''

DISPATCH = """
// One k step of a 64 x N warpgroup tile for any element type: k16 for bf16/fp16 (B N-major when
// TRANS_B), k8 for tf32 and k32 for FP8 (both operands K-major; TRANS_B must be 0), the FP8
// wrappers of the (A, B) formats Elem::TYPES names (hopper_common.cuh's fp8_t).
// TRANS_A = 1 reads A M-major (bf16/fp16 only).
template <class Elem, int N, int TRANS_B, int TRANS_A = 0>
__device__ __forceinline__ void mma_ss(float (&d)[N / 2], unsigned long long a, unsigned long long b, int scale_d) {
    if constexpr (Elem::id == ElemId::bf16 || Elem::id == ElemId::fp16) {
        static_assert(@N16_TEST@,
                      "16-bit wgmma wrappers exist for N = @N16_LIST@");
        if constexpr (Elem::id == ElemId::bf16) wgmma_ops::bf16::mma_ss_any<N, TRANS_A, TRANS_B>(d, a, b, scale_d);
        else wgmma_ops::fp16::mma_ss_any<N, TRANS_A, TRANS_B>(d, a, b, scale_d);
    } else if constexpr (Elem::id == ElemId::fp8) {
        static_assert(@FP8_TEST@,
                      "FP8 wgmma wrappers exist for N = @FP8_LIST@");
        static_assert(TRANS_B == 0 && TRANS_A == 0, "FP8 wgmma reads both operands K-major");
        static_assert(Elem::TYPES >= 0 && Elem::TYPES < @FP8_PAIRS@, "FP8 TYPES: bit 0 A is e5m2, bit 1 B is");
@FP8_DISPATCH@
    } else {
        static_assert(N == 64 || N == 128 || N == 256, "tf32 wgmma wrappers exist for N = 64, 128, 256");
        static_assert(TRANS_B == 0 && TRANS_A == 0, "tf32 wgmma reads both operands K-major");
        if constexpr (N == 64) wgmma_ops::tf32::mma_tf32_ss_n64(d, a, b, scale_d);
        else if constexpr (N == 128) wgmma_ops::tf32::mma_tf32_ss_n128(d, a, b, scale_d);
        else wgmma_ops::tf32::mma_tf32_ss_n256(d, a, b, scale_d);
    }
}

// The tf32 form with A in registers (a[] in the PTX m64k8 A-fragment order).
template <int N>
__device__ __forceinline__ void mma_tf32_rs(float (&d)[N / 2], const unsigned (&a)[4], unsigned long long b, int scale_d) {
    static_assert(N == 64 || N == 128 || N == 256, "wgmma wrappers exist for N = 64, 128, 256");
    if constexpr (N == 64) wgmma_ops::tf32::mma_tf32_rs_n64(d, a, b, scale_d);
    else if constexpr (N == 128) wgmma_ops::tf32::mma_tf32_rs_n128(d, a, b, scale_d);
    else wgmma_ops::tf32::mma_tf32_rs_n256(d, a, b, scale_d);
}
"""


def fp8_dispatch() -> str:
    """mma_ss's FP8 branch: one namespace per (A, B) pair of FP8_PAIRS, by Elem::TYPES."""
    lines = []
    for i, pair in enumerate(FP8_PAIRS):
        test = "if" if i == 0 else "else if" if i < len(FP8_PAIRS) - 1 else "else"
        cond = f" constexpr (Elem::TYPES == {i})" if test != "else" else ""
        lines.append(f"        {test}{cond} wgmma_ops::{fp8_namespace(*pair)}::mma_ss_any<N>(d, a, b, scale_d);")
    return "\n".join(lines)


def render() -> str:
    """The full text of wgmma.cuh."""
    parts = [HEAD]
    for namespace, type_str in TYPES_16BIT:
        parts.append(f'\nnamespace {namespace} {{\n#define HOPPER_TYPE_STR "{type_str}"')
        parts.extend(ss_16bit(n) for n in NS_16BIT)
        parts.append(ss_16bit_any())
        parts.append(f"#undef HOPPER_TYPE_STR\n}}  // namespace {namespace}")
    parts.append("\nnamespace tf32 {")
    for n in NS:
        parts.append(ss_tf32(n))
        parts.append(rs_tf32(n))
    parts.append("}  // namespace tf32")
    for pair in FP8_PAIRS:  # FP8: a namespace per (A, B) formats, named as FP8_TYPES names the pair
        parts.append(f"\nnamespace {fp8_namespace(*pair)} {{")
        parts.extend(ss_fp8(n, *pair) for n in NS_FP8)
        parts.append(ss_fp8_any())
        parts.append(f"}}  // namespace {fp8_namespace(*pair)}")
    parts.append("\n}  // namespace wgmma_ops\n")
    parts.append(DISPATCH.replace("@N16_TEST@", " || ".join(f"N == {n}" for n in NS_16BIT))
                 .replace("@N16_LIST@", ", ".join(map(str, NS_16BIT)))
                 .replace("@FP8_TEST@", " || ".join(f"N == {n}" for n in NS_FP8))
                 .replace("@FP8_LIST@", ", ".join(map(str, NS_FP8)))
                 .replace("@FP8_PAIRS@", str(len(FP8_PAIRS)))
                 .replace("@FP8_DISPATCH@", fp8_dispatch()))
    parts.append("}  // namespace hopper\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog=Path(__file__).name, description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead of writing it")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if OUT.read_text() != text:
            print(f"{OUT} differs from what tools/gen_wgmma.py writes; run it and commit both", file=sys.stderr)
            return 1
        print(f"{OUT} is up to date")
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(text.encode())} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(run(main, Path(__file__).name))
