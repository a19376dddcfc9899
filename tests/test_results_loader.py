"""The one loader of bench JSON (bench/writers.load + bench/results_schema.py).

Every committed run loads; a document with the right keys but a wrong type anywhere a
reader looks is refused in one line that names the file and the field's path; through
the CLI, `compare` and `plot` then exit 2 with that line alone, and `plot` writes nothing.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gemm_driver.bench import compare, results_schema, writers
from gemm_driver.cli import main

REPO = Path(__file__).resolve().parents[1]


def _bench_documents() -> list[Path]:
    found = []
    results = REPO / "results"
    runs = [*results.glob("*/*.json"), *results.glob("*/archive/*.json"), *results.glob("*/archive/*.json.gz")]
    for path in sorted(runs):
        doc = json.loads(writers.read_text(path))
        if isinstance(doc, dict) and str(doc.get("schema", "")).startswith("gemm_driver.bench/"):
            found.append(path)
    return found


COMMITTED = _bench_documents()
BASE = REPO / "results" / "h100-80gb-hbm3" / "archive" / "bench-fp32-structure.json"  # bench/3, with clocks and tunables


def test_the_committed_runs_are_there():
    assert BASE in COMMITTED and len(COMMITTED) >= 5
    assert {json.loads(writers.read_text(p))["schema"] for p in COMMITTED} == set(writers.READABLE_SCHEMAS)


@pytest.mark.parametrize("path", COMMITTED, ids=[p.name for p in COMMITTED])
def test_every_committed_run_loads(path):
    raw = json.loads(writers.read_text(path))
    doc = writers.load(path)
    assert len(doc["results"]) == len(raw["results"]) > 0


def test_a_gzipped_run_loads_as_the_run_and_a_broken_one_is_one_line(tmp_path):
    packed = tmp_path / "bench-packed.json.gz"
    packed.write_bytes(gzip.compress(BASE.read_bytes(), mtime=0))
    assert writers.load(packed) == writers.load(BASE)
    broken = tmp_path / "bench-broken.json.gz"
    broken.write_bytes(gzip.compress(BASE.read_bytes(), mtime=0)[:500])  # cut short
    with pytest.raises(writers.BenchFileError, match="bench-broken.json.gz: cannot read it") as caught:
        writers.load(broken)
    assert "\n" not in str(caught.value)
    not_gzip = tmp_path / "bench-plain.json.gz"
    not_gzip.write_bytes(BASE.read_bytes())
    with pytest.raises(writers.BenchFileError, match="cannot read it"):
        writers.load(not_gzip)


def test_compare_and_plot_read_through_the_loader():
    assert compare.load is writers.load  # compare_files; the plot command calls writers.load itself
    assert "load(args.run)" in (REPO / "gemm_driver" / "cli.py").read_text()
    assert "from gemm_driver.bench.writers import load" in (REPO / "tools" / "results_table.py").read_text()


def base() -> dict:
    return json.loads(BASE.read_text())


def _clocked(doc: dict) -> dict:
    return next(r for r in doc["results"] if (r.get("timing") or {}).get("clocks"))


def _set(path: list, value):
    """A change that puts ``value`` at ``path`` (keys and indexes) in the document."""
    def change(doc):
        target = doc
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value
    return change


def _delete(path: list):
    def change(doc):
        target = doc
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]
    return change


# name -> (change to the document, the message after "<file>: ")
WRONG = {
    "tflops a string": (_set(["results", 3, "tflops"], "fast"),
                        "results[3].tflops is a string, expected a number >= 0 or null"),
    "tflops NaN": (_set(["results", 3, "tflops"], math.nan), "results[3].tflops is nan, expected a number >= 0 or null"),
    "m a string": (_set(["results", 0, "m"], "1024"), "results[0].m is a string, expected a positive integer"),
    "m zero": (_set(["results", 0, "m"], 0), "results[0].m is 0, expected a positive integer"),
    "n a boolean": (_set(["results", 0, "n"], True), "results[0].n is a boolean, expected a positive integer"),
    "k a float": (_set(["results", 0, "k"], 1024.0), "results[0].k is a number, expected a positive integer"),
    "batch null": (_set(["results", 0, "batch"], None), "results[0].batch is null, expected a positive integer"),
    "kernel a number": (_set(["results", 1, "kernel"], 5), "results[1].kernel is an integer, expected a string"),
    "status missing": (_delete(["results", 2, "status"]), "results[2] lacks status"),
    "case a string": (_set(["results", 4], "naive"), "results[4] is a string, expected an object (one case)"),
    "dtype a number": (_set(["results", 0, "dtype"], 32), "results[0].dtype is an integer, expected a string or null"),
    "timing a list": (_set(["results", 0, "timing"], [1.0]), "results[0].timing is a list, expected an object or null"),
    "median_ms a string": (_set(["results", 0, "timing", "median_ms"], "0.5"),
                           "results[0].timing.median_ms is a string, expected a number of ms > 0"),
    "median_ms zero": (_set(["results", 0, "timing", "median_ms"], 0),
                       "results[0].timing.median_ms is 0, expected a number of ms > 0"),
    "median_ms missing": (_delete(["results", 0, "timing", "median_ms"]), "results[0].timing lacks median_ms"),
    "ci_low_ms a string": (_set(["results", 0, "timing", "ci_low_ms"], "low"),
                           "results[0].timing.ci_low_ms is a string, expected a number of ms > 0 or null"),
    "p10_ms null": (_set(["results", 0, "timing", "p10_ms"], None),
                    "results[0].timing.p10_ms is null, expected a number of ms > 0"),
    "samples a float": (_set(["results", 0, "timing", "samples"], 10.5),
                        "results[0].timing.samples is a number, expected an integer"),
    "samples_ms holds a string": (_set(["results", 0, "timing", "samples_ms", 2], "x"),
                                  "results[0].timing.samples_ms[2] is a string, expected a number"),
    "pct_of_cublas a string": (_set(["results", 0, "pct_of_cublas"], "50%"),
                               "results[0].pct_of_cublas is a string, expected a number or null"),
    "tunable a list": (_set(["results", 0, "tunables"], {"BM": [64]}),
                       "results[0].tunables.BM is a list, expected an integer"),
    "verification ok a string": (_set(["results", 0, "verification", "ok"], "yes"),
                                 "results[0].verification.ok is a string, expected a boolean"),
    "environment a list": (_set(["environment"], []), "environment is a list, expected an object"),
    "gpu a string": (_set(["environment", "gpu"], "H100"), "environment.gpu is a string, expected an object"),
    "gpu name a number": (_set(["environment", "gpu", "name"], 100), "environment.gpu.name is an integer, "
                          "expected a string"),
    "settings alpha a string": (_set(["settings", "alpha"], "one"), "settings.alpha is a string, expected a number"),
    "settings dtypes a string": (_set(["settings", "dtypes"], "fp32"),
                                 "settings.dtypes is a string, expected a list of strings"),
    "results an object": (_set(["results"], {}), "'results' must be a list of cases, not an object"),
}


def write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))
    return path


def bad_file(tmp_path: Path, how: str) -> Path:
    doc = base()
    WRONG[how][0](doc)
    return write(tmp_path / "bad.json", doc)


@pytest.mark.parametrize("how", sorted(WRONG))
def test_a_wrong_type_is_one_line_naming_the_field(tmp_path, how):
    path = bad_file(tmp_path, how)
    with pytest.raises(writers.BenchFileError) as info:
        writers.load(path)
    assert str(info.value) == f"{path}: {WRONG[how][1]}"


def test_the_clocks_of_a_case_are_checked_too(tmp_path):
    doc = base()
    _clocked(doc)["timing"]["clocks"]["why"] = "hot"
    index = doc["results"].index(_clocked(doc))
    with pytest.raises(writers.BenchFileError, match=rf"results\[{index}\]\.timing\.clocks\.why is a string, "
                                                     "expected a list of strings"):
        writers.load(write(tmp_path / "clocks.json", doc))


def test_the_first_wrong_field_is_named(tmp_path):
    doc = base()
    doc["results"][5]["tflops"] = "x"
    doc["results"][1]["m"] = -1
    with pytest.raises(writers.BenchFileError, match=r"results\[1\]\.m is -1"):
        writers.load(write(tmp_path / "two.json", doc))


def test_fields_the_readers_do_not_use_are_left_alone(tmp_path):
    """A later schema may add fields (e.g. an 'incomplete' mark, a new per-case figure)."""
    doc = base()
    doc["incomplete"] = {"reason": "interrupted"}
    doc["results"][0]["new_figure"] = [1, "two", None]
    doc["results"][0]["timing"]["new_statistic"] = "anything"
    assert writers.load(write(tmp_path / "extra.json", doc))["incomplete"] == {"reason": "interrupted"}


def test_minimal_older_documents_still_load(tmp_path):
    """bench/1 files, and the documents tests write, carry only a case's identity."""
    doc = {"schema": "gemm_driver.bench/1", "results": [{"kernel": "naive", "m": 8, "n": 8, "k": 8, "status": "ok"}]}
    assert writers.load(write(tmp_path / "min.json", doc))["results"][0]["kernel"] == "naive"


