"""The command line, run in-process (capsys) and as a real subprocess."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gemm_driver import kernels
from gemm_driver.cli import main
from gemm_driver.cuda.driver import gpu_available
from gemm_driver.kernels import sources
from gemm_driver.kernels.spec import cc_of

REPO = Path(__file__).resolve().parents[1]
HAVE_GPU = gpu_available()
needs_no_gpu = pytest.mark.skipif(HAVE_GPU, reason="checks the behaviour without a GPU")


@pytest.fixture(autouse=True)
def private_cache(isolated_cache):
    """No test writes to the user's cache."""
    return isolated_cache


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err: str, command: str, *fragments: str):
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert lines[0].startswith(f"gemm-driver {command}: error: ")
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def test_list_prints_every_kernel_and_provider(capsys):
    code, out, err = run(capsys, "list")
    assert code == 0 and err == ""
    header, *lines = out.strip().splitlines()
    assert header.split()[:3] == ["name", "precision", "min"] and "what it is" in header
    firsts = [line for line in lines if not line.startswith(" ")]  # a long description wraps under its column
    assert len(firsts) == len(kernels.ALL)
    for line, entry in zip(firsts, kernels.ALL.values()):
        assert line.split()[:3] == [entry.name, entry.precision, entry.min_arch]
    code, out, err = run(capsys, "list", "--wide")
    header, *lines = out.strip().splitlines()
    assert "source or kind" in header and "takes: layouts | D | epilogues" in header and len(lines) == len(kernels.ALL)
    for line, entry in zip(lines, kernels.ALL.values()):
        assert line.split()[0] == entry.name and line.endswith(entry.description)
    assert any("ptx/naive.ptx" in line for line in lines)
    takes = {line.split()[0]: line for line in lines}
    assert " nn | fp32 | none " in takes["naive"]
    assert " nn,nt,tn,tt | fp32,bf16 | none,bias,bias_relu,bias_gelu " in takes["hopper_bf16"]
    assert (" nt | fp32,bf16 | none,bias,bias_relu,bias_gelu | tensor,row,block | e4m3,e5m2_e4m3,e4m3_e5m2,e5m2 "
            in takes["hopper_fp8"])


def test_list_json_carries_what_each_entry_takes(capsys):
    code, out, err = run(capsys, "list", "--json")
    assert code == 0 and err == ""
    listed = {e["name"]: e for e in json.loads(out)}
    assert set(listed) == set(kernels.ALL)
    assert (listed["naive"]["layouts"], listed["naive"]["out_dtypes"], listed["naive"]["epilogues"]) == (
        ["nn"], ["fp32"], ["none"])
    assert "scalings" not in listed["hopper_bf16"] and listed["hopper_bf16"]["out_dtypes"] == ["fp32", "bf16"]
    assert listed["cublaslt_fp8_row"]["scalings"] == ["row"] and listed["cublaslt_fp8_row"]["layouts"] == ["nt"]
    assert "fp8_types" not in listed["hopper_bf16"] and "e5m2" in listed["hopper_fp8"]["fp8_types"]


@needs_no_gpu
def test_info_without_gpu(capsys):
    code, out, err = run(capsys, "info")
    assert code == 0 and err == ""
    first = out.splitlines()[0]
    assert first.startswith("GPU: none found")
    assert "commands that work without a GPU: list, info, compile, inspect, compare, plot" in first
    assert "nvrtc_version: 12." in out or "nvrtc_version: 13." in out
    assert "cache_dir:" in out


def test_info_json(capsys, private_cache):
    code, out, err = run(capsys, "info", "--json")
    assert code == 0
    env = json.loads(out)
    assert env["cache_dir"] == str(private_cache)
    # the runtime wheel's include directory, where cuda_bf16.h is (a dependency of the package)
    assert os.path.isfile(os.path.join(env["cuda_header_dirs"], "cuda_bf16.h"))
    assert ("unavailable" in env["gpu"]) is (not HAVE_GPU)


REQUIRED = {"kernel", "arch", "registers", "shared_bytes", "spill_bytes", "local_bytes"}


