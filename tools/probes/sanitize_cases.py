"""Odd shapes of one code path, each launched once and checked against the float64
reference (NaN-poisoned output, guard band), small enough to run under compute-sanitizer:

    compute-sanitizer --tool memcheck|racecheck|synccheck python3 tools/probes/sanitize_cases.py [PATH]

PATH names the cases: "pingpong" (hopper_bf16/fp16 with PINGPONG=1; more tiles than CTAs, so
both consumers of a CTA take turns; ragged edges, clusters, every layout, 16-bit D with the
fused epilogues, beta, C's own stores, K of one k tile, and K of 24 k tiles, where each
consumer's k loop wraps the ring while the other's epilogue runs: the turn barriers' case);
"row_clusters" (hopper_bf16/fp16 with CN=4: four CTAs of a tile row share A by multicast, one
and two consumers, 2 x 4 clusters, ragged N so that the last cluster has CTAs past the edge,
K-major and M-major A, packing, beta, 16-bit D with the fused epilogues, C's own stores);
"column_halves" (NSPLIT=2: 64-row tiles whose two consumers split the columns, 64 or 128 each,
in and out of a 2 x 1 cluster, every layout, ragged edges, beta, 16-bit D with the epilogues);
"fp8_decode" (hopper_fp8 with DECODE: wgmma's roles swapped at small M, every scaling mode,
each promotion, one and two consumers, split-K, a second row of tiles, packed rows, beta, BF16 D
with the epilogues); "fp8_formats" (hopper_fp8 on e5m2 operands, A's, B's or both: the main
tiles in each scaling mode, a cluster, split-K and packed rows, and the decode tiles, whose wgmma
takes the formats swapped, one of them in a cluster); "block_ring" (hopper_fp8 in block scaling with A's
scales loaded by TMA beside each stage, RING=1: ragged M past the last tile row, a 1 x 2 cluster, 64-row tiles
and the first promotion, the tail split, split-K on e5m2 A, beta, BF16 D with GELU); "block_ring_packed" (the
same on full grids of M % 4 != 0, whose A scales are copied for the ring, one with the codes packed too, one
with the tail split and beta); "decode_clusters" (the decode tiles of hopper_bf16/fp16/fp8 in clusters of
two tile rows sharing B by multicast, CM=2: one and two consumers, B stored either way, split-K,
the tail split, a second tile row past M, packed rows, beta, 16-bit D with the epilogues);
"decode_transposed" (the 64-row decode tiles of hopper_bf16/fp16 reading A stored K x M: one
and two consumers, split-K, B stored either way, M of 1 and 5 (packed rows) to 70 (a second
tile row), in a 2 x 1 cluster, beta, 16-bit D with the epilogues); "exchanged" (the decode tiles of
hopper_bf16/fp16 on the problem with M and N exchanged, SWAP_MN: every layout, N of 1 to 160, split-K,
a 2 x 2 cluster, the ping-pong tiles, packed rows, beta, 16-bit D with the epilogues).
Run it once without the sanitizer first so that the kernels are built and cached.
"""
import sys

from gemm_driver import Session, kernels
from gemm_driver.case import PreparedCase
from gemm_driver.problem import GemmProblem

PINGPONG = {"PINGPONG": 1}
DECODE = lambda rows, consumers, promote: {"DECODE": rows, "BN": 64 * consumers, "CONSUMERS": consumers,
                                           "PROMOTE": promote}
