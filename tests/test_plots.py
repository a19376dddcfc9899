"""Plots from a bench JSON document: files written, names as documented, the CLI command.

The document is synthetic (made-up speeds shaped like a real H100 run: every precision,
the whole ladder, odd, rectangular and batched shapes, a FAILED and a skipped case), so
the plot code is exercised on everything a real run can contain, without a GPU.
"""

from __future__ import annotations

import json
import math

import pytest

from gemm_driver import kernels
from gemm_driver.bench import plots, roofline
from gemm_driver.cli import main

pytest.importorskip("matplotlib")

SIZES = (256, 512, 1024, 2048, 4096)
OTHER = ((4093, 4091, 4099, 1), (16384, 128, 4096, 1), (1024, 1024, 16384, 1), (256, 256, 256, 64))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def case(kernel, m, n, k, batch=1, dtype="fp32", tflops=None, status="ok", pct=None):
    timing = {"median_ms": 2 * m * n * k * batch / (tflops * 1e9), "clock": "cuda-events",
              "clocks": {"sm_mhz_max": 1980, "sm_mhz_min": 1950}} if tflops else None
    return {"kernel": kernel, "m": m, "n": n, "k": k, "batch": batch, "dtype": dtype, "alpha": 1.0, "beta": 0.0,
            "status": status, "detail": "" if status == "ok" else "synthetic", "tflops": tflops,
            "timing": timing, "pct_of_cublas": pct, "verification": {"ok": status == "ok"}}


def synthetic_document(gpu="NVIDIA H100 80GB HBM3") -> dict:
    ladder = [s.name for s in kernels.LADDER if s.precision == "fp32"]
    results = []
    for m, n, k, batch in [(s, s, s, 1) for s in SIZES] + list(OTHER):
        scale = 1 - math.exp(-(m * n * k) ** (1 / 3) / 900)
        if batch > 1:
            results.append(case("cublas_batched", m, n, k, batch, tflops=30.0, pct=100.0))
            results += [case(name, m, n, k, batch, status="skipped") for name in ["cublas", *ladder]]
        else:
            base = 51.0 * scale
            results.append(case("cublas", m, n, k, tflops=base, pct=100.0))
            for i, name in enumerate(ladder):
                if name == "vectorized" and m == 4093:
                    results.append(case(name, m, n, k, status="FAILED"))
                    continue
                t = base * (0.01 + 0.9 * (i + 1) / len(ladder))
                results.append(case(name, m, n, k, tflops=t, pct=100 * t / base))
        results.append(case("numpy", m, n, k, batch, tflops=1.0))
        results[-1]["timing"]["clock"] = "host"
        for dtype, peak in (("tf32", 390.0), ("bf16", 740.0), ("fp16", 750.0)):
            status = "skipped" if batch > 1 else "ok"
            results.append(case(f"cublas_{dtype}", m, n, k, batch, dtype, None if batch > 1 else peak * scale,
                                status, None if batch > 1 else 100.0))
    return {"schema": "gemm_driver.bench/2", "environment": {"gpu": {"name": gpu}}, "settings": {},
            "results": results}


def assert_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 10_000, path


def test_every_plot_is_written(tmp_path):
    doc = synthetic_document()
    before = json.dumps(doc, sort_keys=True)
    paths = plots.write_plots(doc, tmp_path / "plots")
    names = sorted(p.name for p in paths)
    assert names == ["ladder.png", "roofline.png", "throughput_bf16.png", "throughput_fp16.png",
                     "throughput_fp32.png", "throughput_tf32.png"]
    for path in paths:
        assert_png(path)
    assert json.dumps(doc, sort_keys=True) == before, "plotting must not change the caller's document"


def test_unknown_gpu_still_plots_points(tmp_path):
    path = plots.roofline_plot(plots._pyplot(), synthetic_document("Imaginary GPU 9000"), tmp_path / "r.png")
    assert_png(path)
    assert roofline.device_summary("Imaginary GPU 9000")["known"] is False


def test_precision_only_run_has_no_ladder(tmp_path):
    doc = synthetic_document()
    doc["results"] = [c for c in doc["results"] if c["dtype"] == "bf16"]
    names = sorted(p.name for p in plots.write_plots(doc, tmp_path))
    assert names == ["roofline.png", "throughput_bf16.png"]


def test_old_documents_without_dtype_are_fp32(tmp_path):
    doc = synthetic_document()
    doc["results"] = [c for c in doc["results"] if c["dtype"] == "fp32" and c["batch"] == 1 and c["m"] >= 2048]
    for c in doc["results"]:
        del c["dtype"], c["batch"]
    names = sorted(p.name for p in plots.write_plots(doc, tmp_path))
    assert names == ["ladder.png", "roofline.png", "throughput_fp32.png"]


def test_nothing_to_plot_is_one_clear_error(tmp_path):
    doc = synthetic_document()
    for c in doc["results"]:
        c.update(status="FAILED", tflops=None, timing=None)
    with pytest.raises(plots.PlotError, match="nothing to plot"):
        plots.write_plots(doc, tmp_path)
    with pytest.raises(plots.PlotError, match="results"):
        plots.write_plots({"schema": "x"}, tmp_path)


def test_missing_matplotlib_is_named(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(plots.PlotError, match="pip install matplotlib"):
        plots._pyplot()


def test_plot_command_redraws_a_saved_run(tmp_path, capsys):
    doc = synthetic_document()
    doc["results"] = [c for c in doc["results"] if c["kernel"] in ("cublas", "naive", "cublas_bf16")]
    run = tmp_path / "run.json"
    run.write_text(json.dumps(doc))
    assert main(["plot", str(run), str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "ladder.png" in out and "roofline.png" in out and "throughput_bf16.png" in out
    assert_png(tmp_path / "out" / "throughput_fp32.png")


@pytest.mark.parametrize("content, fragment", [
    (None, "no such file"), ("{not json", "not JSON"), ('{"schema": "other"}', "schema"),
])
def test_plot_command_bad_input_exits_2(tmp_path, capsys, content, fragment):
    run = tmp_path / "run.json"
    if content is not None:
        run.write_text(content)
    assert main(["plot", str(run), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gemm-driver plot: error: ") and fragment in err[0]
