#!/usr/bin/env python3
"""Where a sweep's time went, from its journal or a bench JSON: the seconds of each phase.

    python tools/sweep_phases.py JOURNAL.jsonl [--top N]
    python tools/sweep_phases.py RUN.json[.gz]           # a bench run: its cases' phases, by kernel

A sweep's journal (``tools/autotune.py --journal``) holds one line per finished trial, with the
seconds its worker spent in each phase (``phases_s``: the shape's case, that is its operands
and reference, once a shape; the build; verify, the checked run: poisoning C, the launch,
reading D back and checking it; time, the timed launches). This prints each phase's total over
the trials, its share and its mean a trial, then the N shapes whose trials spent the most in
verify, with D's elements and the median verify seconds of their trials: what a faster sweep
has to cut. A trial resumed from an earlier run counts once (the journal's last line for it).

A bench JSON's cases carry the same phases (``phases_s``; "build" there is the load, and for
cuBLASLt the timing of its heuristic's candidates): each phase's total, share and mean a case,
then the seconds of each kernel by phase, beside the run's sweep time (``environment.phases_s``,
the worker's start and the parent's checkpoints included).
"""

from __future__ import annotations

import collections
import statistics
import sys

from _toolkit import Parser
from spread_check import phase_totals, read

from gemm_driver.bench import writers


def phase_lines(totals: dict[str, float], counts: dict[str, int], each: str) -> list[str]:
    """The phases, most seconds first: their total, share of all and mean per ``each``."""
    busy = sum(totals.values())
    lines = [f"{'phase':<8} {'seconds':>9} {'share':>6} {each:>8}"]
    for phase, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        lines.append(f"{phase:<8} {seconds:>9.1f} {seconds / busy:>6.0%} {seconds / counts[phase]:>8.3f}")
    return lines


def shape_of(key: str) -> str:
    """The MxNxK of a journal key ('<kernel> <MxNxK> <tunables> seed=...')."""
    return key.split()[1]


def main() -> int:
    parser = Parser(prog="sweep_phases.py", description=__doc__.splitlines()[0])
    parser.add_argument("journal", help="a sweep's journal (JSON lines)")
    parser.add_argument("--top", type=int, default=10, help="shapes listed by their verify seconds (default 10)")
    args = parser.parse_args()
    if args.journal.endswith((".json", ".json.gz")):  # a bench run (archived ones gzipped: writers.load)
        return bench_phases(args.journal)
    try:
        journal, _ = read(args.journal)
    except (OSError, ValueError, KeyError) as error:
        print(f"sweep_phases: cannot read the journal: {error}", file=sys.stderr)
        return 2
    timed = {key: result for key, result in journal.items() if result.get("phases_s")}
    if not timed:
        print(f"sweep_phases: {args.journal} holds no phases (a journal written before they were recorded)",
              file=sys.stderr)
        return 2
    totals, counts = phase_totals(list(timed.values()))
    busy = sum(totals.values())
    gpus = len({result.get("gpu") for result in timed.values()})
    print(f"{len(timed)} trials with phases on {gpus} GPU(s): {busy:.1f} s busy in trials")
    print("\n".join(phase_lines(totals, counts, "a trial")))
    by_shape = collections.defaultdict(list)
    for key, result in timed.items():
        if "verify" in result["phases_s"]:
            by_shape[shape_of(key)].append(result["phases_s"]["verify"])
    heaviest = sorted(by_shape.items(), key=lambda item: -sum(item[1]))[:max(args.top, 0)]
    if heaviest:
        print("shapes by verify seconds (median a trial; D's elements):")
        for shape, seconds in heaviest:
            m, n, _ = (int(x) for x in shape.split("x"))
            median = statistics.median(seconds)
            print(f"  {shape:<18} {sum(seconds):>7.1f} s over {len(seconds):>3} trials, median {median:.2f} s, "
                  f"{m * n / 1e6:.0f} M elements, {median / (m * n) * 1e9:.0f} ns an element")
    return 0


def bench_phases(path: str) -> int:
    """A bench run's phases: by phase over every case, then by kernel."""
    try:
        document = writers.load(path)
    except writers.BenchFileError as error:
        print(f"sweep_phases: {error}", file=sys.stderr)
        return 2
    cases = [r for r in document["results"] if r.get("phases_s")]
    if not cases:
        print(f"sweep_phases: {path} holds no phases (a run made before they were recorded)", file=sys.stderr)
        return 2
    totals, counts = phase_totals(cases)
    busy = sum(totals.values())
    sweep = (document.get("environment", {}).get("phases_s") or {}).get("sweep")
    of_sweep = f" of the run's {sweep:.1f} s sweep" if sweep else ""
    print(f"{len(cases)} cases with phases: {busy:.1f} s busy in cases{of_sweep}")
    print("\n".join(phase_lines(totals, counts, "a case")))
    by_kernel = collections.defaultdict(list)
    for case in cases:
        by_kernel[case["kernel"]].append(case)
    phases = sorted(totals, key=lambda phase: -totals[phase])
    print(f"{'kernel':<24} {'cases':>5} " + " ".join(f"{phase:>8}" for phase in phases))
    for kernel, runs in sorted(by_kernel.items()):
        seconds, _ = phase_totals(runs)
        print(f"{kernel:<24} {len(runs):>5} " + " ".join(f"{seconds.get(phase, 0.0):>8.1f}" for phase in phases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