CASES = {
    "pingpong": [
        ("hopper_bf16", GemmProblem(1100, 1300, 300, 1.0, 0.5), {**PINGPONG, "BN": 64, "STAGES": 8}),
        ("hopper_fp16", GemmProblem(1500, 1250, 257, trans_b=True, out_dtype="fp16", epilogue="bias_gelu"),
         {**PINGPONG, "BN": 128, "STAGES": 6, "CM": 2}),
        ("hopper_bf16", GemmProblem(2100, 1000, 130, trans_a=True, trans_b=True, out_dtype="bf16",
                                    epilogue="bias_relu"), {**PINGPONG, "BN": 128, "STAGES": 6, "CN": 2}),
        ("hopper_bf16", GemmProblem(1031, 2077, 96, -1.0, 0.5, trans_a=True),
         {**PINGPONG, "BN": 128, "STAGES": 6, "STORE": 0}),
        ("hopper_fp16", GemmProblem(2000, 2000, 64), {**PINGPONG, "BN": 64, "STAGES": 8}),
        ("hopper_bf16", GemmProblem(2100, 1300, 1500, trans_b=True, out_dtype="bf16", epilogue="bias"),
         {**PINGPONG, "BN": 128, "STAGES": 6}),
    ],
    "row_clusters": [
        ("hopper_bf16", GemmProblem(100, 3001, 515), {"BN": 64, "STAGES": 8, "CN": 4}),
        ("hopper_fp16", GemmProblem(129, 2050, 300, trans_b=True, out_dtype="fp16", epilogue="bias_gelu"),
         {"CN": 4}),
        ("hopper_bf16", GemmProblem(96, 1000, 1100, trans_a=True, trans_b=True, out_dtype="bf16",
                                    epilogue="bias_relu"), {"BN": 128, "STAGES": 6, "CN": 4}),
        ("hopper_bf16", GemmProblem(200, 1500, 640, -1.0, 0.5),
         {"BN": 64, "CONSUMERS": 1, "STAGES": 6, "CM": 2, "CN": 4}),
        ("hopper_fp16", GemmProblem(64, 700, 2000, trans_b=True), {"BN": 128, "CONSUMERS": 1, "CN": 4, "STORE": 0}),
    ],
    "column_halves": [
        ("hopper_bf16", GemmProblem(100, 3001, 515, 1.0, 0.5), {"BN": 128, "STAGES": 8, "NSPLIT": 2}),
        ("hopper_fp16", GemmProblem(129, 2050, 300, trans_b=True, out_dtype="fp16", epilogue="bias_gelu"),
         {"NSPLIT": 2}),
        ("hopper_bf16", GemmProblem(200, 1000, 1100, trans_a=True, trans_b=True, out_dtype="bf16",
                                    epilogue="bias_relu"), {"BN": 128, "STAGES": 8, "NSPLIT": 2, "CM": 2}),
        ("hopper_bf16", GemmProblem(77, 1500, 640, -1.0, 0.5, trans_a=True), {"NSPLIT": 2, "CM": 2, "STORE": 0}),
        ("hopper_fp16", GemmProblem(64, 700, 2000), {"BN": 128, "STAGES": 8, "NSPLIT": 2}),
    ],
    "fp8_decode": [
        ("hopper_fp8", GemmProblem(1, 1000, 4100, trans_b=True, scaling="tensor"), {**DECODE(8, 1, 2), "SPLITS": 4}),
        ("hopper_fp8", GemmProblem(13, 777, 1000, 1.0, 0.5, trans_b=True, out_dtype="bf16", epilogue="bias_gelu",
                                   scaling="row"), DECODE(16, 1, 1)),
        ("hopper_fp8", GemmProblem(40, 1030, 999, trans_b=True, scaling="row"), DECODE(64, 2, 2)),
        ("hopper_fp8", GemmProblem(100, 640, 4096, trans_b=True, out_dtype="bf16", scaling="tensor"),
         {**DECODE(64, 2, 2), "SPLITS": 4}),
        ("hopper_fp8", GemmProblem(33, 520, 640, -1.0, 0.5, trans_b=True, epilogue="bias_relu", scaling="tensor"),
         DECODE(32, 1, 0)),
        ("hopper_fp8", GemmProblem(24, 1030, 3000, 1.0, 0.5, trans_b=True, out_dtype="bf16", epilogue="bias_gelu",
                                   scaling="block"), {**DECODE(32, 1, 2), "SPLITS": 2}),
        ("hopper_fp8", GemmProblem(100, 640, 999, trans_b=True, scaling="block"), DECODE(64, 2, 1)),
    ],
    "fp8_formats": [
        ("hopper_fp8", GemmProblem(333, 517, 999, 1.0, 0.5, trans_b=True, out_dtype="bf16", scaling="row",
                                   fp8_types="e5m2_e4m3"), {"PROMOTE": 2}),
        ("hopper_fp8", GemmProblem(129, 264, 4096, trans_b=True, scaling="tensor", fp8_types="e4m3_e5m2"),
         {"CM": 2, "SPLITS": 2}),
        ("hopper_fp8", GemmProblem(200, 512, 136, trans_b=True, out_dtype="bf16", epilogue="bias_gelu",
                                   scaling="block", fp8_types="e5m2"), {"PROMOTE": 1}),
        ("hopper_fp8", GemmProblem(13, 777, 1000, 1.0, 0.5, trans_b=True, scaling="block", fp8_types="e5m2_e4m3"),
         DECODE(16, 1, 2)),
        ("hopper_fp8", GemmProblem(40, 1030, 999, trans_b=True, out_dtype="bf16", scaling="tensor",
                                   fp8_types="e4m3_e5m2"), {**DECODE(32, 1, 2), "CM": 2}),
    ],
    "block_ring": [
        ("hopper_fp8", GemmProblem(260, 516, 1000, 1.0, 0.5, trans_b=True, out_dtype="bf16", scaling="block"),
         {"RING": 1, "PROMOTE": 2, "STAGES": 4}),
        ("hopper_fp8", GemmProblem(520, 260, 640, trans_b=True, out_dtype="bf16", epilogue="bias_gelu",
                                   scaling="block"), {"RING": 1, "PROMOTE": 2, "STAGES": 5, "CN": 2}),
        ("hopper_fp8", GemmProblem(100, 200, 1000, trans_b=True, scaling="block"),
         {"RING": 1, "PROMOTE": 1, "BN": 64, "CONSUMERS": 1, "STAGES": 6}),
        ("hopper_fp8", GemmProblem(1284, 2000, 4100, trans_b=True, scaling="block"),
         {"RING": 1, "PROMOTE": 2, "STAGES": 4, "TAIL": 4}),
        ("hopper_fp8", GemmProblem(256, 384, 4096, -1.0, 0.5, trans_b=True, scaling="block", fp8_types="e5m2_e4m3"),
         {"RING": 1, "PROMOTE": 2, "STAGES": 5, "SPLITS": 3}),
    ],
    "block_ring_packed": [
        ("hopper_fp8", GemmProblem(1283, 1537, 520, trans_b=True, out_dtype="bf16", epilogue="bias_gelu",
                                   scaling="block"), {"RING": 1, "PROMOTE": 2, "STAGES": 5}),
        ("hopper_fp8", GemmProblem(1291, 1290, 1024, 1.0, 0.5, trans_b=True, scaling="block"),
         {"RING": 1, "PROMOTE": 2, "STAGES": 5, "TAIL": 4}),
    ],
    "decode_clusters": [
        ("hopper_bf16", GemmProblem(40, 3001, 515, 1.0, 0.5), {"DECODE": 32, "BN": 64, "CONSUMERS": 1, "CM": 2}),
        ("hopper_fp16", GemmProblem(13, 2050, 300, trans_b=True, out_dtype="fp16", epilogue="bias_gelu"),
         {"DECODE": 8, "BN": 128, "CONSUMERS": 2, "CM": 2, "SPLITS": 2}),
        ("hopper_bf16", GemmProblem(30, 9000, 640, trans_b=True), {"DECODE": 16, "BN": 64, "CONSUMERS": 1, "CM": 2,
                                                                   "TAIL": 4}),
        ("hopper_fp8", GemmProblem(64, 1030, 999, -1.0, 0.5, trans_b=True, out_dtype="bf16", epilogue="bias_relu",
                                   scaling="row"), {**DECODE(32, 1, 2), "CM": 2}),
        ("hopper_fp8", GemmProblem(16, 700, 3000, trans_b=True, scaling="block"), {**DECODE(8, 1, 2), "CM": 2,
                                                                                   "SPLITS": 2}),
    ],
    "decode_transposed": [
        ("hopper_bf16", GemmProblem(17, 3001, 4099, trans_a=True, out_dtype="bf16"),
         {"DECODE": 64, "BN": 128, "CONSUMERS": 2, "SPLITS": 2, "PDL": 1}),
        ("hopper_fp16", GemmProblem(5, 2050, 4097, 1.0, 0.5, trans_a=True, trans_b=True, out_dtype="fp16",
                                    epilogue="bias_gelu"), {"DECODE": 64, "BN": 128, "CONSUMERS": 2, "PDL": 1}),
        ("hopper_bf16", GemmProblem(32, 1000, 777, trans_a=True, epilogue="bias_relu"),
         {"DECODE": 64, "BN": 64, "CONSUMERS": 1, "SPLITS": 3}),
        ("hopper_bf16", GemmProblem(1, 4100, 4096, -1.0, 0.5, trans_a=True, out_dtype="bf16", epilogue="bias"),
         {"DECODE": 64, "BN": 128, "CONSUMERS": 2, "SPLITS": 2, "PDL": 1}),
        ("hopper_fp16", GemmProblem(70, 1300, 2000, trans_a=True, trans_b=True),
         {"DECODE": 64, "BN": 128, "CONSUMERS": 2, "CM": 2}),
    ],
    "exchanged": [
        ("hopper_bf16", GemmProblem(3001, 16, 4099, trans_b=True, out_dtype="bf16", epilogue="bias_gelu"),
         {"DECODE": 16, "BN": 64, "CONSUMERS": 1, "SPLITS": 2, "SWAP_MN": 1, "PDL": 1}),
        ("hopper_bf16", GemmProblem(1000, 5, 777, 1.0, 0.5, epilogue="bias"),
         {"DECODE": 64, "BN": 128, "CONSUMERS": 2, "SPLITS": 3, "SWAP_MN": 1}),
        ("hopper_fp16", GemmProblem(2050, 40, 1000, trans_a=True, trans_b=True, out_dtype="fp16",
                                    epilogue="bias_relu"), {"DECODE": 64, "BN": 64, "CONSUMERS": 1, "SWAP_MN": 1}),
        ("hopper_bf16", GemmProblem(1300, 24, 2000, -1.0, 0.5, trans_a=True, out_dtype="bf16"),
         {"DECODE": 64, "BN": 64, "CONSUMERS": 1, "SWAP_MN": 1}),
        ("hopper_bf16", GemmProblem(2100, 33, 1000, trans_b=True, out_dtype="bf16", epilogue="bias"),
         {"DECODE": 32, "BN": 128, "CONSUMERS": 2, "CM": 2, "CN": 2, "SWAP_MN": 1}),
        ("hopper_bf16", GemmProblem(1500, 160, 300, trans_b=True, out_dtype="bf16", epilogue="bias_gelu"),
         {"DECODE": 160, "BN": 128, "CONSUMERS": 2, "PINGPONG": 1, "CN": 2, "SWAP_MN": 1}),
    ],
}


def main(args: list[str]) -> int:
    path = args[0] if args else "pingpong"
    failed = 0
    with Session() as s:
        for name, problem, tunables in CASES[path]:
            with PreparedCase.random(problem, kernels.KERNELS[name].precision, 5) as case:
                out, guard = case.run(case.launcher(s, name, tunables))
                verdict = case.check(out, guard)
                failed += not verdict.ok
                print(f"{name} {problem.label} {problem.layout} out={problem.out_dtype} epilogue={problem.epilogue} "
                      f"beta={problem.beta:g} {tunables}: {verdict.message}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
