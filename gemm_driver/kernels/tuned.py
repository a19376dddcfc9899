"""The tuned tables' lookup: per GPU, which configuration the autotuned kernel runs per shape.

A table is data from a real sweep on that GPU (``bench/autotune.py``, driven by
``tools/autotune.py``), committed per GPU: ``gemm_driver/tuned/<gpu>.json`` for the FP32
``autotuned`` kernel (its sweep runs warptiled), ``gemm_driver/tuned/<gpu>.<kernel>.json``
for every other tuned kernel (e.g. ``h100-80gb-hbm3.mma_sync_tuned_bf16.json``), whose
``kernel`` field must name that kernel. Per problem the configuration tuned for the
nearest shape is taken (``pick``); a GPU without a table gets the kernel's defaults, and
the reason says so. Pure: no GPU, no timing.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Mapping, Sequence

from ..problem import GemmProblem

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
