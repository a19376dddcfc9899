"""tools/sweep_phases.py on small journals (CPU): phase totals, shares, the heaviest shapes."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[1] / "tools" / "sweep_phases.py"


def _run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True)


def _line(key: str, gpu: int, **phases) -> str:
    return json.dumps({"key": key, "result": {"median_ms": 1.0, "gpu": gpu, "finished_s": 1.0,
                                              "phases_s": phases}}) + "\n"


def test_phases_add_up_and_the_heaviest_shape_comes_first(tmp_path):
    journal = tmp_path / "journal.jsonl"
    journal.write_text(_line("hopper_bf16 1000x2000x64 BN=128 seed=0", 0, case=1.0, verify=4.0, time=1.0)
                       + _line("hopper_bf16 1000x2000x64 BN=256 seed=0", 1, verify=2.0, time=1.0, build=1.0)
                       + _line("cublas_bf16 10x20x30 - seed=0", 0, case=0.5, verify=0.5, time=0.5)
                       # a trial run again after a resume: its last line counts, once
                       + _line("cublas_bf16 10x20x30 - seed=0", 1, case=0.5, verify=0.5, time=0.5))
    out = _run(journal, "--top", "1")
    assert out.returncode == 0, out.stderr
    assert "3 trials with phases on 2 GPU(s): 11.5 s busy in trials" in out.stdout
    assert "verify         6.5    57%    2.167" in out.stdout
    assert "build          1.0     9%    1.000" in out.stdout
    assert "1000x2000x64           6.0 s over   2 trials, median 3.00 s, 2 M elements, 1500 ns an element" \
        in out.stdout
    assert "10x20x30" not in out.stdout  # --top 1


def test_a_journal_without_phases_or_unreadable_is_one_line_and_exit_2(tmp_path):
    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps({"key": "a 1x1x1 - seed=0", "result": {"median_ms": 1.0}}) + "\n")
    for path, said in ((old, "holds no phases"), (tmp_path / "missing.jsonl", "cannot read the journal")):
        out = _run(path)
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and said in out.stderr


def _case(kernel: str, **phases) -> dict:
    return {"kernel": kernel, "m": 64, "n": 64, "k": 64, "status": "ok", "phases_s": phases}


def test_a_bench_run_s_phases_by_phase_and_by_kernel(tmp_path):
    cases = [_case("hopper_bf16", case=4.0, build=0.5, verify=1.0, time=0.5),
             _case("cublaslt_bf16", build=2.0, verify=1.0, time=0.5),
             {"kernel": "cublas_bf16", "m": 64, "n": 64, "k": 64, "status": "ok"}]  # a case without phases
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"schema": "gemm_driver.bench/3", "environment": {"phases_s": {"sweep": 20.0}},
                               "results": cases}))
    out = _run(run)
    assert out.returncode == 0, out.stderr
    assert "2 cases with phases: 9.5 s busy in cases of the run's 20.0 s sweep" in out.stdout
    assert "case           4.0    42%    4.000" in out.stdout and "build          2.5    26%    1.250" in out.stdout
    assert "hopper_bf16                  1      4.0      0.5      1.0      0.5" in out.stdout
    packed = tmp_path / "run.json.gz"  # an archived run, gzipped (results_index --move): the same table
    packed.write_bytes(gzip.compress(run.read_bytes()))
    assert _run(packed).stdout == out.stdout


def test_a_bench_run_without_phases_is_one_line_and_exit_2(tmp_path):
    run = tmp_path / "run.json"  # as a run made before the cases recorded their phases
    run.write_text(json.dumps({"schema": "gemm_driver.bench/3", "environment": {},
                               "results": [{"kernel": "cublas_bf16", "m": 64, "n": 64, "k": 64, "status": "ok"}]}))
    out = _run(run)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "holds no phases" in out.stderr
