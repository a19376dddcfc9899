"""The parts of bench that need no GPU: statistics, host timing, the NumPy case, reports."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from rich.console import Console

from gemm_driver.bench import report, runner
from gemm_driver.bench.environment import collect
from gemm_driver.bench.timing import Budget, TimingStats, measure_host
from gemm_driver.cuda.driver import gpu_available
from gemm_driver.operands import random_operands
from gemm_driver.problem import GemmProblem
from gemm_driver.verify import reference


def stats(*samples, launches=1):
    return TimingStats(tuple(samples), launches, "cuda-events")


def test_median_min_and_quantiles():
    s = stats(4.0, 1.0, 3.0, 2.0, 100.0)
    assert s.median_ms == 3.0 and s.min_ms == 1.0
    assert s.quantile_ms(0.0) == 1.0 and s.quantile_ms(1.0) == 100.0 and s.quantile_ms(0.5) == 3.0
    assert s.quantile_ms(0.1) == pytest.approx(1.4)  # linear between the two lowest samples
    assert s.quantile_ms(0.9) == pytest.approx(4.0 + 0.6 * 96.0)
    d = s.as_dict()
    assert d["median_ms"] == 3.0 and d["samples"] == 5 and d["clock"] == "cuda-events"
    assert d["p10_ms"] <= d["median_ms"] <= d["p90_ms"]
    assert stats(2.5).quantile_ms(0.9) == 2.5


def test_measure_host_samples_by_time():
    calls = []
    s = measure_host(lambda: calls.append(1), Budget(seconds=0.02))
    assert s.clock == "host" and s.launches_per_sample == 1
    assert 3 <= len(s.samples_ms) <= Budget().max_samples
    assert len(calls) == len(s.samples_ms) + 1  # one warm-up call stays out of the samples
    assert all(x >= 0 for x in s.samples_ms)


def test_measure_host_caps_samples():
    s = measure_host(lambda: None, Budget(seconds=10.0, max_samples=7))
    assert len(s.samples_ms) == 7


def test_default_kernels_order():
    names = runner.default_kernels()
    assert names[0] == "cublas" and names[-1] == "numpy"
    assert {"naive", "coalesced", "smem_tiled", "ptx_naive"} <= set(names)


def numpy_case(m=64, n=48, k=32, beta=0.0):
    p = GemmProblem(m, n, k, 1.0, beta)
    a, b, c = random_operands(p, np.random.default_rng(0))
    return runner._run_numpy(p, a, b, c, reference(p, a, b, c), Budget(seconds=0.01))


def test_numpy_case_is_verified_then_timed():
    result = numpy_case(beta=0.5)
    assert result.status == "ok", result.detail
    assert result.verification["ok"] is True
    assert result.timing is not None and result.timing.clock == "host"
    assert result.tflops == pytest.approx(2 * 64 * 48 * 32 / (result.timing.median_ms * 1e-3) / 1e12)
    d = result.as_dict()
    assert (d["m"], d["n"], d["k"], d["beta"]) == (64, 48, 32, 0.5)
    assert d["timing"]["samples"] >= 3 and d["pct_of_cublas"] is None


def test_wrong_result_is_failed_and_never_timed(monkeypatch):
    monkeypatch.setattr(runner, "host_gemm", lambda p, a, b, c: np.zeros((p.m, p.n), np.float32))
    result = numpy_case()
    assert result.status == "FAILED"
    assert result.timing is None and result.tflops is None
    assert "elements wrong" in result.detail


def test_baseline_ratio():
    p = GemmProblem(8, 8, 8)
    base = runner.CaseResult("cublas", p, "ok", timing=stats(2.0))
    slow = runner.CaseResult("naive", p, "ok", timing=stats(8.0))
    failed = runner.CaseResult("coalesced", p, "FAILED", "wrong")
    runner._fill_baseline_ratio([slow, base, failed])
    assert base.pct_of_baseline == 100.0 and slow.pct_of_baseline == 25.0 and failed.pct_of_baseline is None
    lonely = runner.CaseResult("naive", p, "ok", timing=stats(8.0))
    runner._fill_baseline_ratio([lonely])  # no baseline timed: no ratio invented
    assert lonely.pct_of_baseline is None


def test_report_table_and_json(tmp_path):
    ok = numpy_case()
    failed = runner.CaseResult("naive", GemmProblem(64, 48, 32), "FAILED", "3 of 3072 elements wrong")
    skipped = runner.CaseResult("smem_tiled", GemmProblem(7, 7, 7), "skipped", "needs sm_90")
    out = io.StringIO()
    report.print_table([ok, failed, skipped], Console(file=out, width=200, color_system=None), "title here")
    text = out.getvalue()
    assert "title here" in text and "64x48x32" in text and "7x7x7" in text
    assert "FAILED: 3 of 3072 elements wrong" in text and "skipped: needs sm_90" in text
    assert f"{ok.timing.median_ms:.4f}" in text

    env = {"gpu": {"unavailable": "test"}}
    document = report.to_json([ok, failed], env, {"seed": 1})
    path = tmp_path / "deep" / "run.json"
    report.write_json(path, document)
    loaded = json.loads(path.read_text())
    assert loaded["schema"] == "gemm_driver.bench/1"
    assert loaded["settings"] == {"seed": 1} and loaded["environment"] == env
    assert [r["status"] for r in loaded["results"]] == ["ok", "FAILED"]
    assert loaded["results"][1]["timing"] is None and loaded["results"][1]["tflops"] is None


def test_environment_record_without_gpu_is_complete():
    env = collect()
    for key in ("timestamp_utc", "python", "gpu", "driver_cuda_version", "nvrtc_version", "nvjitlink_version",
                "cublas_version", "cache_dir", "numpy"):
        assert key in env
    json.dumps(env)  # JSON-ready
    assert env["nvrtc_version"].startswith("12.") or env["nvrtc_version"].startswith("13.")
    if not gpu_available():
        assert "unavailable" in env["gpu"] and "unavailable" in env["driver_cuda_version"]
