"""The tensor-core family's specs (kernels/tensor/) without a GPU: builds, SASS, rules, plans, tables.

Builds come from the run's build matrix (tests/build_matrix.py): every spec's default on
sm_80 and sm_90, and each code path (TF32 or not, cp.async or the register path) in one
configuration on one of them, drawn by the run's seed from those the specs name and the BF16
and TF32 sweep spaces;
``--full-matrix`` (or GEMM_DRIVER_FULL_MATRIX=1) compiles all of them. They go through the
session's cache that test_inspect_kernels.py shares. The launch plan is driven with stand-in
kernels and workspace, the tuned tables with files in a temporary folder.
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import build_matrix
from gemm_driver import cli, kernels, precision
from gemm_driver.bench import defaults, report, runner
from gemm_driver.bench.command import select_kernels
from gemm_driver.kernels import simt, tensor, tuned
from gemm_driver.kernels.build import build
from gemm_driver.kernels.launch import LaunchContext
from gemm_driver.kernels.tensor import mma_sync, packing, wmma
from gemm_driver.problem import GemmProblem
from gemm_driver.verify import check, reference
from test_tensor_gpu import tf32_probe

ROOT = Path(__file__).resolve().parent.parent
ARCHS = build_matrix.ARCHS
SPECS = {spec.name: spec for spec in tensor.SPECS}
LADDERS = {
    "bf16": ["wmma_bf16", "wmma_smem_bf16", "mma_sync_bf16", "mma_sync_tuned_bf16"],
    "fp16": ["wmma_fp16", "wmma_smem_fp16", "mma_sync_fp16", "mma_sync_tuned_fp16"],
    "tf32": ["mma_sync_tf32", "mma_sync_tuned_tf32"],
}
P256 = GemmProblem(256, 256, 256)


# --- the registry ----------------------------------------------------------------------
def test_each_precision_ladder_in_registry_order():
    for prec, names in LADDERS.items():
        ladder = [s.name for s in kernels.LADDER if s.precision == prec and s.name in SPECS]
        assert ladder == names
    assert set(SPECS) == {n for names in LADDERS.values() for n in names}
    for spec in tensor.SPECS:
        assert (spec.min_cc, spec.min_arch, spec.arch_specific, spec.in_ladder) == ((8, 0), "sm_80", False, True)
        assert spec.name.endswith(spec.precision)
        with pytest.raises(ValueError, match=f"{spec.name} needs sm_80 or newer; this GPU is sm_75"):
            spec.check_device((7, 5))


def test_list_shows_precision_and_min_arch(capsys):
    assert cli.main(["list", "--wide"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines() if line.strip()}
    for name, spec in SPECS.items():
        assert rows[name][1:4] == [spec.precision, "sm_80", spec.source]


@pytest.mark.parametrize("prec", ["bf16", "fp16", "tf32"])
def test_bench_dtype_selects_the_precision_ladder_beside_its_cublas(prec):
    names = select_kernels([], [prec], ladder=True)
    bases, ladder = list(precision.baselines(prec)), LADDERS[prec]
    assert precision.get(prec).baseline == bases[0] == f"cublas_{prec}"
    assert names[:len(bases) + len(ladder)] == bases + ladder  # then the Hopper family's, on sm_90a
    assert all(kernels.precision_of(n) == prec for n in names)
    assert names == defaults.ladder_kernels([prec])
    (step,) = runner.sweep_steps(names, [(512, 512, 512)])
    assert step.precision == prec and step.kernels[:len(bases) + len(ladder)] == bases + ladder


def test_bench_ladder_compares_each_rung_with_the_one_before_in_its_precision():
    def rec(kernel, dtype, ms):
        return {"kernel": kernel, "m": 512, "n": 512, "k": 512, "dtype": dtype, "mode": "hot", "status": "ok",
                "timing": {"median_ms": ms}}
    recs = [rec("cublas_bf16", "bf16", 1.0), rec("wmma_bf16", "bf16", 8.0), rec("wmma_smem_bf16", "bf16", 4.0),
            rec("mma_sync_bf16", "bf16", 2.0), rec("mma_sync_tuned_bf16", "bf16", 1.6),
            rec("mma_sync_tf32", "tf32", 3.0), rec("warptiled", "fp32", 5.0)]
    report.add_ladder(recs)
    previous = {r["kernel"]: (r["previous_rung"], r["speedup_vs_previous"]) for r in recs}
    assert previous["wmma_bf16"] == (None, None) and previous["mma_sync_tf32"] == (None, None)
    assert previous["wmma_smem_bf16"] == ("wmma_bf16", 2.0) and previous["mma_sync_bf16"] == ("wmma_smem_bf16", 2.0)
    assert previous["mma_sync_tuned_bf16"] == ("mma_sync_bf16", pytest.approx(1.25))


# --- builds: no spills, no local memory, tensor cores in every tensor rung and no other ----
# The matrix draws from the BF16 and TF32 sweep spaces too (build_matrix.SWEPT_KERNELS).
@pytest.mark.parametrize("b", build_matrix.selected(lambda b: b.spec.source.startswith("cu/tensor/")))
def test_configurations_build_without_spills_and_run_hmma(b):
    s = build_matrix.stats(b.spec, b.arch, b.config)
    assert (s["spill_bytes"], s["local_bytes"], s["local"]) == (0, 0, 0), b.label
    assert s["hmma"] > 0 and s["hgmma"] == 0, b.label
    assert s["registers"] <= 255 and s["threads_per_block"] * s["registers"] <= 65536, b.label


# Default builds, both archs: (fields that must be 0, fields that must be > 0). The rows for
# tests/test_inspect_kernels.py's FACTS. FFMA/FMUL appear in every epilogue (alpha, beta).
_WMMA = (("ldgsts", "bar", "hgmma"), ("hmma", "ldg32", "sts128"))  # from global; edges staged per warp
_WMMA_SMEM = (("hgmma",), ("hmma", "ldgsts", "bar", "lds32"))  # cp.async tiles; wmma.load from shared
_MMA = (("lds32", "lds128", "sts32", "sts128", "hgmma"), ("hmma", "ldgsts", "bar"))  # cp.async in, ldmatrix out
# TF32: B fragments by LDS.32; each landed tile rounded in place (LDS.128 + STS.128)
_MMA_TF32 = (("sts32", "hgmma"), ("hmma", "ldgsts", "bar", "lds32", "lds128", "sts128"))
TENSOR_FACTS = {"wmma_bf16": _WMMA, "wmma_fp16": _WMMA, "wmma_smem_bf16": _WMMA_SMEM, "wmma_smem_fp16": _WMMA_SMEM,
                "mma_sync_bf16": _MMA, "mma_sync_fp16": _MMA, "mma_sync_tuned_bf16": _MMA,
                "mma_sync_tuned_fp16": _MMA, "mma_sync_tf32": _MMA_TF32, "mma_sync_tuned_tf32": _MMA_TF32}


@pytest.mark.parametrize("arch", ARCHS)
def test_sass_facts_of_the_defaults(arch):
    assert set(TENSOR_FACTS) == set(SPECS)
    for name, (zero, positive) in TENSOR_FACTS.items():
        s = build_matrix.stats(SPECS[name], arch)
        assert {f: s[f] for f in zero} == dict.fromkeys(zero, 0), name
        assert all(s[f] > 0 for f in positive), (name, {f: s[f] for f in positive})


@pytest.mark.parametrize("arch", ARCHS)
def test_the_simt_ladder_has_no_tensor_core_instruction(arch):
    for spec in simt.SPECS:
        assert spec.precision == "fp32"
        s = build_matrix.stats(spec, arch)
        assert (s["hmma"], s["hgmma"]) == (0, 0) and s["ffma"] > 0, spec.name


def test_tf32_rounds_with_cvt_rna_and_the_skip_build_does_not():
    spec = SPECS["mma_sync_tf32"]
    ptx = build(spec, "sm_80").compiled.ptx
    assert b"cvt.rna.tf32.f32" in ptx and b"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx
    skip = replace(spec, options=(*spec.options, "-DTC_TF32_SKIP_ROUNDING"))
    assert b"cvt.rna.tf32" not in build(skip, "sm_80").compiled.ptx


def test_the_tf32_bound_cannot_tell_truncation_from_rounding():
    """Why the GPU test checks TF32 rounding exactly: a kernel whose tensor cores see raw FP32
    bits (low 13 mantissa bits ignored: truncation) stays inside the tf32 bound, which
    charges 2^-10 per factor; only the exact product of RNA-rounded inputs tells them apart."""
    rng = np.random.default_rng(1)
    p = GemmProblem(40, 24, 200)
    a, b, rounded, truncated = tf32_probe(p, "a", rng)
    ref = reference(p, a, b, None)
    product = lambda pair: (pair[0].astype(np.float64) @ pair[1]).astype(np.float32)
    assert check(p, product(rounded), ref, 0, "tf32").ok and check(p, product(truncated), ref, 0, "tf32").ok
    assert not np.array_equal(product(rounded), product(truncated))
    assert not np.array_equal(product(rounded), product((a, b)))
    assert not check(p, product(truncated), ref, 0, "fp32").ok  # the FP32 bound would see it


# --- rules and geometry ----------------------------------------------------------------
@pytest.mark.parametrize("name, overrides, message", [
    ("mma_sync_bf16", {"BK": 16}, "BK=16 is 1 mma k-step(s) of 16; the register double buffer needs an even "
                                  "number (BK a multiple of 32)"),
    ("mma_sync_tf32", {"BK": 32}, "a TF32 64x64 warp tile with BK=32 spills"),
    ("mma_sync_fp16", {"WARPS_M": 1}, "warp tile 128x64 holds 256 FP32 accumulators a lane; at most 128"),
    ("mma_sync_bf16", {"BM": 256, "BN": 256, "BK": 64, "WARPS_M": 4, "WARPS_N": 4, "STAGES": 5},
     "STAGES*(BM*BK+BK*BN)*sizeof(T) = 327680 bytes of shared memory; at most 232448"),
    ("mma_sync_tf32", {"BM": 64, "BN": 64, "WARPS_M": 1, "WARPS_N": 1},
     "a thread's chunks must share one swizzle phase: rows per pass 8 (A) a multiple of 8 and 2 (B) of 4"),
    ("mma_sync_tuned_tf32", {"ASYNC": 2}, "ASYNC=2 is not allowed; choose one of [0, 1]"),
    ("wmma_smem_fp16", {"BM": 256, "WARPS_M": 1}, "warp tile 256x64 is 64 accumulator fragments"),
    ("wmma_smem_bf16", {"BM": 64, "BN": 64, "BK": 16, "WARPS_M": 4, "WARPS_N": 4},
     "the 512 threads must split the A tile (128 chunks of 16 bytes) and the B tile (128) evenly"),
    ("wmma_smem_bf16", {"BM": 256, "BN": 256, "BK": 64, "WARPS_M": 4, "WARPS_N": 4, "STAGES": 4},
     "STAGES*(BM*(BK+8)+BK*(BN+8))*sizeof(T) = 282624 bytes of shared memory"),
    ("wmma_bf16", {"BM": 64}, "has no tunable 'BM'"),
    ("wmma_fp16", {"FRAGS_M": 8}, "FRAGS_M=8 is not allowed; choose one of [1, 2, 4]"),
])
def test_refused_configurations_name_the_rule(name, overrides, message):
    with pytest.raises(ValueError) as info:
        kernels.KERNELS[name].validate(P256, overrides)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_rules_stand_on_their_own_beyond_the_choice_lists():
    """The rules stand on their own: wider choice lists must not let a broken tile through."""
    assert "whole multiples of 16" in mma_sync._warp_tile(P256, {"BM": 96, "BN": 128, "WARPS_M": 4, "WARPS_N": 2})
    assert "the swizzle spans 128 bytes (BN >= 64)" in mma_sync._b_rows_span_the_swizzle("bf16")(P256, {"BN": 32})
    assert mma_sync._b_rows_span_the_swizzle("tf32")(P256, {"BN": 32}) is None
    t = {"BM": 64, "BN": 64, "BK": 16, "WARPS_M": 4, "WARPS_N": 4, "STAGES": 1}
    assert "stages a 16x16 FP32 tile per warp (16384 bytes)" in wmma._smem_staging_fits("bf16")(P256, t)
    assert "at most 16 fit in registers" in wmma._wmma_fragments_fit(P256, {"FRAGS_M": 8, "FRAGS_N": 4})


@pytest.mark.parametrize("name, threads, smem", [
    ("wmma_bf16", 128, 0), ("wmma_smem_fp16", 128, 3 * (128 * 40 + 32 * 136) * 2),
    ("mma_sync_bf16", 256, 4 * (128 * 32 + 32 * 256) * 2), ("mma_sync_fp16", 256, 98304),
    ("mma_sync_tf32", 256, 4 * (256 * 16 + 16 * 128) * 4), ("mma_sync_tuned_bf16", 128, 3 * (64 * 64 * 2) * 2),
])
def test_default_geometry_and_shared_memory_follow_the_file_headers(name, threads, smem):
    spec = SPECS[name]
    t = spec.resolve()
    assert spec.block(t) == (threads, 1, 1) and spec.dynamic_smem(t) == smem


def test_defaults_are_the_measured_best_at_4096():
    fp32_out = {"OUT": 0, "EPI": 0}  # D in FP32, no epilogue: what a row-major GEMM's problem sets
    assert SPECS["mma_sync_bf16"].resolve() == SPECS["mma_sync_fp16"].resolve() == {
        "BM": 128, "BN": 256, "BK": 32, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 4, "GROUP_M": 8, "ASYNC": 1, **fp32_out}
    assert SPECS["mma_sync_tf32"].resolve() == {
        "BM": 256, "BN": 128, "BK": 16, "WARPS_M": 4, "WARPS_N": 2, "STAGES": 4, "GROUP_M": 8, "ASYNC": 1, **fp32_out}
    assert SPECS["wmma_smem_bf16"].resolve() == {"BM": 128, "BN": 128, "BK": 32, "WARPS_M": 2, "WARPS_N": 2,
                                                 "STAGES": 3}
    assert SPECS["wmma_bf16"].resolve() == {"WARPS_M": 2, "WARPS_N": 2, "FRAGS_M": 4, "FRAGS_N": 4}


@pytest.mark.parametrize("name", list(SPECS))
@pytest.mark.parametrize("m, n", [(1, 1), (129, 257), (4093, 4091), (65, 63)])
def test_grid_is_n_tiles_by_m_tiles(name, m, n):
    spec = SPECS[name]
    for t in spec.configurations():
        gx, gy, gz = spec.grid(GemmProblem(m, n, 7), t)
        tm = t.get("BM") or t["WARPS_M"] * t["FRAGS_M"] * 16
        tn = t.get("BN") or t["WARPS_N"] * t["FRAGS_N"] * 16
        assert gz == 1 and (gx - 1) * tn < n <= gx * tn and (gy - 1) * tm < m <= gy * tm


# --- the packing launch plan (pure: stand-in kernels and workspace) ---------------------
def ceil(x, y):
    return -(-int(x) // y)


class FakeKernel:
    def __init__(self, name, log):
        self.name, self.log = name, log

    def pack(self, *args):
        return args

    def launch(self, grid, block, args, stream):
        self.log.append((self.name, tuple(grid), tuple(block), args))


def _plan(name, problem, a, b, c=(4096, 7, 4), **overrides):
    """Run the spec's launch plan on stand-ins; -> (launches in order, workspace asked for)."""
    spec = SPECS[name]
    log, asked = [], {}
    fakes = {"main": FakeKernel("main", log), "pack": FakeKernel("pack", log)}

    def workspace(scratch, nbytes, *, zeroed=False):
        asked[scratch] = nbytes
        return {"packed_a": 0x10000, "packed_b": 0x20000}[scratch]

    operand = lambda ptr, ld, size: SimpleNamespace(ptr=ptr, ld=ld, itemsize=size)
    size = precision.get(spec.precision).itemsize
    t = spec.validate(problem, overrides)
    ctx = LaunchContext(spec, fakes, problem, operand(*a, size), operand(*b, size), operand(*c), t, "stream",
                      workspace)
    assert not log, "a plan is made when the launcher is, and launches nothing before it is called"
    spec.launch_recipe(ctx)()
    return log, asked


