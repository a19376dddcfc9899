"""Which tunables ``hopper_tf32`` runs on a shape past M = 128 where the GPU has a table of the
corpus's tuning set: the candidates, and the vote of the nearest measured shapes.

``rungs.choose_register_a`` asks ``fitted`` first for shapes of M > 128 (``VOTE_MIN_M``) with
B stored K x N; below that M, its rules for small and mid M decide (measured on probes
of their own, rungs._register_a_rule), as do they on a GPU without a table and for B stored
N x K (another kernel form). ``tools/autotune.py --kernel hopper_tf32 --corpus all:tune --min-m
128 --write`` verifies and times every candidate on each tuning shape the vote decides and writes
``gemm_driver/tuned/<gpu>.hopper_tf32.json``; the vote is ``tuned.vote``, as for hopper_bf16
(selection.py): the same features and neighbours; ``filled`` then splits a pick that leaves most
SMs idle. The H100's table: 67 tuning shapes, 484
trials on one H100 with the tail split in effect (TAIL=4, the default), 78 s of sweep
(results/h100-80gb-hbm3/autotune-hopper-tf32-tuning-set.txt, whose last lines are the left-out
check: the vote's pick 1.053x slower than each shape's fastest, 1.721x at worst). The table
before it, swept before hopper_tf32 took the tail split (left-out 1.069x), changed 20 shapes'
picks on the validation run, x1.039 against the rules over them
(results/h100-80gb-hbm3/shift-validate-tf32-vote.txt; docs/hopper.md); the re-sweep changed 11
more, x1.002 (results/h100-80gb-hbm3/shift-validate-tf32-tail-sweep.txt).

The candidates are the forms ``_register_a_rule`` picks among, each tile height (256, 128 and
64 rows of 128 columns) whole with PDL, the 256- and 128-row tiles also in 1 x 2 clusters
(where the tile columns pair up), and each split 2-4 ways over K where every unit is resident
at once (the slices of a tile hand their sums over in order) and every slice keeps >= 1024 of K;
and whole 128 x 64 tiles of one consumer, two CTAs an SM (offered for N a multiple of 64 but
not of 128, e.g. 576, where they waste no columns; the sweep decides where they win).
"""

from __future__ import annotations

from dataclasses import replace

from ...problem import GemmProblem
from .. import tuned
from ..spec import ceil_div
from .selection import SMS

TABLE_KERNEL = "hopper_tf32"
VOTE_MIN_M = 128  # at and below, rungs._register_a_rule's small- and mid-M rules decide
TILES = ({}, {"BM": 128}, {"BM": 64, "STAGES": 8})  # 256, 128 and 64 rows x 128 columns
ONE_CONSUMER = {"BM": 128, "CONSUMERS": 1, "PDL": 1}  # 128 x 64 tiles, two CTAs an SM
SPLITS = (2, 3, 4)
SLICE_K = 1024  # the shortest K a slice keeps


def candidates(problem: GemmProblem) -> list[dict[str, int]]:
    """The configurations offered for ``problem`` (see the module's docstring), in a fixed order."""
    problem = replace(problem, m=max(problem.m, 1), n=max(problem.n, 1), k=max(problem.k, 1))
    offered = []
    for tile in TILES:
        offered.append({**tile, "PDL": 1})
        if tile.get("BM", 256) >= 128 and ceil_div(problem.n, 128) % 2 == 0:
            offered.append({**tile, "CN": 2, "PDL": 1})
    offered.append(dict(ONE_CONSUMER))
    for tile in TILES:
        offered += [{**tile, "SPLITS": s} for s in resident_splits(problem, tile)]
    return offered


def resident_splits(problem: GemmProblem, tile: dict[str, int]) -> list[int]:
    """The SPLITS that cut ``tile`` over K with every unit resident at once (the slices of a tile
    hand their sums over in order) and every slice >= SLICE_K of K, fewest first."""
    return [s for s in SPLITS if units(problem, {**tile, "SPLITS": s}) <= SMS and problem.k >= s * SLICE_K]


