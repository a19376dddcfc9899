"""Plots from a bench JSON document: files written, names as documented, the CLI command.

The document is synthetic (made-up speeds shaped like a real H100 run: every precision,
the whole ladder, odd, rectangular and batched shapes, a FAILED and a skipped case), so
the plot code is exercised on everything a real run can contain, without a GPU.
"""

from __future__ import annotations

import copy
import json
import math

import pytest

from gemm_driver import kernels
from gemm_driver.bench import plot_style, plots, roofline
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


# --- what a reader sees: properties of the drawn figures ---------------------------------
@pytest.fixture
def figures(monkeypatch):
    """The figures the plot functions draw, kept open instead of saved (name -> Figure)."""
    kept = {}

    def keep(plt, fig, path, extra=()):
        kept[path.name] = fig
        return path

    monkeypatch.setattr(plots, "_save", keep)
    yield kept
    plots._pyplot().close("all")


def drawn(figures, tmp_path, doc=None):
    plots.write_plots(doc or synthetic_document(), tmp_path)
    return figures


def with_1000(doc):
    """The synthetic run plus 1000^3 for every FP32 kernel that ran at 1024^3."""
    extra = [dict(c, m=1000, n=1000, k=1000) for c in doc["results"]
             if c["m"] == c["n"] == c["k"] == 1024 and c["dtype"] == "fp32" and c["status"] == "ok"]
    doc["results"] += copy.deepcopy(extra)
    return doc


def test_every_series_has_its_own_marker_and_line_style(tmp_path, figures):
    doc = synthetic_document()  # ptx_naive on top of naive, as on the H100, and listed
    naive = {(c["m"], c["n"], c["k"]): c for c in doc["results"] if c["kernel"] == "naive"}
    results = []  # fifth, where the cycle of four line styles would give it naive's
    for c in doc["results"]:
        results.append(c)
        if c["kernel"] == "blocktile_1d" and (c["m"], c["n"], c["k"]) in naive:
            results.append(dict(naive[c["m"], c["n"], c["k"]], kernel="ptx_naive"))
    doc["results"] = results
    assert plots._kernel_order(results).index("ptx_naive") == 5
    ax = drawn(figures, tmp_path, doc)["throughput_fp32.png"].axes[0]
    lines = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert len(lines) >= 12
    markers = [line.get_marker() for line in lines]
    assert len(set(markers)) == len(markers), "two series share a marker"
    assert len({line.get_linestyle() for line in lines}) >= 4, "line styles vary too"
    naive, ptx = (next(line for line in lines if line.get_label() == name) for name in ("naive", "ptx_naive"))
    assert naive.get_linestyle() != ptx.get_linestyle() and naive.get_color() != ptx.get_color()


def test_every_style_is_its_own_and_coincident_series_differ_in_line_style():
    names = [f"k{i}" for i in range(16)]
    styles = plot_style.series_styles(names)
    assert len({styles[n]["marker"] for n in names}) == 16
    assert len({styles[n]["color"] for n in names}) == 16
    # k0 and k4 share a line style by the cycle; run on the same points, k4 gets another
    assert styles["k0"]["ls"] == styles["k4"]["ls"]
    same = {256: 1.0, 512: 2.0}
    plot_style.separate_overlaps(styles, {"k0": same, "k1": {256: 9.0}, "k4": {256: 1.05, 512: 1.95}})
    assert styles["k4"]["ls"] != styles["k0"]["ls"]


def test_baselines_lie_under_the_kernels(tmp_path, figures):
    ax = drawn(figures, tmp_path)["throughput_fp32.png"].axes[0]
    by_label = {line.get_label(): line for line in ax.get_lines()}
    under = by_label["cublas"].get_zorder()
    assert all(line.get_zorder() > under for label, line in by_label.items() if label != "cublas")


def test_sizes_sit_at_their_own_place_on_log_axes(tmp_path, figures):
    figs = drawn(figures, tmp_path, with_1000(synthetic_document()))
    ax = figs["throughput_fp32.png"].axes[0]
    assert ax.get_xscale() == "log"
    ticks = list(ax.get_xticks())
    assert 1000 in ticks and 1024 in ticks
    labels = {t.get_text().strip() for t in ax.get_xticklabels()}
    assert {"1000", "1024"} <= labels
    # the two labels do not overlap: one of them sits on a second line
    texts = {t.get_text().strip(): t.get_text() for t in ax.get_xticklabels()}
    assert texts["1000"].count("\n") != texts["1024"].count("\n")
    for name, fig in figs.items():
        if name.startswith("throughput_"):
            assert all(a.get_yscale() == "log" for a in fig.axes), name  # every precision alike


def test_titles_are_plain_words(tmp_path, figures):
    for name, fig in drawn(figures, tmp_path).items():
        texts = [fig._suptitle.get_text() if fig._suptitle else ""] + [a.get_title() for a in fig.axes]
        texts += [a.get_xlabel() for a in fig.axes] + [t.get_text() for a in fig.axes if a.get_legend()
                                                      for t in a.get_legend().get_texts()]
        assert not any("kernels." in t or "LADDER" in t for t in texts), (name, texts)


def test_roofline_keeps_bf16_visible_over_fp16(tmp_path, figures):
    ax = drawn(figures, tmp_path)["roofline.png"].axes[0]
    bf16 = [c for c in ax.collections if c.get_gid() == "bf16"]
    fp16 = [c for c in ax.collections if c.get_gid() == "fp16"]
    assert bf16 and fp16
    for c in fp16:  # hollow, so what lies under it (BF16 on the same point) shows through
        assert len(c.get_facecolors()) == 0 or all(fc[3] == 0 for fc in c.get_facecolors())
    assert min(c.get_zorder() for c in bf16) > max(c.get_zorder() for c in fp16)


def test_ladder_labels_do_not_cross_the_100_percent_line(tmp_path, figures):
    doc = synthetic_document()
    for c in doc["results"]:  # rungs just below and just above cuBLAS
        if c["kernel"] in ("warptiled", "autotuned") and c["pct_of_cublas"]:
            c["pct_of_cublas"] = 98.5 if c["kernel"] == "warptiled" else 101.0
    fig = drawn(figures, tmp_path, doc)["ladder.png"]
    ax = fig.axes[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    x100 = ax.transData.transform((100, 0))[0]
    line = next(line for line in ax.get_lines() if "100%" in line.get_label())
    bars = [p for p in ax.patches]
    assert bars and all(p.get_zorder() > line.get_zorder() for p in bars)  # bars hide the line
    labels = [t for t in ax.texts if t.get_text().endswith("%")]
    assert len(labels) > 10
    for t in labels:
        box = t.get_window_extent(renderer)
        value = float(t.get_text().rstrip("%"))
        if box.x0 <= x100 <= box.x1:  # only a label inside a bar longer than 100% may be there
            assert value >= 100 and t.get_ha() == "right", t.get_text()
        if t.get_ha() == "right":  # inside its bar: ends before the bar does
            assert ax.transData.inverted().transform((box.x1, 0))[0] <= value
