"""``python -m gemm_driver profile KERNEL --shape MxNxK``: why a kernel is fast or slow.

The command checks its input on the host (kernel, shape, layout, output type, epilogue, FP8
scaling, precision, baseline, tunables: what the kernel and the baseline declare),
finds ncu (ncu.py), asks it which metrics this GPU has (metrics.py), then runs ncu
around a second Python process (target.py) that builds, verifies and launches the case
and its baseline once each. ncu locks the clocks to base (--clock-control base) so two
profiles compare whatever the power cap and the temperature were doing, and flushes the
caches before each replay pass (--cache-control all): DRAM bytes are a cold launch's.
The table puts the kernel's metrics beside the baseline's with their ratio; ``--json``
writes everything, every metric of both sides included. ``--export`` keeps ncu's report
for the Nsight Compute GUI. ``--source N`` adds ncu's source counters and shows where each
side's instructions go: its N hottest stretches of SASS (sass.py).

Exit status: 0 profiled; 1 a side failed verification; 2 bad input, no GPU, no ncu (one
line naming what to install) or ncu failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Sequence

from .. import kernels
from .. import precision as _precision
from ..cuda.driver import device_count
from ..fp8 import SCALINGS
from ..kernels.spec import KernelSpec, parse_tunable
from ..kernels.target import capability_refusal, check_capabilities
from ..problem import (DEFAULT_EPILOGUE, DEFAULT_LAYOUT, DEFAULT_OUT_DTYPE, EPILOGUES, FP8_TYPES, LAYOUTS, OUT_DTYPES,
                       parse_shape, parse_variants, variant_label)
from . import metrics, ncu, sass
from .target import problem_of

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
WIDTH = 120  # the table and its header fit a terminal this wide
SCHEMA = "gemm_driver.profile/1"


def _typed(parse, name: str):
    def convert(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = name
    return convert


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The profile command's arguments, on the CLI's ``profile`` parser."""
    p.add_argument("kernel", type=_typed(lambda name: kernels.get(name).name, "kernel"),
                   help="a registered kernel or GPU provider (`list` shows them)")
    p.add_argument("--shape", required=True, type=_typed(parse_shape, "shape"), metavar="MxNxK",
                   help="the problem, e.g. 1024x1024x1024")
    p.add_argument("--dtype", help="the kernel's precision (fp32, tf32, bf16, fp16, fp8): a check, since a "
                   "kernel computes in one precision")
    p.add_argument("--layout", help=f"one of {', '.join(LAYOUTS)}: which operands are stored transposed "
                   "(default nn; FP8: nt, its only layout)")
    p.add_argument("--out-dtype", default=DEFAULT_OUT_DTYPE, help=f"D's type, one of {', '.join(OUT_DTYPES)} "
                   "(default fp32)")
    p.add_argument("--epilogue", default=DEFAULT_EPILOGUE, help=f"one of {', '.join(EPILOGUES)} (default none)")
    p.add_argument("--scaling", help=f"FP8's scales, one of {', '.join(SCALINGS)} (default tensor; FP8 only)")
    p.add_argument("--fp8-types", help=f"FP8's A and B formats, one of {', '.join(FP8_TYPES)} (default e4m3; FP8 "
                   "only)")
    p.add_argument("--baseline", help="the kernel to profile beside it, of the same precision (default: that "
                   "precision's cuBLAS, e.g. cublas_bf16); 'none' profiles the kernel alone")
    p.add_argument("--set", action="append", type=_typed(parse_tunable, "NAME=INTEGER"), metavar="NAME=VALUE",
                   help="tunable override of the kernel, repeatable (default: what the kernel chooses)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random operands (default 0)")
    p.add_argument("--json", metavar="PATH", help="write the metrics of both sides, the table and the settings")
    p.add_argument("--export", metavar="PATH", help="keep Nsight Compute's report (.ncu-rep) at PATH")
    p.add_argument("--source", type=_typed(_positive, "count"), metavar="N",
                   help="also collect ncu's source counters and show each side's N hottest stretches of SASS "
                   "(consecutive instructions executed equally often: a loop body), by instructions executed")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"expected a whole number of stretches (1 or more), got {text!r}") from None
    if value < 1:
        raise ValueError(f"expected a whole number of stretches (1 or more), got {value}")
    return value