@pytest.mark.reuses_builds
def test_compile_json_all_kernels(capsys, monkeypatch, session_cache):
    # One arch: test_nvrtc builds every kernel for every arch it targets; this is the CLI's row.
    # In the run's shared cache, where the build matrix puts every default: a default is
    # compiled once in a run, here or there (the private cache cost ~45 s of CI's 2 cores).
    monkeypatch.setenv("GEMM_DRIVER_CACHE_DIR", session_cache)
    code, out, err = run(capsys, "compile", "--json", "--arch", "sm_90")
    assert code == 0, err
    rows = json.loads(out)
    assert {(r["kernel"], r["arch"]) for r in rows} == {(k, "sm_90") for k, s in kernels.KERNELS.items()
                                                        if s.runs_on(cc_of(90))}
    for row in rows:
        assert REQUIRED <= set(row)
        assert row["registers"] > 0 and row["spill_bytes"] == 0 and row["local_bytes"] == 0
    tiled = next(r for r in rows if r["kernel"] == "smem_tiled")
    assert tiled["shared_bytes"] == 2 * 32 * 32 * 4 and tiled["tunables"] == {"TILE": 32, "PAD": 0}
    code, out, _ = run(capsys, "compile", "--json", "--arch", "sm_90")
    assert all(r["cache_hit"] for r in json.loads(out))  # second time: from the cache


def test_compile_rows_say_which_builds_came_from_the_cache(capsys):
    # a private, empty cache; autotuned's default build is warptiled's, compiled just before
    code, out, err = run(capsys, "compile", "warptiled", "autotuned", "--json", "--arch", "sm_90")
    assert code == 0, err
    assert [(r["kernel"], r["cache_hit"]) for r in json.loads(out)] == [("warptiled", False), ("autotuned", True)]


@pytest.mark.parametrize("archs", [("--arch", "sm_80,sm_90"), ("--arch", "sm_80", "--arch", "sm_90")])
def test_compile_takes_several_archs_as_a_list_or_repeated(capsys, archs):
    code, out, err = run(capsys, "compile", "naive", "smem_tiled", "--json", *archs)
    assert code == 0, err
    assert {(r["kernel"], r["arch"]) for r in json.loads(out)} == {
        (k, a) for k in ("naive", "smem_tiled") for a in ("sm_80", "sm_90")}


def test_compile_with_tunables(capsys):
    code, out, err = run(capsys, "compile", "smem_tiled", "--json", "--arch", "sm_80", "--set", "TILE=16", "--set",
                         "PAD=1")
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["tunables"] == {"TILE": 16, "PAD": 1}
    assert row["shared_bytes"] == 2 * 16 * 17 * 4


def test_compile_table(capsys):
    code, out, err = run(capsys, "compile", "naive", "ptx_naive", "--arch", "sm_90")
    assert code == 0, err
    assert "naive" in out and "ptx_naive" in out and "regs" in out and "sm_90" in out


@pytest.mark.parametrize("argv, fragments", [
    (["compile", "smem_tiled", "--set", "TILE=3"], ["TILE=3 is not allowed; choose one of [16, 32]"]),
    (["compile", "smem_tiled", "--set", "NOPE=1"], ["no tunable 'NOPE'; its tunables: TILE, PAD"]),
    (["compile", "smem_tiled", "--set", "TILE"], ["--set takes NAME=INTEGER"]),
    (["compile", "smem_tiled", "--set", "TILE=big"], ["--set takes NAME=INTEGER"]),
    (["compile", "nope"], ["unknown kernel 'nope' (`list` shows all)"]),
    (["compile", "hoper_bf16"], ["unknown kernel 'hoper_bf16'; did you mean hopper_bf16, hopper_fp16"]),
    (["compile", "numpy"], ["numpy is a cpu provider, not a kernel this tool compiles"]),
    (["compile", "naive", "--arch", "sm90"], ["not of the form sm_XY or sm_XYa"]),
    (["compile", "naive", "--arch", "sm_99"], ["cannot target sm_99"]),
    (["compile", "naive", "--arch", "sm_70"], ["naive needs sm_75 or newer"]),
])
def test_compile_bad_input_exits_2_with_one_line(capsys, argv, fragments):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert_one_line_error(err, "compile", *fragments)
    assert out == ""


