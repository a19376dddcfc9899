"""The profile command without a GPU: its arguments, the line it prints without ncu, and the
reading of ncu's output (a raw-page CSV and a --query-metrics excerpt captured on an H100; a
source-page excerpt captured on an H200)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gemm_driver import cli
from gemm_driver.cuda.driver import gpu_available
from gemm_driver.profile import command, metrics, ncu, sass, target

DATA = Path(__file__).parent / "data"
RAW_CSV = DATA / "ncu-raw-hopper-bf16-1024.csv"  # profile hopper_bf16 --shape 1024x1024x1024, H100
QUERY = DATA / "ncu-query-metrics-h100-excerpt.txt"  # lines of `ncu --query-metrics` on that H100
# `ncu --import REPORT --csv --page source --print-source sass` of hopper_bf16 at 1024^3 (SourceCounters,
# H200): its first 480 SASS instructions and 6 of its columns
SOURCE_CSV = DATA / "ncu-source-hopper-bf16-1024-excerpt.csv"


@pytest.fixture
def no_ncu(monkeypatch, tmp_path):
    """A machine where ncu is nowhere: empty PATH, no CUDA_HOME, no toolkit, no pathfinder."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(ncu, "TOOLKIT_DIRS", ())
    monkeypatch.setattr(ncu, "_from_pathfinder", lambda: None)


