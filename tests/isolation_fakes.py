"""Stand-ins for tests/test_isolation.py: a Session whose context can be made to look
dead, and task handlers that fault, hang, raise or succeed. Module-level, so that the
``spawn``ed worker process can import them by name."""

from __future__ import annotations

import os
import signal
import time


class FakeContext:
    dead = False

    def synchronize(self) -> None:
        if self.dead:
            raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS (fake)")


class FakeSession:
    def __init__(self):
        self.context = FakeContext()
        self.pid = os.getpid()

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def no_gpu_session():
    from gemm_driver.cuda.errors import GpuUnavailableError

    raise GpuUnavailableError("no NVIDIA driver found (fake)")


def handler(session, state, payload, beat):
    """payload: (what, value). Returns (value, worker pid, tasks this worker ran)."""
    state["count"] = state.get("count", 0) + 1
    what, value = payload
    beat()
    if what == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if what == "hang":
        time.sleep(3600)
    if what == "raise":
        raise KeyError("a bug in the harness")
    if what == "poison":  # returns, but leaves the context in a sticky error
        session.context.dead = True
        return {"value": value, "status": "FAILED"}
    if what == "slow_prepare":  # CPU work before the beat is not under the watchdog
        pass
    return (value, session.pid, state["count"])


def slow_prepare_handler(session, state, payload, beat):
    time.sleep(payload)  # before the beat: the prepare limit applies, not the watchdog
    beat()
    return payload


def finish(session, state):
    return {"tasks": state.get("count", 0), "pid": session.pid}


def environment_handler(session, state, payload, beat):
    """payload: a variable's name; returns its value in the worker (None: unset)."""
    beat()
    return os.environ.get(payload)
