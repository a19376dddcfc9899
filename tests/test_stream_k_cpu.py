"""Stream-K on the CPU: the work split, the grid, the launch recipe, the tuning space, the builds.

The kernel computes its split on the device (cu/simt/stream_k.cuh); ``stream_k.Schedule`` is
the same arithmetic in Python. These tests hold the split to what the kernel relies on:
every (tile, k step) computed exactly once, at most one partial per CTA and only as its
first unit, a finisher only as a CTA's last stream-K unit and only waiting on higher CTAs
whose first unit is the rest of its tile, equal shares, and the data-parallel waves of the
hybrid. A NumPy replay of the fix-up adds the partial sums as the kernel does and must give
the product. No GPU needed.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import build_matrix
from gemm_driver import kernels
from gemm_driver.kernels.launch import LaunchContext
from gemm_driver.kernels.simt import stream_k, warptiling
from gemm_driver.kernels.simt.stream_k import MIN_STEPS, Schedule, Unit, grid_size
from gemm_driver.kernels.simt.warptiling import TUNE_SPACE, schedule_label
from gemm_driver.problem import GemmProblem

TILE = {"BM": 128, "BN": 128, "BK": 16}
# (M, N, K) and grids: the shapes, ragged edges, K below one step, fewer tiles than CTAs.
SHAPES = [(1, 1, 1), (7, 9, 3), (127, 129, 1000), (1000, 1000, 1000), (1024, 1024, 1024), (64, 64, 16384),
          (512, 512, 512), (16384, 128, 4096), (4093, 4091, 4099), (1024, 1024, 16384), (4096, 4096, 4096),
          (300, 200, 0)]
GRIDS = [1, 2, 3, 7, 64, 100, 131, 132, 133, 264, 528]


def schedule(shape, grid, tile=TILE) -> Schedule:
    return Schedule(*shape, tile["BM"], tile["BN"], tile["BK"], grid)


def assert_split_is_sound(s: Schedule) -> None:
    """Everything the kernel's fix-up relies on, for one schedule."""
    seen = np.zeros((s.tiles, s.iters), dtype=np.int64)
    partial_of = {}  # cta -> tile whose end it stores as a partial
    finishers = {}  # tile -> cta that starts it and adds the others
    for cta in range(s.grid):
        units = s.units(cta)
        sk_units = [u for u in units if u.tile < s.sk_tiles]
        assert units[:len(sk_units)] == sk_units, "the stream-K share comes before the whole tiles"
        for u in units:
            assert 0 <= u.k0 < u.k1 <= s.iters
            seen[u.tile, u.k0:u.k1] += 1
        steps = sum(u.k1 - u.k0 for u in sk_units)
        assert steps == s.begin(cta + 1) - s.begin(cta) in (s.base, s.base + 1), "equal shares, +-1 step"
        for i, u in enumerate(units):
            if u.role == "partial":
                assert i == 0, "only a CTA's first unit can end a tile another CTA started"
                partial_of[cta] = u.tile
            if u.role == "finish":
                assert i == len(sk_units) - 1, "only a CTA's last stream-K unit can start a tile others end"
                assert u.tile not in finishers
                finishers[u.tile] = cta
    assert (seen == 1).all(), "every (tile, k step) exactly once"
    consumed = set()
    for tile, cta in finishers.items():
        peers = s.peers(cta, tile)
        assert len(peers) >= 1 and peers.start == cta + 1, "a finisher waits on higher CTAs only"
        # the finisher's own steps, then each peer's, cover the tile in order
        covered = [u for u in s.units(cta) if u.tile == tile][0].k1
        for p in peers:
            assert partial_of[p] == tile
            first = s.units(p)[0]
            assert (first.tile, first.k0) == (tile, covered)
            covered = first.k1
            consumed.add(p)
        assert covered == s.iters
    assert consumed == set(partial_of), "every partial is added by exactly one finisher"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("grid", GRIDS)
def test_every_tile_and_k_step_is_computed_once_and_partials_meet_their_finisher(shape, grid):
    assert_split_is_sound(schedule(shape, grid))


@settings(max_examples=300, deadline=None)
@given(m=st.integers(1, 3000), n=st.integers(1, 3000), k=st.integers(0, 5000), grid=st.integers(1, 600),
       tile=st.sampled_from([(128, 128, 16), (128, 256, 16), (64, 64, 16), (64, 32, 8)]))