@pytest.mark.parametrize("argv, fragments", [
    (["bench", "--sizes", "0"], ["--sizes takes positive integers", "'0'"]),
    (["bench", "--sizes", "256,abc"], ["--sizes takes positive integers", "'abc'"]),
    (["bench", "--shapes", "3x4"], ["shape '3x4' is not of the form MxNxK"]),
    (["bench", "--shapes", "0x4x4"], ["M, N and K must each be at least 1"]),
    (["bench", "--kernels", "naive,nope"], ["unknown kernel 'nope'"]),
    (["bench", "--max-time", "0"], ["--max-time takes a positive number of seconds", "'0'"]),
    (["verify", "--kernels", "nope"], ["unknown kernel 'nope'"]),
    (["verify", "--examples", "0"], ["--examples must be at least 1"]),
    (["verify", "--kernels", "hopper_bf16", "--scaling", "block"], ["hopper_bf16 takes no FP8 scaling"]),
    (["verify", "--kernels", "hopper_fp8", "--scaling", "row,blocks"], ["--scaling 'blocks' is not one of"]),
    (["verify", "--kernels", "cublaslt_fp8", "--scaling", "row"], ["cublaslt_fp8 takes the scalings tensor, not 'row'"]),
    (["verify", "--kernels", "cublaslt_fp8", "--fp8-types", "e5m2"],
     ["cublaslt_fp8 takes the FP8 formats e4m3, e5m2_e4m3, e4m3_e5m2, not 'e5m2'"]),
    (["verify", "--kernels", "hopper_bf16", "--fp8-types", "e5m2"], ["hopper_bf16 takes no FP8 scaling; --fp8-types"]),
    (["verify", "--kernels", "hopper_fp8", "--fp8-types", "e4m3,e2m5"], ["--fp8-types 'e2m5' is not one of"]),
    (["bench", "--dtype", "bf16", "--fp8-types", "e5m2_e4m3"], ["--fp8-types applies to fp8 cases; add --dtype fp8"]),
    (["bench", "--dtype", "fp8", "--fp8-types", "e5m2,e3m4"], ["--fp8-types 'e3m4' is not one of e4m3, e5m2_e4m3"]),
])
def test_bench_and_verify_bad_input_exit_2_before_needing_a_gpu(capsys, argv, fragments):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert_one_line_error(err, argv[0], *fragments)


@pytest.mark.parametrize("flag, value, fragment", [
    ("--json", "", "takes a file path, got an empty string"),
    ("--csv", "  ", "takes a file path, got an empty string"),
    ("--plot", "", "takes a directory, got an empty string"),
    ("--dtype", "", "got an empty string"),
    ("--json", "/proc/gemm_driver/run.json", "--json /proc/gemm_driver/run.json: cannot write into /proc/gemm_driver"),
    ("--csv", "FILE/run.csv", "cannot write into"),  # FILE is a regular file: no directory under it
    ("--plot", "FILE/plots", "cannot write into"),
    ("--json", "DIR", "--json takes a file path, but"),
])
def test_bench_outputs_are_checked_before_any_gpu_work(capsys, tmp_path, flag, value, fragment):
    (tmp_path / "FILE").write_text("a file")
    (tmp_path / "DIR").mkdir()
    value = value.replace("FILE", str(tmp_path / "FILE")).replace("DIR", str(tmp_path / "DIR"))
    code, out, err = run(capsys, "bench", "--kernels", "naive", "--sizes", "64", flag, value)
    assert code == 2
    assert_one_line_error(err, "bench", fragment)
    assert "needs an NVIDIA GPU" not in err  # refused before a GPU was looked for
    assert sorted(p.name for p in tmp_path.iterdir()) == ["DIR", "FILE"]  # nothing written


@needs_no_gpu
@pytest.mark.parametrize("argv", [["bench"], ["verify"], ["bench", "--sizes", "64", "--kernels", "naive"],
                                  ["verify", "--kernels", "cublas", "--examples", "1"]])
