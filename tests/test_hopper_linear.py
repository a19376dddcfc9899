"""The last BF16/FP16 Hopper rung as a linear layer, without a GPU: every layout (either operand
stored transposed), D in FP32 or the inputs' 16-bit type, bias then ReLU or GELU in the epilogue.

The problem sets the template arguments (OUT, EPI, TRANS_A, TRANS_B); the launch recipe encodes
each operand's map over the matrix as stored (boxes of the other major when transposed), packs
what TMA cannot read in its stored shape, encodes C's TMA-store map in the output type, and
passes the bias last. A few builds of the new combinations compile for sm_90a with no spill,
no local memory, wgmma and TMA loads and stores in the SASS.
"""

from __future__ import annotations

import pytest

import build_matrix
from test_hopper_specs import SPECS, _run_plan, sass

from gemm_driver.cuda.errors import UnsupportedProblem
from gemm_driver.kernels.hopper import recipe, rungs
from gemm_driver.problem import GemmProblem, layout_flags


def linear(m, n, k, layout="nn", out="fp32", epilogue="none", beta=0.0):
    trans_a, trans_b = layout_flags(layout)
    return GemmProblem(m, n, k, beta=beta, trans_a=trans_a, trans_b=trans_b, out_dtype=out, epilogue=epilogue)


# ---------------------------------------------------------------- what the problem sets
@pytest.mark.parametrize("layout, out, epilogue, fixed", [
    ("nn", "fp32", "none", (0, 0, 0, 0)),
    ("nt", "bf16", "bias_gelu", (1, 3, 0, 1)),
    ("tn", "fp32", "bias_relu", (0, 2, 1, 0)),
    ("tt", "bf16", "bias", (1, 1, 1, 1)),
])
def test_the_problem_sets_output_type_epilogue_and_layout(layout, out, epilogue, fixed):
    t = SPECS["hopper_bf16"].validate(linear(512, 512, 512, layout, out, epilogue), {"BN": 128})
    assert (t["OUT"], t["EPI"], t["TRANS_A"], t["TRANS_B"]) == fixed and t["BN"] == 128
    assert SPECS["hopper_fp16"].validate(linear(64, 64, 64, layout, "fp16" if out == "bf16" else out))["OUT"] \
        == (2 if out == "bf16" else 0)


def test_capabilities_are_declared_and_what_is_not_is_refused_in_one_line():
    spec = SPECS["hopper_bf16"]
    assert (spec.layouts, spec.out_dtypes, spec.epilogues) == (
        ("nn", "nt", "tn", "tt"), ("fp32", "bf16"), ("none", "bias", "bias_relu", "bias_gelu"))
    assert SPECS["hopper_fp16"].out_dtypes == ("fp32", "fp16") and spec.transposes
    with pytest.raises(UnsupportedProblem, match="does not take output type 'fp16'"):
        spec.validate(linear(64, 64, 64, out="fp16"))
    with pytest.raises(UnsupportedProblem, match="OUT is set by the problem .layout nn, out bf16.*: 1, not 0"):
        spec.validate(linear(64, 64, 64, out="bf16"), {"OUT": 0})
    with pytest.raises(UnsupportedProblem, match="SWAPPED=1 .hopper_cluster_swapped. writes FP32 D from row-major"):
        spec.validate(linear(4096, 4096, 4096, "nt"), {"SWAPPED": 1})
    for name in ("persistent_bf16", "cluster_fp16"):  # the other rungs: row-major, FP32, none
        with pytest.raises(UnsupportedProblem, match="does not take layout 'nt'"):
            SPECS[name].validate(linear(64, 64, 64, "nt"))
    # hopper_tf32 takes the layouts by a transposed copy (tests/test_transposing.py), FP32 D only
    SPECS["hopper_tf32"].validate(linear(64, 64, 64, "nt"))
    with pytest.raises(UnsupportedProblem, match="does not take output type 'bf16'"):
        SPECS["hopper_tf32"].validate(linear(64, 64, 64, "nt", out="bf16"))


