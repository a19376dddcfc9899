"""PNG plots of a bench run, drawn from its JSON document (a dict), never from live
objects: ``python -m gemm_driver plot RUN.json DIR`` redraws any committed run.

- ``throughput_<dtype>.png``: TFLOP/s against size for every kernel of one precision;
  square sizes on the left (log x axis, a tick at every size measured), the other shapes
  (rectangular, odd, batched) as grouped bars on the right. The y axis is logarithmic for
  every precision, so two plots read alike.
- ``roofline.png``: each GPU case at (arithmetic intensity, TFLOP/s) under the device's
  bandwidth slope and its per-precision ceilings (bench/roofline.py); colour names the
  kernel, marker shape the precision.
- ``ladder.png`` (FP32) and ``ladder_<dtype>.png`` (other precisions with kernels in the
  run): each rung as % of that precision's cuBLAS on the largest square shape and the
  largest other shape.
- ``energy_<dtype>.png`` (precisions whose cases have an energy reading): joules per GEMM
  (log scale) and TFLOP/s per watt of every kernel on every shape, as grouped bars;
  readings not trusted (bench/energy.py) hatched and pale.
- ``corpus.png`` (a ``bench --corpus`` run): each shape's own best / best baseline against its
  FLOPs, per precision (bench/corpus_summary.py's ratios), with each geometric mean.

How series and axes look (so that kernels running close together stay apart on the page)
is bench/plot_style.py's.

matplotlib (Agg backend, no display needed) is imported only when plotting, and its
absence is one clear error.
"""

from __future__ import annotations

import copy
from pathlib import Path

from .. import kernels
from .. import precision as _precision
from ..cuda.errors import GemmDriverError
from ..problem import shape_label
from . import corpus_summary, roofline
from .writers import record_variant_label
from .plot_style import (MARKERS, PRECISION_COLORS, SERIES_COLORS, provider_name, separate_overlaps, series_styles,
                         size_axis, y_log)


class PlotError(GemmDriverError):
    """Plotting is impossible here (matplotlib missing) or the document has nothing to plot."""


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise PlotError("plots need matplotlib, which is not installed: pip install matplotlib") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _label(case: dict) -> str:
    """The shape, and the layout, output type and epilogue when they are not nn fp32 none."""
    variant = record_variant_label(case)
    return shape_label(case["m"], case["n"], case["k"], case.get("batch") or 1) + (f" {variant}" if variant else "")


def _is_square(case: dict) -> bool:
    """A square default case (the size-sweep lines); other variants are drawn as bars."""
    return case["m"] == case["n"] == case["k"] and (case.get("batch") or 1) == 1 and not record_variant_label(case)


def _ok(cases):
    return [c for c in cases if c.get("status") == "ok" and c.get("tflops")]


def _title(document: dict, what: str) -> str:
    gpu = (document.get("environment") or {}).get("gpu") or {}
    name = gpu.get("name", "unknown GPU") if isinstance(gpu, dict) else "unknown GPU"
    return f"{what} - {name}"


def _kernel_order(cases) -> list[str]:
    """Kernels in the order the run listed them (baselines first, as the runner does)."""
    return list(dict.fromkeys(c["kernel"] for c in cases))


