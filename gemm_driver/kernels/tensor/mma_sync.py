"""The mma_sync rung (cu/tensor/mma_sync.cu) in BF16, FP16 and TF32, and its autotuned variant.

Tiling: block BM x BN (WARPS_M x WARPS_N warps, each a (BM/WARPS_M) x (BN/WARPS_N) warp tile
of m16n8 mma tiles), k tiles of BK through a STAGES-deep cp.async ring, blocks in grouped
order (GROUP_M tile rows at a time). The rules below are the kernel's static_asserts (and
the register and shared-memory budgets) in words, so NVRTC never sees a configuration that
cannot work. ASYNC=1 copies with cp.async and packs operands it cannot read (packing.py);
ASYNC=0 loads element-wise through registers, any alignment, no copy.

TF32 takes FP32 A and B and rounds each element once, to nearest with ties away from zero
(cvt.rna.tf32.f32), in shared memory. A build that skips the rounding
(-DTC_TF32_SKIP_ROUNDING, tests only) hands raw FP32 bits to the tensor cores, which ignore
the low 13 mantissa bits: truncation, an input error of up to 2^-10 instead of 2^-11. The
tf32 bound (precision.py) charges 2^-10 per factor, so such a kernel still passes it; only
an exact check tells the two apart (tests/test_tensor_gpu.py: inputs whose TF32 rounding
and truncation differ, products exact in FP32).
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Mapping

from ...problem import EPILOGUES
from .. import tuned
from ..linear import OUTPUT_TUNABLES, LinearSpec
from ..spec import SGEMM_SIGNATURE, KernelSpec, Tunable, ceil_div
from ..transposing import taking_layouts
from .common import MIN_CC, STORAGE, fits_shared_memory, itemsize, per_chunk, threads
from .packing import pack_entry, packing_recipe

MMA_K = {"bf16": 16, "fp16": 16, "tf32": 8}  # k of one mma: m16n8k16, or m16n8k8 for TF32
MAX_WARP_TILE = 64 * 64  # 128 FP32 accumulators a lane; the next size up spills


def smem_bytes(precision: str):
    """STAGES * (BM * BK + BK * BN) * sizeof(T): unpadded, swizzled tiles."""
    size = itemsize(precision)
    return lambda t: t["STAGES"] * (t["BM"] * t["BK"] + t["BK"] * t["BN"]) * size


def _warp_tile(p, t):
    if t["BM"] % t["WARPS_M"] or t["BN"] % t["WARPS_N"] or (t["BM"] // t["WARPS_M"]) % 16 or (
            t["BN"] // t["WARPS_N"]) % 16:
        return (f"the warp tile BM/WARPS_M x BN/WARPS_N = {t['BM']}/{t['WARPS_M']} x {t['BN']}/{t['WARPS_N']} "
                f"must be whole multiples of 16 both ways")
    return None


def _fits_registers(precision: str):
    def rule(p, t):
        wtm, wtn = t["BM"] // t["WARPS_M"], t["BN"] // t["WARPS_N"]
        if wtm * wtn > MAX_WARP_TILE:
            return (f"warp tile {wtm}x{wtn} holds {wtm * wtn // 32} FP32 accumulators a lane; at most "
                    f"{MAX_WARP_TILE // 32} (64x64) fit without spilling")
        if precision == "tf32" and wtm * wtn == MAX_WARP_TILE and t["BK"] > 16:
            # Built for sm_80/sm_90: BK=32 spills 8 bytes at 256x128 (4x2 warps), 188 at 128x128.
            return (f"a TF32 64x64 warp tile with BK={t['BK']} spills (per k step 16 B fragment registers "
                    f"and addresses beside 128 accumulators); BK=16 there")
        return None
    return rule


def _k_steps_even(precision: str):
    k = MMA_K[precision]

    def rule(p, t):
        if t["BK"] % (2 * k):
            return (f"BK={t['BK']} is {t['BK'] / k:g} mma k-step(s) of {k}; the register double buffer needs an "
                    f"even number (BK a multiple of {2 * k})")
        return None
    return rule


def _b_rows_span_the_swizzle(precision: str):
    size = itemsize(precision)

    def rule(p, t):
        if t["BN"] * size < 128:
            return (f"B tile rows of BN*sizeof(T) = {t['BN'] * size} bytes; the swizzle spans 128 bytes "
                    f"(BN >= {128 // size})")
        return None
    return rule


def _copies_divide(precision: str):
    """TileLoader's static_asserts: each thread copies chunks at one swizzle phase."""
    pc = per_chunk(precision)
    b_period = 4 if itemsize(precision) == 4 else 8

    def rule(p, t):
        n, a_ch, b_ch = threads(t), t["BK"] // pc, t["BN"] // pc
        if n % a_ch or n % b_ch:
            return (f"the {n} threads must divide the {a_ch} chunks of an A tile row (BK) and the {b_ch} "
                    f"of a B tile row (BN)")
        a_rows, b_rows = n // a_ch, n // b_ch
        if t["BM"] % a_rows or t["BK"] % b_rows:
            return (f"one pass of the {n} threads copies {a_rows} rows of A and {b_rows} of B: they must "
                    f"divide BM={t['BM']} and BK={t['BK']}")
        if a_rows % 8 or b_rows % b_period:
            return (f"a thread's chunks must share one swizzle phase: rows per pass {a_rows} (A) a multiple "
                    f"of 8 and {b_rows} (B) of {b_period}")
        return None
    return rule