def test_choose_reads_the_stored_rows_when_it_decides_on_packing():
    """A full grid packs where a stored row is not a 16-byte multiple: for TN, A's rows are M long."""
    choose = SPECS["hopper_bf16"].choose
    assert choose(linear(4096, 4096, 4096, "tn"), "H100")[0] == {"CM": 2, "PDL": 1}
    assert choose(linear(4093, 4096, 4096, "tn"), "H100")[0] == {}  # A stored K x 4093: packed
    assert choose(linear(4093, 4096, 4096, "nt"), "H100")[0] == {"CM": 2, "PDL": 1}  # M is no row length there
    assert choose(linear(4096, 4096, 4093, "nn"), "H100")[0] == {}


# ---------------------------------------------------------------- the recipe per layout
def _plan(monkeypatch, problem, tunables=None, misalign=(0, 0, 0), lds=None, name="hopper_bf16"):
    stored_a = problem.m if problem.trans_a else problem.k
    stored_b = problem.k if problem.trans_b else problem.n
    return _run_plan(monkeypatch, name, problem, tunables, lds=lds or (stored_a, stored_b, problem.n),
                     misalign=misalign)


@pytest.mark.parametrize("layout, a_map, b_map", [
    # (rows, cols, ld, box rows, box cols) of the stored matrices, M = 1024, N = 768, K = 512
    ("nn", (1024, 512, 512, 128, 64), (512, 768, 768, 64, 64)),
    ("nt", (1024, 512, 512, 128, 64), (768, 512, 512, 256, 64)),  # B K-major: BN rows of 64 k
    ("tn", (512, 1024, 1024, 64, 64), (512, 768, 768, 64, 64)),  # A M-major: 64 k rows x 64 m
    ("tt", (512, 1024, 1024, 64, 64), (768, 512, 512, 256, 64)),
])
def test_maps_are_over_the_stored_operands_with_the_boxes_of_their_major(monkeypatch, layout, a_map, b_map):
    _, launches, maps, scratch = _plan(monkeypatch, linear(1024, 768, 512, layout), {"BN": 256})
    assert [e for e, *_ in launches] == ["main"] and scratch == {}
    assert [m[2:7] for m in maps[:2]] == [a_map, b_map] and {m[7] for m in maps[:2]} == {128}


@pytest.mark.parametrize("layout, cm, cn, a_box, b_box", [
    ("nt", 2, 1, (128, 64), (128, 64)),  # each CTA loads half the K-major B tile's n rows
    ("tn", 1, 2, (32, 64), (64, 64)),  # half the k rows of each 64-wide m box of A
    ("tt", 2, 2, (32, 64), (64, 64)),  # BN = 128: 64 n rows each
])
def test_cluster_slices_of_the_other_major(monkeypatch, layout, cm, cn, a_box, b_box):
    _, launches, maps, _ = _plan(monkeypatch, linear(1024, 1024, 512, layout),
                                 {"BN": 256 if layout != "tt" else 128, "CM": cm, "CN": cn})
    assert launches[-1][0] == "cluster" and [m[5:7] for m in maps[:2]] == [a_box, b_box]


def test_operands_tma_cannot_read_are_packed_in_their_stored_shape(monkeypatch):
    p = linear(1001, 512, 999, "tt")  # A stored 999 x 1001, B stored 512 x 999: odd row lengths
    _, launches, maps, scratch = _plan(monkeypatch, p)
    assert [e for e, *_ in launches] == ["pack_rows", "main"]
    args_a, args_b = launches[0][3][:6], launches[0][3][6:12]  # one launch copies both
    assert args_a[1:4] == (1001, 999, 1001) and args_a[5] == 1024  # ld_src, rows, cols; ld_dst (128-byte rows)
    assert args_b[1:4] == (999, 512, 999) and args_b[5] == 1024
    assert scratch == {recipe.PACKED["a"]: (999 * 1024 * 2, False), recipe.PACKED["b"]: (512 * 1024 * 2, False)}
    assert [m[2:5] for m in maps[:2]] == [(999, 1001, 1024), (512, 999, 1024)]


