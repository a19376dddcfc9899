"""The Hopper family (kernels/hopper/, cu/hopper/) without a GPU.

Builds: the run's build matrix (tests/build_matrix.py: every spec's default, each code path,
a seeded sample of the other configurations; ``--full-matrix`` for all) compiles for sm_90a
(and is refused for sm_80 / sm_100 in one line), with no spill and no local memory in any
entry; the GEMM entries' SASS holds
HGMMA and UTMALDG (TMA loads; UTMASTG, TMA stores, in any_shape's entries alone), and the
warp-specialised ones the setmaxnreg split
(USETMAXREG, read from the SASS: the inspection stats have no field for it). A probe
compiled against the kernels' own Config structs checks the numbers the host relies on
(dynamic shared memory, threads, TMA box rows). Then the pure parts: rules, grids, split-K
scratch, packing decisions, ``choose``, a launch plan run on a fake context, and
tools/gen_wgmma.py reproducing cu/hopper/wgmma.cuh byte for byte.
"""

from __future__ import annotations

import ctypes
import importlib.util
import struct
from pathlib import Path
from dataclasses import replace

import pytest
from hypothesis import example, given, settings

import build_matrix
from hypothesis import strategies as st

from gemm_driver import kernels
from gemm_driver.cuda import module, tensor_map
from gemm_driver.cuda.errors import UnsupportedProblem
from gemm_driver.cuda.module import C_TYPES, PackedArgs
from gemm_driver.cuda.nvrtc import compile_cuda
from gemm_driver.kernels import hopper
from gemm_driver.kernels.build import build
from gemm_driver.kernels.hopper import geometry as geo
from gemm_driver.kernels.hopper import recipe, rungs, selection, tf32_selection
from gemm_driver.kernels.hopper.rungs import SELECTORS, entry_geometry
from gemm_driver.kernels.launch import LaunchContext
from gemm_driver.kernels.sources import included_headers
from gemm_driver.problem import GemmProblem

ROOT = Path(__file__).resolve().parent.parent
SPECS = {spec.name: spec for spec in hopper.SPECS}
LADDERS = {
    "bf16": ["wgmma_tma_bf16", "warp_specialized_bf16", "persistent_bf16", "cluster_bf16", "hopper_bf16"],
    "fp16": ["wgmma_tma_fp16", "warp_specialized_fp16", "persistent_fp16", "cluster_fp16", "hopper_fp16"],
    "tf32": ["wgmma_tma_tf32", "warp_specialized_tf32", "persistent_tf32", "cluster_tf32", "hopper_tf32"],
}
CONFIGURATIONS = [(name, t) for name, spec in SPECS.items() for t in spec.configurations()]
GEMM_ENTRIES = {"main", "cluster", "swapped", "stored_nk", "stored_nk_cluster", "decode", "decode_cluster"}
TMA_STORE_ENTRIES = {"main", "cluster", "stored_nk", "stored_nk_cluster"}  # of the last rungs (hopper_*)
P256 = GemmProblem(256, 256, 256)


# ---------------------------------------------------------------- registry
@pytest.mark.parametrize("precision", LADDERS)
def test_each_precision_ladder_ends_with_the_hopper_rungs_in_order(precision):
    ladder = [s.name for s in kernels.LADDER if s.precision == precision]
    assert ladder[-5:] == LADDERS[precision]
    assert [s.name for s in hopper.SPECS if s.precision == precision] == LADDERS[precision]


def test_every_hopper_spec_is_sm_90a_only():
    for spec in hopper.SPECS:
        assert spec.arch_specific and spec.min_cc == (9, 0) and spec.min_arch == "sm_90a"
        assert spec.runs_on((9, 0)) and not spec.runs_on((8, 0)) and not spec.runs_on((10, 0))
        assert spec.source.startswith("cu/hopper/") and spec.launch_recipe is not None
        assert 1 <= len(spec.configurations()) <= 6  # the build matrix's share (tests/build_matrix.py)


@pytest.mark.parametrize("arch", ["sm_80", "sm_100", "sm_89"])
def test_other_architectures_are_refused_in_one_line(arch):
    for spec in hopper.SPECS:
        with pytest.raises(ValueError) as info:
            build(spec, arch)
        message = str(info.value)
        assert "\n" not in message
        assert message == f"{spec.name} runs on sm_90a only (arch-specific wgmma/TMA code); cannot build it for {arch}"


# ---------------------------------------------------------------- builds and SASS
def sass(result, entry="main"):
    """The parsed SASS of one entry; nvdisasm runs once per cubin (it prints every function),
    and the build's SASS statistics read the same listing (build_matrix.listing)."""
    return build_matrix.sass(result, entry)


@pytest.mark.parametrize("b", build_matrix.selected(lambda b: b.spec.source.startswith("cu/hopper/")))
def test_configuration_builds_for_sm_90a_without_spills_and_issues_wgmma_and_tma(b):
    name, result = b.spec.name, build_matrix.built(b.spec, b.arch, b.config)
    assert result.compiled.arch == "sm_90a"
    assert set(result.entries) == {"main", *(e.name for e in SPECS[name].entries_for(b.config))}
    for entry, symbol in result.entries.items():
        r = result.compiled.resources[symbol]
        assert (r.spill_bytes, r.stack_bytes) == (0, 0), f"{name} {entry}: {r}"
        opcodes = [i.opcode for i in sass(result, entry).instructions]
        assert not [o for o in opcodes if o.split(".")[0] in ("LDL", "STL")], entry
        if entry in GEMM_ENTRIES:
            assert sum(o.startswith(("HGMMA", "QGMMA")) for o in opcodes) >= 4, entry  # QGMMA: FP8's wgmma
            assert sum(o.startswith("UTMALDG") for o in opcodes) >= 2, entry
            # any_shape's entries store C by TMA (EPILOGUE 3), hopper_tf32's for B stored N x K
            # too; the rungs before it, the swapped entry and the register-A kernel store from registers
            stores = sum(o.startswith("UTMASTG") for o in opcodes)
            by_tma = (name.startswith("hopper_") and entry in TMA_STORE_ENTRIES
                      and (name, entry) != ("hopper_tf32", "main"))
            assert (stores >= 1) == by_tma, (name, entry, stores)
        else:  # the packing kernels copy with plain loads and stores
            assert not any(o.startswith(("HGMMA", "UTMALDG")) for o in opcodes), entry


def _setmaxnreg(result, entry="main"):
    """{'DEALLOC': n, 'TRY_ALLOC': n}: the register counts setmaxnreg hands out, from the SASS."""
    found = {}
    for i in sass(result, entry).instructions:
        if i.opcode.startswith("USETMAXREG"):
            found[i.opcode.split(".")[1]] = int(i.operands.split(",")[-1].strip(), 16)
    return found


def _in_build_groups(cases):
    """Each case in its build's xdist group (build_matrix.group): most are builds the matrix makes."""
    return [pytest.param(*case, marks=build_matrix.group(SPECS[case[0]], "sm_90", case[1])) for case in cases]


@pytest.mark.parametrize("name, tunables, entry, split", _in_build_groups([
    ("wgmma_tma_bf16", {}, "main", {}),  # one warpgroup: nothing to hand over
    ("warp_specialized_bf16", {}, "main", {"DEALLOC": 40, "TRY_ALLOC": 232}),
    ("persistent_fp16", {}, "main", {"DEALLOC": 56, "TRY_ALLOC": 224}),
    ("cluster_tf32", {}, "main", {"DEALLOC": 56, "TRY_ALLOC": 224}),
    ("hopper_bf16", {}, "main", {"DEALLOC": 56, "TRY_ALLOC": 224}),
    # the swapped entry of the run's swapped build (BF16 or FP16, drawn): one such build a run
    *[(b.spec.name, b.config, "swapped", {"DEALLOC": 56, "TRY_ALLOC": 224}) for b in build_matrix.this_run()
      if b.spec.source == "cu/hopper/any_shape.cu" and b.config["SWAPPED"]],
    ("hopper_bf16", {"DECODE": 16, "BN": 64, "CONSUMERS": 1}, "decode", {"DEALLOC": 56, "TRY_ALLOC": 200}),
    ("hopper_fp16", {"BN": 128, "CONSUMERS": 1}, "main", {"DEALLOC": 56, "TRY_ALLOC": 200}),
    ("hopper_tf32", {}, "main", {"DEALLOC": 56, "TRY_ALLOC": 224}),
    ("hopper_tf32", {"BM": 128, "CONSUMERS": 1}, "main", {"DEALLOC": 40, "TRY_ALLOC": 216}),
]))
def test_setmaxnreg_register_split_is_in_the_sass(name, tunables, entry, split):
    assert _setmaxnreg(build_matrix.built(SPECS[name], "sm_90", tunables), entry) == split


# The kernels' own Config structs, compiled against the numbers the host uses: an NVRTC probe
# whose name expressions instantiate equal<HAVE, WANT>, which static_asserts HAVE == WANT.
PROBE = b"""// a test probe, not a kernel: the host's numbers against the kernels' Config structs
#include "wgmma_tma.cu"
#include "warp_specialized.cu"
#include "tf32_register_a.cu"
#include "decode_body.cuh"
template <int HAVE, int WANT>
__global__ void equal() { static_assert(HAVE == WANT, "the host's number differs from the kernel's Config"); }
"""


