"""Bench output: the terminal table and the JSON file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from rich.console import Console
from rich.table import Table

from .runner import CaseResult

SCHEMA = "gemm_driver.bench/1"


def table(results: Sequence[CaseResult], title: str = "") -> Table:
    t = Table(title=title or None, header_style="bold")
    for name, justify in (("kernel", "left"), ("shape MxNxK", "left"), ("median ms", "right"),
                          ("GFLOP/s", "right"), ("% cuBLAS", "right"), ("max err/bound", "right"),
                          ("status", "left")):
        t.add_column(name, justify=justify)
    previous_shape = None
    for r in results:
        if previous_shape is not None and r.problem.label != previous_shape:
            t.add_section()
        previous_shape = r.problem.label
        timing = r.timing
        t.add_row(
            r.kernel,
            r.problem.label,
            f"{timing.median_ms:.4f}" if timing else "-",
            f"{r.tflops * 1e3:,.0f}" if timing else "-",
            f"{r.pct_of_baseline:.1f}" if r.pct_of_baseline is not None else "-",
            f"{r.verification['max_error_ratio']:.3f}" if r.verification.get("ok") else "-",
            "ok" if r.status == "ok" else f"[red]{r.status}[/red]: {r.detail}" if r.status == "FAILED"
            else f"[yellow]{r.status}[/yellow]: {r.detail}",
        )
    return t


def print_table(results: Sequence[CaseResult], console: Console | None = None, title: str = "") -> None:
    (console or Console()).print(table(results, title))


def to_json(results: Sequence[CaseResult], environment: dict, settings: dict) -> dict:
    return {
        "schema": SCHEMA,
        "environment": environment,
        "settings": settings,
        "results": [r.as_dict() for r in results],
    }


def write_json(path: str | Path, document: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
