#!/usr/bin/env python3
"""How a corpus run moved against an earlier one: each shape whose own kernel ran other
tunables, with its ratio to the best baseline before and after, and the geometric mean of
that ratio's change over the changed shapes and over the rest (whose change is the noise
between the two runs, mostly the power cap's).

    python tools/corpus_shift.py OLD.json NEW.json

``compare`` matches cases by their tunables, so a shape whose pick changed shows there only
as two unmatched cases; this reads both files through corpus_summary's ratios instead. A
tunable the kernel gained after a run counts at its default there (``compare``'s
``recorded_tunables``). A missing or malformed file is one line on stderr and exit 2.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from gemm_driver.bench.compare import recorded_tunables
from gemm_driver.bench.corpus_summary import shape_ratios, summary_lines
from gemm_driver.bench.writers import load

if str(Path(__file__).resolve().parent) not in sys.path:  # loaded by file path (the tests), not run
    sys.path.append(str(Path(__file__).resolve().parent))  # last: tools/inspect.py must not shadow inspect
from _toolkit import Parser, run  # noqa: E402

PROG = Path(__file__).name


def picks(document: dict) -> dict[tuple, tuple[float, dict]]:
    """(precision, m, n, k) -> (own / best baseline, the own kernel's tunables)."""
    tunables = {(c["kernel"], c["m"], c["n"], c["k"]): recorded_tunables(c)
                for c in document.get("results", []) if c.get("status") == "ok"}
    return {(r.precision, r.m, r.n, r.k): (r.ratio, tunables.get((r.own, r.m, r.n, r.k), {}))
            for r in shape_ratios(document)}


def shift_lines(old: dict, new: dict) -> list[str]:
    before, after = picks(old), picks(new)
    both = [key for key in after if key in before]
    changed = [key for key in both if before[key][1] != after[key][1]]
    kept = [key for key in both if key not in changed]

    def moved(keys: list) -> str:
        """The geometric mean of the ratio's change over ``keys``; "-" over none."""
        return f"x{statistics.geometric_mean([after[key][0] / before[key][0] for key in keys]):.3f}" if keys else "-"

    lines = ["before:", *summary_lines(old)[:-2], "after:", *summary_lines(new)[:-2],
             f"{len(changed)} shapes ran other tunables: ratio {moved(changed)} (geometric mean); "
             f"the other {len(kept)}: {moved(kept)}"]
    for key in changed:
        (was, t0), (now, t1) = before[key], after[key]
        diff = ", ".join(f"{name} {t0.get(name, '-')}->{t1.get(name, '-')}"
                         for name in sorted(set(t0) | set(t1)) if t0.get(name) != t1.get(name))
        lines.append(f"  {key[0]:<5} {'x'.join(map(str, key[1:])):<18} {was:.3f} -> {now:.3f}  {diff}")
    return lines


def main(argv=None) -> int:
    parser = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("old", help="the earlier bench JSON")
    parser.add_argument("new", help="the later bench JSON")
    args = parser.parse_args(argv)
    old, new = load(args.old), load(args.new)  # both read before anything is printed
    print(f"{args.old} -> {args.new}")
    print("\n".join(shift_lines(old, new)))
    return 0


if __name__ == "__main__":
    sys.exit(run(main, PROG))
