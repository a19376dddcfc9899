"""How the bench plots look: series styles, the log axes, names as a reader knows them.

Kernels that run close together must stay apart on the page: every series of a plot has
its own colour and marker shape, markers alternate filled and hollow so coincident points
both show, series that run on top of each other get different line styles, and the
baselines are drawn thick, grey and underneath the kernels. Axes are logarithmic for every
precision, with a tick at each size measured, so two plots read alike.
"""

from __future__ import annotations

import math

# Roofline: marker shape per precision; the FP16 one hollow and larger, drawn under BF16's
# filled triangles (the two run at the same rate and land on the same points).
MARKERS = {"fp32": "o", "tf32": "s", "bf16": "^", "fp16": "D"}
PRECISION_COLORS = {"fp32": "tab:blue", "tf32": "tab:orange", "bf16": "tab:green", "fp16": "tab:red"}
# Series styles: sixteen marker shapes give every series of a plot its own marker (up to
# sixteen series); the four line styles cycle, and series that run on top of each other get
# different ones (separate_overlaps); sixteen colours without near twins.
SERIES_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "<", ">", "h", "*", "p", "d", "8", "H", "+")
LINE_STYLES = ("-", "--", "-.", ":")
# (No grey: grey is the baselines'.)
SERIES_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
                 "tab:olive", "tab:cyan", "navy", "magenta", "teal", "maroon", "lime", "darkviolet", "goldenrod")


def provider_name(name: str) -> str:
    """'cublaslt_bf16' -> 'cuBLASLt': a baseline as a reader knows it."""
    return "cuBLASLt" if name.startswith("cublaslt") else "cuBLAS" if name.startswith("cublas") else name


def y_log(ax, values, what: str = "throughput (TFLOP/s") -> None:
    """Log y axis for every throughput panel, with room above and below the values (so bars
    stand on a visible base), plain numbers on the ticks, and enough ticks on a narrow span."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    values = [v for v in values if v and v > 0] or [1.0]
    lo, hi = min(values) / 1.6, max(values) * 1.4
    ax.set_yscale("log")
    ax.set_ylim(lo, hi)
    span = hi / lo  # fewer ticks per decade the more decades there are
    subs = (1.0, 2.0, 5.0) if span > 100 else (1.0, 2.0, 3.0, 5.0) if span > 10 else tuple(range(1, 10))
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel(f"{what}, log scale)")


def size_axis(ax, sizes) -> None:
    """Log x axis with a tick at each size measured, at its true place (1000 beside 1024):
    a label that would touch its left neighbour's goes on a second line."""
    from matplotlib.ticker import FixedLocator, NullLocator

    sizes = sorted(set(sizes))
    ax.set_xscale("log")
    ax.set_xlim(sizes[0] / 1.2, sizes[-1] * 1.2)
    span = math.log10(sizes[-1] * 1.2) - math.log10(sizes[0] / 1.2)
    labels, last = [], None  # the last label on the first line
    for size in sizes:
        crowded = last is not None and math.log10(size / last) < 0.09 * span
        labels.append(f"\n{size:g}" if crowded else f"{size:g}")
        last = last if crowded else size
    ax.xaxis.set_major_locator(FixedLocator(sizes))
    ax.set_xticklabels(labels)
    ax.xaxis.set_minor_locator(NullLocator())


def series_styles(names, baselines=()) -> dict[str, dict]:
    """matplotlib keyword arguments per series: its own colour, marker and line style; the
    baselines thick, pale and underneath (black for cuBLAS, grey for others)."""
    styles = {}
    for i, name in enumerate(names):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        style = {"color": color, "marker": SERIES_MARKERS[i % len(SERIES_MARKERS)],
                 "ls": LINE_STYLES[i % len(LINE_STYLES)], "lw": 1.4, "ms": 6, "mec": color,
                 "mfc": color if i % 2 == 0 else "none", "mew": 1.3, "zorder": 3 + i / 100}
        if name in baselines:
            style.update(color="black" if provider_name(name) == "cuBLAS" else "dimgray", lw=3.5, alpha=0.45,
                         mfc="none", mec="black", mew=1.0, zorder=1)
        styles[name] = style
    return styles


def separate_overlaps(styles: dict[str, dict], points: dict[str, dict[int, float]]) -> None:
    """Give a series a line style none of the earlier series it runs on top of has (within
    10% at every size both measured), so two coincident lines read as two, not one."""
    def on_top(a: dict[int, float], b: dict[int, float]) -> bool:
        common = a.keys() & b.keys()
        return bool(common) and all(abs(a[x] - b[x]) <= 0.1 * max(a[x], b[x]) for x in common)

    names = list(points)
    for j, name in enumerate(names):
        taken = {styles[other]["ls"] for other in names[:j] if on_top(points[other], points[name])}
        if styles[name]["ls"] in taken:
            styles[name]["ls"] = next((ls for ls in LINE_STYLES if ls not in taken), styles[name]["ls"])
