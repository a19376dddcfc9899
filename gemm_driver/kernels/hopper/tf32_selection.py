"""Which tunables ``hopper_tf32`` runs on a shape past M = 128 where the GPU has a table of the
corpus's tuning set: the candidates, and the vote of the nearest measured shapes.

``rungs.choose_register_a`` asks ``fitted`` first for shapes of M > 128 (``VOTE_MIN_M``) with
B stored K x N; below that M, its rules for small and mid M decide (measured on probes
of their own, rungs._register_a_rule), as do they on a GPU without a table and for B stored
N x K (another kernel form). ``tools/autotune.py --kernel hopper_tf32 --corpus all:tune --min-m
128 --write`` verifies and times every candidate on each tuning shape the vote decides and writes
``gemm_driver/tuned/<gpu>.hopper_tf32.json``; the vote is ``tuned.vote``, as for hopper_bf16
(selection.py): the same features and neighbours. The H100's table: 67 tuning shapes, 484
trials on two H100s (results/h100-80gb-hbm3/autotune-hopper-tf32-tuning-set.txt, whose last
lines are the left-out check: the vote's pick 1.069x slower than each shape's fastest, 1.685x
at worst); on the validation run it changed 20 shapes' picks, x1.039 against the rules over
them (results/h100-80gb-hbm3/shift-validate-tf32-vote.txt; docs/hopper.md).

The candidates are the forms ``_register_a_rule`` picks among, each tile height (256, 128 and
64 rows of 128 columns) whole with PDL, the 256- and 128-row tiles also in 1 x 2 clusters
(where the tile columns pair up), and each split 2-4 ways over K where every unit is resident
at once (the slices of a tile hand their sums over in order) and every slice keeps >= 1024 of K;
and whole 128 x 64 tiles of one consumer, two CTAs an SM (offered for N a multiple of 64 but
not of 128, e.g. 576, where they waste no columns; the sweep decides where they win).
"""

from __future__ import annotations

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
    m, n, k = max(problem.m, 1), max(problem.n, 1), max(problem.k, 1)
    columns = ceil_div(n, 128)
    offered = []
    for tile in TILES:
        offered.append({**tile, "PDL": 1})
        if tile.get("BM", 256) >= 128 and columns % 2 == 0:
            offered.append({**tile, "CN": 2, "PDL": 1})
    offered.append(dict(ONE_CONSUMER))
    for tile in TILES:
        units = ceil_div(m, tile.get("BM", 256)) * columns
        offered += [{**tile, "SPLITS": s} for s in SPLITS if units * s <= SMS and k >= s * SLICE_K]
    return offered


def fitted(problem: GemmProblem, gpu_name: str) -> tuple[dict[str, int], str] | None:
    """The vote over this GPU's hopper_tf32 table for a shape it decides (M > VOTE_MIN_M, B
    stored K x N), else None: no table, or a shape the rules keep."""
    if problem.m <= VOTE_MIN_M or problem.trans_b:
        return None
    table = tuned.load_table(gpu_name, kernel=TABLE_KERNEL)
    return tuned.vote(table["entries"], problem, candidates) if table else None
