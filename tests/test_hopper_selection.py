"""The Hopper BF16/FP16 selection on the CPU: the candidates it offers, the vote of the nearest
measured tuning shapes, and the analytic rule where a GPU has no table."""

from __future__ import annotations

import json
import math

import pytest

from gemm_driver import corpus, kernels
from gemm_driver.kernels import tuned
from gemm_driver.kernels.hopper import rungs, selection, tf32_selection
from gemm_driver.problem import GemmProblem

import build_matrix

SHAPES = [(1, 4096, 4096), (32, 28672, 4096), (256, 6144, 4096), (768, 768, 768), (2048, 4096, 14336),
          (4093, 4091, 4099), (8192, 8192, 8192), (167, 2642, 521), (1024, 1024, 16384)]


@pytest.mark.parametrize("shape", SHAPES)
def test_every_offered_candidate_is_a_valid_configuration(shape):
    problem = GemmProblem(*shape)
    offered = selection.candidates(problem)
    assert len(offered) == len({tuned.label(c) for c in offered}) >= 5
    for precision in ("bf16", "fp16"):
        for tunables in offered:
            kernels.KERNELS[f"hopper_{precision}"].validate(problem, tunables)  # raises, naming the rule, if not


def _swept_candidates() -> list[dict]:
    """Every configuration the vote offers on some shape of the tuning set (what a sweep times),
    one for each set of kernels they compile (SPLITS, PDL and the like are launch arguments)."""
    spec, found = kernels.KERNELS["hopper_bf16"], {}
    for shape in corpus.corpus("all:tune"):
        for tunables in selection.candidates(GemmProblem(shape.m, shape.n, shape.k)):
            found.setdefault(tuple(sorted(spec.entry_expressions(spec.resolve(tunables)).items())), tunables)
    return list(found.values())


@pytest.mark.parametrize("tunables", [  # in the build's xdist group: PDL=1 builds the matrix's default
    pytest.param(t, id=tuned.label(t), marks=build_matrix.group(kernels.KERNELS["hopper_bf16"], "sm_90", t))
    for t in _swept_candidates()])
def test_every_candidate_a_sweep_times_builds_without_spills(tunables):
    """A candidate that spills is refused by the sweep, untimed, and the vote never picks it
    again; the spill gate builds one configuration per code path, and a spill can hang on the
    tile's width alone (128 x 192 split-K clusters spilled 40 B, 128 x 128 ones none)."""
    result = build_matrix.built(kernels.KERNELS["hopper_bf16"], "sm_90", tunables)
    for entry, symbol in result.entries.items():
        r = result.compiled.resources[symbol]
        assert (r.spill_bytes, r.stack_bytes) == (0, 0), f"{tuned.label(tunables)} {entry}: {r}"


