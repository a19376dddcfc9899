"""tools/final_round.py on a small journal (CPU): the winners a final round changed, the
left-out check with either pass's times, how the finalists moved."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gemm_driver import kernels
from gemm_driver.bench.autotune import FinalTask, TrialTask, tunables_label

TOOL = Path(__file__).resolve().parents[1] / "tools" / "final_round.py"
SPEC = kernels.KERNELS["hopper_bf16"]
WHOLE, CLUSTER = SPEC.resolve({"PDL": 1}), SPEC.resolve({"PDL": 1, "CM": 2})


def _run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True,
                          env={"PYTHONPATH": str(TOOL.parents[1])})


def _trial(shape, tunables, tflops) -> str:
    key = TrialTask("hopper_bf16", shape, 0, "bf16", tunables, 0, 0.15).key
    ms = 2 * shape[0] * shape[1] * shape[2] / tflops / 1e9
    return json.dumps({"key": key, "result": {"tunables": tunables, "status": "ok", "detail": "",
                                              "median_ms": ms, "tflops": tflops, "gpu": 0}}) + "\n"


def test_the_winner_a_final_round_changed_and_the_left_out_check_of_both_passes(tmp_path):
    shapes = [(4096, 4096, 4096), (8192, 8192, 4096), (2048, 8192, 8192)]
    lines = [_trial(s, WHOLE, 700.0) + _trial(s, CLUSTER, 680.0) for s in shapes]
    flips = shapes[1]  # the round times the cluster 2% ahead there
    final = FinalTask("hopper_bf16", flips, 1, "bf16", (WHOLE, CLUSTER), 0, 20)
    ms = lambda tflops: 2 * 8192 * 8192 * 4096 / tflops / 1e9  # noqa: E731
    lines.append(json.dumps({"key": final.key, "result": {
        "medians_ms": {tunables_label(WHOLE): ms(686.0), tunables_label(CLUSTER): ms(700.0)}, "wrong": {}}}) + "\n")
    journal = tmp_path / "sweep.jsonl"
    journal.write_text("".join(lines))
    out = _run(journal)
    assert out.returncode == 0, out.stderr
    assert "1 of 3 shapes timed again, the winner changed on 1 (1 by CM)" in out.stdout
    assert "8192x8192x4096     CM 1->2" in out.stdout and " 1.029  1.020" in out.stdout
    assert "left-out check, first pass: " in out.stdout and "left-out check, final round: " in out.stdout
    assert "final round over first pass (2): median 1.005" in out.stdout  # 686/700, 700/680


def test_a_missing_journal_is_one_line_and_exit_2(tmp_path):
    out = _run(tmp_path / "missing.jsonl")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "no journal lines" in out.stderr
