"""Fault isolation (gemm_driver/bench/isolation.py) on the CPU: a worker process that
crashes, hangs, raises or leaves its context dead costs only its own task; the run goes
on in a fresh worker and every other task's result arrives, in order.

The handlers and the fake Session live in tests/isolation_fakes.py (the spawned worker
imports them by name). The GPU version, with real faulting and spinning kernels in a
bench sweep, is tests/test_isolation_gpu.py."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import isolation_fakes as fakes  # noqa: E402

from gemm_driver.bench.isolation import Inline, Isolated, TaskFailure  # noqa: E402
from gemm_driver.cuda.errors import GpuUnavailableError  # noqa: E402

def run(payloads, watchdog_s=30.0, handler=fakes.handler):
    runner = Isolated(handler, fakes.finish, watchdog_s=watchdog_s, session_factory=fakes.FakeSession)
    return runner, dict(runner.run(payloads))


def test_good_tasks_share_one_worker():
    runner, results = run([("ok", i) for i in range(5)])
    assert [r[0] for r in results.values()] == list(range(5))
    assert len({r[1] for r in results.values()}) == 1  # one worker process ...
    assert [r[2] for r in results.values()] == [1, 2, 3, 4, 5]  # ... keeping its state
    assert runner.workers_started == 1
    assert runner.last_word["tasks"] == 5


def test_a_crash_costs_only_its_own_task():
    runner, results = run([("ok", 0), ("segfault", 1), ("ok", 2)])
    assert results[0][0] == 0 and results[2][0] == 2
    assert isinstance(results[1], TaskFailure) and "died" in results[1].reason and "-11" in results[1].reason
    assert results[0][1] != results[2][1]  # the task after the crash ran in a new worker
    assert runner.workers_started == 2


def test_a_hang_is_reported_within_the_watchdog():
    started = time.monotonic()
    runner, results = run([("ok", 0), ("hang", 1), ("ok", 2)], watchdog_s=1.5)
    assert isinstance(results[1], TaskFailure) and "hung" in results[1].reason and "watchdog 1.5 s" in results[1].reason
    assert results[2][0] == 2
    assert time.monotonic() - started < 30


def test_preparation_is_not_under_the_watchdog():
    runner, results = run([2.5], watchdog_s=1.0, handler=fakes.slow_prepare_handler)
    assert results[0] == 2.5


def test_a_dead_context_replaces_the_worker_after_its_task():
    runner, results = run([("ok", 0), ("poison", 1), ("ok", 2)])
    assert results[1] == {"value": 1, "status": "FAILED"}  # its own result, as it reported it
    assert results[2][0] == 2 and results[2][2] == 1  # a fresh worker: its first task
    assert runner.workers_started == 2


def test_a_harness_error_fails_its_task_only():
    runner, results = run([("raise", 0), ("ok", 1)])
    assert isinstance(results[0], TaskFailure) and "KeyError" in results[0].reason
    assert results[1][0] == 1 and runner.workers_started == 1


def test_no_gpu_is_one_error_not_a_failed_task():
    runner = Isolated(fakes.handler, session_factory=fakes.no_gpu_session)
    with pytest.raises(GpuUnavailableError, match="no NVIDIA driver found"):
        list(runner.run([("ok", 0)]))


def test_a_worker_that_cannot_start_raises_its_own_error(monkeypatch):
    """spawn refuses to start from a script without a __main__ guard: that error reaches the
    caller as it is (it once came back as an AttributeError from the clean-up)."""
    runner = Isolated(fakes.handler, session_factory=fakes.FakeSession)

    def refuse(self):
        raise RuntimeError("An attempt has been made to start a new process before ...")

    monkeypatch.setattr(runner._ctx.Process, "start", refuse)
    with pytest.raises(RuntimeError, match="attempt has been made"):
        list(runner.run([("ok", 0)]))
    assert runner._process is None and runner._conn is None


def test_inline_runs_the_same_handlers_in_this_process():
    runner = Inline(fakes.handler, fakes.finish, session_factory=fakes.FakeSession)
    results = dict(runner.run([("ok", 0), ("ok", 1)]))
    assert [r[0] for r in results.values()] == [0, 1] and runner.last_word["tasks"] == 2


def test_kept_makes_once_per_key_and_closes_the_one_before():
    from gemm_driver.bench.isolation import kept, release_kept

    made, closed = [], []

    class Case:
        def __init__(self, key):
            self.key = key
            made.append(key)

        def close(self):
            closed.append(self.key)

    state: dict = {}
    for key in ("a", "a", "b", "b", "a"):
        assert kept(state, key, lambda key=key: Case(key)).key == key
    release_kept(state)
    assert made == ["a", "b", "a"] and closed == ["a", "b", "a"]


def test_a_worker_starts_with_its_environment_where_the_caller_set_none(monkeypatch):
    monkeypatch.setenv("GEMM_DRIVER_FAKE_CALLER", "caller's")
    monkeypatch.delenv("GEMM_DRIVER_FAKE_WORKER", raising=False)
    runner = Isolated(fakes.environment_handler, watchdog_s=30.0, session_factory=fakes.FakeSession,
                      worker_env={"GEMM_DRIVER_FAKE_WORKER": "4", "GEMM_DRIVER_FAKE_CALLER": "worker's"})
    results = dict(runner.run(["GEMM_DRIVER_FAKE_WORKER", "GEMM_DRIVER_FAKE_CALLER"]))
    assert results == {0: "4", 1: "caller's"}  # the caller's own setting stands
    assert "GEMM_DRIVER_FAKE_WORKER" not in os.environ  # this process's environment as it was
