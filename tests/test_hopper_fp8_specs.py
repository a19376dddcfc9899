"""hopper_fp8 (cu/hopper/fp8.cu, gemm_driver/kernels/hopper/fp8.py) without a GPU.

The spec: registered as a Hopper kernel of the fp8 precision, taking scaled nt problems only,
its template arguments SCALING, OUT, EPI and TYPES (A's and B's formats, e4m3 or e5m2) set by the
problem; tools/gen_wgmma.py's FP8 pairs in FP8_TYPES' order; the rules (promotion keeps
BN <= 128, block scales need promotion); ``choose`` gives a valid configuration for any shape.
The launch plan on a fake context: UINT8 maps of 128-code rows, packing where rows of codes
are not 16-byte multiples, the scale pointers and their row strides last, as the cuBLASLt FP8
baselines receive them from the Session. Builds: each scaling mode and the tile shapes that
reach other code (one consumer, 64-column tiles, clusters, the unpromoted variant) compile for
sm_90a with no spill or local memory in any entry, issue FP8 wgmma (QGMMA in the SASS), TMA
loads and stores, and promote with FFMA under block scales; with e5m2 operands every entry names
the problem's formats in its QGMMA, the decode entries in the swapped order their roles take.

    python -m pytest -q tests/test_hopper_fp8_specs.py
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import build_matrix
from gemm_driver import kernels
from gemm_driver.cuda.errors import UnsupportedProblem
from gemm_driver.kernels import hopper
from gemm_driver.kernels.hopper import fp8, geometry as geo, recipe
from gemm_driver.kernels.hopper.rungs import SMS, entry_geometry
from gemm_driver.kernels.launch import LaunchContext
from gemm_driver.kernels.target import declared
from gemm_driver.problem import FP8_TYPES, GemmProblem
from test_hopper_specs import Device, FakeKernel, Operand, record_maps_and_scratch, sass

SPEC = kernels.get("hopper_fp8")
H100 = "NVIDIA H100 80GB HBM3"
ROOT = Path(__file__).resolve().parents[1]


def fp8_problem(m, n, k, scaling="tensor", **more) -> GemmProblem:
    return GemmProblem(m, n, k, trans_b=True, scaling=scaling, **more)


# ---------------------------------------------------------------- registration
def test_registered_as_a_hopper_kernel_of_the_fp8_precision():
    assert SPEC in hopper.SPECS and kernels.KERNELS["hopper_fp8"] is SPEC
    assert SPEC.precision == "fp8" and SPEC.min_arch == "sm_90a" and SPEC.source == "cu/hopper/fp8.cu"
    assert SPEC.layouts == ("nt",) and SPEC.out_dtypes == ("fp32", "bf16")
    assert SPEC.scalings == ("tensor", "row", "block")
    assert set(SPEC.epilogues) == {"none", "bias", "bias_relu", "bias_gelu"}
    assert SPEC.fp8_types == FP8_TYPES == declared(SPEC)["fp8_types"]  # every pair of e4m3 and e5m2
    # any_shape's 17 + two scales, two lds, the map of A's block scales and whether TMA reads them (RING)
    assert len(SPEC.signature) == len(SPEC.extra_entries[0].signature) == 23


@pytest.mark.parametrize("scaling, out_dtype, epilogue, fixed", [
    ("tensor", "fp32", "none", {"SCALING": 0, "OUT": 0, "EPI": 0}),
    ("row", "bf16", "bias_gelu", {"SCALING": 1, "OUT": 1, "EPI": 3}),
    ("block", "fp32", "bias_relu", {"SCALING": 2, "OUT": 0, "EPI": 2}),
])
def test_the_problem_sets_scaling_output_type_and_epilogue(scaling, out_dtype, epilogue, fixed):
    problem = fp8_problem(300, 200, 1000, scaling, out_dtype=out_dtype, epilogue=epilogue)
    t = SPEC.validate(problem)
    assert {name: t[name] for name in fixed} == fixed
    assert SPEC.validate(problem, {**fixed, "BN": 64})["BN"] == 64  # the same values may be given
    with pytest.raises(UnsupportedProblem, match=r"^hopper_fp8: SCALING is set by the problem"):
        SPEC.validate(problem, {"SCALING": (fixed["SCALING"] + 1) % 3})
    assert SPEC.probe(8, 8, 8, t) == fp8_problem(8, 8, 8, scaling, out_dtype=out_dtype, epilogue=epilogue)


@pytest.mark.parametrize("code, fp8_types", list(enumerate(FP8_TYPES)))
def test_the_problem_sets_the_formats_as_types_a_template_argument_of_every_entry(code, fp8_types):
    """TYPES = the index in FP8_TYPES (bit 0: A is e5m2, bit 1: B is); the tiles choose() picks
    do not depend on it, and every entry's template names it (one build per pair of formats): last,
    or before RING in the entries of hopper_fp8's own tiles."""
    a, b = fp8_problem(8, 8, 8, fp8_types=fp8_types).operand_formats
    assert code == (a == "e5m2") + 2 * (b == "e5m2")
    seen = set()
    for shape, scaling, forced in (((300, 200, 1000), "tensor", {"CM": 2}), ((16, 4096, 4096), "block", {}),
                                   ((32, 4096, 4096), "row", {"CM": 2})):
        problem = fp8_problem(*shape, scaling, fp8_types=fp8_types)
        tunables = {**SPEC.choose(problem, H100)[0], **forced}
        assert tunables == {**SPEC.choose(fp8_problem(*shape, scaling), H100)[0], **forced}
        t = SPEC.validate(problem, tunables)
        assert t["TYPES"] == code and SPEC.probe(8, 8, 8, t).fp8_types == fp8_types
        for entry, expression in SPEC.entry_expressions(t).items():
            last = f", {code}, {t['RING']}>" if entry in ("main", "cluster") else f", {code}>"
            assert expression.endswith("<unsigned char>" if entry == "pack_rows" else last), expression
            seen.add(entry)
    assert seen == {"main", *(e.name for e in SPEC.extra_entries)}
    with pytest.raises(UnsupportedProblem, match=rf"^hopper_fp8: TYPES is set by the problem \(.*fp8_types "
                                                 rf"{fp8_types}\): {code}, not {(code + 1) % 4}$"):
        SPEC.validate(fp8_problem(64, 64, 64, fp8_types=fp8_types), {"TYPES": (code + 1) % 4})


