"""GPU tests of the Hopper rungs (sm_90a: they run on compute capability 9.0 only).

Every Hopper kernel against the float64 reference on Hypothesis-drawn cases (ragged M, N, K,
padded and odd leading dimensions, misaligned pointers, alpha and beta including 0, NaN-
poisoned C and guard bands: see strategies.py / checking.py), with the tunables ``choose``
picks and with forced ones that reach each path: swapped roles, clusters (up to 2 x 4),
one-consumer tiles (BF16/FP16 and TF32), 64-row tiles whose consumers split the columns (NSPLIT), C's own stores instead of TMA stores, split-K reduced
in parallel and serially, split-K inside a cluster (CK), split-K of only the last wave's tiles
(TAIL), the small-M decode tiles (DECODE), 128 x 192 tiles, the two consumers taking turns on
whole tiles (PINGPONG). Fixed cases pin packing (K = 4099, odd strides, misaligned bases) and
beta; split-K must give the same bits on every launch, and split-K inside
a cluster the bits of split-K through memory; a few large shapes run through the last rungs. All
skip without a GPU, and on a GPU other than sm_90.

    python -m pytest -q tests/test_hopper_gpu.py
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import gemm_driver
from gemm_driver.case import PreparedCase
from gemm_driver.checking import check_case
from gemm_driver.kernels import hopper
from gemm_driver.problem import GemmProblem
from gemm_driver.strategies import GemmCase, Variants, gemm_cases
from helpers import assert_same_bits

pytestmark = pytest.mark.gpu

SPECS = {spec.name: spec for spec in hopper.SPECS}
NAMES = [name for name, spec in SPECS.items() if spec.precision != "fp8"]  # FP8: test_hopper_fp8_gpu.py
DRAWN = 25  # cases per kernel with its own (chosen) tunables
FORCED_DRAWN = 12  # cases per forced configuration

# Configurations whose paths the chosen tunables do not reach on drawn (<= 300) shapes.
FORCED = [
    ("wgmma_tma_bf16", {"BN": 64, "STAGES": 4}),
    ("warp_specialized_fp16", {"BN": 128, "STAGES": 6}),
    ("persistent_tf32", {"BN": 128, "STAGES": 6}),
    ("cluster_bf16", {"BN": 128, "STAGES": 6, "CM": 4, "CN": 1}),
    ("cluster_fp16", {"CM": 1, "CN": 2}),
    ("cluster_tf32", {"BN": 128, "STAGES": 6, "CM": 2, "CN": 2}),
    ("hopper_bf16", {"STORE": 0}),  # any_shape 128 x 256, C's own stores (staged where C needs it)
    ("hopper_fp16", {"BN": 128, "CONSUMERS": 1, "STORE": 0}),
    ("hopper_bf16", {"SWAPPED": 1, "CM": 2}),
    ("hopper_fp16", {"SWAPPED": 1, "CM": 1, "CN": 2}),
    ("hopper_bf16", {"SPLITS": 3}),  # split-K, every unit resident: the parallel reduction
    ("hopper_fp16", {"BN": 128, "STAGES": 6, "CM": 2, "SPLITS": 2}),  # split-K in 2x1 clusters
    ("hopper_bf16", {"BN": 64, "STAGES": 8, "SPLITS": 2}),  # two splits' chunk ranges cut a group of 8 quads
    ("hopper_bf16", {"BN": 128, "CONSUMERS": 1, "SPLITS": 4, "CN": 2}),
    ("hopper_fp16", {"BN": 64, "STAGES": 8, "CN": 2, "STORE": 0}),  # 128 x 64 tiles (chosen: no cluster)
    ("hopper_bf16", {"BN": 64, "STAGES": 8, "CN": 4}),  # four CTAs of a tile row share A: 32-row slices
    ("hopper_fp16", {"BN": 128, "CONSUMERS": 1, "CM": 2, "CN": 4}),  # clusters of 8, 16-row A slices
    ("hopper_bf16", {"BN": 128, "STAGES": 8, "NSPLIT": 2}),  # 64 x 128 tiles, each consumer 64 columns
    ("hopper_fp16", {"NSPLIT": 2, "CM": 2, "STORE": 0}),  # 64 x 256 tiles sharing B in 2 x 1, C from registers
    ("hopper_bf16", {"BN": 192}),  # 128 x 192 tiles: wgmma m64n192, three 64-column B boxes a stage
    ("hopper_fp16", {"BN": 192, "CM": 2, "SPLITS": 2}),
    ("hopper_bf16", {"BN": 192, "CONSUMERS": 1, "STAGES": 3, "SPLITS": 4}),
    ("hopper_bf16", {"BN": 128, "STAGES": 6, "CK": 2}),  # split-K in a cluster, through distributed shared memory
    ("hopper_fp16", {"BN": 128, "CONSUMERS": 1, "CK": 3}),  # 4 chunks over 3 CTAs; two CTAs an SM
    ("hopper_bf16", {"BN": 64, "STAGES": 8, "CK": 4}),  # 2 chunks over 4 CTAs: two of them store nothing
    ("hopper_fp16", {"BN": 192, "STAGES": 4, "CK": 2}),  # 6 chunks over 2 CTAs
    ("hopper_bf16", {"BN": 192, "CK": 3, "PDL": 1}),  # the vote's cluster-split candidates: FP32 C stored in
    ("hopper_bf16", {"BN": 192, "CK": 4, "PDL": 1}),  # the plain order (store_tma's TURN), 2 or 1-2 chunks a CTA
    ("hopper_bf16", {"BN": 64, "STAGES": 8, "PINGPONG": 1}),  # ping-pong: few tiles, the second consumer mostly idle
    ("hopper_fp16", {"BN": 128, "STAGES": 6, "CM": 2, "PINGPONG": 1, "STORE": 0}),
    ("hopper_bf16", {"DECODE": 16, "BN": 64, "CONSUMERS": 1}),  # small M: swapped roles, any M in 16-row tiles
    ("hopper_fp16", {"DECODE": 8, "BN": 128, "CONSUMERS": 2, "SPLITS": 3}),  # serial split-K of 8-row tiles
    ("hopper_bf16", {"DECODE": 64, "BN": 64, "CONSUMERS": 1, "SPLITS": 2}),
    ("hopper_bf16", {"DECODE": 16, "BN": 64, "CONSUMERS": 1, "CM": 2}),  # two tile rows share B by multicast
    ("hopper_fp16", {"DECODE": 8, "BN": 128, "CONSUMERS": 2, "CM": 2, "SPLITS": 3}),
    ("hopper_bf16", {"DECODE": 64, "BN": 128, "CONSUMERS": 2, "CM": 2, "PDL": 1}),  # row_pair_choice's form
    ("hopper_bf16", {"DECODE": 160, "BN": 128, "CONSUMERS": 2, "CN": 2, "PINGPONG": 1}),  # swapped ping-pong
    ("hopper_fp16", {"DECODE": 128, "BN": 128, "CONSUMERS": 2, "CM": 2}),  # both consumers on each 128-row tile
    ("hopper_tf32", {"CM": 2, "CN": 2, "STAGES": 3}),
    ("hopper_tf32", {"CM": 2, "GROUP_M": 1}),
    ("hopper_tf32", {"BM": 128, "CONSUMERS": 1}),  # 128 x 64 tiles, two CTAs an SM
    ("hopper_tf32", {"BM": 128, "CONSUMERS": 1, "CN": 2, "SPLITS": 3}),
    ("hopper_tf32", {"BM": 128, "CM": 2, "SPLITS": 2}),
    ("hopper_tf32", {"BM": 64, "STAGES": 6, "CM": 2, "CN": 2, "SPLITS": 3}),  # 64 x 128 tiles
    ("hopper_tf32", {"BM": 128, "CONSUMERS": 1, "SPLITS": 8, "PDL": 1}),  # short_k_split's form: short slices
]

# (m, n, k, ld pads, misalignments in elements): what each one reaches.
FIXED = [
    (257, 300, 4099, (0, 0, 0), (0, 0, 0)),  # lda = 4099: A packed (8198-byte rows); B packed (N = 300)
    (129, 264, 4096, (0, 0, 0), (1, 3, 1)),  # aligned strides, misaligned bases: A and B packed, C scalar
    (200, 512, 136, (8, 0, 2), (0, 0, 0)),  # TMA reads A and B in place; padded ldc; C stored by TMA
    (70, 7, 64, (0, 0, 1), (0, 0, 0)),  # ldc = 8 suits TMA, N = 7 does not (a store would write column 7)
    (1, 1, 1, (0, 0, 0), (0, 0, 0)),
]


@pytest.fixture(scope="module")
def hopper_session(session):
    if session.device.compute_capability != (9, 0):
        pytest.skip(f"the Hopper kernels are built for sm_90a and run on sm_90 only; this GPU is {session.arch}")
    return session


def _check(session, name, case, tunables=None):
    outcome = check_case(session, name, case, tunables)
    assert outcome.ok, f"{name}{tunables or ''} {case.describe()}: {outcome.message}"
    return outcome


def _drawn(session, name, tunables, examples, variants=None):
    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=gemm_cases() if variants is None else gemm_cases(variants=variants))
    def holds(case: GemmCase):
        _check(session, name, case, tunables)

    holds()


@pytest.mark.parametrize("name", NAMES)
def test_drawn_cases_with_chosen_tunables(hopper_session, name):
    _drawn(hopper_session, name, None, DRAWN)


@pytest.mark.parametrize("name, tunables", FORCED, ids=[f"{n}{t}" for n, t in FORCED])
def test_drawn_cases_on_forced_paths(hopper_session, name, tunables):
    _drawn(hopper_session, name, tunables, FORCED_DRAWN)


# hopper_tf32 with B stored N x K (nt, tt): any_shape's entries over B as stored
STORED_NK = [{}, {"CM": 2}, {"CM": 2, "CN": 2, "STAGES": 3}, {"BM": 128, "CONSUMERS": 1, "SPLITS": 3},
             {"BM": 64, "STAGES": 8, "CN": 2, "SPLITS": 2}, {"BM": 128, "CM": 2, "SPLITS": 2}]


@pytest.mark.parametrize("tunables", STORED_NK, ids=[str(t) for t in STORED_NK])
def test_tf32_with_b_stored_n_x_k_on_forced_paths(hopper_session, tunables):
    _drawn(hopper_session, "hopper_tf32", tunables, FORCED_DRAWN, Variants(layouts=("nt", "tt")))


@pytest.mark.parametrize("name", NAMES)
def test_packing_misalignment_and_beta(hopper_session, name):
    for index, (m, n, k, pads, misalign) in enumerate(FIXED):
        for alpha, beta in ((1.0, 0.0), (-1.5, 0.75)):
            _check(hopper_session, name, GemmCase(GemmProblem(m, n, k, alpha, beta), pads, misalign, index))


def _launches(session, name, problem, tunables, launches=5, seed=3):
    """Launch one Launch ``launches`` times (C refilled before each) and require the same
    bits every time; the verification of the first C, and what the Launch chose."""
    with PreparedCase.random(problem, SPECS[name].precision, seed) as case:
        launch = case.launcher(session, name, tunables)

        def run():
            out, guard = case.run(launch)
            assert guard == 0
            return out

        first = assert_same_bits(run, launches, f"{name} {problem.label}")
        return case.check(first), launch.record()


@pytest.mark.parametrize("name, tunables", [
    # 2 splits in 2x1 clusters, all units resident (parallel reduction): the H100's pick (the H200's table
    # picks split-K inside clusters, CK, tested below)
    ("hopper_bf16", {"BN": 128, "STAGES": 6, "CM": 2, "SPLITS": 2}),
    ("hopper_bf16", {"BN": 128, "STAGES": 6, "SPLITS": 8}),  # 512 units > 132 CTAs: the last slice reduces
    ("hopper_fp16", {"BN": 128, "CONSUMERS": 1, "SPLITS": 3}),
    ("hopper_tf32", None),  # chosen: 4 splits of 256 x 128 tiles, all resident
    ("hopper_tf32", {"BM": 128, "CONSUMERS": 1, "SPLITS": 8}),  # 1024 units: the last slice reduces
])
def test_split_k_is_correct_and_bitwise_reproducible(hopper_session, name, tunables):
    problem = GemmProblem(1024, 1024, 16384, 1.0, 0.5)
    verification, record = _launches(hopper_session, name, problem, tunables)
    assert verification.ok, verification.message
    assert record["tunables"]["SPLITS"] > 1, record


# Split-K inside clusters against split-K through the workspace: the same k ranges, added in the
# same order, so the same bits; a grid of more clusters than can be resident (units looped) too.
CLUSTER_SPLITS = [
    ("hopper_bf16", GemmProblem(1000, 600, 7000, 1.0, 0.5), {"BN": 128, "STAGES": 6}, 2),
    ("hopper_fp16", GemmProblem(513, 390, 5000, -1.0, 0.0, trans_b=True, out_dtype="fp16", epilogue="bias_relu"),
     {"BN": 128, "STAGES": 6}, 3),
    ("hopper_bf16", GemmProblem(300, 500, 4100, 1.0, 0.25), {"BN": 128, "CONSUMERS": 1}, 4),
    ("hopper_bf16", GemmProblem(2048, 2048, 1024), {"BN": 128, "STAGES": 6}, 2),  # 256 tiles: CTAs loop over units
    ("hopper_bf16", GemmProblem(700, 900, 6000, 1.0, 0.5), {"BN": 192}, 3),  # 128 x 192 tiles: the plain store order
]


@pytest.mark.parametrize("name, problem, tile, ck", CLUSTER_SPLITS,
                         ids=[f"{c[1].label}-CK{c[3]}" for c in CLUSTER_SPLITS])
def test_split_k_in_clusters_gives_the_bits_of_split_k_through_memory(hopper_session, name, problem, tile, ck):
    with PreparedCase.random(problem, SPECS[name].precision, 11) as case:
        in_cluster = case.launcher(hopper_session, name, {**tile, "CK": ck})
        through_memory = case.launcher(hopper_session, name, {**tile, "SPLITS": ck})

        def run(launch):
            out, guard = case.run(launch)
            assert guard == 0
            return out

        first = assert_same_bits(lambda: run(in_cluster), 3, f"{name} {problem.label} CK={ck}")
        verification = case.check(first)
        assert verification.ok, verification.message
        expected = run(through_memory)
        differing = int(np.count_nonzero(first.view(np.uint32) != expected.view(np.uint32)))
        assert differing == 0, f"CK={ck} differs from SPLITS={ck} in {differing} of {first.size} elements"


# Tail splits (TAIL): more tiles than resident CTAs, the last partial wave's tiles cut into k ranges
TAILS = [
    ("hopper_bf16", GemmProblem(1024, 5120, 2048, 1.0, 0.5), {"TAIL": 4}),  # 160 tiles: 132 whole, 28 cut 4 ways
    ("hopper_fp16", GemmProblem(1000, 5000, 3000, -1.0, 0.0), {"CM": 2, "TAIL": 4}),  # 2x1 clusters, ragged edges
    ("hopper_bf16", GemmProblem(1024, 5120, 2048), {"BN": 128, "CONSUMERS": 1, "TAIL": 2}),  # two CTAs an SM
    ("hopper_bf16", GemmProblem(1100, 4100, 1000, 1.0, 0.5, trans_b=True, out_dtype="bf16", epilogue="bias_gelu"),
     {"BN": 128, "STAGES": 6, "TAIL": 4}),  # a linear layer: B stored N x K, BF16 D, bias and GELU
    ("hopper_bf16", GemmProblem(16, 40000, 1024, 1.0, 0.5),  # decode: 625 tiles, 528 whole, 97 cut 2 ways
     {"DECODE": 16, "BN": 64, "CONSUMERS": 1, "TAIL": 4}),
    ("hopper_bf16", GemmProblem(40, 20000, 1024, 1.0, 0.5, trans_b=True),  # clusters of two 32-row tiles
     {"DECODE": 32, "BN": 64, "CONSUMERS": 1, "CM": 2, "TAIL": 4}),
    ("hopper_tf32", GemmProblem(1024, 5120, 2048, 1.0, 0.5), {"TAIL": 4}),  # register A: 160 tiles of 256 x 128
    ("hopper_tf32", GemmProblem(1000, 5000, 3000, -1.0, 0.0), {"CN": 2, "TAIL": 4}),  # 1 x 2 clusters, ragged
    ("hopper_tf32", GemmProblem(1100, 4100, 1000, 1.0, 0.5, trans_b=True), {"TAIL": 2}),  # B stored N x K
]


@pytest.mark.parametrize("name, problem, tunables", TAILS, ids=[f"{n}-{p.label}-{t}" for n, p, t in TAILS])
def test_tail_split_is_correct_and_bitwise_reproducible(hopper_session, name, problem, tunables):
    verification, record = _launches(hopper_session, name, problem, tunables)
    assert verification.ok, verification.message
    assert record["tunables"]["TAIL"] == tunables["TAIL"], record


# Ping-pong (PINGPONG): more tiles than CTAs, so both consumers of a CTA take turns; ragged
# edges, clusters, each layout, 16-bit D with the fused epilogues, beta, C's own stores; K of one
# k tile; K of 16-47 k tiles, so that a consumer's k loop wraps the ring while the other stores.
PINGPONG = {"BN": 128, "STAGES": 6, "PINGPONG": 1}
SWAPPED_PINGPONG = {"DECODE": 160, "BN": 128, "CONSUMERS": 2, "PINGPONG": 1}
PINGPONG_CASES = [
    ("hopper_bf16", GemmProblem(1000, 5000, 3000, -1.0, 0.5), PINGPONG),
    ("hopper_fp16", GemmProblem(2049, 3001, 1500), {**PINGPONG, "CM": 2}),  # 17 tile rows: the last cluster half empty
    ("hopper_bf16", GemmProblem(1100, 4100, 1000, 1.0, 0.5, trans_b=True, out_dtype="bf16", epilogue="bias_gelu"),
     {**PINGPONG, "CM": 2}),
    ("hopper_bf16", GemmProblem(3000, 2000, 700, trans_a=True, trans_b=True, out_dtype="bf16", epilogue="bias_relu"),
     {"BN": 64, "STAGES": 8, "CN": 2, "PINGPONG": 1}),
    ("hopper_fp16", GemmProblem(1500, 2500, 999, 1.0, 0.5, trans_a=True, out_dtype="fp16", epilogue="bias"),
     {**PINGPONG, "STORE": 0}),
    ("hopper_bf16", GemmProblem(4000, 4000, 64), PINGPONG),  # one k tile a unit
    # the swapped ping-pong tiles (DECODE rows of A x 128 columns): A read row-major, so nn and nt
    ("hopper_bf16", GemmProblem(1000, 5000, 3000, -1.0, 0.5), SWAPPED_PINGPONG),
    ("hopper_fp16", GemmProblem(2049, 3001, 1500), {**SWAPPED_PINGPONG, "CN": 2}),  # 13 tile rows, ragged
    ("hopper_bf16", GemmProblem(1100, 4100, 1000, 1.0, 0.5, trans_b=True, out_dtype="bf16", epilogue="bias_gelu"),
     {**SWAPPED_PINGPONG, "CM": 2}),
    ("hopper_fp16", GemmProblem(1500, 2500, 999, 1.0, 0.5, trans_b=True, out_dtype="fp16", epilogue="bias_relu"),
     {**SWAPPED_PINGPONG, "DECODE": 128, "CM": 2, "CN": 2}),
    ("hopper_bf16", GemmProblem(4000, 4000, 64), {**SWAPPED_PINGPONG, "PDL": 1}),  # one k tile a unit
]


@pytest.mark.parametrize("name, problem, tunables", PINGPONG_CASES,
                         ids=[f"{n}-{p.label}-{p.layout}-{p.out_dtype}-{p.epilogue}-{t}" for n, p, t in PINGPONG_CASES])
def test_pingpong_is_correct_and_bitwise_reproducible(hopper_session, name, problem, tunables):
    verification, record = _launches(hopper_session, name, problem, tunables)
    assert verification.ok, verification.message
    assert record["tunables"]["PINGPONG"] == 1, record


@pytest.mark.parametrize("name, shape", [
    ("hopper_bf16", (4093, 4091, 4099)),
    ("hopper_fp16", (4093, 4091, 4099)),
    ("hopper_tf32", (4093, 4091, 4099)),
    ("hopper_fp16", (1024, 1024, 16384)),
    ("hopper_tf32", (1024, 1024, 16384)),
    ("hopper_bf16", (2048, 2048, 2048)),  # chosen: TMA stores, no cluster
    ("hopper_fp16", (4096, 4096, 4096)),  # chosen: TMA stores, 2x1 cluster
    ("hopper_bf16", (16384, 128, 4096)),
    ("cluster_tf32", (1000, 1000, 1000)),
    ("hopper_tf32", (1024, 1024, 1024)),  # chosen: 64 x 128 tiles
    ("hopper_tf32", (2048, 2048, 2048)),  # chosen: 1 x 2 cluster
    ("hopper_tf32", (32, 16384, 1024)),  # chosen: 64 x 128 tiles, a wide N at M <= 64
    ("hopper_tf32", (96, 20000, 3072)),  # chosen: 128 x 128 tiles at M of 65-128, N ragged
    ("hopper_tf32", (100, 4608, 12288)),  # chosen: 3 slices of 128 x 128 tiles, M ragged
])
def test_large_shapes(hopper_session, name, shape):
    problem = GemmProblem(*shape, alpha=1.0, beta=-0.5)
    verification, record = _launches(hopper_session, name, problem, None, launches=1)
    assert verification.ok, f"{name} {problem.label} {record}: {verification.message}"


def test_the_last_rung_says_what_it_chose(hopper_session):
    """The record names the tunables choose() picked and why: the vote of the GPU's tuned
    table where it has one (the H100), the analytic rule elsewhere."""
    problem = GemmProblem(1024, 1024, 1024)
    spec = gemm_driver.kernels.get("hopper_bf16")
    want, why = spec.choose(problem, hopper_session.device.name)
    with PreparedCase.random(problem, "bf16", 1) as case:
        record = hopper_session.launcher("hopper_bf16", problem, *case.device()).record()
    assert {k: record["tunables"][k] for k in want} == want and record["note"] == why
    assert "nearest tuning shapes" in why or "128 of 128x64" in why


@pytest.mark.parametrize("name, shape, extra", [
    ("hopper_bf16", (2048, 2048, 2048), {}),  # any_shape, TMA stores
    ("hopper_fp16", (1024, 1024, 1024), {"BN": 128, "STAGES": 4, "CONSUMERS": 1, "STORE": 0}),  # two CTAs an SM
    ("hopper_bf16", (1024, 1024, 1024), {"BN": 64, "STAGES": 8}),  # 128 x 64 tiles, TMA stores
    ("hopper_bf16", (1024, 1024, 16384), {"BN": 128, "STAGES": 6, "CM": 2, "SPLITS": 2}),  # parallel split-K
    ("hopper_tf32", (2048, 2048, 2048), {"CN": 2}),
    ("hopper_tf32", (1024, 1024, 1024), {"BM": 64, "STAGES": 8}),
    ("hopper_tf32", (1024, 1024, 16384), {"SPLITS": 4}),
    ("hopper_bf16", (400, 170, 2770), {"BN": 64, "STAGES": 6, "CONSUMERS": 1}),  # A and B packed first, with PDL
    ("hopper_tf32", (300, 201, 999), {}),  # packed first
])
def test_pdl_launches_read_what_the_grid_before_wrote(hopper_session, name, shape, extra):
    """Back-to-back PDL launches on one stream, each reading the C the one before wrote, with
    two A's in turn (C = A0 B, then C = A B + C four times: 3 A0 B + 2 A1 B). A launch that
    touched C before the grid ahead of it had finished (no griddepcontrol.wait) would add a
    stale or partial C; a packing pass that overwrote the packed A while the GEMM before it
    still read it would mix A0 and A1."""
    torch = pytest.importorskip("torch")
    m, n, k = shape
    dtype = {"hopper_bf16": torch.bfloat16, "hopper_fp16": torch.float16, "hopper_tf32": torch.float32}[name]
    generator = torch.Generator(device="cuda").manual_seed(7)
    a = [torch.randn(m, k, device="cuda", generator=generator).to(dtype) for _ in range(2)]
    b = torch.randn(k, n, device="cuda", generator=generator).to(dtype)
    c = torch.full((m, n), float("nan"), device="cuda")
    first, then = (gemm_driver.plan(m, n, k, dtype=str(dtype).removeprefix("torch."), kernel=name, beta=beta,
                                    session=hopper_session, PDL=1, **extra) for beta in (0.0, 1.0))
    for _ in range(3):
        first(a[0], b, out=c)
        for i in range(1, 5):
            then(a[i % 2], b, out=c)
    torch.cuda.synchronize()
    want = (3 * a[0].double() + 2 * a[1].double()) @ b.double()
    error = ((c.double() - want).norm() / want.norm()).item()
    assert error < 1e-2, f"{name} {shape} {extra}: relative error {error:.2e}"
