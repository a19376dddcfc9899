"""Probe: hopper_bf16 on the GEMMs of a model's linear layers as they run, with their layout,
BF16 D (or FP32: --fp32) and epilogue: the pick, the vote's pick, every candidate the vote offers, the short-K
rule's swapped ping-pong tiles (160 and 128 rows), the decode tiles and split-K forms at
small M, and the configurations a run passes as JSON in GEMM_PROBE_CONFIGS, beside cuBLAS and
cuBLASLt with the same call (a baseline that refuses it, e.g. cuBLAS with a bias, is left
out). Each verified once against the float64 reference, then all timed alternately as
small_m.py times them (the median of 5 rounds), each batch about 3 ms long (``launches``).

The default calls are six of the MLP training run's GEMMs (tools/train_mlp.py, batch 4096,
512-2048-2048-16): three forward (nt, bias and GELU on the hidden layers, bias on the last), one
dX (nn) and two dW (tn); none is a shape of either corpus set (the probe refuses validation
shapes). --tn: TN_CALLS, weight gradients of other layers, A stored transposed and row-major. --check,
--check-nn: CHECK_CALLS, CHECK_NN_CALLS, the pick beside the vote's tiles with and without a 2 x 1
cluster. --check-wave: WAVE_CHECK_SHAPES, the pick beside the vote's own. --small-n: SMALL_N_CALLS, the
pick beside what choose() picks with the problem as it is (rungs.wide_choice) and the decode tiles on the
problem with M and N exchanged (SWAP_MN, ``exchanged_alternatives``); --check-small-n: the same on
SMALL_N_CHECK_CALLS. --mid-grid: MID_GRID_CALLS, the pick beside the forms that fill more SMs;
--check-mid-grid: MID_GRID_CHECK_CALLS, the pick beside its tiles whole; --check-short-k:
SHORT_K_CHECK_CALLS, the pick beside the swapped and the ping-pong tiles; --check-few-rounds:
FEW_ROUNDS_CHECK_CALLS, the pick beside the 128-row swapped tiles. --short-k-16bit, --check-short-k-16bit:
SHORT_K_16BIT_CALLS, SHORT_K_16BIT_CHECK_CALLS, the pick beside the swapped tiles and the vote's candidates. A call is
MxNxK[:layout[:epilogue]] (default nn, none). With any of them, --cold: every launch after an L2 flush;
--fp32: D in FP32 (the corpus runs' output), else BF16.

Run from the repository root:
    PYTHONPATH=. [GEMM_PROBE_CONFIGS='{"label": {...}}'] python3 tools/probes/linear_configs.py \
        [--tn | --check | --check-nn | --check-wave | --small-n | --check-small-n | --mid-grid
        | --check-mid-grid | --check-short-k | --check-few-rounds | --short-k-16bit | --check-short-k-16bit
        | CALL ...] [--cold] [--fp32]
"""

from __future__ import annotations

import json
import os
import sys

from small_m import LAUNCHES, offered, print_against, refuse_validation_shapes, verify_all

from gemm_driver import Session, kernels
from gemm_driver.bench.alternate import ROUNDS, WARMUP, alternate_ms
from gemm_driver.bench.timing import COLD_MAX_BATCH, GpuTimer
from gemm_driver.case import PreparedCase
from gemm_driver.cuda.errors import UnsupportedProblem
from gemm_driver.kernels import tuned
from gemm_driver.kernels.build import build_all
from gemm_driver.kernels.hopper import rungs, selection
from gemm_driver.problem import GemmProblem

# the six whose bench runs were furthest from the faster library (results/h100-80gb-hbm3/bench-mlp-gemms-*.txt:
# 0.68-0.93); the other two, 4096x2048x16 nn and 16x2048x4096 tn, ran at 0.97 and 0.93
MLP_CALLS = ["4096x2048x512:nt:bias_gelu", "4096x2048x2048:nt:bias_gelu", "4096x16x2048:nt:bias",
             "4096x2048x2048:nn", "2048x2048x4096:tn", "2048x512x4096:tn"]
# --tn: weight gradients dW = dY^T X of layers of neither corpus set (out x in x tokens, A stored
# transposed), BF16 D, each also with A row-major (nn): does the vote, fitted on timings with A
# row-major, pick as well for A stored transposed?
TN_SHAPES = ("2048x5632x2048", "5632x2048x2048", "3072x768x8192", "768x3072x8192", "1536x1536x8192",
             "2560x2560x4096", "1024x4096x8192", "4096x1024x8192")
