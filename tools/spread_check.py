#!/usr/bin/env python3
"""Compare the journals of one sweep run twice: on one GPU, and spread over several.

    python tools/spread_check.py ONE_GPU.jsonl SPREAD.jsonl [--walls WALLS.txt]

A journal (``tools/autotune.py --journal``, bench/spread.py's Journal) holds one line per
finished trial: its key and its result, tagged with the GPU that ran it. This prints whether
the spread run ran every trial of the one-GPU run exactly once (no trial lost or repeated), how
the trials fell on the GPUs, and, per GPU of the spread run, how its times compare with the
one-GPU run's for the same trials: the median ratio and the share within 2%. Those on the
one-GPU run's own GPU measure the run-to-run noise; those on other GPUs add the card-to-card
difference. Where the journals hold the trials' times, per GPU of each run the mean seconds a
trial spent in each phase (the shape's case, the build, verify and time), the seconds busy in
trials and when the last result came: what grows with more GPUs. ``--walls`` (lines
``gpus G ... wall S s``) adds the wall times and their ratio.
"""

from __future__ import annotations

import collections
import re
import statistics
import sys

from _toolkit import Parser
from gemm_driver.bench.spread import Journal


def read(path: str) -> tuple[dict[str, dict], int]:
    """A journal's results by key (Journal.load, as a resumed sweep reads it), and how many
    lines it has (a repeated key shows as more lines than keys)."""
    with open(path) as journal:
        lines = sum(1 for line in journal if line.strip())
    return Journal(path).load(), lines


def phase_totals(results: list[dict]) -> tuple[dict[str, float], dict[str, int]]:
    """Seconds of each phase over the trials that recorded it, and how many did."""
    totals, counts = collections.defaultdict(float), collections.Counter()
    for result in results:
        for phase, seconds in (result.get("phases_s") or {}).items():
            totals[phase] += seconds
            counts[phase] += 1
    return dict(totals), dict(counts)


def timelines(label: str, journal: dict[str, dict]) -> list[str]:
    """Per GPU of a run whose journal has the trials' times (autotune.Trial's phases_s and
    finished_s): the mean seconds a trial of each phase, the seconds the worker spent in
    trials and when its last result came; nothing for a journal without them."""
    by_gpu = collections.defaultdict(list)
    for result in journal.values():
        if result.get("phases_s") and result.get("finished_s") is not None:
            by_gpu[result.get("gpu")].append(result)
    if not by_gpu:
        return []
    lines = [f"{label}: seconds a trial by phase (mean), busy in trials, last result at"]
    for gpu, results in sorted(by_gpu.items()):
        phases, _ = phase_totals(results)
        means = ", ".join(f"{phase} {total / len(results):.3f}" for phase, total in sorted(phases.items()))
        lines.append(f"  GPU {gpu}: {len(results)} trials, {means}; busy {sum(phases.values()):.1f} s, "
                     f"last at {max(r['finished_s'] for r in results):.1f} s")
    return lines


def main() -> int:
    parser = Parser(prog="spread_check.py", description=__doc__.splitlines()[0])
    parser.add_argument("one", help="the journal of the run on one GPU")
    parser.add_argument("spread", help="the journal of the run spread over several GPUs")
    parser.add_argument("--walls", help="wall times: lines 'gpus G ... wall S s'")
    args = parser.parse_args()
    try:
        one, one_lines = read(args.one)
        spread, spread_lines = read(args.spread)
    except (OSError, ValueError, KeyError) as error:
        print(f"spread_check: cannot read the journals: {error}", file=sys.stderr)
        return 2
    print(f"trials: {len(one)} on one GPU ({one_lines} lines), {len(spread)} spread ({spread_lines} lines); "
          f"the same trials: {set(one) == set(spread)}; lost: {len(set(one) - set(spread))}, "
          f"repeated: {spread_lines - len(spread)}")
    on_gpu = collections.Counter(result.get("gpu") for result in spread.values())
    print("spread run, trials per GPU: " + ", ".join(f"GPU {gpu}: {n}" for gpu, n in sorted(on_gpu.items())))
    ratios = collections.defaultdict(list)
    reference_gpu = {result.get("gpu") for result in one.values()}
    for key, result in spread.items():
        before = one.get(key)
        if before and before.get("median_ms") and result.get("median_ms"):
            ratios[result.get("gpu")].append(result["median_ms"] / before["median_ms"])
    print(f"time of a trial in the spread run over its time in the one-GPU run (GPU {sorted(reference_gpu)}):")
    for gpu, values in sorted(ratios.items()):
        within = sum(abs(value - 1) <= 0.02 for value in values) / len(values)
        quantiles = statistics.quantiles(values, n=10) if len(values) > 1 else values
        print(f"  GPU {gpu}: {len(values)} trials, median {statistics.median(values):.4f}, "
              f"10th-90th percentile {quantiles[0]:.3f}-{quantiles[-1]:.3f}, within 2%: {within:.0%}")
    for label, journal in (("one GPU", one), ("spread", spread)):
        for line in timelines(label, journal):
            print(line)
    if args.walls:
        walls = {}
        for line in open(args.walls):
            found = re.search(r"gpus (\S+) .*wall ([0-9.]+) s", line)
            if found:
                walls[found.group(1)] = float(found.group(2))
        if len(walls) == 2:
            (one_label, one_wall), (spread_label, spread_wall) = walls.items()
            print(f"wall: {one_wall:.1f} s on GPUs {one_label}, {spread_wall:.1f} s on GPUs {spread_label} "
                  f"({spread_wall / one_wall:.3f} of it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
