"""A sweep spread over several GPUs (gemm_driver/bench/spread.py), on the CPU with fake GPUs:
every task runs once, a GPU that cannot start or restart leaves and the others take its
tasks, and a journal lets a stopped sweep resume. The fakes are in tests/spread_fakes.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import spread_fakes as fakes  # noqa: E402

from gemm_driver.bench.isolation import TaskFailure  # noqa: E402
from gemm_driver.bench import spread  # noqa: E402
from gemm_driver.bench.spread import Journal, Spread  # noqa: E402


def run(payloads, devices, factory):
    spread = Spread(fakes.handler, devices=devices, watchdog_s=30.0, session_factory=factory)
    return spread, list(spread.run(payloads))


def test_every_task_runs_once_and_the_gpus_share_them():
    payloads = [("ok", i) for i in range(24)]
    spread, done = run(payloads, [0, 1], fakes.gpu_session)
    assert sorted(d.index for d in done) == list(range(24))  # none lost, none twice
    assert all(d.result[0] == d.index and d.result[1] == d.device for d in done)
    assert {d.device for d in done} == {0, 1}
    assert spread.workers_started == {0: 1, 1: 1} and not spread.lost


def test_a_gpu_that_cannot_start_leaves_its_tasks_to_the_others():
    spread, done = run([("ok", i) for i in range(6)], [0, 1], fakes.gpu_one_absent)
    assert sorted(d.index for d in done) == list(range(6))
    assert {d.device for d in done} == {0}
    assert "fell off the bus" in spread.lost[1]


def test_a_gpu_lost_mid_sweep_fails_only_the_task_it_was_running(tmp_path, monkeypatch):
    monkeypatch.setenv("SPREAD_FAKE_DIR", str(tmp_path))
    payloads = [("crash_on_1", 0), ("crash_on_1", 1)] + [("ok", i) for i in range(2, 12)]
    spread, done = run(payloads, [0, 1], fakes.gpu_one_dies_after_first_worker)
    assert sorted(d.index for d in done) == list(range(12))
    [failed] = [d for d in done if isinstance(d.result, TaskFailure)]  # the crash on GPU 1 only
    assert "died" in failed.result.reason and failed.device == 1
    assert "lost" in spread.lost[1]  # its worker could not restart: GPU 1 left the sweep
    assert {d.device for d in done if d is not failed} == {0}


def test_no_gpu_left_fails_the_rest_with_the_reason():
    spread, done = run([("ok", i) for i in range(3)], [1], fakes.gpu_one_absent)
    assert sorted(d.index for d in done) == [0, 1, 2]
    assert all(isinstance(d.result, TaskFailure) and "GPU 1: GPU 1 fell off the bus" in d.result.reason for d in done)


def test_spread_needs_a_gpu():
    with pytest.raises(ValueError, match="at least one GPU"):
        Spread(fakes.handler, devices=[])


def test_journal_resumes_and_ignores_a_torn_line(tmp_path):
    journal = Journal(tmp_path / "sweep.jsonl")
    assert journal.load() == {}
    journal.append("bf16 4096x4096x4096 hopper_bf16", {"tflops": 700.0})
    journal.append("bf16 1024x1024x1024 hopper_bf16", {"tflops": 300.0})
    with journal.path.open("a") as f:
        f.write('{"key": "torn')  # a crash mid-write
    assert journal.load() == {"bf16 4096x4096x4096 hopper_bf16": {"tflops": 700.0},
                              "bf16 1024x1024x1024 hopper_bf16": {"tflops": 300.0}}


def test_a_group_runs_on_one_gpu_and_goes_back_whole_when_its_gpu_cannot_start():
    groups = [[0, 1, 2], [3, 4, 5], [6, 7]]
    spread = Spread(fakes.handler, devices=[0, 1], watchdog_s=30.0, session_factory=fakes.gpu_session)
    done = list(spread.run([("ok", i) for i in range(8)], groups))
    assert sorted(d.index for d in done) == list(range(8))
    for group in groups:
        assert len({d.device for d in done if d.index in group}) == 1
    spread = Spread(fakes.handler, devices=[1, 0], watchdog_s=30.0, session_factory=fakes.gpu_one_absent)
    done = list(spread.run([("ok", i) for i in range(8)], groups))
    assert sorted(d.index for d in done) == list(range(8)) and {d.device for d in done} == {0}


class _Reversed(Spread):
    """A spread whose GPUs finish the groups last first."""

    def run(self, payloads, groups=None):
        from gemm_driver.bench.spread import Done

        for group in reversed(groups):
            for index in group:
                yield Done(index, payloads[index] * 10, device=index % 2)


def test_bench_reads_spread_results_in_task_order():
    runner = _Reversed(fakes.handler, devices=[0, 1])
    got = list(spread.in_order(runner, [1, 2, 3, 4, 5], [range(0, 2), range(2, 5)], gpu=0))
    assert got == [(0, 10, 0), (1, 20, 1), (2, 30, 0), (3, 40, 1), (4, 50, 0)]


def test_bench_gpus_must_exist(monkeypatch):
    from gemm_driver.bench import command

    monkeypatch.setattr(command, "device_count", lambda: 2)
    assert command.select_gpus("all") == (0, 1)
    assert command.select_gpus("1") == (1,)
    with pytest.raises(ValueError, match="no GPU 2; this machine has 2"):
        command.select_gpus("0,2")


def test_each_worker_gets_its_share_of_the_cores_for_blas(monkeypatch):
    assert spread.blas_share(4, 64) == {name: "16" for name in spread.BLAS_THREADS}
    assert spread.blas_share(3, 2) == {name: "1" for name in spread.BLAS_THREADS}  # never none
    for name in spread.BLAS_THREADS:
        monkeypatch.delenv(name, raising=False)
    runner = Spread(fakes.blas_threads_handler, devices=[0, 1], watchdog_s=30.0, session_factory=fakes.gpu_session)
    share = spread.blas_share(2)["OPENBLAS_NUM_THREADS"]
    assert {d.result[0] for d in runner.run(list(range(6)))} == {share}