def throughput(plt, document: dict, dtype: str, path: Path) -> Path:
    cases = [c for c in _ok(document["results"]) if roofline.case_precision(c) == dtype]
    base = _precision.get(dtype)
    baselines = {*_precision.baselines(dtype), base.batched_baseline}
    names = _kernel_order(cases)
    styles = series_styles(names, baselines)
    square = [c for c in cases if _is_square(c)]
    other = [c for c in cases if not _is_square(c)]
    panels = (1 if square else 0) + (1 if other else 0)
    fig, axes = plt.subplots(1, panels, figsize=(7.5 * panels, 5.8), squeeze=False)
    axes = list(axes[0])
    if square:
        ax = axes.pop(0)
        separate_overlaps(styles, {n: {c["m"]: c["tflops"] for c in square if c["kernel"] == n} for n in names})
        for name in names:
            pts = sorted((c["m"], c["tflops"]) for c in square if c["kernel"] == name)
            if pts:
                ax.plot(*zip(*pts), label=name, **styles[name])
        size_axis(ax, [c["m"] for c in square])
        y_log(ax, [c["tflops"] for c in square])
        ax.set_xlabel("M = N = K (log scale)")
        ax.set_title("square shapes")
        ax.grid(True, which="major", alpha=0.3)
    if other:
        ax = axes.pop(0)
        _grouped_bars(ax, other, names, lambda c: c["tflops"], styles)
        y_log(ax, [c["tflops"] for c in other])
        ax.set_xlabel("shape M x N x K (batched: B x M x N x K)")
        ax.set_title("rectangular, odd and batched shapes")
        ax.grid(True, axis="y", which="major", alpha=0.3)
    handles = {}
    for ax in fig.axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.axes[-1].legend(handles.values(), handles.keys(), loc="center left", bbox_to_anchor=(1.01, 0.5),
                        fontsize=8, frameon=False, title="kernel", title_fontsize=8, handlelength=3.5)
    shown = sorted({provider_name(n) for n in names if n in baselines})
    note = f" ({' and '.join(shown)} in grey)" if shown else ""
    fig.suptitle(_title(document, f"{dtype.upper()} GEMM throughput{note}"))
    fig.tight_layout()
    return _save(plt, fig, path)


def _grouped_bars(ax, cases, names, value, styles, pale=lambda case: False) -> None:
    """One group of bars per shape, one bar per kernel of ``names`` that has the shape;
    ``value(case)`` is the bar's height (None: no bar), ``pale(case)`` hatches it."""
    labels = list(dict.fromkeys(_label(c) for c in cases))
    present = [n for n in names if any(c["kernel"] == n and value(c) is not None for c in cases)]
    width = 0.8 / max(len(present), 1)
    for j, name in enumerate(present):
        for i, label in enumerate(labels):
            hit = next((c for c in cases if c["kernel"] == name and _label(c) == label), None)
            if hit is None or value(hit) is None:
                continue
            faint = pale(hit)
            ax.bar(i - 0.4 + width * (j + 0.5), value(hit), width, color=styles[name]["color"],
                   alpha=0.4 if faint else styles[name].get("alpha", 1.0), hatch="//" if faint else None,
                   label=name, edgecolor="white", linewidth=0.3)
    ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right")


def _energy_of(case: dict) -> dict:
    energy = case.get("energy")
    return energy if isinstance(energy, dict) else {}


def energy_plot(plt, document: dict, dtype: str, path: Path) -> Path:
    """Joules per GEMM and TFLOP/s per watt of one precision's cases, side by side."""
    cases = [c for c in _ok(document["results"]) if roofline.case_precision(c) == dtype
             and _energy_of(c).get("joules_per_gemm")]
    names = _kernel_order(cases)
    styles = series_styles(names, {*_precision.baselines(dtype), _precision.get(dtype).batched_baseline})
    untrusted = lambda c: not _energy_of(c).get("trusted")  # noqa: E731
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 5.8))
    _grouped_bars(left, cases, names, lambda c: _energy_of(c)["joules_per_gemm"], styles, untrusted)
    y_log(left, [_energy_of(c)["joules_per_gemm"] for c in cases], "energy per GEMM (J")
    left.set_title("joules per GEMM (lower is better)")
    _grouped_bars(right, cases, names, lambda c: _energy_of(c).get("tflops_per_watt"), styles, untrusted)
    right.set_ylabel("TFLOP/s per watt (= TFLOP per joule)")
    right.set_title("TFLOP/s per watt (higher is better)")
    for ax in (left, right):
        ax.set_xlabel("shape M x N x K")
        ax.grid(True, axis="y", which="major", alpha=0.3)
    handles = dict(zip(*reversed(left.get_legend_handles_labels())))
    right.legend(handles.values(), handles.keys(), loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8,
                 frameon=False, title="kernel", title_fontsize=8)
    note = " (hatched: reading not trusted)" if any(untrusted(c) for c in cases) else ""
    fig.suptitle(_title(document, f"{dtype.upper()} energy per GEMM, NVML energy counter{note}"))
    fig.tight_layout()
    return _save(plt, fig, path)