def check_request(args) -> dict:
    """The target's request from the arguments; ValueError naming what is wrong."""
    target = kernels.get(args.kernel)
    if getattr(target, "host_gemm", None) is not None:
        raise ValueError(f"{target.name} runs on the CPU: there is no GPU kernel for ncu to profile")
    precision = target.precision
    if args.dtype and _precision.get(args.dtype.strip().lower()).name != precision:
        raise ValueError(f"kernel {target.name} computes in {precision}, not {args.dtype}")
    variant = _variant(args, precision)
    problem = problem_of({"m": args.shape[0], "n": args.shape[1], "k": args.shape[2], **variant})
    check_capabilities(target, problem)  # what the kernel declares, named
    baseline = _baseline(args.baseline, precision, target.name, problem)
    tunables = dict(args.set or ())
    if isinstance(target, KernelSpec):
        target.validate(problem, tunables)  # unknown tunables and broken rules, before any GPU work
    elif tunables:
        raise ValueError(f"{target.name} takes no tunables, got {sorted(tunables)}")
    for path, flag in ((args.json, "--json"), (args.export, "--export")):
        if path is not None and (not path.strip() or os.path.isdir(path)):
            raise ValueError(f"{flag} takes a file path, got {path!r}")
    return {"kernel": target.name, "baseline": baseline, "m": problem.m, "n": problem.n, "k": problem.k,
            **variant, "precision": precision, "tunables": tunables, "seed": args.seed}


def _variant(args, precision: str) -> dict:
    """The layout, output type, epilogue, scaling and FP8 formats asked for; ValueError naming a bad one."""
    scaled = _precision.get(precision).scaled
    default_layout = "nt" if scaled else DEFAULT_LAYOUT  # wgmma reads FP8 K-major only
    for flag, value in (("--layout", args.layout), ("--out-dtype", args.out_dtype), ("--epilogue", args.epilogue)):
        if value and "," in value:
            raise ValueError(f"{flag} takes one value in profile (one case is profiled), got {value!r}")
    ((layout, out_dtype, epilogue),) = parse_variants(args.layout or default_layout, args.out_dtype, args.epilogue)
    if args.scaling is not None and not scaled:
        raise ValueError(f"--scaling applies to FP8 kernels; this one computes in {precision}")
    scaling = (args.scaling or "tensor").strip().lower() if scaled else "none"
    if scaled and scaling not in SCALINGS:
        raise ValueError(f"--scaling {scaling!r} is not one of {', '.join(SCALINGS)}")
    if args.fp8_types is not None and not scaled:
        raise ValueError(f"--fp8-types applies to FP8 kernels; this one computes in {precision}")
    fp8_types = (args.fp8_types or "e4m3").strip().lower()
    if fp8_types not in FP8_TYPES:
        raise ValueError(f"--fp8-types {fp8_types!r} is not one of {', '.join(FP8_TYPES)}")
    return {"layout": layout, "out_dtype": out_dtype, "epilogue": epilogue, "scaling": scaling,
            **({"fp8_types": fp8_types} if fp8_types != "e4m3" else {})}


def _baseline(name: str | None, precision: str, kernel: str, problem) -> str | None:
    """The baseline named, or the precision's first library baseline that takes ``problem``
    (its layout, output type, epilogue and scaling: cuBLASLt for an epilogue, the cuBLASLt
    mode of FP8's scaling); None for 'none' or the kernel itself."""
    if name is not None and name.strip().lower() == "none":
        return None
    chosen = kernels.get(name.strip()).name if name else _default_baseline(precision, problem)
    if kernels.precision_of(chosen) != precision:
        raise ValueError(f"--baseline {chosen} computes in {kernels.precision_of(chosen)}; {kernel} in {precision}")
    if getattr(kernels.get(chosen), "host_gemm", None) is not None:
        raise ValueError(f"--baseline {chosen} runs on the CPU: there is no GPU kernel for ncu to profile")
    check_capabilities(kernels.get(chosen), problem)
    return None if chosen == kernel else chosen


def _default_baseline(precision: str, problem) -> str:
    candidates = _precision.baselines(precision)
    takes = [name for name in candidates if capability_refusal(kernels.get(name), problem) is None]
    return (takes or candidates)[0]  # none: the first, refused by the check after this, naming what it takes


