"""PNG plots of a bench run, drawn from its JSON document (a dict), never from live
objects: ``python -m gemm_driver plot RUN.json DIR`` redraws any committed run.

- ``throughput_<dtype>.png``: TFLOP/s against size for every kernel of one precision,
  its cuBLAS baseline as a heavy dashed line; square sizes on the left (log2 axis), the
  other shapes (rectangular, odd, batched) as grouped bars on the right.
- ``roofline.png``: each GPU case at (arithmetic intensity, TFLOP/s) under the device's
  bandwidth slope and its per-precision ceilings (bench/roofline.py).
- ``ladder.png`` (FP32) and ``ladder_<dtype>.png`` (other precisions with kernels in the
  run): the ladder (kernels.LADDER order) as % of that precision's cuBLAS on the largest
  square shape and the largest other shape.

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
from . import roofline

MARKERS = {"fp32": "o", "tf32": "s", "bf16": "^", "fp16": "D"}
PRECISION_COLORS = {"fp32": "tab:blue", "tf32": "tab:orange", "bf16": "tab:green", "fp16": "tab:red"}


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
    return shape_label(case["m"], case["n"], case["k"], case.get("batch") or 1)


def _is_square(case: dict) -> bool:
    return case["m"] == case["n"] == case["k"] and (case.get("batch") or 1) == 1


def _ok(cases):
    return [c for c in cases if c.get("status") == "ok" and c.get("tflops")]


def _title(document: dict, what: str) -> str:
    gpu = (document.get("environment") or {}).get("gpu") or {}
    name = gpu.get("name", "unknown GPU") if isinstance(gpu, dict) else "unknown GPU"
    return f"{what} - {name}"


def _y_scale(ax, values, what: str = "throughput (TFLOP/s") -> None:
    """Log when the values span more than a decade, else linear from zero, so that bars are
    never cut off at an arbitrary bottom; plain numbers on the ticks either way."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    values = [v for v in values if v and v > 0]
    if values and max(values) / min(values) > 10:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.set_ylabel(f"{what}, log scale)")
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    else:
        ax.set_ylim(bottom=0, top=max(values, default=1) * 1.1)
        ax.set_ylabel(f"{what})")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def _kernel_order(cases) -> list[str]:
    """Kernels in the order the run listed them (baselines first, as the runner does)."""
    return list(dict.fromkeys(c["kernel"] for c in cases))


def _colors(plt, names):
    """Ten clearly different hues first (tab20's dark shades), then their light partners."""
    cmap = plt.get_cmap("tab20")
    order = [*range(0, 20, 2), *range(1, 20, 2)]
    return {name: cmap(order[i % 20]) for i, name in enumerate(names)}


def throughput(plt, document: dict, dtype: str, path: Path) -> Path:
    cases = [c for c in _ok(document["results"]) if roofline.case_precision(c) == dtype]
    base = _precision.get(dtype)
    heavy_names = {base.baseline, base.batched_baseline}  # the baselines: heavy dashed lines
    names = _kernel_order(cases)
    colors = _colors(plt, names)
    square = [c for c in cases if _is_square(c)]
    other = [c for c in cases if not _is_square(c)]
    panels = (1 if square else 0) + (1 if other else 0)
    fig, axes = plt.subplots(1, panels, figsize=(7 * panels, 5.5), squeeze=False)
    axes = list(axes[0])
    if square:
        ax = axes.pop(0)
        for name in names:
            pts = sorted((c["m"], c["tflops"]) for c in square if c["kernel"] == name)
            if pts:
                heavy = name in heavy_names
                ax.plot(*zip(*pts), marker="o", ms=4, color="black" if heavy else colors[name],
                        lw=2.5 if heavy else 1.3, ls="--" if heavy else "-", label=name, zorder=3 if heavy else 2)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
        _y_scale(ax, [c["tflops"] for c in square])
        ax.set_xlabel("M = N = K (log scale)")
        ax.set_title("square shapes")
        ax.grid(True, which="both", alpha=0.3)
    if other:
        ax = axes.pop(0)
        labels = list(dict.fromkeys(_label(c) for c in other))
        present = [n for n in names if any(c["kernel"] == n for c in other)]
        width = 0.8 / max(len(present), 1)
        for j, name in enumerate(present):
            xs, ys = [], []
            for i, label in enumerate(labels):
                hit = next((c for c in other if c["kernel"] == name and _label(c) == label), None)
                if hit:
                    xs.append(i - 0.4 + width * (j + 0.5))
                    ys.append(hit["tflops"])
            heavy = name in heavy_names
            ax.bar(xs, ys, width, color="black" if heavy else colors[name], label=name)
        ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right")
        _y_scale(ax, [c["tflops"] for c in other])
        ax.set_xlabel("shape M x N x K (batched: B x M x N x K)")
        ax.set_title("rectangular, odd and batched shapes")
        ax.grid(True, axis="y", which="both", alpha=0.3)
    handles = {}
    for ax in fig.axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.axes[-1].legend(handles.values(), handles.keys(), loc="center left", bbox_to_anchor=(1.01, 0.5),
                        fontsize=8, frameon=False, title="kernel", title_fontsize=8)
    fig.suptitle(_title(document, f"{dtype.upper()} GEMM throughput (cuBLAS baseline in black)"))
    fig.tight_layout()
    return _save(plt, fig, path)


