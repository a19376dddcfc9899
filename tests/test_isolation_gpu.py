"""Fault isolation on the GPU, as a user meets it: ``bench`` and ``verify`` with a kernel
that faults (an illegal address: a sticky error for its context) or never returns, between
good kernels. The good kernels' results must be in the JSON, the bad one FAILED under its
own name with the CUDA error or the watchdog's word, the exit code 1, and no hang.

The test kernels are tests/kernels/faulty.cu, registered through GEMM_DRIVER_EXTRA_KERNELS.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parent.parent
EXTRA = str(ROOT / "tests" / "kernels" / "faulty_specs.py")


def gemm_driver(*args: str, timeout: float = 300, **popen):
    env = {**os.environ, "GEMM_DRIVER_EXTRA_KERNELS": EXTRA, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "gemm_driver", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def cases(path: Path) -> dict[str, dict]:
    doc = json.loads(path.read_text())
    return {rec["kernel"]: rec for rec in doc["results"]}, doc


def test_a_faulting_kernel_is_failed_and_the_sweep_goes_on(tmp_path):
    out = tmp_path / "run.json"
    done = gemm_driver("bench", "--kernels", "naive,faults_illegal_address,coalesced", "--sizes", "128",
                       "--max-time", "0.1", "--json", str(out))
    assert done.returncode == 1, done.stderr
    by_kernel, doc = cases(out)
    assert by_kernel["naive"]["status"] == "ok" and by_kernel["naive"]["tflops"] > 0
    assert by_kernel["coalesced"]["status"] == "ok" and by_kernel["coalesced"]["tflops"] > 0
    bad = by_kernel["faults_illegal_address"]
    assert bad["status"] == "FAILED" and "ILLEGAL_ADDRESS" in bad["detail"] and bad["tflops"] is None
    assert doc["complete"] is True and doc["environment"]["workers_started"] == 2


def test_a_hung_kernel_is_reported_by_the_watchdog(tmp_path):
    out = tmp_path / "run.json"
    started = time.monotonic()
    done = gemm_driver("bench", "--kernels", "naive,hangs_forever,coalesced", "--sizes", "128", "--max-time", "0.1",
                       "--watchdog", "5", "--json", str(out))
    assert done.returncode == 1, done.stderr
    assert time.monotonic() - started < 120
    by_kernel, _ = cases(out)
    assert by_kernel["hangs_forever"]["status"] == "FAILED" and "hung" in by_kernel["hangs_forever"]["detail"]
    assert by_kernel["naive"]["status"] == "ok" and by_kernel["coalesced"]["status"] == "ok"


def test_verify_reports_a_faulting_kernel_and_checks_the_next(tmp_path):
    done = gemm_driver("verify", "--kernels", "faults_illegal_address,naive", "--examples", "5", "--max-dim", "64")
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert any("faults_illegal_address" in line and "FAIL" in line for line in lines)
    assert any("naive" in line and "pass" in line for line in lines)


def test_ctrl_c_keeps_what_finished(tmp_path):
    out = tmp_path / "run.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # Two shapes: the first finishes (a checkpoint is written), then Ctrl-C during the second.
    proc = subprocess.Popen([sys.executable, "-m", "gemm_driver", "bench", "--kernels", "naive,coalesced",
                             "--sizes", "128,2048", "--max-time", "2", "--json", str(out)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert out.exists(), "no checkpoint was written after the first shape"
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    doc = json.loads(out.read_text())
    assert doc["complete"] is False
    assert {(r["kernel"], r["m"]) for r in doc["results"]} >= {("naive", 128), ("coalesced", 128)}


def test_the_autotune_sweep_survives_a_faulting_configuration(monkeypatch):
    import importlib.util

    from gemm_driver.bench import autotune

    monkeypatch.setenv("GEMM_DRIVER_EXTRA_KERNELS", EXTRA)  # the spawned workers register it too
    loader = importlib.util.spec_from_file_location("faulty_specs", EXTRA)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    spec = module.SPECS[0]  # faults_illegal_address
    results = autotune.tune(spec, [(64, 64, 64), (96, 80, 72)], [{}], seconds=0.05)
    for result in results:  # cuBLAS still timed on each shape, after the fault before it
        assert result.baseline_tflops and result.baseline_tflops > 0
        (trial,) = result.trials
        assert trial.status == "FAILED" and "ILLEGAL_ADDRESS" in trial.detail