def test_split_is_sound_for_drawn_shapes_and_grids(m, n, k, grid, tile):
    bm, bn, bk = tile
    assert_split_is_sound(Schedule(m, n, k, bm, bn, bk, grid))


@settings(max_examples=300, deadline=None)
@given(m=st.integers(1, 5000), n=st.integers(1, 5000), k=st.integers(0, 20000), grid=st.integers(1, 600))
def test_the_kernels_unit_formula_matches_the_walk(m, n, k, grid):
    """Schedule.unit is stream_k.cuh's Schedule::unit; Schedule.units walks the steps."""
    s = Schedule(m, n, k, 128, 128, 16, grid)
    for cta in {0, 1, grid // 2, grid - 1} & set(range(grid)):
        walked = s.units(cta)
        computed = list(itertools.takewhile(lambda u: u is not None, (s.unit(cta, u) for u in itertools.count())))
        assert computed == walked


def test_hybrid_puts_whole_tiles_in_full_waves_and_one_to_two_tiles_a_cta_in_the_stream_k_wave():
    s = schedule((4096, 4096, 4096), 132, {"BM": 128, "BN": 256, "BK": 16})  # 512 tiles, 256 steps each
    assert (s.tiles, s.iters) == (512, 256)
    assert s.sk_tiles == 512 % 132 + 132 == 248  # the last partial wave plus one full wave
    assert (s.tiles - s.sk_tiles) % 132 == 0  # two whole data-parallel waves
    assert s.iters <= s.base < 2 * s.iters
    assert schedule((2048, 2048, 64), 64).sk_tiles == 0  # 256 tiles: four full waves, nothing to balance
    small = schedule((1024, 1024, 1024), 264)  # 64 tiles for 264 CTAs: every tile shared
    assert (small.sk_tiles, small.base, small.extra) == (64, 15, 136)
    assert all(u.tile < 64 for cta in range(264) for u in small.units(cta))


def test_schedule_refuses_an_empty_grid():
    with pytest.raises(ValueError, match="at least one CTA"):
        Schedule(8, 8, 8, 128, 128, 16, 0)


def _fixup_replay(a: np.ndarray, b: np.ndarray, s: Schedule) -> np.ndarray:
    """C = A B computed the kernel's way: each unit's k steps (step 0 holds the K % BK tail),
    partials stored per CTA, each finisher adding its peers' partials in CTA order."""
    m, n, k = s.m, s.n, s.k
    tail = k - (s.iters - 1) * s.bk if k else 0

    def k_range(k0, k1):  # k steps -> columns of A / rows of B (step 0 is the partial one)
        start = lambda step: 0 if step == 0 else tail + (step - 1) * s.bk
        return slice(start(k0), start(k1) if k else 0)

    def product(unit: Unit) -> np.ndarray:
        r, c = unit.tile // s.tiles_n * s.bm, unit.tile % s.tiles_n * s.bn
        ks = k_range(unit.k0, unit.k1)
        out = np.zeros((s.bm, s.bn), np.float32)
        block = a[r:r + s.bm, ks] @ b[ks, c:c + s.bn]
        out[:block.shape[0], :block.shape[1]] = block
        return out

    slots, c_out = {}, np.full((m, n), np.nan, np.float32)
    for cta in range(s.grid):  # contributors first: their flags are up before any finisher reads them
        first = s.units(cta)[:1]
        if first and first[0].role == "partial":
            slots[cta] = product(first[0])
    for cta in range(s.grid):
        for unit in s.units(cta):
            if unit.role == "partial":
                continue
            acc = product(unit)
            if unit.role == "finish":
                for p in s.peers(cta, unit.tile):
                    acc = acc + slots.pop(p)
            r, c = unit.tile // s.tiles_n * s.bm, unit.tile % s.tiles_n * s.bn
            c_out[r:r + s.bm, c:c + s.bn] = acc[:min(s.bm, m - r), :min(s.bn, n - c)]
    assert not slots, "a partial nobody added"
    return c_out


@pytest.mark.parametrize("shape, grid", [((7, 9, 3), 1), ((37, 29, 53), 5), ((37, 29, 53), 40), ((70, 50, 3), 7),
                                         ((130, 70, 100), 3), ((64, 64, 1000), 9), ((200, 150, 0), 4)])
def test_replaying_the_fixup_gives_the_product(shape, grid):
    rng = np.random.default_rng(sum(shape) + grid)
    m, n, k = shape
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    s = Schedule(m, n, k, 32, 32, 8, grid)
    out = _fixup_replay(a, b, s)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=0, atol=1e-4 * max(k, 1))