def test_aligned_operands_launch_the_gemm_alone():
    p = GemmProblem(300, 200, 64, 1.5, 0.0)
    log, asked = _plan("mma_sync_bf16", p, (4096, 64), (8192, 200))
    assert asked == {} and [entry[0] for entry in log] == ["main"]
    _, grid, block, args = log[0]
    assert grid == (1, 3, 1) and block == (256, 1, 1)
    assert args == (300, 200, 64, 1.5, 4096, 64, 8192, 200, 0.0, 4096, 7, 0)  # ..., C, ldc, no bias


def test_a_misaligned_a_is_packed_with_its_leading_dimension_rounded_up():
    p = GemmProblem(67, 131, 4099)
    log, asked = _plan("mma_sync_fp16", p, (4096 + 2, 4099), (8192, 136))
    assert [entry[0] for entry in log] == ["pack", "main"]
    assert log[0][3] == (67, 4099, 4096 + 2, 4099, 0x10000, 4104)  # rows, cols, src, ld, dst, ld rounded to 8
    assert log[0][2] == (packing.PACK_THREADS, 1, 1) and log[0][1] == (ceil(67 * 4104 / 8, 256), 1, 1)
    assert asked == {"packed_a": 67 * 4104 * 2}
    assert log[1][3][4:8] == (0x10000, 4104, 8192, 136)