TN_CALLS = [f"{shape}:{layout}" for shape in TN_SHAPES for layout in ("tn", "nn")]
# --check: transposed_unclustered (rungs.py) checked on shapes of neither set chosen after it was
# written from TN_CALLS, where the vote picks 128 x 256 tiles in a 2 x 1 cluster: the pick beside the
# vote's tiles with and without the cluster, A stored transposed (CHECK_CALLS); --check-nn: the same
# with A row-major on NN_CHECK_SHAPES (chosen to check the rule for every layout, which it failed)
CHECK_SHAPES = ("14336x4096x2048", "4096x14336x2048", "6144x2048x8192", "8192x1024x4096", "3584x3584x4096",
                "3072x3072x8192", "4608x1536x4096", "7168x1792x2048", "4096x4096x4096")
NN_CHECK_SHAPES = ("5120x3072x3072", "6656x2560x3584", "3840x3840x3840", "5376x1792x5120", "1792x5376x12288",
                   "8704x2176x3072", "2688x2688x10240", "4352x3072x7168")
CHECK_CALLS = [f"{shape}:tn" for shape in CHECK_SHAPES]
CHECK_NN_CALLS = [f"{shape}:nn" for shape in NN_CHECK_SHAPES]
# --check-wave: underfilled_grid (rungs.py) at 67-99 tiles of 128 x 256 and K >= 4096, checked on
# shapes of neither set chosen after it was written from TN_CALLS and the calls of
# probe-linear-configs-wave.txt, where the vote picks unsplit 128 x 256 tiles: the pick beside the
# vote's
WAVE_CHECK_SHAPES = ("1664x1536x8192", "2048x1280x6144", "1408x1792x12288", "3328x640x8192", "2560x896x4096",
                     "1280x2304x5120", "2176x1152x6144", "896x3584x8192")
# --small-n: few output columns (N <= 64) against many rows, x @ W^T with W of a few rows (a classifier
# head, an MoE router, a LoRA down projection; nn: W stored in x N), of neither corpus set
SMALL_N_CALLS = ["4096x16x2048:nt:bias", "8192x8x4096:nt", "16384x64x7168:nt", "2048x32x4096:nt",
                 "1024x8x8192:nt", "8192x16x14336:nt", "4096x64x4096:nt:bias", "16384x8x2048:nt",
                 "4096x16x4096:nn", "8192x32x4096:nn"]
# --check-small-n: small_n_choice (rungs.py) checked on shapes of neither set chosen after it was written
# from SMALL_N_CALLS, and 1024x8x8192 (a fitted shape whose 8-way split the fit did not run)
SMALL_N_CHECK_CALLS = ["3072x16x5120:nt:bias", "12288x32x2560:nt", "5120x8x7168:nt", "2048x64x8192:nt",
                       "24576x16x1536:nt", "6144x48x4096:nt", "1536x24x6144:nt", "10240x40x3584:nt:bias_gelu",
                       "4608x16x6144:nn", "6144x8x8192:tn", "8192x64x5120:tt", "1024x16x4096:nt", "1024x8x8192:nt"]
# --mid-grid: grids of 24-66 tiles of 128 x 128 (at most half the SMs) at K >= 2048, M > 128, of neither
# corpus set: what the vote picks there beside the tile and split forms that fill more SMs
# (``mid_grid_alternatives``)
MID_GRID_CALLS = ["2048x512x4096:tn", "1024x1024x4096:nn", "1536x640x8192:nn", "768x1280x6144:nt",
                  "1024x768x8192:nn", "896x896x4096:nn", "640x1536x3072:nn", "1280x512x12288:tn",
                  "512x2048x4096:nn", "1152x384x6144:nn", "2048x384x2048:nn", "384x2560x5120:nt"]
# --check-mid-grid: half_grid_split (rungs.py) checked on shapes of neither set chosen after it was written
# from MID_GRID_CALLS, where the vote picks whole 128 x 128 tiles: the pick beside those tiles whole and
# the 64 x 128 tiles of one consumer (``mid_grid_check_alternatives``)
MID_GRID_CHECK_CALLS = ["1920x512x5120:nn", "1536x384x5120:nt", "1152x896x4096:tn", "1280x640x8192:nn",
                        "3328x256x2048:nn", "1280x768x14336:nt", "2816x384x3072:nn", "1664x640x10240:tn",
                        "2304x256x10240:nn", "1152x768x6144:nt"]
