"""bench --layout/--out-dtype/--epilogue: the cross product per shape, kernels that do not
declare a combination recorded as not run with why, the three fields in the JSON (optional
on read), compare's key, the table's column and the plots' labels. CPU only."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from gemm_driver.bench import compare, plots, report, writers
from gemm_driver.bench.command import BenchRequest
from gemm_driver.bench.results_schema import check
from gemm_driver.bench.runner import CaseResult, sweep_steps
from gemm_driver.cli import main
from gemm_driver.problem import DEFAULT_VARIANT, GemmProblem, parse_variants, variant_label


def test_variants_are_the_cross_product_in_the_order_given():
    assert parse_variants() == [DEFAULT_VARIANT]
    assert parse_variants("nn,nt", "fp32,bf16", "none,bias_gelu") == [
        ("nn", "fp32", "none"), ("nn", "fp32", "bias_gelu"), ("nn", "bf16", "none"), ("nn", "bf16", "bias_gelu"),
        ("nt", "fp32", "none"), ("nt", "fp32", "bias_gelu"), ("nt", "bf16", "none"), ("nt", "bf16", "bias_gelu")]
    assert parse_variants("tt, NT,tt") == [("tt", "fp32", "none"), ("nt", "fp32", "none")]


@pytest.mark.parametrize("argv, fragment", [
    (["--layout", "nx"], "--layout 'nx' is not one of nn, nt, tn, tt"),
    (["--out-dtype", "fp8"], "--out-dtype 'fp8' is not one of fp32, bf16, fp16"),
    (["--epilogue", "gelu"], "--epilogue 'gelu' is not one of none, bias, bias_relu, bias_gelu"),
    (["--layout", ","], "--layout ',' is not one of"),
])
def test_a_bad_variant_exits_2_with_one_line(capsys, argv, fragment):
    code = main(["bench", "--kernels", "cublas_bf16", *argv])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and fragment in lines[0], err


def test_the_default_sweep_is_unchanged():
    names = ["naive", "cublas", "cublas_bf16", "cublas_batched"]
    shapes = [(64, 64, 64, 1), (32, 32, 32, 4)]
    default = sweep_steps(names, shapes)
    assert default == sweep_steps(names, shapes, variants=[DEFAULT_VARIANT])
    assert all(step.problem.is_default_variant for step in default)
    single = next(s for s in default if s.precision == "fp32" and s.problem.batch == 1)
    assert single.kernels == ["naive", "cublas"] and single.not_run == ()  # cublas_batched left out, unrecorded


def test_kernels_that_do_not_declare_a_combination_are_recorded_as_not_run():
    steps = sweep_steps(["naive", "cublas", "cublas_bf16", "cublaslt_bf16"], [(64, 64, 64, 1)],
                        variants=parse_variants("nn,nt", "bf16", "none,bias_gelu"))
    bf16 = {s.problem.variant: s for s in steps if s.precision == "bf16"}
    assert bf16[("nt", "bf16", "none")].kernels == ["cublas_bf16", "cublaslt_bf16"]
    gelu = bf16[("nt", "bf16", "bias_gelu")]
    assert gelu.kernels == ["cublaslt_bf16"]
    assert gelu.not_run == (("cublas_bf16", "cublas_bf16 does not take epilogue 'bias_gelu'; it takes none"),)
    fp32 = [s for s in steps if s.precision == "fp32"]
    assert all(not s.kernels for s in fp32) and all("does not take" in why for s in fp32 for _, why in s.not_run)
    assert ("cublas", "cublas does not take output type 'bf16'; it takes fp32") in fp32[0].not_run


def test_nothing_to_run_names_the_variants():
    request = BenchRequest(["naive"], [(64, 64, 64, 1)], variants=(("nt", "fp32", "none"),))
    with pytest.raises(ValueError, match="declares these layouts, output types and epilogues"):
        request.steps()


def record(**fields) -> dict:
    problem = GemmProblem(64, 64, 64, trans_b=fields.pop("trans_b", False), out_dtype=fields.pop("out_dtype", "fp32"),
                          epilogue=fields.pop("epilogue", "none"))
    rec = CaseResult(fields.pop("kernel", "cublas_bf16"), problem, "ok", precision="bf16").as_dict()
    rec["timing"] = {"median_ms": fields.pop("median", 1.0), "ci_low_ms": 0.999, "ci_high_ms": 1.001,
                     "samples": 10, "launches_per_sample": 1}
    return rec


def test_each_case_records_its_variant_and_old_files_still_load(tmp_path):
    rec = record(trans_b=True, out_dtype="bf16", epilogue="bias_gelu")
    assert (rec["layout"], rec["out_dtype"], rec["epilogue"]) == ("nt", "bf16", "bias_gelu")
    old = {key: value for key, value in record().items() if key not in ("layout", "out_dtype", "epilogue")}
    for results in ([rec], [old]):
        check({"results": results})
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"schema": writers.SCHEMA, "results": [old]}))
    assert writers.record_variant(writers.load(path)["results"][0]) == DEFAULT_VARIANT
    with pytest.raises(Exception, match="layout"):
        check({"results": [{**rec, "layout": 3}]})


def test_compare_matches_cases_of_the_same_variant_only():
    old = [record(), record(trans_b=True, out_dtype="bf16")]
    new = [record(median=0.5), record(trans_b=True, out_dtype="bf16", epilogue="bias", median=0.5)]
    result = compare.compare_records(old, new)
    assert [compare.describe_key(r.key) for r in result.rows] == ["cublas_bf16 64x64x64 bf16 hot"]
    assert {compare.describe_key(k) for k in result.only_old} == {"cublas_bf16 64x64x64 bf16 nt bf16 none hot"}
    assert {compare.describe_key(k) for k in result.only_new} == {"cublas_bf16 64x64x64 bf16 nt bf16 bias hot"}


def test_the_table_shows_one_variant_column_only_when_some_case_is_not_the_default():
    def table(recs) -> str:
        console = Console(width=200, record=True, force_terminal=False)
        report.print_table(recs, console)
        return console.export_text()

    assert "epilogue" not in table([record()])
    text = table([record(), record(trans_b=True, out_dtype="bf16", epilogue="bias_relu")])
    assert "epilogue" in text and "nt bf16 bias_relu" in text


def test_plot_labels_carry_the_variant():
    assert plots._label(record()) == "64x64x64"
    assert plots._label(record(trans_b=True, out_dtype="bf16")) == "64x64x64 nt bf16 none"
    assert plots._is_square(record()) and not plots._is_square(record(trans_b=True))
    assert variant_label(*DEFAULT_VARIANT) == ""