def test_an_odd_ldb_is_packed_and_tf32_needs_multiples_of_four():
    p = GemmProblem(5, 33, 17)
    log, asked = _plan("mma_sync_tf32", p, (4096, 20), (8192, 33))
    assert [entry[0] for entry in log] == ["pack", "main"] and log[0][3] == (17, 33, 8192, 33, 0x20000, 36)
    assert asked == {"packed_b": 17 * 36 * 4} and log[1][3][4:8] == (4096, 20, 0x20000, 36)
    log, asked = _plan("mma_sync_tuned_tf32", p, (4100, 17), (8200, 34))  # both: 4-byte off, odd ld
    assert [entry[0] for entry in log] == ["pack", "pack", "main"] and set(asked) == {"packed_a", "packed_b"}


def test_the_register_path_never_packs():
    log, asked = _plan("mma_sync_bf16", GemmProblem(67, 131, 4099), (4098, 4099), (8190, 131), ASYNC=0)
    assert asked == {} and [entry[0] for entry in log] == ["main"] and log[0][3][4:8] == (4098, 4099, 8190, 131)


def test_the_pack_grid_is_capped():
    log, _ = _plan("mma_sync_bf16", GemmProblem(40000, 64, 4099), (4098, 4099), (8192, 64))
    assert log[0][1] == (packing.PACK_MAX_BLOCKS, 1, 1)