def test_the_fp8_wgmma_wrappers_are_generated_for_each_pair_in_fp8_types_order():
    """mma_ss dispatches Elem::TYPES to the FP8_PAIRS entry of that index: the generator's order
    must be problem.FP8_TYPES', and every pair needs every N the tiles use."""
    spec = importlib.util.spec_from_file_location("gen_wgmma", ROOT / "tools" / "gen_wgmma.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert tuple(gen.fp8_namespace(*pair) for pair in gen.FP8_PAIRS) == FP8_TYPES
    header = (ROOT / "cu" / "hopper" / "wgmma.cuh").read_text()
    for code, (a_type, b_type) in enumerate(gen.FP8_PAIRS):
        assert f"(Elem::TYPES == {code}) wgmma_ops::{FP8_TYPES[code]}::" in header or code == len(FP8_TYPES) - 1
        for n in gen.NS_FP8:
            assert f"wgmma.mma_async.sync.aligned.m64n{n}k32.f32.{a_type}.{b_type} " in header


@pytest.mark.parametrize("problem, message", [
    (GemmProblem(64, 64, 64), "hopper_fp8 does not take layout 'nn'; it takes nt"),
    (GemmProblem(64, 64, 64, trans_b=True), "hopper_fp8 does not take scaling 'none'"),
    (fp8_problem(64, 64, 64, out_dtype="fp16"), "hopper_fp8 does not take output type 'fp16'"),
    (fp8_problem(64, 64, 64, batch=2), "hopper_fp8: fp8 takes one GEMM per call (batch 1)"),
    (fp8_problem(8, 8, 0), "K = 0: the wgmma kernels need at least one k tile"),
])
def test_what_it_does_not_compute_is_refused_in_one_line(problem, message):
    with pytest.raises(UnsupportedProblem) as info:
        SPEC.validate(problem)
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("scaling, overrides, message", [
    ("tensor", {"BN": 256}, "PROMOTE=1 keeps a second accumulator"),
    ("row", {"BN": 256, "PROMOTE": 0, "CONSUMERS": 1}, "BN=256 takes two consumer warpgroups"),
    ("block", {"PROMOTE": 0}, "block scaling is applied where each 128 of K is promoted"),
    ("tensor", {"PROMOTE": 2, "CONSUMERS": 1, "STAGES": 4}, "PROMOTE=2 with one consumer warpgroup"),
    ("row", {"PROMOTE": 2, "BN": 256}, "PROMOTE=2 keeps two more accumulators"),
    ("block", {"CONSUMERS": 1}, "2 CTAs per SM of"),  # 6 stages of 64 x 128 + 128 x 128 codes, twice
    ("tensor", {"DECODE": 16, "CONSUMERS": 1}, r"tiles of 64 \* CONSUMERS columns"),
    ("row", {"DECODE": 32, "BN": 64, "CONSUMERS": 1, "CN": 2}, r"clusters of tile rows sharing B only \(CM=1 or 2"),
    ("block", {"DECODE": 8, "BN": 64, "CONSUMERS": 1, "PROMOTE": 0}, "block scaling is applied where"),
    ("tensor", {"RING": 1}, "RING=1 holds block scales; scaling tensor has none"),
    ("block", {"RING": 1, "DECODE": 8, "BN": 64, "CONSUMERS": 1, "PROMOTE": 2}, "RING=1 is for hopper_fp8's own"),
    ("block", {"RING": 1, "STAGES": 6}, "bytes of shared memory per block"),  # 6 rows of 128 scales past the limit
])
def test_rules(scaling, overrides, message):
    with pytest.raises(UnsupportedProblem, match=message):
        SPEC.validate(fp8_problem(256, 256, 256, scaling), overrides)


def test_geometry_is_any_shapes_with_one_byte_elements():
    entry, g = entry_geometry(SPEC, SPEC.resolve())
    assert entry == "main" and (g.bm, g.bn, g.bk, g.threads) == (128, 128, 128, 384)
    assert g.a_box == (128, 128) and g.b_box == (128, 128) and g.trans_b and not g.b_transposed
    assert g.smem == geo.persistent_smem(6, 128, 2, tma_store=True) == SPEC.dynamic_smem(SPEC.resolve())
    entry, g = entry_geometry(SPEC, SPEC.resolve({"CM": 2, "CN": 2, "CONSUMERS": 1, "STAGES": 4}))
    assert entry == "cluster" and g.a_box == (32, 128) and g.b_box == (64, 128) and g.ctas_per_sm == 2


def test_the_scale_ring_takes_a_row_of_bm_scales_a_stage_past_the_config_s_shared_memory():
    for t, bm in (({"RING": 1, "STAGES": 5}, 128), ({"RING": 1, "STAGES": 6, "CONSUMERS": 1, "BN": 64}, 64)):
        t = SPEC.validate(fp8_problem(256, 256, 256, "block"), t)
        without = SPEC.dynamic_smem({**t, "RING": 0})
        assert SPEC.dynamic_smem(t) == without + t["STAGES"] * bm * 4 == entry_geometry(SPEC, t)[1].smem


def test_the_decode_tiles_are_the_16_bit_decode_geometry_with_128_codes_a_k_tile():
    t = SPEC.resolve({"DECODE": 16, "BN": 64, "CONSUMERS": 1})
    entry, g = entry_geometry(SPEC, t)
    assert entry == "decode" and (g.bm, g.bn, g.bk, g.threads, g.ctas_per_sm) == (16, 64, 128, 256, 2)
    assert g.a_box == (16, 128) and g.b_box == (64, 128) and g.trans_b
    assert g.smem == geo.decode_smem(16, 1) == SPEC.dynamic_smem(t)
    entry, g = entry_geometry(SPEC, SPEC.resolve({"DECODE": 32, "BN": 64, "CONSUMERS": 1, "CM": 2}))
    assert entry == "decode_cluster" and g.cluster == 2 and g.b_box == (32, 128)  # half the B tile, multicast


# ---------------------------------------------------------------- choose
@pytest.mark.parametrize("shape, picked", [
    ((4096, 4096, 4096), {"STAGES": 5, "RING": 1, "PROMOTE": 2, "PDL": 1}),  # 1024 tiles: A's scales on a ring
    ((4093, 4091, 4099), {"STAGES": 5, "RING": 1, "PROMOTE": 2}),  # K % 16 != 0: rows of codes packed first, no PDL
    ((1024, 1024, 16384), {"SPLITS": 2, "STAGES": 5, "RING": 1, "PROMOTE": 2}),  # 64 tiles, deep K: split-K
    ((1024, 1024, 1024), {"BN": 64, "STAGES": 6, "RING": 1, "PROMOTE": 2, "PDL": 1}),
    ((1, 7168, 16384), {"BN": 64, "CONSUMERS": 1, "STAGES": 6, "RING": 1, "PROMOTE": 2, "SPLITS": 2}),  # 112 tiles
    ((64, 4096, 7168), {"BN": 64, "CONSUMERS": 1, "STAGES": 6, "RING": 1, "PROMOTE": 2, "SPLITS": 2}),  # 64 tiles
    ((64, 4096, 1024), {"BN": 64, "CONSUMERS": 1, "STAGES": 6, "RING": 1, "PROMOTE": 2, "PDL": 1}),
    ((16, 32768, 512), {"BN": 64, "CONSUMERS": 1, "STAGES": 6, "RING": 1, "PROMOTE": 2, "PDL": 1}),  # 512 of 64 x 64
])
def test_the_tile_rules(shape, picked):
    """tile_choice: what choose takes past the decode tiles' M (and with DECODE=0)."""
    problem = fp8_problem(*shape, "block")
    tunables, note = fp8.tile_choice(problem)
    assert tunables == picked and "\n" not in note
    SPEC.validate(problem, tunables)
    if shape[0] > fp8.BLOCK_DECODE_MAX_M:
        assert SPEC.choose(problem, H100) == (tunables, note)


DECODE_8 = {"DECODE": 8, "BN": 64, "CONSUMERS": 1, "PROMOTE": 2}


@pytest.mark.parametrize("shape, scaling, picked", [
    ((1, 4096, 4096), "tensor", {**DECODE_8, "PDL": 1, "TAIL": 0}),  # up to M = 32 no split: 64 tiles
    ((32, 4096, 4096), "row", {**DECODE_8, "DECODE": 32, "PDL": 1, "TAIL": 0}),
    ((64, 4096, 7168), "row", {**DECODE_8, "DECODE": 64, "SPLITS": 2, "PDL": 1, "TAIL": 0}),  # 64-row tiles split
    ((64, 2048, 8192), "tensor", {**DECODE_8, "DECODE": 64, "SPLITS": 4, "PDL": 1, "TAIL": 0}),
    ((8, 28672, 4096), "tensor", {**DECODE_8, "BN": 128, "CONSUMERS": 2, "PDL": 1, "TAIL": 0}),  # 448 64-column tiles
    ((65, 4096, 4096), "tensor", {"BN": 64, "STAGES": 8, "PROMOTE": 2, "PDL": 1, "TAIL": 0}),  # past DECODE_MAX_M
    ((1, 4096, 4096), "block", {**DECODE_8, "PDL": 1, "TAIL": 0}),  # block scales: up to M = 16
    ((32, 4096, 4096), "block", {"BN": 64, "CONSUMERS": 1, "STAGES": 6, "RING": 1, "PROMOTE": 2, "SPLITS": 2}),
])
def test_choose_takes_the_decode_tiles_at_small_m(shape, scaling, picked):
    problem = fp8_problem(*shape, scaling)
    tunables, note = SPEC.choose(problem, H100)
    assert tunables == picked and ("hopper_fp8_decode" in note) == ("DECODE" in picked)
    SPEC.validate(problem, tunables)


@pytest.mark.parametrize("shape, scaling, picked", [
    ((4096, 4096, 4096), "tensor", {"STAGES": 6, "CN": 2, "PROMOTE": 2, "PDL": 1, "TAIL": 0}),  # 1024 tiles: 1 x 2
    ((2048, 7168, 4096), "row", {"STAGES": 6, "CN": 2, "PROMOTE": 2, "PDL": 1, "TAIL": 0}),
    ((256, 8192, 4096), "tensor", {"STAGES": 6, "PROMOTE": 2, "PDL": 1, "TAIL": 0}),  # 128 tiles, one wave: no cluster
    ((384, 4096, 6144), "row", {"STAGES": 6, "PROMOTE": 2, "PDL": 1}),  # 96 tiles; K = 6144: the tail split
    ((1152, 1024, 4096), "tensor", {"STAGES": 6, "PROMOTE": 2, "PDL": 1, "TAIL": 0}),  # 72 tiles: past half the SMs
    ((384, 2560, 6144), "tensor", {"BN": 64, "STAGES": 8, "PROMOTE": 2, "PDL": 1}),  # 60: 128 x 64 tiles
    ((4096, 4096, 4096), "block", {"STAGES": 5, "RING": 1, "PROMOTE": 2, "PDL": 1}),  # block: 5 stages, a ring,
    ((384, 4096, 6144), "block", {"STAGES": 5, "RING": 1, "PROMOTE": 2, "PDL": 1}),  # no cluster, from 67 tiles
    ((1152, 1024, 4096), "block", {"STAGES": 5, "RING": 1, "PROMOTE": 2, "PDL": 1}),  # 72 tiles
    ((1280, 1536, 4096), "block", {"STAGES": 5, "RING": 1, "PROMOTE": 2, "PDL": 1}),  # 120 tiles: a full grid
    ((4093, 4091, 4099), "tensor", {"STAGES": 6, "CN": 2, "PROMOTE": 2, "TAIL": 0}),  # packed operands: no PDL
])
def test_grids_past_half_the_sms_take_six_stages_and_clusters_past_one_wave(shape, scaling, picked):
    problem = fp8_problem(*shape, scaling)
    tunables, note = SPEC.choose(problem, H100)
    assert tunables == picked and ("1 x 2 clusters" in note) == ("CN" in picked)
    SPEC.validate(problem, tunables)


@settings(max_examples=80, deadline=None)
@given(m=st.integers(1, 20000), n=st.integers(1, 20000), k=st.integers(1, 70000),
       scaling=st.sampled_from(("tensor", "row", "block")))
def test_choose_always_gives_a_valid_configuration(m, n, k, scaling):
    if m * k > 2**31 - 1 or k * n > 2**31 - 1 or m * n > 2**31 - 1:
        return
    problem = fp8_problem(m, n, k, scaling)
    t = SPEC.validate(problem, SPEC.choose(problem, H100)[0])
    if t["SPLITS"] > 1:  # the splits of a tile meet at a barrier only when every unit is resident
        g = entry_geometry(SPEC, t)[1]
        assert geo.work_units(problem, g, t["SPLITS"]) <= geo.fallback_resident_clusters(SMS, g.ctas_per_sm, g.cluster)


# ---------------------------------------------------------------- the launch plan on a fake context
SCALE_A, SCALE_B = Operand(0x7F5000000000, 37, 4), Operand(0x7F6000000000, 33, 4)


def run_plan(monkeypatch, problem, tunables=None, lds=None, misalign=(0, 0, 0), scales=(SCALE_A, SCALE_B)):
    """The recipe on a fake context: (resolved tunables, launches, tensor maps encoded, scratch)."""
    t = SPEC.validate(problem, tunables or {})
    lds = lds or (problem.k, problem.k, problem.n)
    base = (0x7F0000000000, 0x7F1000000000, 0x7F2000000000)
    a, b = (Operand(base[i] + misalign[i], lds[i], 1) for i in range(2))
    c = Operand(base[2] + 4 * misalign[2], lds[2], 4)
    launches = []
    maps, scratch, workspace = record_maps_and_scratch(monkeypatch)
    names = ["main", *(e.name for e in SPEC.extra_entries)]
    ctx = LaunchContext(SPEC, {n: FakeKernel(n, launches) for n in names}, problem, a, b, c, t, "stream", workspace,
                        Device(), 0, scales)
    enqueue = fp8.fp8_recipe(ctx, lambda ctx, kernel, g: geo.fallback_resident_clusters(132, g.ctas_per_sm, g.cluster))
    enqueue()
    return t, launches, maps, scratch


def test_aligned_codes_are_read_in_place_through_uint8_maps_and_the_scales_come_after_the_bias(monkeypatch):
    t, launches, maps, scratch = run_plan(monkeypatch, fp8_problem(4096, 4096, 4096, "block"))
    assert [entry for entry, *_ in launches] == ["main"] and scratch == {}
    entry, grid, block, args = launches[0]
    assert grid == (132, 1, 1) and block == (384, 1, 1) and len(args) == len(SPEC.signature)
    assert args[-6:-2] == (SCALE_A.ptr, 37, SCALE_B.ptr, 33)
    assert [m[1:] for m in maps[:2]] == [("fp8", 4096, 4096, 4096, 128, 128, 128)] * 2  # A M x K, B N x K


SCRATCH_1 = 0x7F3000000000 + 0x100000000  # record_maps_and_scratch's address of the first scratch asked for


def test_the_scale_ring_maps_a_s_block_scales_in_place_or_packed(monkeypatch):
    """RING=1: A's scales (ceil(K/128) rows of M floats) get an FP32 map of one-row boxes of BM,
    unswizzled, and sa_tma = 1: in place where their rows are 16-byte multiples, else on a full grid
    over a copy pack_rows makes of their bytes. RING=0 maps nothing more and the kernel reads them
    in place."""
    problem = fp8_problem(4096, 4096, 4000, "block")
    aligned = Operand(0x7F5000000000, 4096, 4)
    _, launches, maps, scratch = run_plan(monkeypatch, problem, {"RING": 1, "STAGES": 4}, scales=(aligned, SCALE_B))
    assert [entry for entry, *_ in launches] == ["main"] and scratch == {}
    assert launches[0][3][-2:] == (bytes(128), 1) and len(maps) == 4  # A, B, C (TMA stores), A's scales
    assert maps[3] == (aligned.ptr, "fp32", 32, 4096, 4096, 1, 128, 0)
    _, launches, maps, scratch = run_plan(monkeypatch, problem, {"STAGES": 4}, scales=(aligned, SCALE_B))
    assert launches[0][3][-1] == 0 and len(maps) == 3
    # rows of 37 floats (148 bytes): copied to rows of 128-byte multiples, the kernel's own reads left in place
    _, launches, maps, scratch = run_plan(monkeypatch, problem, {"RING": 1, "STAGES": 4})
    assert [entry for entry, *_ in launches] == ["pack_rows", "main"]
    assert launches[0][3][:6] == (SCALE_A.ptr, 4 * 37, 32, 4 * 4096, SCRATCH_1, 4 * 4096)
    assert scratch == {recipe.PACKED["scales_a"]: (32 * 4 * 4096, False)}
    assert maps[3] == (SCRATCH_1, "fp32", 32, 4096, 4096, 1, 128, 0)
    assert launches[1][3][-6:-2] == (SCALE_A.ptr, 37, SCALE_B.ptr, 33) and launches[1][3][-1] == 1
    # ... on a full grid only: 15 tiles of 128 x 64 read those rows in place, no copy to launch
    _, launches, maps, scratch = run_plan(monkeypatch, fp8_problem(333, 517, 1024, "block"),
                                          {"RING": 1, "BN": 64, "STAGES": 6})
    assert [entry for entry, *_ in launches] == ["main"] and scratch == {} and launches[0][3][-1] == 0


def test_packed_codes_and_packed_scales_take_two_copy_launches(monkeypatch):
    """4093x4091x4099 in block scaling (choose's pick: the ring): A's and B's rows of codes in one
    pack_rows launch, A's scales (rows of 4093 floats) in a second."""
    problem = fp8_problem(4093, 4091, 4099, "block", out_dtype="bf16")
    scales = (Operand(0x7F5000000000, 4093, 4), SCALE_B)
    t, launches, maps, scratch = run_plan(monkeypatch, problem, SPEC.choose(problem, H100)[0], lds=(4099, 4101, 4091),
                                          scales=scales)
    assert t["RING"] == 1 and [entry for entry, *_ in launches] == ["pack_rows", "pack_rows", "main"]
    assert set(scratch) == {recipe.PACKED["a"], recipe.PACKED["b"], recipe.PACKED["scales_a"]}
    assert launches[1][3][6:] == (0,) * 6 + (launches[1][1][0],)  # one operand: the second's arguments 0
    assert maps[-1][1:] == ("fp32", 33, 4093, 4096, 1, 128, 0) and launches[2][3][-1] == 1


def test_the_tail_split_cuts_the_last_partial_wave_as_hopper_bf16_s_does(monkeypatch):
    """1280x2048x4096: 160 tiles of 128 x 128 on 132 SMs; TAIL=4 (the default) runs 132 whole and
    cuts the last 28 into 4 k ranges, with a workspace for their partials; TAIL=0 none."""
    problem = fp8_problem(1280, 2048, 4096, "block")
    t, launches, _, scratch = run_plan(monkeypatch, problem, {"PROMOTE": 2})
    assert t["TAIL"] == 4 and launches[0][3][10:12] == (4, 132)  # splits, whole
    assert scratch[recipe.PARTIALS] == (28 * 4 * 128 * 128 * 4, False)
    _, launches, _, scratch = run_plan(monkeypatch, problem, {"PROMOTE": 2, "TAIL": 0})
    assert launches[0][3][10:14] == (1, 0, 0, 0) and scratch == {}
    assert "TAIL" not in SPEC.choose(problem, H100)[0]  # choose keeps it for block scaling's own tiles ...
    assert SPEC.choose(fp8_problem(1280, 2048, 4096, "tensor"), H100)[0]["TAIL"] == 0  # ... not below K = 6144
    for scaling in ("tensor", "row"):  # ... in the others'
        assert "TAIL" not in SPEC.choose(fp8_problem(1408, 2304, fp8.TAIL_MIN_K_WHOLE_SCALES, scaling), H100)[0]
        assert SPEC.choose(fp8_problem(1408, 2304, fp8.TAIL_MIN_K_WHOLE_SCALES - 1024, scaling), H100)[0]["TAIL"] == 0
    for cited in (fp8.TAIL_PROBE, fp8.TAIL_CHECK, fp8.TAIL_CHECK_AFTER):  # what without_tail cites
        assert (Path(__file__).resolve().parents[1] / cited).is_file()


@pytest.mark.parametrize("scaling", ["tensor", "block"])
def test_the_decode_tiles_launch_their_entry_over_mt_row_boxes_of_a(monkeypatch, scaling):
    """M = 8, choose's pick: hopper_fp8_decode over 8-row boxes of A and 64-row boxes of B (N x K),
    one CTA a tile (64 tiles of 8 x 64: fewer than two CTAs an SM hold), 256 threads."""
    problem = fp8_problem(8, 4096, 4096, scaling)
    t, launches, maps, scratch = run_plan(monkeypatch, problem, SPEC.choose(problem, H100)[0])
    assert t["DECODE"] == 8 and [entry for entry, *_ in launches] == ["decode"] and scratch == {}
    entry, grid, block, args = launches[0]
    assert grid == (64, 1, 1) and block == (256, 1, 1) and args[-6:-2] == (SCALE_A.ptr, 37, SCALE_B.ptr, 33)
    assert [m[1:] for m in maps[:2]] == [("fp8", 8, 4096, 4096, 8, 128, 128), ("fp8", 4096, 4096, 4096, 64, 128, 128)]


def test_rows_of_codes_that_are_not_16_byte_multiples_are_packed(monkeypatch):
    problem = fp8_problem(4093, 4091, 4099, "row", out_dtype="bf16")
    t, launches, maps, scratch = run_plan(monkeypatch, problem, lds=(4099, 4101, 4091))
    assert [entry for entry, *_ in launches] == ["pack_rows", "main"]
    assert set(scratch) == {recipe.PACKED["a"], recipe.PACKED["b"]}
    assert [m[4] for m in maps] == [4224, 4224]  # packed rows: 4099 codes padded to 128-byte multiples
    assert launches[-1][3][15] == 0  # c_tma: BF16 rows of 4091 are no 16-byte multiples, C stored from registers


def test_split_k_takes_the_workspace_and_zeroed_counters(monkeypatch):
    t, launches, maps, scratch = run_plan(monkeypatch, fp8_problem(1024, 1024, 16384, "block"), {"SPLITS": 2})
    assert scratch[recipe.PARTIALS][0] == 64 * 2 * 128 * 128 * 4 and scratch[recipe.COUNTERS] == (64 * 2 * 4, True)
    assert launches[0][1] == (128, 1, 1)


def test_a_launch_without_scales_is_refused(monkeypatch):
    with pytest.raises(ValueError, match=r"^hopper_fp8: scaling 'tensor' needs the scales of A and B"):
        run_plan(monkeypatch, fp8_problem(64, 64, 64), scales=None)
    assert run_plan(monkeypatch, fp8_problem(0, 64, 64))[1] == []  # M = 0: nothing to launch


# ---------------------------------------------------------------- builds
# Beside the spec's own configurations (the build matrix's: 128 x 128 tiles with tensor and with
# block scales, row scales on 64 x 128 tiles in a 1 x 2 cluster, the unpromoted 128 x 256 tiles),
# the other tiles choose() takes, one scaling mode each.
BUILDS = [
    {"SCALING": 2, "CONSUMERS": 1, "STAGES": 6, "BN": 64, "CM": 2, "OUT": 1},  # 64 x 64 (small M), 2 x 1 cluster
    {"SCALING": 1, "BN": 64, "STAGES": 8, "CN": 2, "EPI": 1},  # 128 x 64 tiles, bias
    {"SCALING": 0, "CONSUMERS": 1, "STAGES": 4, "OUT": 1},  # 64 x 128 tiles, BF16 D
    # the decode tiles at their largest: 64 rows, two consumers, three accumulators, row scales, GELU
    {"SCALING": 1, "DECODE": 64, "BN": 128, "CONSUMERS": 2, "PROMOTE": 2, "OUT": 1, "EPI": 3},
    # block scales on a ring beside the stages, at its largest: 5 stages, a 1 x 2 cluster, GELU
    {"SCALING": 2, "PROMOTE": 2, "RING": 1, "STAGES": 5, "CN": 2, "OUT": 1, "EPI": 3},
]


@pytest.mark.parametrize("tunables", BUILDS, ids=lambda t: ",".join(f"{k}{v}" for k, v in t.items()))
def test_builds_without_spills_issue_fp8_wgmma_tma_and_promote(tunables):
    t = SPEC.validate(SPEC.probe(256, 256, 256, tunables), tunables)
    result = build_matrix.built(SPEC, "sm_90", t)
    clustered = t["CM"] * t["CN"] > 1  # the cluster and decode entries only in the builds that run them
    launched = ["main", *(["cluster"] * clustered), *(["decode"] * bool(t["DECODE"]))]
    assert result.compiled.arch == "sm_90a" and set(result.entries) == {"pack_rows", *launched}
    for entry in launched:
        r = result.compiled.resources[result.entries[entry]]
        assert (r.spill_bytes, r.stack_bytes) == (0, 0), f"{entry}: {r}"
        instructions = sass(result, entry).instructions
        opcodes = [i.opcode for i in instructions]
        assert not [o for o in opcodes if o.split(".")[0] in ("LDL", "STL")], entry
        # nvdisasm writes "QGMMA.64 x128x32.F32.E4M3.E4M3 R24, gdesc[UR20], ...": the shape after a space
        fp8_mma = [i.operands for i in instructions if i.opcode.startswith("QGMMA")]
        assert len(fp8_mma) >= 4 and all(".F32.E4M3.E4M3" in o for o in fp8_mma), (entry, fp8_mma[:1])
        assert not any(o.startswith("HGMMA") for o in opcodes), entry
        assert sum(o.startswith("UTMALDG") for o in opcodes) >= 2
        assert any(o.startswith("UTMASTG") for o in opcodes) == (entry != "decode"), entry  # decode: from registers
        ffma = sum(o.startswith("FFMA") for o in opcodes)
        if t["SCALING"] == 2:  # promotion with block scales: an FFMA per accumulator at least
            assert ffma >= t["BN"] // 2, (entry, ffma)
        if t["OUT"]:
            assert any(o.startswith("F2FP") for o in opcodes), entry


# e5m2 A with e4m3 B on the tiles in a 2 x 1 cluster and the clustered decode tiles, e4m3 A with
# e5m2 B on the unclustered decode tiles: every entry, both mixed pairs, in two builds.
MIXED_BUILDS = [
    ("e5m2_e4m3", {"SCALING": 2, "DECODE": 32, "BN": 64, "CONSUMERS": 1, "CM": 2, "PROMOTE": 2}),
    ("e4m3_e5m2", {"SCALING": 0, "DECODE": 16, "BN": 64, "CONSUMERS": 1, "PROMOTE": 0, "OUT": 1}),
]


@pytest.mark.parametrize("fp8_types, tunables", MIXED_BUILDS, ids=[types for types, _ in MIXED_BUILDS])
def test_mixed_formats_reach_the_wgmma_of_every_entry_and_swap_on_the_decode_tiles(fp8_types, tunables):
    """QGMMA names wgmma's A format, then B's: the problem's order on any_shape's tiles, the other
    on the decode tiles, whose wgmma reads B's tile as its A operand (fp8_body.cuh's run_decode)."""
    tunables = {**tunables, "TYPES": FP8_TYPES.index(fp8_types)}
    t = SPEC.validate(SPEC.probe(256, 256, 256, tunables), tunables)
    result = build_matrix.built(SPEC, "sm_90", t)
    a, b = (f.upper() for f in fp8_problem(8, 8, 8, fp8_types=fp8_types).operand_formats)
    expected = {"main": f".F32.{a}.{b}"}
    if t["CM"] > 1:
        expected |= {"cluster": f".F32.{a}.{b}", "decode_cluster": f".F32.{b}.{a}"}
    else:
        expected |= {"decode": f".F32.{b}.{a}"}
    assert set(result.entries) == {"pack_rows", *expected}
    for entry, types in expected.items():
        r = result.compiled.resources[result.entries[entry]]
        assert (r.spill_bytes, r.stack_bytes) == (0, 0), f"{entry}: {r}"
        fp8_mma = [i.operands for i in sass(result, entry).instructions if i.opcode.startswith("QGMMA")]
        assert len(fp8_mma) >= 4 and all(types in o for o in fp8_mma), (entry, fp8_mma[:1])
