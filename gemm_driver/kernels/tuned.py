"""The tuned tables' lookup: per GPU, which configuration a tuned kernel runs per shape.

A table is data from a real sweep on that GPU (``bench/autotune.py``, driven by
``tools/autotune.py``), committed per GPU: ``gemm_driver/tuned/<gpu>.json`` for the FP32
``autotuned`` kernel (its sweep runs warptiled), ``gemm_driver/tuned/<gpu>.<kernel>.json``
for every other tuned kernel (e.g. ``h100-80gb-hbm3.mma_sync_tuned_bf16.json``), whose
``kernel`` field must name that kernel. Pure: no GPU, no timing.

Two ways to read a table for a shape it was not swept on:

- ``pick``: the winner of the nearest swept shape (log2 M, N, K): what ``mma_sync_tuned_*``
  fall back to where the vote has no timings to go by.
- ``vote``: the configuration the nearest swept shapes predict fastest, from every
  configuration's measured TFLOP/s there (a table swept over a corpus's tuning set, which
  keeps them all). Its ``NEIGHBOURS`` nearest shapes in ``features`` vote with weight
  1 / (distance + 0.25): a configuration's predicted slowdown is the weighted mean over them
  of the neighbour's best TFLOP/s over the configuration's there, ``UNMEASURED_SLOWDOWN``
  where it did not run. A vote rather than the nearest shape's winner: near a boundary (the
  grid filling up, K growing deep enough to split) one neighbour's winner is noise between two
  configurations a few percent apart, and the neighbours' timings average it out.
  ``left_out_slowdowns`` checks it on the table itself, each shape voted for without its own
  measurements. ``hopper/selection.py``, ``autotuned`` and ``mma_sync_tuned_*`` read their
  tables this way.

A GPU without a table gets the kernel's defaults (or its analytic rule), and the reason says so.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ..cuda.errors import UnsupportedProblem
from ..problem import GemmProblem
from .spec import ceil_div

TUNED_DIR = Path(__file__).resolve().parent.parent / "tuned"
SCHEMA = "gemm_driver.tuned/1"


def gpu_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3': the per-GPU file and results folder name."""
    name = re.sub(r"^nvidia\s+", "", name.strip(), flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown-gpu"


def tuned_path(gpu_name: str, directory: Path = TUNED_DIR, kernel: str | None = None) -> Path:
    """``<gpu>.json`` (``autotuned``'s table; kernel None or "autotuned"), else ``<gpu>.<kernel>.json``."""
    suffix = "" if kernel in (None, "autotuned") else f".{kernel}"
    return directory / f"{gpu_slug(gpu_name)}{suffix}.json"


def load_table(gpu_name: str, directory: Path = TUNED_DIR, kernel: str | None = None) -> dict | None:
    """The tuned table of ``kernel`` (default: ``autotuned``'s) for this GPU, or None when
    it was never tuned here."""
    path = tuned_path(gpu_name, directory, kernel)
    if not path.is_file():
        return None
    document = json.loads(path.read_text())
    if document.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {document.get('schema')!r}, expected {SCHEMA!r}")
    if kernel not in (None, "autotuned") and document.get("kernel") != kernel:
        raise ValueError(f"{path}: a table of kernel {document.get('kernel')!r}, expected {kernel!r}")
    return document


def shape_distance(a: Sequence[int], b: Sequence[int]) -> float:
    """Distance between two (M, N, K) shapes on a log scale: 2048 is as far from 1024 as 4096."""
    return math.sqrt(sum(math.log2(x / y) ** 2 for x, y in zip(a, b)))


def pick(table: Mapping | None, problem: GemmProblem) -> tuple[dict[str, int], str]:
    """(tunables, why) for ``problem``: the winner of the nearest tuned shape, or {} without a table."""
    if not table or not table.get("entries"):
        return {}, "no tuned table for this GPU; warptiled defaults"
    shape = (max(problem.m, 1), max(problem.n, 1), max(problem.k, 1))
    nearest = min(table["entries"], key=lambda e: shape_distance(shape, e["shape"]))
    label = "x".join(map(str, nearest["shape"]))
    return dict(nearest["best"]), f"tuned at {label}"


# --- the vote ----------------------------------------------------------------------------
NEIGHBOURS = 2
UNMEASURED_SLOWDOWN = 2.0
Offered = Callable[[GemmProblem], Sequence[Mapping[str, int]]]  # the configurations that may run a shape
# How a family names a stored configuration the way its Offered does (tables written with other
# spellings of the same configuration); by default as stored.
Named = Callable[[Mapping[str, int]], Mapping[str, int]]


def features(shape: Sequence[int]) -> tuple[float, float, float]:
    """(log2 of the 128 x 128 tiles, log2 K, log2 M) of an (M, N, K) shape: how full the grid
    is, how deep each tile's loop is (whether splitting pays), how many rows a tall tile wastes."""
    m, n, k = (max(x, 1) for x in shape)
    return math.log2(ceil_div(m, 128) * ceil_div(n, 128)), math.log2(k), math.log2(m)


def distance(a: Sequence[int], b: Sequence[int]) -> float:
    """How far apart two shapes are in ``features``."""
    return math.dist(features(a), features(b))


def label(tunables: Mapping[str, int]) -> str:
    """'BN=128 STAGES=6 SPLITS=2': how a configuration is named in tables and reasons."""
    return " ".join(f"{name}={value}" for name, value in sorted(tunables.items())) or "defaults"


def _key(tunables: Mapping[str, int]) -> tuple:
    return tuple(sorted(tunables.items()))


def runnable(spec, problem: GemmProblem, space: Sequence[Mapping[str, int]], named: Named = dict) -> list[dict]:
    """The configurations of ``space`` that ``spec`` can run ``problem`` with (its rules, by
    ``spec.validate``), each as ``named`` names it: what a family offers the vote."""
    usable = []
    for tunables in space:
        try:
            spec.validate(problem, tunables)
        except UnsupportedProblem:
            continue
        usable.append(dict(named(tunables)))
    return usable


def _timed(entry: Mapping) -> bool:
    """Whether a table entry holds any timing (its winner's or a runner-up's)."""
    return bool(entry.get("tflops")) or any(r.get("tflops") for r in entry.get("runners_up", ()))


def measured(entry: Mapping, named: Named = dict) -> dict[tuple, float]:
    """A table entry's TFLOP/s per configuration (its winner and every runner-up), each as
    ``named`` names it."""
    rows = [{"tunables": entry["best"], "tflops": entry.get("tflops")}, *entry.get("runners_up", ())]
    return {_key(named(r["tunables"])): r["tflops"] for r in rows if r.get("tflops")}


def vote(entries: Sequence[Mapping], problem: GemmProblem, offered: Offered, named: Named = dict,
         tie: float = 0.0, neighbours: int = NEIGHBOURS) -> tuple[dict[str, int], str] | None:
    """The configuration of ``offered(problem)`` the ``neighbours`` nearest measured shapes predict
    fastest for ``problem``, with the reason; None without timed entries, without a configuration
    offered, or where no neighbour measured any of them. ``tie`` > 0: the candidates predicted
    within that fraction of the best are a tie, which the nearest shape's own timings break (a
    weighted mean of two neighbours that disagree cannot tell them apart; the nearer one can)."""
    choices = list(offered(problem))
    entries = [e for e in entries if _timed(e)]  # an entry without timings says nothing
    if not entries or not choices:
        return None
    shape = (max(problem.m, 1), max(problem.n, 1), max(problem.k, 1))
    nearest = sorted(entries, key=lambda e: distance(shape, e["shape"]))[:neighbours]
    weights = [1 / (distance(shape, e["shape"]) + 0.25) for e in nearest]
    speeds = [measured(e, named) for e in nearest]  # only the neighbours' configurations are named

    def slowdown(candidate: Mapping[str, int]) -> float:
        total = 0.0
        for weight, speed in zip(weights, speeds):
            tflops = speed.get(_key(candidate))
            total += weight * (max(speed.values()) / tflops if tflops else UNMEASURED_SLOWDOWN)
        return total / sum(weights)

    predicted = {label(c): (slowdown(c), dict(c)) for c in choices}
    best_label, (best_slowdown, best) = min(predicted.items(), key=lambda item: item[1][0])
    if best_slowdown >= UNMEASURED_SLOWDOWN:  # no neighbour ran any of them: nothing to go by
        return None
    near = ", ".join("x".join(map(str, e["shape"])) for e in nearest)
    why = f"predicted {best_slowdown:.3f}x the fastest by the {len(nearest)} nearest tuning shapes ({near})"
    tied = [(name, c) for name, (s, c) in predicted.items() if s <= best_slowdown * (1 + tie)] if tie > 0 else []
    if len(tied) > 1:
        name, broken = max(tied, key=lambda item: speeds[0].get(_key(item[1])) or 0.0)
        if name != best_label:
            return broken, (f"{name}: within {tie:.1%} of {best_label}, {why}; the faster of them at "
                            f"{'x'.join(map(str, nearest[0]['shape']))}")
    return best, f"{best_label}: {why}"


def left_out_slowdowns(entries: Sequence[Mapping], offered: Offered, named: Named = dict,
                       tie: float = 0.0, neighbours: int = NEIGHBOURS) -> list[float]:
    """The vote checked on its own table: per entry, how much slower the configuration the other
    entries vote for (with ``tie``, ``neighbours`` of them) measured there than that entry's winner
    (inf where it did not run), the table's configurations named as ``vote`` names them."""
    slowdowns = []
    for entry in entries:
        picked = vote([e for e in entries if e is not entry], GemmProblem(*entry["shape"]), offered, named, tie,
                      neighbours)
        if picked is not None:
            slowdowns.append(slowdown_at(entry, picked[0], named))
    return slowdowns


def slowdown_at(entry: Mapping, tunables: Mapping[str, int], named: Named = dict) -> float:
    """How much slower ``tunables`` measured than the entry's winner (inf where it did not run)."""
    speed = measured(entry, named)
    tflops = speed.get(_key(tunables))
    return max(speed.values()) / tflops if tflops else math.inf