# --- the tuned variants: tables, fallback, sweep space, tools/autotune.py ---------------
def test_table_paths_keep_autotuned_where_it_was():
    gpu = "NVIDIA H100 80GB HBM3"
    assert tuned.tuned_path(gpu) == tuned.tuned_path(gpu, kernel="autotuned") == tuned.TUNED_DIR / "h100-80gb-hbm3.json"
    assert tuned.tuned_path(gpu, kernel="mma_sync_tuned_bf16").name == "h100-80gb-hbm3.mma_sync_tuned_bf16.json"


@pytest.mark.parametrize("prec", ["bf16", "fp16", "tf32"])
def test_without_a_table_the_tuned_kernel_runs_mma_sync_defaults_and_says_so(monkeypatch, tmp_path, prec):
    real = tuned.load_table
    monkeypatch.setattr(tuned, "load_table", lambda gpu, directory=None, kernel=None: real(gpu, tmp_path, kernel))
    spec = SPECS[f"mma_sync_tuned_{prec}"]
    tunables, why = spec.choose(GemmProblem(4096, 4096, 4096), "NVIDIA Imaginary GPU")
    assert "OUT" not in tunables and "EPI" not in tunables  # the problem sets those (a BF16 D, say)
    assert spec.resolve(tunables) == SPECS[f"mma_sync_{prec}"].resolve() != spec.resolve()
    assert why == (f"no tuned table for this GPU (imaginary-gpu.mma_sync_tuned_{prec}.json); "
                   f"mma_sync_{prec} defaults")


