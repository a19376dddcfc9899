"""hopper_bf16 / hopper_fp16 as a linear layer on the GPU: layouts x output types x epilogues,
on odd shapes and aligned ones, against a float64 reference computed here.

Each case uploads the operands as stored (A as K x M when transposed, B as N x K) inside a
guard band, poisons D (NaN) when beta = 0, and checks every element against
|D - ref| <= 2 K 2^-24 (|alpha| |A||B| + |beta C| + |bias|) * 1.2 + half an ulp of the output
type * |ref| (+ the smallest normal, for values that round to subnormals): FP32 accumulation of
exact products, one rounding at the store, and GELU's slope (at most 1.13) on the accumulated
error. Guard elements must be unchanged. One build per (layout, output, epilogue) serves every
shape and store path of it (TMA stores, staged, pair stores, split-K are runtime choices);
the builds are compiled first in parallel processes.
"""

from __future__ import annotations

import math
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from gemm_driver import precision as prec
from gemm_driver.kernels.build import build
from gemm_driver.kernels.hopper import rungs
from gemm_driver.operands import DeviceMatrix
from gemm_driver.problem import GemmProblem, layout_flags

from helpers import build_processes

pytestmark = pytest.mark.gpu

SPECS = {s.name: s for s in rungs.SPECS}
HALF_ULP = {"fp32": 2.0**-24, "bf16": 2.0**-8, "fp16": 2.0**-11}
TINY = {"fp32": 2.0**-126, "bf16": 2.0**-126, "fp16": 2.0**-14}
BASE = {"BN": 128, "STAGES": 4}  # the tunables every case of a combination shares: one build

# (spec, layout, out, epilogue): every layout with each output type, with and without GELU;
# the other epilogues on x @ W^T
COMBOS = [("hopper_bf16", layout, out, epi) for layout in ("nn", "nt", "tn", "tt") for out in ("fp32", "bf16")
          for epi in ("none", "bias_gelu")]
COMBOS += [("hopper_bf16", "nt", "bf16", epi) for epi in ("bias", "bias_relu")]
COMBOS += [("hopper_fp16", "nt", "fp16", epi) for epi in ("none", "bias", "bias_relu", "bias_gelu")]
COMBOS += [("hopper_fp16", "tn", "fp32", "bias"), ("hopper_fp16", "tt", "fp16", "none")]

# (M, N, K, beta, extra tunables, ld padding, C misaligned by one element)
SHAPES = [
    (512, 768, 1024, 0.0, {}, 0, 0),  # aligned: TMA stores of C
    (333, 517, 999, 0.5, {}, 0, 0),  # odd: packed operands, staged stores, C read
    (200, 264, 4096, 0.0, {"SPLITS": 3}, 8, 0),  # split-K (3 slices), padded rows
    (130, 136, 200, 1.0, {}, 0, 1),  # C misaligned: no TMA store; the epilogue's scalar paths
]
# Other tile configurations (each its own build), on one combination each
CONFIGS = [
    ("hopper_bf16", "nt", "bf16", "bias_gelu", {"BN": 256, "STAGES": 4, "CM": 2}),
    ("hopper_bf16", "tt", "bf16", "bias", {"BN": 128, "STAGES": 6, "CN": 2}),
    ("hopper_bf16", "tt", "bf16", "none", {"BN": 64, "STAGES": 8, "CN": 4}),  # M-major A slices of 16 k rows
    ("hopper_bf16", "tn", "bf16", "bias_gelu", {"BN": 128, "STAGES": 8, "NSPLIT": 2}),  # column halves, M-major A
    ("hopper_fp16", "nt", "fp16", "bias", {"NSPLIT": 2, "STAGES": 4}),  # 128 columns a consumer, K-major B
    ("hopper_bf16", "tn", "bf16", "bias_relu", {"BN": 64, "STAGES": 8}),
    ("hopper_fp16", "nt", "fp16", "bias_gelu", {"BN": 128, "CONSUMERS": 1}),
    ("hopper_bf16", "nt", "bf16", "bias_gelu", {"BN": 192}),
    ("hopper_bf16", "tn", "fp32", "bias", {"BN": 192, "CM": 2}),
]

