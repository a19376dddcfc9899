"""Tables written to a file, a pipe or a CI log hold every value whole, one row per line,
at most tables.LOG_WIDTH columns wide.

Off a terminal rich would fit a table to ``COLUMNS`` (80 here, as in a CI log) and cut
cells to "…" or wrap them. Each table is rendered into a non-terminal console with
COLUMNS=80 and every cell is looked for, whole, on its row's own line: the bench table of
a committed H100 run, compile's and stats' resource table (static, dynamic and total
shared memory), and compare, as a function and as the real command piped to another
process.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text

from gemm_driver import kernels
from gemm_driver.bench import compare, report, tables, writers
from gemm_driver.inspection import command as inspection
from gemm_driver.inspection import report as inspection_report

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "results" / "h100-80gb-hbm3"
CUT = "…"


def body_rows(text: str) -> list[str]:
    """The data rows of a table: the lines after its header rule, less the blank lines
    between sections, up to what follows the table (numbered notes, other lines)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if set(line.strip()) == {"─"}) + 1
    rows = []
    for line in lines[start:]:
        if line.startswith(("[", " [", "left out", "only in")) or not line.strip() and not rows:
            break
        if line.strip():
            rows.append(line)
    return rows


def plain(cell) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


@pytest.mark.parametrize("run", ["bench-tensor.json", "bench.json"])
def test_bench_table_is_whole_in_a_pipe(log_console, run):
    console, out = log_console
    recs = writers.load(str(RUNS / run))["results"]
    report.print_table(recs, console, title="a title longer than eighty columns " * 3)
    text = out.getvalue()
    assert CUT not in text and "left out" not in text
    assert text.splitlines()[0].strip() == ("a title longer than eighty columns " * 3).strip()
    rows = body_rows(text)
    assert len(rows) == len(recs), "a row was wrapped onto more than one line"
    for rec, line in zip(recs, rows):
        cells = [plain(cell(rec)) for _, cell in report.shown_columns(recs)]
        assert line.startswith(cells[0] + " ") and all(c in line for c in cells[1:]), line
    assert max(len(line) for line in text.splitlines()) <= tables.LOG_WIDTH


def test_bench_table_keeps_its_look_on_a_terminal():
    """On a terminal the table is fitted to the window."""
    out = io.StringIO()
    recs = writers.load(str(RUNS / "bench-tensor.json"))["results"][:5]
    report.print_table(recs, Console(file=out, width=80, force_terminal=True, color_system=None), "t")
    assert max(len(line) for line in out.getvalue().splitlines()) <= 80


COMPILED = ("naive", "double_buffered", "warptiled")
ARCHS = ("sm_80", "sm_90")


@pytest.fixture(scope="module")
def compile_rows():
    """compile's rows for kernels with no, some and a lot of dynamic shared memory, from the
    run's cubin cache (the spill gate builds these defaults too)."""
    return [inspection_report.compile_row(kernels.get(name), arch, kernels.get(name).resolve({}))
            for name in COMPILED for arch in ARCHS]


def test_compile_rows_carry_static_dynamic_and_total_shared_memory(compile_rows):
    by = {(r["kernel"], r["arch"]): r for r in compile_rows}
    for arch in ARCHS:
        assert by["double_buffered", arch]["dynamic_shared_bytes"] == 16_640
        assert by["warptiled", arch]["dynamic_shared_bytes"] == 74_496
        assert by["naive", arch]["dynamic_shared_bytes"] == 0
    for row in compile_rows:
        assert row["total_shared_bytes"] == row["shared_bytes"] + row["dynamic_shared_bytes"]
        spec = kernels.get(row["kernel"])
        assert row["dynamic_shared_bytes"] == spec.dynamic_smem(spec.resolve({}))  # what the launch asks for