def test_with_a_table_the_nearest_shape_wins(monkeypatch, tmp_path):
    real = tuned.load_table
    monkeypatch.setattr(tuned, "load_table", lambda gpu, directory=None, kernel=None: real(gpu, tmp_path, kernel))
    small, large = mma_sync.TUNE_SPACE["bf16"][-3], mma_sync.TUNE_SPACE["bf16"][0]
    table = {"schema": tuned.SCHEMA, "kernel": "mma_sync_tuned_bf16", "gpu": "NVIDIA Imaginary GPU",
             "entries": [{"shape": [1024, 1024, 1024], "best": small}, {"shape": [4096, 4096, 4096], "best": large}]}
    (tmp_path / "imaginary-gpu.mma_sync_tuned_bf16.json").write_text(json.dumps(table))
    spec = SPECS["mma_sync_tuned_bf16"]
    assert spec.choose(GemmProblem(1000, 900, 1100), "NVIDIA Imaginary GPU") == (small, "tuned at 1024x1024x1024")
    assert spec.choose(GemmProblem(8192, 8192, 8192), "NVIDIA Imaginary GPU")[0] == large
    # The FP32 table of the same GPU is another file, and a table names its kernel.
    assert tuned.load_table("NVIDIA Imaginary GPU", tmp_path) is None
    with pytest.raises(ValueError, match="a table of kernel 'mma_sync_tuned_bf16', expected 'mma_sync_tuned_fp16'"):
        (tmp_path / "imaginary-gpu.mma_sync_tuned_fp16.json").write_text(json.dumps(table))
        tuned.load_table("NVIDIA Imaginary GPU", tmp_path, kernel="mma_sync_tuned_fp16")


