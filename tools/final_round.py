#!/usr/bin/env python3
"""What a sweep's final round changed: from a journal of `tools/autotune.py --final-round`, each
shape whose winner the round changed (what differs, and by how much each pass put its own
winner ahead of the other's), the vote's left-out check on the table with the first pass's
times and with the round's, and how the finalists' times moved between the two passes.

    PYTHONPATH=. python3 tools/final_round.py results/h100-80gb-hbm3/sweep-final-round.jsonl
"""

from __future__ import annotations

import collections
import math
import statistics
import sys

from _toolkit import Parser

from gemm_driver import kernels
from gemm_driver.bench import autotune
from gemm_driver.bench.autotune import ShapeResult, Trial
from gemm_driver.bench.spread import Journal
from gemm_driver.kernels.hopper import selection
from gemm_driver.problem import parse_shape

KERNEL = "hopper_bf16"


def passes(journal: dict[str, dict]) -> tuple[dict[str, ShapeResult], dict[str, ShapeResult]]:
    """Per MxNxK, the shape's trials as the first pass timed them, and with its final round's
    times applied (shapes without a round alike in both)."""
    first: dict[str, ShapeResult] = {}
    rounds = {}
    for key, result in journal.items():
        words = key.split()
        if words[0] == KERNEL:
            shape = words[1]
            first.setdefault(shape, ShapeResult(parse_shape(shape))).trials.append(Trial(**result))
        elif words[:2] == ["final", KERNEL]:
            rounds[words[2]] = result
    final = {shape: ShapeResult(r.shape, list(r.trials)) for shape, r in first.items()}
    for shape, outcome in rounds.items():
        autotune.apply_final(final[shape], outcome)
    return first, final


def left_out(results: dict[str, ShapeResult]) -> tuple[float, float]:
    """The vote's left-out check on the table these results make: geometric mean and worst."""
    document = autotune.table_document(list(results.values()), kernels.KERNELS[KERNEL], {}, keep=None)
    slowdowns = selection.left_out_slowdowns(document["entries"])
    return math.exp(sum(map(math.log, slowdowns)) / len(slowdowns)), max(slowdowns)


def main() -> int:
    parser = Parser(prog="final_round.py", description=__doc__.splitlines()[0])
    parser.add_argument("journal", help="a sweep's journal (tools/autotune.py --journal) with final rounds")
    args = parser.parse_args()
    journal = Journal(args.journal).load()
    if not journal:
        parser.error(f"{args.journal}: no journal lines")
    first, final = passes(journal)
    timed_again = [s for s, r in final.items() if any(t.first_tflops is not None for t in r.trials)]
    changed = collections.Counter()
    print("shape: what the final round changed in the winner; first pass's winner ahead by, final's ahead by")
    for shape in timed_again:
        a, b = first[shape].ranked[0], final[shape].ranked[0]
        if a.tunables == b.tunables:
            continue
        diff = {k: (a.tunables[k], b.tunables[k]) for k in a.tunables if a.tunables[k] != b.tunables[k]}
        changed[" ".join(sorted(diff))] += 1
        before = a.tflops / next(t.tflops for t in first[shape].trials if t.tunables == b.tunables)
        after = b.tflops / next(t.tflops for t in final[shape].trials if t.tunables == a.tunables)
        print(f"  {shape:<18} {', '.join(f'{k} {x}->{y}' for k, (x, y) in diff.items()):<40} "
              f"{before:6.3f} {after:6.3f}")
    print(f"{len(timed_again)} of {len(final)} shapes timed again, the winner changed on {sum(changed.values())} "
          f"({', '.join(f'{n} by {what}' for what, n in changed.most_common())})")
    for label, results in (("first pass", first), ("final round", final)):
        mean, worst = left_out(results)
        print(f"left-out check, {label}: {mean:.3f}x the winner (geometric mean), {worst:.3f}x at worst")
    moved = sorted(t.tflops / t.first_tflops for r in final.values() for t in r.trials if t.first_tflops)
    deciles = statistics.quantiles(moved, n=10)
    print(f"finalists' TFLOP/s, final round over first pass ({len(moved)}): median {statistics.median(moved):.3f}, "
          f"10th-90th percentile {deciles[0]:.3f}-{deciles[-1]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