def fitted(problem: GemmProblem, gpu_name: str) -> tuple[dict[str, int], str] | None:
    """The vote over this GPU's hopper_tf32 table for a shape it decides (M > VOTE_MIN_M, B
    stored K x N), then ``filled``; else None: no table, or a shape the rules keep."""
    if problem.m <= VOTE_MIN_M or problem.trans_b:
        return None
    table = tuned.load_table(gpu_name, kernel=TABLE_KERNEL)
    if not table:
        return None
    pick = tuned.vote(table["entries"], problem, candidates)
    return filled(problem, pick[0]) or pick


def units(problem: GemmProblem, t: dict[str, int]) -> int:
    """The CTAs ``t`` launches: tiles of BM rows x 64 * CONSUMERS columns, SPLITS slices each."""
    consumers = t.get("CONSUMERS", 2)
    return ceil_div(problem.m, t.get("BM", 256)) * ceil_div(problem.n, 64 * consumers) * t.get("SPLITS", 1)


def resident_share(problem: GemmProblem, t: dict[str, int]) -> float:
    """The share of the SMs' CTA slots the units of ``t`` take (two CTAs an SM with one consumer)."""
    return units(problem, t) / (SMS * (2 if t.get("CONSUMERS", 2) == 1 else 1))


FILL_PROBE = "results/h100-80gb-hbm3/probe-tf32-mid-grid.txt"
FILL_CHECK = "results/h100-80gb-hbm3/probe-tf32-mid-grid-check.txt"


def filled(problem: GemmProblem, pick: dict[str, int]) -> tuple[dict[str, int], str] | None:
    """Where the vote's pick leaves more than half the SMs idle: 256 x 128 tiles split over K into
    the most slices (of SPLITS) that keep every unit resident and each slice >= SLICE_K, where
    those are more units than the pick's; else None.

    The vote reaches these grids from tuning shapes of other sizes (2048x1600x6400 is the nearest
    of most). Looked for after the validation run showed 1024x1536x7168 at 0.55 of the faster
    baseline (48 whole tiles): on six grids of 40-80 such tiles over deep K, of neither corpus set
    (FILL_PROBE; every tile height whole, in 1 x 2 clusters and split, beside cuBLAS and cuBLASLt, H100) it
    took whole tiles that left more than half the SMs idle on three, 0.54-0.58 of the faster
    baseline, where these splits ran 0.83-1.08 (1024x1280x6144, 40 tiles, 3 slices: 59.4 us
    against 117.4, cuBLASLt 63.8; 1152x1536x12288, 60 tiles, 2 slices: 165.1 against 237.1,
    where 128 x 128 tiles in 1 x 2 clusters ran 154.3); on the two grids of 70 and 80 tiles the
    whole tiles it took were the fastest of ours. At 768x2048x8192 it took 96 tiles of 128 x 128
    (0.77) where the 2-way split ran 0.94: not a grid this rule sees as idle, left to the vote.
    Checked on five shapes chosen after (FILL_CHECK): the split it took was the fastest of ours on
    each, 1.52-2.22x the whole tiles (1536x768x10240, 36 tiles, 3 slices: 85.9 us against 190.9,
    cuBLASLt 92.6), 0.87-1.08 of the faster baseline.

    "More units than the pick" was added after the validation run with the rule
    (results/h100-80gb-hbm3/shift-validate-tf32-fill-first.txt): there it also replaced 12
    one-consumer 128 x 64 tiles of 393x172x2766 by 8 split units of 4 tiles, 0.57 -> 0.43 of the
    faster baseline (a choice made after seeing a validation shape; 1024x1536x7168 went 0.55 ->
    0.90). The run with the rule as it is: 1024x1536x7168 0.55 -> 0.96, no other pick changed
    (results/h100-80gb-hbm3/shift-validate-tf32-fill.txt)."""
    if resident_share(problem, pick) > 0.5:
        return None
    tiles = units(problem, {})  # of 256 x 128
    splits = resident_splits(problem, {})
    if not splits or tiles * splits[-1] <= units(problem, pick):
        return None
    return ({"SPLITS": splits[-1]},
            f"{tiles} tiles of 256x128 leave SMs idle: {splits[-1]}-way split-K (H100: 1024x1280x6144 59.4 us "
            f"against 117.4 whole; {FILL_PROBE})")