def tunables(precision: str, defaults: dict[str, int]) -> tuple[Tunable, ...]:
    d = defaults
    return (
        Tunable("BM", d["BM"], (64, 128, 256), "block tile rows"),
        Tunable("BN", d["BN"], (64, 128, 256), "block tile columns"),
        Tunable("BK", d["BK"], (16, 32, 64), f"k tile depth (an even number of {MMA_K[precision]}-deep mma steps)"),
        Tunable("WARPS_M", d["WARPS_M"], (1, 2, 4), "warps along M in a block"),
        Tunable("WARPS_N", d["WARPS_N"], (1, 2, 4), "warps along N in a block"),
        Tunable("STAGES", d["STAGES"], (2, 3, 4, 5), "cp.async pipeline depth"),
        Tunable("GROUP_M", d["GROUP_M"], (1, 4, 8, 16), "tile rows a group of consecutive blocks walks (L2 reuse)"),
        Tunable("ASYNC", d["ASYNC"], (0, 1),
                "1: cp.async copies, operands it cannot read packed first; 0: loads through registers, any alignment"),
        *OUTPUT_TUNABLES,
    )


# Best at 4096^3 on the H100 (cu/tensor/mma_sync.cu): BF16/FP16 128x256x32, 2x4 warps of
# 64x64, 4 stages (476-478 TFLOP/s); TF32 256x128x16, 4x2 warps, 4 stages (129).
DEFAULTS = {
    "bf16": {"BM": 128, "BN": 256, "BK": 32, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 4, "GROUP_M": 8, "ASYNC": 1},
    "tf32": {"BM": 256, "BN": 128, "BK": 16, "WARPS_M": 4, "WARPS_N": 2, "STAGES": 4, "GROUP_M": 8, "ASYNC": 1},
}
DEFAULTS["fp16"] = DEFAULTS["bf16"]
# D's types: FP32 or the inputs' 16-bit type (TF32's inputs are FP32), each with every epilogue
OUT_DTYPES = {"bf16": ("fp32", "bf16"), "fp16": ("fp32", "fp16"), "tf32": ("fp32",)}


def _config(bm, bn, bk, wm, wn, stages) -> dict[str, int]:
    return {"BM": bm, "BN": bn, "BK": bk, "WARPS_M": wm, "WARPS_N": wn, "STAGES": stages, "GROUP_M": 8, "ASYNC": 1}


# The sweep behind mma_sync_tuned_*: the measured winners per size (64x64x64 at 1024^3,
# 128x256x32 at 4096^3, 256x128x64 / 128x128x64 at 8192^3) and their neighbours.
_HALF_SPACE = tuple(_config(*c) for c in (
    (128, 256, 32, 2, 4, 4), (128, 256, 32, 2, 4, 3), (128, 256, 64, 2, 4, 3), (256, 128, 32, 4, 2, 4),
    (256, 128, 64, 4, 2, 3), (128, 128, 64, 2, 2, 3), (128, 128, 32, 2, 2, 4), (128, 64, 64, 2, 2, 3),
    (64, 128, 64, 2, 2, 3), (64, 64, 64, 2, 2, 3), (64, 64, 64, 2, 2, 4), (64, 64, 32, 2, 2, 4),
))
TUNE_SPACE = {
    "bf16": _HALF_SPACE,
    "fp16": _HALF_SPACE,
    "tf32": tuple(_config(*c) for c in (
        (256, 128, 16, 4, 2, 4), (256, 128, 16, 4, 2, 3), (128, 256, 16, 2, 4, 4), (128, 256, 16, 2, 4, 3),
        (128, 128, 16, 2, 2, 4), (128, 128, 16, 2, 2, 3), (128, 64, 32, 2, 2, 3), (64, 128, 32, 2, 2, 3),
        (64, 64, 32, 2, 2, 3), (64, 64, 32, 2, 2, 4),
    )),
}
# The tuned variant's own defaults: the small-shape end of its space (64x64 tiles, best at
# 1024^3), so `compile` and `inspect` of it show the other end from mma_sync's. It runs them
# only when asked for some tunables; with none it runs the table's pick, or without a table
# mma_sync's defaults (choose below).
TUNED_DEFAULTS = {"bf16": _config(64, 64, 64, 2, 2, 3), "fp16": _config(64, 64, 64, 2, 2, 3),
                  "tf32": _config(64, 64, 32, 2, 2, 3)}


