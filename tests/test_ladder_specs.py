"""The ladder rungs' specs (kernels/simt/blocktiling.py) without a GPU: order, rules, geometry, builds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import build_matrix
from gemm_driver import kernels
from gemm_driver.inspection import disassemble, kernel_stats, main_loop, mix
from gemm_driver.kernels.simt import blocktiling as ladder
from gemm_driver.kernels.build import build
from gemm_driver.cuda.errors import NvrtcError
from gemm_driver.problem import GemmProblem

RUNGS = ["blocktile_1d", "blocktile_2d", "vectorized", "bank_conflict_free", "double_buffered"]
P256 = GemmProblem(256, 256, 256)


def test_rungs_sit_between_smem_tiled_and_warptiled_in_ladder_order():
    names = [spec.name for spec in kernels.LADDER]
    start = names.index("smem_tiled") + 1
    assert names[start:start + len(RUNGS)] == RUNGS
    assert [s.name for s in ladder.SPECS] == RUNGS


@pytest.mark.parametrize("name", RUNGS)
def test_defaults_are_valid_and_choice_lists_stay_small(name):
    spec = kernels.KERNELS[name]
    spec.validate(P256)
    assert 1 <= len(spec.configurations()) <= 8  # the spill gate builds each for two archs


@pytest.mark.parametrize("name, overrides, message", [
    ("blocktile_1d", {"BM": 128, "TM": 8}, "BM*BN/TM = 1024 threads per block; at most 512"),
    ("double_buffered", {"ASYNC": 0, "STAGES": 3}, "STAGES=3 needs ASYNC=1"),
    ("double_buffered", {"ASYNC": 0, "STAGES": 4}, "register prefetch (ASYNC=0) uses exactly 2 stages"),
    ("blocktile_2d", {"TM": 4}, "TM=4 is not allowed; choose one of [8]"),
    ("vectorized", {"BK": 32}, "BK=32 is not allowed; choose one of [8, 16]"),
    ("vectorized", {"BM": 128, "BK": 16}, "BM=128, BN=128 with BK=16 sits at the 128-register cap and can spill"),
    ("double_buffered", {"BK": 16}, "BK=16 is not allowed; choose one of [8]"),
    ("bank_conflict_free", {"PAD": 1}, "has no tunable 'PAD'"),
])
def test_refused_configurations_name_the_rule(name, overrides, message):
    with pytest.raises(ValueError) as info:
        kernels.KERNELS[name].validate(P256, overrides)
    assert message in str(info.value) and str(info.value).count("\n") == 0


def test_rule_messages_for_choices_the_lists_do_not_offer():
    """The rules stand on their own: wider choice lists must not let a broken tile through."""
    t = {"BM": 64, "BN": 128, "BK": 4, "TM": 8, "TN": 8, "ASYNC": 1, "STAGES": 2}
    assert "must be a multiple of the 128 threads" in ladder._whole_float4s_per_thread(P256, t)
    t = {"BM": 128, "BN": 256, "BK": 64, "TM": 8}
    assert "98304 bytes exceeds 49152" in ladder._fits_static_smem(ladder._plain_smem)(P256, t)


@pytest.mark.parametrize("name", RUNGS)
@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 40_000), n=st.integers(1, 40_000))
def test_grid_covers_c_exactly_once(name, m, n):
    spec = kernels.KERNELS[name]
    t = spec.resolve()
    gx, gy, gz = spec.grid(GemmProblem(m, n, 7), t)
    assert gz == 1
    assert (gx - 1) * t["BN"] < n <= gx * t["BN"]  # x walks N, y walks M
    assert (gy - 1) * t["BM"] < m <= gy * t["BM"]


@pytest.mark.parametrize("name, shape, grid", [
    ("blocktile_1d", (1, 1, 1), (1, 1, 1)),
    ("blocktile_1d", (4093, 4091, 4099), (64, 64, 1)),
    ("blocktile_2d", (4093, 4091, 4099), (32, 64, 1)),
    ("vectorized", (129, 1, 5), (1, 3, 1)),
    ("bank_conflict_free", (129, 1, 5), (1, 3, 1)),
    ("double_buffered", (129, 1, 5), (1, 2, 1)),
    ("double_buffered", (1000, 1000, 1000), (8, 8, 1)),
])
def test_grids_of_odd_shapes(name, shape, grid):
    spec = kernels.KERNELS[name]
    assert spec.grid(GemmProblem(*shape), spec.resolve()) == grid


@pytest.mark.parametrize("name, threads", [("blocktile_1d", 256), ("blocktile_2d", 128), ("vectorized", 128),
                                           ("bank_conflict_free", 128), ("double_buffered", 256)])
def test_default_block_sizes(name, threads):
    spec = kernels.KERNELS[name]
    assert spec.block(spec.resolve()) == (threads, 1, 1)


@pytest.mark.parametrize("stages, expected", [(2, 16640), (3, 24960), (4, 33280)])
def test_double_buffered_dynamic_smem_is_stages_of_padded_tiles(stages, expected):
    spec = kernels.KERNELS["double_buffered"]
    t = spec.resolve({"ASYNC": 1, "STAGES": stages})
    assert spec.dynamic_smem(t) == expected == stages * 4 * 8 * (128 + 4 + 128)


def test_padding_is_what_the_compiled_kernel_allocates():
    """bank_conflict_free's As rows are BM + 4 floats: 8 * 4 bytes * 4 more than vectorized."""
    tile = {"BM": 128, "BK": 8}
    plain = kernel_stats(kernels.KERNELS["vectorized"], "sm_90", tile)
    padded = kernel_stats(kernels.KERNELS["bank_conflict_free"], "sm_90", tile)
    assert padded["shared_bytes"] - plain["shared_bytes"] == 8 * 4 * 4


