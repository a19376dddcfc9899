"""Bench output in files: the JSON document (schema ``gemm_driver.bench/3``) and the CSV.

The JSON is the complete record (README, "Bench JSON", documents every field): the
environment, the exact command line, the settings, and per case its verification, summary
statistics, raw samples and clock reads. The CSV is one flat row per case for
spreadsheets and pandas; columns other parts of the harness add to the records (e.g.
``pct_of_peak``) are appended when any case has them.

Schema history: /2 added the median's interval and the clocks; /3 adds ``launch`` per case
(what ran: kernel, tunables, the tuned-table note and the algorithm a library chose, e.g.
cuBLASLt's) and ``baseline``, the provider ``pct_of_cublas`` is against (the fastest of the
precision's baselines). ``load`` reads all three, and maps
precision spellings of older files ("float32", "bfloat16", "float16") to the one spelling.
"""

from __future__ import annotations

import csv
import gzip
import json
import shlex
import sys
from pathlib import Path
from typing import Sequence

from .. import precision as _precision
from ..problem import DEFAULT_VARIANT, variant_label
from .results_schema import SchemaError, json_type
from .results_schema import check as check_document

SCHEMA = "gemm_driver.bench/3"
READABLE_SCHEMAS = ("gemm_driver.bench/1", "gemm_driver.bench/2", SCHEMA)  # compare and plot read all


class BenchFileError(ValueError):
    """A bench JSON file that cannot be used; the message is one line naming the file."""


def command_argv(argv: Sequence[str] | None = None) -> list[str]:
    """The command as typed: ``python -m gemm_driver`` puts its __main__.py path in argv[0]."""
    argv = list(sys.argv if argv is None else argv)
    if argv and argv[0].endswith("__main__.py"):
        argv[:1] = ["python", "-m", "gemm_driver"]
    return argv


def document(recs: Sequence[dict], environment: dict, settings: dict, argv: Sequence[str] | None = None) -> dict:
    argv = command_argv(argv)
    return {
        "schema": SCHEMA,
        "command": {"argv": argv, "line": " ".join(shlex.quote(a) for a in argv), "executable": sys.executable},
        "environment": environment,
        "settings": settings,
        "results": list(recs),
    }


