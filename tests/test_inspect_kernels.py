"""The inspection tools on the real kernels, with no GPU: NVRTC compiles, nvdisasm reads.

The spill gate runs on the run's build matrix (tests/build_matrix.py): every registered
kernel's default on sm_80 and sm_90, and each code path of its family on one of them, drawn
by the run's seed; ``--full-matrix`` (or GEMM_DRIVER_FULL_MATRIX=1) gates every
configuration. The fact table states what each rung's SASS must (not) contain; a new rung
must add its row, e.g. 128-bit LDG for the vectorised rung, LDGSTS for cp.async, HMMA for
tensor cores (HGMMA when built for sm_90a).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import build_matrix
from gemm_driver.kernels.sources import read_source
from gemm_driver import cli, kernels
from gemm_driver.inspection import disassemble, main_loop, mix, report
from gemm_driver.cuda.nvrtc import parse_arch
from gemm_driver.kernels.build import build
from gemm_driver.kernels.spec import cc_of

ROOT = Path(__file__).resolve().parent.parent
GATE_ARCHS = build_matrix.ARCHS


@pytest.mark.parametrize("b", build_matrix.selected())
def test_no_kernel_spills_or_uses_local_memory(b):
    stats = build_matrix.stats(b.spec, b.arch, b.config)
    assert (stats["spill_bytes"], stats["local_bytes"], stats["local"]) == (0, 0, 0), (
        f"{report.label(stats)}: {stats['spill_bytes']} B spilled, {stats['local_bytes']} B stack, "
        f"{stats['local']} LDL/STL")


# kernel -> (tunables, fields that must be 0, fields that must be > 0), checked on both archs.
NO_TENSOR_CORES = ("hmma", "hgmma")
FACTS = {
    "naive": ({}, ("ldg64", "ldg128", "ldgsts", "lds32", "lds128", "bar", *NO_TENSOR_CORES), ("ffma", "ldg32")),
    "coalesced": ({}, ("ldg64", "ldg128", "ldgsts", "lds32", "bar", *NO_TENSOR_CORES), ("ffma", "ldg32")),
    "smem_tiled": ({"TILE": 32, "PAD": 0}, ("ldg128", "ldgsts", *NO_TENSOR_CORES),
                   ("ffma", "bar", "sts32", "lds32", "lds128")),
    "ptx_naive": ({}, ("lds32", "lds128", "sts32", "bar", *NO_TENSOR_CORES), ("ffma", "ldg32")),
    # cp.async fills shared memory (LDGSTS, no STS); fragments are LDS.128 only
    "warptiled": ({}, ("sts32", "sts128", "lds64", *NO_TENSOR_CORES), ("ffma", "ldgsts", "lds128", "bar")),
    # stream-K adds the peers' partial tiles: FADD, and still no shared stores (cp.async fills it)
    "stream_k": ({}, ("sts32", "sts128", "lds64", *NO_TENSOR_CORES), ("ffma", "ldgsts", "lds128", "bar", "fadd")),
    "autotuned": ({}, ("sts32", "sts128", "lds64", *NO_TENSOR_CORES), ("ffma", "ldgsts", "lds128", "bar")),
    # ladder.py's rungs: B fragments as LDS.128 from blocktile_2d on; float4 global loads
    # and STS.128 of B from vectorized on; cp.async (LDGSTS, no STS) in double_buffered.
    "blocktile_1d": ({}, ("ldg128", "ldgsts", "sts128", *NO_TENSOR_CORES), ("ffma", "bar", "ldg32", "sts32")),
    "blocktile_2d": ({}, ("ldg128", "ldgsts", "sts128", *NO_TENSOR_CORES), ("ffma", "bar", "ldg32", "lds128")),
    "vectorized": ({}, ("ldgsts", *NO_TENSOR_CORES),  # lds32: NEARLY_ZERO
                   ("ffma", "bar", "ldg128", "lds128", "sts128")),
    "bank_conflict_free": ({}, ("ldgsts", *NO_TENSOR_CORES), ("ffma", "bar", "ldg128", "lds128", "sts128")),
    "double_buffered": ({"ASYNC": 1}, ("ldg128", "sts32", "sts128", *NO_TENSOR_CORES),  # lds32: NEARLY_ZERO
                        ("ffma", "bar", "ldgsts", "lds128")),
    # Tensor cores (sm_80+): WMMA straight from global memory (no shared memory at all), then
    # out of cp.async-filled shared tiles; mma.sync with ldmatrix (no LDS/STS of 2-byte tiles).
    **dict.fromkeys(("wmma_bf16", "wmma_fp16"), ({}, ("ldgsts", "bar", "hgmma"), ("hmma", "ldg32", "sts128"))),
    **dict.fromkeys(("wmma_smem_bf16", "wmma_smem_fp16"), ({}, ("hgmma",), ("hmma", "ldgsts", "bar", "lds32"))),
    **dict.fromkeys(("mma_sync_bf16", "mma_sync_fp16", "mma_sync_tuned_bf16", "mma_sync_tuned_fp16"),
                    ({}, ("lds32", "lds128", "sts32", "sts128", "hgmma"), ("hmma", "ldgsts", "bar"))),
    # TF32: B fragments by 32-bit shared loads, each tile rounded once in shared memory (STS.32)
    **dict.fromkeys(("mma_sync_tf32", "mma_sync_tuned_tf32"),
                    ({}, ("sts32", "hgmma"), ("hmma", "ldgsts", "bar", "lds32", "lds128", "sts128"))),
    # Hopper (sm_90a): wgmma from TMA-filled shared memory; no mma.sync, no cp.async.
    **dict.fromkeys([f"{rung}_{p}" for rung in ("wgmma_tma", "warp_specialized", "persistent", "cluster")
                     for p in ("bf16", "fp16", "tf32")], ({}, ("hmma", "ldgsts", "local"), ("hgmma", "ffma"))),
    # the last rung: staged epilogue (STS.64 / LDS.128) and the packing kernel's 16-byte loads
    **dict.fromkeys(("hopper_bf16", "hopper_fp16"), ({}, ("hmma",), ("hgmma", "sts64", "lds128", "ldg128"))),
    "hopper_tf32": ({}, ("hmma",), ("hgmma", "lds64")),  # B^T fragments from shared memory by LDS.64
    # FP8 (QGMMA counts as hgmma) with block scales: promotion by FFMA, the scales by 32-bit loads
    "hopper_fp8": ({"SCALING": 2}, ("hmma", "local"), ("hgmma", "ffma", "ldg32", "sts64")),
}


def test_every_registered_kernel_has_a_fact_row():
    assert set(kernels.KERNELS) <= set(FACTS), "add the new rung's SASS facts to FACTS"




@pytest.mark.parametrize("name, arch", [  # each in its build's group: the matrix makes the defaults
    pytest.param(name, arch, id=f"{name}-{arch}", marks=build_matrix.group(kernels.KERNELS[name], arch, FACTS[name][0]))
    for arch in GATE_ARCHS for name in FACTS])
def test_sass_facts(name, arch):
    tunables, zero, positive = FACTS[name]
    spec = kernels.KERNELS[name]
    if not spec.runs_on(cc_of(parse_arch(arch)[0])):
        pytest.skip(f"{name} does not run on {arch}")
    stats = build_matrix.stats(spec, arch, tunables)
    assert {f: stats[f] for f in zero} == dict.fromkeys(zero, 0)
    assert all(stats[f] > 0 for f in positive), {f: stats[f] for f in positive}
    for field, most in build_matrix.NEARLY_ZERO.get(name, {}).items():
        assert stats[field] <= most, (field, stats[field])


@pytest.mark.parametrize("tile", (16, 32))
def test_smem_tiled_main_loop_has_tile_ffma_per_tile_and_two_barriers(tile):
    loop = _main_loop_mix("smem_tiled", "sm_90", {"TILE": tile, "PAD": 0})
    assert (loop["ffma"], loop["bar"], loop["sts32"]) == (tile, 2, 2)
    # The A row is read as float4 (LDS.128, a quarter of the reads); B one float per i.
    assert (loop["lds128"], loop["lds32"]) == (tile // 4, tile)


def test_padding_costs_smem_tiled_its_128_bit_shared_loads():
    loop = _main_loop_mix("smem_tiled", "sm_90", {"TILE": 32, "PAD": 1})
    assert (loop["lds128"], loop["lds32"]) == (0, 64)  # rows of 33 floats are not 16-byte aligned


@pytest.mark.parametrize("name", ["naive", "coalesced", "ptx_naive"])
def test_main_loop_found_and_does_the_multiply_adds(name):
    loop = _main_loop_mix(name, "sm_80", {})
    assert loop["ffma"] >= 1 and loop["ldg32"] >= 2 * loop["ffma"]  # one A and one B load per FMA


def _main_loop_mix(name, arch, tunables):
    built = build(kernels.KERNELS[name], arch, tunables)
    loop = main_loop(disassemble(built.compiled.cubin, built.entry))
    assert loop is not None
    return mix.count(mix.executed(loop.instructions))


@pytest.mark.parametrize("tunables, blocks", [({"TILE": 32}, 2), ({"TILE": 16}, 8)])
def test_stats_occupancy_of_smem_tiled(tunables, blocks):
    stats = build_matrix.stats(kernels.KERNELS["smem_tiled"], "sm_90", tunables)
    assert (stats["blocks_per_sm"], stats["occupancy"]) == (blocks, 1.0)
    assert stats["constant_bytes"] > 0  # from the cubin: ptxas no longer prints it for sm_90


# ---- the command -------------------------------------------------------------------------

def _run(capsys, *argv):
    code = cli.main(["inspect", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_stats_json_carries_every_field(capsys):
    code, out, _ = _run(capsys, "stats", "naive", "smem_tiled:TILE=16", "--arch", "sm_80", "--json")
    rows = json.loads(out)
    assert code == 0 and [r["kernel"] for r in rows] == ["naive", "smem_tiled"]
    assert set(report.FIELDS) | {"kernel", "arch", "tunables", "entry"} == set(rows[0])
    assert rows[1]["tunables"] == {"TILE": 16, "PAD": 0}


def test_stats_table_has_one_row_per_kernel_in_each_part(capsys):
    code, out, _ = _run(capsys, "stats", "naive", "smem_tiled", "--arch", "sm_90")  # two: nvdisasm is slow
    assert code == 0
    lines = out.splitlines()
    parts = sum(line.startswith("kernel ") for line in lines)  # resources and mix, split to fit 120 columns
    assert parts >= 2 and sum(line.split()[:2] == ["smem_tiled", "sm_90"] for line in lines) == parts
    assert sum(line.split()[:2] == ["naive", "sm_90"] for line in lines) == parts
    assert any(line.endswith("] TILE=32 PAD=0") for line in lines)  # its tunables, as a numbered note


def test_diff_shows_the_fields_that_changed(capsys):
    code, out, _ = _run(capsys, "diff", "smem_tiled", "smem_tiled:PAD=1", "--arch", "sm_90")
    changed = {line.split()[0] for line in out.splitlines()[1:-1]}
    assert code == 0 and {"shared_bytes", "lds32", "lds128"} <= changed and "ffma" not in changed
    code, out, _ = _run(capsys, "diff", "smem_tiled", "smem_tiled:PAD=1", "--arch", "sm_90", "--json")
    assert json.loads(out)["changed"]["lds128"] == [8, 0]


def _line_of(relative: str, text: str) -> int:
    lines = read_source(relative).decode().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


def test_sass_loop_and_ptx_source(capsys):
    fma_note = f"// smem_tiled.cu:{_line_of('cu/simt/smem_tiled.cu', 'acc += As[ty][i]')}  acc +="
    code, out, _ = _run(capsys, "sass", "smem_tiled", "--loop", "--arch", "sm_90")
    assert code == 0 and "main loop" in out and "LDS.128" in out and fma_note in out
    code, out, _ = _run(capsys, "ptx", "smem_tiled", "--source", "--set", "TILE=16", "--arch", "sm_80")
    assert code == 0 and ".target sm_80" in out and fma_note in out


@pytest.mark.parametrize("argv, message", [
    (["stats", "nope"], "unknown kernel 'nope'"),
    (["stats", "cublas"], "provider"),
    (["sass", "naive", "--arch", "sm_9"], "cannot target sm_9"),
    (["sass", "naive", "--arch", "ampere"], "not of the form"),
    (["ptx", "smem_tiled", "--set", "TILE=17"], "TILE=17 is not allowed"),
    (["ptx", "smem_tiled", "--set", "TILE"], "NAME=INTEGER"),
    (["diff", "naive", "smem_tiled:FOO=1"], "no tunable 'FOO'"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err


def test_script_runs_from_the_repo_root_despite_its_name():
    """tools/inspect.py shares its name with the stdlib module; it must still start."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "tools/inspect.py", "stats", "naive", "--arch", "sm_80", "--json"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["kernel"] == "naive"


@pytest.mark.parametrize("config", [{}, {"BM": 64, "BN": 64, "WM": 32, "WN": 32, "TN": 4, "STAGES": 4}])
def test_warptiled_main_loop_is_ffma_fed_by_lds128_and_cp_async(config):
    """Per k tile a lane does TM*TN*BK FMAs from BK*(TM+TN)/4 LDS.128, with one barrier and
    one cp.async per 4 floats of A it copies (4-byte, transposed) plus one per float4 of B."""
    spec = kernels.KERNELS["warptiled"]
    t = spec.resolve(config)
    loop = _main_loop_mix("warptiled", "sm_90", config)
    threads = spec.block(t)[0]
    a_copies, b_copies = t["BM"] * t["BK"] // threads, t["BN"] * t["BK"] // (4 * threads)
    assert loop["ffma"] == t["TM"] * t["TN"] * t["BK"]
    assert loop["lds128"] == t["BK"] * (t["TM"] + t["TN"]) // 4 and loop["lds32"] == 0
    assert loop["bar"] == 1 and loop["ldgsts"] == a_copies + b_copies
