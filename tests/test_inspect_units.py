"""The inspection tools' parsers and arithmetic, on literal inputs (no compiler needed)."""

from __future__ import annotations

import pytest

from gemm_driver.cuda.errors import GemmDriverError
from gemm_driver.inspection import mix, sass
from gemm_driver.inspection.occupancy import occupancy
from gemm_driver.inspection.ptx import interleave


@pytest.mark.parametrize("opcode, field", [
    ("LDG.E.128", "ldg128"),
    ("LDG.E.128.CONSTANT", "ldg128"),
    ("LDG.E.64.CONSTANT", "ldg64"),
    ("LDG.E.CONSTANT", "ldg32"),
    ("LDG.E.U16", "ldg32"),
    ("LDS", "lds32"),
    ("LDS.U.128", "lds128"),
    ("LDS.64", "lds64"),
    ("STS.128", "sts128"),
    ("STS", "sts32"),
    ("LDGSTS.E.BYPASS.LTC128B.128", "ldgsts"),  # not a 128-bit LDG: its own field
    ("BAR.SYNC.DEFER_BLOCKING", "bar"),
    ("HMMA.16816.F32.TF32", "hmma"),
    ("HGMMA.64x128x8.F32.TF32", "hgmma"),
    ("FFMA", "ffma"),
    ("FMUL", "fmul"),
    ("FADD.FTZ", "fadd"),
    ("BRA", "branches"),
    ("STL.64", "local"),
    ("LDL", "local"),
    ("IMAD.WIDE", None),
    ("HFMA2.MMA", None),
])
def test_mix_field_of_opcode(opcode, field):
    assert mix.field(opcode) == field


def test_mix_skips_instructions_that_can_never_run():
    never = sass.Instruction(0x10, "LDS", "RZ, [RZ]", predicate="@!PT")
    sometimes = sass.Instruction(0x20, "LDS", "R1, [R2]", predicate="@!P0")
    assert mix.executed([never, sometimes]) == ["LDS"]
    assert mix.count(mix.executed([never, sometimes]))["lds32"] == 1


def test_mix_counts_every_field_and_skips_nop_padding():
    counts = mix.count(["FFMA", "FFMA", "LDS.128", "HFMA2.MMA", "NOP", "NOP", "EXIT"])
    assert set(counts) == set(mix.FIELDS)
    assert (counts["ffma"], counts["lds128"], counts["instructions"]) == (2, 1, 5)


def test_register_zeroing_idiom_is_not_math():
    assert mix.is_math("FFMA") and mix.is_math("HGMMA.64x64x8.F32") and not mix.is_math("HFMA2.MMA")


# An nvdisasm -c -g excerpt: an outer loop (.L_x_0) holding one FFMA around an inner loop
# (.L_x_1) holding two, a trap self-loop, and a second function that must be ignored.
LISTING = """\
\t.section\t.text.k,"ax",@progbits
k:
\t//## File "/cwd/k.cu", line 5
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_0:
\t//## File "/cwd/k.cu", line 7
        /*0010*/                   FFMA R2, R3, R4, R2 ;
.L_x_1:
        /*0020*/                   LDS.128 R4, [R6] ;
        /*0030*/                   FFMA R2, R4, R5, R2 ;
        /*0040*/                   FFMA R2, R6, R7, R2 ;
        /*0050*/               @P0 BRA `(.L_x_1) ;
        /*0060*/              @!P1 BRA `(.L_x_0) ;
        /*0070*/                   EXIT ;
.L_x_2:
        /*0080*/                   BRA `(.L_x_2);
\t.section\t.text.other,"ax",@progbits
        /*0000*/                   HMMA.16816.F32 R0, R4, R8, R0 ;
"""


def test_sass_parse_keeps_only_the_function_with_lines_predicates_and_targets():
    code = sass.parse(LISTING, "k")
    assert [i.address for i in code.instructions] == list(range(0, 0x90, 0x10))
    lds = code.instructions[2]
    assert (lds.opcode, lds.base, lds.operands, lds.file, lds.line) == ("LDS.128", "LDS", "R4, [R6]", "k.cu", 7)
    branch = code.instructions[5]
    assert (branch.predicate, branch.target) == ("@P0", ".L_x_1")
    assert code.labels[".L_x_1"] == 0x20
    assert "HMMA" not in {i.base for i in code.instructions}


def test_sass_parse_names_the_functions_it_found_when_asked_for_another():
    with pytest.raises(GemmDriverError, match="k, other"):
        sass.parse(LISTING, "missing")


def test_main_loop_is_the_loop_with_most_math_of_its_own():
    code = sass.parse(LISTING, "k")
    assert len(sass.loops(code)) == 3  # outer, inner, the trap
    loop = sass.main_loop(code)
    assert (loop.label, loop.start, loop.end) == (".L_x_1", 0x20, 0x50)
    assert mix.count(i.opcode for i in loop.instructions)["ffma"] == 2


def test_main_loop_is_none_without_a_loop_doing_math():
    assert sass.main_loop(sass.parse(LISTING.replace("FFMA", "IADD3"), "k")) is None