# --- the grid and the launch recipe ---------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(m=st.integers(1, 20000), n=st.integers(1, 20000), k=st.integers(0, 20000), resident=st.integers(1, 2000))
def test_the_grid_never_exceeds_the_resident_ctas(m, n, k, resident):
    t = warptiling.stream_k_rung.resolve()
    g = grid_size(GemmProblem(m, n, k), t, resident)
    steps = -(-m // t["BM"]) * -(-n // t["BN"]) * max(1, -(-k // t["BK"]))
    assert 1 <= g <= resident
    assert g <= max(1, -(-steps // MIN_STEPS))


class _Kernel:
    """Stands in for cuda.driver.Kernel: records what the recipe packs and launches."""

    def __init__(self):
        self.entry, self.handle, self.launches = "sgemm_warptiled<...>", None, []

    def pack(self, *args):
        return args

    def launch(self, grid, block, args, stream):
        self.launches.append((grid, block, args))


class _Device:
    sm_count = 132


class _Operand:
    def __init__(self, ptr, ld):
        self.ptr, self.ld, self.itemsize = ptr, ld, 4


def _launch(spec_name, problem, tunables, resident_per_sm):
    spec = kernels.KERNELS[spec_name]
    t = spec.validate(problem, tunables)
    kernel, scratch = _Kernel(), []

    def workspace(name, nbytes, *, zeroed=False):
        scratch.append((name, nbytes, zeroed))
        return 0x1000 * len(scratch)

    ctx = LaunchContext(spec, {"main": kernel}, problem, _Operand(0xA0, problem.k), _Operand(0xB0, problem.n),
                      _Operand(0xC0, problem.n), t, "stream", workspace, _Device())
    asked = []

    def resident(kernel_, threads, smem, sm_count):
        asked.append((threads, smem, sm_count))
        return resident_per_sm * sm_count

    stream_k.make_recipe(resident)(ctx)()
    return kernel.launches, scratch, asked, t


def test_stream_k_recipe_launches_one_cta_per_resident_slot_with_zeroed_flags():
    launches, scratch, asked, t = _launch("stream_k", GemmProblem(1024, 1024, 1024), {}, resident_per_sm=2)
    ((grid, block, args),) = launches
    assert grid == (264, 1, 1) and block == (256, 1, 1)
    assert asked == [(256, warptiling.shared_bytes(t), 132)]  # the occupancy of this block and shared memory
    assert scratch == [(stream_k.PARTIALS, 264 * 128 * 128 * 4, False), (stream_k.FLAGS, 264 * 4, True)]
    assert args[:4] == (1024, 1024, 1024, 1.0) and args[-2:] == (0x1000, 0x2000)


def test_per_sm_caps_the_grid_and_small_problems_get_fewer_ctas():
    launches, *_ = _launch("stream_k", GemmProblem(1024, 1024, 1024), {"PER_SM": 1}, resident_per_sm=2)
    assert launches[0][0] == (132, 1, 1)
    launches, scratch, *_ = _launch("stream_k", GemmProblem(7, 9, 3), {}, resident_per_sm=2)
    assert launches[0][0] == (1, 1, 1) and scratch[1] == (stream_k.FLAGS, 4, True)


def test_without_stream_k_the_tile_grid_runs_as_before():
    launches, scratch, asked, _ = _launch("warptiled", GemmProblem(300, 200, 99),
                                          {"BM": 128, "BN": 128, "WN": 32, "TN": 8, "SPLITK": 3}, 2)
    assert launches[0][0] == (2, 3, 3) and asked == []
    assert scratch == [("workspace", 4 * 3 * 384 * 256, False), ("counters", 4 * 3 * 2, True)]


def test_empty_output_launches_nothing():
    launches, scratch, *_ = _launch("stream_k", GemmProblem(0, 64, 64), {}, 2)
    assert launches == [] and scratch == []


def test_occupancy_query_falls_back_to_one_cta_per_sm(monkeypatch):
    from gemm_driver.cuda.errors import CudaError

    class Refusing:
        def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, *args):
            raise CudaError("CUDA_ERROR_NOT_INITIALIZED", "initialization error")

    monkeypatch.setattr(stream_k, "api", lambda: Refusing())
    assert stream_k.resident_ctas(_Kernel(), 256, 1024, 132) == 132


# --- the specs and the tuning space -------------------------------------------------------------
def test_stream_k_is_a_rung_between_warptiled_and_autotuned_sharing_their_recipe():
    ladder = [s.name for s in kernels.LADDER if s.precision == "fp32"]
    assert ladder[ladder.index("warptiled") + 1:ladder.index("warptiled") + 3] == ["stream_k", "autotuned"]
    recipes = {kernels.KERNELS[n].launch_recipe for n in ("warptiled", "stream_k", "autotuned")}
    assert len(recipes) == 1 and None not in recipes
    assert kernels.KERNELS["stream_k"].resolve()["STREAMK"] == 1


@pytest.mark.parametrize("overrides, message", [
    ({"STREAMK": 1, "SPLITK": 2}, "stream-K (STREAMK=1) splits the k loop itself; it takes SPLITK=1, got 2"),
    ({"PER_SM": 1}, "PER_SM=1 sizes a stream-K grid; it needs STREAMK=1"),
])
def test_mixed_schedules_are_refused_naming_the_rule(overrides, message):
    with pytest.raises(ValueError) as info:
        kernels.KERNELS["warptiled"].validate(GemmProblem(256, 256, 256), overrides)
    assert str(info.value) == f"warptiled: {message}"


def test_tune_space_offers_every_schedule_and_the_spill_gate_builds_its_stream_k_tilings():
    labels = {schedule_label(c) for c in TUNE_SPACE}
    assert {"data-parallel", "split-K 2", "split-K 4", "stream-K", "stream-K 1/SM"} <= labels
    assert schedule_label({"TILE": 16}) == ""
    # each stream-K configuration of the sweep is one the spill gate builds (stream_k.checked)
    template = warptiling.ENTRY
    gated = {template.format(**c) for c in kernels.KERNELS["stream_k"].configurations()}
    assert {template.format(**c) for c in TUNE_SPACE if c["STREAMK"]} <= gated
    assert len(TUNE_SPACE) <= 30, "the sweep of the issue's 8 shapes must stay near 5 minutes"


def test_a_table_entry_with_a_schedule_resolves_for_autotuned(tmp_path):
    import json

    from gemm_driver.kernels import tuned

    best = {**warptiling.STREAM_K_TILING, "SPLITK": 1, "STREAMK": 1, "PER_SM": 1}
    table = {"schema": tuned.SCHEMA, "kernel": "warptiled", "gpu": "Some GPU",
             "entries": [{"shape": [1024, 1024, 1024], "best": best}]}
    (tmp_path / "some-gpu.json").write_text(json.dumps(table))
    tunables, why = tuned.pick(tuned.load_table("Some GPU", tmp_path), GemmProblem(1000, 1000, 1000))
    assert kernels.KERNELS["autotuned"].validate(GemmProblem(1000, 1000, 1000), tunables)["PER_SM"] == 1
    assert why == "tuned at 1024x1024x1024" and schedule_label(tunables) == "stream-K 1/SM"


# --- the build ----------------------------------------------------------------------------------
# stream_k's default on each architecture: the build matrix's own (the spill gate's), read here
@pytest.mark.parametrize("b", [build_matrix.default_build(kernels.KERNELS["stream_k"], arch)
                               for arch in build_matrix.ARCHS])
def test_stream_k_builds_with_acquire_release_flags_and_no_float_atomics(b):
    result = build_matrix.built(b.spec, b.arch)
    r = result.resources
    assert r.spill_store_bytes == 0 and r.spill_load_bytes == 0 and r.stack_bytes == 0
    assert r.registers <= 128  # two 256-thread CTAs an SM, as __launch_bounds__ asks
    ptx = result.compiled.ptx.decode()
    assert "st.release.gpu.global.u32" in ptx and "ld.acquire.gpu.global.u32" in ptx
    assert not re.search(r"\b(atom|red)\.[^;]*\.f32", ptx), "partial sums must never meet through float atomics"
