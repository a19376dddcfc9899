"""Energy per GEMM without a GPU: the window's loop against a simulated counter and GPU,
the trust rules, the record field, the results schema, merged rounds and the plot."""

from __future__ import annotations

import math

import pytest

from gemm_driver.bench import clocks, energy, plots, results_schema, runner
from gemm_driver.bench.timing import TimingStats
from gemm_driver.problem import GemmProblem

FIELDS = {"joules_per_gemm", "avg_power_w", "tflops_per_watt", "window_s", "trusted", "note"}


class SimulatedGpu:
    """A host clock, a GPU that runs chunks of ``chunk_s`` back to back, and an energy
    counter that steps every ``step_s`` by ``watts`` x ``step_s``; each read costs ``read_s``."""

    def __init__(self, watts=700.0, step_s=0.1, read_s=0.004, chunk_s=0.002, instant=False):
        self.now, self.free_at, self.slots = 0.0, 0.0, {}
        self.watts, self.step_s, self.read_s, self.chunk_s, self.instant = watts, step_s, read_s, chunk_s, instant

    def clock(self) -> float:
        return self.now

    def enqueue(self, slot: int):
        # the chunk that last held this slot has finished (its event may be recorded again)
        assert self.slots.get(slot, 0.0) <= self.now
        end = self.now if self.instant else max(self.free_at, self.now) + self.chunk_s
        self.slots[slot] = end
        self.free_at = end
        return lambda: self.now >= end

    def read_mj(self) -> int:
        self.now += self.read_s
        return int(self.now // self.step_s * self.watts * self.step_s * 1e3)


def window(gpu: SimulatedGpu, launches_per_chunk: int = 100, **kw) -> dict:
    reads, chunks, starved = energy.run_window(gpu.enqueue, 1e3 * gpu.chunk_s, gpu.read_mj, clock=gpu.clock, **kw)
    launches = chunks * launches_per_chunk
    return energy.window_record(reads, launches=launches, gpu_ms=1e3 * chunks * gpu.chunk_s, starved=starved,
                                how="graph replays")


def test_window_measures_the_power_and_stops_once_the_rule_holds():
    gpu = SimulatedGpu(watts=700.0)
    rec = window(gpu)
    assert rec["trusted"] and rec["note"] is None
    assert rec["avg_power_w"] == pytest.approx(700.0, rel=1e-3)
    assert rec["joules_per_launch"] == pytest.approx(700.0 * 0.002 / 100, rel=1e-3)
    assert rec["updates"] >= energy.MIN_UPDATES and rec["span_s"] >= energy.MIN_SPAN_S
    assert rec["counter_interval_ms"] == pytest.approx(100.0, rel=0.05)
    assert gpu.now < 1.0  # about half a second and the queue's drain, not the 2 s limit


def test_a_counter_too_slow_for_the_limit_gives_no_number():
    gpu = SimulatedGpu(step_s=1.5)
    rec = window(gpu)
    assert not rec["trusted"] and rec["avg_power_w"] is None
    assert "did not step twice" in rec["note"]
    assert energy.MAX_WINDOW_S <= gpu.now <= energy.MAX_WINDOW_S + energy.QUEUED_AHEAD_MS / 1e3 + 0.05


def test_too_few_updates_keep_the_number_but_not_the_trust():
    rec = window(SimulatedGpu(step_s=0.45))
    assert rec["avg_power_w"] == pytest.approx(700.0, rel=0.01)
    assert not rec["trusted"] and "counter updates" in rec["note"]


def test_a_gpu_left_without_work_is_not_trusted():
    rec = window(SimulatedGpu(instant=True))
    assert rec["starved"] > 0
    assert not rec["trusted"] and "ran out of queued work" in rec["note"]


def test_edges_drop_the_first_change_and_reads_after_the_work_ended():
    reads = [energy.CounterRead(t, t + 0.001, mj, busy) for t, mj, busy in
             ((0.0, 0, True), (0.1, 10, True), (0.2, 20, True), (0.3, 30, True), (0.4, 40, False))]
    assert [r.mj for r in energy.edges(reads)] == [20, 30]


def test_summary_of_rounds_is_their_mean_and_says_how_far_apart():
    a = {"joules_per_launch": 0.004, "avg_power_w": 700.0, "span_s": 0.4, "trusted": True, "note": None}
    b = {**a, "joules_per_launch": 0.0041, "avg_power_w": 710.0}
    flops = 2 * 1024**3
    out = energy.summarize([a, b], flops)
    assert set(out) == FIELDS
    assert out["joules_per_gemm"] == pytest.approx(0.00405)
    assert out["tflops_per_watt"] == pytest.approx(flops / 0.00405 / 1e12)
    assert out["window_s"] == pytest.approx(0.8) and out["trusted"]
    assert "2.5% apart)" in out["note"]
    # rounds 13.5% apart (cuBLAS at 4096^3 on the H100, each window fine): not repeatable
    far = energy.summarize([a, {**a, "joules_per_launch": 0.00454}], flops)
    assert not far["trusted"] and "13.5% apart, over the 5%" in far["note"]
    untrusted = energy.summarize([a, {**b, "trusted": False, "note": "only 2 counter updates"}], flops)
    assert not untrusted["trusted"] and "only 2 counter updates" in untrusted["note"]


@pytest.mark.parametrize("windows, says", [
    ((), "no NVML monitor"),
    ((energy.unavailable_window("nvidia-ml-py (pynvml) is not installed"),), "pynvml"),
])
def test_no_reading_gives_nulls_and_why(windows, says):
    out = energy.summarize(windows, 1000)
    assert set(out) == FIELDS and not out["trusted"] and says in out["note"]
    assert all(out[k] is None for k in FIELDS - {"trusted", "note"})


def test_case_energy_of_untimed_and_host_cases():
    assert "not timed" in energy.case_energy(None, 1)["note"]
    host = TimingStats((1.0, 1.1), 1, "host")
    assert "host" in energy.case_energy(host, 1)["note"]


def test_monitor_without_nvml_says_why_energy_is_missing(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)
    monitor = clocks.ClockMonitor()
    assert "nvidia-ml-py" in monitor.energy_unavailable


def _timing(joules: float, trusted: bool = True) -> TimingStats:
    window = {"joules_per_launch": joules, "avg_power_w": 700.0, "span_s": 0.4, "trusted": trusted, "note": None}
    return TimingStats((0.007, 0.0071), 200, "cuda-events", energy_windows=(window,))


def test_record_carries_the_energy_field_and_rounds_pool_their_windows():
    problem = GemmProblem(1024, 1024, 1024)
    rounds = [runner.CaseResult("hopper_bf16", problem, "ok", timing=_timing(j), precision="bf16")
              for j in (0.0048, 0.0049)]
    merged = runner.merge_rounds(rounds)
    assert len(merged.timing.energy_windows) == 2
    record = merged.as_dict()
    assert set(record["energy"]) == FIELDS
    assert record["energy"]["joules_per_gemm"] == pytest.approx(0.00485)
    assert record["timing"]["energy_windows"][1]["joules_per_launch"] == 0.0049
    failed = runner.CaseResult("hopper_bf16", problem, "FAILED", precision="bf16").as_dict()
    assert failed["energy"]["trusted"] is False and failed["energy"]["joules_per_gemm"] is None


def _document(records) -> dict:
    return {"schema": "gemm_driver.bench/3", "environment": {"gpu": {"name": "NVIDIA H100 80GB HBM3"}},
            "results": records}


def test_schema_takes_the_energy_field_and_names_a_wrong_one():
    problem = GemmProblem(1024, 1024, 1024)
    record = runner.CaseResult("hopper_bf16", problem, "ok", timing=_timing(0.0048), precision="bf16").as_dict()
    results_schema.check(_document([record]))
    record["energy"]["trusted"] = "yes"
    with pytest.raises(results_schema.SchemaError, match=r"results\[0\]\.energy\.trusted is a string"):
        results_schema.check(_document([record]))


def test_energy_plot_is_drawn_only_with_readings(tmp_path):
    pytest.importorskip("matplotlib")
    recs = []
    for kernel, joules in (("cublas_bf16", 0.0044), ("hopper_bf16", 0.0048)):
        for size in (1024, 2048):
            problem = GemmProblem(size, size, size)
            rec = runner.CaseResult(kernel, problem, "ok", timing=_timing(joules * (size / 1024) ** 3, trusted=size < 2048),
                                    precision="bf16").as_dict()
            recs.append(rec)
    paths = plots.write_plots(_document(recs), tmp_path)
    assert (tmp_path / "energy_bf16.png") in paths and (tmp_path / "energy_bf16.png").stat().st_size > 0
    for rec in recs:
        rec["energy"] = energy.unmeasured("no NVML")
    assert not any(p.name.startswith("energy") for p in plots.write_plots(_document(recs), tmp_path / "none"))
    assert math.isfinite(recs[0]["tflops"])


def test_no_energy_reaches_the_budget_and_the_settings():
    import argparse

    from gemm_driver.arguments import add_bench_options
    from gemm_driver.bench.stats import Budget

    parser = argparse.ArgumentParser()
    add_bench_options(parser)
    assert parser.parse_args(["--no-energy"]).no_energy and not parser.parse_args([]).no_energy
    assert Budget().settings()["energy"] is True and Budget(energy=False).settings()["energy"] is False