def _config_checks(name, t):
    """(C++ constant expression, the host's value) pairs for one configuration."""
    spec = SPECS[name]
    entry, g = entry_geometry(spec, t)
    elem = geo.ELEMENT[spec.precision]
    if name.startswith("wgmma_tma"):
        cfg = f"hopper_rung1::Config<{elem}, {t['BN']}, {t['STAGES']}>"
    elif name.startswith("warp_specialized"):
        cfg = f"hopper_rung2::Config<{elem}, {t['BN']}, {t['STAGES']}>"
    elif name == "hopper_tf32" and entry == "main":
        cfg = f"hopper_tf32ra::Config<{t['BM']}, {t['CONSUMERS']}, {t['STAGES']}, {t['CM']}, {t['CN']}>"
    elif entry.startswith("decode"):
        cfg = f"hopper_small_m::Config<{elem}, {t['DECODE']}, {t['CONSUMERS']}, {t['TRANS_B']}, {t['CM']}, " \
              f"{t['CN']}, {str(bool(t['PINGPONG'])).lower()}>"
    else:  # persistent_body.cuh: rungs 3, 4 and the last rung's entries (column halves: NSPLIT last)
        halves = f", 0, 0, 1, false, {g.nsplit}" if g.nsplit != 1 else ""
        cfg = f"hopper_pws::Config<{elem}, {g.bn}, {4 if entry == 'swapped' else t['STAGES']}, {g.cm}, {g.cn}, " \
              f"{g.threads // 128 - 1}, {str(g.tma_store).lower()}{halves}>"
    checks = [(f"{cfg}::SMEM_BYTES", g.smem), (f"{cfg}::BM", g.bm), (f"{cfg}::BN", g.bn), (f"{cfg}::BK", g.bk),
              (f"{cfg}::BK", g.a_box[1])]
    if g.ck > 1:  # the partials a CTA of the cluster receives, in its ring
        ksplit = f"hopper_pws::Config<{elem}, {g.bn}, {t['STAGES']}, 1, 1, {g.bm // 64}, true, 0, 0, {g.ck}>"
        checks.append((f"hopper_pws::ClusterSplit<{ksplit}>::BYTES", geo.cluster_split_bytes(g.bn, g.bm // 64, g.ck)))
    if entry == "main":
        checks.append((f"{cfg}::SMEM_BYTES", spec.dynamic_smem(t)))
    if "hopper_rung" not in cfg:  # clusters: the TMA box rows are the slices each CTA loads
        checks += [(f"{cfg}::A_SLICE_ROWS", g.a_box[0]), (f"{cfg}::B_SLICE_ROWS", g.b_box[0])]
    if "hopper_rung1" not in cfg:
        checks.append((f"{cfg}::THREADS", g.threads))
    if "hopper_tf32ra" in cfg or entry.startswith("decode"):
        checks.append((f"{cfg}::CTAS_PER_SM", g.ctas_per_sm))
    if entry.startswith("decode"):
        checks.append((f"{cfg}::STAGES", geo.decode_stages(t["DECODE"], t["CONSUMERS"])))
    return checks


# every decode tile (rows x consumers x clusters x B's layout) and ping-pong tile (rows x clusters x
# B's layout): a few name expressions each, no build
DECODE_CONFIGURATIONS = [
    ("hopper_fp16", SPECS["hopper_fp16"].validate(GemmProblem(64, 256, 256, trans_b=bool(tb)),
                                                   {"DECODE": rows, "BN": 64 * c, "CONSUMERS": c, "CM": cm}))
    for rows in rungs.DECODE_ROWS for c in (1, 2) for cm in (1, 2) for tb in (0, 1)] + [
    ("hopper_bf16", SPECS["hopper_bf16"].validate(GemmProblem(640, 256, 256, trans_b=bool(tb)),
                                                   {"DECODE": rows, "BN": 128, "CONSUMERS": 2, "CM": cm, "CN": cn,
                                                    "PINGPONG": 1}))
    for rows in rungs.PINGPONG_ROWS for cm in (1, 2) for cn in (1, 2) for tb in (0, 1)]


def test_host_numbers_match_the_kernels_config_structs():
    checks = {(expr, value) for name, t in CONFIGURATIONS + DECODE_CONFIGURATIONS
              for expr, value in _config_checks(name, t)}
    expressions = sorted(f"equal<{expr}, {value}>" for expr, value in checks)
    headers = {}
    for source in ("cu/hopper/wgmma_tma.cu", "cu/hopper/warp_specialized.cu", "cu/hopper/tf32_register_a.cu",
                   "cu/hopper/decode_body.cuh"):
        headers |= included_headers(source)
        headers[source.rsplit("/", 1)[1]] = (ROOT / source).read_bytes()
    compiled = compile_cuda(PROBE, "config_probe.cu", "sm_90a", headers=headers, options=("--std=c++17",),
                            name_expressions=expressions)  # a mismatch is a static_assert in the log
    assert len(compiled.lowered_names) == len(expressions) > 100


# ---------------------------------------------------------------- rules
@pytest.mark.parametrize("name, overrides, problem, message", [
    ("warp_specialized_bf16", {"BN": 256, "STAGES": 5}, P256,
     "246864 bytes of shared memory per block; sm_90 allows at most 232448 (227 KiB)"),
    ("persistent_fp16", {"STAGES": 5}, P256, "267520 bytes of shared memory per block"),
    ("hopper_bf16", {"CONSUMERS": 1}, P256, "2 CTAs per SM of 176128 bytes (+ 1 KiB reserved each) exceed"),
    ("hopper_bf16", {"SWAPPED": 1, "SPLITS": 2}, P256, "SWAPPED=1 runs hopper_cluster_swapped: 128 x 256 tiles"),
    ("hopper_fp16", {"SWAPPED": 1, "BN": 128}, P256, "(BN=256, CONSUMERS=2), STAGES=4, no split-K (SPLITS=1)"),
    ("hopper_bf16", {}, GemmProblem(8, 8, 0), "K = 0: the wgmma kernels need at least one k tile"),
    ("wgmma_tma_tf32", {}, GemmProblem(1, 1, 65535 * 32 + 1), "pack_transpose (B^T for tf32) covers at most"),
    ("wgmma_tma_bf16", {}, GemmProblem(65535 * 128 + 1, 1, 1), "needs 65536 blocks along grid axis y"),
    ("cluster_bf16", {"CN": 4}, P256, "CN=4 is not allowed; choose one of [1, 2]"),
    ("hopper_tf32", {"STAGES": 5}, P256, "STAGES=5 is not allowed; choose one of [2, 3, 4, 6, 8]"),
    ("persistent_bf16", {"SPLITS": 2}, P256, "has no tunable 'SPLITS'"),
    ("hopper_bf16", {"DECODE": 16}, P256, "DECODE=16 runs hopper_decode: tiles of 64 * CONSUMERS columns"),
    ("hopper_fp16", {"DECODE": 8, "BN": 64, "CONSUMERS": 1, "STAGES": 6}, P256, "(STAGES left at 4)"),
    ("hopper_bf16", {"DECODE": 8, "BN": 128, "CONSUMERS": 2, "CN": 2}, P256,
     "CN=1, 2 or 4 tile columns sharing A, each CTA loading DECODE/CN rows of the A tile, a multiple of 8"),
    ("hopper_bf16", {"DECODE": 16, "BN": 128, "CONSUMERS": 2, "CN": 4}, P256, "(CN=2 with DECODE >= 16, CN=4 with "
     "DECODE >= 32)"),
    ("hopper_fp16", {"DECODE": 160, "BN": 64, "CONSUMERS": 1}, P256,
     "DECODE=160 with CONSUMERS=1: shared memory holds 3 stages, the decode tiles take at least 4"),
    ("hopper_bf16", {"DECODE": 64, "BN": 128, "CONSUMERS": 2, "PINGPONG": 1}, P256,
     "PINGPONG=1 with DECODE gives each of the two consumers (CONSUMERS=2, BN=128) whole tiles of DECODE rows, "
     "128 or 160"),
    ("hopper_bf16", {"DECODE": 32, "BN": 64, "CONSUMERS": 1}, GemmProblem(32, 256, 256, trans_a=True),
     "DECODE=32 (hopper_decode) reads A stored K x M (layouts tn, tt) in tiles of DECODE=64 rows only, CN=1"),
    ("hopper_bf16", {"DECODE": 64, "BN": 128, "CONSUMERS": 2, "CN": 2}, GemmProblem(32, 256, 256, trans_a=True),
     "in tiles of DECODE=64 rows only, CN=1, PINGPONG=0: a k row of the tile one 128-byte swizzle atom"),
    ("hopper_bf16", {"CK": 2, "CM": 2}, P256, "CK=2 splits K inside a cluster of CK CTAs: it takes "
     "CM=CN=1, SPLITS=1, SWAPPED=0 and DECODE=0"),
    ("hopper_fp16", {"CK": 3, "SPLITS": 2}, P256, "it takes CM=CN=1, SPLITS=1"),
    ("hopper_bf16", {"CK": 2}, P256, "CK=2 takes BN <= 192: beside 256 columns of accumulators the hand-over"),
    ("hopper_fp16", {"BN": 256, "CONSUMERS": 1, "STAGES": 2}, P256, "CONSUMERS=1 runs two CTAs an SM, 128 "
     "registers a thread at launch: it takes BN <= 192"),
    ("hopper_bf16", {"BN": 192, "STAGES": 2, "CK": 4}, P256,
     "CK=4: the 98304 bytes of partials a CTA receives exceed its ring (2 stages, 81920 bytes)"),
    ("hopper_bf16", {"PINGPONG": 1}, P256, "PINGPONG=1 gives each of the two consumers (CONSUMERS=2) a whole "
     "128 x BN tile: it takes BN <= 128"),
    ("hopper_fp16", {"BN": 128, "CONSUMERS": 1, "PINGPONG": 1}, P256, "it takes BN <= 128"),
    ("hopper_bf16", {"BN": 128, "STAGES": 6, "PINGPONG": 1, "SPLITS": 2}, P256,
     "PINGPONG=1 runs every tile whole: it takes SPLITS=1, CK=1, SWAPPED=0 and DECODE=0"),
    ("hopper_bf16", {"BN": 64, "STAGES": 8, "NSPLIT": 2}, P256,
     "NSPLIT=2 gives each of two consumers (CONSUMERS=2) half a tile's columns: it takes BN 128 or 256"),
    ("hopper_fp16", {"BN": 128, "CONSUMERS": 1, "NSPLIT": 2}, P256, "it takes BN 128 or 256"),
    ("hopper_bf16", {"BN": 128, "STAGES": 8, "NSPLIT": 2, "SPLITS": 2}, P256,
     "NSPLIT=2 runs every tile whole: it takes SPLITS=1, CK=1, PINGPONG=0, SWAPPED=0 and DECODE=0"),
])
def test_refused_configurations_name_the_rule_in_one_line(name, overrides, problem, message):
    with pytest.raises(ValueError) as info:
        SPECS[name].validate(problem, overrides)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert name in str(info.value).split(":")[0]


def test_what_the_rules_let_through():
    SPECS["hopper_tf32"].validate(GemmProblem(1, 1, 65535 * 32 + 1))  # no transpose: any K
    SPECS["persistent_bf16"].validate(GemmProblem(2**31 - 1, 1, 1))  # a persistent grid has no y limit
    SPECS["hopper_bf16"].validate(GemmProblem(0, 8, 0))  # empty: nothing to launch
    SPECS["hopper_bf16"].validate(P256, {"BN": 128, "CONSUMERS": 1, "STAGES": 4})  # two 110592-byte CTAs
    SPECS["hopper_bf16"].validate(P256, {"SWAPPED": 1, "CM": 2, "CN": 2})
    SPECS["hopper_fp16"].validate(P256, {"BN": 64, "STAGES": 8, "CM": 2, "PINGPONG": 1})
    SPECS["hopper_bf16"].validate(GemmProblem(8, 256, 256, trans_b=True, out_dtype="bf16", epilogue="bias_gelu"),
                                  {"DECODE": 8, "BN": 128, "CONSUMERS": 2, "SPLITS": 8})


@pytest.mark.parametrize("rows, consumers, stages, smem", [
    (8, 1, 12, 111872), (16, 1, 11, 113920), (32, 1, 9, 111872), (64, 1, 6, 99584),  # two CTAs an SM
    (16, 2, 12, 222464), (64, 2, 9, 222464),  # one CTA an SM
])
def test_the_decode_ring_is_as_deep_as_the_sms_shared_memory_holds(rows, consumers, stages, smem):
    assert (geo.decode_stages(rows, consumers), geo.decode_smem(rows, consumers)) == (stages, smem)
    ctas = geo.ctas_per_sm_of(consumers)
    assert geo.smem_fits(smem, ctas) is None
    assert geo.smem_fits(smem + (rows + 64 * consumers) * 128, ctas) is not None or stages == geo.DECODE_MAX_STAGES
    g = geo.decode("bf16", rows, consumers, trans_b=True)
    assert (g.bm, g.bn, g.a_box, g.b_box, g.threads) == (rows, 64 * consumers, (rows, 64), (64 * consumers, 64),
                                                         128 * (consumers + 1))
    assert geo.decode("fp16", rows, consumers).b_box == (64, 64)  # B stored K x N: 64 k rows of 64 n a box


@pytest.mark.parametrize("shape, layout, want", [
    ((1, 3584, 3584), "nn", {"DECODE": 8, "BN": 64, "CONSUMERS": 1, "SPLITS": 2, "PDL": 1}),  # 56 tiles x 2: 112 SMs
    ((32, 6144, 4096), "nt", {"DECODE": 32, "BN": 64, "CONSUMERS": 1, "PDL": 1}),  # 96 tiles: no split
    ((1, 28672, 4096), "nn", {"DECODE": 8, "BN": 128, "CONSUMERS": 2, "PDL": 1}),  # 448 64-column tiles > 264
    ((16, 576, 7168), "nt", {"DECODE": 16, "BN": 64, "CONSUMERS": 1, "SPLITS": 8, "PDL": 1}),
    ((20, 4096, 300), "nn", {"DECODE": 32, "BN": 64, "CONSUMERS": 1, "PDL": 1}),  # 5 k tiles: too few to split
    ((32, 4096, 4096), "tn", {"DECODE": 64, "BN": 128, "CONSUMERS": 2, "SPLITS": 2, "PDL": 1}),  # A's tile M-major
    ((32, 4096, 2048), "tn", None),  # ... not at K < 4096: the vote
    ((33, 4096, 4096), "nn", None),  # past the measured M
])
def test_small_m_takes_the_decode_tiles(shape, layout, want):
    p = GemmProblem(*shape, trans_a=layout[0] == "t", trans_b=layout[1] == "t")
    got = rungs.decode_choice(p)
    assert (got[0] if got else None) == want
    for name in ("hopper_bf16", "hopper_fp16"):
        chosen, why = SPECS[name].choose(p, "NVIDIA H100 80GB HBM3")
        assert ("DECODE" in chosen) == (want is not None) and ("hopper_decode" in why) == (want is not None)
        SPECS[name].validate(p, chosen)


SWAP = {"SWAP_MN": 1, "PDL": 1}


@pytest.mark.parametrize("shape, layout, want", [
    ((4096, 16, 2048), "nt", {"DECODE": 16, "BN": 64, "CONSUMERS": 1, "SPLITS": 2, **SWAP}),  # 64 tiles x 2
    ((8192, 8, 4096), "nt", {"DECODE": 8, "BN": 64, "CONSUMERS": 1, **SWAP}),  # 128 tiles: no split
    ((24576, 16, 1536), "tt", {"DECODE": 16, "BN": 128, "CONSUMERS": 2, **SWAP}),  # 384 64-column tiles > 264
    ((6144, 48, 4096), "nt", {"DECODE": 64, "BN": 64, "CONSUMERS": 1, **SWAP}),  # past 32 rows: 64
    ((4096, 16, 4096), "nn", {"DECODE": 64, "BN": 128, "CONSUMERS": 2, "SPLITS": 2, **SWAP}),  # A' transposed
    ((4096, 16, 2048), "tn", None),  # ... which declines at K < 4096
    ((1023, 16, 4096), "nt", None),  # below the measured M
    ((4096, 65, 4096), "nt", None),  # past the decode tiles' rows
    ((16, 16, 4096), "nt", {"DECODE": 16, "BN": 64, "CONSUMERS": 1, "SPLITS": 8, "PDL": 1}),  # small M first
])
def test_small_n_takes_the_decode_tiles_on_the_exchanged_problem(shape, layout, want):
    p = GemmProblem(*shape, trans_a=layout[0] == "t", trans_b=layout[1] == "t", out_dtype="bf16", epilogue="bias")
    for name in ("hopper_bf16", "hopper_fp16"):
        p = replace(p, out_dtype=name[-4:])
        chosen, why = SPECS[name].choose(p, "NVIDIA H100 80GB HBM3")
        if want is None:
            assert "SWAP_MN" not in chosen and "exchanged" not in why
        else:
            assert chosen == want and (rungs.SMALL_N_PROBE in why) == ("SWAP_MN" in want)
        SPECS[name].validate(p, chosen)
    for path in (rungs.SMALL_N_PROBE, rungs.SMALL_N_CHECK):  # what its docstring cites
        assert (ROOT / path).is_file(), path


@pytest.mark.parametrize("shape, voted, want", [
    ((128, 8192, 2048), {"BN": 128, "CONSUMERS": 1, "PDL": 1}, {"BN": 64, "STAGES": 8, "PDL": 1}),
    ((65, 3072, 1024), {"BN": 64, "CONSUMERS": 1, "STAGES": 6, "PDL": 1}, {"BN": 64, "STAGES": 8, "PDL": 1}),
    ((64, 8192, 2048), {"BN": 128, "CONSUMERS": 1, "PDL": 1}, None),  # one row of 64-row tiles holds M
    ((129, 8192, 2048), {"BN": 128, "CONSUMERS": 1, "PDL": 1}, None),  # two tile rows either way
    ((128, 8192, 8192), {"BN": 128, "CONSUMERS": 1, "SPLITS": 2}, None),  # a split pick is kept
    ((128, 1536, 7168), {"BN": 64, "CONSUMERS": 1, "STAGES": 6, "CK": 2}, None),  # split in clusters
])
def test_between_64_and_128_rows_one_tile_row_reads_b_once(shape, voted, want):
    p = GemmProblem(*shape)
    tunables, why = rungs.one_tile_row(p, voted, "voted")
    assert tunables == (want or voted) and ("reading B once" in why) == (want is not None)


def test_choose_applies_one_tile_row_to_the_vote():
    # the H100's table votes for 64 x 128 tiles of one consumer here
    chosen, why = SPECS["hopper_fp16"].choose(GemmProblem(128, 8192, 2048), "NVIDIA H100 80GB HBM3")
    assert chosen == {"BN": 64, "STAGES": 8, "PDL": 1} and "reading B once" in why


ROW_PAIR = {"DECODE": 64, "BN": 128, "CONSUMERS": 2, "CM": 2, "PDL": 1}


@pytest.mark.parametrize("shape, layout, want", [
    ((80, 10240, 4096), "nn", ROW_PAIR),
    ((127, 4096, 8192), "nt", ROW_PAIR),
    ((64, 10240, 4096), "nn", None),  # one 64-row tile holds A
    ((128, 10240, 4096), "nt", None),  # one 128-row tile holds A: the vote
    ((96, 16384, 2048), "nn", None),  # K below 4096
    ((96, 2048, 8192), "nn", None),  # N below 4096
    ((96, 8192, 8192), "tn", None),  # A stored transposed: the decode tiles read A row-major
])
def test_between_64_and_128_rows_two_tile_rows_share_b(shape, layout, want):
    p = GemmProblem(*shape, trans_a=layout[0] == "t", trans_b=layout[1] == "t")
    got = rungs.row_pair_choice(p)
    assert (got[0] if got else None) == want
    for name in ("hopper_bf16", "hopper_fp16"):
        chosen, why = SPECS[name].choose(p, "NVIDIA H100 80GB HBM3")
        assert (chosen == want) == (want is not None)
        _, g = entry_geometry(SPECS[name], SPECS[name].validate(p, chosen))
        assert g.cluster == (2 if want else g.cluster)


@pytest.mark.parametrize("shape, layout, rows", [
    ((6144, 8192, 1024), "nn", 160),
    ((4096, 4096, 1024), "nt", 160),  # 832 tiles of 160 x 128: past 2.5 rounds of 2 x 132
    ((4096, 2048, 1024), "nt", 128),  # 416 of them: 1.6 rounds, the 128-row tiles
    ((2306, 2731, 54), "nn", 128),  # odd sizes, one k tile, 1.25 rounds
    ((4096, 2048, 16), "nn", None),  # K below SHORT_K_MIN: no k loop to hide an epilogue behind
    ((1536, 16384, 2048), "nt", 160),  # K = SHORT_K_MAX (with FP32 D; 16-bit D: the next test)
    ((1536, 16384, 2049), "nn", None),  # past it: the vote
    ((6144, 8192, 1024), "tn", None),  # A stored transposed: the swapped tiles read A row-major
    ((128, 65536, 1024), "nn", None),  # M <= 128: one tile row, the small-M rules and the vote
    ((2048, 2048, 1024), "nn", None),  # 256 tiles of 128 x 128: under two waves
])
def test_full_grids_of_a_short_k_take_the_swapped_ping_pong_tiles(shape, layout, rows):
    p = GemmProblem(*shape, trans_a=layout[0] == "t", trans_b=layout[1] == "t")
    want = {160: rungs.SHORT_K_TILE, 128: rungs.SHORT_K_FEW_TILE, None: None}[rows]
    got = rungs.short_k_choice(p)
    assert (got and got[0]) == want
    for name, out in (("hopper_bf16", "bf16"), ("hopper_fp16", "fp16")):
        chosen, why = SPECS[name].choose(p, "NVIDIA H100 80GB HBM3")
        assert (chosen == want) == bool(rows) and (f"swapped ping-pong tiles of {rows} x 128" in why) == bool(rows)
        SPECS[name].validate(p, chosen)
        linear = replace(p, out_dtype=out, epilogue="bias_gelu")  # a linear layer's call: the same up to K = 1280
        swapped = bool(rows) and p.k <= rungs.SHORT_K_SWAPPED_16BIT_K
        assert (SPECS[name].choose(linear, "NVIDIA H100 80GB HBM3")[0] == want) == swapped
        SPECS[name].validate(linear, SPECS[name].choose(linear, "NVIDIA H100 80GB HBM3")[0])
    evidence = (rungs.SHORT_K_PROBE, rungs.SHORT_K_SWEEP, rungs.SHORT_K_CHECK, rungs.SHORT_K_SMALL_GRIDS,
                rungs.SHORT_K_ODD, rungs.SHORT_K_PINGPONG_PROBE, rungs.SHORT_K_PINGPONG_CHECK,
                rungs.SHORT_K_PINGPONG_FEW, rungs.SHORT_K_PINGPONG_FEW_CHECK, rungs.SHORT_K_16BIT_HOT,
                rungs.SHORT_K_16BIT_COLD, rungs.SHORT_K_16BIT_STEP, rungs.SHORT_K_16BIT_CHECK,
                rungs.SHORT_K_FP32_HOT, rungs.SHORT_K_FP32_COLD)
    for path in evidence:  # what its docstring cites
        assert (ROOT / path).is_file(), path


@pytest.mark.parametrize("shape, layout, want", [
    ((4096, 4096, 512), "nt", selection.PINGPONG_TILE),  # 1024 tiles of 128 x 128: under 12 waves
    ((2560, 10240, 256), "nn", {**selection.PINGPONG_TILE, "CM": 2}),  # 1600 tiles: from 12 waves (1584)
    ((3584, 4096, 384), "nt", selection.PINGPONG_TILE),  # 736 swapped tiles of 160 rows: 2.8 rounds
    ((4096, 2048, 512), "nt", selection.PINGPONG_TILE),  # the few rounds too (416 swapped tiles of 160 rows) ...
    ((4096, 2048, 192), "nt", rungs.SHORT_K_FEW_TILE),  # ... from K = 256: below, the 128-row swapped tiles ...
    ((4096, 2048, 512), "nn:fp32", rungs.SHORT_K_FEW_TILE),  # ... and with FP32 D
    ((5120, 3072, 768), "nn", rungs.SHORT_K_TILE),  # past SHORT_K_PINGPONG_K
])
def test_at_k_up_to_512_full_grids_take_the_unswapped_ping_pong_tiles(shape, layout, want):
    layout, _, out = layout.partition(":")
    p = GemmProblem(*shape, trans_a=layout[0] == "t", trans_b=layout[1] == "t", out_dtype=out or "bf16")
    got, why = rungs.short_k_choice(p)
    assert got == want and ("swapped ping-pong tiles" in why) == ("DECODE" in want)
    SPECS["hopper_bf16"].validate(p, got)


@pytest.mark.parametrize("shape, layout, want", [
    ((4096, 2048, 2048), "nt:bf16", rungs.SHORT_K_WIDE_TILE),  # the MLP run's forward: 128 x 256 tiles
    ((4096, 2048, 2048), "nn:fp16", rungs.SHORT_K_WIDE_TILE),  # ... and its dX, FP16 alike
    ((8192, 1344, 1536), "nn:bf16", {**rungs.SHORT_K_WIDE_TILE, "BN": 192}),  # N = 7 x 192: ragged_n's 128 x 192
    ((3000, 5000, 2000), "nn:bf16", {**rungs.SHORT_K_WIDE_TILE, "CM": 2}),  # rows not 128-byte multiples: 2 x 1
    ((4096, 2048, 2048), "nn:fp32", rungs.SHORT_K_FEW_TILE),  # FP32 D keeps the swapped tiles
    ((6144, 8192, 1280), "nt:bf16", rungs.SHORT_K_TILE),  # up to K = 1280 with 16-bit D too
])
def test_past_k_1280_16_bit_d_takes_128x256_tiles(shape, layout, want):
    layout, _, out = layout.partition(":")
    p = GemmProblem(*shape, trans_a=layout[0] == "t", trans_b=layout[1] == "t", out_dtype=out)
    got, why = rungs.short_k_choice(p)
    assert got == want and ("with 16-bit D" in why) == ("DECODE" not in want)
    for name in {"bf16": ("hopper_bf16",), "fp16": ("hopper_fp16",)}.get(out, ("hopper_bf16", "hopper_fp16")):
        assert SPECS[name].choose(p, "NVIDIA H100 80GB HBM3")[0] == want
        SPECS[name].validate(p, want)


TILE_64x64 = {"BN": 64, "CONSUMERS": 1, "STAGES": 6}


@pytest.mark.parametrize("shape, want", [
    # split-K in clusters of 64 x 64 tiles: the most ranges (<= 4) keeping <= 112 CTAs, each >= 512 of K
    ((256, 320, 8192), {**TILE_64x64, "CK": 4, "PDL": 1}),  # 20 tiles x 4 = 80 CTAs
    ((256, 448, 7680), {**TILE_64x64, "CK": 4, "PDL": 1}),  # 28 x 4 = 112
    ((384, 384, 4096), {**TILE_64x64, "CK": 3, "PDL": 1}),  # 36 x 4 = 144 > 112
    ((192, 896, 5120), {**TILE_64x64, "CK": 2, "PDL": 1}),  # 42 x 3 = 126 > 112
    ((480, 200, 1500), {**TILE_64x64, "CK": 2, "PDL": 1}),  # 1500 / 3 = 500 < 512 a range
    # else split-K through the workspace
    ((200, 300, 1000), {**TILE_64x64, "PDL": 1}),  # 1000 / 2 < 512, and < 1408 a slice: whole tiles
    ((256, 1344, 8192), {"BN": 64, "STAGES": 8, "SPLITS": 2}),  # 84 64 x 64 tiles > 56: 42 of 128 x 64
    ((512, 640, 8192), {"BN": 64, "STAGES": 8, "SPLITS": 2}),  # 80 tiles of 64 x 64 > 56, 40 of 128 x 64
    ((33, 64, 64), {**TILE_64x64, "PDL": 1}),
    ((32, 320, 8192), None),  # the decode tiles' M
    ((16, 2048, 4096, True), {**TILE_64x64, "CK": 3, "PDL": 1}),  # A stored K x M: no decode tiles; 32 x 3 <= 112
    ((32, 1024, 8192, True), {**TILE_64x64, "CK": 4, "PDL": 1}),
    ((8, 4096, 4096, True), None),  # 64 tiles of 128 x 64 > 44: the vote
    ((2048, 320, 4096), None),  # 80 tiles of 128 x 64: the vote
])
def test_small_grids_are_filled_by_split_k_in_clusters_or_through_memory(shape, want):
    p = GemmProblem(*shape[:3], trans_a=shape[3:] == (True,))  # a fourth item: A stored transposed
    got = rungs.grid_fill_choice(p)
    assert (got[0] if got else None) == want
    if want is not None:
        chosen, why = SPECS["hopper_fp16"].choose(p, "NVIDIA H100 80GB HBM3")
        assert chosen == want and "fill a small grid" in why
        SPECS["hopper_fp16"].validate(p, chosen)


@pytest.mark.parametrize("shape, want", [
    ((8, 4096, 4096), {"DECODE": 64, "BN": 128, "CONSUMERS": 2, "SPLITS": 2, "PDL": 1}),  # 32 tiles <= 33: split 2
    ((16, 8192, 4096), {"DECODE": 64, "BN": 128, "CONSUMERS": 2, "PDL": 1}),  # 64 tiles: whole
    ((1, 4096, 4096), {"DECODE": 64, "BN": 128, "CONSUMERS": 2, "SPLITS": 2, "PDL": 1}),
    ((16, 4096, 3072), None),  # K < 4096: the vote
    ((16, 10240, 4096), None),  # 80 tiles > 66: the vote
    ((16, 2048, 4096), "grid"),  # a small grid: grid_fill_choice's clusters
])
def test_a_few_rows_of_a_stored_transposed_take_64_row_decode_tiles_past_a_small_grid(shape, want):
    p = GemmProblem(*shape, trans_a=True, out_dtype="bf16")
    got = rungs.transposed_decode_choice(p)
    assert (got[0] if got else None) == (None if want == "grid" else want)
    chosen, why = SPECS["hopper_bf16"].choose(p, "NVIDIA H100 80GB HBM3")
    if want == "grid":
        assert chosen.get("CK", 1) > 1 and "fill a small grid" in why
    elif want is not None:
        assert chosen == want and "A stored K x M: hopper_decode" in why
    else:
        assert not chosen.get("DECODE") and "predicted" in why  # the vote
    SPECS["hopper_bf16"].validate(p, chosen)
    assert rungs.decode_choice(GemmProblem(*shape))[0]["DECODE"] <= 32  # A row-major keeps the narrow tiles


@pytest.mark.parametrize("n, bn", [(1344, 192), (320, 192), (576, 192), (1152, 192), (4096, 256), (1280, 256), (4800, 256), (883, 256)])
def test_ragged_n_takes_192_column_tiles_where_they_waste_fewer_columns(n, bn):
    p = GemmProblem(8192, n, 4096)
    for picked in ({"PDL": 1}, {"CM": 2, "PDL": 1}):
        tunables, why = rungs.ragged_n(p, picked, "voted")
        assert tunables.get("BN", 256) == bn and ("128 x 192" in why) == (bn == 192)
        assert tunables == (picked if bn == 256 else {"PDL": 1, "BN": 192})  # no cluster with 192
        SPECS["hopper_bf16"].validate(p, tunables)
    for kept in ({"BN": 128, "STAGES": 6, "PDL": 1}, {"SPLITS": 2}, {"SWAPPED": 1}):  # not a whole 128 x 256 pick
        assert rungs.ragged_n(p, kept, "voted") == (kept, "voted")
    chosen, _ = SPECS["hopper_bf16"].choose(p, "NVIDIA H100 80GB HBM3")
    assert chosen.get("BN", 256) in (bn, 128, 64)


@pytest.mark.parametrize("shape, layout, clustered", [
    ((3300, 5400, 1792), "nn", True),  # B's rows 10800 bytes
    ((3328, 5376, 1792), "nn", False),  # 3584 and 10752 bytes: 28 and 84 x 128
    ((3328, 5376, 1800), "nn", True),  # A's rows 3600 bytes
    ((3328, 5376, 1792), "tn", False),  # tn: A's rows are M = 3328, 6656 bytes
    ((3304, 5376, 1792), "tn", True),  # 6608 bytes
    ((3328, 5400, 1792), "nt", False),  # nt: B's rows are K = 1792, 3584 bytes
    ((3328, 5376, 1800), "nt", True),  # 3600 bytes (A's too)
    ((3300, 5400, 1000), "nn", False),  # K below ROW_MIN_K
    ((3328, 5403, 1792), "nn", False),  # 10806 bytes: not a 16-byte multiple, packed first (aligned then)
])
def test_unaligned_rows_take_a_2x1_cluster(shape, layout, clustered):
    p = GemmProblem(*shape, trans_a=layout[0] == "t", trans_b=layout[1] == "t")
    for picked in ({"PDL": 1}, {"BN": 192, "PDL": 1}):
        tunables, why = rungs.unaligned_rows(p, picked, "voted")
        assert tunables == ({**picked, "CM": 2} if clustered else picked)
        assert ("2 x 1 cluster" in why) == clustered
        SPECS["hopper_bf16"].validate(p, tunables)
    for kept in ({"BN": 128, "STAGES": 6, "PDL": 1}, {"SPLITS": 2}, {"CM": 2, "PDL": 1}, {"CN": 2},
                 {"SWAPPED": 1}, {"BN": 128, "CONSUMERS": 1},
                 {"BN": 192, "CK": 3, "PDL": 1}):  # not an unclustered whole 128 x 256 or 192 pick (CK: split)
        assert rungs.unaligned_rows(p, kept, "voted") == (kept, "voted")


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
def test_a_stored_transposed_drops_the_2x1_cluster_of_the_votes_128x256_tiles(layout):
    p = GemmProblem(4096, 1024, 8192, trans_a=layout[0] == "t", trans_b=layout[1] == "t", out_dtype="bf16")
    tunables, why = rungs.transposed_unclustered(p, {"CM": 2, "PDL": 1}, "voted")
    assert (tunables, "no 2 x 1 cluster" in why) == (({"PDL": 1}, True) if p.trans_a else ({"CM": 2, "PDL": 1}, False))
    for kept in ({"PDL": 1}, {"BN": 128, "CM": 2, "PINGPONG": 1, "STAGES": 6}, {"BN": 128, "CM": 2, "SPLITS": 2},
                 {"BN": 192, "CM": 2}, {"CM": 2, "CN": 2}):  # not whole 128 x 256 tiles in a 2 x 1 cluster
        assert rungs.transposed_unclustered(p, kept, "voted") == (kept, "voted")
    unaligned = replace(p, m=4100)  # A stored transposed: rows of 8200 bytes, not 128-byte multiples
    assert rungs.transposed_unclustered(unaligned, {"CM": 2, "PDL": 1}, "voted") == ({"CM": 2, "PDL": 1}, "voted")
    # the vote picks the clustered tiles here; choose() runs them unclustered for A stored transposed
    chosen, why = SPECS["hopper_bf16"].choose(p, "NVIDIA H100 80GB HBM3")
    assert (chosen.get("CM", 1) == 1) == p.trans_a, (chosen, why)


# ---------------------------------------------------------------- geometry and grids
def test_tiled_rungs_launch_one_cta_per_tile():
    spec = SPECS["wgmma_tma_bf16"]
    assert spec.grid(GemmProblem(4093, 4091, 4099), spec.resolve()) == (32, 32, 1)
    assert spec.grid(GemmProblem(1, 1, 1), spec.resolve({"BN": 64})) == (1, 1, 1)
    assert spec.block(spec.resolve()) == (128, 1, 1)
    assert SPECS["warp_specialized_fp16"].grid(GemmProblem(129, 257, 5), SPECS["warp_specialized_fp16"].resolve()) \
        == (2, 2, 1)


@pytest.mark.parametrize("name, overrides, shape, units", [
    ("persistent_bf16", {}, (4096, 4096, 4096), 32 * 16),
    ("cluster_bf16", {}, (4096, 4096, 4096), 16 * 16),  # 2x1 super tiles
    ("cluster_bf16", {}, (129, 257, 9), 1 * 2),
    ("hopper_bf16", {"BN": 128, "STAGES": 6, "CM": 2, "SPLITS": 2}, (1024, 1024, 16384), 4 * 8 * 2),
    ("hopper_bf16", {"SPLITS": 4}, (300, 300, 100), 3 * 2 * 2),  # K = 100 has 2 k tiles: 2 slices
    ("hopper_bf16", {"BN": 128, "CONSUMERS": 1}, (1024, 1024, 1024), 16 * 8),
    ("hopper_tf32", {}, (4096, 4096, 4096), 16 * 32),
    ("hopper_tf32", {"CM": 2, "CN": 2}, (257, 129, 1), 1 * 1),
])
def test_work_units_of_persistent_kernels(name, overrides, shape, units):
    spec = SPECS[name]
    t = spec.resolve(overrides)
    g = entry_geometry(spec, t)[1]
    assert g.persistent and geo.work_units(GemmProblem(*shape), g, t.get("SPLITS", 1)) == units
    assert spec.grid(GemmProblem(*shape), t) == (g.cluster * units, 1, 1)


@pytest.mark.parametrize("units, resident, cluster, grid", [
    (512, 132, 1, 132), (256, 66, 2, 132), (64, 66, 2, 128), (3, 132, 1, 3), (1, 66, 2, 2), (300, 264, 1, 264),
])
def test_persistent_grid_is_whole_clusters_resident_at_once(units, resident, cluster, grid):
    assert geo.persistent_grid(units, resident, cluster) == grid


def test_fallback_residency_is_the_h100_rule():
    assert geo.fallback_resident_clusters(132, 1, 1) == 132
    assert geo.fallback_resident_clusters(132, 1, 2) == 66  # 66 two-CTA clusters, as measured
    assert geo.fallback_resident_clusters(132, 2, 1) == 264  # one-consumer tiles: two CTAs per SM


@settings(max_examples=80, deadline=None)
@given(m=st.integers(1, 5000), n=st.integers(1, 5000), k=st.integers(1, 9000), cm=st.sampled_from((1, 2, 4)),
       cn=st.sampled_from((1, 2)), consumers=st.sampled_from((1, 2)), splits=st.sampled_from((1, 2, 3, 8)))
def test_units_and_scratch_cover_every_tile(m, n, k, cm, cn, consumers, splits):
    g = geo.persistent("bf16", 128, 4, cm, cn, consumers, "split")
    p = GemmProblem(m, n, k)
    tiles_m, tiles_n = -(-m // g.bm), -(-n // g.bn)
    s = geo.effective_splits(k, g.bk, splits)
    units = geo.work_units(p, g, splits)
    assert units == -(-tiles_m // cm) * -(-tiles_n // cn) * s  # whole clusters of tiles, times the slices
    assert units * cm * cn >= tiles_m * tiles_n * s  # every tile and slice has a CTA's unit
    assert 1 <= s <= min(splits, -(-k // 64))
    partials, counters = geo.split_scratch(g, geo.split_plan(p, g, splits, 0, 132))
    if s == 1:
        assert (partials, counters) == (0, 0)
    else:  # the kernel indexes tiles up to the padded cluster grid
        padded = -(-tiles_m // cm) * cm * (-(-tiles_n // cn) * cn)
        assert partials == padded * s * g.bm * g.bn * 4 and counters == padded * 8


def test_split_scratch_of_the_deep_k_shape():
    g = geo.persistent("bf16", 128, 6, 2, 1, 2, "split")
    plan = lambda p: geo.split_plan(p, g, 2, 0, 66)
    assert geo.split_scratch(g, plan(GemmProblem(1024, 1024, 16384))) == (64 * 2 * 128 * 128 * 4, 64 * 8)
    assert geo.split_scratch(g, plan(GemmProblem(1024, 1024, 64))) == (0, 0)


@pytest.mark.parametrize("shape, bn, tail, resident, split", [
    # 8 x 20 = 160 tiles of 128 x 256 on 132 SMs: 132 whole, the last 28 cut 4 ways (132 // 28 = 4)
    ((1024, 5120, 5120), 256, 4, 132, geo.Split(160, 4, 132)),
    ((1024, 5120, 5120), 256, 2, 132, geo.Split(160, 2, 132)),  # TAIL caps the ranges
    ((1024, 5120, 5120), 256, 0, 132, geo.Split(160)),  # off
    ((1024, 5120, 512), 256, 4, 132, geo.Split(160)),  # 8 k tiles: ranges would keep fewer than 8
    ((1024, 5120, 1024), 256, 4, 132, geo.Split(160, 2, 132)),  # 16 k tiles: two ranges of 8
    ((2048, 4096, 4096), 256, 4, 132, geo.Split(256)),  # 124 left over: no idle cluster to take a range
    ((4096, 4096, 4096), 256, 4, 128, geo.Split(512)),  # whole waves: nothing to split
    ((512, 1024, 8192), 256, 4, 132, geo.Split(16)),  # one partial wave: split-K's (SPLITS) case, not the tail's
])
def test_tail_split_cuts_only_the_last_partial_wave(shape, bn, tail, resident, split):
    g = geo.persistent("bf16", bn, 4, 1, 1, 2, "split")
    plan = geo.split_plan(GemmProblem(*shape), g, 1, tail, resident)
    assert plan == split
    if plan.splits > 1:  # every range of the tail runs in the last wave, beside the whole tiles' clusters
        assert plan.whole % resident == 0 and plan.units - plan.whole <= resident
        partials, _ = geo.split_scratch(g, plan)
        assert partials == (plan.tiles - plan.whole) * plan.splits * 128 * bn * 4


def test_a_residency_of_zero_plans_no_tail():
    g = geo.persistent("bf16", 256, 4, 1, 1, 2, "split")
    assert geo.split_plan(GemmProblem(1024, 5120, 5120), g, 1, 4, 0) == geo.Split(160)


def test_split_k_of_every_tile_comes_before_the_tail():
    g = geo.persistent("bf16", 128, 6, 1, 1, 2, "split")
    assert geo.split_plan(GemmProblem(1024, 1024, 16384), g, 2, 4, 132) == geo.Split(64, 2, 0)


@pytest.mark.parametrize("precision, address, ld, rows, cols, kernel, packed_ld", [
    ("bf16", 0x10000, 4096, 100, 4096, None, None),
    ("bf16", 0x10000, 4099, 100, 4099, "pack_rows", 4160),  # 8198-byte rows, packed to 8320 (65 x 128)
    ("fp16", 0x10002, 64, 10, 64, "pack_rows", 64),  # base 2 bytes off
    ("tf32", 0x10000, 4098, 10, 4098, "pack_rows", 4128),
    ("tf32", 0x10000, 4096, 10, 4096, None, None),
])
def test_which_operands_are_packed(precision, address, ld, rows, cols, kernel, packed_ld):
    pack = geo.pack_for(address, ld, rows, cols, precision)
    if kernel is None:
        assert pack is None
        return
    assert (pack.kernel, pack.ld, pack.out_rows, pack.out_cols) == (kernel, packed_ld, rows, cols)
    assert pack.nbytes == rows * packed_ld * geo.ITEMSIZE[precision] and "TMA needs" in pack.reason
    chunks = rows * packed_ld * geo.ITEMSIZE[precision] // 16  # one 16-byte chunk a thread
    assert pack.grid == (-(-chunks // 256), 1, 1)


def test_packing_blocks_follow_the_work_not_the_rows():
    """A thread a 16-byte chunk of the packed rows: many short rows take as few blocks as few long ones."""
    assert geo.pack_for(0x10000, 170, 2770, 170, "bf16").grid == (2770 * 24 // 256 + 1, 1, 1)  # 192-wide rows
    assert geo.pack_for(0x10000, 2770, 400, 2770, "bf16").grid == (400 * 352 // 256, 1, 1)  # 2816-wide rows
    assert geo.pack_for(0x10000, 70001, 70000, 1, "bf16").grid == (70000 * 8 // 256 + 1, 1, 1)  # 64-wide rows


def test_tf32_b_is_transposed_whatever_its_layout():
    pack = geo.pack_for(0x10000, 4096, 4099, 300, "tf32", transpose=True)  # B: K = 4099 rows, N = 300
    assert (pack.kernel, pack.out_rows, pack.out_cols, pack.ld) == ("pack_transpose", 300, 4099, 4128)
    assert pack.grid == (10, 129, 1) and pack.nbytes == 300 * 4128 * 4


# ---------------------------------------------------------------- choose
@pytest.mark.parametrize("shape, tunables, kept", [
    ((1536, 1024, 4096), {"PDL": 1}, False),  # 48 tiles of 128 x 256: half the SMs idle
    ((2560, 768, 8192), {"CM": 2, "PDL": 1}, False),
    ((1664, 2048, 4096), {"PDL": 1}, True),  # 104 tiles
    ((1536, 1536, 8192), {"CM": 2, "PDL": 1}, False),  # 72 tiles at deep K: a quarter of the SMs idle
    ((2432, 1536, 4096), {"PDL": 1}, True),  # 19 x 6 = 114 tiles: past three quarters
    ((1536, 1536, 2048), {"PDL": 1}, True),  # 72 tiles at K < UNDERFILLED_MIN_K: half the SMs is the bound
    ((2176, 1152, 6144), {"PDL": 1}, True),  # 85 tiles, N = 6 x 192: ragged_n's 128 x 192 tiles instead
    ((1536, 1024, 4096), {"SPLITS": 2}, True),  # split: a grid already filled
    ((128, 8192, 4096), {"PDL": 1}, True),  # one tile row: the M <= 128 rules decide
])
def test_underfilled_grids_of_wide_tiles_take_128_x_128(shape, tunables, kept):
    got, why = rungs.underfilled_grid(GemmProblem(*shape), dict(tunables), "voted")
    assert got == (tunables if kept else selection.TILE_128x128)
    assert why == "voted" if kept else "twice the CTAs" in why


TILE_128 = selection.TILE_128x128


@pytest.mark.parametrize("shape, tunables, kept", [
    ((2048, 512, 4096), TILE_128, False),  # 64 tiles of 128 x 128: half the SMs idle
    ((1536, 640, 8192), TILE_128, False),
    ((3328, 256, 2048), {"BN": 128, "STAGES": 4}, False),  # K = 2048, the least the probe ran
    ((2048, 1024, 4096), TILE_128, True),  # 128 tiles
    ((1024, 1024, 1024), TILE_128, True),  # K below HALF_GRID_SPLIT_MIN_K
    ((128, 8192, 4096), TILE_128, True),  # one tile row: the M <= 128 rules decide
    ((1024, 1024, 4096), {**TILE_128, "SPLITS": 2}, True),  # split already
    ((1024, 1024, 4096), {**TILE_128, "CM": 2}, True),  # a cluster
    ((1024, 1024, 4096), {"BN": 64, "STAGES": 8, "PDL": 1}, True),  # 128 x 64 tiles
    ((1024, 1024, 4096), {"BN": 128, "CONSUMERS": 1, "PDL": 1}, True),  # one consumer: two CTAs an SM
])
def test_whole_128_x_128_tiles_on_half_the_sms_split_in_clusters_of_two(shape, tunables, kept):
    p = GemmProblem(*shape, out_dtype="bf16")
    got, why = rungs.half_grid_split(p, dict(tunables), "voted")
    assert got == (tunables if kept else {**tunables, "CK": 2})
    assert (why == "voted") == kept and (rungs.HALF_GRID_SPLIT_PROBE in why) != kept
    SPECS["hopper_bf16"].validate(p, got)
    for path in (rungs.HALF_GRID_SPLIT_PROBE, rungs.HALF_GRID_SPLIT_CHECK):  # what its docstring cites
        assert (ROOT / path).is_file(), path


ONE_CONSUMER = {"BN": 128, "CONSUMERS": 1, "PDL": 1}


@pytest.mark.parametrize("shape, layout, tunables, kept", [
    ((1024, 1024, 1024), "nn", ONE_CONSUMER, False),  # 128 tiles of 128 x 64: one wave
    ((1024, 960, 2048), "nt", TILE_128, False),  # 120 tiles
    ((1536, 640, 2560), "tn", {**TILE_128, "CK": 2}, False),
    ((384, 2816, 3584), "nn", selection.TILE_128x64, True),  # 132 tiles: the pick already
    ((1024, 1024, 4096), "nn", TILE_128, True),  # K at ONE_WAVE_MAX_K
    ((1024, 1280, 896), "nn", ONE_CONSUMER, True),  # 160 tiles: two waves
    ((896, 1024, 1024), "nn", ONE_CONSUMER, True),  # 112 tiles: below FULL_GRID
    ((128, 8192, 1024), "nn", ONE_CONSUMER, True),  # one tile row: the M <= 128 rules decide
])
def test_one_full_wave_of_128_x_64_tiles_takes_them(shape, layout, tunables, kept):
    p = GemmProblem(*shape, trans_a=layout[0] == "t", trans_b=layout[1] == "t")
    got, why = rungs.one_wave(p, dict(tunables), "voted")
    assert got == (tunables if kept else selection.TILE_128x64)
    assert (why == "voted") == kept and (rungs.ONE_WAVE_CHECKS[0] in why) != kept
    SPECS["hopper_bf16"].validate(p, got)
    for path in (rungs.ONE_WAVE_PROBE, rungs.ONE_WAVE_FIRST_CHECK, *rungs.ONE_WAVE_CHECKS):  # its docstring's
        assert (ROOT / path).is_file(), path


def test_at_1024_cubed_the_one_wave_rule_overrides_the_vote_and_nothing_after_changes_it():
    tunables, why = SPECS["hopper_bf16"].choose(GemmProblem(1024, 1024, 1024), "NVIDIA H100 80GB HBM3")
    assert tunables == selection.TILE_128x64 and "nearest tuning shapes" in why and "one full wave" in why


@pytest.mark.parametrize("shape, tunables, kept", [
    ((1024, 704, 6144), {"BN": 64, "STAGES": 8, "PDL": 1}, False),  # 88 tiles past half the SMs
    ((1024, 1536, 4096), {"BN": 128, "STAGES": 6, "PDL": 1}, False),
    ((768, 704, 6144), {"BN": 64, "STAGES": 8, "PDL": 1}, True),  # 66 tiles: half the SMs
    ((1024, 704, 3072), {"BN": 64, "STAGES": 8, "PDL": 1}, True),  # K below PDL_MIN_K
    ((1024, 1536, 4096), {"BN": 128, "STAGES": 6, "CM": 2, "PDL": 1}, True),  # a cluster
    ((2048, 2048, 4096), {"PDL": 1}, True),  # 128 x 256 tiles
    ((1024, 704, 6144), {"BN": 64, "CONSUMERS": 1, "PDL": 1}, True),  # one consumer: two CTAs an SM
    ((128, 8704, 4096), {"BN": 64, "STAGES": 8, "PDL": 1}, True),  # 128 x 64 tiles over one tile row
    ((128, 9728, 4096), {"BN": 128, "STAGES": 6, "PDL": 1}, False),
])
def test_wide_grids_of_narrow_tiles_launch_without_pdl(shape, tunables, kept):
    got, why = rungs.without_pdl(GemmProblem(*shape), dict(tunables), "voted")
    assert got == (tunables if kept else {k: v for k, v in tunables.items() if k != "PDL"})
    assert why == "voted" if kept else "no PDL" in why


@pytest.mark.parametrize("shape, picked", [
    ((1024, 1024, 1024), {"BN": 64, "STAGES": 8, "PDL": 1}),
    ((16384, 128, 4096), {"BN": 128, "STAGES": 6, "PDL": 1}),
    ((1024, 1024, 16384), {"BN": 128, "STAGES": 6, "CM": 2, "SPLITS": 2}),  # split-K: no PDL
    ((2048, 2048, 2048), {"PDL": 1}),  # any_shape 128 x 256, TMA stores, no cluster
    ((4096, 4096, 4096), {"CM": 2, "PDL": 1}),
    ((8192, 8192, 8192), {"CM": 2, "PDL": 1}),
    ((4093, 4091, 4099), {}),  # any_shape 128 x 256, packed operands, C's own stores (ldc odd)
])
def test_the_analytic_rule_picks_what_measured_best_on_the_default_shapes(shape, picked):
    # the rule a GPU without a tuning-set table runs (the H100's table is checked in test_hopper_selection.py)
    for name in ("hopper_bf16", "hopper_fp16"):
        spec = SPECS[name]
        problem = GemmProblem(*shape)
        tunables, note = rungs.analytic_choice(problem, "NVIDIA H100 80GB HBM3")
        assert tunables == picked and note and "\n" not in note
        assert spec.choose(problem, "NVIDIA Imaginary GPU")[0] == rungs.without_pdl(problem, picked, note)[0]
        spec.validate(problem, tunables)


@pytest.mark.parametrize("shape, picked", [
    ((8192, 8192, 8192), {"CN": 2, "PDL": 1}),  # 2048 tiles of 256 x 128: A shared by two tile columns
    ((4096, 4096, 4096), {"CN": 2, "PDL": 1}),
    ((2048, 2048, 2048), {"CN": 2, "PDL": 1}),  # 128 tiles: one wave
    ((4093, 4091, 4099), {"CN": 2, "PDL": 1}),  # 32 tile columns pair up
    ((4096, 4000, 4096), {"CN": 2, "PDL": 1}),  # 32 tile columns, the last one partial
    ((4096, 3900, 4096), {"PDL": 1}),  # 31 tile columns: a cluster would run half past the edge
    ((1024, 1024, 1024), {"BM": 64, "STAGES": 8, "PDL": 1}),  # 32 tiles of 256 x 128, 128 of 64 x 128
    ((16384, 128, 4096), {"BM": 64, "STAGES": 8, "PDL": 1}),
    ((1024, 1024, 16384), {"SPLITS": 4}),  # 32 tiles, each K slice 4096 long
    ((2048, 1024, 8192), {"SPLITS": 2}),  # 64 tiles: 128 units, all resident
    ((1024, 1024, 4096), {"BM": 64, "STAGES": 8, "PDL": 1}),  # K too short to split
    ((16, 576, 7168), {"BM": 64, "STAGES": 8, "SPLITS": 6, "PDL": 1}),  # 5 small tiles: 30 units, slices of 1195
    ((16, 1024, 8192), {"BM": 64, "STAGES": 8, "SPLITS": 8, "PDL": 1}),  # 8 small tiles: 64 units, the deep ring
    ((16, 1792, 6144), {"BM": 64, "STAGES": 8, "SPLITS": 4, "PDL": 1}),  # 14: within half the SMs (6 ways: 84)
    ((16, 5120, 4096), {"BM": 64, "STAGES": 4, "SPLITS": 3, "PDL": 1}),  # 40 small tiles: 120 units, 4 stages
    ((16, 6656, 5120), {"BM": 64, "STAGES": 8, "PDL": 1}),  # 52 small tiles at K <= 5120: whole
    ((16, 6656, 6144), {"BM": 64, "STAGES": 4, "SPLITS": 2, "PDL": 1}),  # ... past it, at M < 32, split
    ((32, 6656, 8192), {"BM": 64, "STAGES": 8, "PDL": 1}),  # ... at M >= 32 whole up to K = 8192
    ((16, 7168, 1024), {"BM": 64, "STAGES": 8, "PDL": 1}),  # 56 small tiles, K too short to split
    ((16, 6144, 24576), {"BM": 64, "STAGES": 4, "SPLITS": 2, "PDL": 1}),  # deep K, M <= 64: small tiles, not 256-row
    ((256, 6144, 24576), {"SPLITS": 2}),  # deep K, M > 128: split-K over 256 x 128 tiles
    ((128, 6144, 24576), {"BM": 128, "SPLITS": 2, "PDL": 1}),  # M of 65-128: 128 x 128 tiles, split where SMs idle
    ((128, 4608, 12288), {"BM": 128, "SPLITS": 3, "PDL": 1}),
    ((96, 30720, 3072), {"BM": 128, "PDL": 1}),  # a wide N: whole 128 x 128 tiles
    ((128, 576, 7168), {"BM": 128, "CONSUMERS": 1, "SPLITS": 8, "PDL": 1}),  # a narrow N: 9 tiles of 128 x 64
    ((96, 1536, 7168), {"BM": 128, "SPLITS": 6, "PDL": 1}),  # 12 tile columns: not narrow
    ((32, 28672, 4096), {"BM": 64, "STAGES": 8, "PDL": 1}),  # a wide N fills the grid, but M <= 64
    ((64, 16384, 3072), {"BM": 64, "STAGES": 8, "PDL": 1}),
    ((129, 16384, 3072), {"CN": 2, "PDL": 1}),  # past M = 128 the full grid's 256 x 128 tiles
    ((554, 57, 1517), {"BM": 128, "CONSUMERS": 1, "SPLITS": 4, "PDL": 1}),  # 5 tiles of 128 x 64, short K: ...
    ((900, 100, 900), {"BM": 128, "CONSUMERS": 1, "SPLITS": 3, "PDL": 1}),  # ... slices of >= 256 (short_k_split)
    ((300, 96, 8192), {"SPLITS": 2}),  # a deep K: the 4096-long slices of the rule above, as before
])
def test_tf32_choose_pairs_tile_columns_on_full_grids_and_takes_small_tiles_on_small_ones(shape, picked):
    """The rules, as a GPU without a hopper_tf32 table runs them (past M = 128 a table's vote
    decides: test_hopper_selection.py)."""
    spec, problem = SPECS["hopper_tf32"], GemmProblem(*shape)
    tunables, note = spec.choose(problem, "NVIDIA Imaginary GPU")
    assert tunables == picked and note and "\n" not in note
    spec.validate(problem, tunables)
    for path in (*rungs.TF32_SPLIT_STAGES_PROBES, rungs.TF32_SMALL_M_SPLIT_CHECK, rungs.TF32_SMALL_M_WHOLE_PROBE,
                 rungs.TF32_SMALL_M_WHOLE_CHECK, tf32_selection.SHORT_SPLIT_PROBE, tf32_selection.SHORT_SPLIT_CHECK,
                 rungs.TF32_NARROW_N_PROBE, rungs.TF32_NARROW_N_CHECK):
        assert (ROOT / path).is_file(), path


@settings(max_examples=100, deadline=None)
@given(m=st.integers(1, 20000), n=st.integers(1, 20000), k=st.integers(1, 70000))
@example(m=2049, n=1, k=2048)  # 17 one-consumer tiles of 128 x 64 in 8 short slices: 136 units, two CTAs an SM
def test_choose_always_gives_a_valid_configuration_whose_split_k_runs_at_once(m, n, k):
    if m * k > 2**31 - 1 or k * n > 2**31 - 1 or m * n > 2**31 - 1:
        return
    p = GemmProblem(m, n, k)
    tf32 = SPECS["hopper_tf32"]
    t = tf32.validate(p, tf32.choose(p, "NVIDIA H100 80GB HBM3")[0])
    if t["SPLITS"] > 1:  # the parallel reduction: every unit resident (two CTAs an SM for one consumer)
        g = entry_geometry(tf32, t)[1]
        assert geo.work_units(p, g, t["SPLITS"]) <= geo.fallback_resident_clusters(132, g.ctas_per_sm, g.cluster)
    spec = SPECS["hopper_bf16"]
    t = spec.validate(p, spec.choose(p, "NVIDIA H100 80GB HBM3")[0])
    if t["SPLITS"] > 1:  # the parallel reduction needs every unit resident: 66 two-CTA clusters on the H100
        g = entry_geometry(spec, t)[1]
        assert geo.work_units(p, g, t["SPLITS"]) <= geo.fallback_resident_clusters(132, g.ctas_per_sm, g.cluster)


# ---------------------------------------------------------------- the launch plan on a fake context
class FakeKernel:
    def __init__(self, name, log, signature=()):
        self.entry, self.handle, self.log, self.signature = name, None, log, tuple(signature)

    def pack(self, *args):
        return (self.entry, args)

    def launch(self, grid, block, args, stream, *, programmatic=False):
        self.log.append((self.entry, tuple(grid), tuple(block), args[1]))
        self.programmatic = programmatic


class Operand:
    def __init__(self, ptr, ld, itemsize):
        self.ptr, self.ld, self.itemsize = ptr, ld, itemsize


class Device:
    sm_count = 132


def record_maps_and_scratch(monkeypatch):
    """The recipe's tensor maps and scratch on a fake context: recipe.encode_tiled_2d checks each
    map (validate_tiled_2d) and records it. Returns (maps, scratch, workspace): the maps encoded,
    the scratch asked for (name -> (bytes, zeroed)), and the allocator that records it."""
    maps, scratch = [], {}

    def encode(address, dtype, rows, cols, ld, box_rows, box_cols, swizzle):
        tensor_map.validate_tiled_2d(address, dtype, rows, cols, ld, box_rows, box_cols, swizzle)
        maps.append((address, dtype, rows, cols, ld, box_rows, box_cols, swizzle))
        return bytes(128)

    def workspace(ws_name, nbytes, *, zeroed=False):
        assert nbytes > 0
        scratch[ws_name] = (nbytes, zeroed)
        return 0x7F3000000000 + 0x100000000 * len(scratch)

    monkeypatch.setattr(recipe, "encode_tiled_2d", encode)
    return maps, scratch, workspace


def _run_plan(monkeypatch, name, problem, tunables=None, lds=None, misalign=(0, 0, 0), resident=None):
    spec = SPECS[name]
    t = spec.validate(problem, tunables or {})
    itemsize = geo.ITEMSIZE[spec.precision]
    lds = lds or (problem.k, problem.n, problem.n)
    base = (0x7F0000000000, 0x7F1000000000, 0x7F2000000000)
    a, b = (Operand(base[i] + misalign[i] * itemsize, lds[i], itemsize) for i in range(2))
    c = Operand(base[2] + 4 * misalign[2], lds[2], 4)
    launches = []
    maps, scratch, workspace = record_maps_and_scratch(monkeypatch)
    signatures = {"main": spec.signature, **{e.name: e.signature for e in spec.extra_entries}}
    ctx = LaunchContext(spec, {n: FakeKernel(n, launches, s) for n, s in signatures.items()}, problem, a, b, c, t,
                        "stream", workspace, Device())
    resident = resident or (lambda ctx, kernel, g: geo.fallback_resident_clusters(132, g.ctas_per_sm, g.cluster))
    enqueue = recipe.recipe(ctx, SELECTORS[name], resident)
    enqueue()
    first = list(launches)
    enqueue()
    assert launches[len(first):] == first  # every launch repeats the packing passes
    return t, first, maps, scratch


def test_a_small_odd_shape_packs_both_operands_in_one_launch(monkeypatch):
    _, launches, _, _ = _run_plan(monkeypatch, "hopper_bf16", GemmProblem(400, 170, 2770))
    (entry, grid, _, args), gemm = launches
    # A: 400 rows of 352 chunks (2816 wide), 550 blocks; B: 2770 rows of 24 chunks (192 wide), 260
    assert entry == "pack_rows" and gemm[0] != "pack_rows" and grid == (550 + 260, 1, 1) and args[12] == 550
    assert (args[2], args[5], args[8], args[11]) == (400, 2816, 2770, 192)


def test_plan_of_aligned_bf16_operands_launches_the_gemm_alone(monkeypatch):
    t, launches, maps, scratch = _run_plan(monkeypatch, "persistent_bf16", GemmProblem(4096, 4096, 4096))
    assert launches == [("main", (132, 1, 1), (384, 1, 1), launches[0][3])] and scratch == {}
    args = launches[0][3]
    assert len(args) == len(SPECS["persistent_bf16"].signature) and args[-1] == 8  # group_m
    assert [m[2:] for m in maps] == [(4096, 4096, 4096, 128, 64, 128), (4096, 4096, 4096, 64, 64, 128)]


@pytest.mark.parametrize("name", ["hopper_bf16", "hopper_tf32"])
def test_pdl_launches_the_gemm_and_its_row_packing_programmatically(monkeypatch, name):
    """pack_rows waits at entry for the grid before it (pack.cuh), so with PDL it may start early."""
    kernels_seen = {}
    real = FakeKernel.launch

    def launch(self, grid, block, args, stream, *, programmatic=False):
        kernels_seen.setdefault(self.entry, set()).add(programmatic)
        real(self, grid, block, args, stream, programmatic=programmatic)

    monkeypatch.setattr(FakeKernel, "launch", launch)
    for pdl in (0, 1):
        kernels_seen.clear()
        _run_plan(monkeypatch, name, GemmProblem(4093, 4091, 4099), {"PDL": pdl})  # A and B packed first
        assert kernels_seen == {"main": {bool(pdl)}, "pack_rows": {bool(pdl)}}


def test_plan_packs_what_tma_cannot_read_before_every_gemm(monkeypatch):
    p = GemmProblem(4093, 4091, 4099)
    t, launches, maps, scratch = _run_plan(monkeypatch, "hopper_bf16", p, {"SWAPPED": 0})
    assert [entry for entry, *_ in launches] == ["pack_rows", "main"]  # A and B in one launch
    _, grid, block, args = launches[0]
    args_a, args_b = args[:6], args[6:12]
    # A: 4093 rows of 520 chunks, 8314 blocks (blocks0); B: 4099 rows of 512, 8198
    assert block == (256, 1, 1) and grid == (8314 + 8198, 1, 1) and args[12] == 8314
    assert args_a[1:4] == (4099, 4093, 4099) and args_a[5] == 4160  # ld_src, rows, cols; ld_dst (128-byte rows)
    assert args_b[1:4] == (4091, 4099, 4091) and args_b[5] == 4096
    assert scratch == {recipe.PACKED["a"]: (4093 * 4160 * 2, False), recipe.PACKED["b"]: (4099 * 4096 * 2, False)}
    a_map, b_map = maps
    assert a_map[0] == args_a[4] and a_map[2:] == (4093, 4099, 4160, 128, 64, 128)  # the packed copy
    assert b_map[0] == args_b[4] and b_map[2:] == (4099, 4091, 4096, 64, 64, 128)


def test_plan_of_split_k_reserves_partials_and_zeroed_counters(monkeypatch):
    p = GemmProblem(1024, 1024, 16384)
    tunables, _ = rungs.analytic_choice(p, "NVIDIA H100 80GB HBM3")
    t, launches, maps, scratch = _run_plan(monkeypatch, "hopper_bf16", p, tunables)
    ((entry, grid, block, args),) = launches
    assert (entry, grid, block) == ("cluster", (128, 1, 1), (384, 1, 1))  # 64 units of 2x1 clusters, all resident
    assert args[9:12] == (8, 2, 0) and args[12] and args[13]  # group_m, splits, whole, workspace, counters
    assert args[15] == 1  # C stored by TMA (its map is args[14])
    assert scratch == {recipe.PARTIALS: (64 * 2 * 128 * 128 * 4, False), recipe.COUNTERS: (64 * 8, True)}
    # A box 128 x 64; B box 64/CM k rows x 64 n; C: FP32, 64 rows x 32 columns a TMA store
    assert [m[5:7] for m in maps] == [(128, 64), (32, 64), (64, 32)]
    assert maps[2][:5] == (0x7F2000000000, "fp32", 1024, 1024, 1024)


def test_plan_of_the_swapped_path_and_the_one_consumer_path(monkeypatch):
    _, launches, maps, _ = _run_plan(monkeypatch, "hopper_fp16", GemmProblem(4096, 4096, 4096),
                                     {"SWAPPED": 1, "CM": 2}, resident=lambda ctx, k, g: 66)
    assert [(e, g, b, len(a)) for e, g, b, a in launches] == [("swapped", (132, 1, 1), (384, 1, 1), 10)]
    assert [m[5:7] for m in maps] == [(128, 64), (32, 64)]
    _, launches, _, scratch = _run_plan(monkeypatch, "hopper_bf16", GemmProblem(1024, 1024, 1024),
                                        {"BN": 128, "CONSUMERS": 1}, resident=lambda ctx, k, g: 264)
    assert [(e, g, b) for e, g, b, _ in launches] == [("main", (128, 1, 1), (256, 1, 1))] and scratch == {}
    assert launches[0][3][12:14] == (0, 0)  # no split: no scratch pointers


def test_plan_of_a_tail_split_cuts_the_last_wave(monkeypatch):
    """1024x5120x5120 in 128 x 256 tiles: 160 tiles on 132 SMs; TAIL=4 runs 132 whole and cuts
    the last 28 into 4 k ranges each (112 units, on 112 of the SMs the last wave left idle)."""
    p = GemmProblem(1024, 5120, 5120)
    _, launches, _, scratch = _run_plan(monkeypatch, "hopper_bf16", p, {"TAIL": 4}, resident=lambda ctx, k, g: 132)
    ((entry, grid, _, args),) = launches
    assert (entry, grid) == ("main", (132, 1, 1))
    assert args[10:12] == (4, 132) and args[12] and args[13]  # splits, whole, workspace, counters
    assert scratch == {recipe.PARTIALS: (28 * 4 * 128 * 256 * 4, False), recipe.COUNTERS: (160 * 8, True)}
    _, launches, _, scratch = _run_plan(monkeypatch, "hopper_bf16", p, {"TAIL": 0}, resident=lambda ctx, k, g: 132)
    assert launches[0][3][10:14] == (1, 0, 0, 0) and scratch == {}


def test_plan_of_hopper_tf32_cuts_the_last_wave_too(monkeypatch):
    """hopper_tf32 at 1024x5120x5120: 160 register-A tiles of 256 x 128 on 132 SMs, the last 28 cut
    4 ways as hopper_bf16's are; with B stored N x K (any_shape's entry) the same cut."""
    p = GemmProblem(1024, 5120, 5120)
    _, launches, _, scratch = _run_plan(monkeypatch, "hopper_tf32", p, {}, resident=lambda ctx, k, g: 132)
    ((entry, grid, _, args),) = launches
    assert (entry, grid) == ("main", (132, 1, 1)) and args[10:12] == (4, 132)  # splits, whole
    assert scratch[recipe.PARTIALS] == (28 * 4 * 256 * 128 * 4, False)
    _, launches, _, scratch = _run_plan(monkeypatch, "hopper_tf32", p, {"TAIL": 0}, resident=lambda ctx, k, g: 132)
    assert launches[0][3][10:14] == (1, 0, 0, 0) and scratch == {}
    _, launches, _, _ = _run_plan(monkeypatch, "hopper_tf32", replace(p, trans_b=True), {"TRANS_B": 1},
                                  resident=lambda ctx, k, g: 132)
    ((entry, _, _, args),) = launches
    assert entry == "stored_nk" and args[10:12] == (4, 132)


def test_plan_of_column_halves_runs_64_row_tiles_whole(monkeypatch):
    """NSPLIT=2 at 128x8192x2048: 64 x 128 tiles (two tile rows), 256 of them, two a CTA on 128
    CTAs of 384 threads; no split (TAIL=4 given: column halves run every tile whole), no
    workspace. A's box is 64 rows (the tile's), B's 64 k rows x 64 n; in a 2 x 1 cluster B's
    slices halve. At 1000 rows, 16 x 64 = 1024 tiles leave a partial last wave, unsplit."""
    p = GemmProblem(128, 8192, 2048)
    _, launches, maps, scratch = _run_plan(monkeypatch, "hopper_bf16", p, {"BN": 128, "STAGES": 8, "NSPLIT": 2},
                                           resident=lambda ctx, k, g: 132)
    ((entry, grid, block, args),) = launches
    assert (entry, grid, block) == ("main", (128, 1, 1), (384, 1, 1)) and scratch == {}
    assert args[10:14] == (1, 0, 0, 0)  # splits, whole, workspace, counters
    assert [m[5:7] for m in maps][:2] == [(64, 64), (64, 64)]
    _, launches, _, scratch = _run_plan(monkeypatch, "hopper_bf16", GemmProblem(1000, 8192, 2048),
                                        {"BN": 128, "STAGES": 8, "NSPLIT": 2, "TAIL": 4},
                                        resident=lambda ctx, k, g: 132)
    assert launches[0][3][10:14] == (1, 0, 0, 0) and scratch == {}
    _, launches, maps, _ = _run_plan(monkeypatch, "hopper_fp16", p, {"BN": 128, "STAGES": 8, "NSPLIT": 2, "CM": 2},
                                     resident=lambda ctx, k, g: 66)
    assert [(e, g) for e, g, _, _ in launches] == [("cluster", (128, 1, 1))]
    assert [m[5:7] for m in maps][:2] == [(64, 64), (32, 64)]


def test_plan_of_split_k_in_clusters_launches_ck_ctas_a_tile_and_no_scratch(monkeypatch):
    """CK=3 at 1024x576x7168: 40 tiles of 128 x 128, 120 CTAs in clusters of 3, splits and
    whole unread (1, 0), no workspace; 2048x2048x1024 with CK=2: 256 tiles, more than the 66
    resident clusters, so 132 CTAs loop over the tiles, and no tail split."""
    _, launches, _, scratch = _run_plan(monkeypatch, "hopper_bf16", GemmProblem(1024, 576, 7168),
                                        {"BN": 128, "STAGES": 6, "CK": 3}, resident=lambda ctx, k, g: 44)
    ((entry, grid, block, args),) = launches
    assert (entry, grid, block) == ("cluster", (120, 1, 1), (384, 1, 1)) and scratch == {}
    assert args[10:14] == (1, 0, 0, 0)  # splits, whole, workspace, counters
    _, launches, _, scratch = _run_plan(monkeypatch, "hopper_fp16", GemmProblem(2048, 2048, 1024),
                                        {"BN": 128, "STAGES": 6, "CK": 2, "TAIL": 4})
    assert [(e, g) for e, g, _, _ in launches] == [("cluster", (132, 1, 1))] and scratch == {}
    assert launches[0][3][10:14] == (1, 0, 0, 0)


def test_plan_of_the_decode_tiles(monkeypatch):
    """hopper_decode at 1x3584x3584 (nt): 56 tiles of 8 x 64 split 2 ways (112 units, two CTAs an
    SM resident); A's box is 8 rows, B's 64 rows of n (stored N x K); partials 8 x 64 FP32 each."""
    p = GemmProblem(1, 3584, 3584, trans_b=True)
    tunables, _ = rungs.decode_choice(p)
    _, launches, maps, scratch = _run_plan(monkeypatch, "hopper_bf16", p, tunables, lds=(3584, 3584, 3584))
    ((entry, grid, block, args),) = launches
    assert (entry, grid, block) == ("decode", (112, 1, 1), (256, 1, 1))
    assert args[10:12] == (2, 0) and args[12] and args[13]  # splits, whole, workspace, counters
    assert scratch == {recipe.PARTIALS: (56 * 2 * 8 * 64 * 4, False), recipe.COUNTERS: (56 * 8, True)}
    assert [m[2:7] for m in maps[:2]] == [(1, 3584, 3584, 8, 64), (3584, 3584, 3584, 64, 64)]


def test_plan_of_the_decode_tiles_on_the_exchanged_problem(monkeypatch):
    """SWAP_MN at 4096x16x2048 nt (x @ W^T, W of 16 rows): the kernel is handed 16x4096x2048, W's
    memory as its A (16 rows, box 16 x 64) and x's as its B (4096 rows of K, box 64 x 64), 64 tiles
    of 16 x 64 split 2 ways; C is stored from registers (c_tma = 0, no map of C encoded)."""
    p = GemmProblem(4096, 16, 2048, trans_b=True, out_dtype="bf16", epilogue="bias")
    tunables = {"DECODE": 16, "BN": 64, "CONSUMERS": 1, "SPLITS": 2, "SWAP_MN": 1}
    _, launches, maps, scratch = _run_plan(monkeypatch, "hopper_bf16", p, tunables, lds=(2048, 2048, 16))
    ((entry, grid, block, args),) = launches
    assert (entry, grid, block) == ("decode", (128, 1, 1), (256, 1, 1))
    assert args[:3] == (16, 4096, 2048) and args[10:12] == (2, 0) and args[15] == 0  # M, N, K; splits, whole; c_tma
    assert [m[:7] for m in maps] == [(0x7F1000000000, "bf16", 16, 2048, 2048, 16, 64),
                                     (0x7F0000000000, "bf16", 4096, 2048, 2048, 64, 64)]
    assert scratch[recipe.PARTIALS] == (64 * 2 * 16 * 64 * 4, False)


@pytest.mark.parametrize("layout, rows, refused", [("nt", 16, False), ("tt", 16, False), ("nn", 16, True),
                                                   ("tn", 64, False)])
def test_the_exchanged_problem_reads_b_stored_k_x_n_as_a_transposed_a(layout, rows, refused):
    """With SWAP_MN the exchanged problem's A is op(B)^T: stored transposed where B is stored K x N
    (nn, tn), which the decode tiles read in 64-row tiles only."""
    trans_a, trans_b = layout[0] == "t", layout[1] == "t"
    p = GemmProblem(4096, 16, 2048, trans_a=trans_a, trans_b=trans_b)
    t = {"DECODE": rows, "BN": 64, "CONSUMERS": 1, "SWAP_MN": 1}
    if refused:
        with pytest.raises(UnsupportedProblem, match="B stored K x N .* with SWAP_MN=1"):
            SPECS["hopper_bf16"].validate(p, t)
        return
    g = rungs.entry_geometry(SPECS["hopper_bf16"], SPECS["hopper_bf16"].validate(p, t))[1]
    assert (g.swap_mn, g.trans_a, g.trans_b) == (True, not trans_b, not trans_a)
    assert geo.kernel_problem(p, g) == GemmProblem(16, 4096, 2048, trans_a=not trans_b, trans_b=not trans_a)


def test_swap_mn_takes_the_decode_tiles():
    with pytest.raises(UnsupportedProblem, match="SWAP_MN=1 .* takes DECODE > 0"):
        SPECS["hopper_bf16"].validate(GemmProblem(4096, 16, 2048), {"SWAP_MN": 1})


def test_plan_of_the_swapped_pingpong_tiles(monkeypatch):
    """hopper_decode_cluster at 6144x8192x1024 with 160-row ping-pong tiles in 1 x 2 clusters: the
    launch covers every CTA of the GPU in pairs (the persistent grid), splits none (no tail split:
    each tile whole), and each CTA loads half of the A tile (80 rows) and the whole B tile
    (64-column boxes of 64 k rows)."""
    p = GemmProblem(6144, 8192, 1024)
    tunables = {"DECODE": 160, "BN": 128, "CONSUMERS": 2, "PINGPONG": 1, "CN": 2, "PDL": 1}
    _, launches, maps, scratch = _run_plan(monkeypatch, "hopper_bf16", p, tunables)
    ((entry, grid, block, args),) = launches
    assert entry == "decode_cluster" and block == (384, 1, 1) and grid[0] % 2 == 0 and grid[1:] == (1, 1)
    assert args[10:12] == (1, 0) and not scratch  # splits, whole: no split-K, no workspace
    assert [m[5:7] for m in maps[:2]] == [(80, 64), (64, 64)]


def test_c_is_stored_by_tma_only_where_its_rows_allow(monkeypatch):
    """any_shape's EPILOGUE 3: c_tma = 1 and C's map where TMA can write C; else 0, a spare map
    (never read), and the kernel's own stores."""
    for n, lds, misalign, expect in ((200, (64, 200, 200), (0, 0, 0), 1), (200, (64, 200, 204), (0, 0, 0), 1),
                                     (200, (64, 200, 201), (0, 0, 0), 0), (200, (64, 200, 200), (0, 0, 1), 0),
                                     (199, (64, 199, 200), (0, 0, 0), 0)):  # a store would write column 199
        p = GemmProblem(300, n, 64)
        _, launches, maps, _ = _run_plan(monkeypatch, "hopper_bf16", p, {"BN": 128, "STAGES": 6}, lds=lds,
                                         misalign=misalign)
        args = launches[-1][3]
        assert args[15] == expect and len(maps) == 2 + expect
        if expect:
            assert maps[2][1:] == ("fp32", 300, 200, lds[2], 64, 32, 128)
    _, launches, maps, _ = _run_plan(monkeypatch, "hopper_bf16", GemmProblem(300, 200, 64), {"STORE": 0})
    assert launches[-1][3][15] == 0 and len(maps) == 2  # STORE=0: the kernel's own stores


class PackingKernel(FakeKernel):
    """A fake entry that packs its arguments as a loaded Kernel does (PackedArgs of its signature)."""

    def __init__(self, name, log, signature):
        super().__init__(name, log)
        self.signature = signature

    def pack(self, *args):
        return PackedArgs(self.signature, args)


def argument_bytes(packed: PackedArgs, signature) -> list[bytes]:
    """Each argument's bytes as cuLaunchKernel reads them through the packed pointer array."""
    pointers = (ctypes.c_void_p * len(signature)).from_address(packed.address)
    sizes = [128 if t == "tensormap" else ctypes.sizeof(C_TYPES[t]) for t in signature]
    return [ctypes.string_at(pointers[i], size) for i, size in enumerate(sizes)]


def test_a_repointed_launch_packs_what_a_new_launch_at_those_addresses_packs(monkeypatch):
    spec, p = SPECS["hopper_bf16"], GemmProblem(300, 200, 64)
    t = spec.validate(p, {"BN": 128, "STAGES": 6})
    encoded, readdressed = [], []

    def encode(address, dtype, rows, cols, ld, box_rows, box_cols, swizzle):  # a map that says where it points
        encoded.append(address)
        return struct.pack("<QQQ", address, rows, ld) + bytes(104)

    def readdress(map_address, address):  # as the driver's: the same map, pointing elsewhere
        readdressed.append(address)
        ctypes.memmove(map_address, struct.pack("<Q", address), 8)

    monkeypatch.setattr(recipe, "encode_tiled_2d", encode)
    monkeypatch.setattr(module, "readdress", readdress)
    signatures = {"main": spec.signature, **{e.name: e.signature for e in spec.extra_entries}}
    kernels_ = {name: PackingKernel(name, [], signature) for name, signature in signatures.items()}
    signature = signatures[SELECTORS["hopper_bf16"](spec.precision, t)[0]]

    def launch_at(a, b, c, bias):
        ctx = LaunchContext(spec, kernels_, p, a, b, c, t, "stream", lambda *x, **y: 0x7F3000000000, Device(), bias)
        return recipe.recipe(ctx, SELECTORS["hopper_bf16"], lambda ctx, kernel, g: 132)

    a, b, c = Operand(0x7F0000000000, 64, 2), Operand(0x7F1000000000, 200, 2), Operand(0x7F2000000000, 200, 4)
    first = launch_at(a, b, c, 0x7F4000000000)
    moves = [(Operand(a.ptr + 0x400, 64, 2), b, c, 0x7F4000000000, 1),  # A moved: its map alone, readdressed
             (a, b, Operand(c.ptr + 0x800, 200, 4), 0x7F4000000100, 1),  # C and the bias: C's map
             (a, Operand(b.ptr + 16, 200, 2), c, 0x7F4000000000, 1)]
    for a2, b2, c2, bias2, maps in moves:
        del encoded[:], readdressed[:]
        again = first.repoint(a2, b2, c2, bias2)
        assert len(readdressed) == maps and not encoded
        fresh = launch_at(a2, b2, c2, bias2)
        assert argument_bytes(again.packed, signature) == argument_bytes(fresh.packed, signature)
    # C at an odd address can no longer be stored by TMA: a decision changes, so all is made again
    del encoded[:]
    again = first.repoint(a, b, Operand(c.ptr + 4, 200, 4), 0x7F4000000000)
    assert len(encoded) == 2 and argument_bytes(again.packed, signature)[15] == bytes(4)
    # a launch that packs an operand first is made again too (the packing pass reads the new one)
    packed_first = launch_at(Operand(a.ptr + 2, 64, 2), b, c, 0)
    assert packed_first.passes and packed_first.repoint(Operand(a.ptr + 6, 64, 2), b, c, 0).passes


def test_plan_of_tf32_transposes_b_for_the_rungs_and_not_for_register_a(monkeypatch):
    p = GemmProblem(300, 200, 100)
    _, launches, maps, scratch = _run_plan(monkeypatch, "cluster_tf32", p, misalign=(1, 0, 3))  # no PDL
    assert [e for e, *_ in launches] == ["pack_rows", "pack_transpose", "main"]
    _, grid, _, args = launches[0]
    assert args[6:12] == (0,) * 6 and args[12] == grid[0]  # A's row copy alone: every block copies it
    assert launches[1][1] == (7, 4, 1)  # 32 x 32 tiles over B (100 x 200)
    assert maps[1][2:7] == (200, 100, 128, 128, 32)  # B^T: N x K (rows of 128 bytes), box BN/CM rows x 32
    assert set(scratch) == {recipe.PACKED["a"], recipe.PACKED["b"]}
    _, launches, maps, scratch = _run_plan(monkeypatch, "hopper_tf32", p)
    assert [e for e, *_ in launches] == ["main"] and scratch == {}
    assert [m[2:7] for m in maps] == [(300, 100, 100, 256, 32), (100, 200, 200, 32, 32)]


def test_plan_of_tf32_with_b_stored_n_x_k_reads_it_as_stored(monkeypatch):
    """nt and tt: any_shape's entry over B as stored (N x K is K-major, as TF32 wgmma reads it),
    no transposed copy, C by TMA stores; its cluster entry where CM x CN > 1."""
    p = GemmProblem(300, 200, 100, trans_b=True)
    t, launches, maps, scratch = _run_plan(monkeypatch, "hopper_tf32", p, lds=(100, 100, 200))
    assert t["TRANS_B"] == 1 and [e for e, *_ in launches] == ["stored_nk"] and scratch == {}
    # A: M x K, box 128 rows (64 * CONSUMERS) x 32; B as stored: N x K, box BM = 256 rows x 32; C
    assert [m[2:7] for m in maps] == [(300, 100, 100, 128, 32), (200, 100, 100, 256, 32), (300, 200, 200, 64, 32)]
    _, launches, maps, _ = _run_plan(monkeypatch, "hopper_tf32", p, {"CM": 2}, lds=(100, 100, 200))
    assert [e for e, *_ in launches] == ["stored_nk_cluster"] and maps[1][5] == 128  # B's box halved across CM
    _, launches, _, scratch = _run_plan(monkeypatch, "hopper_tf32", replace(p, k=101), lds=(101, 101, 200))
    assert [e for e, *_ in launches] == ["pack_rows", "stored_nk"]  # 404-byte rows: both packed, not transposed
    assert set(scratch) == {recipe.PACKED["a"], recipe.PACKED["b"]}


@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (4096, 3900, 4096), (3900, 4096, 4096), (1024, 1024, 16384),
                                   (16, 576, 7168), (16384, 128, 4096)])
def test_tf32_choose_with_b_stored_n_x_k_is_the_rule_on_the_transposed_problem(shape):
    """any_shape's 64*CONSUMERS x BM tiles are the register-A tiles of C^T = B^T A^T transposed:
    the rule's pick for the N x M problem (as a GPU without a hopper_tf32 table takes it), its
    cluster roles swapped (its CN is our CM)."""
    m, n, k = shape
    spec = SPECS["hopper_tf32"]
    transposed, _ = spec.choose(GemmProblem(n, m, k), "NVIDIA Imaginary GPU")
    tunables, note = spec.choose(GemmProblem(m, n, k, trans_b=True), "NVIDIA H100 80GB HBM3")
    assert tunables == {**transposed, "CM": transposed.get("CN", 1), "CN": transposed.get("CM", 1)}
    assert note.startswith(f"B stored N x K: any_shape's tiles, as the rule picks for {n}x{m}: ")
    for trans_a in (False, True):
        spec.validate(GemmProblem(m, n, k, trans_a=trans_a, trans_b=True), tunables)


def test_plan_of_rung_1_and_empty_problems(monkeypatch):
    _, launches, maps, _ = _run_plan(monkeypatch, "wgmma_tma_tf32", GemmProblem(129, 130, 33))
    assert [(e, g, b) for e, g, b, _ in launches][-1] == ("main", (2, 2, 1), (128, 1, 1))
    assert maps[1][2:7] == (130, 33, 64, 128, 32)  # B^T (rows of 128 bytes) box: BN rows
    _, launches, maps, _ = _run_plan(monkeypatch, "hopper_bf16", GemmProblem(0, 5, 7))
    assert launches == [] and maps == []


@pytest.mark.parametrize("name", sorted(name for name, spec in SPECS.items() if spec.precision != "fp8"))
def test_plan_arguments_match_each_entry_signature(monkeypatch, name):  # FP8 (scaled nt): test_hopper_fp8_specs.py
    spec = SPECS[name]
    signatures = {"main": spec.signature, **{e.name: e.signature for e in spec.extra_entries}}
    for problem, misalign in ((GemmProblem(77, 300, 4099), (1, 1, 1)), (GemmProblem(1, 1, 1), (0, 0, 0))):
        for overrides in spec.configurations():
            stored = spec.probe(problem.m, problem.n, problem.k, overrides)  # the layout a build takes
            laid = replace(problem, trans_a=stored.trans_a, trans_b=stored.trans_b)
            _, launches, _, _ = _run_plan(monkeypatch, name, laid, overrides, misalign=misalign,
                                          lds=(laid.m if laid.trans_a else laid.k, laid.k if laid.trans_b else laid.n,
                                               laid.n))
            for entry, grid, block, args in launches:
                assert len(args) == len(signatures[entry]), (entry, args)
                assert all(1 <= x for x in grid) and block[0] in (128, 256, 384)


# ---------------------------------------------------------------- the generator
def test_gen_wgmma_reproduces_the_committed_header():
    spec = importlib.util.spec_from_file_location("gen_wgmma", ROOT / "tools" / "gen_wgmma.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    committed = (ROOT / "cu" / "hopper" / "wgmma.cuh").read_bytes()
    assert gen.render().encode() == committed
    assert gen.OUT == ROOT / "cu" / "hopper" / "wgmma.cuh"
    assert b"GENERATED by tools/gen_wgmma.py" in committed