# The small-M decode tiles (hopper_decode), each its own build, on decode shapes: M = 1 split 2
# ways, M past the tile's rows, odd K (A packed), split-K with C read. A stored K x M (tn, tt)
# takes 64-row tiles (A's tile M-major, wgmma's B operand transposed); at M = 1 and 13 its rows
# are packed to 16-byte strides.
DECODE_CONFIGS = [
    ("hopper_bf16", "nt", "bf16", "bias_gelu", {"DECODE": 16, "BN": 64, "CONSUMERS": 1}),
    ("hopper_bf16", "nn", "fp32", "none", {"DECODE": 8, "BN": 128, "CONSUMERS": 2}),
    ("hopper_fp16", "nt", "fp16", "bias_relu", {"DECODE": 32, "BN": 64, "CONSUMERS": 1}),
    ("hopper_bf16", "nn", "bf16", "bias", {"DECODE": 64, "BN": 64, "CONSUMERS": 1}),
    ("hopper_bf16", "tn", "bf16", "none", {"DECODE": 64, "BN": 64, "CONSUMERS": 1}),
    ("hopper_fp16", "tt", "fp16", "bias_gelu", {"DECODE": 64, "BN": 128, "CONSUMERS": 2}),
    ("hopper_bf16", "tn", "fp32", "bias", {"DECODE": 64, "BN": 64, "CONSUMERS": 1, "PDL": 1}),
]
DECODE_SHAPES = [(1, 4096, 4096, 0.0, {"SPLITS": 2}), (40, 520, 1001, 0.5, {}), (13, 3000, 3000, 1.0, {"SPLITS": 3})]

# The decode tiles on the problem with M and N exchanged (SWAP_MN: D^T computed, stored into D's
# rows; the bias along the tiles' rows), every layout, each its own build: B stored K x N (nn, tn)
# is the exchanged problem's A stored transposed, in 64-row tiles. On small-N shapes: N of one
# tile row split 2 ways, N past the tile's rows, N = 1 with odd K (operands packed) split 3 ways
# with C read, C misaligned by one element (no pair stores); the ping-pong tiles (128 rows, whole
# tiles) on N of one and two tile rows.
EXCHANGED_CONFIGS = [
    ("hopper_bf16", "nt", "bf16", "bias_gelu", {"DECODE": 16, "BN": 64, "CONSUMERS": 1, "SWAP_MN": 1}),
    ("hopper_bf16", "nn", "fp32", "bias", {"DECODE": 64, "BN": 128, "CONSUMERS": 2, "SWAP_MN": 1}),
    ("hopper_fp16", "tt", "fp16", "bias_relu", {"DECODE": 32, "BN": 64, "CONSUMERS": 1, "SWAP_MN": 1}),
    ("hopper_bf16", "tn", "bf16", "none", {"DECODE": 64, "BN": 64, "CONSUMERS": 1, "SWAP_MN": 1, "PDL": 1}),
    ("hopper_bf16", "nt", "fp32", "bias", {"DECODE": 32, "BN": 128, "CONSUMERS": 2, "CM": 2, "CN": 2, "SWAP_MN": 1}),
]
EXCHANGED_SHAPES = [(4096, 16, 2048, 0.0, {"SPLITS": 2}, 0), (1000, 40, 520, 0.5, {}, 0),
                    (3000, 1, 3001, 1.0, {"SPLITS": 3}, 0), (777, 13, 1001, 0.0, {}, 1)]
EXCHANGED_PINGPONG = ("hopper_bf16", "nt", "bf16", "bias_gelu",
                      {"DECODE": 128, "BN": 128, "CONSUMERS": 2, "PINGPONG": 1, "CN": 2, "SWAP_MN": 1})