def _family(case: dict) -> str:
    """A kernel's name less its precision suffix: 'wmma_bf16' and 'wmma_fp16' share a colour."""
    suffix = "_" + roofline.case_precision(case)
    return case["kernel"][: -len(suffix)] if case["kernel"].endswith(suffix) else case["kernel"]


def _roof(ax, summary: dict, cases, lo: float, hi: float) -> str:
    """The bandwidth slope and the ceilings of the precisions present; returns the note."""
    bw = summary["bandwidth_tbs"]
    ceilings: dict[float, list[str]] = {}  # BF16 and FP16 share one peak: one line, one label
    for dtype in dict.fromkeys(roofline.case_precision(c) for c in cases):
        if summary["peaks_tflops"].get(dtype) is not None:
            ceilings.setdefault(summary["peaks_tflops"][dtype], []).append(dtype)
    top = max([hi, *(peak / bw * 3 for peak in ceilings)])
    highest = max(ceilings, default=summary["peaks_tflops"]["fp32"])
    ax.plot([lo, highest / bw], [bw * lo, highest], color="gray", lw=1.5, zorder=1)
    ax.annotate(f"DRAM {bw:g} TB/s slope", (lo * 2.5, bw * lo * 1.1), fontsize=8, color="gray", va="top")
    for peak, dtypes in ceilings.items():
        color = PRECISION_COLORS[dtypes[0]]
        ax.plot([peak / bw, top], [peak, peak], color=color, lw=1.5, zorder=1)
        ax.annotate(f"{'/'.join(dtypes)} peak {peak:g} TFLOP/s", (top, peak), fontsize=8, ha="right",
                    va="bottom", color=color)
    return (f"roof: {summary['model']} datasheet ({bw:g} TB/s, peaks at its clock); hot-mode points "
            "can pass the DRAM slope (operands in L2)")


def roofline_plot(plt, document: dict, path: Path) -> Path:
    from matplotlib.lines import Line2D

    summary = roofline.device_summary(((document.get("environment") or {}).get("gpu") or {}).get("name"))
    cases = [c for c in _ok(document["results"]) if c.get("kernel") != "numpy"
             and (c.get("timing") or {}).get("clock") != "host"]
    for c in cases:
        c.setdefault("intensity", roofline.case_roofline(c, summary["gpu"])["intensity"])
    families = list(dict.fromkeys(_family(c) for c in cases))
    colors = {f: SERIES_COLORS[i % len(SERIES_COLORS)] for i, f in enumerate(families)}
    fig, ax = plt.subplots(figsize=(11, 6.5))
    xs = [c["intensity"] for c in cases] or [1.0]
    lo, hi = min(xs) / 3, max(xs) * 10  # room right of the points for the ceilings' labels
    if summary["known"]:
        lo = min(lo, summary["peaks_tflops"]["fp32"] / summary["bandwidth_tbs"] / 10)  # show the slope
        note = _roof(ax, summary, cases, lo, hi)
    else:
        note = summary["reason"]
    present = [d for d in MARKERS if any(roofline.case_precision(c) == d for c in cases)]
    for dtype in present:
        for i, family in enumerate(families):
            pts = [(c["intensity"], c["tflops"]) for c in cases
                   if _family(c) == family and roofline.case_precision(c) == dtype]
            if pts:  # later kernels smaller and on top: one on another's point leaves a ring
                hollow, shrink = dtype == "fp16", i / max(len(families) - 1, 1)
                ax.scatter(*zip(*pts), s=(75 if hollow else 48) - 26 * shrink, marker=MARKERS[dtype],
                           linewidths=1.2, facecolors="none" if hollow else colors[family],
                           edgecolors=colors[family], alpha=0.9, zorder=(2 if hollow else 3) + shrink, gid=dtype)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of unavoidable DRAM traffic, log scale)")
    ax.set_ylabel("throughput (TFLOP/s, log scale)")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(_title(document, "Roofline") + f"\n{note}", fontsize=10)
    kernel_handles = [Line2D([], [], ls="", marker="o", color=colors[f], label=f) for f in families]
    precision_handles = [Line2D([], [], ls="", marker=MARKERS[d], color="black", label=d.upper(),
                                mfc="none" if d == "fp16" else "black") for d in present]
    first = ax.legend(handles=kernel_handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8,
                      frameon=False, title="kernel (colour)", title_fontsize=8)
    ax.add_artist(first)
    ax.legend(handles=precision_handles, loc="lower left", bbox_to_anchor=(1.01, 0), fontsize=8,
              frameon=False, title="precision (marker)", title_fontsize=8)
    fig.tight_layout()
    return _save(plt, fig, path, extra=[first])


