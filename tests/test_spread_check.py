"""tools/spread_check.py on two small journals (CPU): counts, losses, repeats and per-GPU ratios."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[1] / "tools" / "spread_check.py"


def _journal(path: Path, rows: list[tuple[str, float, int]]) -> Path:
    path.write_text("".join(json.dumps({"key": key, "result": {"median_ms": ms, "gpu": gpu}}) + "\n"
                            for key, ms, gpu in rows))
    return path


def _run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True)


def test_same_trials_spread_over_two_gpus(tmp_path):
    one = _journal(tmp_path / "one.jsonl", [("a", 1.0, 0), ("b", 2.0, 0), ("c", 4.0, 0)])
    spread = _journal(tmp_path / "spread.jsonl", [("a", 1.0, 0), ("b", 2.1, 1), ("c", 4.0, 1)])
    walls = tmp_path / "walls.txt"
    walls.write_text("gpus 0 rc 0 wall 10.0 s trials 3\ngpus all rc 0 wall 6.0 s trials 3\n")
    out = _run(one, spread, "--walls", walls)
    assert out.returncode == 0, out.stderr
    assert "the same trials: True; lost: 0, repeated: 0" in out.stdout
    assert "GPU 0: 1, GPU 1: 2" in out.stdout
    assert "GPU 1: 2 trials, median 1.0250" in out.stdout and "within 2%: 50%" in out.stdout
    assert "(0.600 of it)" in out.stdout


def test_a_lost_and_a_repeated_trial_are_counted(tmp_path):
    one = _journal(tmp_path / "one.jsonl", [("a", 1.0, 0), ("b", 2.0, 0)])
    spread = _journal(tmp_path / "spread.jsonl", [("a", 1.0, 1), ("a", 1.0, 2)])
    out = _run(one, spread)
    assert "the same trials: False; lost: 1, repeated: 1" in out.stdout


def test_an_unreadable_journal_is_one_line_and_exit_2(tmp_path):
    out = _run(tmp_path / "missing.jsonl", tmp_path / "missing.jsonl")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "cannot read the journals" in out.stderr


def test_the_trials_times_show_per_gpu_where_they_are_in_the_journals(tmp_path):
    def timed(rows):
        return "".join(json.dumps({"key": key, "result": {"median_ms": 1.0, "gpu": gpu, "finished_s": at,
                                                          "phases_s": {"case": 0.5, "run": run}}}) + "\n"
                       for key, gpu, at, run in rows)

    one, spread = tmp_path / "one.jsonl", tmp_path / "spread.jsonl"
    one.write_text(timed([("a", 0, 1.0, 0.5), ("b", 0, 2.0, 0.5)]))
    spread.write_text(timed([("a", 0, 1.0, 1.5), ("b", 1, 1.5, 0.5)]))
    out = _run(one, spread)
    assert "one GPU: seconds a trial by phase" in out.stdout
    assert "GPU 0: 2 trials, case 0.500, run 0.500; busy 2.0 s, last at 2.0 s" in out.stdout
    assert "GPU 0: 1 trials, case 0.500, run 1.500; busy 2.0 s, last at 1.0 s" in out.stdout
    assert "GPU 1: 1 trials, case 0.500, run 0.500; busy 1.0 s, last at 1.5 s" in out.stdout