def test_async_path_is_refused_below_sm_80_by_the_compiler():
    spec = kernels.KERNELS["double_buffered"]
    with pytest.raises(NvrtcError) as info:
        build(spec, "sm_75", {"ASYNC": 1, "STAGES": 3})
    assert "ASYNC=1 needs sm_80" in str(info.value.log)
    # The register path builds. It sits at its 128-register cap: local builds spill nothing, one
    # CI build under load spilled 12 bytes (ptxas varies there, build_matrix.NEARLY_ZERO)
    resources = build(spec, "sm_75", {"ASYNC": 0, "STAGES": 2}).resources
    assert resources.registers <= 128 and resources.spill_store_bytes <= 16


def _loop(name, tunables=None):
    built = build(kernels.KERNELS[name], "sm_90", tunables or {})
    loop = main_loop(disassemble(built.compiled.cubin, built.entry))
    assert loop is not None
    return mix.count(i.opcode for i in loop.instructions)


def test_vectorized_inner_loop_reads_fragments_with_lds128_only():
    # 128 x 128 x 8 tile, 8 x 8 per thread: per k, 2 LDS.128 for A and 2 for B; 64 FFMA.
    # ptxas now and then adds a scalar LDS beside them (build_matrix.NEARLY_ZERO says why).
    for name in ("vectorized", "bank_conflict_free"):
        loop = _loop(name, {"BM": 128, "BK": 8})
        assert (loop["lds128"], loop["ffma"]) == (8 * 4, 8 * 64), name
        assert loop["lds32"] <= build_matrix.NEARLY_ZERO[name]["lds32"], name


def test_double_buffered_async_loop_copies_with_ldgsts_and_one_barrier():
    loop = _loop("double_buffered", {"ASYNC": 1, "STAGES": 3})
    # per thread and tile: 4 floats of A (4-byte copies), 1 float4 of B; one barrier.
    assert loop["ldgsts"] >= 5 and loop["bar"] == 1 and loop["sts32"] == loop["sts128"] == 0
    assert loop["ffma"] == 8 * 64