def test_with_a_timed_table_the_vote_decides_whatever_the_table_spelt(monkeypatch, tmp_path):
    """A table with timings (tools/autotune.py keeps every configuration's) is read by the vote,
    as autotuned's is: the neighbours' fastest wins, whether the table names a configuration by
    every tunable (older tables) or by those away from the tuned variant's defaults."""
    real = tuned.load_table
    monkeypatch.setattr(tuned, "load_table", lambda gpu, directory=None, kernel=None: real(gpu, tmp_path, kernel))
    small, large = mma_sync.TUNE_SPACE["bf16"][-3], mma_sync.TUNE_SPACE["bf16"][0]
    sparse = {k: v for k, v in large.items() if mma_sync.TUNED_DEFAULTS["bf16"][k] != v}
    runner = lambda t, tf: {"tunables": t, "tflops": tf}  # noqa: E731
    entries = [{"shape": [1024, 1024, 1024], "best": small, "tflops": 200.0, "runners_up": [runner(sparse, 150.0)]},
               {"shape": [2048, 2048, 2048], "best": small, "tflops": 300.0, "runners_up": [runner(large, 290.0)]},
               {"shape": [8192, 8192, 8192], "best": sparse, "tflops": 500.0, "runners_up": [runner(small, 300.0)]}]
    table = {"schema": tuned.SCHEMA, "kernel": "mma_sync_tuned_bf16", "gpu": "NVIDIA Imaginary GPU", "entries": entries}
    (tmp_path / "imaginary-gpu.mma_sync_tuned_bf16.json").write_text(json.dumps(table))
    spec = SPECS["mma_sync_tuned_bf16"]
    tunables, why = spec.choose(GemmProblem(8000, 8100, 7900), "NVIDIA Imaginary GPU")
    assert tunables == large and "predicted" in why and "8192x8192x8192" in why
    assert spec.choose(GemmProblem(1000, 1000, 1000), "NVIDIA Imaginary GPU")[0] == small
    assert all(c in mma_sync.offered_configs(spec, GemmProblem(4096, 4096, 4096)) for c in (small, large))


