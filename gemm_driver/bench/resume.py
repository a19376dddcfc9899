"""bench --resume: carry on a sweep from the JSON a cut run left behind.

A sweep writes its JSON after every shape (``command.run``'s checkpoint), so a run stopped by
a time limit keeps what it measured, marked ``"complete": false``. Resuming reads that file,
requires it to hold the same sweep (kernels, shapes, alpha, beta, mode, variants, scalings,
rounds and the timing budget), and runs only the steps (a shape's cases in one precision and
variant) it lacks a record of some case of; a step it holds only in part runs again whole, so
that the kernels of a shape are always compared within one run. The seed is the file's, so the
remaining shapes get the data the uncut run would have given them. The new document holds the
kept records first, then the new ones; ``environment.resumed_records`` counts the kept.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from .runner import Step
from .writers import record_scaled, record_variant, scaled_label

# the settings two parts of one sweep must share (the JSON's "settings" names)
SAME_SWEEP = ("kernels", "shapes", "alpha", "beta", "mode", "variants", "scalings", "fp8_types", "rounds",
              "noise_target", "max_time_s", "min_samples", "max_samples", "warmup_s", "batch_ms", "energy")

# settings files of older versions do not hold, with the value they ran with
RECORDED_LATER = {"fp8_types": ["e4m3"]}


def step_key(step: Step) -> tuple:
    """What identifies a step's cases among a document's records."""
    p = step.problem
    return (p.m, p.n, p.k, p.batch, step.precision, p.layout, p.out_dtype, p.epilogue,
            scaled_label(p.scaling, p.fp8_types), p.alpha, p.beta)


def record_key(rec: dict) -> tuple:
    """``step_key`` of the step a record came from (files of older versions: nn, fp32, none)."""
    return (rec["m"], rec["n"], rec["k"], rec.get("batch") or 1, rec.get("dtype") or "fp32", *record_variant(rec),
            record_scaled(rec), rec.get("alpha", 1.0), rec.get("beta", 0.0))


def differing_settings(settings: dict, document: dict) -> list[str]:
    """The SAME_SWEEP settings in which ``document`` differs from this run's ``settings``."""
    earlier = {**RECORDED_LATER, **(document.get("settings") or {})}
    return [name for name in SAME_SWEEP if earlier.get(name) != settings.get(name)]


def resume(request, steps: Sequence[Step], settings: dict, document: dict, path: str, *,
           seed_given: bool) -> tuple[object, list[Step]]:
    """(the request with the file's seed and kept records, the steps still to run); ValueError,
    naming what differs, where the file holds another sweep or every case already."""
    differ = differing_settings(settings, document)
    if differ:
        raise ValueError(f"--resume: {path} holds another sweep ({', '.join(differ)} differ); give the command that "
                         "wrote it, or another --json path")
    seed = (document.get("settings") or {}).get("seed")
    if seed_given and request.seed != seed:
        raise ValueError(f"--resume: {path} was measured with --seed {seed}; leave --seed out or give that one")
    held: dict[tuple, set[str]] = {}
    for rec in document.get("results") or []:
        held.setdefault(record_key(rec), set()).add(rec["kernel"])
    done, remaining = set(), []
    for step in steps:
        key = step_key(step)
        if {*step.kernels, *(name for name, _ in step.not_run)} <= held.get(key, set()):
            done.add(key)
        else:
            remaining.append(step)
    if not remaining:
        raise ValueError(f"--resume: {path} already holds every case of this sweep")
    kept = tuple(rec for rec in document.get("results") or [] if record_key(rec) in done)
    return dataclasses.replace(request, seed=seed, prior=kept), remaining