def test_an_unaligned_base_is_packed_too(monkeypatch):
    _, launches, _, _ = _plan(monkeypatch, linear(256, 256, 256, "nt"), misalign=(0, 1, 0))
    assert [e for e, *_ in launches] == ["pack_rows", "main"] and launches[0][3][2:4] == (256, 256)
    _, grid, _, args = launches[0]
    assert args[8:10] == (0, 0) and args[12] == grid[0]  # B alone: every block copies it


# ---------------------------------------------------------------- C in the output type, the bias
@pytest.mark.parametrize("n, ldc, c_offset, tma", [
    (200, 200, 0, 1), (200, 208, 0, 1),
    (200, 204, 0, 0),  # 408-byte rows: not a 16-byte multiple for 16-bit C
    (200, 200, 2, 0),  # base 8 bytes past a 16-byte boundary (_run_plan moves C 4 bytes a unit)
    (196, 200, 0, 0),  # a store would write up to column 199 (16-byte granules of 8 elements)
])
def test_a_16_bit_c_is_stored_by_tma_where_its_rows_allow(monkeypatch, n, ldc, c_offset, tma):
    p = linear(300, n, 64, "nt", "bf16", "bias")
    _, launches, maps, _ = _plan(monkeypatch, p, {"BN": 128, "STAGES": 6}, misalign=(0, 0, c_offset),
                                 lds=(64, 64, ldc))
    args = launches[-1][3]
    assert args[15] == tma and len(maps) == 2 + tma
    if tma:
        assert maps[2][1:] == ("bf16", 300, n, ldc, 64, 32, 64)  # 64-byte rows: 64-byte swizzle


def test_fp32_c_keeps_its_map_and_the_bias_is_the_last_argument(monkeypatch):
    for out, dtype, swizzle in (("fp32", "fp32", 128), ("fp16", "fp16", 64)):
        p = linear(512, 512, 512, "tn", out, "bias_gelu")
        _, launches, maps, _ = _plan(monkeypatch, p, name="hopper_fp16")
        args = launches[-1][3]
        assert len(args) == len(SPECS["hopper_fp16"].signature) and args[-1] == BIAS
        assert maps[2][1] == dtype and maps[2][7] == swizzle


def test_split_k_partials_stay_fp32_whatever_the_output(monkeypatch):
    p = linear(1024, 1024, 16384, "nt", "bf16", "bias_relu")
    tunables, _ = rungs.analytic_choice(p, "NVIDIA H100 80GB HBM3")  # split-K in a 2 x 1 cluster
    _, launches, maps, scratch = _plan(monkeypatch, p, tunables)
    assert tunables["SPLITS"] == 2 and scratch[recipe.PARTIALS] == (64 * 2 * 128 * 128 * 4, False)
    assert maps[1][2:7] == (1024, 16384, 16384, 64, 64) and maps[2][1] == "bf16"  # B box: BN/CM = 64 n rows


BIAS = 0x7F4000000000


@pytest.fixture(autouse=True)
def _context_with_bias(monkeypatch):
    """_run_plan's LaunchContext, with a bias pointer (what the Session passes for an epilogue)."""
    import test_hopper_specs
    from gemm_driver.kernels.launch import LaunchContext

    monkeypatch.setattr(test_hopper_specs, "LaunchContext",
                        lambda *args: LaunchContext(*args, bias=BIAS))