def fake_ncu(directory: Path) -> Path:
    path = directory / "ncu"
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.parametrize("argv, says", [
    (["profile", "no_such_kernel", "--shape", "64x64x64"], "unknown kernel 'no_such_kernel'"),
    (["profile", "hopper_bf16", "--shape", "64x64"], "is not of the form MxNxK"),
    (["profile", "hopper_bf16"], "--shape"),
    (["profile", "hopper_bf16", "--shape", "64x64x64", "--dtype", "fp32"], "computes in bf16, not fp32"),
    (["profile", "hopper_bf16", "--shape", "64x64x64", "--dtype", "fp64"], "unknown precision 'fp64'"),
    (["profile", "hopper_bf16", "--shape", "64x64x64", "--baseline", "cublas_tf32"], "computes in tf32"),
    (["profile", "numpy", "--shape", "64x64x64"], "runs on the CPU"),
    (["profile", "cublas_bf16", "--shape", "64x64x64", "--set", "BN=64"], "takes no tunables"),
    (["profile", "hopper_bf16", "--shape", "64x64x64", "--set", "NOPE=1"], "NOPE"),
    (["profile", "hopper_bf16", "--shape", "64x64x64", "--set", "BN"], "NAME=INTEGER"),
    (["profile", "hopper_bf16", "--shape", "64x64x64", "--json", "."], "--json takes a file path"),
    (["profile", "hopper_bf16", "--shape", "64x64x64", "--source", "0"], "a whole number of stretches (1 or more)"),
    (["profile", "hopper_bf16", "--shape", "64x64x64", "--source", "all"], "a whole number of stretches"),
    (["profile", "hopper_bf16", "--shape", "64x64x64", "--layout", "nx"], "--layout 'nx' is not one of nn, nt"),
    (["profile", "hopper_bf16", "--shape", "64x64x64", "--layout", "nn,nt"], "--layout takes one value in profile"),
    (["profile", "hopper_bf16", "--shape", "64x64x64", "--epilogue", "gelu"], "--epilogue 'gelu' is not one of"),
    (["profile", "hopper_bf16", "--shape", "64x64x64", "--out-dtype", "fp16"], "does not take output type 'fp16'"),
    (["profile", "hopper_bf16", "--shape", "64x64x64", "--scaling", "row"], "--scaling applies to FP8 kernels"),
    (["profile", "hopper_fp8", "--shape", "64x64x64", "--layout", "nn"], "does not take layout 'nn'"),
    (["profile", "hopper_fp8", "--shape", "64x64x64", "--layout", "nt", "--scaling", "tile"], "'tile' is not one of"),
    (["profile", "hopper_bf16", "--shape", "64x64x64", "--fp8-types", "e5m2"], "--fp8-types applies to FP8 kernels"),
    (["profile", "hopper_fp8", "--shape", "64x64x64", "--fp8-types", "e5m3"], "--fp8-types 'e5m3' is not one of"),
    (["profile", "double_buffered", "--shape", "64x64x64", "--layout", "tn"], "double_buffered does not take layout 'tn'"),
    (["profile", "hopper_bf16", "--shape", "64x64x64", "--layout", "nt", "--baseline", "cublaslt_bf16",
      "--epilogue", "bias_gelu", "--out-dtype", "bf16", "--set", "OUT=0"], "OUT"),
])
def test_bad_input_is_one_line_and_exit_2(argv, says, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1


def test_without_ncu_one_line_says_what_to_install(no_ncu, capsys):
    assert cli.main(["profile", "hopper_bf16", "--shape", "1024x1024x1024"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "ncu was not found" in err and "install the CUDA toolkit or Nsight Compute" in err


def test_ncu_found_under_cuda_home(no_ncu, monkeypatch, tmp_path):
    (tmp_path / "cuda" / "bin").mkdir(parents=True)
    tool = fake_ncu(tmp_path / "cuda" / "bin")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    assert ncu.find_ncu() == str(tool)


def test_ncu_on_path_comes_first(no_ncu, monkeypatch, tmp_path):
    tool = fake_ncu(tmp_path)
    assert ncu.find_ncu() == str(tool)
    assert os.access(tool, os.X_OK)


@pytest.mark.skipif(gpu_available(), reason="checks the message of a machine without a GPU")
def test_with_ncu_but_no_gpu_says_a_gpu_is_needed(no_ncu, tmp_path, capsys):
    fake_ncu(tmp_path)
    assert cli.main(["profile", "hopper_bf16", "--shape", "1024x1024x1024"]) == 2
    assert "needs an NVIDIA GPU" in capsys.readouterr().err


def test_query_gives_the_metric_base_names():
    names = ncu.parse_query(QUERY.read_text())
    assert {"gpu__time_duration", "sm__inst_executed_pipe_tensor_op_gmma",
            "smsp__average_warps_issue_stalled_barrier_per_issue_active"} <= names
    assert not any(" " in n or n.startswith("FBSP") for n in names)


def test_requested_metrics_keep_what_the_gpu_has():
    wanted, missing = metrics.requested(ncu.parse_query(QUERY.read_text()))
    assert "gpu__time_duration.sum" in wanted and "sm__inst_executed_pipe_tensor_op_gmma.sum" in wanted
    assert "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio" in wanted
    assert not any("stalled_selected" in name for name in wanted)  # the issuing warp: not a stall
    assert "lts__t_sector_hit_rate.pct" in [m.name for m in missing]  # not in the excerpt


def test_raw_csv_is_read_in_launch_order():
    launches = ncu.parse_raw_csv(RAW_CSV.read_text())
    assert [k.id for k in launches] == [0, 1, 2]
    assert launches[0].name.startswith("void hopper_any_shape<hopper::bf16_t")
    assert launches[1].name == "hold_stream"
    assert launches[2].name.startswith("nvjet_sm90")
    ours = launches[0]
    assert ours.number("sm__inst_executed_pipe_tensor_op_gmma.sum") == 65536.0  # "65,536" in the file
    assert ours.units["gpu__time_duration.sum"] == "ns"
    assert ours.grid == "(128, 1, 1)" and ours.block == "(384, 1, 1)"


def test_raw_csv_skips_what_comes_before_the_table():
    text = "==PROF== Connected to process 1\nsome program output\n" + RAW_CSV.read_text()
    assert len(ncu.parse_raw_csv(text)) == 3
    with pytest.raises(ValueError, match="no raw-page table"):
        ncu.parse_raw_csv("==ERROR== nothing profiled\n")


def test_first_error_is_ncus_own_words():
    out = "==PROF== Connected\n==ERROR== Failed to find metric foo__bar\n==ERROR== second\n"
    assert ncu.first_error(out, 1) == "Failed to find metric foo__bar"
    assert ncu.first_error("", 3) == "exit status 3"


def _result(baseline: str | None = "cublas_bf16"):
    request = {"kernel": "hopper_bf16", "baseline": baseline, "m": 1024, "n": 1024, "k": 1024, "precision": "bf16",
               "tunables": {}, "seed": 0}
    report = {"status": "ok", "marker": "hold_stream", "gpu": "NVIDIA H100 80GB HBM3", "launch": {}}
    launches = ncu.parse_raw_csv(RAW_CSV.read_text())
    if baseline is None:
        launches = launches[:1]
    tool = {"path": "ncu", "version": "2025.3.1.0", "command": []}
    return command.assemble(request, report, launches, tool, [m.name for m in metrics.CURATED], [])


def test_sides_split_at_the_marker_and_the_table_fits_120_columns():
    result = _result()
    assert list(result["sides"]) == ["hopper_bf16", "cublas_bf16"]
    assert [k["name"] for k in result["sides"]["cublas_bf16"]["launches"]][0].startswith("nvjet")
    rows = {row["metric"]: row for row in result["rows"]}
    duration = rows["gpu__time_duration.sum"]
    assert duration["unit"] == "us" and 1 < duration["hopper_bf16"] < 1000  # ns shown as us
    assert duration["ratio"] == pytest.approx(duration["hopper_bf16"] / duration["cublas_bf16"])
    stalls = [row for row in result["rows"] if row["label"].startswith("stall: ")]
    assert 0 < len(stalls) <= metrics.TOP_STALLS
    text = command.render(result)
    assert "clocks locked to base" in text and "ratio" in text
    assert max(len(line) for line in text.splitlines()) <= command.WIDTH


def test_mma_sync_counts_the_tensor_pipe_s_instructions_that_are_not_wgmma():
    both = ({"sm__inst_executed_pipe_tensor_op_hmma.sum": 65536.0,
             "sm__inst_executed_pipe_tensor_op_gmma.sum": 65536.0}, {})
    sync_only = ({"sm__inst_executed_pipe_tensor_op_hmma.sum": 4096.0}, {})  # a GPU without wgmma's counter
    (gmma, hmma) = metrics.rows((both, sync_only))
    assert (hmma.label, hmma.values) == ("mma.sync instructions", (0.0, 4096.0))
    assert (gmma.label, gmma.values) == ("wgmma instructions", (65536.0, None))


def test_a_kernel_alone_has_no_ratio_column():
    result = _result(baseline=None)
    assert list(result["sides"]) == ["hopper_bf16"]
    assert "ratio" not in command.render(result).splitlines()[-len(result["rows"]) - 2]


def test_a_missing_marker_is_an_error():
    launches = [k for k in ncu.parse_raw_csv(RAW_CSV.read_text()) if k.name != "hold_stream"]
    with pytest.raises(ncu.NcuError, match="marker"):
        command.split_sides(launches, "hold_stream", "cublas_bf16")


def test_shown_converts_ncu_units():
    assert metrics.shown(11392.0, "ns", "us") == pytest.approx(11.392)
    assert metrics.shown(1.4e9, "hz", "MHz") == pytest.approx(1400.0)
    assert metrics.shown(4.2e6, "byte", "MB") == pytest.approx(4.2)
    assert metrics.shown(80.0, "%", "%") == 80.0


@pytest.mark.parametrize("argv, wanted, baseline", [
    (["--layout", "nt", "--out-dtype", "bf16", "--epilogue", "bias_gelu"],
     {"layout": "nt", "out_dtype": "bf16", "epilogue": "bias_gelu", "scaling": "none"}, "cublaslt_bf16"),
    ([], {"layout": "nn", "out_dtype": "fp32", "epilogue": "none", "scaling": "none"}, "cublas_bf16"),
])
def test_the_request_carries_the_linear_layer_s_call(argv, wanted, baseline):
    # the default baseline is the precision's first library baseline that takes the call:
    # cublasGemmEx has no epilogue, so cuBLASLt's GELU_BIAS is the baseline of bias_gelu
    args = cli.build_parser().parse_args(["profile", "hopper_bf16", "--shape", "256x512x128", *argv])
    request = command.check_request(args)
    assert {key: request[key] for key in wanted} == wanted and request["baseline"] == baseline
    problem = target.problem_of(request)
    assert (problem.m, problem.n, problem.k, problem.layout, problem.out_dtype, problem.epilogue) == (
        256, 512, 128, wanted["layout"], wanted["out_dtype"], wanted["epilogue"])


def test_an_fp8_request_names_its_scaling_and_the_header_shows_it():
    args = cli.build_parser().parse_args(["profile", "hopper_fp8", "--shape", "256x512x256", "--out-dtype", "bf16",
                                          "--scaling", "block"])  # nt: FP8's only layout, the default
    request = command.check_request(args)
    assert (request["scaling"], request["baseline"], target.problem_of(request).scaling) == (
        "block", "cublaslt_fp8_block", "block")  # the cuBLASLt mode of the same scaling
    result = _result()
    result["request"] = {**result["request"], "layout": "nt", "out_dtype": "bf16", "scaling": "block"}
    assert "1024x1024x1024 nt bf16 none block scales" in command.render(result).splitlines()[0]


def test_an_fp8_request_names_its_formats_and_the_header_shows_them():
    args = cli.build_parser().parse_args(["profile", "hopper_fp8", "--shape", "256x512x256", "--out-dtype", "bf16",
                                          "--fp8-types", "e5m2_e4m3"])
    request = command.check_request(args)
    assert (request["fp8_types"], target.problem_of(request).operand_formats) == ("e5m2_e4m3", ("e5m2", "e4m3"))
    assert "fp8_types" not in command.check_request(cli.build_parser().parse_args(
        ["profile", "hopper_fp8", "--shape", "256x512x256"]))  # e4m3: the default, not recorded
    result = _result()
    result["request"] = {**result["request"], "layout": "nt", "scaling": "tensor", "fp8_types": "e5m2_e4m3"}
    assert "1024x1024x1024 nt fp32 none tensor scales, e5m2_e4m3 A and B on" in command.render(result).splitlines()[0]


# ---------------------------------------------------------------- --source: counters per SASS instruction
def test_source_page_is_read_per_instruction():
    (listing,) = sass.parse_source_csv(SOURCE_CSV.read_text())
    assert listing.kernel.startswith("void hopper_any_shape<hopper::bf16_t")
    assert len(listing.instructions) == 480
    first = listing.instructions[0]
    assert first.sass == "LDC R1, c[0x0][0x28]" and first.executed == 1536 and first.samples == 19
    with pytest.raises(ValueError, match="SourceCounters"):
        sass.parse_source_csv('"Kernel Name","k"\n"Address","Source"\n"0x0","NOP"\n')
    with pytest.raises(ValueError, match="no kernel"):
        sass.parse_source_csv("==PROF== nothing\n")


def test_the_hottest_stretch_is_the_k_loop():
    (listing,) = sass.parse_source_csv(SOURCE_CSV.read_text())
    top = sass.stretches(listing, 3)
    loop = top[0]  # 128 CTAs x 2 consumers x 4 warps x 16 k tiles / 2 (two k tiles an iteration)
    assert (loop.length, loop.times) == (152, 8192) and loop.first_sass.startswith("ULEA")
    assert loop.last_sass.startswith("@P0") and "BRA" in loop.last_sass
    assert [s.executed for s in top] == sorted((s.executed for s in top), reverse=True)


def test_stretches_cut_where_the_count_changes_and_skip_code_never_run():
    ins = [sass.Instruction(str(i), f"I{i}", n, 1.0) for i, n in enumerate([5, 5, 0, 0, 100, 100, 100, 5])]
    found = sass.stretches(sass.Listing("k", tuple(ins)), 10)
    assert [(s.first, s.last, s.times) for s in found] == [(4, 6, 100), (0, 1, 5), (7, 7, 5)]
    assert found[0].as_dict(sass.Listing("k", tuple(ins)).executed)["share"] == pytest.approx(300 / 315)


def test_listings_go_to_launches_in_order_else_by_name():
    a, b = sass.Listing("a", ()), sass.Listing("void k<(int)64, (bool)1>(int)", ())
    assert sass.match([a, b], ["a", "b"]) == [a, b]
    assert sass.match([b], ["a", "marker", "void k<64, 1>(int)"]) == [None, None, b]


def test_source_counters_are_asked_of_ncu_only_with_source():
    plain = ncu.profile_command("ncu", ["m1"], "r.ncu-rep", ["python"])
    assert "--section" not in plain
    with_source = ncu.profile_command("ncu", ["m1"], "r.ncu-rep", ["python"], ("SourceCounters",))
    at = with_source.index("--section")
    assert with_source[at + 1] == "SourceCounters" and with_source[-1] == "python"


def test_the_source_section_shows_each_side_s_stretches_within_120_columns():
    result = _result()
    listings = sass.parse_source_csv(SOURCE_CSV.read_text())
    launches = ncu.parse_raw_csv(RAW_CSV.read_text())
    # the two captures are of different builds: the listing goes to the first launch, as in the report's order
    result["source"] = command.source_section(result, launches, [listings[0], None, None], 2)
    side = result["source"]["sides"]["hopper_bf16"]
    assert side["instructions_in_code"] == 480 and len(side["stretches"]) == 2
    assert "cublas_bf16" not in result["source"]["sides"]  # the excerpt holds our kernel's listing only
    text = command.render(result)
    assert "hottest SASS of hopper_bf16" in text and "152 x 8,192" in text
    assert max(len(line) for line in text.splitlines()) <= command.WIDTH
