"""Which tunables ``hopper_bf16``/``hopper_fp16`` run on a shape: the candidates, and the vote of
the nearest measured shapes of the corpus's tuning set.

The candidates are the configurations the analytic rule (``rungs.analytic_choice``) picks
among, plus the one-consumer 64 x 128 tiles and more split-K depths; past M = ``SMALL_M`` on
grids of two waves of 128 x 128 tiles or more, the ping-pong tiles; for M <= ``SMALL_M`` also
one-consumer 64 x 64 tiles and both one-consumer tiles split 2, 4 or 8 ways (two CTAs an SM:
a small M's time is the read of B, and more CTAs read it at once). ``candidates(problem)``
offers only those that can run the shape well-formed: split-K only where every slice of every
tile is resident at once (the slices of a tile hand their partial sums over in order, so a
slice waiting for one that has no SM would wait for ever) and K holds at least two k tiles a
slice; split-K with a 2 x 1 cluster only over an even number of tile rows, and whole tiles in
2 x 1 clusters only over two tile rows or more (M > 128: over one, the second CTA of each
cluster has no rows, and at M = 96-128 such a pick ran at 0.50-0.91 of the faster baseline
where the same tiles without the cluster ran at 0.51-1.00,
results/h100-80gb-hbm3/probe-vote-candidates-m128.txt).

The fitted pick. ``tools/autotune.py --kernel hopper_bf16 --corpus all:tune`` verifies and
times every candidate on each shape of the tuning set (docs/corpus.md: no validation shape is
ever swept) and writes ``gemm_driver/tuned/<gpu>.hopper_bf16.json`` with every candidate's
TFLOP/s per shape. The candidates run as the launch will: with the tail split (TAIL=4, the
default) where a grid ends in a partial wave. For any other shape the nearest tuning shapes
vote (``tuned.vote``: each candidate's predicted slowdown, weighted by closeness) among the
candidates offered for it; candidates predicted within ``TIE`` (0.5%) of the best are a tie,
which the nearest tuning shape's own timings break.

Distance is measured in the features that decide between the candidates (``tuned.features``):
log2 of the number of 128 x 128 tiles (how full the grid is), log2 K (how deep each tile's
loop is, and whether splitting pays) and log2 M (how many rows a 128-row tile wastes at small
M). They were chosen, with ``NEIGHBOURS``, on the tuning set alone, each shape's pick made
without its own measurements: on the H100's first table the pick measured 1.031x slower than
that shape's winner (geometric mean over the 99 shapes; 1.037x after the small-M re-sweep)
against 1.037-1.048 for log2(M, N, K) with 1-4 neighbours and 1.165 for the analytic rule.
The tables now, swept with the tail split: 1.037x on the H100 with ties broken (worst 1.53x; its
shapes of M > 128 swept again on one H100, the last line of
results/h100-80gb-hbm3/autotune-hopper-bf16-tuning-set-again.txt, then the ten shapes where the
128 x 192 split-K clusters had spilled, autotune-hopper-bf16-cluster-split-192.txt; 1.039x on the sweep
before, autotune-hopper-bf16-tuning-set-pingpong.txt: the drift between two sweeps), 1.053x on the
H200 with ties broken (its shapes of M > 128 swept again on four H200s with the swapped ping-pong
tiles among the candidates, the last line of
results/h200/autotune-hopper-bf16-tuning-set-swapped-pingpong.txt; the same without them, as
offered now; 1.054x before, results/h200/autotune-hopper-bf16-tuning-set-4-gpus.txt, and two more
sweeps of that, results/h200/sweep-one-vs-four-gpus-whole/, read 1.056x and 1.050x);
tests/test_hopper_selection.py repeats the check on the committed H100 table.

The 128 x 128 and 128 x 64 tiles without PDL were candidates for one sweep (the H200's table
holds their timings at M <= 128). PDL off was more than 3% faster in 43 of the 198 pairs (PDL on in 81),
but the fastest candidate on only 1 of the 99 shapes (2048x3584x3584, by 0.4%), and the
left-out check read 1.057x with them against 1.054x without: they are not offered.
``rungs.without_pdl`` takes PDL off where the probes found it lost, on mid-size grids the
tuning set barely holds.

FP16 runs the same template with the same tiles and reads the BF16 table: no FP16 sweep has
run (in results/h100-80gb-hbm3/bench-quick.txt FP16 ran at 0.93-1.00x the BF16 speed).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from ...cuda.arch_limits import MEASURED_SM_COUNT
from ...problem import GemmProblem
from .. import tuned
from ..spec import ceil_div
from . import geometry as geo

SMS = MEASURED_SM_COUNT
TABLE_KERNEL = "hopper_bf16"  # the table both precisions read


def no_pdl(tile: Mapping[str, int]) -> dict[str, int]:
    """``tile`` launched without PDL (its default)."""
    return {name: value for name, value in tile.items() if name != "PDL"}


TILE_128x256 = {"PDL": 1}
TILE_128x128 = {"BN": 128, "STAGES": 6, "PDL": 1}
TILE_128x64 = {"BN": 64, "STAGES": 8, "PDL": 1}
TILE_64x128 = {"BN": 128, "CONSUMERS": 1, "PDL": 1}  # one consumer: two CTAs an SM
TILE_64x64 = {"BN": 64, "CONSUMERS": 1, "STAGES": 6, "PDL": 1}
SPLIT_TILE = {"BN": 128, "STAGES": 6}  # split-K's tiles (PDL lost with split-K: rungs.analytic_choice)
# Small M (decode: the weight's read sets the time): one-consumer tiles, two CTAs an SM, split
# over K so that as many CTAs as can be resident read their share of B at once (without PDL,
# which lost with split-K, as for SPLIT_TILE).
SMALL_M = 128
SMALL_M_TILES = (no_pdl(TILE_64x128), no_pdl(TILE_64x64))
SMALL_M_SPLITS = (2, 4, 8)
# Split-K inside clusters (CK: a tile's k ranges added through distributed shared memory, no
# workspace, PDL kept) on grids of fewer tiles than SMs past the small-grid rule
# (rungs.grid_fill_choice): the forms that won on some of the mid-size grids probed on the H100
# (results/h100-80gb-hbm3/probe-grid-fill-cluster-split-mid.txt: 128 x 192 in clusters of 3 at
# 1536x576x7168, 26.9 us against 37.0 for the vote's pick), no one of them on all.
CLUSTER_SPLIT_TILES = ({"BN": 192, "CK": 3, "PDL": 1}, {"BN": 192, "CK": 4, "PDL": 1},
                       {**TILE_128x128, "CK": 2}, {**TILE_128x64, "CK": 2})
CLUSTER_SPLIT_MIN_M = 64  # below, their 128-row tiles compute more padding than rows
# Ping-pong tiles (PINGPONG: each consumer a whole 128 x 128 tile in turn, one's epilogue beside
# the other's k loop) on grids of two waves of 128 x 128 tiles or more, where an epilogue hidden
# per tile adds up: they beat the vote's pick on five of eight full grids of short K probed on
# the H100 and lost at long K (results/h100-80gb-hbm3/probe-short-k-pingpong.txt).
PINGPONG_TILE = {**TILE_128x128, "PINGPONG": 1}
PINGPONG_MIN_WAVES = 2
# Candidates the vote predicts within this fraction of each other are a tie, broken by the nearest
# tuning shape's timings. Chosen on the H100's tuning set alone (left_out_slowdowns below, no tie
# and ties of 0.2, 0.5, 1 and 2%: 1.041, 1.041, 1.039, 1.042, 1.040; the H200's table 1.039 without,
# 1.040 with 0.5%). What prompted it: at 1024^3 the two nearest shapes
# (768^3, whose winner is 128 x 64 tiles, and the odd 1999x883x1170) predicted 1.1003 for the 128 x
# 64 tiles and 1.0994 for one-consumer 64 x 128 tiles.
TIE = 0.005


def candidates(problem: GemmProblem) -> list[dict[str, int]]:
    """The configurations offered for ``problem`` (see the module's docstring), in a fixed order."""
    m, n, k = max(problem.m, 1), max(problem.n, 1), max(problem.k, 1)
    rows, cols = ceil_div(m, 128), ceil_div(n, 128)
    # a 2 x 1 cluster over a single tile row leaves one CTA of each pair without rows
    pair = (lambda tile: [tile, {**tile, "CM": 2}]) if rows >= 2 else (lambda tile: [tile])
    offered = [*pair(TILE_128x256), *pair(TILE_128x128), TILE_128x64, TILE_64x128]
    if m > SMALL_M and rows * cols >= PINGPONG_MIN_WAVES * SMS:
        offered += pair(PINGPONG_TILE)
    if m <= SMALL_M:
        offered.append(TILE_64x64)
        for tile in SMALL_M_TILES:
            units = ceil_div(m, 64) * ceil_div(n, tile["BN"])
            offered += [{**tile, "SPLITS": splits} for splits in SMALL_M_SPLITS
                        if splits * units <= 2 * SMS and k >= splits * 2 * 64]
    range_k = geo.TAIL_MIN_K_TILES * geo.k_tile("bf16")  # the shortest k range a CTA keeps
    if m > CLUSTER_SPLIT_MIN_M:
        offered += [tile for tile in CLUSTER_SPLIT_TILES
                    if rows * ceil_div(n, tile["BN"]) * tile["CK"] <= SMS and k >= tile["CK"] * range_k]
    for cm in (1, 2):
        if cm == 2 and rows % 2:
            continue
        units = ceil_div(rows, cm) * cols  # cluster blocks of the 128 x 128 tiles
        for splits in (2, 3, 4):
            if splits * units * cm <= SMS and k >= splits * 2 * 64:
                offered.append({**SPLIT_TILE, **({"CM": 2} if cm == 2 else {}), "SPLITS": splits})
    return [dict(c) for c in offered]


def vote(entries: Sequence[Mapping], problem: GemmProblem) -> tuple[dict[str, int], str] | None:
    """The candidate the nearest measured shapes predict fastest for ``problem`` (tuned.vote, ties
    within ``TIE`` broken by the nearest shape)."""
    return tuned.vote(entries, problem, candidates, tie=TIE)


def fitted(problem: GemmProblem, gpu_name: str) -> tuple[dict[str, int], str] | None:
    """The vote over this GPU's tuning-set table, or None where the GPU has none."""
    table = tuned.load_table(gpu_name, kernel=TABLE_KERNEL)
    return vote(table["entries"], problem) if table else None


def left_out_slowdowns(entries: Sequence[Mapping]) -> list[float]:
    """tuned.left_out_slowdowns over this family's candidates, with its ties."""
    return tuned.left_out_slowdowns(entries, candidates, tie=TIE)