# ---------------------------------------------------------------- builds
LINEAR_BUILDS = [
    ("hopper_bf16", {"OUT": 1, "EPI": 3, "TRANS_B": 1, "CM": 2}),  # x @ W^T + bias, GELU, BF16 out; 2x1
    ("hopper_bf16", {"OUT": 1, "EPI": 1, "TRANS_A": 1, "TRANS_B": 1, "BN": 128, "STAGES": 6, "CM": 2,
                     "SPLITS": 2}),  # split-K, then the epilogue
    ("hopper_fp16", {"OUT": 2, "EPI": 2, "TRANS_A": 1, "BN": 64, "STAGES": 8}),
    ("hopper_fp16", {"OUT": 0, "EPI": 3, "TRANS_B": 1, "BN": 128, "CONSUMERS": 1}),
]


@pytest.mark.parametrize("name, tunables", [
    ("hopper_bf16", {"DECODE": 64, "BN": 128, "CONSUMERS": 2, "OUT": 1, "TRANS_A": 1}),  # dW of a few rows
    ("hopper_fp16", {"DECODE": 64, "BN": 64, "CONSUMERS": 1, "OUT": 2, "EPI": 3, "TRANS_A": 1, "TRANS_B": 1}),
])
def test_decode_tiles_read_a_stored_transposed_without_spills(name, tunables):
    """The decode tiles with A's tile M-major (wgmma's B operand transposed): their own build."""
    result = build_matrix.built(SPECS[name], "sm_90", tunables)
    r = result.compiled.resources[result.entries["decode"]]
    assert (r.spill_bytes, r.stack_bytes) == (0, 0), r
    opcodes = [i.opcode for i in sass(result, "decode").instructions]
    assert sum(o.startswith("HGMMA") for o in opcodes) >= 4 and any(o.startswith("UTMALDG") for o in opcodes)


def test_decode_tiles_in_clusters_of_eight_build_without_spills():
    """CM=2 x CN=4: each CTA loads half of the B tile and a quarter of the A tile, multicast to its
    row and column peers."""
    result = build_matrix.built(SPECS["hopper_bf16"], "sm_90", {"DECODE": 64, "BN": 128, "CONSUMERS": 2, "CM": 2,
                                                                  "CN": 4, "OUT": 1, "TRANS_B": 1})
    r = result.compiled.resources[result.entries["decode_cluster"]]
    assert (r.spill_bytes, r.stack_bytes) == (0, 0), r
    opcodes = [i.opcode for i in sass(result, "decode_cluster").instructions]
    assert any(o.startswith("UTMALDG") and "MULTICAST" in o for o in opcodes), sorted({o for o in opcodes
                                                                                       if o.startswith("UTMA")})


@pytest.mark.parametrize("name, tunables", LINEAR_BUILDS)
def test_linear_builds_without_spills_and_issue_wgmma_tma_loads_and_stores(name, tunables):
    result = build_matrix.built(SPECS[name], "sm_90", tunables)
    assert result.compiled.arch == "sm_90a"
    assert ("cluster" in result.entries) == (tunables.get("CM", 1) * tunables.get("CN", 1) > 1)
    for entry in [e for e in ("main", "cluster") if e in result.entries]:
        r = result.compiled.resources[result.entries[entry]]
        assert (r.spill_bytes, r.stack_bytes) == (0, 0), f"{name} {entry}: {r}"
        opcodes = [i.opcode for i in sass(result, entry).instructions]
        assert not [o for o in opcodes if o.split(".")[0] in ("LDL", "STL")], entry
        assert sum(o.startswith("HGMMA") for o in opcodes) >= 4, entry
        assert sum(o.startswith("UTMALDG") for o in opcodes) >= 2 and any(o.startswith("UTMASTG") for o in opcodes)
        if tunables["OUT"]:  # one rounding to the 16-bit type, two values at a time
            assert any(o.startswith("F2FP") for o in opcodes), entry
        if tunables["EPI"] == 3:  # GELU: one tanh on the MUFU, no exp (common/epilogue.cuh)
            mufu = {o for o in opcodes if o.startswith("MUFU")}
            assert "MUFU.TANH" in mufu and "MUFU.EX2" not in mufu, (entry, mufu)