def test_render_marks_source_lines_once_per_change():
    code = sass.parse(LISTING, "k")
    text = sass.render(code, sources={"k.cu": ["", "", "", "", "int a;", "", "acc += x;"]})
    assert text.count("// k.cu:7  acc += x;") == 1 and "// k.cu:5  int a;" in text
    assert ".L_x_1:" in text and "@P0 BRA `(.L_x_1) ;" in text


PTX = """\
\t.loc\t1 3 5
\tmov.u32 \t%r1, %tid.x;
\t.loc\t1 3 9
\tadd.s32 \t%r2, %r1, 1;
\t.loc\t1 0 5
\t.loc\t2 2 1, function_name $L__info_string0, inlined_at 1 3 5
\tmul.f32 \t%f1, %f2, %f3;
\t.file\t1 "/cwd/k.cu"
\t.file\t2 "/cwd/h.cuh"
"""


def test_ptx_interleave_adds_one_comment_per_new_source_line_and_removes_nothing():
    text = interleave(PTX, {"k.cu": ["", "", "int row = tid;"], "h.cuh": ["", "return a * b;"]})
    assert text.count("// k.cu:3  int row = tid;") == 1
    assert "// h.cuh:2  return a * b;" in text
    assert ":0" not in text  # line 0 = no particular line
    assert [line for line in text.splitlines() if "//" not in line] == PTX.splitlines()


@pytest.mark.parametrize("arch, threads, regs, smem, dynamic, blocks, fraction, limit", [
    # smem_tiled TILE=32: 32 warps a block, 64 a SM; 32 regs = 1024 a warp fits 64 warps.
    ("sm_90", 1024, 32, 8192, 0, 2, 1.0, "warps"),
    ("sm_90a", 1024, 32, 8192, 0, 2, 1.0, "warps"),
    # smem_tiled TILE=16: 8 warps a block; 2 KiB + 1 KiB reserved is no limit.
    ("sm_90", 256, 32, 2048, 0, 8, 1.0, "warps"),
    # 128 regs = 4096 a warp: 16384 / 4096 = 4 warps a sub-partition, 16 a SM, 2 blocks of 8.
    ("sm_90", 256, 128, 0, 0, 2, 0.25, "registers"),
    # 33 regs round up to 1280 a warp: 12 warps a sub-partition, 48 a SM: one block of 32.
    ("sm_90", 1024, 33, 0, 0, 1, 0.5, "registers"),
    # sm_86 has 48 warps a SM: one 32-warp block.
    ("sm_86", 1024, 32, 0, 0, 1, 32 / 48, "warps"),
    # sm_80: 48 KiB + 1 KiB reserved = 50176 B; 164 KiB holds 3 of them.
    ("sm_80", 128, 32, 0, 48 * 1024, 3, 12 / 64, "shared memory"),
    # tiny blocks hit the block-count limit.
    ("sm_89", 32, 16, 0, 0, 24, 24 / 48, "blocks"),
    # 255 regs x 32 warps exceed 64K registers a block; 228 KiB exceeds 227 KiB a block.
    ("sm_90", 1024, 255, 0, 0, 0, 0.0, "does not fit"),
    ("sm_90", 32, 32, 228 * 1024, 0, 0, 0.0, "does not fit"),
])
def test_occupancy_by_hand(arch, threads, regs, smem, dynamic, blocks, fraction, limit):
    occ = occupancy(arch, threads, regs, smem, dynamic)
    assert (occ.blocks_per_sm, occ.limited_by) == (blocks, limit)
    assert occ.fraction == pytest.approx(fraction)


def test_occupancy_counts_named_barriers_on_sm_90():
    """The H100's driver gives a kernel that uses all 16 named barriers 4 blocks an SM (the
    warp-specialised Hopper rung with its staged epilogue), whatever its size; 1 barrier
    (__syncthreads) never limits."""
    tiny = occupancy("sm_90", 32, 168, 0, 0, barriers=16)
    assert (tiny.blocks_per_sm, tiny.limited_by) == (4, "barriers")
    assert occupancy("sm_90", 32, 168, 0, 0, barriers=1).limited_by == "registers"
    assert occupancy("sm_80", 32, 168, 0, 0, barriers=16).limited_by == "registers"  # not modelled there


def test_occupancy_refuses_an_arch_it_has_no_limits_for():
    with pytest.raises(ValueError, match="no occupancy limits known for sm_87"):
        occupancy("sm_87", 128, 32, 0)


def test_a_missing_disassembler_names_the_pip_packages(monkeypatch):
    import cuda.pathfinder

    from gemm_driver.cuda.errors import LibraryNotFoundError
    from gemm_driver.inspection import tools

    monkeypatch.delattr(cuda.pathfinder, "find_nvidia_binary_utility", raising=False)  # as in an old pathfinder
    monkeypatch.setattr(tools.shutil, "which", lambda name: None)
    tools.find_tool.cache_clear()
    try:
        with pytest.raises(LibraryNotFoundError, match="pip install nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump"):
            tools.find_tool("nvdisasm")
    finally:
        tools.find_tool.cache_clear()
