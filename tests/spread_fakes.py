"""Stand-ins for tests/test_spread.py: fake GPUs for the spread sweep. Module-level, so that
the ``spawn``ed workers import them by name."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from isolation_fakes import FakeSession


class FakeGpuSession(FakeSession):
    def __init__(self, device: int):
        super().__init__()
        self.device = device


def gpu_session(device: int):
    return FakeGpuSession(device)


def gpu_one_absent(device: int):
    """GPU 1 has no driver: its worker never starts."""
    if device == 1:
        from gemm_driver.cuda.errors import GpuUnavailableError

        raise GpuUnavailableError("GPU 1 fell off the bus (fake)")
    return FakeGpuSession(device)


def gpu_one_dies_after_first_worker(device: int):
    """GPU 1's first worker starts; once it is gone, no new one starts there (a marker file
    in the directory the test names in SPREAD_FAKE_DIR records the first start)."""
    marker = Path(os.environ["SPREAD_FAKE_DIR"]) / f"gpu{device}-started"
    if device == 1 and marker.exists():
        from gemm_driver.cuda.errors import GpuUnavailableError

        raise GpuUnavailableError("GPU 1 is lost (fake)")
    marker.touch()
    return FakeGpuSession(device)


def handler(session, state, payload, beat):
    """payload: (what, value) -> (value, device, pid); "crash_on_1" kills a worker on GPU 1
    and takes 3 s on GPU 0, so that of two such tasks first in the queue GPU 1 gets one."""
    what, value = payload
    beat()
    if what == "crash_on_1":
        if session.device == 1:
            os.kill(os.getpid(), signal.SIGSEGV)
        time.sleep(3.0)  # on GPU 0 it is slow: GPU 1's worker is surely up for the next one
    time.sleep(0.02)
    return (value, session.device, os.getpid())


def trial_handler(session, state, task, beat):
    """A tuning trial on a fake GPU: its TFLOP/s is the configuration's BM (10 for the
    baseline); the sweep tags it with the GPU that ran it."""
    from gemm_driver.bench.autotune import Trial

    beat()
    time.sleep(0.01)
    return Trial(task.tunables, "ok", "", 1.0, float(task.tunables.get("BM", 10)))


def blas_threads_handler(session, state, payload, beat):
    """The BLAS thread count this worker started with (spread.BLAS_THREADS' first)."""
    beat()
    return os.environ.get("OPENBLAS_NUM_THREADS"), session.device
