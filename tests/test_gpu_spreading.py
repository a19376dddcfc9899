"""The GPU suite's spreading over several GPUs (conftest.py): an xdist worker given
GEMM_DRIVER_TEST_GPUS sees one of them, in turn, before CUDA starts in it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


@pytest.mark.parametrize("worker, gpus, seen", [("gw0", "0,1,2,3", "0"), ("gw5", "0,1,2,3", "1"), ("gw3", "2,5", "5"),
                                                (None, "0,1", "unset"), ("gw1", "", "unset")])
def test_each_worker_sees_one_gpu_in_turn(worker, gpus, seen):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "CUDA_VISIBLE_DEVICES")}
    env.update({"GEMM_DRIVER_TEST_GPUS": gpus, **({"PYTEST_XDIST_WORKER": worker} if worker else {})})
    script = "import os, conftest; print(os.environ.get('CUDA_VISIBLE_DEVICES', 'unset'))"
    out = subprocess.run([sys.executable, "-c", script], cwd=TESTS, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == seen