def roofline_plot(plt, document: dict, path: Path) -> Path:
    summary = roofline.device_summary(((document.get("environment") or {}).get("gpu") or {}).get("name"))
    cases = [c for c in _ok(document["results"]) if c.get("kernel") != "numpy"
             and (c.get("timing") or {}).get("clock") != "host"]
    for c in cases:
        c.setdefault("intensity", roofline.case_roofline(c, summary["gpu"])["intensity"])
    names = _kernel_order(cases)
    colors = _colors(plt, names)
    fig, ax = plt.subplots(figsize=(11, 6.5))
    xs = [c["intensity"] for c in cases] or [1.0]
    lo, hi = min(xs) / 3, max(xs) * 3
    if summary["known"]:
        bw = summary["bandwidth_tbs"]
        lo = min(lo, summary["peaks_tflops"]["fp32"] / bw / 10)  # show the bandwidth slope
        ceilings: dict[float, list[str]] = {}  # BF16 and FP16 share one peak: one line, one label
        for dtype in dict.fromkeys(roofline.case_precision(c) for c in cases):
            if summary["peaks_tflops"].get(dtype) is not None:
                ceilings.setdefault(summary["peaks_tflops"][dtype], []).append(dtype)
        top = max([hi, *(peak / bw * 3 for peak in ceilings)])
        highest = max(ceilings, default=summary["peaks_tflops"]["fp32"])
        ax.plot([lo, highest / bw], [bw * lo, highest], color="gray", lw=1.5)
        ax.annotate(f"DRAM {bw:g} TB/s slope", (lo * 2.5, bw * lo * 1.1), fontsize=8, color="gray", va="top")
        for peak, dtypes in ceilings.items():
            color = PRECISION_COLORS[dtypes[0]]
            ax.plot([peak / bw, top], [peak, peak], color=color, lw=1.5)
            ax.annotate(f"{'/'.join(dtypes)} peak {peak:g} TFLOP/s", (top, peak), fontsize=8, ha="right",
                        va="bottom", color=color)
        note = (f"roof: {summary['model']} datasheet ({bw:g} TB/s, peaks at its clock); hot-mode points "
                "can pass the DRAM slope (operands in L2)")
    else:
        note = summary["reason"]
    for name in names:
        for dtype in MARKERS:
            pts = [(c["intensity"], c["tflops"]) for c in cases if c["kernel"] == name
                   and roofline.case_precision(c) == dtype]
            if pts:  # FP16 hollow: it lands on BF16's points (same rate), which must stay visible
                fill = "none" if dtype == "fp16" else colors[name]
                ax.scatter(*zip(*pts), s=30 if dtype == "fp16" else 22, marker=MARKERS[dtype], facecolors=fill,
                           edgecolors=colors[name], label=name, zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of unavoidable DRAM traffic, log scale)")
    ax.set_ylabel("throughput (TFLOP/s, log scale)")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(_title(document, "Roofline") + f"\n{note}", fontsize=10)
    handles = dict(zip(*reversed(ax.get_legend_handles_labels())))
    ax.legend(handles.values(), handles.keys(), loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8,
              frameon=False, title="kernel (marker: o fp32, s tf32, ^ bf16, D fp16)", title_fontsize=8)
    fig.tight_layout()
    return _save(plt, fig, path)


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
    base = " / ".join(b for b in _precision.baselines(dtype) if any(c["kernel"] == b for c in results))
    base = f"best of {base}" if " / " in base else f"cuBLAS {what}"
    if not names or not shapes:
        raise PlotError(f"no {what} ladder kernels in this run: nothing to draw as % of cuBLAS")
    fig, ax = plt.subplots(figsize=(10, 0.3 * len(names) * len(shapes) + 2))
    height = 0.8 / len(shapes)
    for j, label in enumerate(shapes):
        for i, name in enumerate(names):
            y = i - 0.4 + height * (j + 0.5)
            case = next((c for c in results if c["kernel"] == name and _label(c) == label), None)
            pct = case.get("pct_of_cublas") if case else None
            if pct is None:
                why = "not run" if case is None else case.get("status", "?")
                ax.text(1, y, f"{why} ({label})", va="center", fontsize=8, color="gray")
                continue
            ax.barh(y, pct, height, color=f"C{j}", label=f"shape {label}")
            ax.text(pct + 0.8, y, f"{pct:.1f}%", va="center", fontsize=8)
    ax.axvline(100, color="black", ls="--", lw=1.5, label=f"{base} = 100%")
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlabel(f"% of {base} throughput on the same shape (higher is better)")
    ax.set_xlim(0, max(115, max((c.get("pct_of_cublas") or 0) for c in results if c["kernel"] in names) + 15))
    ax.set_title(_title(document, f"The {what} ladder, rung by rung"))
    handles = dict(zip(*reversed(ax.get_legend_handles_labels())))
    ax.legend(handles.values(), handles.keys(), loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8,
              frameon=False)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    return _save(plt, fig, path)


def _save(plt, fig, path: Path) -> Path:
    fig.savefig(path, dpi=110, bbox_inches="tight")  # "tight" keeps outside legends, trims the rest
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
    return paths