# --check-short-k: short_k_choice's ping-pong tiles at K <= 512 (rungs.SHORT_K_PINGPONG_K) checked on shapes
# of neither set chosen after they were written from probe-short-k-pingpong.txt: the pick beside the
# swapped tiles it took before and the ping-pong tiles with and without a 2 x 1 cluster
SHORT_K_CHECK_CALLS = ["5120x6144x512:nn", "3584x4096x384:nt", "8192x3072x512:nt:bias_gelu", "4608x5120x256:nn",
                       "10240x4096x512:nn", "3072x8192x448:nt", "6656x6656x512:nn", "16384x2048x320:nn",
                       "2560x10240x512:nt:bias", "7168x7168x256:nt"]
# --check-few-rounds: short_k_choice's ping-pong tiles within the few rounds (K <= 512, fewer than 2.5 rounds of
# the 160-row swapped tiles) checked on shapes of neither set chosen after they were written from
# probe-short-k-few-rounds.txt: the pick beside the 128-row swapped tiles it took before
FEW_ROUNDS_CHECK_CALLS = ["2304x3072x512:nt:bias", "3072x3072x256:nn", "1792x4608x448:nt", "4608x1792x512:nt:bias_gelu",
                          "2048x3584x320:nn", "2816x2816x384:nt:bias", "5120x1024x512:nn", "1280x6144x512:nt"]
# --short-k-16bit: the swapped tiles of short_k_choice with BF16 D at K = 1024-2048 (the MLP run's 4096x2048x2048,
# short_k.py's SHAPES and RULE_SHAPES of that K), run hot and --cold; --check-short-k-16bit: the 128 x 256 tiles
# it takes past K = 1280 checked on shapes of neither set chosen after
SHORT_K_16BIT_CALLS = ["4096x2048x2048:nn", "4096x2048x2048:nt", "6144x8192x1024", "3072x16384x1536",
                       "12288x6144x2048", "2304x8192x2048", "2560x12288x1024", "16384x2048x1792", "1536x16384x2048",
                       "5120x5120x1280"]
SHORT_K_16BIT_CHECK_CALLS = ["3584x6144x1600:nn", "8192x2560x1536:nt", "2816x10240x2048:nt:bias", "6000x4000x1800:nn",
                             "10240x3072x1408:nt", "4608x4608x1920:nn", "2048x8192x1664:nt:bias_gelu"]
BASELINES = ("cublas_bf16", "cublaslt_bf16")
BATCH_US = 3000


def parse_call(call: str, out_dtype: str = "bf16") -> GemmProblem:
    """MxNxK[:layout[:epilogue]] as a problem with D in ``out_dtype``."""
    shape, *rest = call.split(":")
    layout, epilogue = (rest + ["nn", "none"][len(rest):])[:2]
    m, n, k = map(int, shape.split("x"))
    return GemmProblem(m, n, k, trans_a=layout[0] == "t", trans_b=layout[1] == "t", out_dtype=out_dtype,
                       epilogue=epilogue)


def wave_alternatives(p: GemmProblem, gpu_name: str) -> dict[str, dict]:
    """--check-wave's: the vote's own pick (selection.fitted, before the rules that adjust it), and
    the 128 x 128 tiles with PDL (the pick may run them without: rungs.without_pdl)."""
    return {"vote": selection.fitted(p, gpu_name)[0], "128x128 pdl": dict(selection.TILE_128x128)}


def check_alternatives(p: GemmProblem, gpu_name: str) -> dict[str, dict]:
    """--check's: the vote's pick (after the rules that adjust it) with a 2 x 1 cluster and
    without one."""
    voted = {name: value for name, value in rungs.voted_choice(p, gpu_name)[0].items() if name != "CM"}
    return {"clustered": {**voted, "CM": 2}, "unclustered": voted}


def exchanged_alternatives(p: GemmProblem, gpu_name: str) -> dict[str, dict]:
    """--small-n's: what choose() picks for the problem as it is (rungs.wide_choice), and the decode
    tiles on the problem with M and N exchanged ("x16x1/2": 16 rows, one consumer, 2-way split-K,
    all with PDL): the fewest rows >= N (64 where the exchanged problem's A is stored transposed),
    one or two consumers, split 1, 2 or 4 ways."""
    configs = {"as is": rungs.wide_choice(p, gpu_name)[0]}
    rows = 64 if not p.trans_b else min((r for r in rungs.DECODE_ROWS if r >= p.n), default=64)
    for consumers in (1, 2):
        for splits in (1, 2, 4):
            configs[f"x{rows}x{consumers}/{splits}"] = {"DECODE": rows, "BN": 64 * consumers, "CONSUMERS": consumers,
                                                        "SWAP_MN": 1, "PDL": 1, **({"SPLITS": splits} if splits > 1
                                                                                   else {})}
    configs.update(json.loads(os.environ.get("GEMM_PROBE_CONFIGS", "{}")))
    return configs


