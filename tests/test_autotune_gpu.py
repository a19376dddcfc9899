"""The tuning sweep's final round on a GPU: its finalists verified again on the shape's case,
then timed in alternation (bench/autotune.py, bench/alternate.py)."""

from __future__ import annotations

import dataclasses

import pytest

from gemm_driver.bench import autotune
from gemm_driver.bench.autotune import FinalTask, tunables_label
from gemm_driver.kernels.simt.warptiling import TUNE_SPACE

pytestmark = pytest.mark.gpu


def test_a_final_round_verifies_and_times_each_finalist_in_alternation(session):
    configurations = tuple(dict(t) for t in TUNE_SPACE[:2])
    task = FinalTask("warptiled", (384, 320, 288), 0, "fp32", configurations, seed=0, launches=5)
    state = {}
    try:
        outcome = autotune.run_final_task(session, state, task, lambda: None)
    finally:
        state["close"]()
    assert outcome["wrong"] == {}
    assert set(outcome["medians_ms"]) == {tunables_label(t) for t in configurations}
    assert all(0 < ms < 10 for ms in outcome["medians_ms"].values()), outcome


def test_a_finalist_that_writes_wrong_values_is_left_out_of_the_timing(session, monkeypatch):
    configurations = tuple(dict(t) for t in TUNE_SPACE[:2])
    task = FinalTask("warptiled", (256, 256, 256), 1, "fp32", configurations, seed=0, launches=5)
    broken = tunables_label(configurations[0])
    real_verify = autotune.PreparedCase.verify

    def verify(case, session, launch):  # the first finalist's D read as wrong
        verdict = real_verify(case, session, launch)
        return verdict if launch is not launches[0] else dataclasses.replace(verdict, ok=False, message="1 wrong")

    launches = []
    real_launcher = autotune.PreparedCase.launcher
    monkeypatch.setattr(autotune.PreparedCase, "launcher",
                        lambda case, *a, **k: launches.append(real_launcher(case, *a, **k)) or launches[-1])
    monkeypatch.setattr(autotune.PreparedCase, "verify", verify)
    state = {}
    try:
        outcome = autotune.run_final_task(session, state, task, lambda: None)
    finally:
        state["close"]()
    assert outcome == {"medians_ms": {}, "wrong": {broken: "1 wrong"}}  # one left: nothing to alternate
