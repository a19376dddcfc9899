"""compare: each verdict from synthetic runs, matching, one-sided cases, the command and its errors."""

from __future__ import annotations

import json

import pytest

from gemm_driver.bench import compare, writers
from gemm_driver.cli import main


def timing(median, low=None, high=None, p10=None, p90=None):
    low = median * 0.999 if low is None else low
    high = median * 1.001 if high is None else high
    return {"median_ms": median, "ci_low_ms": low, "ci_high_ms": high,
            "p10_ms": p10 if p10 is not None else low, "p90_ms": p90 if p90 is not None else high}


def case(kernel="smem_tiled", m=1024, status="ok", mode="hot", tunables=None, **t):
    return {"kernel": kernel, "m": m, "n": m, "k": m, "status": status, "mode": mode,
            "tunables": tunables or {}, "timing": timing(**t) if status == "ok" else None}


@pytest.mark.parametrize("old, new, expected", [
    (timing(1.00), timing(0.90), "FASTER"),  # 11% faster, tight intervals
    (timing(1.00), timing(1.10), "SLOWER"),
    (timing(1.00), timing(1.005), "SAME"),  # within the 2% threshold on both ends
    (timing(1.00), timing(0.99, 0.985, 0.995), "SAME"),  # apart, but only 1%: real and too small to matter
    (timing(1.00, 0.90, 1.10), timing(0.95, 0.85, 1.05), "NOISY"),  # 5% apart, intervals of +-10%
    (timing(1.00, 0.99, 1.01), timing(0.90, 0.80, 1.02), "NOISY"),  # overlap: could be 0% or 25%
])
def test_verdicts(old, new, expected):
    word, ratio, (low, high) = compare.verdict(old, new, threshold=0.02)
    assert word == expected
    assert ratio == pytest.approx(old["median_ms"] / new["median_ms"])
    assert low <= ratio <= high


def test_threshold_moves_same_and_faster():
    old, new = timing(1.0), timing(0.97)
    assert compare.verdict(old, new, 0.02)[0] == "FASTER"
    assert compare.verdict(old, new, 0.05)[0] == "SAME"


def test_quantiles_stand_in_when_there_is_no_interval():
    old = {"median_ms": 1.0, "ci_low_ms": None, "ci_high_ms": None, "p10_ms": 0.5, "p90_ms": 1.5}
    new = {"median_ms": 0.8, "p10_ms": 0.79, "p90_ms": 0.81}  # a bench/1 file has no interval keys at all
    assert compare.interval(old) == (0.5, 1.0, 1.5)
    assert compare.verdict(old, new)[0] == "NOISY"
    assert compare.verdict({**old, "p10_ms": 0.99, "p90_ms": 1.01}, new)[0] == "FASTER"


def test_matching_one_sided_and_failed_cases():
    old = [case(median=1.0), case(m=2048, median=8.0), case(kernel="naive", median=5.0),
           case(tunables={"TILE": 16}, median=2.0), case(kernel="coalesced", median=3.0)]
    new = [case(median=0.5), case(m=2048, median=8.0), case(kernel="naive", status="FAILED"),
           case(tunables={"TILE": 32}, median=2.0), case(kernel="coalesced", mode="cold", median=3.0)]
    result = compare.compare_records(old, new)
    verdicts = {compare.describe_key(r.key): r.verdict for r in result.rows}
    assert verdicts == {"smem_tiled 1024x1024x1024 fp32 hot": "FASTER",
                        "smem_tiled 2048x2048x2048 fp32 hot": "SAME",
                        "naive 1024x1024x1024 fp32 hot": "FAILED in new"}
    only_old = {compare.describe_key(k) for k in result.only_old}
    only_new = {compare.describe_key(k) for k in result.only_new}
    assert only_old == {"smem_tiled 1024x1024x1024 fp32 hot TILE=16", "coalesced 1024x1024x1024 fp32 hot"}
    assert only_new == {"smem_tiled 1024x1024x1024 fp32 hot TILE=32", "coalesced 1024x1024x1024 fp32 cold"}
    assert result.counts() == {"FASTER": 1, "SAME": 1, "FAILED in new": 1}
    faster = result.rows[0]
    assert faster.ratio == pytest.approx(2.0) and (faster.old_ms, faster.new_ms) == (1.0, 0.5)