def _ladder_shapes(cases) -> list[str]:
    """The largest square shape, and the largest other unbatched one (of one precision's cases)."""
    single = [c for c in cases if (c.get("batch") or 1) == 1]
    picks = []
    for group in ([c for c in single if _is_square(c)], [c for c in single if not _is_square(c)]):
        if group:
            picks.append(_label(max(group, key=lambda c: (c["m"] * c["n"] * c["k"], _label(c)))))
    return picks


def ladder(plt, document: dict, path: Path, dtype: str = "fp32") -> Path:
    """One precision's ladder as % of that precision's cuBLAS."""
    results = [c for c in document["results"] if roofline.case_precision(c) == dtype]
    order = [s.name for s in kernels.LADDER]
    names = [n for n in order if any(c["kernel"] == n for c in results)]
    names += [n for n in _kernel_order(results) if n not in names and n in kernels.KERNELS]
    shapes = _ladder_shapes(results)
    what = dtype.upper()
    # The 100% line is the fastest baseline of the precision that ran (cuBLAS, or cuBLASLt).
    ran = [provider_name(b) for b in _precision.baselines(dtype) if any(c["kernel"] == b for c in results)]
    base = f"the faster of {' and '.join(ran)} {what}" if len(ran) > 1 else f"cuBLAS {what}"
    if not names or not shapes:
        raise PlotError(f"no {what} ladder kernels in this run: nothing to draw as % of cuBLAS")
    fig, ax = plt.subplots(figsize=(10, 0.3 * len(names) * len(shapes) + 2))
    height = 0.8 / len(shapes)
    top = max(115, max((c.get("pct_of_cublas") or 0) for c in results if c["kernel"] in names) * 1.08)
    for j, label in enumerate(shapes):
        for i, name in enumerate(names):
            y = i - 0.4 + height * (j + 0.5)
            case = next((c for c in results if c["kernel"] == name and _label(c) == label), None)
            pct = case.get("pct_of_cublas") if case else None
            if pct is None:
                why = "not run" if case is None else case.get("status", "?")
                ax.text(1, y, f"{why} ({label})", va="center", fontsize=8, color="gray")
                continue
            ax.barh(y, pct, height, color=f"C{j}", label=f"shape {label}", zorder=2)
            # Inside the bar when it is long enough, so no label meets the 100% line (the
            # bars cover it where they cross it); past the end of a short bar otherwise.
            inside = pct > 0.12 * top
            ax.text(pct - 0.01 * top if inside else pct + 0.01 * top, y, f"{pct:.1f}%", va="center",
                    ha="right" if inside else "left", fontsize=8, color="white" if inside else "black",
                    fontweight="bold" if inside else "normal", zorder=3)
    ax.axvline(100, color="black", ls="--", lw=1.5, label=f"{base} = 100%", zorder=1)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlabel(f"% of {base} throughput on the same shape (higher is better)")
    ax.set_xlim(0, top)
    ax.set_title(_title(document, f"{what} kernels, rung by rung, as % of {base.removesuffix(' ' + what)}"))
    handles = dict(zip(*reversed(ax.get_legend_handles_labels())))
    ax.legend(handles.values(), handles.keys(), loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8,
              frameon=False)
    ax.grid(True, axis="x", alpha=0.3, zorder=0)
    ax.set_axisbelow(True)
    fig.tight_layout()
    return _save(plt, fig, path)