def mid_grid_alternatives(p: GemmProblem, gpu_name: str) -> dict[str, dict]:
    """--mid-grid's: 128 x 128 tiles whole, split 2 ways through memory, and split inside clusters of
    2 or 3 CTAs; 128 x 64 tiles whole and in clusters of 2; 64 x 128 tiles of one consumer (two CTAs
    an SM)."""
    t128, t64 = dict(selection.TILE_128x128), {"BN": 64, "STAGES": 8, "PDL": 1}
    return {"128x128": t128, "128x128/2": {"BN": 128, "STAGES": 6, "SPLITS": 2},
            "128x128 ck2": {**t128, "CK": 2}, "128x128 ck3": {**t128, "CK": 3}, "128x64": t64,
            "128x64 ck2": {**t64, "CK": 2}, "64x128": {"BN": 128, "CONSUMERS": 1, "PDL": 1},
            **json.loads(os.environ.get("GEMM_PROBE_CONFIGS", "{}"))}


def mid_grid_check_alternatives(p: GemmProblem, gpu_name: str) -> dict[str, dict]:
    """--check-mid-grid's: the pick without half_grid_split's clusters (the tiles whole), and 64 x 128
    tiles of one consumer."""
    whole = {name: value for name, value in rungs.voted_choice(p, gpu_name)[0].items() if name != "CK"}
    return {"whole": whole, "64x128": {"BN": 128, "CONSUMERS": 1, "PDL": 1}}


def short_k_check_alternatives(p: GemmProblem, gpu_name: str) -> dict[str, dict]:
    """--check-short-k's: the swapped 160-row tiles, and the ping-pong tiles with and without a 2 x 1 cluster."""
    return {"swapped": dict(rungs.SHORT_K_TILE), "pp": dict(selection.PINGPONG_TILE),
            "pp cm2": {**selection.PINGPONG_TILE, "CM": 2}}


def few_rounds_check_alternatives(p: GemmProblem, gpu_name: str) -> dict[str, dict]:
    """--check-few-rounds': the 128-row swapped tiles, and the ping-pong tiles in a 2 x 1 cluster."""
    return {"swapped 128": dict(rungs.SHORT_K_FEW_TILE), "pp cm2": {**selection.PINGPONG_TILE, "CM": 2}}


def alternatives(p: GemmProblem, gpu_name: str) -> dict[str, dict]:
    """The vote's pick, its candidates, the short-K tiles, split and decode forms at small M, and
    GEMM_PROBE_CONFIGS."""
    configs = {"vote": rungs.voted_choice(p, gpu_name)[0]}
    configs.update({tuned.label(t): t for t in selection.candidates(p)})
    if not p.trans_a:  # the swapped tiles read A's tile K-major only
        configs.update({"short-k 160": dict(rungs.SHORT_K_TILE), "short-k 128": dict(rungs.SHORT_K_FEW_TILE)})
    if min(p.m, p.n) <= selection.SMALL_M:
        configs.update({f"64x64 ck{ck}": {**selection.TILE_64x64, "CK": ck} for ck in (2, 3, 4)})
    if p.m <= selection.SMALL_M:
        configs.update({f"d64x{c}/{s}": {"DECODE": 64, "BN": 64 * c, "CONSUMERS": c, "PDL": 1,
                                         **({"SPLITS": s} if s > 1 else {})} for c in (1, 2) for s in (1, 2, 4)})
    configs.update(json.loads(os.environ.get("GEMM_PROBE_CONFIGS", "{}")))
    return configs


def distinct(spec, p: GemmProblem, call: str, chosen: dict, configs: dict[str, dict]) -> dict[str, dict]:
    """The configurations ``spec`` accepts for ``p`` (small_m.offered), each run once: a label
    whose resolved tunables an earlier one has is dropped."""
    seen, kept = set(), {}
    for name, t in offered(spec, p, call, chosen, configs).items():
        key = tuple(sorted(spec.validate(p, t).items()))
        if key not in seen:
            seen.add(key)
            kept[name] = t
    return kept