def problem_of(m, n, k, layout, out, epilogue, beta=0.0):
    trans_a, trans_b = layout_flags(layout)
    return GemmProblem(m, n, k, alpha=1.0, beta=beta, trans_a=trans_a, trans_b=trans_b, out_dtype=out,
                       epilogue=epilogue)


def _build_one(job):
    name, layout, out, epi, tunables = job
    spec = SPECS[name]
    resolved = spec.validate(problem_of(256, 256, 256, layout, out, epi), tunables)
    build(spec, "sm_90", resolved)
    return job


@pytest.fixture(scope="module", autouse=True)
def prebuilt():
    """Every build the module uses, compiled into the on-disk cache by parallel processes."""
    jobs = ([(*combo, BASE) for combo in COMBOS] + list(CONFIGS) + list(DECODE_CONFIGS) + list(EXCHANGED_CONFIGS)
            + [EXCHANGED_PINGPONG])
    with ProcessPoolExecutor(build_processes(len(jobs)), mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_build_one, jobs))


def reference(a, b, c, bias, p: GemmProblem):
    """float64 D of the problem from op(A), op(B) (M x K, K x N), C and bias (float32 values)."""
    v = p.alpha * (a.astype(np.float64) @ b.astype(np.float64))
    scale = abs(p.alpha) * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    if p.beta != 0:
        v += p.beta * c.astype(np.float64)
        scale += abs(p.beta) * np.abs(c)
    if p.has_bias:
        v += bias.astype(np.float64)[None, :]
        scale += np.abs(bias)[None, :]
    if p.epilogue == "bias_relu":
        v = np.maximum(v, 0.0)
    elif p.epilogue == "bias_gelu":
        v = 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3)))
    return v, scale


def _decode(values, out):
    return values if out == "fp32" else (prec.bf16_to_float32 if out == "bf16" else prec.fp16_to_float32)(values)


def _upload(values, precision, ld_pad, misalign=0):
    rows, cols = values.shape
    m = DeviceMatrix(rows, cols, ld=cols + ld_pad, guard=2, misalign=misalign,
                     itemsize=4 if precision == "fp32" else 2)
    m.fill(values if precision == "fp32" else prec.to_storage(values, precision))
    return m


def run_case(session, name, layout, out, epi, m, n, k, beta, tunables, pad, c_misalign, seed):
    spec = SPECS[name]
    p = problem_of(m, n, k, layout, out, epi, beta)
    rng = np.random.default_rng(seed)
    a = prec.representable(rng.uniform(-1, 1, (m, k)).astype(np.float32), spec.precision)
    b = prec.representable(rng.uniform(-1, 1, (k, n)).astype(np.float32), spec.precision)
    c = prec.representable(rng.uniform(-1, 1, (m, n)).astype(np.float32), out)
    bias = prec.representable(rng.uniform(-1, 1, (1, n)).astype(np.float32), out)
    da = _upload(a.T.copy() if p.trans_a else a, spec.precision, pad)
    db = _upload(b.T.copy() if p.trans_b else b, spec.precision, pad)
    dc = DeviceMatrix(m, n, ld=n + pad, guard=2, misalign=c_misalign, itemsize=4 if out == "fp32" else 2)
    dc.fill(None if beta == 0 else (c if out == "fp32" else prec.to_storage(c, out)))
    dbias = _upload(bias, out, 0) if p.has_bias else None
    try:
        launch = session.launcher(name, p, da, db, dc, tunables, bias=dbias)
        launch()
        session.synchronize()
        values, touched = dc.read()
        for operand in (da, db, *((dbias,) if dbias else ())):
            assert operand.read()[1] == 0, "an input's guard band changed"
    finally:
        for x in (da, db, dc, *((dbias,) if dbias else ())):
            x.close()
    d = _decode(values, out).astype(np.float64)
    ref, scale = reference(a, b, c, bias[0], p)
    bound = 2 * k * 2.0**-24 * scale * 1.2 + HALF_ULP[out] * np.abs(ref) + TINY[out]
    err = np.abs(d - ref)
    bad = ~(err <= bound)  # NaN (an unwritten element) fails too
    where = tuple(int(x[0]) for x in np.nonzero(bad)) if bad.any() else None
    assert touched == 0, f"{touched} guard elements of C changed"
    assert not bad.any(), (f"{bad.sum()} of {d.size} elements out of bound; first at {where}: got "
                           f"{d[where]}, want {ref[where]} (bound {bound[where]})")