def _save(plt, fig, path: Path, extra=()) -> Path:
    # "tight" keeps outside legends (and ``extra`` artists it would not see), trims the rest
    fig.savefig(path, dpi=110, bbox_inches="tight",
                bbox_extra_artists=[*fig.get_default_bbox_extra_artists(), *extra])
    plt.close(fig)
    return path


def check_output_dir(out_dir: str | Path) -> None:
    """PlotError now, rather than after a long sweep, if no plot could be written there."""
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise PlotError(f"--plot takes a directory, but {str(out_dir)!r} is a file")
    _pyplot()


def write_plots(document: dict, out_dir: str | Path) -> list[Path]:
    """Every plot the document supports, as PNGs in ``out_dir``; returns their paths."""
    if not isinstance(document.get("results"), list):
        raise PlotError("the document has no 'results' list: not a bench JSON")
    plt = _pyplot()
    document = copy.deepcopy(document)  # plotting annotates cases; the caller's stays as it was
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ok = _ok(document["results"])
    if not ok:
        raise PlotError("no case in this run has a speed (all FAILED or skipped): nothing to plot")
    paths = [throughput(plt, document, d, out / f"throughput_{d}.png")
             for d in dict.fromkeys(roofline.case_precision(c) for c in ok)]
    if any(c.get("kernel") != "numpy" for c in ok):
        paths.append(roofline_plot(plt, document, out / "roofline.png"))
    for dtype in dict.fromkeys(roofline.case_precision(c) for c in ok):
        name = "ladder.png" if dtype == "fp32" else f"ladder_{dtype}.png"
        try:
            paths.append(ladder(plt, document, out / name, dtype))
        except PlotError:
            pass  # a precision with no ladder kernels in the run (only its cuBLAS) has none to draw
    for dtype in dict.fromkeys(roofline.case_precision(c) for c in ok if _energy_of(c).get("joules_per_gemm")):
        paths.append(energy_plot(plt, document, dtype, out / f"energy_{dtype}.png"))
    if document.get("corpus"):
        drawn = corpus_plot(plt, document, out / "corpus.png")
        paths += [drawn] if drawn else []
    return paths


def corpus_plot(plt, document: dict, path: Path) -> Path | None:
    """corpus.png: per precision, each shape's ratio (own best / best baseline) against its
    FLOPs, odd shapes hollow, small-M shapes as crosses, with 1.0 and each geometric mean
    drawn across; None when no shape has a ratio."""
    summaries = corpus_summary.summarize(document)
    if not summaries:
        return None
    fig, ax = plt.subplots(figsize=(9, 5))
    for summary in summaries:
        color = PRECISION_COLORS.get(summary.precision, "black")
        for style, chosen in (("filled", [r for r in summary.ratios if r.kind != "odd" and r.m > 128]),
                              ("hollow", [r for r in summary.ratios if r.kind == "odd" and r.m > 128]),
                              ("cross", [r for r in summary.ratios if r.m <= 128])):
            if not chosen:
                continue
            flops = [2 * r.m * r.n * r.k for r in chosen]
            ratios = [r.ratio for r in chosen]
            if style == "cross":
                ax.scatter(flops, ratios, marker="x", color=color, s=28)
            else:
                ax.scatter(flops, ratios, marker=MARKERS.get(summary.precision, "o"), s=28,
                           facecolors=color if style == "filled" else "none", edgecolors=color)
        geomean = summary.as_dict()["all"]["geomean"]
        ax.axhline(geomean, color=color, linestyle="--", linewidth=1,
                   label=f"{summary.precision}: geometric mean {geomean:.3f} over {len(summary.ratios)} shapes")
    ax.axhline(1.0, color="grey", linewidth=1.5, zorder=0)
    ax.set_xscale("log")
    ax.set_xlabel("FLOPs per GEMM (2 M N K), log scale")
    ax.set_ylabel("own best / best baseline")
    corpus = (document.get("corpus") or {}).get("name", "")
    cut = "" if document.get("complete", True) else " (run interrupted)"
    ax.set_title(f"{corpus} corpus{cut}: filled model/sized shapes, hollow odd shapes, x small M (<= 128)".strip())
    ax.legend(fontsize=8, loc="best")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path