def cmd_profile(args) -> int:
    request = check_request(args)
    tool = ncu.find_ncu()
    device_count()  # GpuUnavailableError, said in one line, before ncu starts a process that would fail
    available = ncu.available_metrics(tool)
    wanted, missing = metrics.requested(available)
    with tempfile.TemporaryDirectory(prefix="gemm-profile-") as tmp:
        work = Path(tmp)
        (work / "request.json").write_text(json.dumps(request))
        report_path = _report_path(args.export) if args.export else str(work / "profile.ncu-rep")
        target = [sys.executable, "-m", "gemm_driver.profile.target", str(work / "request.json"),
                  str(work / "report.json")]
        source = getattr(args, "source", None)
        command = ncu.profile_command(tool, wanted, report_path, target, ("SourceCounters",) if source else ())
        output = ncu.run_profile(command)
        report = _target_report(work / "report.json", output)
        if report["status"] != "ok":
            print(f"gemm-driver profile: {report['error']}", file=sys.stderr)
            return EXIT_FAILED if report["status"] == "FAILED" else EXIT_USAGE
        launches = ncu.parse_raw_csv(ncu.raw_csv(tool, report_path))
        listings = sass.match(sass.parse_source_csv(ncu.source_csv(tool, report_path)),
                              [k.name for k in launches]) if source else None
    result = assemble(request, report, launches, {"path": tool, "version": ncu.version(tool), "command": command},
                      wanted, missing)
    if listings is not None:
        result["source"] = source_section(result, launches, listings, source)
    print(render(result))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.json}")
    return EXIT_OK


def _report_path(path: str) -> str:
    """ncu adds .ncu-rep to an --export path without it; the import must name the same file."""
    return path if path.endswith(".ncu-rep") else path + ".ncu-rep"


def _target_report(path: Path, output: str) -> dict:
    if not path.is_file():  # the target never got to write it: ncu's or Python's last words say why
        raise ncu.NcuError(f"the profiled process ended without a report: {ncu.first_error(output, -1)}")
    return json.loads(path.read_text())


def split_sides(launches: Sequence[ncu.ProfiledKernel], marker: str, baseline: str | None
                ) -> tuple[list[ncu.ProfiledKernel], list[ncu.ProfiledKernel]]:
    """The kernel's launches (before the marker) and the baseline's (after it)."""
    at = next((i for i, k in enumerate(launches) if k.name == marker), None)
    if baseline and at is None:
        raise ncu.NcuError(f"the marker kernel {marker} is not among the {len(launches)} profiled launches")
    ours, theirs = (list(launches), []) if at is None else (list(launches[:at]), list(launches[at + 1:]))
    if not ours or (baseline and not theirs):
        raise ncu.NcuError("ncu profiled no launch of the " + ("kernel" if not ours else "baseline"))
    return ours, theirs


def main_launch(side: Sequence[ncu.ProfiledKernel]) -> ncu.ProfiledKernel:
    """The side's longest launch: the GEMM itself, where a library also launched a helper."""
    return max(side, key=lambda k: k.number(metrics.DURATION) or 0.0)


def assemble(request: dict, report: dict, launches: Sequence[ncu.ProfiledKernel], tool: dict,
             wanted: Sequence[str], missing: Sequence[metrics.Metric]) -> dict:
    """The JSON document: settings, both sides' launches with every metric, the table's rows."""
    ours, theirs = split_sides(launches, report["marker"], request["baseline"])
    names = (request["kernel"],) + ((request["baseline"],) if request["baseline"] else ())
    mains = [main_launch(side) for side in (ours, theirs) if side]
    table = metrics.rows(tuple((k.metrics, k.units) for k in mains))
    return {
        "schema": SCHEMA, "request": request, "gpu": report.get("gpu"), "ncu": tool,
        "clocks": "locked to base by ncu (--clock-control base)", "caches": "flushed before each pass",
        "metrics_requested": list(wanted), "metrics_missing": [m.name for m in missing],
        "verification": report.get("verification"), "launch": report.get("launch"),
        "sides": {name: {"main": main.id, "launches": [k.as_dict() for k in side]}
                  for name, main, side in zip(names, mains, (ours, theirs))},
        "rows": [row.as_dict(names) for row in table],
    }


