"""The parts of bench that need no GPU: host timing, the NumPy case, clocks logic, reports, writers, CLI."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import sys
import types

import numpy as np
import pytest
from rich.console import Console

from gemm_driver import cli, kernels, precision
from gemm_driver.bench import clocks, command, defaults, report, runner, writers
from gemm_driver.case import PreparedCase, run_case
from gemm_driver.bench.environment import collect
from gemm_driver.bench.timing import Budget, TimingStats, measure_host
from gemm_driver.cli import main
from gemm_driver.cuda.driver import gpu_available
from gemm_driver.problem import GemmProblem


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
    assert s.converged is (s.stop_reason == "noise")
    assert all(x >= 0 for x in s.samples_ms)


def test_measure_host_caps_samples():
    s = measure_host(lambda: None, Budget(seconds=10.0, max_samples=7))
    assert len(s.samples_ms) == 7


def test_ladder_kernels_order():
    names = defaults.ladder_kernels()
    assert names[0] == "cublas" and names[-1] == "numpy"
    assert {"naive", "coalesced", "smem_tiled", "ptx_naive"} <= set(names)


@pytest.mark.parametrize("arch,best", [("sm_90", "hopper"), ("sm_89", "mma_sync_tuned"), ("sm_80", "mma_sync_tuned"),
                                       ("sm_100", "mma_sync_tuned")])
def test_quick_run_is_each_precisions_best_kernel_for_the_arch_beside_its_baselines(arch, best):
    names = command.select_kernels([], None, arch=arch)
    expected = ["cublas", "autotuned"]
    for prec in ("tf32", "bf16", "fp16"):
        expected += [f"cublas_{prec}", f"cublaslt_{prec}", f"{best}_{prec}"]
    assert names == expected
    assert command.select_kernels([], ["bf16"], arch=arch) == [n for n in expected if kernels.precision_of(n) == "bf16"]
    assert command.select_shapes([], [], None) == [(1024, 1024, 1024, 1), (4096, 4096, 4096, 1), (4093, 4091, 4099, 1)]


def bench_selection(*argv):
    """What cmd_bench hands the sweep for these bench arguments: (kernels, shapes)."""
    args = cli.build_parser().parse_args(["bench", *argv])
    flat = lambda values: [x for value in values or () for x in value]  # noqa: E731
    ladder = command.wants_ladder(flat(args.kernels), args.ladder)
    return (command.select_kernels(flat(args.kernels), args.dtype, ladder=ladder, arch="sm_90"),
            command.select_shapes(flat(args.sizes), flat(args.shapes), args.batch, ladder=ladder))


@pytest.mark.parametrize("flag", [["--ladder"], ["--kernels", "all"]])
def test_ladder_flag_and_kernels_all_run_every_kernel_on_the_ladder_shapes(flag):
    quick_kernels, quick_shapes = bench_selection()
    names, shapes = bench_selection(*flag)
    assert names == defaults.ladder_kernels() and shapes == defaults.ladder_shapes()
    assert len(names) > 3 * len(quick_kernels) and set(quick_kernels) <= set(names)
    assert len(shapes) > len(quick_shapes) and any(b > 1 for *_, b in shapes)
    assert bench_selection(*flag, "--dtype", "fp16")[0] == defaults.ladder_kernels(["fp16"])
    assert bench_selection(*flag, "--sizes", "512")[1] == [(512, 512, 512, 1)]  # given shapes win


@pytest.mark.parametrize("argv,message", [
    (["--ladder", "--kernels", "naive"], "--ladder runs every kernel; give --ladder or --kernels naive, not both"),
    (["--kernels", "all,naive"], "--kernels all names every kernel; give it alone, not with naive"),
    (["--kernels", "alll"], "unknown kernel 'alll'"),
])
def test_ladder_selection_refuses_a_mix_in_one_line(capsys, argv, message):
    assert main(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


HOST_TIMER = types.SimpleNamespace(measure_host=measure_host)  # run_case times host providers with this


def numpy_case(m=64, n=48, k=32, beta=0.0):
    """The NumPy baseline through the one verify-then-time path (no device operands are made)."""
    p = GemmProblem(m, n, k, 1.0, beta)
    with PreparedCase.random(p, "fp32", 0) as case:
        outcome = run_case(None, "numpy", case, timer=HOST_TIMER, budget=Budget(seconds=0.01))
        assert case._device is None  # a host provider never touches the GPU
    return runner.CaseResult.from_outcome("numpy", p, outcome, "fp32", "hot")


def test_numpy_case_is_verified_then_timed():
    result = numpy_case(beta=0.5)
    assert result.status == "ok", result.detail
    assert result.verification["ok"] is True
    assert result.timing is not None and result.timing.clock == "host"
    assert result.tflops == pytest.approx(2 * 64 * 48 * 32 / (result.timing.median_ms * 1e-3) / 1e12)
    d = result.as_dict()
    assert (d["m"], d["n"], d["k"], d["beta"]) == (64, 48, 32, 0.5)
    assert d["timing"]["samples"] >= 3 and d["pct_of_cublas"] is None
    assert d["timing"]["samples_ms"] == list(result.timing.samples_ms) and d["timing"]["clock"] == "host"
    assert d["timing"]["stop_reason"] in ("noise", "max-time", "max-samples")


def test_wrong_result_is_failed_and_never_timed(monkeypatch):
    wrong = dataclasses.replace(kernels.get("numpy"), host_gemm=lambda p, a, b, c: np.zeros((p.m, p.n), np.float32))
    monkeypatch.setitem(kernels.ALL, "numpy", wrong)
    result = numpy_case()
    assert result.status == "FAILED"
    assert result.timing is None and result.tflops is None
    assert "elements wrong" in result.detail


def test_baseline_ratio():
    p = GemmProblem(8, 8, 8)
    base = runner.CaseResult("cublas", p, "ok", timing=stats(2.0))
    slow = runner.CaseResult("naive", p, "ok", timing=stats(8.0))
    failed = runner.CaseResult("coalesced", p, "FAILED", "wrong")
    runner.fill_baseline_ratio([slow, base, failed], ("cublas",))
    assert base.pct_of_baseline == 100.0 and slow.pct_of_baseline == 25.0 and failed.pct_of_baseline is None
    assert slow.baseline == "cublas"
    lonely = runner.CaseResult("naive", p, "ok", timing=stats(8.0))
    runner.fill_baseline_ratio([lonely], ("cublas",))  # no baseline timed: no ratio invented
    assert lonely.pct_of_baseline is None


def test_baseline_ratio_is_against_the_faster_baseline():
    p = GemmProblem(8, 8, 8)
    cublas = runner.CaseResult("cublas_bf16", p, "ok", timing=stats(2.0))
    lt = runner.CaseResult("cublaslt_bf16", p, "ok", timing=stats(1.6))
    ours = runner.CaseResult("mma_sync_bf16", p, "ok", timing=stats(2.0))
    runner.fill_baseline_ratio([cublas, lt, ours], precision.baselines("bf16"))
    assert ours.pct_of_baseline == 80.0 and ours.baseline == "cublaslt_bf16"
    assert cublas.pct_of_baseline == 80.0 and lt.pct_of_baseline == 100.0
    assert precision.baselines("fp32") == ("cublas",) and precision.baselines("bf16", batch=4) == ("cublas_bf16",)


def test_environment_record_without_gpu_is_complete():
    env = collect()
    for key in ("timestamp_utc", "python", "gpu", "driver_cuda_version", "nvrtc_version", "nvjitlink_version",
                "cublas_version", "cache_dir", "numpy"):
        assert key in env
    json.dumps(env)  # JSON-ready
    assert env["nvrtc_version"].startswith("12.") or env["nvrtc_version"].startswith("13.")
    if not gpu_available():
        assert "unavailable" in env["gpu"] and "unavailable" in env["driver_cuda_version"]


# -- clocks ------------------------------------------------------------------------------

def read(sm=1980, mem=2619, temp=50, power=300.0, reasons=0):
    return clocks.ClockRead(sm, mem, temp, power, reasons)


def test_clocks_at_full_speed_are_not_flagged():
    record = clocks.assess([read(), read(sm=1965, reasons=0x1)], reference_sm_mhz=1980)
    assert record["sagged"] is False and record["why"] == []
    assert (record["sm_mhz_min"], record["sm_mhz_max"], record["reads"]) == (1965, 1980, 2)
    assert record["reasons"] == ["gpu_idle"]  # informational, not a throttle
    json.dumps(record)


def test_sagging_clock_and_throttle_reasons_are_flagged():
    low = clocks.assess([read(), read(sm=1700)], reference_sm_mhz=1980)
    assert low["sagged"] and "SM clock 1700 MHz < 90% of 1980 MHz" in low["why"][0]
    capped = clocks.assess([read(reasons=0x4 | 0x20)], reference_sm_mhz=1980)
    assert capped["sagged"] and capped["why"] == ["throttle reason sw_power_cap", "throttle reason sw_thermal_slowdown"]
    assert clocks.assess([read(sm=1800)], reference_sm_mhz=1980)["sagged"] is False  # 91%: within the margin
    assert clocks.assess([], 1980)["sagged"] is None


def test_clock_monitor_without_nvml_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    monitor = clocks.ClockMonitor()
    assert not monitor.available and "nvidia-ml-py" in monitor.unavailable
    monitor.start_case()
    monitor.sample()
    assert monitor.end_case() == {"available": False, "unavailable": monitor.unavailable}
    assert monitor.snapshot()["available"] is False
    monitor.close()


@pytest.mark.skipif(gpu_available(), reason="checks the behaviour without a driver")
def test_clock_monitor_without_driver_says_why():
    with clocks.ClockMonitor() as monitor:
        assert not monitor.available and monitor.unavailable
        assert monitor.end_case()["available"] is False


# -- table, ladder, progress ----------------------------------------------------------------

def timed(kernel, ms, shape=(64, 64, 64), **extra):
    result = runner.CaseResult(kernel, GemmProblem(*shape), "ok", timing=stats(*([ms] * 8)),
                               verification={"ok": True, "max_error_ratio": 0.01})
    rec = result.as_dict()
    rec.update(extra)
    return rec


def test_ladder_speedup_is_against_the_previous_rung_that_ran():
    ladder = ["naive", "coalesced", "smem_tiled"]
    recs = [timed("cublas", 1.0), timed("naive", 40.0), timed("smem_tiled", 4.0),
            {**timed("coalesced", 8.0), "status": "FAILED", "timing": None},
            timed("naive", 10.0, shape=(32, 32, 32)), timed("coalesced", 5.0, shape=(32, 32, 32)),
            timed("coalesced", 4.0, dtype="bf16")]
    report.add_ladder(recs, ladder)
    by = [(r["kernel"], r["previous_rung"], r["speedup_vs_previous"]) for r in recs]
    assert by[0] == ("cublas", None, None)  # not a rung
    assert by[1] == ("naive", None, None)  # first rung
    assert by[2] == ("smem_tiled", "naive", 10.0)  # coalesced failed: compared with naive
    assert by[3] == ("coalesced", None, None)  # FAILED: no speed, no ratio
    assert by[5] == ("coalesced", "naive", 2.0)  # same shape only
    assert by[6] == ("coalesced", None, None)  # another precision: nothing before it


def test_table_shows_ladder_noise_flags_and_optional_columns():
    sagged = {"available": True, "sagged": True, "why": ["SM clock 1500 MHz < 90% of 1980 MHz"]}
    noisy = runner.CaseResult("smem_tiled", GemmProblem(64, 64, 64), "ok", timing=TimingStats(
        (1.0, 2.0, 3.0), 4, "cuda-events", converged=False, stop_reason="max-time", clocks=sagged))
    recs = [timed("naive", 4.0), noisy.as_dict(),
            runner.CaseResult("coalesced", GemmProblem(64, 48, 32), "FAILED", "3 of 3072 elements wrong").as_dict(),
            runner.CaseResult("smem_tiled", GemmProblem(7, 7, 7), "skipped", "needs sm_90").as_dict()]
    report.add_ladder(recs, ["naive", "coalesced", "smem_tiled"])
    for rec in recs:
        rec.pop("dtype", None)  # a record without the field: no column for it
    out = io.StringIO()
    report.print_table(recs, Console(file=out, width=250, color_system=None), "title here")
    text = out.getvalue()
    assert "title here" in text and "64x48x32" in text and "7x7x7" in text
    assert "FAILED: 3 of 3072 elements wrong" in text and "skipped: needs sm_90" in text
    assert "x prev" in text and "2.00" in text  # naive 4 ms -> smem_tiled 2 ms
    assert "not converged (max-time, noise -)" in text and "clocks sagged: SM clock 1500 MHz" in text
    assert "3x4" in text  # samples x launches per sample
    assert "dtype" not in text and "% peak" not in text  # only when some case has them
    out = io.StringIO()
    report.print_table([timed("naive", 4.0, dtype="bf16", pct_of_peak=12.5)], Console(file=out, width=250))
    assert "dtype" in out.getvalue() and "bf16" in out.getvalue() and "12.5" in out.getvalue()


# -- rounds (--rounds): alternating order, pooled samples ------------------------------------
def test_rounds_alternate_the_order_of_each_shapes_kernels():
    steps = runner.sweep_steps(["cublas", "naive", "coalesced"], [(64, 64, 64), (32, 32, 32)])
    tasks = runner.sweep_tasks(steps, seed=1, budget=Budget(), mode="hot", rounds=3)
    assert runner.case_count(steps, 3) == len(tasks) == 18
    first = [t.kernel for t in tasks if t.step is steps[0]]
    assert first == ["cublas", "naive", "coalesced",  # round 0: the plan's order
                     "coalesced", "naive", "cublas",  # round 1: reversed
                     "cublas", "naive", "coalesced"]
    assert [t.kernel for t in runner.sweep_tasks(steps, seed=1, budget=Budget(), mode="hot")] == \
        ["cublas", "naive", "coalesced"] * 2  # one round: the plan's order, as before


def test_rounds_of_a_kernel_pool_their_samples_and_keep_each_median():
    cool = {"available": True, "reads": 2, "sm_mhz_min": 1900, "sm_mhz_max": 1980, "mem_mhz_min": 2619,
            "mem_mhz_max": 2619, "temperature_c_max": 50, "power_w_max": 500.0, "reasons": [],
            "reference_sm_mhz": 1980, "sagged": False, "why": []}
    hot = {**cool, "reads": 3, "sm_mhz_min": 1400, "power_w_max": 700.0, "reasons": ["sw_power_cap"],
           "sagged": True, "why": ["SM clock 1400 MHz < 90% of 1980 MHz", "throttle reason sw_power_cap"]}
    problem = GemmProblem(64, 64, 64)
    rounds = [runner.CaseResult("naive", problem, "ok", timing=TimingStats(
                  (1.0, 1.1, 1.2), 4, "cuda-events", converged=True, stop_reason="noise", elapsed_s=1.0, clocks=cool)),
              runner.CaseResult("naive", problem, "ok", timing=TimingStats(
                  (2.0, 2.1), 2, "cuda-events", converged=False, stop_reason="max-time", elapsed_s=2.0, clocks=hot))]
    merged = runner.merge_rounds(rounds)
    assert merged.timing.samples_ms == (1.0, 1.1, 1.2, 2.0, 2.1) and merged.timing.median_ms == 1.2
    assert merged.round_medians_ms == (1.1, 2.05) and merged.timing.converged is False
    assert merged.timing.stop_reason == "noise, max-time" and merged.timing.elapsed_s == 3.0
    c = merged.timing.clocks
    assert (c["reads"], c["sm_mhz_min"], c["sm_mhz_max"], c["power_w_max"], c["sagged"]) == (5, 1400, 1980, 700.0, True)
    assert c["reasons"] == ["sw_power_cap"] and c["why"] == hot["why"]
    rec = merged.as_dict()
    assert rec["round_medians_ms"] == [1.1, 2.05] and rec["timing"]["samples"] == 5
    assert "rounds differ by 86.4%" in report.notes(rec)
    failed = runner.CaseResult("naive", problem, "FAILED", "2 of 4096 elements wrong")
    assert runner.merge_rounds([rounds[0], failed]) is failed  # a kernel is as good as its worst round
    assert runner.merge_rounds(rounds[:1]) is rounds[0] and "round_medians_ms" not in rounds[0].as_dict()
    assert clocks.merge([None, None]) is None and clocks.merge([None, cool]) == cool
    warm = {**hot, "sm_mhz_min": 1500, "why": ["SM clock 1500 MHz < 90% of 1980 MHz", "throttle reason sw_power_cap"]}
    assert clocks.merge([warm, hot])["why"] == hot["why"]  # one verdict for the rounds together


def test_a_case_says_where_the_worker_s_time_went_and_rounds_add_up(monkeypatch):
    import itertools

    from gemm_driver.bench import phases

    ticks = itertools.count()
    monkeypatch.setattr(phases.time, "perf_counter", lambda: float(next(ticks)))  # each lap: 1 s
    monkeypatch.setattr(runner, "ClockMonitor", lambda bus: types.SimpleNamespace(close=lambda: None))
    monkeypatch.setattr(runner, "GpuTimer", lambda *a, **k: types.SimpleNamespace(close=lambda: None))
    case = types.SimpleNamespace(launcher=lambda session, name: None)
    monkeypatch.setattr(runner, "kept", lambda state, key, make: case)
    timing = TimingStats((1.0, 1.1), 2, "cuda-events")
    monkeypatch.setattr(runner, "run_case", lambda *a, **k: types.SimpleNamespace(
        status="ok", detail="", verification=None, timing=timing, tunables={}, launch={}, verify_s=0.25))
    step = runner.sweep_steps(["naive"], [(64, 64, 64)])[0]
    task = runner.CaseTask(step, "naive", 1, Budget(), "hot")
    session = types.SimpleNamespace(device=types.SimpleNamespace(pci_bus_id=lambda: "0", l2_bytes=0),
                                    stream=None, arch="sm_90")
    result = runner.run_case_task(session, {}, task, lambda: None)
    assert result.phases_s == {"case": 1.0, "build": 1.0, "time": 0.75, "verify": 0.25}
    assert result.as_dict()["phases_s"] == result.phases_s
    merged = runner.merge_rounds([result, dataclasses.replace(result, phases_s={"build": 0.5, "time": 1.0})])
    assert merged.phases_s == {"case": 1.0, "build": 1.5, "time": 1.75, "verify": 0.25}
    writers.check_document({"results": [merged.as_dict()]})  # the schema takes the phases
    with pytest.raises(writers.SchemaError, match="phases_s.build"):
        writers.check_document({"results": [{**merged.as_dict(), "phases_s": {"build": -1.0}}]})


def test_progress_off_a_terminal_prints_one_line_per_case():
    out = io.StringIO()
    console = Console(file=out, width=120)
    assert not console.is_terminal
    with report.SweepProgress(console, 3) as progress:
        progress.advance(runner.CaseResult("naive", GemmProblem(8, 8, 8), "ok", timing=stats(1e-3)))
        progress.advance(runner.CaseResult("coalesced", GemmProblem(8, 8, 8), "FAILED", "wrong"))
        progress.advance(runner.CaseResult("hopper_fp8", GemmProblem(8, 8, 32, trans_b=True, out_dtype="bf16",
                                                                     scaling="row", fp8_types="e5m2_e4m3"), "skipped"))
    lines = out.getvalue().splitlines()
    assert lines == ["[1/3] naive 8x8x8: 0.001 TFLOP/s", "[2/3] coalesced 8x8x8: FAILED",
                     "[3/3] hopper_fp8 8x8x32 nt bf16 none row e5m2_e4m3: skipped"]
    assert "\x1b" not in out.getvalue()


# -- JSON and CSV --------------------------------------------------------------------------

def test_json_round_trip(tmp_path):
    ok = numpy_case()
    failed = runner.CaseResult("naive", GemmProblem(64, 48, 32), "FAILED", "3 of 3072 elements wrong")
    recs = report.records([ok, failed])
    env = {"gpu": {"unavailable": "test"}, "clocks": {"available": False, "unavailable": "test"}}
    doc = writers.document(recs, env, {"seed": 1, "mode": "hot"}, argv=["gemm-driver", "bench", "--sizes", "64"])
    path = tmp_path / "deep" / "run.json"
    writers.write_json(path, doc)
    loaded = writers.load(path)
    assert loaded == json.loads(json.dumps(doc))
    assert loaded["schema"] == "gemm_driver.bench/3"
    assert loaded["command"]["argv"] == ["gemm-driver", "bench", "--sizes", "64"]
    assert loaded["command"]["line"] == "gemm-driver bench --sizes 64" and loaded["command"]["executable"]
    assert writers.command_argv(["/x/gemm_driver/__main__.py", "bench", "--shapes", "a b"])[:4] == \
        ["python", "-m", "gemm_driver", "bench"]
    assert loaded["settings"]["mode"] == "hot" and loaded["environment"] == env
    first, second = loaded["results"]
    assert first["timing"]["samples_ms"] == list(ok.timing.samples_ms)
    assert first["timing"]["median_ms"] == ok.timing.median_ms and first["mode"] == "hot"
    for key in ("min_ms", "p10_ms", "p90_ms", "ci_low_ms", "ci_high_ms", "noise", "converged", "stop_reason"):
        assert key in first["timing"]
    assert second["status"] == "FAILED" and second["timing"] is None and second["tflops"] is None
    assert first["launch"] == {"kernel": "numpy", "tunables": {}, "note": "", "algorithm": {}}  # what ran (bench/3)


def test_older_files_load_with_their_precision_spellings_mapped(tmp_path):
    """bench/1 and /2 files still load; a precision spelled the registry's old way
    ("float32", "bfloat16", "float16") reads as the one spelling, so compare and plot match
    cases across schemas; an unknown precision is refused in one line."""
    rec = {"kernel": "naive", "m": 8, "n": 8, "k": 8, "status": "ok", "dtype": "float32"}
    for schema in ("gemm_driver.bench/1", "gemm_driver.bench/2"):
        path = tmp_path / f"{schema.rsplit('/', 1)[1]}.json"
        path.write_text(json.dumps({"schema": schema, "settings": {"dtypes": ["float32", "bfloat16", "float16"]},
                                    "results": [rec, {**rec, "dtype": "bfloat16"}, {**rec, "dtype": "fp16"}]}))
        loaded = writers.load(path)
        assert [r["dtype"] for r in loaded["results"]] == ["fp32", "bf16", "fp16"]
        assert loaded["settings"]["dtypes"] == ["fp32", "bf16", "fp16"]
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"schema": "gemm_driver.bench/2", "results": [{**rec, "dtype": "fp64"}]}))
    with pytest.raises(writers.BenchFileError, match="unknown precision 'fp64'"):
        writers.load(path)


@pytest.mark.parametrize("text, message", [
    ("{", "not JSON"),
    ('{"schema": "gemm_driver.tuned/1"}', "is not a bench result"),
    ('[1, 2]', "is not a bench result"),
    ('{"schema": "gemm_driver.bench/2", "results": {}}', "'results' must be a list"),
    ('{"schema": "gemm_driver.bench/2", "results": [{"kernel": "naive", "m": 1}]}', r"results\[0\] lacks n, k, status"),
])
def test_load_rejects_bad_files_in_one_line(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(writers.BenchFileError, match=message) as info:
        writers.load(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(writers.BenchFileError, match="no such file"):
        writers.load(tmp_path / "missing.json")


def test_csv_has_one_flat_row_per_case(tmp_path):
    recs = [timed("naive", 4.0), timed("smem_tiled", 2.0, pct_of_peak=3.5, dtype="tf32"),
            runner.CaseResult("coalesced", GemmProblem(64, 48, 32), "FAILED", "wrong, badly").as_dict()]
    recs[0]["tunables"] = {"TILE": 16, "PAD": 1}
    report.add_ladder(recs, ["naive", "coalesced", "smem_tiled"])
    path = tmp_path / "out.csv"
    writers.write_csv(path, recs)
    with path.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3
    header = list(rows[0])
    assert header[:len(writers.CSV_COLUMNS)] == list(writers.CSV_COLUMNS) and "pct_of_peak" in header
    naive, tiled, failed = rows
    assert naive["tunables"] == "PAD=1;TILE=16" and naive["median_ms"] == "4.0" and naive["dtype"] == "fp32"
    assert tiled["dtype"] == "tf32" and tiled["pct_of_peak"] == "3.5" and naive["pct_of_peak"] == ""
    assert failed["status"] == "FAILED" and failed["median_ms"] == "" and failed["detail"] == "wrong, badly"
    assert all(not any(isinstance(v, str) and v.startswith("{") for v in row.values()) for row in rows)


# -- CLI flags -------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, fragments", [
    (["bench", "--mode", "warm"], ["--mode", "invalid choice: 'warm'", "'hot', 'cold'"]),
    (["bench", "--noise", "0"], ["--noise takes a fraction or percentage between 0 and 1", "'0'"]),
    (["bench", "--noise", "5"], ["--noise takes", "'5'"]),
    (["bench", "--noise", "abc%"], ["--noise takes", "'abc%'"]),
    (["bench", "--max-time", "-1"], ["--max-time takes a positive number of seconds", "'-1'"]),
    (["bench", "--max-time", "nan"], ["--max-time takes", "'nan'"]),
    (["bench", "--warmup", "0"], ["--warmup takes a positive number of seconds, at most 600", "'0'"]),
    (["bench", "--warmup", "601"], ["--warmup takes", "'601'"]),
    (["bench", "--rounds", "0"], ["--rounds takes a whole number from 1 to 100", "'0'"]),
    (["bench", "--rounds", "1.5"], ["--rounds takes", "'1.5'"]),
    (["bench", "--json", "."], ["--json takes a file path", "is a directory"]),
    (["bench", "--csv", "."], ["--csv takes a file path"]),
    (["compare", "a.json", "b.json", "--threshold", "0"], ["--threshold takes a fraction or percentage"]),
    (["compare", "/nonexistent/a.json", "b.json"], ["/nonexistent/a.json: no such file"]),
])
def test_bad_bench_and_compare_flags_exit_2_with_one_line(capsys, argv, fragments):
    code = main(argv)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith(f"gemm-driver {argv[0]}: error: ")
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def test_noise_and_budget_parsing():
    args = cli.build_parser().parse_args(["bench", "--noise", "0.5%", "--max-time", "2.5"])
    assert args.noise == pytest.approx(0.005) and args.max_time == 2.5
    defaults = cli.build_parser().parse_args(["bench"])
    assert defaults.noise == 0.005 and defaults.max_time == 1.0 and defaults.mode == "hot"
    assert defaults.warmup == 0.03 and defaults.rounds == 1
    assert cli.build_parser().parse_args(["bench", "--rounds", "2"]).rounds == 2
    args.warmup = cli.build_parser().parse_args(["bench", "--warmup", "2"]).warmup
    budget = Budget(seconds=args.max_time, noise=args.noise, warmup_seconds=args.warmup)
    assert budget.settings() == {"noise_target": pytest.approx(0.005), "max_time_s": 2.5, "min_samples": 10,
                                 "max_samples": 1000, "warmup_s": 2.0, "batch_ms": 2.0, "energy": True}
    # the watchdog's floor: a case may run silent through its warm-up (host-bound: 4x) and sampling
    assert budget.wall_limit_s == pytest.approx(4 * 2.0 + 2.5)


def test_pci_bus_ids_compare_as_numbers():
    assert clocks._pci_tuple("0000:1B:00.0") == clocks._pci_tuple(b"00000000:1b:00.0") == (0, 27, 0, 0)


def test_a_run_records_where_its_wall_time_went(monkeypatch):
    """The sweep's plumbing on the CPU: a stand-in runner whose every task fails; the document
    still gets every case (FAILED, with the reason) and the wall time of each phase."""
    from gemm_driver.bench.isolation import TaskFailure

    class NoGpu:
        last_word, workers_started = None, 1

        def run(self, tasks):
            for index, _ in enumerate(tasks):
                yield index, TaskFailure("no GPU here (stand-in)")

    monkeypatch.setattr(command, "_sweep_runner", lambda request, watchdog_s: NoGpu())
    monkeypatch.setattr(command, "collect", lambda: {"gpu": {"name": "stand-in"}})
    request = command.BenchRequest(["cublas", "autotuned"], [(64, 64, 64, 1)], seed=1)
    run = command.run(request, request.steps())
    assert [r["status"] for r in run.records] == ["FAILED", "FAILED"]
    assert all("no GPU here" in r["detail"] for r in run.records)
    phases = run.document["environment"]["phases_s"]
    assert set(phases) == {"prebuild", "prebuilt_configurations", "sweep"}
    assert phases["prebuild"] >= 0 and phases["sweep"] >= 0 and phases["prebuilt_configurations"] == 0


# -- FP8 formats (--fp8-types) ------------------------------------------------------------------
def test_fp8_steps_run_each_format_pair_for_the_kernels_that_declare_it():
    steps = runner.sweep_steps(["cublaslt_fp8", "cublas_bf16"], [(64, 64, 64)],
                               fp8_types=("e4m3", "e5m2"))
    fp8_steps = [s for s in steps if s.precision == "fp8"]
    assert [s.problem.fp8_types for s in fp8_steps] == ["e4m3", "e5m2"]
    assert fp8_steps[0].kernels == ["cublaslt_fp8"] and fp8_steps[1].kernels == []
    assert "does not take fp8_types 'e5m2'" in dict(fp8_steps[1].not_run)["cublaslt_fp8"]
    assert [s.problem.fp8_types for s in steps if s.precision == "bf16"] == ["e4m3"]  # unread outside FP8
    record = runner.CaseResult("cublaslt_fp8", fp8_steps[1].problem, "skipped", precision="fp8").as_dict()
    assert record["fp8_types"] == "e5m2" and writers.record_variant_label(record) == "nt fp32 none tensor e5m2"
    assert "fp8_types" not in runner.CaseResult("cublaslt_fp8", fp8_steps[0].problem, "ok", precision="fp8").as_dict()