def write_json(path: str | Path, doc: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")


def read_text(path: str | Path) -> str:
    """A file's text, through gzip where its name ends in .gz."""
    path = Path(path)
    return gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()


def load(path: str | Path) -> dict:
    """Read a bench JSON, or raise BenchFileError saying in one line what is wrong with it.

    Every reader of saved runs (compare, plot, tools/results_table.py) comes through here:
    the document is checked field by field (types, not only keys: results_schema.py), so a
    bad file is refused before any output is written, never a traceback halfway through.
    A name ending in .gz is read through gzip: large archived runs are kept packed
    (tools/results_index.py --move).
    """
    try:
        doc = json.loads(read_text(path))
    except FileNotFoundError:
        raise BenchFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise BenchFileError(f"{path}: is a directory, not a bench JSON file") from None
    except (OSError, EOFError, UnicodeDecodeError) as exc:  # a broken .gz: BadGzipFile (an OSError) or EOFError
        raise BenchFileError(f"{path}: cannot read it ({exc.__class__.__name__})") from None
    except json.JSONDecodeError as exc:
        raise BenchFileError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise BenchFileError(f"{path}: nested too deeply to be a bench result") from None
    if not isinstance(doc, dict) or doc.get("schema") not in READABLE_SCHEMAS:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise BenchFileError(f"{path}: schema {found!r} is not a bench result; "
                             f"expected one of {list(READABLE_SCHEMAS)}")
    if not isinstance(doc.get("results"), list):
        raise BenchFileError(f"{path}: 'results' must be a list of cases, not {json_type(doc.get('results'))}")
    try:
        check_document(doc)
    except SchemaError as exc:
        raise BenchFileError(f"{path}: {exc}") from None
    for rec in doc["results"]:
        if rec.get("dtype"):
            rec["dtype"] = _read_precision(path, rec["dtype"])
    settings = doc.get("settings")
    if isinstance(settings, dict) and isinstance(settings.get("dtypes"), list):
        settings["dtypes"] = [_read_precision(path, d) for d in settings["dtypes"]]
    return doc


def _read_precision(path, name: str) -> str:
    try:
        return _precision.from_record(name)
    except ValueError as exc:
        raise BenchFileError(f"{path}: {exc}") from None


CSV_COLUMNS = (
    "kernel", "dtype", "batch", "m", "n", "k", "alpha", "beta", "mode", "tunables", "status",
    "median_ms", "min_ms", "p10_ms", "p90_ms", "ci_low_ms", "ci_high_ms", "noise", "samples",
    "launches_per_sample", "converged", "stop_reason", "tflops", "pct_of_cublas", "previous_rung",
    "speedup_vs_previous", "clocks_sagged", "sm_mhz_min", "temperature_c_max", "power_w_max",
    "max_error_ratio", "detail",
)
_TIMING = ("median_ms", "min_ms", "p10_ms", "p90_ms", "ci_low_ms", "ci_high_ms", "noise", "samples",
           "launches_per_sample", "converged", "stop_reason")
_NESTED = {"timing", "verification", "tunables"}  # flattened into the columns above


def record_variant(rec: dict) -> tuple[str, str, str]:
    """(layout, out_dtype, epilogue) of a record; files written before these fields were
    recorded hold nn, fp32, none cases."""
    return tuple(rec.get(key) or default for key, default in zip(("layout", "out_dtype", "epilogue"),
                                                                  DEFAULT_VARIANT))  # type: ignore[return-value]


def scaled_label(scaling: str, fp8_types: str) -> str:
    """An FP8 case's scaling, with A's and B's formats where they are not e4m3 ('block',
    'tensor e5m2_e4m3'); 'none' for an unscaled case."""
    return scaling if scaling == "none" or fp8_types == "e4m3" else f"{scaling} {fp8_types}"


def record_scaled(rec: dict) -> str:
    """``scaled_label`` of a record (files written before FP8 formats were recorded: e4m3)."""
    return scaled_label(rec.get("scaling") or "none", rec.get("fp8_types") or "e4m3")


def record_variant_label(rec: dict) -> str:
    """'nt bf16 bias_gelu', or '' for a default case (tables, plots, compare); an FP8 case adds
    its scaling and formats ('nt fp32 none block', 'nt bf16 none tensor e5m2_e4m3')."""
    label = variant_label(*record_variant(rec))
    scaled = record_scaled(rec)
    return label if scaled == "none" else f"{label or 'nn fp32 none'} {scaled}"


def csv_row(rec: dict) -> dict:
    timing = rec.get("timing") or {}
    clocks = timing.get("clocks") or {}
    row = {key: rec.get(key) for key in CSV_COLUMNS}
    row.update({key: timing.get(key) for key in _TIMING})
    row["tunables"] = ";".join(f"{k}={v}" for k, v in sorted((rec.get("tunables") or {}).items()))
    row["dtype"] = rec.get("dtype") or "fp32"
    row["batch"] = rec.get("batch") or 1
    row.update({key: clocks.get(key) for key in ("sm_mhz_min", "temperature_c_max", "power_w_max")})
    row["max_error_ratio"] = (rec.get("verification") or {}).get("max_error_ratio")
    for key, value in rec.items():  # scalar fields added by other parts of the harness
        if key not in row and key not in _NESTED and not isinstance(value, (dict, list)):
            row[key] = value
    return row


def write_csv(path: str | Path, recs: Sequence[dict]) -> None:
    rows = [csv_row(rec) for rec in recs]
    columns = list(CSV_COLUMNS) + sorted({key for row in rows for key in row} - set(CSV_COLUMNS))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, restval="")
        writer.writeheader()
        for row in rows:
            writer.writerow({key: "" if value is None else value for key, value in row.items()})