def test_a_tunable_added_since_the_old_file_counts_at_its_default():
    """hopper_bf16 gained CK (default 1): a run recorded before it matches the same
    configuration recorded with CK=1, and not one with CK=2."""
    before = {"BN": 128, "STAGES": 6, "SPLITS": 2}
    old = [case(kernel="hopper_bf16", tunables=before, median=1.0)]
    new = [case(kernel="hopper_bf16", tunables={**before, "CK": 1}, median=0.9),
           case(kernel="hopper_bf16", tunables={"BN": 128, "STAGES": 6, "CK": 2}, median=0.8)]
    result = compare.compare_records(old, new)
    assert [r.verdict for r in result.rows] == ["FASTER"] and len(result.only_new) == 1
    assert ("CK", 1) in result.rows[0].key[-1] and not result.only_old


def write(path, results, schema=writers.SCHEMA):
    path.write_text(json.dumps({"schema": schema, "results": results}))
    return str(path)


def test_compare_command(tmp_path, capsys):
    old = write(tmp_path / "old.json", [case(median=1.0), case(kernel="naive", median=4.0)],
                schema="gemm_driver.bench/1")
    new = write(tmp_path / "new.json", [case(median=1.2), case(kernel="naive", median=4.0),
                                        case(kernel="cublas", median=0.1)])
    code = main(["compare", old, new, "--threshold", "5%"])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert "SLOWER" in out and "SAME" in out and "0.833" in out
    assert "only in" in out and "cublas 1024x1024x1024 fp32 hot" in out
    assert "1 SAME, 1 SLOWER" in out


def test_compare_command_bad_file_exits_2(tmp_path, capsys):
    good = write(tmp_path / "good.json", [case(median=1.0)])
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    code = main(["compare", good, str(bad)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"gemm-driver compare: error: {bad}: not JSON (line 1: Expecting value)"]


def test_fp8_cases_of_one_kernel_in_several_scaling_modes_stay_apart():
    def fp8(scaling, median):
        return {**case("torch_fp8", median=median), "dtype": "fp8", "layout": "nt", "out_dtype": "bf16",
                "scaling": scaling}

    old = [fp8("tensor", 1.0), fp8("row", 1.0)]
    new = [fp8("tensor", 0.5), fp8("row", 2.0)]
    verdicts = {compare.describe_key(r.key): r.verdict for r in compare.compare_records(old, new).rows}
    assert verdicts == {"torch_fp8 1024x1024x1024 fp8 nt bf16 none tensor scaling hot": "FASTER",
                        "torch_fp8 1024x1024x1024 fp8 nt bf16 none row scaling hot": "SLOWER"}


def test_fp8_cases_in_other_formats_stay_apart_and_older_files_read_as_e4m3():
    def fp8(median, **formats):
        return {**case("cublaslt_fp8", median=median), "dtype": "fp8", "layout": "nt", "out_dtype": "bf16",
                "scaling": "tensor", **formats}

    old = [fp8(1.0), fp8(1.0, fp8_types="e5m2_e4m3")]
    new = [fp8(0.5, fp8_types="e4m3"), fp8(2.0, fp8_types="e5m2_e4m3")]
    verdicts = {compare.describe_key(r.key): r.verdict for r in compare.compare_records(old, new).rows}
    assert verdicts == {"cublaslt_fp8 1024x1024x1024 fp8 nt bf16 none tensor scaling hot": "FASTER",
                        "cublaslt_fp8 1024x1024x1024 fp8 nt bf16 none tensor e5m2_e4m3 scaling hot": "SLOWER"}