def test_gpu_commands_without_gpu_exit_2_with_a_hint(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert_one_line_error(err, argv[0], "this command needs an NVIDIA GPU",
                          "commands that work without a GPU: list, info, compile, inspect, compare, plot")


def test_compile_failure_exits_1_with_the_nvrtc_log(capsys, tmp_path, monkeypatch):
    root = tmp_path / "src"
    shutil.copytree(REPO / "cu", root / "cu")
    shutil.copytree(REPO / "ptx", root / "ptx")
    (root / "cu" / "simt" / "broken.cu").write_text(
        '#include "gemm_common.cuh"\n'
        'extern "C" __global__ void sgemm_broken(int M) {\n'
        "    int x = this_is_not_declared;\n"
        "}\n")
    monkeypatch.setattr(sources, "source_root", lambda: root)
    broken = dataclasses.replace(kernels.KERNELS["naive"], name="broken", source="cu/simt/broken.cu", entry="sgemm_broken")
    monkeypatch.setitem(kernels.KERNELS, "broken", broken)
    monkeypatch.setitem(kernels.ALL, "broken", broken)
    code, out, err = run(capsys, "compile", "broken", "naive", "--arch", "sm_80", "--json")
    assert code == 1
    assert "compile of broken for sm_80 failed" in err
    assert 'broken.cu(3): error: identifier "this_is_not_declared" is undefined' in err
    rows = json.loads(out)
    assert rows[0] == {"kernel": "broken", "arch": "sm_80", "error": "NVRTC_ERROR_COMPILATION"}
    assert rows[1]["kernel"] == "naive" and rows[1]["registers"] > 0  # the others still build


def test_argparse_errors_exit_2(capsys):
    assert main(["frobnicate"]) == 2
    assert main([]) == 2


# --- real processes ----------------------------------------------------------------------
def gemm_driver_process(*argv, cache_dir):
    env = {**os.environ, "PYTHONPATH": str(REPO), "GEMM_DRIVER_CACHE_DIR": str(cache_dir)}
    env.pop("GEMM_DRIVER_NO_CACHE", None)
    return subprocess.run([sys.executable, "-m", "gemm_driver", *argv], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120)


def test_subprocess_list_and_compile(private_cache):
    listed = gemm_driver_process("list", cache_dir=private_cache)
    assert listed.returncode == 0 and listed.stderr == ""
    assert {line.split()[0] for line in listed.stdout.splitlines()[1:] if not line.startswith(" ")} == set(kernels.ALL)
    compiled = gemm_driver_process("compile", "--json", "--arch", "sm_90", "smem_tiled", cache_dir=private_cache)
    assert compiled.returncode == 0, compiled.stderr
    (row,) = json.loads(compiled.stdout)
    assert REQUIRED <= set(row) and row["shared_bytes"] == 8192
    assert any(private_cache.iterdir()), "the subprocess honoured GEMM_DRIVER_CACHE_DIR"


def test_subprocess_bad_input_has_no_traceback(private_cache):
    result = gemm_driver_process("bench", "--shapes", "12x12", cache_dir=private_cache)
    assert result.returncode == 2
    assert result.stdout == ""
    assert_one_line_error(result.stderr, "bench", "not of the form MxNxK")


@needs_no_gpu
def test_subprocess_bench_without_gpu(private_cache):
    result = gemm_driver_process("bench", "--sizes", "64", cache_dir=private_cache)
    assert result.returncode == 2
    assert_one_line_error(result.stderr, "bench", "needs an NVIDIA GPU", "list, info, compile")


def test_console_script_entry_point():
    """When the package is installed (as CI does), `gemm-driver` is gemm_driver.cli:main."""
    from importlib import metadata

    try:
        dist = metadata.distribution("gemm-driver")
    except metadata.PackageNotFoundError:
        pytest.skip("gemm-driver is not installed in this environment (running from the source tree)")
    (ep,) = [e for e in dist.entry_points if e.group == "console_scripts" and e.name == "gemm-driver"]
    assert ep.value == "gemm_driver.cli:main"
    assert ep.load() is main


@pytest.mark.parametrize("value", ["0", "-5"])
def test_verify_bad_max_dim_exits_2_before_needing_a_gpu(capsys, value):
    code, out, err = run(capsys, "verify", "--max-dim", value)
    assert code == 2
    assert_one_line_error(err, "verify", "--max-dim must be at least 1")
