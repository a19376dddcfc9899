"""Nsight Compute's command line (ncu): where it is, the metrics it knows here, a run, its CSV.

ncu is looked for where a CUDA install puts it: ``cuda.pathfinder`` (when it knows ncu),
PATH, ``$CUDA_HOME/bin`` and ``$CUDA_PATH/bin``, then ``/usr/local/cuda/bin``. Absent, the
command says in one line what to install.

A run exports a report (``--export``), which ``raw_csv`` reads back with ``--import --csv
--page raw --print-units base``: one header row of column names, one row of units, then
one row per profiled kernel launch, in launch order. Numbers carry thousands separators
("11,616"); ``parse_raw_csv`` turns them into floats, "n/a" into None and keeps the rest
(kernel names, "(384, 1, 1)") as text.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from ..cuda.errors import GemmDriverError, LibraryNotFoundError

TOOLKIT_DIRS = ("/usr/local/cuda/bin",)
INSTALL_HINT = ("Nsight Compute's ncu was not found (PATH, cuda.pathfinder, $CUDA_HOME/bin, /usr/local/cuda/bin): "
                "install the CUDA toolkit or Nsight Compute (https://developer.nvidia.com/nsight-compute), "
                "or put ncu on PATH")
# The raw page's columns before the metrics: what was launched, not what was measured.
LAUNCH_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
                  "Block Size", "Grid Size", "Device", "CC")
_METRIC_NAME = re.compile(r"^([a-z0-9]+__[a-z0-9_]+)\s")
_NUMBER = re.compile(r"^-?[0-9][0-9,]*(\.[0-9]+)?([eE][-+]?[0-9]+)?$")


class NcuError(GemmDriverError):
    """ncu ran and failed; the message is its first error line."""


def _from_pathfinder() -> str | None:
    try:
        from cuda.pathfinder import find_nvidia_binary_utility

        return find_nvidia_binary_utility("ncu")
    except Exception:  # an older pathfinder without the function, or one that does not know ncu
        return None


def find_ncu(environ: Mapping[str, str] = os.environ) -> str:
    """The path of ncu; LibraryNotFoundError (one line: what to install) when there is none."""
    found = _from_pathfinder() or shutil.which("ncu", path=environ.get("PATH", ""))
    homes = [environ[v] for v in ("CUDA_HOME", "CUDA_PATH") if environ.get(v)]
    for directory in [os.path.join(home, "bin") for home in homes] + list(TOOLKIT_DIRS):
        candidate = os.path.join(directory, "ncu")
        if not found and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            found = candidate
    if not found:
        raise LibraryNotFoundError(INSTALL_HINT)
    return found


def _run(argv: Sequence[str], what: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise NcuError(f"{what} failed: {first_error(done.stdout + done.stderr, done.returncode)}")
    return done


def first_error(output: str, returncode: int) -> str:
    """ncu's first ==ERROR== line (its own words), else the last line it printed."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line.removeprefix("==ERROR==").strip() for line in lines if line.startswith("==ERROR==")]
    return errors[0] if errors else (lines[-1] if lines else f"exit status {returncode}")


def version(ncu: str) -> str:
    """'2025.3.1.0' from ``ncu --version``."""
    text = _run([ncu, "--version"], "ncu --version").stdout
    match = re.search(r"Version\s+([0-9][0-9.]*)", text)
    return match.group(1) if match else text.strip().splitlines()[-1]


def parse_query(text: str) -> set[str]:
    """The metric base names (no roll-up suffix) that ``ncu --query-metrics`` lists."""
    return {m.group(1) for line in text.splitlines() if (m := _METRIC_NAME.match(line))}


def available_metrics(ncu: str) -> set[str]:
    """The metric base names this GPU's counters provide."""
    return parse_query(_run([ncu, "--query-metrics"], "ncu --query-metrics").stdout)


def profile_command(ncu: str, metrics: Sequence[str], report: str, target: Sequence[str],
                    sections: Sequence[str] = ()) -> list[str]:
    """ncu around ``target``: only the launches between cuProfilerStart and cuProfilerStop,
    clocks locked to base, caches flushed before each replay pass, every process followed;
    ``sections`` adds ncu's own sections (SourceCounters: counters per SASS instruction)."""
    extra = [arg for name in sections for arg in ("--section", name)]
    return [ncu, "--target-processes", "all", "--profile-from-start", "off", "--clock-control", "base",
            "--cache-control", "all", "--metrics", ",".join(metrics), *extra, "--export", report,
            "--force-overwrite", *target]


def run_profile(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """Run ``profile_command``'s argv; ncu's and the target's output together."""
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False, env=env)
    output = done.stdout + done.stderr
    if done.returncode != 0 and "==ERROR==" in output:
        raise NcuError(f"ncu failed: {first_error(output, done.returncode)}")
    return output


def raw_csv(ncu: str, report: str) -> str:
    """The report's raw page as CSV, every value in its base unit."""
    if not Path(report).is_file():
        raise NcuError(f"ncu wrote no report at {report}: nothing was profiled")
    return _run([ncu, "--import", report, "--csv", "--page", "raw", "--print-units", "base"],
                "ncu --import").stdout


def source_csv(ncu: str, report: str) -> str:
    """The report's source page as CSV: each launch's SASS with its source counters (sass.py)."""
    return _run([ncu, "--import", report, "--csv", "--page", "source", "--print-source", "sass"],
                "ncu --import (source page)").stdout


@dataclass
class ProfiledKernel:
    """One profiled launch: what ran, and every metric of the raw page with its unit."""

    id: int
    name: str
    grid: str
    block: str
    metrics: dict[str, float | str | None] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)

    def number(self, metric: str) -> float | None:
        value = self.metrics.get(metric)
        return value if isinstance(value, float) else None

    def as_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "grid": self.grid, "block": self.block,
                "metrics": self.metrics, "units": self.units}


def _value(text: str) -> float | str | None:
    text = text.strip()
    if text in ("", "n/a"):
        return None
    return float(text.replace(",", "")) if _NUMBER.match(text) else text


def parse_raw_csv(text: str) -> list[ProfiledKernel]:
    """The launches of a raw-page CSV, in launch order; anything before its header (ncu's
    ==PROF== lines, a program's own output) is skipped. ValueError when there is no table."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"')), None)
    if start is None:
        raise ValueError("no raw-page table in ncu's CSV (its header starts with \"ID\",\"Process ID\")")
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, units = rows[0], rows[1] if len(rows) > 1 else []
    kernels = []
    for row in rows[2:]:
        if len(row) != len(header) or not row[0].strip().isdigit():
            continue
        cells = dict(zip(header, row))
        metrics = {name: _value(cells[name]) for name in header if name not in LAUNCH_COLUMNS}
        unit_of = {name: unit for name, unit in zip(header, units) if unit and name not in LAUNCH_COLUMNS}
        kernels.append(ProfiledKernel(int(cells["ID"]), cells["Kernel Name"], cells.get("Grid Size", ""),
                                      cells.get("Block Size", ""), metrics, unit_of))
    return kernels
