"""Probe: what each of the MLP training run's GEMMs costs inside the step. tools/train_mlp.py
(CUDA-graph steps) runs once per variant, each in its own process, with gemm_driver's layers
routed per GEMM: every GEMM on cuBLASLt ("none"), every GEMM on hopper_bf16 ("all"), and one
GEMM on hopper_bf16 with the rest on cuBLASLt (its label, MxNxK:layout, t for an operand
passed as a transposed view), optionally with fixed tunables (LABEL@K=V,K=V, which replace the
rule's pick). A variant's cost in the step is its step time against the "none" one, each
taken from its ratio to the torch nn.Linear model timed in the same process (so that the drift
between processes cancels). Each variant runs in a process of its own: with two runs in one
process the second faulted in torch's AdamW step (an illegal address, found by a GPU core dump:
results/h100-80gb-hbm3/archive/train-mlp-second-capture-fault-*.txt), whatever kernels it ran.
The routes launch hopper_bf16 without PDL (gemm_driver.torch.routes.PDL); --pdl: with it where
the pick (or the variant's tunables) has it, in every variant. --eager: eager steps (the
default is CUDA-graph replays).

Run from the repository root:
    PYTHONPATH=. python3 tools/probes/mlp_gemm_split.py [--steps 300] [--rounds 3] [--pdl] [--eager] \\
        [VARIANT ...]
(default variants: none, all, and each GEMM of the step alone)
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[1]
FAST = "cublaslt_bf16"
OURS = "hopper_bf16"


def label(a, b) -> str:
    """The GEMM's name in the step: MxNxK and the layout (t: the operand is a transposed view)."""
    layout = "".join("t" if x.stride(0) == 1 and x.shape[1] > 1 else "n" for x in (a, b))
    return f"{a.shape[0]}x{b.shape[1]}x{a.shape[1]}:{layout}"


def parse_variant(variant: str) -> tuple[str, dict[str, int]]:
    """(the label, "all" or "none"; the tunables after @, as K=V pairs)."""
    name, _, fixed = variant.partition("@")
    tunables = {k: int(v) for k, v in (pair.split("=") for pair in fixed.split(",") if pair)}
    return name, tunables


def child(variant: str, steps: int, rounds: int, pdl: bool, eager: bool) -> dict:
    """One train_mlp.py run (graph steps, or eager with ``eager``) with the routing of ``variant``:
    ours/torch and the labels seen."""
    sys.path.insert(0, str(TOOLS))
    import train_mlp

    from gemm_driver.torch import routes

    name, tunables = parse_variant(variant)
    if pdl:
        routes.PDL = None  # as each pick says
    seen: set[str] = set()
    original, planned = routes.gemm_cuda, routes.api.plan

    def gemm_cuda(a, b, bias, activation, out_dtype, kernel):
        here = label(a, b)
        seen.add(here)
        return original(a, b, bias, activation, out_dtype, OURS if name in ("all", here) else FAST)

    def plan(m, n, k, **options):
        """The routes' api.plan, with the variant's tunables for its GEMM on OURS."""
        trans = "".join("t" if options.get(f"trans_{x}") else "n" for x in "ab")
        if options.get("kernel") == OURS and f"{m}x{n}x{k}:{trans}" == name and tunables:
            options.update(tunables, pdl=None)  # the fixed tunables, PDL as they say
        return planned(m, n, k, **options)

    routes.gemm_cuda, routes.api.plan = gemm_cuda, plan
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        train_mlp.main(["--graph"] * (not eager) + ["--steps", str(steps), "--rounds", str(rounds)])
    text = out.getvalue()
    return {"ratio": float(re.search(r"([0-9.]+)x\n", text).group(1)), "seen": sorted(seen),
            "title": text.splitlines()[0]}


def run(variant: str, args) -> dict:
    """``child`` in a process of its own (a run's graphs and routes do not outlive it)."""
    command = [sys.executable, __file__, "--child", variant, "--steps", str(args.steps), "--rounds",
               str(args.rounds)] + ["--pdl"] * args.pdl + ["--eager"] * args.eager
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["exit %d" % done.returncode])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pdl", action="store_true", help="hopper_bf16 launched with PDL where its pick has it")
    parser.add_argument("--eager", action="store_true", help="eager steps, not CUDA-graph replays")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("variants", nargs="*", help="none, all, LABEL or LABEL@K=V,K=V (default: none, all, each GEMM)")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.steps, args.rounds, args.pdl, args.eager)))
        return 0
    base = run("none", args)
    if "error" in base:
        print(f"none: {base['error']}")
        return 1
    print(base["title"] + (", hopper_bf16 with PDL where its pick has it" if args.pdl else "")
          + (" (eager steps)" if args.eager else ""))
    print(f"{'variant (on ' + OURS + ', the rest on ' + FAST + ')':<60} {'ours/torch':>10} {'step / none':>12}")
    print(f"{'none':<60} {base['ratio']:10.3f} {1:12.3f}")
    for variant in args.variants or ["all"] + base["seen"]:
        if variant == "none":
            continue
        result = run(variant, args)
        if "error" in result:
            print(f"{variant:<60} {result['error']}")
            continue
        print(f"{variant:<60} {result['ratio']:10.3f} {base['ratio'] / result['ratio']:12.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