@pytest.mark.parametrize("name, layout, out, epi", COMBOS)
@pytest.mark.parametrize("m, n, k, beta, tunables, pad, c_misalign", SHAPES)
def test_linear_layer_matches_the_float64_reference(session, name, layout, out, epi, m, n, k, beta, tunables, pad,
                                                    c_misalign):
    run_case(session, name, layout, out, epi, m, n, k, beta, {**BASE, **tunables}, pad, c_misalign, seed=m * n + k)


@pytest.mark.parametrize("name, layout, out, epi, tunables", CONFIGS)
@pytest.mark.parametrize("m, n, k, beta", [(1024, 1024, 512, 0.0), (777, 1000, 1001, 0.25)])
def test_other_tile_configurations(session, name, layout, out, epi, tunables, m, n, k, beta):
    run_case(session, name, layout, out, epi, m, n, k, beta, tunables, 0, 0, seed=k)


# The decode tiles in clusters of two tile rows sharing B and four tile columns sharing A (CM=2,
# CN=4: eight CTAs), at M of one and two tile rows, ragged N and K, beta
WIDE_CLUSTERS = [
    ("hopper_bf16", "nt", "bf16", "bias_gelu", {"DECODE": 64, "BN": 128, "CONSUMERS": 2, "CM": 2, "CN": 4}),
    ("hopper_fp16", "nn", "fp32", "none", {"DECODE": 32, "BN": 64, "CONSUMERS": 1, "CM": 2, "CN": 4}),
]


@pytest.mark.parametrize("name, layout, out, epi, tunables", WIDE_CLUSTERS)
@pytest.mark.parametrize("m, n, k, beta", [(128, 4100, 2048, 0.0), (100, 1000, 1001, 0.5), (40, 3000, 520, 0.0)])
def test_decode_tiles_in_clusters_of_four_tile_columns(session, name, layout, out, epi, tunables, m, n, k, beta):
    run_case(session, name, layout, out, epi, m, n, k, beta, tunables, 0, 0, seed=m + n)


@pytest.mark.parametrize("name, layout, out, epi, tunables", DECODE_CONFIGS)
@pytest.mark.parametrize("m, n, k, beta, extra", DECODE_SHAPES)
def test_decode_tiles(session, name, layout, out, epi, tunables, m, n, k, beta, extra):
    run_case(session, name, layout, out, epi, m, n, k, beta, {**tunables, **extra}, 0, 0, seed=m + k)


@pytest.mark.parametrize("name, layout, out, epi, tunables", EXCHANGED_CONFIGS)
@pytest.mark.parametrize("m, n, k, beta, extra, c_misalign", EXCHANGED_SHAPES)
def test_decode_tiles_on_the_exchanged_problem(session, name, layout, out, epi, tunables, m, n, k, beta, extra,
                                               c_misalign):
    run_case(session, name, layout, out, epi, m, n, k, beta, {**tunables, **extra}, 0, c_misalign, seed=n + k)


@pytest.mark.parametrize("m, n, k, beta", [(2000, 128, 1000, 0.5), (4096, 160, 512, 0.0)])
def test_ping_pong_decode_tiles_on_the_exchanged_problem(session, m, n, k, beta):
    name, layout, out, epi, tunables = EXCHANGED_PINGPONG
    run_case(session, name, layout, out, epi, m, n, k, beta, tunables, 0, 0, seed=m + n)
