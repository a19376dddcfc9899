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


def resident_splits(problem: GemmProblem, tile: dict[str, int], choices=SPLITS, slice_k: int = SLICE_K) -> list[int]:
    """The ``choices`` of slices that cut ``tile`` over K with every unit resident at once (the
    slices of a tile hand their sums over in order; ``slots``) and every slice >= ``slice_k`` of K,
    fewest first."""
    return [s for s in choices if units(problem, {**tile, "SPLITS": s}) <= slots(tile) and problem.k >= s * slice_k]


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


def slots(t: dict[str, int]) -> int:
    """The CTAs of ``t`` the SMs hold at once: two an SM with one consumer, else one."""
    return SMS * (2 if t.get("CONSUMERS", 2) == 1 else 1)


def resident_share(problem: GemmProblem, t: dict[str, int]) -> float:
    """The share of the SMs' CTA slots (``slots``) the units of ``t`` take."""
    return units(problem, t) / slots(t)


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


SHORT_SPLIT_PROBE = "results/h100-80gb-hbm3/probe-tf32-small-grid-short-slices.txt"  # tf32_mid_m.py --slice=256
SHORT_SPLIT_CHECK = "results/h100-80gb-hbm3/probe-tf32-small-grid-short-slices-after.txt"
SHORT_SLICE_K = 256  # short_k_split's shortest slice
SHORT_SPLITS = (2, 3, 4, 6, 8)  # ... and its slices (SPLITS' choices past 4)
SHORT_SPLIT_MAX_K = 4096  # ... below which the SLICE_K slices split a tile at most three ways


def short_sliced(problem: GemmProblem) -> tuple[int, int]:
    """(128 x 64 tiles of one consumer, the most slices of SHORT_SPLITS that keep each slice >=
    SHORT_SLICE_K of K and every unit resident at two CTAs an SM; 1 where none does): the form of
    ``short_k_split`` and of rungs.narrow_n_split."""
    fits = resident_splits(problem, ONE_CONSUMER, SHORT_SPLITS, SHORT_SLICE_K)
    return units(problem, ONE_CONSUMER), max(fits, default=1)


def short_k_split(problem: GemmProblem, pick: dict[str, int], why: str) -> tuple[dict[str, int], str]:
    """Past M = 128 with K < SHORT_SPLIT_MAX_K, where the pick leaves more than half the SMs idle
    and 128 x 64 tiles of one consumer number at most SMS / 4: those tiles (two CTAs an SM), split
    into the most slices (of SHORT_SPLITS) that keep each slice >= SHORT_SLICE_K of K and every unit
    resident, where that is more units than the pick's; else the pick.

    Small N with a short K leaves a few tiles and no split of >= SLICE_K (1024) slices: the vote
    and the rules ran them on 3-12 CTAs. H100, eight such shapes of neither corpus set (M =
    300-700, N = 40-200, K = 1300-3500; SHORT_SPLIT_PROBE: every tile form whole and split with
    slices down to 256, beside cuBLAS and cuBLASLt): 1.48-2.74x faster than the pick, 0.74-1.06 of
    the faster baseline where the pick ran 0.28-0.67 (560x40x2048: 6 slices 10.6 us against 29.2,
    cuBLASLt 8.2); this form within 2.5% of the fastest of ours on all eight. Looked for after the
    validation set's small-N odd shapes (554x57x1517 at 0.47 of the faster baseline) were seen.
    Checked on eight shapes chosen after (SHORT_SPLIT_CHECK): 1.11-2.93x the pick before (geometric
    mean 1.66x; 610x33x3000 13.5 us against 39.7, cuBLASLt 11.6), 0.73-0.96 of the faster
    baseline, within 1% of the fastest of ours on five and 3.7-8.6% behind it on three (900x100x900:
    64 x 128 tiles in 3 slices 10.1 us against 10.9). Validation run: its three shapes (all seen
    before) x1.61, 554x57x1517 0.47 -> 0.73, 393x172x2766 0.56 -> 1.03, 609x71x2013 0.56 -> 0.82
    (results/h100-80gb-hbm3/shift-validate-tf32-short-k-split.txt)."""
    if problem.m <= VOTE_MIN_M or problem.k >= SHORT_SPLIT_MAX_K or resident_share(problem, pick) > 0.5:
        return pick, why
    tiles, splits = short_sliced(problem)
    if tiles > SMS // 4 or splits < 2 or tiles * splits <= units(problem, pick):
        return pick, why
    return ({**ONE_CONSUMER, "SPLITS": splits},
            f"{why}; {tiles} tiles of 128x64 at K < {SHORT_SPLIT_MAX_K}: {splits}-way split-K in slices of "
            f">= {SHORT_SLICE_K} (H100: 560x40x2048 10.6 us against 29.2; {SHORT_SPLIT_PROBE})")