def test_tune_spaces_are_small_valid_and_hold_the_measured_winners():
    for name, space in tensor.TUNE_SPACES.items():
        spec = kernels.KERNELS[name]
        assert 8 <= len(space) <= 16 and len({tuple(sorted(c.items())) for c in space}) == len(space)
        for config in space:
            assert "OUT" not in config and spec.validate(GemmProblem(4096, 4096, 4096), config) == spec.resolve(config)
        plain = SPECS[name.replace("_tuned", "")]
        assert plain.resolve() in map(spec.resolve, space) and spec.resolve() in map(spec.resolve, space)
    assert tensor.TUNE_SPACES["mma_sync_tuned_fp16"] == tensor.TUNE_SPACES["mma_sync_tuned_bf16"]
    tiles = {(c["BM"], c["BN"], c["BK"], c["WARPS_M"], c["WARPS_N"]) for c in tensor.TUNE_SPACES["mma_sync_tuned_bf16"]}
    assert {(64, 64, 64, 2, 2), (128, 256, 32, 2, 4), (256, 128, 64, 4, 2), (128, 128, 64, 2, 2)} <= tiles


def test_committed_tensor_tables_resolve():
    """Per-kernel tables (<gpu>.<kernel>.json) written by tools/autotune.py --kernel ... --write."""
    for path in sorted(tuned.TUNED_DIR.glob("*.*.json")):
        slug, name = path.stem.split(".", 1)
        if name == "hopper_bf16":  # its candidates are per shape (test_hopper_selection.py)
            continue
        document = json.loads(path.read_text())
        assert document["schema"] == tuned.SCHEMA and document["kernel"] == name
        assert tuned.gpu_slug(document["gpu"]) == slug
        spec = kernels.KERNELS[name]
        for entry in document["entries"]:
            spec.validate(GemmProblem(*entry["shape"]), entry["best"])
        first = GemmProblem(*document["entries"][0]["shape"])
        tunables, why = spec.choose(first, document["gpu"])  # the vote over the table's timings
        assert "predicted" in why and spec.validate(first, tunables)


def _autotune_tool():
    spec = importlib.util.spec_from_file_location("autotune_tool", ROOT / "tools" / "autotune.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_autotune_tool_sweeps_every_tuned_kernel_and_refuses_others(capsys):
    tool = _autotune_tool()
    assert set(tool.TARGETS) == {"autotuned", *tensor.TUNE_SPACES, "hopper_bf16", "hopper_tf32"}
    assert tool.TARGETS["autotuned"][0] == "warptiled"
    assert tool.targets("mma_sync_tuned_bf16, mma_sync_tuned_tf32") == ["mma_sync_tuned_bf16", "mma_sync_tuned_tf32"]
    with pytest.raises(SystemExit) as info:
        tool.main(["--kernel", "mma_sync_bf16"])  # refused before any GPU is looked for
    assert info.value.code == 2
    assert "--kernel 'mma_sync_bf16': choose from autotuned, mma_sync_tuned_bf16" in capsys.readouterr().err


def test_signatures_are_the_registry_contract():
    for spec in tensor.SPECS:
        text = (ROOT / spec.source).read_text()
        base = spec.entry.split("<")[0]
        params = re.search(re.escape(base) + r"\s*\(([^)]*)\)", text, re.S).group(1)
        kinds = [p.split()[-2] if "*" not in p else "ptr" for p in params.replace("__restrict__", "").split(",")]
        sgemm = ("int", "int", "int", "float", "ptr", "int", "ptr", "int", "float", "ptr", "int")
        bias = ("ptr",) if spec.source.endswith("mma_sync.cu") else ()  # a linear layer's bias vector
        assert tuple(kinds) == spec.signature == (*sgemm, *bias)