def test_compile_table_is_whole_in_a_pipe(compile_rows, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    failed = {"kernel": "warptiled", "arch": "sm_75", "error": "NVRTC_ERROR_COMPILATION"}
    header, cells = inspection_report.compile_table([*compile_rows, failed])
    inspection.print_table(header, cells)
    lines = capsys.readouterr().out.splitlines()
    assert CUT not in "\n".join(lines) and len(lines) == len(compile_rows) + 2
    assert lines[0].split() == ["kernel", "arch", "regs", "smem", "static", "B", "smem", "dynamic", "B", "smem",
                                "total", "B", "spill", "B", "local", "B", "secs", "cached"]
    for row, line in zip(compile_rows, lines[1:]):
        assert line.split() == [str(row[c]) for c in inspection_report.COMPILE_COLUMNS], line
    assert lines[-1].split()[:3] == ["warptiled", "sm_75", "FAILED"]


def test_stats_reports_the_total_and_computes_occupancy_from_it(monkeypatch, session_cache):
    monkeypatch.setenv("GEMM_DRIVER_CACHE_DIR", session_cache)
    stats = inspection_report.kernel_stats(kernels.get("warptiled"), "sm_90")
    assert (stats["shared_bytes"], stats["dynamic_shared_bytes"]) == (0, 74_496)
    assert stats["total_shared_bytes"] == 74_496
    # 74,496 + 1 KiB reserved per block: 3 blocks fit in 228 KiB; the registers allow 1
    from gemm_driver.inspection.occupancy import occupancy

    fit = occupancy("sm_90", stats["threads_per_block"], 64, stats["total_shared_bytes"])
    assert (fit.blocks_per_sm, fit.limited_by) == (3, "shared memory")
    assert stats["blocks_per_sm"] == 1 and stats["occupancy_limit"] == "registers"
    assert {"shared_bytes", "dynamic_shared_bytes", "total_shared_bytes"} <= set(inspection_report.RESOURCE_FIELDS)


def _timing(median: float) -> dict:
    return {"median_ms": median, "ci_low_ms": median * 0.999, "ci_high_ms": median * 1.001}


def _runs(tmp_path) -> tuple[Path, Path, int]:
    """Two bench files sharing every case of the committed tensor run, the second 5% faster,
    with long tunables so the case column is wide."""
    doc = writers.load(str(RUNS / "bench-tensor.json"))
    old = [dict(r, tunables={"BM": 128, "BN": 256, "BK": 64, "STAGES": 4, "SPLITK": 1}) for r in doc["results"]]
    new = [dict(r, timing=_timing(r["timing"]["median_ms"] / 1.05) if r.get("timing") else None) for r in old]
    paths = []
    for name, results in (("old.json", old), ("new.json", new)):
        path = tmp_path / name
        path.write_text(json.dumps({**doc, "results": results}))
        paths.append(path)
    return paths[0], paths[1], len(old)


def _check_compare_output(text: str, result: compare.Comparison) -> None:
    assert CUT not in text and max(len(line) for line in text.splitlines()) <= tables.LOG_WIDTH
    rows = body_rows(text)
    assert len(rows) == len(result.rows), "a case was wrapped onto more than one line"
    for row, line in zip(result.rows, rows):
        kernel, m, n, k, batch, dtype, *_ = row.key
        assert line.split()[:3] == [kernel, f"{m}x{n}x{k}", dtype] and row.verdict in line, line
    assert "tunables BK=64,BM=128,BN=256,SPLITK=1,STAGES=4" in text  # the long tunables, once, as a note


def test_compare_prints_one_line_per_case(log_console, tmp_path):
    console, out = log_console
    old, new, count = _runs(tmp_path)
    result = compare.compare_files(str(old), str(new))
    assert len(result.rows) == count
    compare.print_comparison(result, console, str(old), str(new), 0.02)
    _check_compare_output(out.getvalue(), result)


def test_compare_command_piped(tmp_path):
    old, new, _ = _runs(tmp_path)
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(REPO)}
    env.pop("FORCE_COLOR", None)
    done = subprocess.run([sys.executable, "-m", "gemm_driver", "compare", str(old), str(new)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    _check_compare_output(done.stdout, compare.compare_files(str(old), str(new)))
    # the title names both files; long paths (xdist's temporary folders) may wrap it onto a second line
    title = " ".join(done.stdout.splitlines()[:2])
    assert "FASTER" in done.stdout and str(old) in title and str(new) in title


def test_compile_command_shows_dynamic_shared_memory(capsys, monkeypatch, session_cache):
    """The command itself (cli.cmd_compile builds its table with inspection.report.compile_table)."""
    from gemm_driver.cli import main

    monkeypatch.setenv("GEMM_DRIVER_CACHE_DIR", session_cache)
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["compile", "double_buffered", "warptiled", "--arch", "sm_80"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "smem dynamic B" in lines[0] and "smem total B" in lines[0] and CUT not in "\n".join(lines)
    assert [line.split()[:6] for line in lines[1:]] == [
        ["double_buffered", "sm_80", lines[1].split()[2], "0", "16640", "16640"],
        ["warptiled", "sm_80", lines[2].split()[2], "0", "74496", "74496"]]
    assert main(["compile", "warptiled", "--arch", "sm_80", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["shared_bytes"], row["dynamic_shared_bytes"], row["total_shared_bytes"]) == (0, 74_496, 74_496)