def source_section(result: dict, launches: Sequence[ncu.ProfiledKernel], listings, top: int) -> dict:
    """Each side's main launch: its instructions executed and its ``top`` hottest stretches (the
    whole listing stays in the report that --export keeps)."""
    at = {k.id: i for i, k in enumerate(launches)}
    section = {"stretches_shown": top, "sides": {}}
    for name, side in result["sides"].items():
        listing = listings[at[side["main"]]]
        if listing is None:
            continue
        total = listing.executed
        section["sides"][name] = {
            "kernel": listing.kernel, "instructions_in_code": len(listing.instructions), "executed": total,
            "stretches": [s.as_dict(total) for s in sass.stretches(listing, top)]}
    return section


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 0.01):
        return f"{value:.3g}" if abs(value) < 0.01 else f"{value:,.0f}"
    return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.1f}"


def render(result: dict) -> str:
    """The header (what ran, where, how) and the side-by-side table, within WIDTH columns."""
    request, sides = result["request"], result["sides"]
    names = list(sides)
    shape = f"{request['m']}x{request['n']}x{request['k']}"
    variant = variant_label(request.get("layout", "nn"), request.get("out_dtype", "fp32"), request.get("epilogue", "none"))
    scaling = request.get("scaling", "none")
    shape += (f" {variant}" if variant else "") + (f" {scaling} scales" if scaling != "none" else "")
    shape += f", {request['fp8_types']} A and B" if request.get("fp8_types", "e4m3") != "e4m3" else ""
    vs = f" against {names[1]}" if len(names) > 1 else ""
    lines = [f"{names[0]}{vs}: {request['precision'].upper()} {shape} on {result['gpu']}"]
    lines += textwrap.wrap(f"Nsight Compute {result['ncu']['version']}, one launch of each: clocks {result['clocks']}; "
                           f"caches {result['caches']} (--cache-control all)", WIDTH)
    for name in names:
        side = sides[name]
        main = next(k for k in side["launches"] if k["id"] == side["main"])
        tunables = (result.get("launch") or {}).get(name, {}).get("tunables")
        extra = f" {json.dumps(tunables, separators=(',', ':'))}" if tunables else ""
        lines += textwrap.wrap(f"{name}{extra}: {main['name']}  grid {main['grid']} block {main['block']}",
                               WIDTH, subsequent_indent="    ")
        others = [k for k in side["launches"] if k["id"] != side["main"]]
        if others:
            lines.append(f"    also launched: {', '.join(k['name'][:40] for k in others)}")
    if result["metrics_missing"]:
        lines += textwrap.wrap("not on this GPU: " + ", ".join(result["metrics_missing"]), WIDTH)
    label_w, unit_w, value_w = 38, 19, 16
    header = f"{'metric':<{label_w}} {'unit':<{unit_w}}" + "".join(f"{n[:value_w]:>{value_w}}" for n in names)
    lines += ["", header + (f"{'ratio':>9}" if len(names) > 1 else ""), "-" * len(header + " " * 9)]
    for row in result["rows"]:
        line = f"{row['label'][:label_w]:<{label_w}} {row['unit'][:unit_w]:<{unit_w}}"
        line += "".join(f"{_number(row[n]):>{value_w}}" for n in names)
        if len(names) > 1:
            line += f"{row['ratio']:>8.2f}x" if row["ratio"] is not None else f"{'-':>9}"
        lines.append(line)
    for name, side in (result.get("source") or {}).get("sides", {}).items():
        lines += [""] + render_stretches(name, side)
    return "\n".join(line[:WIDTH] for line in lines)


def render_stretches(name: str, side: dict) -> list[str]:
    """A side's hottest stretches of SASS: share of the instructions executed, how many times
    each of its instructions ran, its warp-stall samples, its first and last instruction."""
    lines = textwrap.wrap(f"hottest SASS of {name} (ncu's source counters): {side['executed']:,.0f} warp "
                          f"instructions executed, {side['instructions_in_code']} instructions of code; stretches "
                          "of consecutive instructions executed equally often, most executed first", WIDTH)
    lines.append(f"  {'share':>6} {'executed':>13} {'instructions x times':>22} {'stall samples':>13}  "
                 "first .. last instruction")
    for s in side["stretches"]:
        span = f"{s['instructions']} x {s['times']:,.0f}"
        lines.append(f"  {s['share'] or 0:6.1%} {s['executed']:13,.0f} {span:>22} {s['stall_samples']:13,.0f}  "
                     f"{s['first_sass']} .. {s['last_sass']}")
    return lines