def mma_sync(precision: str, *, name: str | None = None, description: str | None = None,
             defaults: dict[str, int] | None = None, **extra) -> KernelSpec:
    smem = smem_bytes(precision)
    storage = STORAGE[precision]
    # Every layout: operands stored transposed are copied transposed first (transposing.py).
    # D in FP32 or the inputs' 16-bit type, with every epilogue (OUT, EPI: set by the problem).
    return taking_layouts(LinearSpec(
        name=name or f"mma_sync_{precision}",
        description=description or ("mma.sync with ldmatrix, XOR-swizzled shared tiles, cp.async ring, "
                                    "grouped block order; unaligned operands packed first"),
        source="cu/tensor/mma_sync.cu",
        entry=(f"mma_sync_gemm<{storage}, {{BM}}, {{BN}}, {{BK}}, {{WARPS_M}}, {{WARPS_N}}, {{STAGES}}, "
               "{GROUP_M}, {ASYNC}, {OUT}, {EPI}>"),
        signature=(*SGEMM_SIGNATURE, "ptr"),  # + the bias (0 without an epilogue)
        out_dtypes=OUT_DTYPES[precision],
        epilogues=EPILOGUES,
        tunables=tunables(precision, defaults or DEFAULTS[precision]),
        rules=(_warp_tile, _fits_registers(precision), _k_steps_even(precision),
               _b_rows_span_the_swizzle(precision), _copies_divide(precision),
               fits_shared_memory(smem, "STAGES*(BM*BK+BK*BN)*sizeof(T)")),
        block=lambda t: (threads(t), 1, 1),
        grid=lambda p, t: (ceil_div(p.n, t["BN"]), ceil_div(p.m, t["BM"]), 1),
        dynamic_smem=smem,
        min_cc=MIN_CC,
        precision=precision,
        extra_entries=(pack_entry(storage),),
        launch_recipe=packing_recipe,
        **extra,
    ), itemsize(precision))


# The linear-layer build the tests compile beside the defaults: D in the 16-bit type, bias + GELU.
LINEAR_CHECKED = {"bf16": {"OUT": 1, "EPI": 3}, "fp16": {"OUT": 2, "EPI": 3}, "tf32": {"OUT": 0, "EPI": 3}}


def plain(precision: str) -> KernelSpec:
    # The register path at the default tiling is built too: it is the no-copy fallback.
    spec = mma_sync(precision, checked=({"ASYNC": 0}, LINEAR_CHECKED[precision]))
    if precision == "tf32":
        spec = replace(spec, description=spec.description + "; FP32 in, rounded to TF32 (nearest) once in shared memory")
    return spec


# A configuration as the vote names it: its tiling, whatever the table spelt (tools/autotune.py
# now names the tunables away from the tuned variant's defaults; older tables named all of them).
CONFIG_KEYS = tuple(_config(64, 64, 64, 2, 2, 3))


def named_config(precision: str, tunables: Mapping[str, int]) -> dict[str, int]:
    full = {**TUNED_DEFAULTS[precision], **tunables}
    return {k: full[k] for k in CONFIG_KEYS}


def offered_configs(spec: KernelSpec, problem) -> list[dict[str, int]]:
    """The configurations of TUNE_SPACE that ``spec`` can run ``problem`` with, as the vote names them."""
    return tuned.runnable(spec, problem, TUNE_SPACE[spec.precision], partial(named_config, spec.precision))


def _choose(spec: KernelSpec, fallback_name: str, fallback: dict[str, int]):
    """The vote of this GPU's table over the configurations that can run the shape (tuned.vote,
    as autotuned and hopper_bf16 choose), the nearest shape's winner where no neighbour measured
    any of them, ``fallback`` without a table."""
    offered = partial(offered_configs, spec)
    named = partial(named_config, spec.precision)

    def choose(problem, gpu_name):
        table = tuned.load_table(gpu_name, kernel=spec.name)
        if not table or not table.get("entries"):
            path = tuned.tuned_path(gpu_name, kernel=spec.name)
            return dict(fallback), f"no tuned table for this GPU ({path.name}); {fallback_name} defaults"
        return tuned.vote(table["entries"], problem, offered, named) or tuned.pick(table, problem)
    return choose


def autotuned(precision: str) -> KernelSpec:
    name = f"mma_sync_tuned_{precision}"
    spec = mma_sync(
        precision, name=name, defaults=TUNED_DEFAULTS[precision],
        description=f"mma_sync_{precision} with the configuration the nearest shapes of this GPU's tuning sweep "
                    f"predict fastest (gemm_driver/tuned/<gpu>.{name}.json)",
        checked=({},),  # its own defaults; mma_sync's are built under that name, the space by the tests
    )
    return replace(spec, choose=_choose(spec, f"mma_sync_{precision}", DEFAULTS[precision]))