def labelled(name: str, t: dict) -> str:
    """A configuration's label and its tunables (once where the label is the tunables)."""
    return name if name == tuned.label(t) else f"{name} {tuned.label(t)}"


def launches(p: GemmProblem) -> int:
    """A batch of about BATCH_US at 500 TFLOP/s, between 10 and small_m's LAUNCHES: a large
    GEMM's five rounds take seconds, not minutes."""
    return max(10, min(LAUNCHES, int(BATCH_US * 5e8 / p.flops)))


def presets() -> dict[str, tuple[list[str], object]]:
    """Flag -> (its calls, what each is timed beside); no flag: the MLP's calls and ``alternatives``."""
    return {"--tn": (TN_CALLS, alternatives), "--check": (CHECK_CALLS, check_alternatives),
            "--check-nn": (CHECK_NN_CALLS, check_alternatives),
            "--check-wave": (list(WAVE_CHECK_SHAPES), wave_alternatives),
            "--small-n": (SMALL_N_CALLS, exchanged_alternatives),
            "--check-small-n": (SMALL_N_CHECK_CALLS, exchanged_alternatives),
            "--mid-grid": (MID_GRID_CALLS, mid_grid_alternatives),
            "--check-mid-grid": (MID_GRID_CHECK_CALLS, mid_grid_check_alternatives),
            "--check-short-k": (SHORT_K_CHECK_CALLS, short_k_check_alternatives),
            "--check-few-rounds": (FEW_ROUNDS_CHECK_CALLS, few_rounds_check_alternatives),
            "--short-k-16bit": (SHORT_K_16BIT_CALLS, alternatives),
            "--check-short-k-16bit": (SHORT_K_16BIT_CHECK_CALLS, alternatives)}


class ColdTimer:
    """A GpuTimer whose batches are cold (GpuTimer.cold_batch_ms: L2 flushed before every launch,
    outside its events), for --cold: the operands come from memory, as in a model's step where
    another kernel ran in between."""

    def __init__(self, timer: GpuTimer):
        self.timer = timer

    def batch_ms(self, launch, launches: int) -> float:
        return self.timer.cold_batch_ms(launch, min(launches, COLD_MAX_BATCH))


def main(args: list[str]) -> None:
    named, offer = next((preset for flag, preset in presets().items() if flag in args), (MLP_CALLS, alternatives))
    calls = [a for a in args if not a.startswith("--")] or named
    refuse_validation_shapes([c.split(":")[0] for c in calls], "linear_configs.py")
    spec = kernels.KERNELS["hopper_bf16"]
    with Session() as s:
        cold, out_dtype = "--cold" in args, "fp32" if "--fp32" in args else "bf16"
        timer = GpuTimer(s.stream, s.arch, l2_bytes=s.device.l2_bytes)
        timer = ColdTimer(timer) if cold else timer
        print(f"{s.device.name}; {out_dtype.upper()} D; us per GEMM, TFLOP/s (median of {ROUNDS} rounds, each a batch "
              f"of about {BATCH_US} us, at most {LAUNCHES} launches"
              + (f"; cold: L2 flushed before each launch, at most {COLD_MAX_BATCH} a batch)" if cold else ")"),
              flush=True)
        plans = {}
        for call in calls:
            p = parse_call(call, out_dtype)
            chosen, why = spec.choose(p, s.device.name)
            plans[call] = p, chosen, why, distinct(spec, p, call, chosen, offer(p, s.device.name))
        # every build at once, in threads, before the first call
        build_all([(spec, spec.validate(p, t)) for p, _, _, configs in plans.values() for t in configs.values()],
                  s.arch)
        for call, (p, chosen, why, configs) in plans.items():
            with PreparedCase.random(p, "bf16", 11) as case:
                runs = {labelled(name, t): case.launcher(s, "hopper_bf16", t) for name, t in configs.items()}
                names = []
                for name in BASELINES:
                    try:
                        runs[name] = case.launcher(s, name)
                        names.append(name)
                    except UnsupportedProblem as exc:
                        print(f"  {call} {name}: refused ({exc})")
                verify_all(case, runs)
                us = {name: ms * 1000 for name, ms in alternate_ms(timer, runs, launches(p), ROUNDS, WARMUP).items()}
            print(f"{call}: chosen {tuned.label(chosen)} ({why})", flush=True)
            print_against(p, us, min(us[b] for b in names), 44)


if __name__ == "__main__":
    main(sys.argv[1:])