@pytest.mark.parametrize("shape", SHAPES)
def test_split_k_is_offered_only_where_every_slice_is_resident(shape):
    problem = GemmProblem(*shape)
    for tunables in selection.candidates(problem):
        splits, cm = tunables.get("SPLITS", 1), tunables.get("CM", 1)
        if splits > 1:
            one_consumer = tunables.get("CONSUMERS", 2) == 1  # 64-row tiles, two CTAs an SM
            rows, cols = -(-problem.m // (64 if one_consumer else 128)), -(-problem.n // tunables.get("BN", 256))
            resident = selection.SMS * (2 if one_consumer else 1)
            assert splits * -(-rows // cm) * cols * cm <= resident and rows % cm == 0
            assert problem.k >= splits * 128


@pytest.mark.parametrize("shape", SHAPES)
def test_whole_tiles_take_a_2x1_cluster_only_over_two_tile_rows_or_more(shape):
    problem = GemmProblem(*shape)
    clustered = [t for t in selection.candidates(problem) if t.get("CM") == 2 and "SPLITS" not in t]
    assert bool(clustered) == (problem.m > 128)


def test_small_m_is_offered_one_consumer_tiles_split_over_k():
    small = selection.candidates(GemmProblem(16, 4096, 7168))
    assert {**selection.SMALL_M_TILES[0], "SPLITS": 4} in small and selection.TILE_64x64 in small
    # 4096 / 64 tiles of 64 x 64 split 8 ways would be 512 CTAs: more than two an SM can hold
    assert {**selection.SMALL_M_TILES[1], "SPLITS": 8} not in small
    wide = selection.candidates(GemmProblem(256, 4096, 7168))
    assert not any(c.get("CONSUMERS") == 1 and c.get("SPLITS") for c in wide)


def test_ping_pong_tiles_are_offered_past_m_128_on_grids_of_two_waves_or_more():
    def ping_pong(shape):
        return [t for t in selection.candidates(GemmProblem(*shape)) if t.get("PINGPONG")]
    assert ping_pong((2048, 4800, 1600)) == [selection.PINGPONG_TILE, {**selection.PINGPONG_TILE, "CM": 2}]
    assert not ping_pong((1024, 4096, 4096))  # 256 tiles of 128 x 128: under two waves of 132
    assert not ping_pong((128, 65536, 4096))  # 512 tiles, but M <= 128: one tile row


def _entry(shape, speeds):
    """A table entry as tools/autotune.py writes it, from {label-less tunables tuple: TFLOP/s}."""
    ranked = sorted(speeds, key=lambda item: -item[1])
    return {"shape": list(shape), "best": ranked[0][0], "tflops": ranked[0][1],
            "runners_up": [{"tunables": t, "tflops": v} for t, v in ranked[1:]]}


FAST_SMALL = selection.TILE_128x64
FULL = selection.TILE_128x256


def test_the_vote_takes_what_the_nearest_shapes_measured_fastest():
    entries = [_entry((1024, 1024, 1024), [(FAST_SMALL, 300.0), (FULL, 200.0)]),
               _entry((1024, 2048, 1024), [(FAST_SMALL, 310.0), (FULL, 250.0)]),
               _entry((8192, 8192, 8192), [(FAST_SMALL, 500.0), (FULL, 700.0)]),
               _entry((8192, 8192, 4096), [(FAST_SMALL, 480.0), (FULL, 690.0)])]
    small, why = selection.vote(entries, GemmProblem(1200, 1500, 1100))
    assert small == FAST_SMALL and "1024x1024x1024" in why
    assert selection.vote(entries, GemmProblem(7000, 9000, 6000))[0] == FULL
    assert selection.vote([], GemmProblem(64, 64, 64)) is None


def test_a_candidate_no_neighbour_measured_counts_as_twice_as_slow():
    # only FULL ran near this shape; every other candidate is unmeasured there, so FULL wins
    # even at a neighbour's 0.6x of its winner's speed
    entries = [_entry((4096, 4096, 4096), [(FULL, 600.0)])]
    assert selection.vote(entries, GemmProblem(4096, 4096, 4096))[0] == FULL
    assert tuned.slowdown_at(entries[0], FULL) == 1.0
    assert tuned.slowdown_at(entries[0], FAST_SMALL) == float("inf")


def test_the_vote_offers_only_candidates_the_shape_can_run():
    split = {**selection.SPLIT_TILE, "SPLITS": 2}  # 2 x 64 tiles of 128 x 128 fit 132 SMs; 4 x 64 would not
    assert {**split, "SPLITS": 4} not in selection.candidates(GemmProblem(1024, 1024, 16384))
    entries = [_entry((1024, 1024, 16384), [(split, 600.0), (FAST_SMALL, 400.0)])]
    assert selection.vote(entries, GemmProblem(1024, 1024, 16384))[0] == split
    # 8192^2 of 128 x 128 tiles cannot all be resident: split-K is not offered there
    assert selection.vote(entries, GemmProblem(8192, 8192, 16384))[0] == FAST_SMALL


def test_without_a_table_the_analytic_rule_chooses_and_says_so():
    problem = GemmProblem(4096, 4096, 4096)
    tunables, why = rungs.choose_any_shape(problem, "NVIDIA Imaginary GPU")
    assert (tunables, why.split("; ")[0]) == rungs.analytic_choice(problem, "NVIDIA Imaginary GPU")
    assert why.endswith("no tuning-set table for this GPU")


def test_the_candidates_run_a_linear_layer_too():
    problem = GemmProblem(2048, 4096, 14336, trans_b=True, out_dtype="bf16", epilogue="bias_gelu")
    for tunables in selection.candidates(problem):
        kernels.KERNELS["hopper_bf16"].validate(problem, tunables)


H100 = "NVIDIA H100 80GB HBM3"


def test_the_h100_table_is_the_tuning_set_swept():
    table = tuned.load_table(H100, kernel=selection.TABLE_KERNEL)
    tuning = {(s.m, s.n, s.k) for s in corpus.corpus("all:tune")}
    assert {tuple(e["shape"]) for e in table["entries"]} == tuning  # and so no validation shape
    for entry in table["entries"]:  # every offered candidate ran there
        offered = selection.candidates(GemmProblem(*entry["shape"]))
        assert all(tuned.slowdown_at(entry, c) < float("inf") for c in offered), entry["shape"]


def test_on_the_h100_the_vote_chooses_and_holds_up_with_each_shape_left_out():
    table = tuned.load_table(H100, kernel=selection.TABLE_KERNEL)
    problem = GemmProblem(3000, 5000, 3000)  # K past rungs.SHORT_K_MAX: the vote's
    tunables, why = kernels.KERNELS["hopper_bf16"].choose(problem, H100)
    assert tunables in selection.candidates(problem) and "nearest tuning shapes" in why
    choose = lambda name: kernels.KERNELS[name].choose(problem, H100)
    assert choose("hopper_fp16") == choose("hopper_bf16")  # one table for both
    slowdowns = selection.left_out_slowdowns(table["entries"])
    assert len(slowdowns) == len(table["entries"])
    geomean = math.exp(sum(map(math.log, slowdowns)) / len(slowdowns))
    # measured: 1.037 and 1.526 with ties broken (selection.py's docstring); the
    # worst, 167x452x7577, is won by split-K in clusters, which rungs.grid_fill_choice takes first
    assert geomean < 1.045 and max(slowdowns) < 1.65


# --- hopper_tf32: the vote past M = 128 where a table exists, the rules elsewhere -------------
@pytest.mark.parametrize("shape", SHAPES)
def test_every_offered_tf32_candidate_is_a_valid_configuration_with_every_split_resident(shape):
    problem = GemmProblem(*shape)
    offered = tf32_selection.candidates(problem)
    assert len(offered) == len({tuned.label(c) for c in offered}) >= 3  # each tile height whole
    for tunables in offered:
        kernels.KERNELS["hopper_tf32"].validate(problem, tunables)  # raises, naming the rule, if not
        if tunables.get("SPLITS", 1) > 1:
            rows = -(-problem.m // tunables.get("BM", 256))
            assert rows * -(-problem.n // 128) * tunables["SPLITS"] <= selection.SMS
            assert problem.k >= tunables["SPLITS"] * tf32_selection.SLICE_K


def test_tf32_votes_past_m_128_where_the_gpu_has_a_table_and_keeps_its_rules_elsewhere(tmp_path, monkeypatch):
    split = {"BM": 128, "SPLITS": 2}
    entries = [_entry((256, 4096, 14336), [(split, 400.0), ({"CN": 2, "PDL": 1}, 300.0)]),
               _entry((256, 3584, 18944), [(split, 380.0), ({"CN": 2, "PDL": 1}, 320.0)])]
    document = {"schema": tuned.SCHEMA, "kernel": "hopper_tf32", "gpu": "Some GPU", "entries": entries}
    (tmp_path / "some-gpu.hopper_tf32.json").write_text(json.dumps(document))
    load = tuned.load_table
    monkeypatch.setattr(tuned, "load_table", lambda name, kernel=None: load(name, tmp_path, kernel))
    spec = kernels.KERNELS["hopper_tf32"]
    tunables, why = spec.choose(GemmProblem(256, 4096, 16384), "Some GPU")  # 64 units of 128 x 128, 2 slices
    assert tunables == split and "nearest tuning shapes" in why
    for rule_decides in (GemmProblem(128, 4096, 16384), GemmProblem(256, 4096, 16384, trans_b=True)):
        assert spec.choose(rule_decides, "Some GPU") == spec.choose(rule_decides, "NVIDIA Imaginary GPU")
    assert "nearest" not in spec.choose(GemmProblem(256, 4096, 16384), "NVIDIA Imaginary GPU")[1]


def test_the_h100_tf32_table_is_the_tuning_set_past_m_128_and_its_vote_holds_up_left_out():
    table = tuned.load_table(H100, kernel=tf32_selection.TABLE_KERNEL)
    deciding = {(s.m, s.n, s.k) for s in corpus.corpus("all:tune") if s.m > tf32_selection.VOTE_MIN_M}
    assert {tuple(e["shape"]) for e in table["entries"]} == deciding  # and so no validation shape
    for entry in table["entries"]:  # every offered candidate ran there
        offered = tf32_selection.candidates(GemmProblem(*entry["shape"]))
        assert all(tuned.slowdown_at(entry, c) < float("inf") for c in offered), entry["shape"]
    slowdowns = tuned.left_out_slowdowns(table["entries"], tf32_selection.candidates)
    geomean = math.exp(sum(map(math.log, slowdowns)) / len(slowdowns))
    # measured: 1.053 and 1.721 (tf32_selection.py's docstring)
    assert len(slowdowns) == len(table["entries"]) and geomean < 1.06 and max(slowdowns) < 1.73


@pytest.mark.parametrize("shape, pick, filled", [
    ((1024, 1280, 6144), {"PDL": 1}, {"SPLITS": 3}),  # 40 whole 256 x 128 tiles: 3 slices keep 120 resident
    ((1152, 1536, 12288), {"PDL": 1}, {"SPLITS": 2}),  # 60 tiles: 2 slices
    ((1280, 1792, 6144), {"PDL": 1}, None),  # 70 tiles: more than half the SMs
    ((768, 2048, 8192), {"BM": 128, "PDL": 1}, None),  # 96 tiles of 128 x 128
    ((1024, 1024, 12288), {"SPLITS": 4}, None),  # the pick is the split already
    ((393, 172, 2766), {"BM": 128, "CONSUMERS": 1, "PDL": 1}, None),  # 12 units; the split would make 8
    ((1024, 1280, 512), {"PDL": 1}, None),  # no slice keeps 1024 of K
])
def test_tf32_fill_splits_256_row_tiles_where_the_vote_leaves_half_the_sms_idle(shape, pick, filled):
    problem = GemmProblem(*shape)
    got = tf32_selection.filled(problem, pick)
    assert (got and got[0]) == filled
    if filled:
        kernels.KERNELS["hopper_tf32"].validate(problem, filled)
        assert "leave SMs idle" in got[1] and "\n" not in got[1]
