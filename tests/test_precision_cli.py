"""bench's --dtype, --batch and shapes on the command line, the sweep steps, and the batched
cuBLAS wrapper against a fake library; no GPU needed (bad input is refused before one is)."""

from __future__ import annotations

import ctypes

import pytest

from gemm_driver import kernels, precision
from gemm_driver.bench import defaults, runner
from gemm_driver.bench.command import select_kernels, select_shapes, wants_ladder
from gemm_driver.cli import build_parser, main
from gemm_driver.cuda import cublas


@pytest.fixture(autouse=True)
def private_cache(isolated_cache):
    return isolated_cache


def bench_error(capsys, *argv) -> str:
    assert main(["bench", *argv]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gemm-driver bench: error: "), lines
    return lines[0]


@pytest.mark.parametrize("argv, fragment", [
    (["--dtype", "fp64"], "--dtype 'fp64' is not a precision; choose from fp32, tf32, bf16, fp16, fp8 or all"),
    (["--dtype", "all,fp16"], "cannot be combined"),
    (["--batch", "0"], "--batch takes a positive integer"),
    (["--batch", "-2"], "--batch takes a positive integer"),
    (["--batch", "two"], "--batch takes a positive integer"),
    (["--shapes", "0x64x64x64"], "batch count B of BxMxNxK must be a positive integer"),
    (["--shapes", "2x3x4x5x6"], "not of the form MxNxK or BxMxNxK"),
    (["--kernels", "naive", "--dtype", "bf16"], "kernel naive computes in fp32, which --dtype bf16 does not select"),
    (["--kernels", "cublas_batched", "--sizes", "256"], "nothing to run"),
])
def test_bad_bench_input_exits_2_with_one_line(capsys, argv, fragment):
    assert fragment in bench_error(capsys, *argv)


def test_plot_dir_that_is_a_file_is_refused_before_the_sweep(capsys, tmp_path):
    target = tmp_path / "file.png"
    target.write_bytes(b"x")
    assert "is a file" in bench_error(capsys, "--sizes", "64", "--plot", str(target))


def parsed(*argv):
    """bench's arguments as the parser types them (the CLI hands exactly these on)."""
    args = build_parser().parse_args(["bench", *argv])
    flat = lambda values: [x for value in values or () for x in value]  # noqa: E731
    return args, flat


def shapes_of(*argv):
    args, flat = parsed(*argv)
    return select_shapes(flat(args.sizes), flat(args.shapes), args.batch, ladder=args.ladder)


def kernels_of(*argv):
    args, flat = parsed(*argv)
    return select_kernels(flat(args.kernels), args.dtype, ladder=wants_ladder(flat(args.kernels), args.ladder))


def test_shapes_with_batch():
    assert shapes_of("--sizes", "64", "--shapes", "3x4x5", "--shapes", "2x6x7x8", "--batch", "4") == [
        (64, 64, 64, 4), (3, 4, 5, 4), (6, 7, 8, 2)]  # a shape's own B wins over --batch
    default = shapes_of("--ladder")
    assert (4093, 4091, 4099, 1) in default and any(b > 1 for *_, b in default)
    assert any(m >= 8 * n for m, n, k, b in default) and any(k >= 8 * m for m, n, k, b in default)


def test_kernel_selection():
    bf16_kernels = [spec.name for spec in kernels.SPECS if spec.precision == "bf16"]
    assert kernels_of("--ladder", "--dtype", "bf16") == ["cublas_bf16", "cublaslt_bf16", *bf16_kernels]
    assert kernels_of("--kernels", "all") == defaults.ladder_kernels()
    assert kernels_of("--kernels", "naive,cublas_fp16") == ["naive", "cublas_fp16"]
    assert kernels_of("--kernels", "naive", "--dtype", "fp32,bf16") == ["naive"]


def test_default_kernels_cover_every_precision_once():
    names = defaults.ladder_kernels()
    optional = set(kernels.absent_baselines())  # CuPy joins the defaults only where installed
    named = {name for name in kernels.ALL if kernels.precision_of(name) not in precision.ALL_NAMES}  # fp8: by name
    assert named and len(names) == len(set(names)) and set(names) == set(kernels.ALL) - optional - named
    assert set(defaults.ladder_kernels(["fp8"])) == named - optional
    assert names.index("cublas") < names.index("naive") and names[-1] == "numpy"


def test_sweep_steps_run_each_kernel_in_its_precision_and_batched_shapes_on_the_batched_baseline():
    steps = runner.sweep_steps(["cublas", "naive", "cublas_batched", "cublas_bf16", "numpy"], [(64, 64, 64), (8, 8, 8, 3)])
    got = [(step.problem.label, step.shape_index, step.precision, step.kernels, [n for n, _ in step.not_run])
           for step in steps]
    assert runner.case_count(steps) == 6
    assert got == [
        ("64x64x64", 0, "fp32", ["cublas", "naive", "numpy"], []),
        # Kernels of one GEMM per launch do not run the batched shape: recorded, with why, not run.
        ("3x8x8x8", 1, "fp32", ["cublas_batched", "numpy"], ["cublas", "naive"]),
        ("64x64x64", 0, "bf16", ["cublas_bf16"], []),
        ("3x8x8x8", 1, "bf16", [], ["cublas_bf16"]),
    ]
    assert "one GEMM per launch" in steps[1].not_run[0][1]
    assert all(name.startswith(("cupy", "torch")) for name in kernels.absent_baselines())  # optional libraries


# --- cublasGemmStridedBatchedEx through a fake library ----------------------------------
class FakeLib:
    HANDLE = 0xABC

    def __init__(self):
        self.calls, self.math_mode = [], 0

    def cublasCreate_v2(self, out):
        out._obj.value = self.HANDLE

    def cublasDestroy_v2(self, h):
        pass

    def cublasSetStream_v2(self, h, s):
        pass

    def cublasGetMathMode(self, h, out):
        out._obj.value = self.math_mode

    def cublasSetMathMode(self, h, mode):
        self.math_mode = mode

    def cublasGemmStridedBatchedEx(self, *a):
        self.calls.append((a, self.math_mode))


def test_gemm_strided_batched_ex_passes_the_swapped_operands_strides_and_types(monkeypatch):
    lib = FakeLib()
    monkeypatch.setattr(cublas, "_library", lambda: lib)
    with cublas.CublasHandle() as h:
        p = precision.get("fp32").cublas
        cublas.gemm_strided_batched_ex(h, 3, 4, 5, 2.0, 0xA0, 6, 18, 0xB0, 7, 35, 0.5, 0xC0, 8, 24, 9, types=p)
        with pytest.raises(ValueError, match="batch"):
            cublas.gemm_strided_batched_ex(h, 3, 4, 5, 1.0, 0, 6, 18, 0, 7, 35, 0.0, 0, 8, 24, -1, types=p)
    (a, mode), = lib.calls
    assert mode == cublas.MathMode.PEDANTIC == lib.math_mode, "pedantic for the call, kept for the next"
    # row-major C(3x4) = A(3x5) B(5x4) is column-major (n, m, k) = (4, 3, 5) with B first
    assert a[:6] == (FakeLib.HANDLE, 0, 0, 4, 3, 5)
    assert ctypes.cast(a[6], ctypes.POINTER(ctypes.c_float)).contents.value == 2.0
    assert a[7:12] == (0xB0, p.ab_type, 7, 35, 0xA0) and a[12:15] == (p.ab_type, 6, 18)
    assert a[16:] == (0xC0, p.c_type, 8, 24, 9, p.compute, cublas.CUBLAS_GEMM_DEFAULT)