def test_schema_check_alone():
    with pytest.raises(results_schema.SchemaError, match=r"^results\[0\] lacks kernel, m$"):
        results_schema.check({"results": [{"n": 1, "k": 1, "status": "ok"}]})
    results_schema.check(base())
    assert results_schema.json_type(None) == "null" and results_schema.json_type(1.5) == "a number"


# --- through the CLI: exit 2, one line, nothing written -----------------------------------
CLI_CASES = ["tflops a string", "median_ms a string", "p10_ms null", "timing a list", "case a string", "gpu a string",
             "pct_of_cublas a string", "samples a float", "tunable a list", "median_ms zero"]


@pytest.mark.parametrize("how", CLI_CASES)
def test_compare_refuses_a_wrong_typed_file_in_one_line(tmp_path, capsys, how):
    bad = bad_file(tmp_path, how)
    for argv in (["compare", str(BASE), str(bad)], ["compare", str(bad), str(BASE)]):
        code = main(argv)
        out, err = capsys.readouterr()
        assert code == 2 and out == ""
        assert err.splitlines() == [f"gemm-driver compare: error: {bad}: {WRONG[how][1]}"]


@pytest.mark.parametrize("how", CLI_CASES)
def test_plot_refuses_a_wrong_typed_file_and_writes_nothing(tmp_path, capsys, how):
    bad = bad_file(tmp_path, how)
    out_dir = tmp_path / "plots"
    code = main(["plot", str(bad), str(out_dir)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.splitlines() == [f"gemm-driver plot: error: {bad}: {WRONG[how][1]}"]
    assert not out_dir.exists() or not list(out_dir.glob("*.png"))


def _cli(*argv) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "gemm_driver", *argv], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120)


def test_the_real_cli_compare_and_plot_on_a_wrong_typed_file(tmp_path):
    bad = bad_file(tmp_path, "tflops a string")
    done = _cli("compare", str(BASE), str(bad))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [f"gemm-driver compare: error: {bad}: {WRONG['tflops a string'][1]}"]
    done = _cli("plot", str(bad), str(tmp_path / "out"))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [f"gemm-driver plot: error: {bad}: {WRONG['tflops a string'][1]}"]
    assert not (tmp_path / "out").exists()


def test_a_valid_document_still_compares(tmp_path, capsys):
    other = copy.deepcopy(base())
    code = main(["compare", str(BASE), str(write(tmp_path / "same.json", other))])
    out, err = capsys.readouterr()
    assert code == 0 and err == "" and "SAME" in out
